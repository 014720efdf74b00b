"""Forward mode: directional derivatives (Jacobian-vector products) with Taichi's forward-mode autodiff.

One forward pass carries, beside every state x_t, its tangent

    dx_t = (dx_t / dtheta) dtheta + (dx_t / dx_0) dx_0 + sum_s (dx_t / da_s) da_s

for one input direction (dtheta, dx_0, da): Taichi's dual numbers, propagated through the system's own ``step``.
Nothing runs backward through time, so nothing per step is kept: the rollout advances in segments of L steps
inside one small buffer, and only the state and its tangent at a segment's end carry over. Memory O(B L S),
independent of T. Each pass gives ONE directional derivative; a full gradient costs one pass per input entry,
which pays when the inputs are few (a handful of parameters) and the horizon long.

The loss's directional derivative dL = <dL/dx, dx> + <dL/da, da> + <dL/dtheta, dtheta> is assembled per segment:
the loss terms that fall in the segment are differentiated (in reverse mode, on that segment's states alone; the
dynamics are never run backward) and dotted with the tangents. Every tisim loss works, Custom losses included.

Taichi 1.7 keeps dual numbers on fields only, not on ndarrays: the forward-mode buffers are fields, one set per
system structure and buffer size, kept for the life of the runtime. Its forward mode also fails to compile arithmetic
on ti.Vector locals, nor StiffChain's detached Newton solve, so MassSpring, Rigid2D, ResidualPendulum and StiffChain
raise NotImplementedError here (a clear one).
"""
from dataclasses import dataclass

import numpy as np
import taichi as ti

from tisim.autodiff.checkpointing import segment_windows
from tisim.core import runtime
from tisim.core.derivatives import Gradient, NonFiniteError
from tisim.core.engine import mechanism
from tisim.core.protocol import Protocol
from tisim.core.segments import Segments, check_finite
from tisim.core.trajectory import copy, download, is_small

BUFFER_ENTRIES = 1 << 16  # state entries (B x S x steps) one segment buffer holds, at most
MAX_SEGMENT = 1024


@dataclass
class Directional:
    """One forward pass's result: the loss of each batch element (B,) and its derivative along the direction (B,)
    (both None without a loss), and the tangent of the final state {name: (B, *shape)}."""

    value: np.ndarray
    derivative: np.ndarray
    final_state: dict


class _Fields:
    """A segment's states, parameters and actions as fields with dual numbers, in a tree of their own."""

    def __init__(self, B, L, S, P, A):
        real, builder = runtime.real(), ti.FieldsBuilder()
        self.x, self.theta, self.u = (ti.field(real, needs_dual=True) for _ in range(3))
        self.anchor = ti.field(real, needs_dual=True)  # FwdMode wants a seeded field; ours are seeded by kernels
        builder.dense(ti.ijk, (B, L + 1, S)).place(self.x, self.x.dual)
        builder.dense(ti.ij, (B, P)).place(self.theta, self.theta.dual)
        builder.dense(ti.ijk, (B, L, A)).place(self.u, self.u.dual)
        builder.place(self.anchor, self.anchor.dual)
        self.tree = builder.finalize()


def segment_length(sim):
    """Steps per forward-mode segment: as many as fit BUFFER_ENTRIES, at most MAX_SEGMENT, a power of two. Not
    tied to T, so that simulators of any horizon share the buffers and their compiled kernels."""
    fits = max(16, BUFFER_ENTRIES // (sim.B * max(sim.state_layout.size, 1)))
    return int(min(MAX_SEGMENT, 1 << (fits.bit_length() - 1)))


def _fields(sim, length):
    # kept on the kernel host: its kernels compile once per set of fields, and a runtime restart drops both
    cache = Protocol.of(sim).kernels.__dict__.setdefault("_forward_fields", {})
    key = (sim.B, length)
    if key not in cache:
        cache[key] = _Fields(sim.B, length, sim.state_layout.size, max(sim.param_layout.size, 1),
                             sim.action_layout.size)
    return cache[key]


@ti.kernel
def _load_theta(theta: ti.types.ndarray(ndim=2), dtheta: ti.types.ndarray(ndim=2), out: ti.template(),
                dual: ti.template()):
    for b, k in ti.ndrange(theta.shape[0], theta.shape[1]):
        out[b, k] = theta[b, k]
        dual[b, k] = dtheta[b, k]


@ti.kernel
def _load_segment(state: ti.types.ndarray(ndim=2), tangent: ti.types.ndarray(ndim=2), u: ti.types.ndarray(ndim=3),
                  du: ti.types.ndarray(ndim=3), t0: ti.i32, n: ti.i32, x: ti.template(), x_dual: ti.template(),
                  us: ti.template(), us_dual: ti.template(), serial: ti.template()):
    # steps accumulate into x[t+1] with +=, duals likewise: everything after the segment start begins at zero
    ti.loop_config(serialize=serial)
    for b in range(state.shape[0]):
        for j in range(state.shape[1]):
            x[b, 0, j] = state[b, j]
            x_dual[b, 0, j] = tangent[b, j]
        for t in range(1, n + 1):
            for j in range(state.shape[1]):
                x[b, t, j] = 0.0
                x_dual[b, t, j] = 0.0
        for t in range(n):
            for a in range(u.shape[2]):
                us[b, t, a] = u[b, t0 + t, a]
                us_dual[b, t, a] = du[b, t0 + t, a]


@ti.kernel
def _unload_segment(x: ti.template(), x_dual: ti.template(), n: ti.i32, u: ti.types.ndarray(ndim=3), t0: ti.i32,
                    xs: ti.types.ndarray(ndim=3), xs_grad: ti.types.ndarray(ndim=3), dxs: ti.types.ndarray(ndim=3),
                    us: ti.types.ndarray(ndim=3), us_grad: ti.types.ndarray(ndim=3), state: ti.types.ndarray(ndim=2),
                    tangent: ti.types.ndarray(ndim=2), serial: ti.template()):
    # the segment's states into the arrays its loss terms read; the end state and tangent carry to the next segment
    ti.loop_config(serialize=serial)
    for b in range(xs.shape[0]):
        for t in range(xs.shape[1]):
            for j in range(xs.shape[2]):
                inside = t <= n
                xs[b, t, j] = x[b, t, j] if inside else 0.0
                dxs[b, t, j] = x_dual[b, t, j] if inside else 0.0
                xs_grad[b, t, j] = 0.0
        for t in range(us.shape[1]):
            for a in range(us.shape[2]):
                us[b, t, a] = u[b, t0 + t, a] if t < n else 0.0
                us_grad[b, t, a] = 0.0
        for j in range(xs.shape[2]):
            state[b, j] = x[b, n, j]
            tangent[b, j] = x_dual[b, n, j]


@ti.kernel
def _dot_segment(xs_grad: ti.types.ndarray(ndim=3), dxs: ti.types.ndarray(ndim=3), us_grad: ti.types.ndarray(ndim=3),
                 du: ti.types.ndarray(ndim=3), t0: ti.i32, n: ti.i32, out: ti.types.ndarray(ndim=1),
                 serial: ti.template()):
    ti.loop_config(serialize=serial)
    for b in range(xs_grad.shape[0]):
        total = 0.0
        for t in range(n + 1):
            for j in range(xs_grad.shape[2]):
                total += xs_grad[b, t, j] * dxs[b, t, j]
        for t in range(n):
            for a in range(us_grad.shape[2]):
                total += us_grad[b, t, a] * du[b, t0 + t, a]
        out[b] += total


class _Pass:
    """A simulator's forward-mode buffers: the fields, the segment arrays its loss terms read, the directions."""

    def __init__(self, sim):
        real = runtime.real()
        self.sim, self.length = sim, segment_length(sim)
        self.fields = _fields(sim, self.length)
        self.segments = Protocol.of(sim).buffers(("segments", self.length), lambda: Segments(sim, self.length))
        self.count = self.segments.count
        B, S = sim.B, sim.state_layout.size
        self.dxs = ti.ndarray(real, self.segments.xs.shape)  # the segment's tangents, beside its states
        self.dtheta = ti.ndarray(real, (B, max(sim.param_layout.size, 1)))
        self.du = ti.ndarray(real, (B, sim.T, sim.action_layout.size))
        self.state, self.tangent = ti.ndarray(real, (B, S)), ti.ndarray(real, (B, S))
        self.derivative = ti.ndarray(real, (B,))
        self.serial = is_small(B * (self.length + 1) * max(S, 1), B)

    @classmethod
    def of(cls, sim):
        if sim.phases:  # its scratch would need dual numbers too; forward mode steps run on Taichi fields
            raise NotImplementedError(f"forward mode: {type(sim).__name__}'s step is phased (tisim/core/phases.py), "
                                      "which forward mode does not run; use method='unrolled' or 'checkpointed'")
        p = Protocol.of(sim)
        p.begin_pass()
        return p.buffers("forward mode", lambda: cls(sim))

    def windows(self, loss):
        """The loss restricted to each segment (None without a loss)."""
        return None if loss is None else segment_windows(self.sim, loss, self.segments)

    def run(self, windows, dtheta, dx0, du):
        """One pass along (dtheta (B, P), dx0 (B, S), du (B, T, A) or None): (loss, derivative, final tangent)."""
        sim, f, seg = self.sim, self.fields, self.segments
        dtype = runtime.numpy_real()
        self.dtheta.from_numpy(np.ascontiguousarray(dtheta, dtype=dtype))
        if du is None:
            self.du.fill(0)
        else:
            self.du.from_numpy(np.ascontiguousarray(du, dtype=dtype))
        self.tangent.from_numpy(np.ascontiguousarray(dx0, dtype=dtype))
        _load_theta(sim.theta, self.dtheta, f.theta, f.theta.dual)
        copy(sim.x0, self.state)
        sim.loss.fill(0)
        sim.loss.grad.fill(1)
        sim.theta.grad.fill(0)
        self.derivative.fill(0)
        per_batch = np.zeros(sim.B)
        for k in range(self.count):
            t0, n = seg.span(k, sim.T)
            _load_segment(self.state, self.tangent, sim.u, self.du, t0, n, f.x, f.x.dual, f.u, f.u.dual, self.serial)
            _forward_steps(sim, f, n, self.serial)
            _unload_segment(f.x, f.x.dual, n, sim.u, t0, seg.xs, seg.xs.grad, self.dxs, seg.us, seg.us.grad,
                            self.state, self.tangent, self.serial)
            if windows is not None:
                windows[k].forward(seg.xs, sim.theta, seg.us, sim.loss, self.serial)
            per_batch = check_finite(sim, seg, t0, n)
            if windows is not None:
                windows[k].backward(seg.xs, sim.theta, seg.us, sim.loss, self.serial)
                _dot_segment(seg.xs.grad, self.dxs, seg.us.grad, self.du, t0, n, self.derivative, self.serial)
        tangent = download(self.tangent)
        if windows is None:
            return None, None, tangent
        if not np.all(np.isfinite(per_batch)):
            raise NonFiniteError(f"{type(sim).__name__}: the loss is non-finite: {per_batch}")
        theta_part = np.sum(download(sim.theta.grad) * dtheta, axis=1)
        return per_batch, self.derivative.to_numpy().astype(np.float64) + theta_part, tangent


def _forward_steps(sim, f, n, serial):
    try:
        with ti.ad.FwdMode(loss=f.anchor, param=f.anchor, seed=[0.0], clear_gradients=False):
            Protocol.of(sim).kernels._rollout_fields(f.x, f.theta, f.u, sim.dt, n, serial)
    except RuntimeError as error:
        if "UnaryOpStmt" not in str(error) and "auto_diff.cpp" not in str(error):
            raise
        # measured: Taichi 1.7's forward mode cannot compile arithmetic on ti.Vector locals (MassSpring, Rigid2D,
        # the networks of tisim.nn: "UnaryOpStmt"), nor StiffChain's step ("auto_diff.cpp ... Not supported");
        # systems written in scalars (the pendulums, cart-pole, contact) work
        raise NotImplementedError(f"forward mode: Taichi 1.7's forward-mode autodiff fails to compile "
                                  f"{type(sim).__name__}'s step ({str(error).strip().splitlines()[-1]}); use "
                                  f"method='unrolled' or 'checkpointed'") from None


def jvp(sim, loss=None, *, params=None, initial_state=None, actions=None):
    """The derivative of the rollout along one input direction, by one forward-mode pass (no per-step storage).

    params: {name: direction}, initial_state: {name: direction}, each value a scalar, the quantity's shape or
    (B, *shape); actions: a direction shaped like the actions, (T, *shape) or (B, T, *shape). Omitted: zero.
    Returns ``Directional``: with a loss, its value and dL along the direction, per batch element; always the
    tangent of the final state.
    """
    dtheta = _direction(sim.param_layout, params or {}, sim.B, "jvp: params")
    dx0 = _direction(sim.state_layout, initial_state or {}, sim.B, "jvp: initial_state")
    du = None
    if actions is not None:
        try:
            du = np.asarray(actions, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"jvp: actions must be numeric, got {type(actions).__name__}") from None
        shape = (sim.T,) + sim.action_shape
        if du.shape not in (shape, (sim.B,) + shape):
            raise ValueError(f"jvp: actions must have shape {shape} or {(sim.B,) + shape}, got {du.shape}")
        if not np.all(np.isfinite(du)):
            raise ValueError("jvp: actions contain NaN or infinite values")
        du = np.broadcast_to(du, (sim.B,) + shape).reshape(sim.B, sim.T, -1)
    forward = _Pass.of(sim)
    value, derivative, tangent = forward.run(forward.windows(loss), dtheta, dx0, du)
    return Directional(value, derivative, sim.state_layout.unpack(tangent))


def _direction(layout, values, batch, argument):
    packed = np.zeros((batch, max(layout.size, 1)))
    if not isinstance(values, dict):
        raise TypeError(f"{argument} must be a dict {{name: direction}}, got {type(values).__name__}")
    for name, value in values.items():
        layout.write(packed, name, layout.validated(name, value, batch, argument, bounded=False))
    return packed


@mechanism("forward_mode")
def forward_gradient(sim, loss, segments=None):
    """``sim.gradient(loss, method="forward_mode")``: dL/dtheta and dL/dx_0, one pass per entry; no actions."""
    forward = _Pass.of(sim)
    windows = forward.windows(loss)
    B, P, S = sim.B, sim.param_layout.size, sim.state_layout.size
    dtheta, dx0 = np.zeros((B, max(P, 1))), np.zeros((B, S))
    params, state = np.zeros((B, P)), np.zeros((B, S))
    per_batch = None
    for e in range(P + S):
        seed_theta, seed_x0 = dtheta.copy(), dx0.copy()
        if e < P:
            seed_theta[:, e] = 1.0
        else:
            seed_x0[:, e - P] = 1.0
        per_batch, derivative, _ = forward.run(windows, seed_theta, seed_x0, None)
        (params[:, e] if e < P else state[:, e - P])[...] = derivative
    if per_batch is None:  # no inputs at all: one pass for the value
        per_batch, _, _ = forward.run(windows, dtheta, dx0, None)
    return Gradient.computed(sim, per_batch, dict(
        params=sim.param_layout.unpack(params), initial_state=sim.state_layout.unpack(state)), "forward mode",
        "method='forward_mode' takes one pass per input entry and computes params and initial_state only; use "
        "method='unrolled' or 'checkpointed' for actions and the adjoint")


def forward_jacobian(sim, wrt):
    """d x_T / d(wrt) by one forward-mode pass per input entry: columns of the Jacobian, shape (B, S, N)."""
    forward = _Pass.of(sim)
    B, P, S, A = sim.B, sim.param_layout.size, sim.state_layout.size, sim.action_layout.size
    count = {"params": P, "initial_state": S, "actions": sim.T * A}[wrt]
    columns = []
    for e in range(count):
        dtheta, dx0, du = np.zeros((B, max(P, 1))), np.zeros((B, S)), None
        if wrt == "params":
            dtheta[:, e] = 1.0
        elif wrt == "initial_state":
            dx0[:, e] = 1.0
        else:
            du = np.zeros((B, sim.T * A))
            du[:, e] = 1.0
            du = du.reshape(B, sim.T, A)
        columns.append(forward.run(None, dtheta, dx0, du)[2])
    return np.stack(columns, axis=2) if columns else np.zeros((B, S, 0))

