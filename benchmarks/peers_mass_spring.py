# The reference mass-spring workload (benchmarks/README.md) written five ways for benchmarks/peers.py: tisim,
# hand-written Taichi (benchmarks/mass_spring.py's DiffTaichi-style class), JAX, Warp and PyTorch.
#
# Every implementation takes actions u of shape (T, S) (numpy, the run's float type) and returns the loss
#     L = -mean_i x_i[T]      (minus the mean x of all particles after T steps)
# and, for `gradient`, dL/du (numpy, (T, S)). Per spring s = (i, j): d = x_j - x_i, r = |d|, n = d / r,
# L_s = rest_s (1 + a[t, s]), f_s = (k (r - L_s) + c (v_j - v_i) . n) n, added to i and subtracted from j; gravity
# m g down; ground y = 0: p = -y, fn = kc p - kd min(vy, 0) while p > 0, ft = -mu fn tanh(vx / eps);
# semi-implicit Euler v += dt f / m, x += dt v. Peer packages are imported inside their factories.
import importlib.util
import pathlib

import numpy as np

K, C, KC, KD, MU, EPS, M, G, DT = 1000.0, 2.0, 5000.0, 20.0, 0.6, 0.05, 0.01, 9.8, 5e-4
GRIDS = {256: (32, 8), 2048: (32, 64)}  # particles: (nx, ny)


def robot(n):
    """The reference grid robot with n particles (tisim.robots.grid: the same topology and order for every peer)."""
    from tisim.robots import grid
    return grid(*GRIDS[n])


def actions(n_springs, horizon, shift=0.0, dtype=np.float32):
    """a[t, s] = 0.1 sin(2 pi 5 t dt + 2 pi s / S + shift), shape (T, S); shift = 0 is the reference workload."""
    t, s = np.arange(horizon)[:, None] * DT, np.arange(n_springs)[None, :]
    return (0.1 * np.sin(2 * np.pi * 5 * t + 2 * np.pi * s / n_springs + shift)).astype(dtype)


class Tisim:
    """tisim's MassSpring with TerminalSum, on its default schedule, "phased": each spring once, then each particle
    (on a CPU each pass one kernel, the backward pass the phases' hand-written reverses; on a GPU a launch per
    phase per step)."""

    def __init__(self, body, horizon, dtype, device=None):  # the arch and float type are tisim.init's
        import tisim
        from tisim.systems.mass_spring import MassSpring, mean_x_weights
        self.sim = MassSpring(horizon=horizon, robot=body, )
        self.loss = tisim.losses.TerminalSum(mean_x_weights(self.sim))

    def forward(self, u):
        self.sim.set_actions(u)
        return float(self.sim.evaluate(self.loss)[0])

    def gradient(self, u):
        self.sim.set_actions(u)
        g = self.sim.gradient(self.loss)
        return g.value, g.actions[0]


def taichi_handwritten(body, horizon, dtype, device=None):
    """benchmarks/mass_spring.py's HandWritten: per-step fields, a launch per phase per step, atomics, ti.ad.Tape."""
    path = pathlib.Path(__file__).with_name("mass_spring.py")
    if not path.exists():
        raise ImportError(f"{path.name} not found (it holds the hand-written Taichi class)")
    spec = importlib.util.spec_from_file_location("_mass_spring_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    hand = module.HandWritten(body.particles, body.springs, horizon)

    class HandWritten:
        def forward(self, u):
            return float(hand.rollout(u))

        def gradient(self, u):
            value, grad = hand.gradient(u)
            return float(value), grad

    return HandWritten()


def jax_scan(body, horizon, dtype, device=None):
    """jax.jit of a lax.scan rollout, spring forces scattered with .at[].add; value_and_grad for the gradient."""
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    i, j = jnp.asarray(body.springs[:, 0]), jnp.asarray(body.springs[:, 1])
    rest = jnp.asarray(body.rest_lengths(), dtype)
    x0 = jnp.asarray(body.particles, dtype)
    v0 = jnp.zeros_like(x0)
    gravity = jnp.asarray([0.0, -M * G], dtype)

    def step(state, a):
        x, v = state
        d = x[j] - x[i]
        r = jnp.sqrt(jnp.sum(d * d, axis=1))
        n = d / r[:, None]
        stretch = K * (r - rest * (1.0 + a)) + C * jnp.sum((v[j] - v[i]) * n, axis=1)
        fs = stretch[:, None] * n
        f = jnp.zeros_like(x).at[i].add(fs).at[j].add(-fs) + gravity
        p, vx, vy = -x[:, 1], v[:, 0], v[:, 1]
        fn = jnp.where(p > 0.0, KC * p - KD * jnp.minimum(vy, 0.0), 0.0)
        ft = -MU * fn * jnp.tanh(vx / EPS)
        f = f + jnp.stack([ft, fn], axis=1)
        v = v + DT * f / M
        return (x + DT * v, v), None

    def loss(u):
        (x, _), _ = jax.lax.scan(step, (x0, v0), u)
        return -jnp.mean(x[:, 0])

    value, value_and_grad = jax.jit(loss), jax.jit(jax.value_and_grad(loss))

    class Jax:
        def forward(self, u):
            return float(value(jnp.asarray(u, dtype)))

        def gradient(self, u):
            v, g = value_and_grad(jnp.asarray(u, dtype))
            return float(v), np.asarray(g)

    return Jax()


_WARP_KERNELS = {}


def _warp_kernels(wp, scalar, vec, degree):
    """One step kernel (per particle, springs gathered from a padded incidence table) and the loss kernel, for one
    float type and largest degree; made once each (Warp compiles a module per distinct closure)."""
    key = (scalar, degree)
    if key in _WARP_KERNELS:
        return _WARP_KERNELS[key]
    k, c, kc, kd, mu, eps, m, g, dt = (scalar(v) for v in (K, C, KC, KD, MU, EPS, M, G, DT))  # noqa: F841

    @wp.kernel
    def mass_spring_step(x: wp.array2d(dtype=vec), v: wp.array2d(dtype=vec), act: wp.array2d(dtype=scalar),
                         spring_of: wp.array2d(dtype=int), other_of: wp.array2d(dtype=int),
                         present: wp.array2d(dtype=scalar), rest: wp.array(dtype=scalar), t: int):
        i = wp.tid()
        xi = x[t, i]
        vi = v[t, i]
        f = vec(scalar(0.0), -m * g)
        for q in range(degree):  # a constant bound: unrolled, so the local accumulator is differentiable
            s = spring_of[i, q]
            j = other_of[i, q]
            d = x[t, j] - xi
            r = wp.length(d)
            n = d / r
            stretch = k * (r - rest[s] * (scalar(1.0) + act[t, s])) + c * wp.dot(v[t, j] - vi, n)
            f = f + present[i, q] * stretch * n
        p = -xi[1]
        fn = scalar(0.0)
        if p > scalar(0.0):
            fn = kc * p - kd * wp.min(vi[1], scalar(0.0))
        f = f + vec(-mu * fn * wp.tanh(vi[0] / eps), fn)
        v_next = vi + dt * f / m
        v[t + 1, i] = v_next
        x[t + 1, i] = xi + dt * v_next

    @wp.kernel
    def minus_mean_x(x: wp.array2d(dtype=vec), t: int, weight: scalar, loss: wp.array(dtype=scalar)):
        i = wp.tid()
        wp.atomic_add(loss, 0, -weight * x[t, i][0])

    _WARP_KERNELS[key] = mass_spring_step, minus_mean_x
    return _WARP_KERNELS[key]


def warp_tape(body, horizon, dtype, device="cpu"):
    """Warp: (T+1, N) position and velocity arrays, one launch per step (springs gathered per particle), wp.Tape."""
    import warp as wp
    wp.config.quiet = True
    wp.init()
    scalar, vec = (wp.float32, wp.vec2) if dtype == np.float32 else (wp.float64, wp.vec2d)
    spring_of, other_of, present = body.incidence()
    N, S, T = len(body.particles), len(body.springs), horizon
    step, minus_mean_x = _warp_kernels(wp, scalar, vec, spring_of.shape[1])
    positions = np.zeros((T + 1, N, 2), dtype)
    positions[0] = body.particles
    x = wp.array(positions, dtype=vec, device=device, requires_grad=True)
    v = wp.zeros((T + 1, N), dtype=vec, device=device, requires_grad=True)
    act = wp.zeros((T, S), dtype=scalar, device=device, requires_grad=True)
    loss = wp.zeros(1, dtype=scalar, device=device, requires_grad=True)
    topology = [wp.array(spring_of, dtype=int, device=device), wp.array(other_of, dtype=int, device=device),
                wp.array(present.astype(dtype), dtype=scalar, device=device),
                wp.array(body.rest_lengths().astype(dtype), dtype=scalar, device=device)]

    def run(u):
        act.assign(u)
        loss.zero_()
        for t in range(T):
            wp.launch(step, dim=N, inputs=[x, v, act, *topology, t], device=device)
        wp.launch(minus_mean_x, dim=N, inputs=[x, T, 1.0 / N, loss], device=device)

    class Warp:
        def forward(self, u):
            run(u)
            return float(loss.numpy()[0])

        def gradient(self, u):
            tape = wp.Tape()
            with tape:
                run(u)
            tape.backward(loss=loss)
            value, grad = float(loss.numpy()[0]), act.grad.numpy().copy()
            tape.zero()
            return value, grad

    return Warp()


def torch_eager(body, horizon, dtype, device="cpu"):
    """PyTorch eager: the step as tensor ops on (N, 2) and (S,) tensors, index_add_ for the springs, autograd."""
    import torch
    tdtype = torch.float32 if dtype == np.float32 else torch.float64
    i, j = (torch.from_numpy(body.springs[:, k].copy()).to(device) for k in (0, 1))
    rest = torch.tensor(body.rest_lengths(), dtype=tdtype, device=device)
    x0 = torch.tensor(body.particles, dtype=tdtype, device=device)
    gravity = torch.tensor([0.0, -M * G], dtype=tdtype, device=device)

    def loss(u):
        x, v = x0, torch.zeros_like(x0)
        for a in u.unbind(0):
            d = x.index_select(0, j) - x.index_select(0, i)  # index_select's backward is an index_add
            r = torch.sqrt((d * d).sum(1))
            n = d / r[:, None]
            dv = v.index_select(0, j) - v.index_select(0, i)
            stretch = K * (r - rest * (1.0 + a)) + C * (dv * n).sum(1)
            fs = stretch[:, None] * n
            f = torch.zeros_like(x).index_add(0, i, fs).index_add(0, j, -fs) + gravity
            p, vx, vy = -x[:, 1], v[:, 0], v[:, 1]
            fn = torch.where(p > 0.0, KC * p - KD * torch.clamp(vy, max=0.0), torch.zeros_like(p))
            ft = -MU * fn * torch.tanh(vx / EPS)
            f = f + torch.stack([ft, fn], 1)
            v = v + DT * f / M
            x = x + DT * v
        return -x[:, 0].mean()

    class Torch:
        def forward(self, u):
            with torch.no_grad():
                return float(loss(torch.from_numpy(u).to(device)))

        def gradient(self, u):
            actions = torch.from_numpy(u.copy()).to(device).requires_grad_()
            value = loss(actions)
            value.backward()
            return float(value.detach()), actions.grad.cpu().numpy()

    return Torch()


IMPLEMENTATIONS = {  # row label: (factory, package the row needs)
    "tisim": (Tisim, "taichi"),
    "hand-written Taichi (launch per phase per step, Tape)": (taichi_handwritten, "taichi"),
    "JAX (jit, lax.scan)": (jax_scan, "jax"),
    "Warp (launch per step, Tape)": (warp_tape, "warp"),
    "PyTorch eager": (torch_eager, "torch"),
}
