"""A tisim rollout recorded on a Taichi ``ti.ad.Tape``: a simulator as one layer of a DiffTaichi-style program.

Inside ``with ti.ad.Tape(loss=...)``, ``record(sim)`` runs the rollout and puts ONE entry on the Tape whose gradient
is tisim's backward pass. Your own kernels, called after it inside the same Tape, read the trajectory; when the Tape
closes, Taichi runs their gradients first (they add dL/dx_t into the trajectory's gradient array), then tisim's
backward pass carries that into dL/dtheta, dL/dx_0 and dL/da:

    import taichi as ti
    import tisim
    from tisim.autodiff.tape import record

    sim = tisim.systems.Pendulum(horizon=100, theta=0.5)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def final_angle(x: ti.types.ndarray(), k: ti.i32):
        for b in range(x.shape[0]):
            loss[None] += (x[b, x.shape[1] - 1, k] - 1.0) ** 2

    with ti.ad.Tape(loss=loss):
        run = record(sim)                        # the rollout, recorded with tisim's backward pass
        final_angle(run.x, run.index("theta"))   # your kernels read the trajectory
    run.gradient.params["l"], run.gradient.initial_state["theta"], run.gradient.actions

Reading the trajectory. ``run.x`` is the simulator's packed state array, shape (B, T+1, S): x[b, t, :] is the
state after t steps, x[b, 0, :] the initial state, every state quantity at its offset ``run.index(name)`` along
the last axis (an array-valued state, such as MassSpring's pos of shape (n, 2), fills its entries in row-major
order from there: pos[i, j] is at run.index("pos") + 2 i + j). A kernel takes it as a ``ti.types.ndarray()``
argument. ``run.theta`` (B, P) and ``run.u`` (B, T, A) are the parameters and actions, packed the same way
(``sim.param_layout.offsets``, ``sim.action_layout.offsets``); a loss may read them too. Or copy one state into a
Taichi field of your own, as DiffTaichi programs keep one field per quantity with the step as its first index:

    pos = ti.Vector.field(2, ti.f64, shape=(T + 1, n), needs_grad=True)
    run.copy_state("pos", pos)       # pos[t, i]: particle i after t steps (for B > 1, shape=(B, T + 1, n))

The copy is an ordinary kernel on the Tape, so its gradient carries pos.grad back into the trajectory's.

The gradient. ``run.gradient``, once the Tape has closed, is a ``tisim.Gradient`` (tisim/core/derivatives.py):
params[name] dL/dtheta (B, *shape), initial_state[name] dL/dx_0, actions dL/da (B, T, *shape), and, with
``record(sim, adjoint=True)``, adjoint[name] lambda_t = dL/dx_t (B, T+1, *shape), the adjoint of every step.
``value`` is the Tape's loss; ``per_batch`` is None (your loss is one number, not split by batch element). The
gradients also stay on the device until the simulator's next pass, for kernels that carry them further up:
``sim.theta.grad``, ``sim.u.grad`` and ``sim.x.grad[:, 0, :]``. The inputs themselves are set as always
(set_params, set_initial_state, set_actions) before ``record``.

How the backward pass is seeded. ``record`` runs the unrolled forward pass and zeroes the simulator's gradient
arrays (the Tape clears the gradients of fields, never those of ndarrays). The gradients of your kernels then ADD
into ``sim.x.grad``: the partial derivative of the loss with respect to every state of every step it read, not
only the final one. tisim's backward pass starts from that array as it is (it does not zero it: it is the seed)
and sweeps the steps in reverse, adding each step's contribution, so x.grad[t] ends as lambda_t = dL/dx_t, the
total derivative, with theta.grad and u.grad summed along the way: the same sweep as ``sim.gradient(loss)``, where
a built-in loss adds its partials into x.grad first. The gradients are exact to rounding: they equal
``sim.gradient`` on the same loss written as a tisim loss.

Rules. ``record`` must be called inside a ``ti.ad.Tape``, once per simulator per Tape (a second rollout would
overwrite the first one's trajectory), and not from inside a ``ti.ad.grad_replaced`` function. Between ``record``
and the end of the Tape, run nothing else on that simulator (rollout, evaluate, gradient): every pass writes the
same arrays; where the engine counts passes (``Protocol.passes``), the backward pass checks it. The whole
trajectory is kept (memory O(B T S), as method="unrolled"): the user's kernels read any step, so the checkpointed
backward pass cannot serve here.
"""
import weakref

import numpy as np
import taichi as ti
from taichi.lang import impl
from taichi.lang.field import ScalarField
from taichi.lang.matrix import MatrixField

from tisim.core.derivatives import Gradient
from tisim.core.engine import System
from tisim.core.protocol import Protocol

__all__ = ["Recording", "record"]

_KEY = "ti.ad.Tape"  # the simulator's protocol buffer that names its latest recording


class Recording:
    """One rollout recorded on a ``ti.ad.Tape`` by ``record(sim)`` (see the module docstring).

    sim: the simulator. x, theta, u: its packed device arrays (B, T+1, S), (B, P), (B, T, A), for your kernels.
    gradient: the ``tisim.Gradient`` of the Tape's loss, once the Tape has run its backward pass.
    """

    def __init__(self, sim, tape, adjoint):
        self.sim = sim
        self._tape = weakref.ref(tape)
        self._adjoint = bool(adjoint)
        self._state = "recording"  # -> "recorded" (forward done), "failed" (forward raised), "done" (backward run)
        self._passes = None
        self._gradient = None

    # ---- what a user's kernel reads ------------------------------------------------------------------------------
    @property
    def x(self):
        """The trajectory (B, T+1, S), an ndarray with gradients: x[b, t, run.index(name)]."""
        return self.sim.x

    @property
    def theta(self):
        """The parameters (B, P), an ndarray with gradients (offsets: sim.param_layout.offsets)."""
        return self.sim.theta

    @property
    def u(self):
        """The actions (B, T, A), an ndarray with gradients (offsets: sim.action_layout.offsets)."""
        return self.sim.u

    def index(self, name):
        """Offset of state `name` along x's last axis (its first entry, for an array-valued state)."""
        return self.sim.index(name)

    def copy_state(self, name, field, batch=None):
        """Copy state `name` of every step into the Taichi field ``field``, on the Tape (its gradient carries
        field.grad back into the trajectory's).

        The field's index is (b, t, *i) with a batch axis, or (t, *i) for one batch element (``batch``; when B is 1
        either form), where i runs over the state's shape; its trailing axes may instead be the components of a
        vector or matrix field: a state of shape (n, 2) fits ti.Vector.field(2, ..., shape=(T+1, n)). The field
        needs needs_grad=True (the Tape zeroes its gradient when it starts, unless clear_gradients=False); call this
        inside the Tape that recorded the rollout, before the kernels that read the field."""
        sim = self.sim
        sim.state_layout.check_name(name, "copy_state")
        if not isinstance(field, (ScalarField, MatrixField)):
            raise TypeError(f"copy_state: field must be a Taichi scalar, vector or matrix field, got "
                            f"{type(field).__name__}")
        if self._state != "recorded" or impl.get_runtime().target_tape is not self._tape():
            raise RuntimeError("copy_state: call it inside the ti.ad.Tape that recorded the rollout (the copy's "
                               "gradient must run before tisim's backward pass)")
        if not _has_grad(field):
            raise ValueError("copy_state: the field needs gradients: make it with needs_grad=True")
        element = _element_shape(field)
        state = sim.state_layout.shapes[name]
        if batch is not None and (isinstance(batch, bool) or not isinstance(batch, (int, np.integer))
                                  or not 0 <= batch < sim.B):
            raise ValueError(f"copy_state: batch must be an integer in [0, {sim.B - 1}], got {batch!r}")
        batched = batch is None and (sim.B > 1 or len(field.shape) + len(element) == 2 + len(state))
        lead = (sim.B, sim.T + 1) if batched else (sim.T + 1,)
        expected = lead + state
        if tuple(field.shape) + element != expected:
            have = f"shape {tuple(field.shape)}" + (f" of {element} elements" if element else "")
            hint = ""
            if len(field.shape) > len(lead) - 1 and field.shape[len(lead) - 1] != sim.T + 1:
                hint = (f"; its time axis has {field.shape[len(lead) - 1]} entries, the rollout's horizon "
                        f"T = {sim.T} has T + 1 = {sim.T + 1} states")
            one = " (pass batch= to copy one batch element)" if batched else ""
            raise ValueError(f"copy_state: state {name!r} of {type(sim).__name__}(horizon={sim.T}, batch={sim.B}) "
                             f"fills a field of index shape {expected} (trailing axes may be a vector's or matrix's "
                             f"components){one}; got {have}{hint}")
        _copy_state(sim.x, field, sim.index(name), 0 if batch is None else int(batch), batched, len(state), element)

    # ---- the result ----------------------------------------------------------------------------------------------
    @property
    def gradient(self):
        """The ``tisim.Gradient`` of the Tape's loss (see the module docstring)."""
        if self._state == "failed":
            raise RuntimeError("record: the recorded rollout raised an error, so it has no gradient")
        if self._gradient is None:
            raise RuntimeError("record: the gradient comes when the ti.ad.Tape runs its backward pass, at the end of "
                               "its `with` block; read it after the block")
        return self._gradient

    # ---- the Tape's two calls ------------------------------------------------------------------------------------
    def _forward(self):
        p = Protocol.of(self.sim)
        try:
            p.forward(grads=True)  # the rollout into sim.x; zeroes x.grad, theta.grad and u.grad for the seed
        except BaseException:
            self._state = "failed"
            raise
        self._passes = getattr(p, "passes", None)
        self._state = "recorded"

    def _backward(self):
        if self._state != "recorded":  # a rollout that raised: the Tape still runs its entries' gradients on exit
            return
        sim, p = self.sim, Protocol.of(self.sim)
        pending = p.held(_KEY)
        latest = pending["latest"]() if pending is not None else self
        passes = getattr(p, "passes", None)
        if latest is not self or passes != self._passes:
            self._state = "failed"
            raise RuntimeError(f"record: {type(sim).__name__} ran another pass after this rollout was recorded and "
                               "before the Tape's backward pass, overwriting its trajectory; inside a Tape, run "
                               "nothing else on a recorded simulator")
        p.backward()  # from sim.x.grad as the user's kernels left it: the seed of every step
        groups = {group: p.fetch(group) for group in ("params", "initial_state", "actions")}
        if self._adjoint:
            groups["adjoint"] = p.fetch("adjoint")
        tape = self._tape()
        value = _loss_value(tape.loss if tape is not None else None)
        gradient = Gradient.computed(sim, np.array([value]), groups, "the backward pass",
                                     "the adjoint of every step is kept with record(sim, adjoint=True)")
        gradient.per_batch = None  # the Tape's loss is one number
        self._gradient, self._state = gradient, "done"

    def __repr__(self):
        return f"Recording({self.sim!r}, {self._state})"


def record(sim, *, adjoint=False):
    """Run ``sim``'s rollout inside a ``ti.ad.Tape`` and record it there, with tisim's backward pass as its gradient.

    Returns a ``Recording``: its x (B, T+1, S) is the trajectory your kernels read (offsets: index(name), or
    copy_state(name, field)); its gradient, after the Tape's `with` block, holds dL/dtheta, dL/dx_0 and dL/da.
    adjoint=True also keeps lambda_t = dL/dx_t of every step (gradient.adjoint; a copy of the whole trajectory's
    size). See the module docstring for the rules."""
    if not isinstance(sim, System):
        raise TypeError(f"record: sim must be a tisim simulator, got {type(sim).__name__}")
    runtime = impl.get_runtime()
    tape = runtime.target_tape
    if tape is None:
        raise RuntimeError("record: call it inside `with ti.ad.Tape(loss=...)`: outside a Tape nothing runs tisim's "
                           "backward pass (for a rollout alone, use sim.rollout(); for a tisim loss, sim.gradient)")
    if runtime.grad_replaced:
        raise RuntimeError("record: not from inside a ti.ad.grad_replaced function: record already puts its own "
                           "entry on the Tape, with tisim's backward pass as its gradient")
    if getattr(runtime, "fwd_mode_manager", None) is not None:
        raise RuntimeError("record: not inside ti.ad.FwdMode; tisim's forward mode is tisim.jvp or "
                           "sim.gradient(loss, method='forward_mode')")
    p = Protocol.of(sim)
    pending = p.buffers(_KEY, lambda: {"latest": lambda: None})
    earlier = pending["latest"]()
    if earlier is not None and earlier._state == "recorded" and earlier._tape() is tape:
        raise RuntimeError(f"record: this {type(sim).__name__} is already recorded on this Tape; a second rollout "
                           "would overwrite the first one's trajectory (make a second simulator for a second "
                           "rollout)")
    recording = Recording(sim, tape, adjoint)
    pending["latest"] = weakref.ref(recording)  # the recording whose rollout the simulator's arrays hold
    _on_tape(recording)
    return recording


@ti.ad.grad_replaced
def _on_tape(recording):
    recording._forward()


@ti.ad.grad_for(_on_tape)
def _on_tape_backward(recording):
    recording._backward()


@ti.kernel
def _copy_state(x: ti.types.ndarray(ndim=3), field: ti.template(), offset: ti.i32, b0: ti.i32,
                batched: ti.template(), dims: ti.template(), element: ti.template()):
    # field[(b,) t, i...][e...] = x[b, t, offset + the row-major index of (i..., e...) in the state's shape]
    for I in ti.grouped(field):
        b = b0
        if ti.static(batched):
            b = I[0]
        t = I[ti.static(1 if batched else 0)]
        flat = 0
        for d in ti.static(range(2 if batched else 1, (2 if batched else 1) + dims - len(element))):
            flat = flat * field.shape[d] + I[d]
        for c in ti.static(range(int(np.prod(element, dtype=int)))):
            if ti.static(len(element) == 0):
                field[I] = x[b, t, offset + flat]
            elif ti.static(len(element) == 1):
                field[I][c] = x[b, t, offset + flat * element[0] + c]
            else:
                field[I][c // element[1], c % element[1]] = x[b, t, offset + flat * element[0] * element[1] + c]


def _element_shape(field):
    if isinstance(field, ScalarField):
        return ()
    if getattr(field, "ndim", 2) == 1:
        return (field.n,)
    return (field.n, field.m)


def _has_grad(field):
    return bool(field.snode.ptr.has_adjoint())


def _loss_value(loss):
    """The Tape's loss as a float (a field, an ndarray or a tensor of one element); NaN without one."""
    if loss is None:
        return float("nan")
    if hasattr(loss, "to_numpy"):
        return float(np.asarray(loss.to_numpy(), dtype=np.float64).reshape(-1)[0])
    return float(loss.detach().cpu().reshape(-1)[0])
