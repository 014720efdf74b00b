"""The rollout engine: per-step arrays with a batch axis and a time axis, the forward sweep and the backward pass.

A simulator step is x[t+1] = f(x[t], a[t]; theta). The engine holds, for one simulator,

    x      states      (B, T+1, S)   x[b, t] is the state after t steps; x[b, 0] the initial state
    theta  parameters  (B, P)        one parameter vector per batch element
    u      actions     (B, T, A)     u[b, t] acts during step t (the a[t] of the equations)

and runs the system's ``step`` for t = 0..T-1 inside ONE kernel, parallel over the batch axis. Reverse mode through
that kernel is the discrete adjoint method: after one backward pass x.grad[b, t] is lambda_t = dL/dx_t, theta.grad is
dL/dtheta and u.grad is dL/da.
"""
import collections
import math
import weakref

import numpy as np
import taichi as ti

from tisim import jacobians, runtime
from tisim.access import Accessors
from tisim.derivatives import Gradient, NonFiniteError, nonfinite_rollout
from tisim.launch import Launches
from tisim.losses import _Bound, quadratic
from tisim.phases import ScratchLayout, Scratchpad, fused_step, phase_list, schedule_option
from tisim.quantities import Layout, near_miss
from tisim.trajectory import (
    begin,
    clear_row,
    copy,
    copy2,
    copy3,
    copy_step,
    download,
    finish,
    is_small,
    nonfinite_row,
    prepare_grads,
)

METHODS = ("unrolled", "checkpointed", "forward", "adjoint")
MODES = ("auto", "reverse", "forward")
GROUPS = ("params", "initial_state", "actions")
STALE_ALL = ("theta", "x0", "u")
UNROLLED_STATE = 16  # states up to this many entries are cleared and checked row by row in unrolled code
HOST_BUFFER_ENTRIES = 1 << 16  # largest action gradient read back through a persistent, bound host buffer
_jitter = None  # while tisim.diagnostics.last_bits is active: moves every input a simulator is given, once validated
# The mechanisms beyond plain unrolling are built on the engine and register here (tisim/checkpointing.py,
# forward.py, adjoint.py; tisim/__init__.py imports them), so the engine never imports them back. They use a
# simulator through tisim/protocol.py, which also keeps their buffers.
_MECHANISMS = {}  # "checkpointed", "forward", "adjoint": gradient(sim, loss, segments); "jacobian": (sim, wrt)


def mechanism(name):
    """Register the function decorated as the engine's ``name`` mechanism (see _MECHANISMS)."""
    def register(function):
        _MECHANISMS[name] = function
        return function
    return register


class System(Accessors):
    """Base class of every simulator.

    A subclass declares, as class attributes:
      1. PARAMS, STATE, ACTION: tuples of ``Quantity`` rows for theta, x and a. ACTION has exactly one row (a scalar or
         a vector); STATE and PARAMS any number.
      2. DT: the default time step [s]; STRUCTURE: names of integer constructor keywords that fix sizes and appear in
         shapes (default none; defaults from <NAME>_DEFAULT; each >= 1, or >= <NAME>_MIN where declared);
         OPTIONS: {keyword: (allowed strings, first = default)} for choices of law, e.g.
         {"contact": ("penalty", "impact")}, read in kernels with ti.static.
    and implements:
      3. ``step(self, x, theta, u, dt, b, t)``, a ``@ti.func`` that reads x[b, t, :], theta[b, :] and u[b, t, :] and
         ACCUMULATES the next state into x[b, t+1, :] with ``+=`` (the engine zeroes it first; a plain store would
         erase the adjoint that the backward pass leaves in x.grad). Offsets come from self.X, self.P and self.U,
         for example ``theta[b, self.P.m_cart]``. The step must read nothing from ``self`` but structure: its
         kernels are compiled once per class and structure and run on a shared, data-oriented instance (the
         "host"); the class itself needs no @ti.data_oriented.
         A dynamic loop inside the step (over particles or contacts) must read everything it uses inside its own
         body: Taichi 1.7's reverse mode silently mis-differentiates a local set before such a loop and read in it.
         Branches in such a loop crashed reverse mode in MassSpring (written branch-free) yet check out in Rigid2D's
         contact loop: verify every such loop with gradcheck.

    A step that is one independent update per item (a particle reading its neighbours at step t and writing only
    its own next state) may instead set ITEMS to the STRUCTURE size that counts the items and implement
      3'. ``step_item(self, x, theta, u, dt, b, t, i)``, the update of item i; ``step`` is then its loop. On a GPU
         the engine runs each step as one launch parallel over batch and items (a fused loop at a small batch would
         run on a handful of GPU threads); on a CPU the fused loop is faster (a thread-pool dispatch per step costs
         more than a step).

    A step made of loops over different domains (springs, then particles; an MPM grid) declares PHASES and SCRATCH
    instead (tisim/phases.py, docs/adding_a_system.md): each phase a @ti.func over one item of its domain, with
    per-step scratch between phases that the engine zeroes, and keeps per step or recomputes in the backward pass.
    A system with both forms (PHASES and ITEMS) takes a `schedule` keyword, "items" or "phased" (default: items on
    a CPU, phased on a GPU). Steps read and write quantities by name through the accessors of tisim/access.py.

    Systems defined by an ODE x' = F(x, a; theta) may also implement
      4. ``rates(self, x, theta, u, b, t, f)``, a ``@ti.func`` that ACCUMULATES F at the state x[b, :] (a (B, S)
         array), with the action u[b, t, :], into f[b, :]: the continuous adjoint (method="adjoint") integrates its
         transposed Jacobian backward in time (tisim/adjoint.py).

    Users call set_params / params, set_initial_state / initial_state, set_actions / actions, rollout, gradient and
    jacobian. Subclasses override nothing else.
    """

    PARAMS = ()
    STATE = ()
    ACTION = ()
    DT = 0.01
    STRUCTURE = ()
    OPTIONS = {}
    ITEMS = None
    PHASES = ()
    SCRATCH = ()

    def __init__(self, horizon, batch=1, dt=None, **values):
        name = type(self).__name__
        sizes = {key: values.pop(key) for key in self.STRUCTURE if key in values}
        for key in self.STRUCTURE:
            sizes.setdefault(key, getattr(type(self), key.upper() + "_DEFAULT", 1))
            _check_count(name, key, sizes[key], getattr(type(self), key.upper() + "_MIN", 1))
        options = {key: values.pop(key, allowed[0]) for key, allowed in self.OPTIONS.items()}
        for key, choice in options.items():
            if choice not in self.OPTIONS[key]:
                raise ValueError(f"{name}: {key} must be one of {list(self.OPTIONS[key])}, got {choice!r}."
                                 + near_miss(str(choice), self.OPTIONS[key]))
        options.update(schedule_option(type(self), values.pop("schedule", None)))
        _check_count(name, "horizon", horizon)
        _check_count(name, "batch", batch)
        dt = self.DT if dt is None else dt
        if isinstance(dt, bool) or not isinstance(dt, (int, float, np.floating)) or not (0 < dt < math.inf):
            raise ValueError(f"{name}: dt must be a finite number > 0 [s], got {dt!r}")
        if len(self.ACTION) != 1:
            raise TypeError(f"{name}: ACTION must declare exactly one quantity, got {len(self.ACTION)}")
        self.T, self.B, self.dt = int(horizon), int(batch), float(dt)
        self._describe(sizes, options)
        self._host = runtime.host((type(self), tuple(sorted(sizes.items())), tuple(sorted(options.items())),
                                   self._topology_key()), self._bare_host)
        self._generation = runtime.generation()
        self._allocate()
        self._theta = self.param_layout.defaults(self.B)
        self._x0 = self.state_layout.defaults(self.B)
        self._u = np.zeros((self.B, self.T, self.action_layout.size))
        self._stale = set(STALE_ALL)
        self._bound_losses = collections.OrderedDict()
        self._last_gradient = lambda: None
        known = self.param_layout.names + self.state_layout.names + list(self.STRUCTURE)
        for key in values:
            if key not in known:
                raise ValueError(f"{name}: unknown keyword {key!r}; parameters: {self.param_layout.names}, "
                                 f"states: {self.state_layout.names}." + near_miss(key, known))
        self.set_params(**{k: v for k, v in values.items() if k in self.param_layout.quantities})
        self.set_initial_state(**{k: v for k, v in values.items() if k in self.state_layout.quantities})

    # ---- structure -------------------------------------------------------------------------------------------------
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
        self.phases = phase_list(self) if self.options.get("schedule", "phased") == "phased" else []

    def _topology_key(self):
        """Hashable description of structure beyond sizes and options (a particle system's connectivity, say);
        systems that keep such structure in Taichi fields on their host override this and _bare_host."""
        return ()

    def _bare_host(self):
        # Only the host is Taichi-data-oriented: ti.data_oriented routes every attribute access through a Python
        # wrapper, which a user-facing simulator would pay on each of the hundreds of accesses per iteration.
        kernels = ti.data_oriented(type(type(self).__name__ + "Kernels", (type(self),), {}))
        host = object.__new__(kernels)
        host._describe(self.sizes, self.options)
        return host

    def _allocate(self):
        real = runtime.real()
        B, T = self.B, self.T
        self.x = None  # (B, T+1, S), allocated by the first pass that keeps every step (see _ensure_trajectory)
        self.theta = ti.ndarray(real, (B, max(self.param_layout.size, 1)), needs_grad=True)
        self.u = ti.ndarray(real, (B, T, self.action_layout.size), needs_grad=True)
        self.x0 = ti.ndarray(real, (B, self.state_layout.size))
        self.loss = ti.ndarray(real, (B,), needs_grad=True)
        # kernel calls bound to these arrays (tisim/launch.py); the host-side copies below stay at fixed addresses
        self._launch = Launches()
        # each attribute read of a data-oriented kernel costs ~7 us
        self._rollout_kernel, self._evaluate_kernel = self._host._rollout, self._host._evaluate
        self._step_items_kernel = self._host._step_items
        self._no_loss = None  # the loss tables of a rollout without a loss, made when first needed
        self._status_host = np.empty((B, 2), dtype=runtime.numpy_real())
        # a persistent host copy of dL/da only where it is small: on large bodies it would be one more O(T) array
        small = B * T * self.action_layout.size <= HOST_BUFFER_ENTRIES
        self._u_grad_host = np.empty((B, T, self.action_layout.size), dtype=runtime.numpy_real()) if small else None
        self._serial = is_small(B * (T + 1) * max(self.state_layout.size, 1), B)
        self._scratch = Scratchpad(self)
        # one launch per step, parallel over batch and items: for item-wise and phased systems on a GPU (see ITEMS)
        self._per_step = (self.ITEMS is not None or bool(self.phases)) and runtime.settings()["arch"] != "cpu"

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

    def _steps(self, x, u, t0, t1, serial, grad=False):
        """Steps t0..t1-1 on the states x (B, n+1, S) with the actions u (B, n, A), or their reverse-mode gradient:
        one fused launch, or one launch per step (in reverse order for the gradient) on the per-step schedule."""
        if self.phases:
            self._scratch.steps(x, u, t0, t1, serial, grad)
            return
        if not self._per_step:
            self._launch(self._rollout_kernel, x, self.theta, u, self.dt, t0, t1, serial, grad=grad)
            return
        for t in (range(t1 - 1, t0 - 1, -1) if grad else range(t0, t1)):
            self._launch(self._step_items_kernel, x, self.theta, u, self.dt, t, grad=grad)

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
            for k in range(scratch.shape[1]):  # phases accumulate into their scratch
                scratch[b, k] = 0.0
                scratch_grad[b, k] = 0.0
            first = x.shape[1]
            for k in range(x.shape[2]):
                x[b, 0, k] = x0[b, k]
            if nonfinite_row(x, b, 0, self._unrolled):
                first = 0
            for t in range(x.shape[1] - 1):
                clear_row(x, b, t + 1, self._unrolled)
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
            else:  # the simulator's own float64 buffers, at fixed addresses: a bound call, which also converts
                self._launch(copy2 if host.ndim == 2 else copy3, host, target, is_small(host.size, self.B))
        self._stale = set()

    def _begin_pass(self):
        """Before a pass overwrites the arrays: check the runtime, settle the last Gradient, upload the inputs."""
        self._check_alive()
        pending = self._last_gradient()
        if pending is not None:
            pending._snapshot()
        self._upload()

    def _ensure_trajectory(self):
        # Lazy, so that a simulator differentiated only with method="checkpointed" never holds O(T) states.
        if self.x is None:
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
                   self.x.grad, self.theta.grad, self.u.grad, self.loss.grad, self._serial, grads)
        else:  # Custom losses are kernels of their own, and so is each step on the per-step schedule
            launch(begin, self.x, self.x0, self.loss, self.x.grad, self.theta.grad, self.u.grad, self.loss.grad,
                   self._serial, grads)
            self._steps(self.x, self.u, 0, self.T, self._serial)
            loss.forward(self.x, self.theta, self.u, self.loss, self._serial, launch)
            launch(finish, self.x, self.loss, self._status_host, self._serial)
        status = self._status_host.astype(np.float64)
        first = status[:, 1]
        if np.any(first <= self.T):
            b = int(np.argmin(first))
            raise nonfinite_rollout(self, int(first[b]), b, self.x.to_numpy()[b, int(first[b])])
        return status[:, 0]


    def rollout(self):
        """Run the T steps; returns {state name: array (B, T+1, *shape)}."""
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
            more forward rollout; the same gradients, no per-step adjoint (tisim/checkpointing.py).
        "forward": forward-mode autodiff, one pass per parameter and initial-state entry, nothing kept per step:
            for few inputs and long horizons; no action gradients (tisim/forward.py).
        "adjoint": the continuous adjoint: the adjoint ODE integrated backward over the system's rates (ODE systems
            only); approximates the exact discrete gradient to O(dt) (tisim/adjoint.py).
        """
        if method not in METHODS:
            raise ValueError(f"gradient: method must be one of {list(METHODS)}, got {method!r}."
                             + near_miss(str(method), METHODS))
        if segments is not None and method not in ("checkpointed", "adjoint"):
            raise ValueError("gradient: segments applies to method='checkpointed' and 'adjoint' only")
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
        input entry (tisim/forward.py); "auto" (default) picks forward when the inputs are fewer than the outputs."""
        if wrt not in GROUPS:
            raise ValueError(f"jacobian: wrt must be one of {list(GROUPS)}, got {wrt!r}."
                             + near_miss(str(wrt), GROUPS))
        if mode not in MODES:
            raise ValueError(f"jacobian: mode must be one of {list(MODES)}, got {mode!r}."
                             + near_miss(str(mode), MODES))
        return jacobians.jacobian(self, wrt, mode, _MECHANISMS["jacobian"])

    def events(self, traj):
        """{name: bool array (B, T+1)}: when each non-smooth switch of the system (a contact, a stick) is on, read
        from a rollout; systems with switches override this (``tisim.diagnostics`` reports them)."""
        return {}

    def __repr__(self):
        if not hasattr(self, "T"):
            return f"<kernel host of {type(self).__name__} {self.sizes}>"
        sizes = "".join(f", {k}={v!r}" for k, v in {**self.sizes, **self.options}.items())
        return f"{type(self).__name__}(horizon={self.T}, batch={self.B}, dt={self.dt}{sizes})"


def _check_count(owner, name, value, minimum=1):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{owner}: {name} must be an integer >= {minimum}, got {value!r}")

