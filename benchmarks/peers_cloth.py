# The cloth workload of benchmarks/peers.py written four ways: tisim's MassSpring on a tisim.robots.cloth sheet,
# hand-written Taichi in DiffTaichi's style (a launch per step, ti.ad.Tape), JAX (jit + lax.scan), and Warp with
# wp.Tape, stepped from Python as Warp's own cloth examples run, in two forms: a launch per step (each particle
# gathers its springs) and, as warp.sim's integrators do, two launches per step (each spring once, its force added
# to both ends with atomics; then each particle moved).
#
# The sheet: nx x ny particles in 3D, hanging in the x-y plane from its two top corners (pinned), with structural,
# shear and bending springs (tisim.robots.cloth: the same topology and order for every peer); its initial positions
# are the builder's with a small ripple across the sheet (z += RIPPLE sin(..)), so the springs start slightly
# stretched out of plane and the motion is 3D. The input u of every iteration is the per-spring stiffness k (S,)
# (numpy, the run's float type); every implementation returns the loss
#     L = sum_i w_i . x_i[T]     (fixed positive weights w (N, 3) of mean 1 / N: about the mean of x + y + z)
# and, for `gradient`, the tuple (dL/dk (S,), dL/dx_0 (N, 3)), dL/dx_0 the gradient by the initial positions.
# The equations are tisim's MassSpring (tisim/systems/mass_spring/system.py) without actuators, per step:
#     spring s = (i, j): d = x_j - x_i, r = |d|, n = d / r, f_s = (k_s (r - rest_s) + c (v_j - v_i) . n) n, added to
#     i and subtracted from j
#     ground y = 0 (y up), depth p = -y: fn = (kc p - kd min(v_y, 0)) [p > 0]; tangential v_t = (v_x, 0, v_z),
#     s = sqrt(|v_t|^2 + 1e-30), ft = -mu fn tanh(s / eps) v_t / s (isotropic regularized Coulomb)
#     F = sum of spring forces - m g e_y + fn e_y + ft - drag v
#     v' = v + dt F / m, x' = x + dt v'; a pinned particle keeps x and has v = 0 (x' = x + free (x' - x), v' = free v')
# The timed cloth hangs well above the ground (no contact, lowest point 0.22 m), but every implementation still
# evaluates the ground law for every particle and step; the float64 agreement check uses a small sheet whose bottom
# row starts 1 mm above the ground and lands on it (148 of its 3,264 particle-steps in contact, slipping at up to
# 0.025 m/s, half of eps). Peer packages are imported inside their factories.
from dataclasses import dataclass

import numpy as np

# tisim MassSpring's defaults (Tisim checks they still are tisim's), plus air drag
M, G, C, KC, KD, MU, EPS, DT = 0.01, 9.8, 2.0, 5000.0, 20.0, 0.6, 0.05, 5e-4
K = 1000.0  # mean spring stiffness [N/m]
DRAG = 0.01  # [N s/m]
FLOOR = 1e-30  # tisim.physics.contact.DISTANCE_FLOOR: under the square root of the slip speed
SPACING, RIPPLE = 0.01, 0.002  # [m]
SIZE, HORIZON = (64, 64), 200  # the timed case: 4,096 particles, 23,938 springs
CHECK_SIZE, CHECK_HORIZON = (8, 8), 50  # the float64 agreement check
ORIGINS = {SIZE: (0.2, 0.9, 0.5), CHECK_SIZE: (0.2, 0.071, 0.5)}  # top-left corner; the check's bottom row at 1 mm


@dataclass
class Sheet:
    """A cloth robot, its initial positions x0 (N, 3) and the loss weights w (N, 3)."""

    robot: object
    x0: np.ndarray
    weights: np.ndarray

    @property
    def n(self):
        return len(self.robot.particles)

    @property
    def n_springs(self):
        return len(self.robot.springs)


def sheet(size):
    from tisim.robots import cloth
    nx, ny = size
    robot = cloth(nx, ny, spacing=SPACING, origin=ORIGINS[size], pin="top corners")
    x0 = np.array(robot.particles, dtype=np.float64)
    column, row = np.meshgrid(np.arange(nx), np.arange(ny))  # particle index = row * nx + column
    x0[:, 2] += RIPPLE * np.sin(2 * np.pi * (column / nx + 0.5 * row / ny)).reshape(-1)
    w = np.random.default_rng(1).uniform(0.5, 1.5, (len(x0), 3)) / len(x0)
    return Sheet(robot, x0, w)


def stiffness(n_springs, shift=0.0, dtype=np.float32):
    """k_s = K (1 + 0.1 sin(2 pi s / S + shift)), shape (S,): a different stiffness field per pool entry."""
    s = np.arange(n_springs)
    return (K * (1.0 + 0.1 * np.sin(2 * np.pi * s / n_springs + shift))).astype(dtype)


class Tisim:
    """tisim's MassSpring with TerminalSum on "pos", on its default schedule, "phased" (each spring once, then each
    particle; on a CPU each pass one kernel)."""

    def __init__(self, cloth, horizon, dtype, device=None):  # the arch and float type are tisim.init's
        import tisim
        from tisim.systems.mass_spring import MassSpring
        defaults = {p.name: p.default for p in MassSpring.PARAMS}
        for name, value in (("m", M), ("g", G), ("damping", C), ("kc", KC), ("kd", KD), ("mu", MU), ("eps", EPS),
                            ("softness", 0.0)):
            assert defaults[name] == value, f"tisim's MassSpring changed its default {name}; update peers_cloth"
        from tisim.physics.contact import DISTANCE_FLOOR
        assert DISTANCE_FLOOR == FLOOR, "tisim.physics.contact changed DISTANCE_FLOOR; update peers_cloth.FLOOR"
        self.sim = MassSpring(horizon=horizon, robot=cloth.robot, dt=DT, drag=DRAG, )
        self.sim.set_initial_state(pos=cloth.x0)
        self.loss = tisim.losses.TerminalSum({"pos": cloth.weights})

    def forward(self, k):
        self.sim.set_params(k=k)
        return float(self.sim.evaluate(self.loss)[0])

    def gradient(self, k):
        self.sim.set_params(k=k)
        g = self.sim.gradient(self.loss)
        return g.value, (g.params["k"][0], g.initial_state["pos"][0])


def jax_scan(cloth, horizon, dtype, device=None):
    """jax.jit of a lax.scan rollout: spring forces for all springs at once, scattered to particles with .at[].add;
    value_and_grad by (k, x0) for the gradient."""
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    springs = cloth.robot.springs
    i, j = jnp.asarray(springs[:, 0]), jnp.asarray(springs[:, 1])
    rest = jnp.asarray(cloth.robot.rest_lengths(), dtype)
    free = jnp.asarray(cloth.robot.free(), dtype)[:, None]
    x0 = jnp.asarray(cloth.x0, dtype)
    weights = jnp.asarray(cloth.weights, dtype)
    up = jnp.asarray([0.0, 1.0, 0.0], dtype)
    weight = -M * G * up

    def rollout_loss(k, x_init):
        def step(state, _):
            x, v = state
            d = x[j] - x[i]
            r = jnp.sqrt(jnp.sum(d * d, axis=1))
            n = d / r[:, None]
            tension = k * (r - rest) + C * jnp.sum((v[j] - v[i]) * n, axis=1)
            fs = tension[:, None] * n
            f = jnp.zeros_like(x).at[i].add(fs).at[j].add(-fs) + weight
            depth, vn = -x[:, 1], v[:, 1]
            fn = jnp.where(depth > 0.0, KC * depth - KD * jnp.minimum(vn, 0.0), 0.0)
            vt = v - vn[:, None] * up
            slip = jnp.sqrt(jnp.sum(vt * vt, axis=1) + FLOOR)
            ft = (-MU * fn * jnp.tanh(slip / EPS) / slip)[:, None] * vt
            f = f + fn[:, None] * up + ft - DRAG * v
            v_next = v + DT * f / M
            x_next = x + DT * v_next
            return (x + free * (x_next - x), free * v_next), None

        (x, _), _ = jax.lax.scan(step, (x_init, jnp.zeros_like(x_init)), None, length=horizon)
        return jnp.sum(weights * x)

    value = jax.jit(rollout_loss)
    value_and_grad = jax.jit(jax.value_and_grad(rollout_loss, argnums=(0, 1)))

    class Jax:
        def forward(self, k):
            return float(value(jnp.asarray(k, dtype), x0))

        def gradient(self, k):
            v, (gk, gx) = value_and_grad(jnp.asarray(k, dtype), x0)
            return float(v), (np.asarray(gk), np.asarray(gx))

    return Jax()


_WARP_KERNELS = {}


def _warp_kernels(wp, scalar, vec, degree):
    """Warp kernels for one float type and largest degree, made once each (Warp compiles a module per distinct
    closure): "step", the whole step per particle (its springs gathered from a padded incidence table, each spring
    evaluated at both ends, no atomics); "springs" and "particles", the step in two launches as warp.sim runs it
    (each spring once, its force added to both ends with atomics, then each particle moved); "loss"."""
    key = (scalar, degree)
    if key in _WARP_KERNELS:
        return _WARP_KERNELS[key]
    m, g, c, kc, kd, mu, eps, dt, drag, floor = (scalar(v) for v in (M, G, C, KC, KD, MU, EPS, DT, DRAG, FLOOR))
    zero = scalar(0.0)

    @wp.func
    def tension(xi: vec, vi: vec, xj: vec, vj: vec, k: scalar, rest: scalar):
        """The force of a spring on its end i."""
        d = xj - xi
        r = wp.length(d)
        n = d / r
        return (k * (r - rest) + c * wp.dot(vj - vi, n)) * n

    @wp.func
    def other_forces(xi: vec, vi: vec):
        """Weight, ground contact and drag on a particle at xi moving at vi."""
        depth = -xi[1]
        vn = vi[1]
        fn = zero
        if depth > zero:
            fn = kc * depth - kd * wp.min(vn, zero)
        vt = vec(vi[0], zero, vi[2])
        slip = wp.sqrt(wp.dot(vt, vt) + floor)
        return vec(zero, fn - m * g, zero) - (mu * fn * wp.tanh(slip / eps) / slip) * vt - drag * vi

    @wp.kernel
    def cloth_step(x: wp.array2d(dtype=vec), v: wp.array2d(dtype=vec), k: wp.array(dtype=scalar),
                   spring_of: wp.array2d(dtype=int), other_of: wp.array2d(dtype=int),
                   present: wp.array2d(dtype=scalar), rest: wp.array(dtype=scalar), free: wp.array(dtype=scalar),
                   t: int):
        i = wp.tid()
        xi = x[t, i]
        vi = v[t, i]
        f = other_forces(xi, vi)
        for q in range(degree):  # a constant bound: unrolled, so the local accumulator is differentiable
            s = spring_of[i, q]
            j = other_of[i, q]
            f = f + present[i, q] * tension(xi, vi, x[t, j], v[t, j], k[s], rest[s])
        v_next = vi + dt * f / m
        x_next = xi + dt * v_next
        x[t + 1, i] = xi + free[i] * (x_next - xi)
        v[t + 1, i] = free[i] * v_next

    @wp.kernel
    def cloth_springs(x: wp.array2d(dtype=vec), v: wp.array2d(dtype=vec), k: wp.array(dtype=scalar),
                      ends: wp.array2d(dtype=int), rest: wp.array(dtype=scalar), force: wp.array2d(dtype=vec),
                      t: int):
        s = wp.tid()
        i = ends[s, 0]
        j = ends[s, 1]
        fs = tension(x[t, i], v[t, i], x[t, j], v[t, j], k[s], rest[s])
        wp.atomic_add(force, t, i, fs)
        wp.atomic_sub(force, t, j, fs)

    @wp.kernel
    def cloth_particles(x: wp.array2d(dtype=vec), v: wp.array2d(dtype=vec), force: wp.array2d(dtype=vec),
                        free: wp.array(dtype=scalar), t: int):
        i = wp.tid()
        xi = x[t, i]
        vi = v[t, i]
        v_next = vi + dt * (force[t, i] + other_forces(xi, vi)) / m
        x_next = xi + dt * v_next
        x[t + 1, i] = xi + free[i] * (x_next - xi)
        v[t + 1, i] = free[i] * v_next

    @wp.kernel
    def weighted_sum(x: wp.array2d(dtype=vec), t: int, w: wp.array(dtype=vec), loss: wp.array(dtype=scalar)):
        i = wp.tid()
        wp.atomic_add(loss, 0, wp.dot(w[i], x[t, i]))

    _WARP_KERNELS[key] = dict(step=cloth_step, springs=cloth_springs, particles=cloth_particles, loss=weighted_sum)
    return _WARP_KERNELS[key]


def warp_tape(cloth, horizon, dtype, device="cpu", split=False):
    """Warp: (T+1, N) position and velocity arrays, wp.Tape; per step one launch (springs gathered per particle) or,
    split, two (springs with atomics into a (T, N) force array, then particles)."""
    import warp as wp
    wp.config.quiet = True
    wp.init()
    scalar, vec = (wp.float32, wp.vec3) if dtype == np.float32 else (wp.float64, wp.vec3d)
    spring_of, other_of, present = cloth.robot.incidence()
    N, S, T = cloth.n, cloth.n_springs, horizon
    kernels = _warp_kernels(wp, scalar, vec, spring_of.shape[1])
    positions = np.zeros((T + 1, N, 3), dtype)
    positions[0] = cloth.x0
    x = wp.array(positions, dtype=vec, device=device, requires_grad=True)
    v = wp.zeros((T + 1, N), dtype=vec, device=device, requires_grad=True)
    k = wp.zeros(S, dtype=scalar, device=device, requires_grad=True)
    loss = wp.zeros(1, dtype=scalar, device=device, requires_grad=True)
    weights = wp.array(cloth.weights.astype(dtype), dtype=vec, device=device)
    rest = wp.array(cloth.robot.rest_lengths().astype(dtype), dtype=scalar, device=device)
    free = wp.array(cloth.robot.free().astype(dtype), dtype=scalar, device=device)
    if split:
        force = wp.zeros((T, N), dtype=vec, device=device, requires_grad=True)
        ends = wp.array(cloth.robot.springs.astype(np.int32), dtype=int, device=device)
    else:
        table = [wp.array(spring_of, dtype=int, device=device), wp.array(other_of, dtype=int, device=device),
                 wp.array(present.astype(dtype), dtype=scalar, device=device)]

    def run(stiffness):
        k.assign(stiffness)
        loss.zero_()
        if split:
            force.zero_()
            for t in range(T):
                wp.launch(kernels["springs"], dim=S, inputs=[x, v, k, ends, rest, force, t], device=device)
                wp.launch(kernels["particles"], dim=N, inputs=[x, v, force, free, t], device=device)
        else:
            for t in range(T):
                wp.launch(kernels["step"], dim=N, inputs=[x, v, k, *table, rest, free, t], device=device)
        wp.launch(kernels["loss"], dim=N, inputs=[x, T, weights, loss], device=device)

    class Warp:
        def forward(self, stiffness):
            run(stiffness)
            return float(loss.numpy()[0])

        def gradient(self, stiffness):
            tape = wp.Tape()
            with tape:
                run(stiffness)
            tape.backward(loss=loss)
            value = float(loss.numpy()[0])
            grads = k.grad.numpy().copy(), x.grad.numpy()[0].copy()
            tape.zero()
            return value, grads

    return Warp()


def warp_tape_split(cloth, horizon, dtype, device="cpu"):
    return warp_tape(cloth, horizon, dtype, device, split=True)


def taichi_handwritten(cloth, horizon, dtype, device=None):
    """DiffTaichi's style, written as Warp's one-launch form: (T+1, N) position and velocity fields, one kernel per
    step in which each particle gathers its springs from the padded incidence table (the table's width unrolled, so
    the local force sum is differentiable), ti.ad.Tape for the gradient. The arch and float type are tisim.init's."""
    import taichi as ti

    from tisim.core.runtime import numpy_real, real

    spring_of, other_of, present = cloth.robot.incidence()
    N, S, T, degree = cloth.n, cloth.n_springs, horizon, spring_of.shape[1]

    @ti.data_oriented
    class HandTaichi:
        def __init__(self):
            self.x = ti.Vector.field(3, real(), (T + 1, N), needs_grad=True)
            self.v = ti.Vector.field(3, real(), (T + 1, N), needs_grad=True)
            self.k = ti.field(real(), S, needs_grad=True)
            self.loss = ti.field(real(), (), needs_grad=True)
            self.rest, self.free = ti.field(real(), S), ti.field(real(), N)
            self.weights = ti.Vector.field(3, real(), N)
            self.spring_of, self.other_of = ti.field(ti.i32, (N, degree)), ti.field(ti.i32, (N, degree))
            self.present = ti.field(real(), (N, degree))
            x = np.zeros((T + 1, N, 3), numpy_real())
            x[0] = cloth.x0
            self.x.from_numpy(x)  # step 0 never changes; every rollout overwrites steps 1..T
            self.rest.from_numpy(cloth.robot.rest_lengths().astype(numpy_real()))
            self.free.from_numpy(cloth.robot.free().astype(numpy_real()))
            self.weights.from_numpy(cloth.weights.astype(numpy_real()))
            self.spring_of.from_numpy(spring_of.astype(np.int32))
            self.other_of.from_numpy(other_of.astype(np.int32))
            self.present.from_numpy(present.astype(numpy_real()))

        @ti.kernel
        def step(self, t: ti.i32):
            for i in range(N):
                xi, vi = self.x[t, i], self.v[t, i]
                depth, vn = -xi[1], vi[1]
                fn = ti.select(depth > 0.0, KC * depth - KD * ti.min(vn, 0.0), 0.0)
                vt = ti.Vector([vi[0], 0.0, vi[2]])
                slip = ti.sqrt(vt.dot(vt) + FLOOR)
                f = ti.Vector([0.0, fn - M * G, 0.0]) - (MU * fn * ti.tanh(slip / EPS) / slip) * vt - DRAG * vi
                for q in ti.static(range(degree)):
                    s, j = self.spring_of[i, q], self.other_of[i, q]
                    d = self.x[t, j] - xi
                    r = d.norm()
                    n = d / r
                    f += self.present[i, q] * (self.k[s] * (r - self.rest[s]) + C * (self.v[t, j] - vi).dot(n)) * n
                v_next = vi + DT * f / M
                self.x[t + 1, i] = xi + self.free[i] * DT * v_next
                self.v[t + 1, i] = self.free[i] * v_next

        @ti.kernel
        def compute_loss(self):
            for i in range(N):
                self.loss[None] += self.weights[i].dot(self.x[T, i])

        def run(self):
            for t in range(T):
                self.step(t)
            self.compute_loss()

        def forward(self, k):
            self.k.from_numpy(k)
            self.loss[None] = 0.0
            self.run()
            return float(self.loss[None])

        def gradient(self, k):
            self.k.from_numpy(k)
            with ti.ad.Tape(loss=self.loss):  # clears every gradient, sets loss = 0, runs the grads in reverse
                self.run()
            return float(self.loss[None]), (self.k.grad.to_numpy(), self.x.grad.to_numpy()[0])

    return HandTaichi()


IMPLEMENTATIONS = {  # row label: (factory, package the row needs)
    "tisim": (Tisim, "taichi"),
    "hand-written Taichi (launch per step, Tape)": (taichi_handwritten, "taichi"),
    "JAX (jit, lax.scan)": (jax_scan, "jax"),
    "Warp (launch per step, Tape)": (warp_tape, "warp"),
    "Warp (springs, then particles: 2 launches per step, atomics, Tape)": (warp_tape_split, "warp"),
}
