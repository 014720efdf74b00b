"""The model: a system's structure and the kernels compiled for it.

A system's class declares its structure (the quantities of theta, x and a, structural sizes, options, phases,
scratch, topology tables) and its physics (the step, its phases, the ODE's rates) as @ti.func methods. The MODEL is
that physics instantiated for one structure: sizes and options, the packed layouts, the phase list, the scratch
layout, the topology as Taichi fields, and the kernels Taichi compiles for them. A model is made once per (class,
structure, topology) and shared by every simulator of that structure, so kernels compile once per structure, not
once per simulator, and simulators come and go freely (tisim/core/runtime.py keeps the models).

The simulator (``System``, tisim/core/engine.py) has a model: it holds a horizon, a batch, the arrays and the public
calls, and reaches its model as ``sim.model``. The model's class is made from ``Model`` (the engine's kernels) and
what the system class adds (its declarations, its @ti.func physics and their helpers: ``physics_of``), so the step
runs on the model as ``self``. The gradient mechanisms run the model's kernels on the simulator's arrays
(tisim/core/protocol.py).
"""
import hashlib
import inspect
import math

import numpy as np
import taichi as ti

from tisim.core import runtime
from tisim.core.access import Rates, Step
from tisim.core.losses import quadratic
from tisim.core.memory import INDEX_LIMIT
from tisim.core.phases import REVERSE, ScratchLayout, fused_step, phase_list
from tisim.core.quantities import Layout, near_miss, sizes_of
from tisim.core.trajectory import clear_row, nonfinite_row, prepare_grads

UNROLLED_STATE = 16  # states up to this many entries are cleared and checked row by row in unrolled code


# What a system class declares, with the engine's defaults (tisim.System holds them and documents each)
DECLARATIONS = ("PARAMS", "STATE", "ACTION", "DT", "STRUCTURE", "OPTIONS", "PHASES", "FUSED", "REVERSES", "SCRATCH")


def describe(host, sizes, options):
    """Set on a simulator or a model what its class's declarations give for one structure: sizes and options as
    attributes, the packed layouts and their offsets (P, X, U), the scratch layout and the phase list."""
    host.sizes, host.options = dict(sizes), dict(options)
    for key, value in {**sizes, **options}.items():
        setattr(host, key, value)
    host.param_layout = Layout(host.PARAMS, sizes, "parameter")
    host.state_layout = Layout(host.STATE, sizes, "state")
    host.action_layout = Layout(host.ACTION, sizes, "action")
    host.P, host.X, host.U = host.param_layout.index, host.state_layout.index, host.action_layout.index
    host.action_name = host.ACTION[0].name
    # state rows up to this long are cleared and checked by unrolled code in the one-launch forward pass
    host._unrolled = host.state_layout.size if host.state_layout.size <= UNROLLED_STATE else 0
    host.action_shape = host.action_layout.shapes[host.action_name]
    host.scratch_layout = ScratchLayout(host.SCRATCH, sizes)
    host.phases = phase_list(host)
    host.fused_phases = phase_list(host, fused=True) if host.phases else []
    # every phase with a hand-written reverse: on a CPU the backward pass is one launch (phases.run_reverses)
    host.fused_reverse = bool(host.phases) and all(phase.kind == REVERSE for phase in host.phases)
    # the last phase's FUSED form sets the whole next state (s.set_next): the fused pass leaves it unzeroed
    host.sets_next = bool(host.phases) and host.PHASES[-1][0] in host.FUSED


class Model:
    """The kernels of one system class and structure, and the structure they read (see the module docstring).

    model_of makes it: its class is this one with the system class's declarations and functions added
    (physics_of), made data-oriented, so the kernels call the system's step, phases and rates on ``self``."""

    def __init__(self, sizes, options):
        describe(self, sizes, options)

    # ---- kernels (run on the shared model, on a simulator's arrays) ----------------------------------------------
    @ti.kernel
    def _rollout(self, x: ti.types.ndarray(ndim=3), theta: ti.types.ndarray(ndim=2), u: ti.types.ndarray(ndim=3),
                 dt: float, t0: ti.i32, t1: ti.i32, serial: ti.template()):
        ti.loop_config(serialize=serial)
        for b in range(x.shape[0]):
            for t in range(t0, t1):
                self.step(ti.static(Step(self, x, theta, u, None, dt, b, t)))

    @ti.kernel
    def _evaluate(self, x: ti.types.ndarray(ndim=3), x0: ti.types.ndarray(ndim=2), theta: ti.types.ndarray(ndim=2),
                  u: ti.types.ndarray(ndim=3), scratch: ti.types.ndarray(ndim=2),
                  scratch_grad: ti.types.ndarray(ndim=2), dt: float, loss: ti.types.ndarray(ndim=1),
                  time: ti.types.ndarray(ndim=1), offset: ti.types.ndarray(ndim=1), w: ti.types.ndarray(ndim=2),
                  target: ti.types.ndarray(ndim=2), linear: ti.types.ndarray(ndim=1), w_effort: float,
                  status: ti.types.ndarray(ndim=2), x_grad: ti.types.ndarray(ndim=3),
                  theta_grad: ti.types.ndarray(ndim=2), u_grad: ti.types.ndarray(ndim=3),
                  loss_grad: ti.types.ndarray(ndim=1), serial: ti.template(), grads: ti.i32):
        # A whole forward pass in one launch (begin, _rollout, the built-in loss terms, finish): on a small system
        # each launch costs more than its work. Each state row is cleared just before its step and checked just
        # after it, while it is in cache, unrolled over a small state (a loop of 4 costs more than its body).
        # Never differentiated: the backward pass is _rollout's gradient, which reads the same x.
        ti.loop_config(serialize=serial)
        for b in range(x.shape[0]):
            prepare_grads(x_grad, theta_grad, u_grad, loss, loss_grad, b, grads)
            if ti.static(not self.fused_reverse):  # else each step's reverse zeroes its own
                if grads:
                    for k in range(scratch.shape[1]):
                        scratch_grad[b, k] = 0.0
            first = x.shape[1]
            for k in range(x.shape[2]):
                x[b, 0, k] = x0[b, k]
            if nonfinite_row(x, b, 0, self._unrolled):
                first = 0
            for t in range(x.shape[1] - 1):
                if ti.static(not self.sets_next):
                    clear_row(x, b, t + 1, self._unrolled, 0.0)
                elif ti.static(runtime.settings()["debug"]):  # an entry left unset ends the rollout here
                    clear_row(x, b, t + 1, self._unrolled, ti.math.nan)
                if ti.static(self.phases):
                    fused_step(self, x, theta, u, scratch, dt, b, t)
                else:
                    self.step(ti.static(Step(self, x, theta, u, None, dt, b, t)))
                if nonfinite_row(x, b, t + 1, self._unrolled) and t + 1 < first:
                    first = t + 1
            quadratic(x, u, loss, b, time, offset, w, target, linear, w_effort)
            status[b, 0] = loss[b]
            status[b, 1] = first

    @ti.kernel
    def _rollout_fields(self, x: ti.template(), theta: ti.template(), u: ti.template(), dt: float, n: ti.i32,
                        serial: ti.template()):
        # the same steps on Taichi fields: forward-mode autodiff needs dual numbers, which ndarrays lack
        ti.loop_config(serialize=serial)
        for b in range(x.shape[0]):
            for t in range(n):
                self.step(ti.static(Step(self, x, theta, u, None, dt, b, t)))

    @ti.kernel
    def _rates(self, x: ti.types.ndarray(ndim=2), theta: ti.types.ndarray(ndim=2), u: ti.types.ndarray(ndim=3),
               t: ti.i32, f: ti.types.ndarray(ndim=2), serial: ti.template()):
        # f = dx/dt at the states x (B, S), with the action of step t: the ODE behind the step, for systems that
        # define ``rates`` (the continuous adjoint differentiates this kernel alone)
        ti.loop_config(serialize=serial)
        for b in range(x.shape[0]):
            self.rates(ti.static(Rates(self, x, theta, u, f, b, t)))

    def __repr__(self):
        return f"<model of {self.SYSTEM.__name__} {self.sizes}>"


def structure(cls, values):
    """(sizes, options) of a system class from its constructor keywords, validated; removes them from `values`."""
    name = cls.__name__
    declared = sizes_of(cls)
    sizes = {key: values.pop(key) for key in declared if key in values}
    for key, size in declared.items():
        sizes.setdefault(key, size.default)
        check_count(name, key, sizes[key], size.minimum)
    derive = getattr(cls, "derived_sizes", None)  # sizes that follow from the others (a closed loop's network)
    if derive is not None:
        sizes.update(derive(sizes))
    options = {key: values.pop(key, allowed[0]) for key, allowed in cls.OPTIONS.items()}
    for key, choice in options.items():
        if choice not in cls.OPTIONS[key]:
            raise ValueError(f"{name}: {key} must be one of {list(cls.OPTIONS[key])}, got {choice!r}."
                             + near_miss(str(choice), cls.OPTIONS[key]))
    if len(cls.ACTION) != 1:
        raise TypeError(f"{name}: ACTION must declare exactly one quantity, got {len(cls.ACTION)}")
    check_signatures(cls)
    return sizes, options


def check_signatures(cls):
    """Refuse, before anything compiles, a step or rates written with positional arrays: they take the step context
    s (tisim/core/access.py), step(self, s) and rates(self, s)."""
    for method in ("step", "rates"):
        function = getattr(cls, method, None)
        if method == "step" and function is None and not cls.PHASES:
            raise TypeError(f"{cls.__name__}: declare a step, step(self, s), or PHASES (docs/adding_a_system.md)")
        if function is None or (method == "step" and cls.PHASES):
            continue
        parameters = list(inspect.signature(function).parameters)
        if parameters != ["self", "s"]:
            raise TypeError(f"{cls.__name__}.{method}{tuple(parameters)}: a {method} takes the step context, "
                            f"{method}(self, s), and reads through it: s.state(name, i), s.param(name), "
                            f"s.action(name), s.advance(name, i, value), s.dt, s.b, s.t (docs/adding_a_system.md)")


def model_of(system, sizes, options):
    """The shared model of a system instance's class, structure and topology: made on first use per runtime."""
    cls, tables = type(system), system.topology()
    key = (cls, tuple(sorted(sizes.items())), tuple(sorted(options.items())), _tables_key(cls, tables))
    return runtime.host(key, lambda: _build(cls, sizes, options, tables))


def _tables_key(cls, tables):
    key = []
    for name in sorted(tables):
        value = tables[name]
        if isinstance(value, np.ndarray):
            array = np.ascontiguousarray(value)
            key.append((name, array.dtype.str, array.shape, hashlib.sha1(array.tobytes()).hexdigest()))
        else:
            try:
                hash(value)
            except TypeError:
                raise TypeError(f"{cls.__name__}.topology: {name!r} must be a numpy array or hashable, got "
                                f"{type(value).__name__}") from None
            key.append((name, value))
    return tuple(key)


def physics_of(cls):
    """{name: value} of what a system class adds to the engine: its declarations (with the engine's defaults), its
    @ti.func physics and the helpers they call, from every class of its MRO outside tisim.core (mixins too), the
    most derived last; and SYSTEM, the class itself."""
    namespace = {name: getattr(cls, name) for name in DECLARATIONS}
    for klass in reversed(cls.__mro__):
        if klass is not object and not klass.__module__.startswith("tisim.core."):
            namespace.update({key: value for key, value in vars(klass).items() if not key.startswith("__")})
    namespace["SYSTEM"] = cls
    return namespace


def _build(cls, sizes, options, tables):
    # Only the model is Taichi-data-oriented: ti.data_oriented routes every attribute access through a Python
    # wrapper, which a user-facing simulator would pay on each of the hundreds of accesses per iteration.
    kernels = ti.data_oriented(type(cls.__name__ + "Model", (Model,), physics_of(cls)))
    model = kernels(sizes, options)
    arrays = {}
    for name, value in tables.items():
        if isinstance(value, np.ndarray):
            integer = np.issubdtype(value.dtype, np.integer) or value.dtype == bool
            if not (integer or np.issubdtype(value.dtype, np.floating)) or value.ndim == 0 or value.size == 0:
                raise TypeError(f"{cls.__name__}.topology: {name!r} must be a non-empty integer or float array, "
                                f"got {value.dtype} of shape {value.shape}")
            arrays[name] = value.astype(np.int32 if integer else runtime.numpy_real())
        else:
            setattr(model, name, value)
    if arrays:  # one field tree for all of them: Taichi allows 512 trees per process
        builder = ti.FieldsBuilder()
        for name, array in arrays.items():
            field = ti.field(ti.i32 if array.dtype == np.int32 else runtime.real())
            builder.dense(ti.axes(*range(array.ndim)), array.shape).place(field)
            setattr(model, name, field)
        model.topology_tree = builder.finalize()
        for name, array in arrays.items():
            getattr(model, name).from_numpy(array)
    return model


def check_count(owner, name, value, minimum=1, maximum=None):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum or \
            (maximum is not None and value > maximum):
        bound = "" if maximum is None else f" and <= {maximum:,}"
        raise ValueError(f"{owner}: {name} must be an integer >= {minimum}{bound}, got {value!r}")


def check_run(owner, horizon, batch, dt=None):
    """The horizon, batch and time step every simulator takes, checked before a constructor does anything else: the
    steps and the batch elements are counted by 32-bit integers in the kernels."""
    check_count(owner, "horizon", horizon, maximum=INDEX_LIMIT - 1)
    check_count(owner, "batch", batch, maximum=INDEX_LIMIT)
    if dt is not None:
        check_dt(owner, dt)


def check_derived(owner, values, derived):
    """Refuse keywords that name sizes a system computes itself; derived: {keyword: where its value comes from}."""
    for key, source in derived.items():
        if key in values:
            raise ValueError(f"{owner}: {key} is not a keyword: {source}")


def check_dt(owner, dt):
    if isinstance(dt, bool) or not isinstance(dt, (int, float, np.floating)) or not (0 < dt < math.inf):
        raise ValueError(f"{owner}: dt must be a finite number > 0 [s], got {dt!r}")
