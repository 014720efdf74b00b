# The MPM workload of benchmarks/peers.py written three ways: tisim's MPM (tisim/systems/mpm/system.py), hand-written
# Taichi in DiffTaichi's style, and JAX.
#
# Every implementation takes actions u of shape (T, A) (numpy, the run's float type; A actuators) and returns the loss
#     L = -mean_p x_p[T]      (minus the mean x of all material points after T steps)
# and, for `gradient`, dL/du (numpy, (T, A)). The equations are tisim's MLS-MPM with APIC transfers, neo-Hookean
# material, sticky floor, on an n_grid^d grid over the unit square (cube), h = 1 / n_grid, per step t:
#     q = x_p / h, base = int(q - 0.5), fx = q - base; weights per axis w0 = (1.5 - fx)^2 / 2, w1 = 0.75 - (fx - 1)^2,
#     w2 = (fx - 0.5)^2 / 2, w_ip their product over the axes; cell index base + offset clamped to [0, n_grid - 1]
#     per axis, d_ip = (offset - fx) h (unclamped)
#     F' = (I + dt C_p) F_p; tau = mu (F' F'^T - I) + lambda ln(det F') I + a s (F' e_y)(F' e_y)^T for the point's
#     actuator's action a = u[t, actuator] (s = "actuation"); A_p = m C_p - 4 dt V n_grid^2 tau
#     m_i += w_ip m; (mv)_i += w_ip (m v_p + A_p d_ip)
#     free = (mv)_i / max(m_i, 1e-30) (0 where m_i = 0) - dt g e_y; per axis k the component free_k is zeroed inside
#     the band of BAND cells at either end of axis k when it points into that wall; the sticky floor then zeroes
#     every component of a cell in the bottom band whose free y velocity is < 0
#     v_p = sum_i w_ip v_i; C_p = 4 n_grid^2 sum_i w_ip v_i d_ip^T; x_p += dt v_p; F_p = F'
# with m = rho V, V the volume per point, mu = E / (2 (1 + nu)), lambda = E nu / ((1 + nu)(1 - 2 nu)).
# Peer packages are imported inside their factories.
from dataclasses import dataclass

import numpy as np

# tisim MPM's defaults, written out for the peers (Tisim checks they still are tisim's)
E, NU, RHO, G, ACTUATION, DT = 3000.0, 0.2, 1000.0, 9.8, 1000.0, 2e-4
BAND = 3  # tisim.systems.mpm.BAND: boundary cells on each side of each axis
ACTUATORS = 4
# the workloads: dim -> (n_grid, points per axis); a lattice of spacing h / 2 (2^d points per cell)
SIZES = {2: (64, (64, 64)), 3: (32, (20, 20, 20))}
CHECKS = {2: (16, (16, 12)), 3: (12, (6, 6, 6))}  # small instances for the float64 agreement check


@dataclass
class Scene:
    """A body of material points (tisim.systems.mpm.Body) and the grid it lives on."""

    body: object
    n_grid: int

    @property
    def dim(self):
        return self.body.dim


def block(dim, n_grid, points):
    """A box of points on a lattice of spacing h / 2, centred in x (and z) and resting on the floor (its bottom at the
    top of the floor's band, where tisim's default body sits); actuator a drives the a-th of 4 equal slabs along x,
    so that each action moves a different part of the body (no passive points)."""
    from tisim.systems.mpm import Body
    spacing = 0.5 / n_grid
    size = np.asarray(points) * spacing
    lower = 0.5 - size / 2
    lower[1] = BAND / n_grid
    body = Body.box(lower, lower + size, spacing)
    assert len(body.particles) == np.prod(points), (len(body.particles), points)
    slab = np.floor(ACTUATORS * (body.particles[:, 0] - lower[0]) / size[0]).astype(np.int32)
    body.actuators = np.minimum(slab, ACTUATORS - 1)
    return Scene(body, n_grid)


def actions(horizon, shift=0.0, dtype=np.float32):
    """u[t, a] = 0.5 sin(2 pi 5 t dt + 2 pi a / A + shift), shape (T, A): each slab pulsing at 5 Hz, out of phase."""
    t, a = np.arange(horizon)[:, None] * DT, np.arange(ACTUATORS)[None, :]
    return (0.5 * np.sin(2 * np.pi * 5 * t + 2 * np.pi * a / ACTUATORS + shift)).astype(dtype)


class Tisim:
    """tisim's MPM with TerminalSum on the x component of "pos", on its CPU schedule: the forward pass one launch
    (scatter and gather per point, their cells unrolled), the backward pass one launch too (each step's grid
    recomputed, then every phase's hand-written reverse)."""

    def __init__(self, scene, horizon, dtype, device=None):  # the arch and float type are tisim.init's
        import tisim
        from tisim.systems.mpm import BAND as band
        from tisim.systems.mpm import MPM
        assert band == BAND, "tisim's MPM changed its boundary band; update peers_mpm.BAND"
        self.sim = MPM(horizon=horizon, body=scene.body, n_grid=scene.n_grid)
        for name, value in (("E", E), ("nu", NU), ("rho", RHO), ("g", G), ("actuation", ACTUATION)):
            assert np.allclose(self.sim.params[name], value), f"tisim's MPM changed its default {name}"
        assert self.sim.dt == DT and self.sim.options["floor"] == "sticky" and \
            self.sim.options["material"] == "neo_hookean", "tisim's MPM changed its defaults"
        n = len(scene.body.particles)
        w = np.zeros((n, scene.dim))
        w[:, 0] = -1.0 / n
        self.loss = tisim.losses.TerminalSum({"pos": w})

    def forward(self, u):
        self.sim.set_actions(u)
        return float(self.sim.evaluate(self.loss)[0])

    def gradient(self, u):
        self.sim.set_actions(u)
        g = self.sim.gradient(self.loss)
        return g.value, g.actions[0]


def taichi_handwritten(scene, horizon, dtype, device=None):
    """DiffTaichi's style: per-step (T+1, N) particle fields, one grid reused by every step, a launch per phase per
    step, and the grid recomputed per step in the backward pass (ti.ad.grad_replaced), all under ti.ad.Tape."""
    import taichi as ti

    from tisim.core.runtime import numpy_real, real

    body, n_grid, dim = scene.body, scene.n_grid, scene.dim
    N, T, A = len(body.particles), horizon, ACTUATORS
    inv_h, volume = float(n_grid), float(body.volume)
    mass = RHO * volume
    mu, la = E / (2 * (1 + NU)), E * NU / ((1 + NU) * (1 - 2 * NU))

    @ti.data_oriented
    class HandTaichi:
        def __init__(self):
            vector, matrix = (lambda: ti.Vector.field(dim, real(), (T + 1, N), needs_grad=True),
                              lambda: ti.Matrix.field(dim, dim, real(), (T + 1, N), needs_grad=True))
            self.x, self.v, self.C, self.F = vector(), vector(), matrix(), matrix()
            cells = (n_grid,) * dim
            self.grid_m = ti.field(real(), cells, needs_grad=True)
            self.grid_mv = ti.Vector.field(dim, real(), cells, needs_grad=True)
            self.grid_v = ti.Vector.field(dim, real(), cells, needs_grad=True)
            self.act = ti.field(real(), (T, A), needs_grad=True)
            self.actuator, self.actuated = ti.field(ti.i32, N), ti.field(real(), N)
            self.loss = ti.field(real(), (), needs_grad=True)
            x = np.zeros((T + 1, N, dim), numpy_real())
            x[0] = body.particles
            F = np.zeros((T + 1, N, dim, dim), numpy_real())
            F[0] = np.eye(dim)
            self.x.from_numpy(x)  # step 0 never changes; every rollout overwrites steps 1..T
            self.F.from_numpy(F)
            self.actuator.from_numpy(np.maximum(body.actuators, 0))
            self.actuated.from_numpy((body.actuators >= 0).astype(numpy_real()))

        @ti.kernel
        def clear_grid(self):
            for I in ti.grouped(self.grid_m):  # gradients too: each step's backward pass starts from a clean grid
                self.grid_m[I] = 0.0
                self.grid_mv[I] = ti.Vector.zero(float, dim)
                self.grid_v[I] = ti.Vector.zero(float, dim)
                self.grid_m.grad[I] = 0.0
                self.grid_mv.grad[I] = ti.Vector.zero(float, dim)
                self.grid_v.grad[I] = ti.Vector.zero(float, dim)

        @ti.func
        def stencil(self, s, p):
            q = self.x[s, p] * inv_h
            base = ti.cast(q - 0.5, ti.i32)
            fx = q - ti.cast(base, float)
            w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
            return base, fx, w

        @ti.kernel
        def p2g(self, s: ti.i32):
            for p in range(N):
                base, fx, w = self.stencil(s, p)
                identity = ti.Matrix.identity(float, dim)
                F = (identity + DT * self.C[s, p]) @ self.F[s, p]
                self.F[s + 1, p] = F
                fibre = F @ ti.Vector.unit(dim, 1, float)
                a = self.actuated[p] * self.act[s, self.actuator[p]]
                tau = mu * (F @ F.transpose() - identity) + la * ti.log(F.determinant()) * identity \
                    + a * ACTUATION * fibre.outer_product(fibre)
                affine = mass * self.C[s, p] - (4.0 * DT * volume * inv_h ** 2) * tau
                for offset in ti.static(ti.grouped(ti.ndrange(*([3] * dim)))):
                    weight = 1.0
                    for k in ti.static(range(dim)):
                        weight *= w[offset[k]][k]
                    d = (ti.cast(offset, float) - fx) / inv_h
                    cell = ti.min(ti.max(base + offset, 0), n_grid - 1)
                    self.grid_m[cell] += weight * mass
                    self.grid_mv[cell] += weight * (mass * self.v[s, p] + affine @ d)

        @ti.kernel
        def grid_op(self):
            for I in ti.grouped(self.grid_m):
                m = self.grid_m[I]
                free = self.grid_mv[I] / ti.max(m, 1e-30) * ti.select(m > 0.0, 1.0, 0.0) \
                    - DT * G * ti.Vector.unit(dim, 1, float)
                v = ti.Vector([free[k] * ti.select((I[k] < BAND and free[k] < 0.0)
                                                   or (I[k] >= n_grid - BAND and free[k] > 0.0), 0.0, 1.0)
                               for k in ti.static(range(dim))])
                pressing = I[1] < BAND and free[1] < 0.0  # the sticky floor
                self.grid_v[I] = v * ti.select(pressing, 0.0, 1.0)

        @ti.kernel
        def g2p(self, s: ti.i32):
            for p in range(N):
                base, fx, w = self.stencil(s, p)
                v = ti.Vector.zero(float, dim)
                C = ti.Matrix.zero(float, dim, dim)
                for offset in ti.static(ti.grouped(ti.ndrange(*([3] * dim)))):
                    weight = 1.0
                    for k in ti.static(range(dim)):
                        weight *= w[offset[k]][k]
                    d = (ti.cast(offset, float) - fx) / inv_h
                    cell = ti.min(ti.max(base + offset, 0), n_grid - 1)
                    vi = weight * self.grid_v[cell]
                    v += vi
                    C += (4.0 * inv_h ** 2) * vi.outer_product(d)
                self.v[s + 1, p] = v
                self.C[s + 1, p] = C
                self.x[s + 1, p] = self.x[s, p] + DT * v

        @ti.kernel
        def compute_loss(self):
            for p in range(N):
                self.loss[None] -= self.x[T, p][0] / N

        @ti.ad.grad_replaced
        def step(self, s):
            self.clear_grid()
            self.p2g(s)
            self.grid_op()
            self.g2p(s)

        @ti.ad.grad_for(step)
        def step_grad(self, s):
            self.clear_grid()  # the forward pass left the last step's grid: recompute step s's
            self.p2g(s)
            self.grid_op()
            self.g2p.grad(s)
            self.grid_op.grad()
            self.p2g.grad(s)

        def run(self):
            for s in range(T):
                self.step(s)
            self.compute_loss()

        def forward(self, u):
            self.act.from_numpy(u)
            self.loss[None] = 0.0
            self.run()
            return float(self.loss[None])

        def gradient(self, u):
            self.act.from_numpy(u)
            with ti.ad.Tape(loss=self.loss):  # clears every gradient, sets loss = 0, runs the grads in reverse
                self.run()
            return float(self.loss[None]), self.act.grad.to_numpy()

    return HandTaichi()


def jax_scan(scene, horizon, dtype, device=None):
    """jax.jit of a lax.scan over steps, all points' stencils at once: the grid by .at[].add, gathered by indexing;
    value_and_grad for the gradient."""
    import itertools

    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    body, n, dim = scene.body, scene.n_grid, scene.dim
    N = len(body.particles)
    volume = float(body.volume)
    mass = RHO * volume
    mu, la = E / (2 * (1 + NU)), E * NU / ((1 + NU) * (1 - 2 * NU))
    offsets = np.array(list(itertools.product(range(3), repeat=dim)), np.int32)  # (3^d, d)
    strides = jnp.asarray(n ** np.arange(dim), jnp.int32)  # cell index: axis 0 fastest, as tisim's
    axis_index = (np.arange(n ** dim)[:, None] // np.asarray(n ** np.arange(dim))[None, :]) % n  # (cells, d)
    low, high = jnp.asarray(axis_index < BAND), jnp.asarray(axis_index >= n - BAND)
    floor = jnp.asarray(axis_index[:, 1] < BAND)
    offsets_f = jnp.asarray(offsets, dtype)
    eye = jnp.eye(dim, dtype=dtype)
    up = eye[1]
    actuator = jnp.asarray(np.maximum(body.actuators, 0))
    actuated = jnp.asarray(body.actuators >= 0, dtype)
    x0 = jnp.asarray(body.particles, dtype)
    state0 = (x0, jnp.zeros_like(x0), jnp.zeros((N, dim, dim), dtype), jnp.broadcast_to(eye, (N, dim, dim)))

    def det(F):
        if dim == 2:
            return F[:, 0, 0] * F[:, 1, 1] - F[:, 0, 1] * F[:, 1, 0]
        return (F[:, 0, 0] * (F[:, 1, 1] * F[:, 2, 2] - F[:, 1, 2] * F[:, 2, 1])
                - F[:, 0, 1] * (F[:, 1, 0] * F[:, 2, 2] - F[:, 1, 2] * F[:, 2, 0])
                + F[:, 0, 2] * (F[:, 1, 0] * F[:, 2, 1] - F[:, 1, 1] * F[:, 2, 0]))

    def stencil(x):
        """B-spline weights (N, 3^d), cell indices (N, 3^d) and x_i - x_p (N, 3^d, d) of every point's stencil."""
        q = x * n
        base = (q - 0.5).astype(jnp.int32)  # truncation, as Taichi's cast (q > 0.5 inside the walls)
        fx = q - base
        w = jnp.stack([0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2], axis=1)  # (N, 3, d)
        weight = jnp.prod(jnp.stack([w[:, offsets[:, k], k] for k in range(dim)], axis=-1), axis=-1)
        cell = jnp.clip(base[:, None, :] + offsets[None], 0, n - 1) @ strides
        d = (offsets_f[None] - fx[:, None, :]) / n
        return weight, cell, d

    def step(state, a):
        x, v, C, F = state
        weight, cell, d = stencil(x)
        F = (eye + DT * C) @ F
        fibre = F[:, :, 1]
        act = actuated * a[actuator]
        tau = mu * (F @ jnp.swapaxes(F, 1, 2) - eye) + (la * jnp.log(det(F)))[:, None, None] * eye \
            + (act * ACTUATION)[:, None, None] * fibre[:, :, None] * fibre[:, None, :]
        affine = mass * C - (4.0 * DT * volume * n ** 2) * tau
        momentum = mass * v[:, None, :] + jnp.einsum("pij,psj->psi", affine, d)
        grid_m = jnp.zeros(n ** dim, dtype).at[cell].add(weight * mass)
        grid_mv = jnp.zeros((n ** dim, dim), dtype).at[cell].add(weight[..., None] * momentum)
        free = grid_mv / jnp.maximum(grid_m, 1e-30)[:, None] * (grid_m > 0.0)[:, None] - DT * G * up
        into_wall = (low & (free < 0.0)) | (high & (free > 0.0))
        grid_v = jnp.where(into_wall, 0.0, free)
        grid_v = jnp.where((floor & (free[:, 1] < 0.0))[:, None], 0.0, grid_v)  # the sticky floor
        vi = weight[..., None] * grid_v[cell]  # (N, 3^d, d)
        v = vi.sum(axis=1)
        C = (4.0 * n ** 2) * jnp.einsum("psi,psj->pij", vi, d)
        return (x + DT * v, v, C, F), None

    def loss(u):
        (x, _, _, _), _ = jax.lax.scan(step, state0, u)
        return -jnp.mean(x[:, 0])

    value, value_and_grad = jax.jit(loss), jax.jit(jax.value_and_grad(loss))

    class Jax:
        def forward(self, u):
            return float(value(jnp.asarray(u, dtype)))

        def gradient(self, u):
            v, g = value_and_grad(jnp.asarray(u, dtype))
            return float(v), np.asarray(g)

    return Jax()


IMPLEMENTATIONS = {  # row label: (factory, package the row needs)
    "tisim": (Tisim, "taichi"),
    "hand-written Taichi (launch per phase per step, grid recomputed, Tape)": (taichi_handwritten, "taichi"),
    "JAX (jit, lax.scan)": (jax_scan, "jax"),
}
