"""Kernel calls whose arguments are bound once.

On every call, Taichi's own call path checks each argument in Python, looks the compiled kernel up and fills a
launch context: about 100 us per call on these machines (measured: three bound calls 57 us, the same three plain
calls 300 us), more than a small system's whole rollout. A simulator calls the same kernels on the same arrays at
every optimizer iteration, so ``Launches`` does that work once per (kernel, arrays) and afterwards only fills the
scalar arguments (a time step, a segment start) and launches.

This reaches into Taichi 1.7.4's internals (the version tisim pins). If binding fails, or on a GPU with numpy
arguments (whose copies Taichi's call path arranges), the call falls back to the plain Taichi call.
"""
import collections

import numpy as np
import taichi as ti
from taichi.lang import impl
from taichi.lang._ndarray import Ndarray

from tisim import runtime

CACHE_SIZE = 2048  # bound calls kept per simulator (a checkpointed pass binds a few per segment)


class _Bound:
    """One kernel with its arrays and template values fixed; scalars are set at each call."""

    def __init__(self, kernel, arguments):
        t_kernel = kernel.compiled_kernels[kernel.ensure_compiled(*arguments)]
        program = impl.get_runtime().prog
        self.data = program.compile_kernel(program.config(), program.get_device_caps(), t_kernel)
        self.program, self.t_kernel = program, t_kernel
        self.fixed, self.scalars, self.keep = [], [], []
        slot = 0
        for position, (value, argument) in enumerate(zip(arguments, kernel.arguments)):
            if isinstance(argument.annotation, ti.template):
                continue
            index = (slot,)
            slot += 1
            if isinstance(value, Ndarray):
                if value.grad is not None:
                    self.fixed.append(("set_arg_ndarray_with_grad", index, (value.arr, value.grad.arr)))
                else:
                    self.fixed.append(("set_arg_ndarray", index, (value.arr,)))
                self.keep.append(value)
            elif isinstance(value, np.ndarray):
                self.fixed.append(("set_arg_external_array_with_shape", index,
                                   (int(value.ctypes.data), value.nbytes, value.shape, 0)))
                self.keep.append(value)
            elif isinstance(value, (float, np.floating)):
                self.scalars.append((position, "set_arg_float", index, float))
            else:
                self.scalars.append((position, "set_arg_int", index, int))

    def __call__(self, arguments):
        context = self.t_kernel.make_launch_context()  # a context is spent by its launch: measured, reuse crashes
        for name, index, values in self.fixed:
            getattr(context, name)(index, *values)
        for position, name, index, cast in self.scalars:
            getattr(context, name)(index, cast(arguments[position]))
        self.program.launch_kernel(self.data, context)


class Launches:
    """``launches(kernel, *args)`` runs kernel(*args); ``launches(kernel, *args, grad=True)`` its reverse-mode
    gradient. Kernels are @ti.kernel functions or kernels of a data-oriented instance."""

    def __init__(self):
        self._bound = collections.OrderedDict()
        self._cpu = runtime.settings()["arch"] == "cpu"

    def __call__(self, function, *args, grad=False):
        owner = getattr(function, "_kernel_owner", None)
        kernel = (function._adjoint if owner is not None else function.grad) if grad else function._primal
        arguments = args if owner is None else (owner,) + args
        key = (id(kernel), id(owner), tuple(
            id(value) if isinstance(value, (Ndarray, np.ndarray)) else
            (value if isinstance(argument.annotation, ti.template) else type(value))
            for value, argument in zip(arguments, kernel.arguments)))
        bound = self._bound.get(key)
        if bound is None:
            bound = self._bind(key, kernel, arguments)
            if bound is None:
                return (function.grad if grad else function)(*args)
        bound(arguments)

    def _bind(self, key, kernel, arguments):
        if not self._cpu and any(isinstance(value, np.ndarray) for value in arguments):
            return None
        if any(isinstance(value, np.ndarray) and not value.flags.c_contiguous for value in arguments):
            return None
        try:
            bound = _Bound(kernel, arguments)
        except Exception:  # an internal Taichi change: the plain call still works
            return None
        self._bound[key] = bound
        if len(self._bound) > CACHE_SIZE:
            self._bound.popitem(last=False)
        return bound
