"""The model: a system's structure and the kernels compiled for it.

A system's class declares its structure (the quantities of theta, x and a, structural sizes, options, phases,
scratch, topology tables) and its physics (the step, its phases, the ODE's rates) as @ti.func methods. The MODEL is
that physics instantiated for one structure: sizes and options, the packed layouts, the phase list, the scratch
layout, the topology as Taichi fields, and the kernels Taichi compiles for them. A model is made once per (class,
structure, topology) and shared by every simulator of that structure, so kernels compile once per structure, not
once per simulator, and simulators come and go freely (tisim/core/runtime.py keeps the models).

The simulator (``System``, tisim/core/engine.py) is a model with a horizon, a batch and arrays, and the public calls; it
reaches its model as ``sim.model``. The gradient mechanisms run the model's kernels on the simulator's arrays
(tisim/core/protocol.py).
"""
import hashlib
import math

import numpy as np
import taichi as ti

from tisim.core import runtime
from tisim.core.access import Accessors
from tisim.core.losses import quadratic
from tisim.core.memory import INDEX_LIMIT
from tisim.core.phases import REVERSE, ScratchLayout, fused_step, phase_list
from tisim.core.quantities import Layout, near_miss, sizes_of
from tisim.core.trajectory import clear_row, nonfinite_row, prepare_grads

UNROLLED_STATE = 16  # states up to this many entries are cleared and checked row by row in unrolled code


class Model(Accessors):
    """What a system declares and the kernels built on it (see the module docstring).

    A system subclasses ``tisim.System`` (which is a Model) and declares, as class attributes:
      1. PARAMS, STATE, ACTION: tuples of ``Quantity`` rows for theta, x and a. ACTION has exactly one row (a scalar or
         a vector); STATE and PARAMS any number.
      2. DT: the default time step [s]; STRUCTURE: the integer constructor keywords that fix sizes and appear in
         shapes, each a ``Size(name, default, minimum)`` or a plain name (default 1, at least 1);
         OPTIONS: {keyword: (allowed strings, first = default)} for choices of law, e.g.
         {"contact": ("penalty", "impact")}, read in kernels with ti.static.
    and implements:
      3. ``step(self, x, theta, u, dt, b, t)``, a ``@ti.func`` that reads x[b, t, :], theta[b, :] and u[b, t, :] and
         ACCUMULATES the next state into x[b, t+1, :] (the engine zeroes it first; a plain store would erase the
         adjoint that the backward pass leaves in x.grad), by name through the accessors of tisim/core/access.py or at
         the offsets self.X, self.P and self.U (``theta[b, self.P.m_cart]``). The step reads nothing from ``self``
         but structure: it runs on the model. A dynamic loop inside the step (over particles or contacts) must read
         everything it uses inside its own body: Taichi 1.7's reverse mode silently mis-differentiates a local set
         before such a loop and read in it. Branches in such a loop crashed reverse mode in MassSpring (written
         branch-free) yet check out in Rigid2D's contact loop: verify every such loop with gradcheck.

    A step that is one independent update per item (a particle reading its neighbours at step t and writing only
    its own next state) may instead set ITEMS to the STRUCTURE size that counts the items and implement
      3'. ``step_item(self, x, theta, u, dt, b, t, i)``, the update of item i; ``step`` is then its loop. On a GPU
         the engine runs each step as one launch parallel over batch and items (a fused loop at a small batch would
         run on a handful of GPU threads); on a CPU the fused loop is faster (a thread-pool dispatch per step costs
         more than a step).

    A step made of loops over different domains (springs, then particles; an MPM grid) declares PHASES and SCRATCH
    instead (tisim/core/phases.py, docs/adding_a_system.md): each phase a @ti.func over one item of its domain, with
    per-step scratch between phases that the engine zeroes (or that items assign), and keeps per step or recomputes
    in the backward pass.

    A system whose structure goes beyond sizes (which particles each spring joins) implements
      4. ``topology(self)``: {name: value} read by the step as self.<name>. An integer or float numpy array becomes
         a Taichi field of its shape (i32, or the runtime's float type); anything else (a flag, a constant, a
         network's shape) is kept as it is and must be hashable. The tables are part of the model's key: simulators
         with equal tables share one model and its compiled kernels.

    Systems defined by an ODE x' = F(x, a; theta) may also implement
      5. ``rates(self, x, theta, u, b, t, f)``, a ``@ti.func`` that ACCUMULATES F at the state x[b, :] (a (B, S)
         array), with the action u[b, t, :], into f[b, :]: the continuous adjoint (method="continuous_adjoint")
         integrates its transposed Jacobian backward in time (tisim/autodiff/continuous_adjoint.py).
    """

    PARAMS = ()
    STATE = ()
    ACTION = ()
    DT = 0.01
    STRUCTURE = ()
    OPTIONS = {}
    ITEMS = None
    PHASES = ()
    FUSED = {}
    REVERSES = {}
    SCRATCH = ()

    def topology(self):
        """{name: table or constant} of structure beyond sizes and options (see the class docstring)."""
        return {}

    def events(self, traj):
        """{name: bool array (B, T+1)}: when each non-smooth switch of the system (a contact, a stick) is on, read
        from a rollout; systems with switches override this (``tisim.diagnostics`` reports them)."""
        return {}

    def _describe(self, sizes, options):
        self.sizes, self.options = dict(sizes), dict(options)
        for key, value in {**sizes, **options}.items():
            setattr(self, key, value)
        self.param_layout = Layout(self.PARAMS, sizes, "parameter")
        self.state_layout = Layout(self.STATE, sizes, "state")
        self.action_layout = Layout(self.ACTION, sizes, "action")
        self.P, self.X, self.U = self.param_layout.index, self.state_layout.index, self.action_layout.index
        self.action_name = self.ACTION[0].name
        # state rows up to this long are cleared and checked by unrolled code in the one-launch forward pass
        self._unrolled = self.state_layout.size if self.state_layout.size <= UNROLLED_STATE else 0
        self.action_shape = self.action_layout.shapes[self.action_name]
        self.scratch_layout = ScratchLayout(self.SCRATCH, sizes)
        self.phases = phase_list(self)
        self.fused_phases = phase_list(self, fused=True) if self.phases else []
        # every phase with a hand-written reverse: on a CPU the backward pass is one launch (phases.run_reverses)
        self.fused_reverse = bool(self.phases) and all(phase.kind == REVERSE for phase in self.phases)
        # the last phase's FUSED form sets the whole next state (System.set_next): the fused pass leaves it unzeroed
        self.sets_next = bool(self.phases) and self.PHASES[-1][0] in self.FUSED

    # ---- kernels (run on the shared model, on a simulator's arrays) ----------------------------------------------
    @ti.kernel
    def _rollout(self, x: ti.types.ndarray(ndim=3), theta: ti.types.ndarray(ndim=2), u: ti.types.ndarray(ndim=3),
                 dt: float, t0: ti.i32, t1: ti.i32, serial: ti.template()):
        ti.loop_config(serialize=serial)
        for b in range(x.shape[0]):
            for t in range(t0, t1):
                self.step(x, theta, u, dt, b, t)

    @ti.kernel
    def _step_items(self, x: ti.types.ndarray(ndim=3), theta: ti.types.ndarray(ndim=2), u: ti.types.ndarray(ndim=3),
                    dt: float, t: ti.i32):
        for b, i in ti.ndrange(x.shape[0], ti.static(self.sizes[self.ITEMS])):
            self.step_item(x, theta, u, dt, b, t, i)

    @ti.func
    def step(self, x: ti.template(), theta: ti.template(), u: ti.template(), dt, b, t):
        # the fused schedule of an item-wise system (systems without ITEMS define their own step)
        for i in range(ti.static(self.sizes[self.ITEMS])):
            self.step_item(x, theta, u, dt, b, t, i)

    @ti.kernel
    def _evaluate(self, x: ti.types.ndarray(ndim=3), x0: ti.types.ndarray(ndim=2), theta: ti.types.ndarray(ndim=2),
                  u: ti.types.ndarray(ndim=3), scratch: ti.types.ndarray(ndim=2),
                  scratch_grad: ti.types.ndarray(ndim=2), dt: float, loss: ti.types.ndarray(ndim=1),
                  time: ti.types.ndarray(ndim=1), offset: ti.types.ndarray(ndim=1), w: ti.types.ndarray(ndim=2),
                  target: ti.types.ndarray(ndim=2), linear: ti.types.ndarray(ndim=1), w_effort: float,
                  status: ti.types.ndarray(ndim=2), x_grad: ti.types.ndarray(ndim=3),
                  theta_grad: ti.types.ndarray(ndim=2), u_grad: ti.types.ndarray(ndim=3),
                  loss_grad: ti.types.ndarray(ndim=1), serial: ti.template(), grads: ti.template()):
        # A whole forward pass in one launch (begin, _rollout, the built-in loss terms, finish): on a small system
        # each launch costs more than its work. Each state row is cleared just before its step and checked just
        # after it, while it is in cache, unrolled over a small state (a loop of 4 costs more than its body).
        # Never differentiated: the backward pass is _rollout's gradient, which reads the same x.
        ti.loop_config(serialize=serial)
        for b in range(x.shape[0]):
            prepare_grads(x_grad, theta_grad, u_grad, loss, loss_grad, b, grads)
            if ti.static(grads and not self.fused_reverse):  # else each step's reverse zeroes its own
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
                    self.step(x, theta, u, dt, b, t)
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
                self.step(x, theta, u, dt, b, t)

    @ti.kernel
    def _rates(self, x: ti.types.ndarray(ndim=2), theta: ti.types.ndarray(ndim=2), u: ti.types.ndarray(ndim=3),
               t: ti.i32, f: ti.types.ndarray(ndim=2), serial: ti.template()):
        # f = dx/dt at the states x (B, S), with the action of step t: the ODE behind the step, for systems that
        # define ``rates`` (the continuous adjoint differentiates this kernel alone)
        ti.loop_config(serialize=serial)
        for b in range(x.shape[0]):
            self.rates(x, theta, u, b, t, f)

    def __repr__(self):
        return f"<model of {type(self).__mro__[1].__name__} {self.sizes}>"


def structure(cls, values):
    """(sizes, options) of a system class from its constructor keywords, validated; removes them from `values`."""
    name = cls.__name__
    declared = sizes_of(cls)
    sizes = {key: values.pop(key) for key in declared if key in values}
    for key, size in declared.items():
        sizes.setdefault(key, size.default)
        check_count(name, key, sizes[key], size.minimum)
    options = {key: values.pop(key, allowed[0]) for key, allowed in cls.OPTIONS.items()}
    for key, choice in options.items():
        if choice not in cls.OPTIONS[key]:
            raise ValueError(f"{name}: {key} must be one of {list(cls.OPTIONS[key])}, got {choice!r}."
                             + near_miss(str(choice), cls.OPTIONS[key]))
    if len(cls.ACTION) != 1:
        raise TypeError(f"{name}: ACTION must declare exactly one quantity, got {len(cls.ACTION)}")
    if cls.PHASES and cls.ITEMS:
        raise TypeError(f"{name}: a step has one form: declare PHASES or ITEMS, not both")
    return sizes, options


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


def _build(cls, sizes, options, tables):
    # Only the model is Taichi-data-oriented: ti.data_oriented routes every attribute access through a Python
    # wrapper, which a user-facing simulator would pay on each of the hundreds of accesses per iteration.
    kernels = ti.data_oriented(type(cls.__name__ + "Model", (cls,), {}))
    model = object.__new__(kernels)
    model._describe(sizes, options)
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
