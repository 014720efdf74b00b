"""Kernel calls whose arguments are bound once.

On every call, Taichi's own call path checks each argument in Python, looks the compiled kernel up and fills a
launch context: of the order of 100 us per call on a CPU, five times what a bound call costs and more than a small
system's whole rollout. A simulator calls the same kernels on the same arrays at
every optimizer iteration, so ``Launches`` does that work once per (kernel, arrays) and afterwards only fills the
scalar arguments (a time step, a segment start) and launches.

On a CPU the launch context itself is kept from call to call (a few microseconds a launch). Taichi's CPU launcher
rewrites an ndarray argument in the context into a raw pointer at the first launch, but leaves the context's record of
it as a device allocation, so a second launch of the same context wrote through a wrong pointer ("corrupted size vs.
prev_size"). Arrays are therefore given to a kept context as raw host pointers, the form the launcher leaves alone.
On a GPU a fresh context is filled for each launch.

This reaches into Taichi 1.7.4's internals (the version tisim pins). If binding fails, or on a GPU with numpy
arguments (whose copies Taichi's call path arranges), the call falls back to the plain Taichi call. BINDING = False
here before a simulator is made turns binding off for it: every call of that simulator takes Taichi's own path, the
referee the soak test (tests/soak_launch.py, `make stress`) compares against.
"""
import collections

import numpy as np
import taichi as ti
from taichi.lang import impl
from taichi.lang._ndarray import Ndarray
from taichi.lang.enums import AutodiffMode

from tisim.core import runtime

CACHE_SIZE = 2048  # bound calls kept per simulator (a checkpointed pass binds a few per segment)
BINDING = True  # read when a simulator's Launches is made


SCALARS = frozenset({int, float, np.int32, np.int64, np.float32, np.float64})  # runtime values, set at each call
_PLAIN = object()  # a call that could not be bound: Taichi's own call path


@runtime.empty_on_restart
class _BoundCall:
    """One kernel with its arrays and template values fixed; scalars are set at each call."""

    def __init__(self, kernel, arguments, cpu):
        t_kernel = kernel.compiled_kernels[kernel.ensure_compiled(*arguments)]
        program = impl.get_runtime().prog
        self.data = program.compile_kernel(program.config(), program.get_device_caps(), t_kernel)
        self.program, self.t_kernel = program, t_kernel
        self.name = kernel.func.__name__ + (".grad" if kernel.autodiff_mode != AutodiffMode.NONE else "")
        builder = type(t_kernel.make_launch_context())
        self.fixed, self.scalars, self.keep = [], [], []
        slot = 0
        for position, (value, argument) in enumerate(zip(arguments, kernel.arguments)):
            if isinstance(argument.annotation, ti.template):
                continue
            index = (slot,)
            slot += 1
            if isinstance(value, Ndarray) and cpu:
                pointer = lambda array: program.get_ndarray_data_ptr_as_int(array.arr)  # noqa: E731
                grad = pointer(value.grad) if value.grad is not None else 0
                self.fixed.append((builder.set_arg_external_array_with_shape, index,
                                   (pointer(value), value.arr.nelement() * value.arr.element_size(),
                                    list(value.shape), grad)))
                self.keep.append(value)
            elif isinstance(value, Ndarray):
                if value.grad is not None:
                    self.fixed.append((builder.set_arg_ndarray_with_grad, index, (value.arr, value.grad.arr)))
                else:
                    self.fixed.append((builder.set_arg_ndarray, index, (value.arr,)))
                self.keep.append(value)
            elif isinstance(value, np.ndarray):
                self.fixed.append((builder.set_arg_external_array_with_shape, index,
                                   (int(value.ctypes.data), value.nbytes, value.shape, 0)))
                self.keep.append(value)
            elif isinstance(value, (float, np.floating)):
                self.scalars.append((position, builder.set_arg_float, index, float))
            else:
                self.scalars.append((position, builder.set_arg_int, index, int))
        self.context = self._filled() if cpu else None

    def _filled(self):
        context = self.t_kernel.make_launch_context()
        for method, index, values in self.fixed:
            method(context, index, *values)
        return context

    def __call__(self, arguments):
        context = self.context or self._filled()  # on a GPU a context is spent by its launch
        for position, method, index, cast in self.scalars:
            method(context, index, cast(arguments[position]))
        self.program.launch_kernel(self.data, context)


class Launches:
    """``launches(kernel, *args)`` runs kernel(*args); ``launches(kernel, *args, grad=True)`` its reverse-mode
    gradient. Kernels are @ti.kernel functions or kernels of a data-oriented instance.

    A binding is found by the kernel and the identity of every argument but the scalars, so arrays must be the
    same objects from call to call (the engine's are) for a call to be bound."""

    def __init__(self):
        self._bound = collections.OrderedDict()
        self._cpu = runtime.settings()["arch"] == "cpu"
        self.binding = BINDING
        runtime.hold_launches(self)

    def clear(self):
        """Forget every binding (before a runtime restart)."""
        self._bound.clear()

    def __call__(self, function, *args, grad=False):
        owner = getattr(function, "_kernel_owner", None)
        kernel = (function._adjoint if owner is not None else function.grad) if grad else function._primal
        arguments = args if owner is None else (owner,) + args
        key = (id(kernel),) + tuple([type(value) if type(value) in SCALARS else id(value) for value in arguments])
        bound = self._bound.get(key)
        if bound is None:
            bound = self._bind(key, kernel, arguments)
        if bound is _PLAIN:
            return (function.grad if grad else function)(*args)
        bound(arguments)

    def _bind(self, key, kernel, arguments):
        bound = _PLAIN
        arrays = [value for value in arguments if isinstance(value, np.ndarray)]
        templates = [value for value, argument in zip(arguments, kernel.arguments)
                     if isinstance(argument.annotation, ti.template)]
        # numpy arrays on a GPU need the copies Taichi's call path arranges; a number as a template is not in the key
        if self.binding and (self._cpu or not arrays) and all(a.flags.c_contiguous for a in arrays) and \
                not any(type(value) in SCALARS for value in templates):
            try:
                bound = _BoundCall(kernel, arguments, self._cpu)
            except Exception:  # an internal Taichi change: the plain call still works
                bound = _PLAIN
        self._bound[key] = bound
        if len(self._bound) > CACHE_SIZE:
            self._bound.popitem(last=False)
        return bound
