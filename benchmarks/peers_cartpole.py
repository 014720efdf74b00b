# The cart-pole of benchmarks/peers.py written five ways: tisim, hand-written Taichi, JAX, Warp and PyTorch.
#
# Every implementation takes actions u of shape (B, T) [N] (numpy) and returns the loss
#     L = sum_b |(x, x_dot, theta, theta_dot)_b[T]|^2
# and, for `gradient`, dL/du (numpy, (B, T)). Equations: Gymnasium's CartPole with a continuous force F, theta
# from upright, semi-implicit Euler (velocities first); exactly tisim.systems.Cartpole with mu_cart = 0:
#     temp = (F + m_p l w^2 sin th) / M,  M = m_c + m_p
#     th_acc = (g sin th - cos th temp) / (l (4/3 - m_p cos^2 th / M));  x_acc = temp - m_p l th_acc cos th / M
#     x_dot += dt x_acc;  x += dt x_dot;  w += dt th_acc;  th += dt w
# Peer packages are imported inside their factories, so a missing one costs its row only.
import numpy as np

G, M_CART, M_POLE, L_HALF, DT = 9.8, 1.0, 0.1, 0.5, 0.02
TOTAL = M_CART + M_POLE


def initial_states(thetas):
    """(B, 4) initial states (x, x_dot, theta, theta_dot): at rest, pole at the given angles [rad]."""
    s0 = np.zeros((len(thetas), 4))
    s0[:, 2] = thetas
    return s0


class Tisim:
    """tisim.systems.Cartpole (one kernel for the whole rollout) with TerminalTarget on all four states."""

    def __init__(self, s0, horizon, device=None):  # the arch is tisim.init's
        import tisim
        values = dict(zip(("x", "x_dot", "theta", "theta_dot"), s0.T))
        self.sim = tisim.systems.Cartpole(horizon=horizon, batch=len(s0), mu_cart=0.0, **values)
        self.loss = tisim.losses.TerminalTarget({name: 0.0 for name in values})

    def forward(self, u):
        self.sim.set_actions(u)
        return float(self.sim.evaluate(self.loss).sum())

    def gradient(self, u):
        self.sim.set_actions(u)
        g = self.sim.gradient(self.loss)
        return g.value, g.actions


def taichi_handwritten(s0, horizon, device=None):
    """DiffTaichi style: per-step fields (B, T+1), one kernel launch per step, ti.ad.Tape."""
    import taichi as ti

    @ti.data_oriented
    class HandWritten:
        def __init__(self):
            B, T = self.B, self.T = len(s0), horizon
            self.serial = B == 1  # a parallel loop over one element would pay the thread pool's dispatch
            self.x, self.x_dot, self.theta, self.theta_dot = (
                ti.field(ti.f64, (B, T + 1), needs_grad=True) for _ in range(4))
            self.u = ti.field(ti.f64, (B, T), needs_grad=True)
            self.loss = ti.field(ti.f64, (), needs_grad=True)
            for k, state in enumerate((self.x, self.x_dot, self.theta, self.theta_dot)):
                column = np.zeros((B, T + 1))
                column[:, 0] = s0[:, k]
                state.from_numpy(column)  # step 0 stays; every rollout overwrites steps 1..T

        @ti.kernel
        def step(self, t: ti.i32, serial: ti.template()):
            ti.loop_config(serialize=serial)
            for b in range(self.B):
                theta, w = self.theta[b, t], self.theta_dot[b, t]
                sin, cos = ti.sin(theta), ti.cos(theta)
                temp = (self.u[b, t] + M_POLE * L_HALF * w * w * sin) / TOTAL
                theta_acc = (G * sin - cos * temp) / (L_HALF * (4.0 / 3.0 - M_POLE * cos * cos / TOTAL))
                x_acc = temp - M_POLE * L_HALF * theta_acc * cos / TOTAL
                x_dot = self.x_dot[b, t] + DT * x_acc
                w_next = w + DT * theta_acc
                self.x_dot[b, t + 1] = x_dot
                self.x[b, t + 1] = self.x[b, t] + DT * x_dot
                self.theta_dot[b, t + 1] = w_next
                self.theta[b, t + 1] = theta + DT * w_next

        @ti.kernel
        def terminal_loss(self, serial: ti.template()):
            ti.loop_config(serialize=serial)
            for b in range(self.B):
                T = self.T
                self.loss[None] += (self.x[b, T] ** 2 + self.x_dot[b, T] ** 2 + self.theta[b, T] ** 2
                                    + self.theta_dot[b, T] ** 2)

        def run(self):
            for t in range(self.T):
                self.step(t, self.serial)
            self.terminal_loss(self.serial)

        def forward(self, u):
            self.u.from_numpy(u)
            self.loss.fill(0.0)
            self.run()
            return self.loss[None]

        def gradient(self, u):
            self.u.from_numpy(u)
            with ti.ad.Tape(loss=self.loss):  # clears every field's gradient, zeroes loss, then reverse replay
                self.run()
            return self.loss[None], self.u.grad.to_numpy()

    return HandWritten()


def jax_scan(s0, horizon, device=None):
    """jax.jit(value_and_grad) of a lax.scan rollout; jax.vmap over the batch when B > 1. float64 (x64 enabled)."""
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)

    def step(state, force):
        x, x_dot, theta, w = state
        sin, cos = jnp.sin(theta), jnp.cos(theta)
        temp = (force + M_POLE * L_HALF * w * w * sin) / TOTAL
        theta_acc = (G * sin - cos * temp) / (L_HALF * (4.0 / 3.0 - M_POLE * cos * cos / TOTAL))
        x_acc = temp - M_POLE * L_HALF * theta_acc * cos / TOTAL
        x_dot = x_dot + DT * x_acc
        w = w + DT * theta_acc
        return (x + DT * x_dot, x_dot, theta + DT * w, w), None

    def one(u, start):  # u (T,), start (4,)
        final, _ = jax.lax.scan(step, tuple(start), u)
        return sum(v * v for v in final)

    batched = len(s0) > 1
    total = (lambda u, start: jnp.sum(jax.vmap(one)(u, start))) if batched else (lambda u, start: one(u[0], start[0]))
    value_and_grad, value = jax.jit(jax.value_and_grad(total)), jax.jit(total)
    start = jnp.asarray(s0)

    class Jax:
        def forward(self, u):
            return float(value(jnp.asarray(u), start))

        def gradient(self, u):
            loss, grad = value_and_grad(jnp.asarray(u), start)
            return float(loss), np.asarray(grad)

    return Jax()


def warp_tape(s0, horizon, device="cpu"):
    """Warp: state array (B, T+1, 4), one launch per step (dim B), wp.Tape for the backward pass. float64."""
    import warp as wp
    wp.config.quiet = True
    wp.init()
    f64 = wp.float64

    @wp.kernel
    def cartpole_step(s: wp.array3d(dtype=f64), u: wp.array2d(dtype=f64), t: int, g: f64, m_pole: f64,
                      l: f64, total: f64, dt: f64):
        b = wp.tid()
        theta, w = s[b, t, 2], s[b, t, 3]
        sin, cos = wp.sin(theta), wp.cos(theta)
        temp = (u[b, t] + m_pole * l * w * w * sin) / total
        theta_acc = (g * sin - cos * temp) / (l * (f64(4.0) / f64(3.0) - m_pole * cos * cos / total))
        x_acc = temp - m_pole * l * theta_acc * cos / total
        x_dot = s[b, t, 1] + dt * x_acc
        w_next = w + dt * theta_acc
        s[b, t + 1, 0] = s[b, t, 0] + dt * x_dot
        s[b, t + 1, 1] = x_dot
        s[b, t + 1, 2] = theta + dt * w_next
        s[b, t + 1, 3] = w_next

    @wp.kernel
    def terminal_loss(s: wp.array3d(dtype=f64), t: int, loss: wp.array(dtype=f64)):
        b = wp.tid()
        wp.atomic_add(loss, 0, s[b, t, 0] * s[b, t, 0] + s[b, t, 1] * s[b, t, 1] + s[b, t, 2] * s[b, t, 2]
                      + s[b, t, 3] * s[b, t, 3])

    B, T = len(s0), horizon
    states = np.zeros((B, T + 1, 4))
    states[:, 0] = s0
    s = wp.array(states, dtype=f64, device=device, requires_grad=True)
    u = wp.zeros((B, T), dtype=f64, device=device, requires_grad=True)
    loss = wp.zeros(1, dtype=f64, device=device, requires_grad=True)
    constants = (G, M_POLE, L_HALF, TOTAL, DT)

    def run(u_host):
        u.assign(u_host)
        loss.zero_()
        for t in range(T):
            wp.launch(cartpole_step, dim=B, inputs=[s, u, t, *constants], device=device)
        wp.launch(terminal_loss, dim=B, inputs=[s, T, loss], device=device)

    class Warp:
        def forward(self, u_host):
            run(u_host)
            return float(loss.numpy()[0])

        def gradient(self, u_host):
            tape = wp.Tape()
            with tape:
                run(u_host)
            tape.backward(loss=loss)
            value, grad = float(loss.numpy()[0]), u.grad.numpy().copy()
            tape.zero()  # the next pass accumulates into zeroed gradients
            return value, grad

    return Warp()


def torch_eager(s0, horizon, device="cpu"):
    """PyTorch eager: the step as tensor ops on (B,) columns, autograd for the backward pass. float64."""
    import torch

    start = torch.from_numpy(s0.copy()).to(device)

    def rollout(u):
        x, x_dot, theta, w = start.unbind(1)
        for force in u.unbind(1):  # one view per step; unbind's backward stacks, a slice's would scatter
            sin, cos = torch.sin(theta), torch.cos(theta)
            temp = (force + M_POLE * L_HALF * w * w * sin) / TOTAL
            theta_acc = (G * sin - cos * temp) / (L_HALF * (4.0 / 3.0 - M_POLE * cos * cos / TOTAL))
            x_acc = temp - M_POLE * L_HALF * theta_acc * cos / TOTAL
            x_dot = x_dot + DT * x_acc
            w = w + DT * theta_acc
            x, theta = x + DT * x_dot, theta + DT * w
        return (x * x + x_dot * x_dot + theta * theta + w * w).sum()

    class Torch:
        def forward(self, u):
            with torch.no_grad():
                return float(rollout(torch.from_numpy(u).to(device)))

        def gradient(self, u):
            actions = torch.from_numpy(u.copy()).to(device).requires_grad_()
            loss = rollout(actions)
            loss.backward()
            return float(loss.detach()), actions.grad.cpu().numpy()

    return Torch()


IMPLEMENTATIONS = {  # row label: (factory, package the row needs)
    "tisim": (Tisim, "taichi"),
    "hand-written Taichi (launch per step, Tape)": (taichi_handwritten, "taichi"),
    "JAX (jit, lax.scan; vmap when B > 1)": (jax_scan, "jax"),
    "Warp (launch per step, Tape)": (warp_tape, "warp"),
    "PyTorch eager": (torch_eager, "torch"),
}
