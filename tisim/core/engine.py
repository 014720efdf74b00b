"""The rollout engine: per-step arrays with a batch axis and a time axis, the forward sweep and the backward pass.

A simulator step is x[t+1] = f(x[t], a[t]; theta). The engine holds, for one simulator,

    x      states      (B, T+1, S)   x[b, t] is the state after t steps; x[b, 0] the initial state
    theta  parameters  (B, P)        one parameter vector per batch element
    u      actions     (B, T, A)     u[b, t] acts during step t (the a[t] of the equations)

and runs the model's kernels (tisim/core/model.py: the system's ``step`` for t = 0..T-1 inside ONE kernel, parallel over
the batch axis) on them. Reverse mode through
that kernel is the discrete adjoint method: after one backward pass x.grad[b, t] is lambda_t = dL/dx_t, theta.grad is
dL/dtheta and u.grad is dL/da.
"""
import collections
import warnings
import weakref

import numpy as np
import taichi as ti

from tisim.core import runtime
from tisim.core.derivatives import Gradient, NonFiniteError, nonfinite_rollout
from tisim.core.launch import Launches
from tisim.core.losses import _Bound
from tisim.core.memory import CONSTRUCTION, TRAJECTORY, check_memory, plan_memory
from tisim.core.model import check_run, describe, model_of, structure
from tisim.core.phases import Scratchpad
from tisim.core.quantities import near_miss, sizes_of
from tisim.core.trajectory import begin, copy, copy2, copy3, copy_step, download, finish, host_view, is_small

METHODS = ("unrolled", "checkpointed", "forward_mode", "continuous_adjoint")
# earlier names of two methods, accepted with a DeprecationWarning: "forward" and "adjoint" each meant other things too
RENAMED_METHODS = {"forward": "forward_mode", "adjoint": "continuous_adjoint"}
MODES = ("auto", "reverse", "forward")
GROUPS = ("params", "initial_state", "actions")
STALE_ALL = ("theta", "x0", "u")
HOST_BUFFER_ENTRIES = 1 << 16  # largest action gradient read back through a persistent, bound host buffer
_jitter = None  # while tisim.diagnostics.last_bits is active: moves every input a simulator is given, once validated
# The mechanisms beyond plain unrolling live in tisim/autodiff/ and register here when tisim is imported, so the engine
# never imports a layer above it. They use a simulator through tisim/core/protocol.py, which also keeps their buffers.
# "checkpointed", "forward_mode", "continuous_adjoint": (sim, loss, segments); "jacobian": (sim, wrt, mode)
_MECHANISMS = {}


def mechanism(name):
    """Register the function decorated as the engine's ``name`` mechanism (see _MECHANISMS)."""
    def register(function):
        _MECHANISMS[name] = function
        return function
    return register


class System:
    """Base class of every simulator: a horizon T, a batch B, a time step, the arrays of one rollout and the public
    calls (set_params / params, set_initial_state / initial_state, set_actions / actions, rollout, evaluate,
    gradient, jacobian), with a compiled model (``sim.model``, tisim/core/model.py) whose kernels run the steps.

    A system subclasses it, overrides nothing here, and declares, as class attributes:
      1. PARAMS, STATE, ACTION: tuples of ``Quantity`` rows for theta, x and a. ACTION has exactly one row (a scalar or
         a vector); STATE and PARAMS any number.
      2. DT: the default time step [s]; STRUCTURE: the integer constructor keywords that fix sizes and appear in
         shapes, each a ``Size(name, default, minimum)`` or a plain name (default 1, at least 1);
         OPTIONS: {keyword: (allowed strings, first = default)} for choices of law, e.g.
         {"contact": ("penalty", "impact")}, read in kernels with ti.static.
    and implements:
      3. ``step(self, s)``, a ``@ti.func`` that reads the state at step t, the parameters and the action through
         the step context s (``s.state("theta")``, ``s.param("m_cart")``, ``s.action("force")``: a
         ``tisim.core.access.Step``, which holds the arrays, the time step s.dt, the batch entry s.b and the step s.t)
         and ACCUMULATES the next state with ``s.advance(name, i, value)``: the engine zeroes x[t+1] first, and a
         plain store would erase the adjoint that the backward pass leaves in x.grad. The step reads nothing from
         ``self`` but structure: it runs on the model, which holds the class's declarations and functions and the
         sizes, options and topology tables, not the simulator's other attributes. A dynamic loop inside the step
         (over particles or contacts) must read everything it uses inside its own body: Taichi 1.7's reverse mode
         silently mis-differentiates a local set before such a loop and read in it (docs/taichi_pitfalls.md).
         Branches in such a loop crashed reverse mode in MassSpring (written branch-free) yet check out in
         Rigid2D's contact loop: verify every such loop with gradcheck.

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
      5. ``rates(self, s)``, a ``@ti.func`` that ACCUMULATES F with ``s.add_rate(name, i, value)``, reading the
         state where it is evaluated, the parameters and the action of step t through s (a
         ``tisim.core.access.Rates``): the continuous adjoint (method="continuous_adjoint")
         integrates its transposed Jacobian backward in time (tisim/autodiff/continuous_adjoint.py).
    """

    PARAMS = ()
    STATE = ()
    ACTION = ()
    DT = 0.01
    STRUCTURE = ()
    OPTIONS = {}
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

    def __init__(self, horizon, batch=1, dt=None, **values):
        name = type(self).__name__
        check_run(name, horizon, batch, dt)
        sizes, options = structure(type(self), values)
        dt = self.DT if dt is None else dt
        self.T, self.B, self.dt = int(horizon), int(batch), float(dt)
        describe(self, sizes, options)
        self._check_keywords(values)
        # every array's size is known now: refuse what cannot be allocated or indexed before compiling anything
        check_memory(self, self.memory_plan(), CONSTRUCTION)
        self.model = model_of(self, sizes, options)
        self._generation = runtime.generation()
        self._allocate()
        self._theta = self.param_layout.defaults(self.B)
        self._x0 = self.state_layout.defaults(self.B)
        self._u = np.zeros((self.B, self.T, self.action_layout.size))
        self._stale = set(STALE_ALL)
        self._passes = 0  # passes begun (Protocol.passes)
        self._bound_losses = collections.OrderedDict()
        self._last_gradient = lambda: None
        self.set_params(**{k: v for k, v in values.items() if k in self.param_layout.quantities})
        self.set_initial_state(**{k: v for k, v in values.items() if k in self.state_layout.quantities})

    def _check_keywords(self, values):
        known = self.param_layout.names + self.state_layout.names + list(sizes_of(type(self)))
        for key in values:
            if key not in known:
                raise ValueError(f"{type(self).__name__}: unknown keyword {key!r}; parameters: "
                                 f"{self.param_layout.names}, states: {self.state_layout.names}."
                                 + near_miss(key, known))

    def memory_plan(self):
        """What this simulator's arrays need, without allocating any (tisim/core/memory.py): a MemoryPlan of every
        array (shape, elements, bytes, device or host, made at construction or by the first pass that keeps every
        step) and their total; print it for a table."""
        return plan_memory(self, HOST_BUFFER_ENTRIES)

    def _allocate(self):
        real = runtime.real()
        B, T = self.B, self.T
        self.x = None  # (B, T+1, S), allocated by the first pass that keeps every step (see _ensure_trajectory)
        self.theta = ti.ndarray(real, (B, max(self.param_layout.size, 1)), needs_grad=True)
        self.u = ti.ndarray(real, (B, T, self.action_layout.size), needs_grad=True)
        self.x0 = ti.ndarray(real, (B, self.state_layout.size))
        self.loss = ti.ndarray(real, (B,), needs_grad=True)
        # on a CPU the inputs are uploaded by numpy through views of the arrays' memory
        self._views = {name: host_view(getattr(self, name)) for name in STALE_ALL}
        # kernel calls bound to these arrays (tisim/core/launch.py); the host-side copies below stay at fixed addresses
        self._launch = Launches()
        # each attribute read of a data-oriented kernel costs microseconds: read them once
        self._rollout_kernel, self._evaluate_kernel = self.model._rollout, self.model._evaluate
        self._no_loss = None  # the loss tables of a rollout without a loss, made when first needed
        self._status_host = np.empty((B, 2), dtype=runtime.numpy_real())
        # off the CPU, a persistent host copy of dL/da where it is small: on large bodies it would be one more O(T)
        # array
        small = B * T * self.action_layout.size <= HOST_BUFFER_ENTRIES and self._views["u"] is None
        self._u_grad_host = np.empty((B, T, self.action_layout.size), dtype=runtime.numpy_real()) if small else None
        self._serial = is_small(B * (T + 1) * max(self.state_layout.size, 1), B)
        self._scratch = Scratchpad(self)
        # a phased step on a GPU: one launch per step, each phase parallel over batch and items (a fused loop at a
        # small batch would run on a handful of GPU threads)
        self._per_step = bool(self.phases) and runtime.settings()["arch"] != "cpu"

    def _steps(self, x, u, t0, t1, serial, grad=False):
        """Steps t0..t1-1 on the states x (B, n+1, S) with the actions u (B, n, A), or their reverse-mode gradient:
        one fused launch, or, for a phased step, the schedule of tisim/core/phases.py."""
        if self.phases:
            self._scratch.steps(x, u, t0, t1, serial, grad, self._per_step)
            return
        self._launch(self._rollout_kernel, x, self.theta, u, self.dt, t0, t1, serial, grad=grad)

    # ---- inputs ------------------------------------------------------------------------------------------------------
    def _check_alive(self):
        if self._generation != runtime.generation():
            raise RuntimeError(f"{type(self).__name__}: tisim.init(...) restarted the runtime after this simulator was "
                               "created; create it again")

    def set_params(self, **values):
        """Set parameters by name: a scalar (or one value of the declared shape) for all B, or one per batch element."""
        self._check_alive()
        checked = {k: self.param_layout.validated(k, v, self.B, "set_params") for k, v in values.items()}
        for name, value in checked.items():
            self.param_layout.write(self._theta, name, value if _jitter is None else _jitter(value))
        self._stale.add("theta")

    @property
    def params(self):
        """{name: array (B, *shape)} of the current parameter values."""
        return {k: v.copy() for k, v in self.param_layout.unpack(self._theta).items()}

    def set_initial_state(self, **values):
        """Set x[0] by state name: one value of the declared shape for all B, or one per batch element."""
        self._check_alive()
        checked = {k: self.state_layout.validated(k, v, self.B, "set_initial_state") for k, v in values.items()}
        for name, value in checked.items():
            self.state_layout.write(self._x0, name, value if _jitter is None else _jitter(value))
        self._stale.add("x0")

    @property
    def initial_state(self):
        """{name: array (B, *shape)} of x[0]."""
        return {k: v.copy() for k, v in self.state_layout.unpack(self._x0).items()}

    def set_actions(self, actions):
        """Set the action sequence a[0:T]: shape (T, *action shape) for all B, or (B, T, *action shape)."""
        self._check_alive()
        actions = self._validated_actions(actions).reshape(self._u.shape)
        self._u[:] = actions if _jitter is None else _jitter(actions)
        self._stale.add("u")

    def _validated_actions(self, actions):
        name, shape = self.action_name, self.action_shape
        try:
            array = np.asarray(actions)
            if array.dtype.kind not in "fiu":  # floats and integers are checked as given, converted once into _u
                array = np.asarray(actions, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"set_actions: actions must be numeric, got {type(actions).__name__}") from None
        if array.shape not in ((self.T,) + shape, (self.B, self.T) + shape):
            raise ValueError(f"set_actions: actions ({name}) must have shape {(self.T,) + shape} or "
                             f"{(self.B, self.T) + shape}, got {array.shape}")
        # the interval is convex and NaN propagates through min and max: two reductions check every entry
        low, high = array.min(), array.max()
        if not (np.isfinite(low) and np.isfinite(high)):
            raise ValueError(f"set_actions: actions ({name}) contain NaN or infinite values")
        interval = self.ACTION[0].interval
        if not (interval.contains(low) and interval.contains(high)):
            raise ValueError(f"set_actions: actions ({name}) must be in {interval}")
        return np.broadcast_to(array, (self.B, self.T) + shape)

    @property
    def actions(self):
        """The action sequence, shape (B, T, *action shape)."""
        return self._u.reshape((self.B, self.T) + self.action_shape).copy()

    def index(self, name):
        """Offset of a state along x's last axis, for custom Taichi losses: x[b, t, sim.index("theta")]."""
        self.state_layout.check_name(name, "index")
        return self.state_layout.offsets[name]

    # ---- forward ---------------------------------------------------------------------------------------------------
    def _invalidate(self):
        """Upload every host-side input before the next pass (after editing _theta, _x0 or _u in place)."""
        self._stale = set(STALE_ALL)

    def _upload(self):
        for name in self._stale:
            host, target = {"theta": self._theta, "x0": self._x0, "u": self._u}[name], getattr(self, name)
            if name == "theta" and not self.param_layout.size:
                copy(np.zeros((self.B, 1), dtype=runtime.numpy_real()), target)
            elif self._views[name] is not None:
                np.copyto(self._views[name], host, casting="same_kind")
            else:  # the simulator's own float64 buffers, at fixed addresses: a bound call, which also converts
                self._launch(copy2 if host.ndim == 2 else copy3, host, target, is_small(host.size, self.B))
        self._stale = set()

    def _begin_pass(self):
        """Before a pass overwrites the arrays: check the runtime, settle the last Gradient, upload the inputs."""
        self._check_alive()
        self._passes += 1
        pending = self._last_gradient()
        if pending is not None:
            pending._snapshot()
        self._upload()

    def _ensure_trajectory(self):
        # Lazy, so that a simulator differentiated only with method="checkpointed" never holds O(T) states.
        if self.x is None:
            check_memory(self, self.memory_plan(), TRAJECTORY)
            self.x = ti.ndarray(runtime.real(), (self.B, self.T + 1, self.state_layout.size), needs_grad=True)

    def _forward(self, loss=None, grads=False):
        """Rollout (and loss, if given); returns the per-element losses (B,), zeros without a loss. grads: zero the
        gradient arrays for a backward pass to follow."""
        self._ensure_trajectory()
        self._begin_pass()
        launch = self._launch
        if loss is None:
            self._no_loss = self._no_loss or _Bound.of(self, [])
            loss = self._no_loss
        if not (loss.customs or self._per_step):
            w = self._scratch(self.T)
            launch(self._evaluate_kernel, self.x, self.x0, self.theta, self.u, w, w.grad, self.dt, self.loss,
                   loss.time, loss.offset, loss.w, loss.target, loss.linear, loss.w_effort, self._status_host,
                   self.x.grad, self.theta.grad, self.u.grad, self.loss.grad, self._serial, int(grads))
        else:  # Custom losses are kernels of their own, and so is each step on the per-step schedule
            launch(begin, self.x, self.x0, self.loss, self.x.grad, self.theta.grad, self.u.grad, self.loss.grad,
                   self._serial, int(grads))
            self._steps(self.x, self.u, 0, self.T, self._serial)
            loss.forward(self.x, self.theta, self.u, self.loss, self._serial, launch)
            launch(finish, self.x, self.loss, self._status_host, self._serial)
        status = self._status_host.astype(np.float64)
        first = status[:, 1]
        if np.any(first <= self.T):
            b = int(np.argmin(first))
            raise nonfinite_rollout(self, int(first[b]), b, self.x.to_numpy()[b, int(first[b])])
        return status[:, 0]


    def rollout(self, *, final=False, every=None, to=None, chunk=None, progress=None):
        """Run the T steps; returns {state name: array (B, T+1, *shape)}, every state.

        For long runs, keep less (the steps then run in segments of `chunk` steps through a small buffer, and the
        memory for states does not grow with T; tisim/core/segments.py):
            final=True   only x[T]: {name: (B, *shape)}, ready for set_initial_state(**state) to run on.
            every=k      x[0], x[k], x[2k], ... up to T: {name: (B, T // k + 1, *shape)}.
            to="a.npy"   writes x[0], x[k], ... (every=k, default 1) to an .npy file as the run goes, and returns
                         x[T] as final=True does. np.load(path)[name] has the shape (B, rows, *shape); after an
                         interrupted run the file holds the segments completed (see segments.StateFile).
            chunk        steps per segment (default: as many as fit a buffer of 2**20 state entries, 10,000 at
                         most); a file is written once per segment.
            progress     a progress bar: True, False, or None (the default) for one when the run is expected to
                         take more than a few seconds.
        The states are those of the plain rollout bit for bit (deterministic mode), and a state that turns
        non-finite raises NonFiniteError naming its step, as the plain rollout does."""
        if final or every is not None or to is not None or chunk is not None or progress is not None:
            from tisim.core.segments import long_run

            return long_run(self, final=final, every=every, to=to, chunk=chunk, progress=progress)
        self._forward()
        return self.state_layout.unpack(download(self.x))

    # ---- backward --------------------------------------------------------------------------------------------------
    def _bind(self, loss):
        key = id(loss)
        if key not in self._bound_losses:
            self._bound_losses[key] = (loss, loss.bind(self))
            if len(self._bound_losses) > 8:
                self._bound_losses.popitem(last=False)
        return self._bound_losses[key][1]

    def evaluate(self, loss):
        """Rollout and loss, no backward pass: the loss of each batch element, shape (B,)."""
        return self._forward(self._bind(loss))

    def _backward_rollout(self):
        self._steps(self.x, self.u, 0, self.T, self._serial, grad=True)

    def gradient(self, loss, *, method="unrolled", segments=None):
        """The loss and its gradient (see ``Gradient``); `method` picks how the derivatives are obtained:

        "unrolled" (default): one forward pass keeping every step and one reverse pass; memory O(B T S); the adjoint
            of every step is available.
        "checkpointed": keeps the states at `segments` segment starts (default about sqrt(T), fewer when steps are
            cheap) and recomputes each segment in the backward sweep: memory O(B (segments + T/segments) S) for one
            more forward rollout; the same gradients, no per-step adjoint (tisim/autodiff/checkpointing.py).
        "forward_mode": forward-mode autodiff, one pass per parameter and initial-state entry, nothing kept per step:
            for few inputs and long horizons; no action gradients (tisim/autodiff/forward_mode.py).
        "continuous_adjoint": the adjoint ODE integrated backward over the system's rates (ODE systems only);
            approximates the exact discrete gradient to O(dt) (tisim/autodiff/continuous_adjoint.py).
        ("forward" and "adjoint", the earlier names of the last two, still work and warn.)
        """
        if method in RENAMED_METHODS:
            warnings.warn(f"gradient: method={method!r} is now method={RENAMED_METHODS[method]!r}; the old name will "
                          "be removed", DeprecationWarning, stacklevel=2)
            method = RENAMED_METHODS[method]
        if method not in METHODS:
            raise ValueError(f"gradient: method must be one of {list(METHODS)}, got {method!r}."
                             + near_miss(str(method), METHODS))
        if segments is not None and method not in ("checkpointed", "continuous_adjoint"):
            raise ValueError("gradient: segments applies to method='checkpointed' and 'continuous_adjoint' only")
        if method != "unrolled":
            return _MECHANISMS[method](self, loss, segments)
        bound = self._bind(loss)
        per_batch = self._forward(bound, grads=True)
        if not np.all(np.isfinite(per_batch)):
            raise NonFiniteError(f"{type(self).__name__}: the loss is non-finite: {per_batch}")
        bound.backward(self.x, self.theta, self.u, self.loss, self._serial, self._launch)
        self._backward_rollout()
        gradient = Gradient(self, float(per_batch.sum()), per_batch)
        self._last_gradient = weakref.ref(gradient)
        return gradient

    def _fetch_gradient(self, group):
        self._check_alive()  # a Gradient read after a restart: its arrays' memory is gone
        if group == "params":
            return self.param_layout.unpack(download(self.theta.grad)[:, :self.param_layout.size])
        if group == "actions":
            if self._u_grad_host is None:
                return download(self.u.grad).reshape((self.B, self.T) + self.action_shape)
            self._launch(copy3, self.u.grad, self._u_grad_host, is_small(self._u_grad_host.size, self.B))
            return self._u_grad_host.astype(np.float64).reshape((self.B, self.T) + self.action_shape)
        if group == "initial_state":  # lambda_0 alone, without copying the whole adjoint
            first = np.empty((self.B, self.state_layout.size), dtype=runtime.numpy_real())
            copy_step(self.x.grad, 0, first)
            return self.state_layout.unpack(first.astype(np.float64, copy=False))
        return self.state_layout.unpack(download(self.x.grad))

    def jacobian(self, *, wrt="params", mode="auto"):
        """d x_T / d(wrt); wrt: "params", "initial_state" or "actions".

        mode: "reverse" takes one backward pass per final-state entry (S passes), "forward" one forward-mode pass per
        input entry (tisim/autodiff/forward_mode.py); "auto" (default) picks forward mode when the inputs are fewer
        than the outputs."""
        if wrt not in GROUPS:
            raise ValueError(f"jacobian: wrt must be one of {list(GROUPS)}, got {wrt!r}."
                             + near_miss(str(wrt), GROUPS))
        if mode not in MODES:
            raise ValueError(f"jacobian: mode must be one of {list(MODES)}, got {mode!r}."
                             + near_miss(str(mode), MODES))
        return _MECHANISMS["jacobian"](self, wrt, mode)

    def __repr__(self):
        sizes = "".join(f", {k}={v!r}" for k, v in {**self.sizes, **self.options}.items())
        return f"{type(self).__name__}(horizon={self.T}, batch={self.B}, dt={self.dt}{sizes})"

