"""The continuous adjoint: optimize-then-discretize, for systems defined by an ODE x' = F(x, a; theta).

The engine's gradients are the exact derivatives of the discrete rollout (discretize, then differentiate). The
continuous adjoint differentiates the ODE instead, and only then discretizes:

    lambda(T) = dPhi/dx_T,     d lambda/dt = -(dF/dx)^T lambda,     dJ/dtheta = integral of (dF/dtheta)^T lambda dt,
    dJ/da_k = integral over step k of (dF/da)^T lambda dt,           dJ/dx_0 = lambda(0),

where lambda jumps by dL/dx_t at every step t where the loss looks at the state. Both approximate the derivative of
the continuous-time problem; they differ from each other by O(dt) and agree as dt -> 0 (tests/test_mechanisms.py,
demos/adjoint_gap.py). The discrete one is what an optimizer of the discrete rollout needs; the continuous one
needs nothing of the integrator but the vector field F, and its accuracy is set by the backward integration.

How it runs: the forward sweep keeps checkpoints (as method="checkpointed"); the backward sweep recomputes each
segment's states and integrates lambda (and the parameter and action integrals) backward with classical RK4,
evaluating F at the grid states and their midpoints. Each RK4 stage is one vector-Jacobian product of F alone:
Taichi's reverse mode through the ``rates`` kernel at one state, never through the integrator.
Memory: the checkpoints and one segment, O(B (T/L + L) S), as checkpointing; time: 12 kernel calls per step, so it is
much slower than the discrete gradient on these small systems (see demos/adjoint_gap.py).
"""
import numpy as np
import taichi as ti

from tisim.autodiff.checkpointing import _carry_back, forward_sweep
from tisim.core import runtime
from tisim.core.derivatives import Gradient, NonFiniteError
from tisim.core.engine import mechanism
from tisim.core.protocol import Protocol
from tisim.core.segments import run_segment
from tisim.core.trajectory import copy2, download, is_small

RK4_WEIGHTS = (1 / 6, 1 / 3, 1 / 3, 1 / 6)


@ti.kernel
def _prepare_stage(point: ti.types.ndarray(ndim=2), x: ti.types.ndarray(ndim=2), x_grad: ti.types.ndarray(ndim=2),
                   lam: ti.types.ndarray(ndim=2), weight: float, f_grad: ti.types.ndarray(ndim=2),
                   serial: ti.template()):
    ti.loop_config(serialize=serial)
    for b in range(x.shape[0]):
        for j in range(x.shape[1]):
            x[b, j] = point[b, j]
            x_grad[b, j] = 0.0
            f_grad[b, j] = weight * lam[b, j]


class _VectorField:
    """(dF/dx)^T lambda at one state per batch element, by Taichi's reverse mode through ``rates``; each call also
    adds weight (dF/dtheta)^T lambda to theta.grad and weight (dF/da)^T lambda to u.grad[:, t]."""

    def __init__(self, sim):
        real, B, S = runtime.real(), sim.B, sim.state_layout.size
        self.sim = sim
        self.x = ti.ndarray(real, (B, S), needs_grad=True)
        self.f = ti.ndarray(real, (B, S), needs_grad=True)
        # host buffers at fixed addresses, so that the three calls per stage are bound calls (tisim/core/launch.py)
        self.point, self.lam, self.out = (np.empty((B, S), dtype=runtime.numpy_real()) for _ in range(3))
        self.serial = is_small(B * S * 100, B)

    def vjp(self, point, t, lam, weight):
        sim, p = self.sim, Protocol.of(self.sim)
        launch = p.launch
        self.point[:] = point
        self.lam[:] = lam
        launch(_prepare_stage, self.point, self.x, self.x.grad, self.lam, weight, self.f.grad, self.serial)
        launch(p.kernels._rates, self.x, sim.theta, sim.u, t, self.f, self.serial, grad=True)
        launch(copy2, self.x.grad, self.out, self.serial)
        return self.out.astype(np.float64) / weight


def _check_ode(sim):
    if getattr(type(sim), "rates", None) is None:
        raise TypeError(f"gradient: method='continuous_adjoint' needs a system defined by an ODE (one that implements "
                        f"``rates``, as Pendulum, DoublePendulum and Cartpole do); {type(sim).__name__} does not")


@mechanism("continuous_adjoint")
def adjoint_gradient(sim, loss, segments=None):
    """``sim.gradient(loss, method="continuous_adjoint", segments=...)``; see the module docstring."""
    _check_ode(sim)
    b, windows, per_batch = forward_sweep(sim, loss, segments)
    p = Protocol.of(sim)
    field = p.buffers("vector field", lambda: _VectorField(sim))
    dt = sim.dt
    sim.loss.grad.fill(1)
    sim.theta.grad.fill(0)
    sim.u.grad.fill(0)
    lam = np.zeros((sim.B, sim.state_layout.size))
    for k in reversed(range(b.count)):
        t0, n = b.span(k, sim.T)
        run_segment(sim, b, None, k, t0, n)  # the segment's states again, from its checkpoint
        windows[k].backward(b.xs, sim.theta, b.us, sim.loss, b.serial)  # the loss's own derivatives: the jumps
        _carry_back(b.xs.grad, b.lam, b.us.grad, t0, n, sim.u.grad, b.serial)
        states, jumps = download(b.xs), download(b.xs.grad)
        lam = lam + jumps[:, n]
        for s in reversed(range(n)):
            lam = _rk4_step(field, states[:, s + 1], 0.5 * (states[:, s] + states[:, s + 1]), states[:, s],
                            t0 + s, lam, dt)
            lam = lam + jumps[:, s]
            _check_finite(sim, lam, t0 + s)
    return Gradient.computed(sim, per_batch, dict(
        actions=p.fetch("actions"), params=p.fetch("params"),
        initial_state=sim.state_layout.unpack(lam)), "the continuous adjoint",
        "method='continuous_adjoint' does not keep the adjoint of every step; use method='unrolled'")


def _check_finite(sim, lam, t):
    bad = ~np.all(np.isfinite(lam), axis=1)
    if bad.any():
        b = int(np.argmax(bad))
        raise NonFiniteError(f"{type(sim).__name__}: the continuous adjoint turned non-finite at step {t} of {sim.T} "
                             f"(batch element {b}), integrating backward from the end: RK4 is unstable for this "
                             f"state at dt = {sim.dt:g}; use a smaller dt or method='unrolled'", t, b)


def _rk4_step(field, x_end, x_mid, x_start, t, lam, dt):
    """lambda one step back in time, from t+1 to t: d lambda/ds = (dF/dx)^T lambda in reversed time s; the
    parameter and action integrals accumulate with the same stages and RK4 weights."""
    w1, w2, w3, w4 = (dt * w for w in RK4_WEIGHTS)
    g1 = field.vjp(x_end, t, lam, w1)
    g2 = field.vjp(x_mid, t, lam + 0.5 * dt * g1, w2)
    g3 = field.vjp(x_mid, t, lam + 0.5 * dt * g2, w3)
    g4 = field.vjp(x_start, t, lam + dt * g3, w4)
    return lam + dt * (g1 + 2 * g2 + 2 * g3 + g4) / 6
