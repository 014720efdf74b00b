"""Numbers a user of MassSpring needs that the state does not hold: each particle's mass, the force in each spring
and the force each pin exerts. Plain numpy, computed from a simulator's parameters, actions and robot and from a
trajectory as `sim.rollout()` returns it, by the laws of tisim/systems/mass_spring/system.py:

    spring s = (i, j):  d = x_j - x_i,  r = |d|,  n = d / r,  L = rest_s (1 + a_s)
                        tension_s = k_s (r - L) + damping (v_j - v_i) . n
                        force on i: +tension_s n;  on j: -tension_s n
    particle i:         f_i = sum of its springs' forces - m g e_y + contact(x_i, v_i) - drag v_i
                        free:   m (v' - v) = dt f_i (semi-implicit Euler)
                        pinned: v' = 0 and x' = x, whatever f_i

a_s is the action (activation) of spring s's actuator at that step, 0 for a passive spring; e_y is the y axis (up)
in 2D and 3D. Forces are in N, lengths in m; y is up.

A row t of a trajectory is the state x_t; the step from x_t uses the actions of step t. The last row (t = T) has no
step after it: the readouts evaluate it with the last step's actions (those of step T - 1). For a trajectory kept
every k steps (rollout(every=k)), pass steps=range(0, T + 1, k): the step index of each row.
"""
import numpy as np

from tisim.physics.contact import DISTANCE_FLOOR


def point_masses(sim):
    """Each particle's mass, shape (B, n_particles), kg: the parameter m, the same for every particle (pinned ones
    too). Their sum times g is the body's weight, which pins and contacts carry at rest."""
    return np.repeat(sim.params["m"][:, None], sim.sizes["n_particles"], axis=1)


def _rows(sim, traj, steps):
    """(pos (B, R, N, d), vel (B, R, N, d), steps (R,)) from a trajectory of R rows or a final state (R = 1)."""
    pos, vel = (np.asarray(traj[name], dtype=float) for name in ("pos", "vel"))
    if pos.ndim == 3:  # rollout(final=True): the state at step T
        pos, vel = pos[:, None], vel[:, None]
        steps = [sim.T] if steps is None else steps
    rows = pos.shape[1]
    if steps is None:
        if rows != sim.T + 1:
            raise ValueError(f"a trajectory of {rows} rows is not every step (T + 1 = {sim.T + 1} rows): pass steps=, "
                             "the step index of each row (range(0, T + 1, k) for rollout(every=k))")
        steps = np.arange(sim.T + 1)
    steps = np.asarray(steps, dtype=int).reshape(-1)
    if len(steps) != rows or steps.min() < 0 or steps.max() > sim.T:
        raise ValueError(f"steps must give one step in 0..{sim.T} for each of the {rows} rows")
    return pos, vel, steps


def _activations(sim, steps):
    """(B, R, n_springs): each spring's action a_s at each row's step (the last step's at t = T), 0 if passive."""
    owner = sim.robot.actuator_of_spring()
    out = np.zeros((sim.B, len(steps), len(owner)))
    if sim.T and np.any(owner >= 0):
        u = sim.actions.reshape(sim.B, sim.T, -1)[:, np.minimum(steps, sim.T - 1)]
        out[..., owner >= 0] = u[..., owner[owner >= 0]]
    return out


def _spring_terms(sim, pos, vel, steps):
    """(tension (B, R, S), unit vectors n from each spring's first end to its second (B, R, S, d))."""
    i, j = sim.robot.springs[:, 0], sim.robot.springs[:, 1]
    d = pos[:, :, j] - pos[:, :, i]
    r = np.linalg.norm(d, axis=-1)
    n = d / r[..., None]
    params = sim.params
    rest = params["rest"][:, None, :] * (1.0 + _activations(sim, steps))
    tension = params["k"][:, None, :] * (r - rest) \
        + params["damping"][:, None, None] * np.einsum("brsk,brsk->brs", vel[:, :, j] - vel[:, :, i], n)
    return tension, n


def spring_forces(sim, traj, steps=None):
    """The tension in each spring at each row of traj (a dict holding "pos" and "vel" as sim.rollout() returns them,
    or as rollout(final=True) does), shape (B, rows, n_springs), N.

    Positive: the spring pulls its two ends together (stretched beyond its rest length L = rest (1 + a), or its ends
    moving apart through the damper); negative: it pushes them apart. The force on the spring's first end i is
    tension n, on its second end j minus that, with n the unit vector from i to j: tension = k (r - L) +
    damping (v_j - v_i) . n, the system's own law, its damping included. Which particles spring s joins:
    sim.robot.springs[s]. steps: the step index of each row (default: every step, 0 .. T)."""
    pos, vel, steps = _rows(sim, traj, steps)
    tension, _ = _spring_terms(sim, pos, vel, steps)
    return tension


def _contact(sim, pos, vel):
    """The force of the ground and the obstacles on particles at pos moving at vel ((..., d) each): the system's
    contact law (tisim.physics.contact's point_contact) in numpy."""
    params = sim.params
    b = (slice(None),) + (None,) * (pos.ndim - 2)  # a batch-wise parameter against (B, ...) arrays

    def law(depth, normal):
        kc, kd, s = params["kc"][b], params["kd"][b], params["softness"][b]
        mu, eps = params["mu"][b], params["eps"][b]
        vn = np.einsum("...k,...k->...", vel, normal)
        soft = np.maximum(s, 1e-30)
        z = depth / soft
        e = np.exp(-np.abs(z))
        act = soft * (np.maximum(z, 0.0) + np.log1p(e))
        gate = np.where(z < 0.0, e, 1.0) / (1.0 + e)
        hard = (kc * depth - kd * np.minimum(vn, 0.0)) * (depth > 0.0)
        fn = np.where(s > 0.0, kc * act - kd * np.minimum(vn, 0.0) * gate, hard)
        vt = vel - vn[..., None] * normal
        speed = np.sqrt(np.einsum("...k,...k->...", vt, vt) + DISTANCE_FLOOR)
        return fn[..., None] * normal - (mu * fn * np.tanh(speed / eps) / speed)[..., None] * vt

    up = np.zeros(pos.shape[-1])
    up[1] = 1.0
    force = law(-pos[..., 1], np.broadcast_to(up, pos.shape))
    for c, radius in zip(np.moveaxis(params.get("sphere_center", np.zeros((sim.B, 0))), 1, 0),
                         np.moveaxis(params.get("sphere_radius", np.zeros((sim.B, 0))), 1, 0)):
        delta = pos - c[b]
        distance = np.sqrt(np.einsum("...k,...k->...", delta, delta) + DISTANCE_FLOOR)
        force = force + law(radius[b] - distance, delta / distance[..., None])
    for c, half in zip(np.moveaxis(params.get("box_center", np.zeros((sim.B, 0))), 1, 0),
                       np.moveaxis(params.get("box_half", np.zeros((sim.B, 0))), 1, 0)):
        q = pos - c[b]
        depth = half[b] - np.abs(q)
        axis = np.argmin(depth, axis=-1)  # ties go to the first axis, as the system's first_minimum
        normal = np.where(np.arange(pos.shape[-1]) == axis[..., None], np.where(q >= 0.0, 1.0, -1.0), 0.0)
        force = force + law(depth.min(axis=-1), normal)
    return force


def particle_forces(sim, traj, steps=None):
    """The force f_i on every particle at each row of traj, shape (B, rows, n_particles, dim), N: its springs'
    forces, its weight -m g e_y, the ground's and the obstacles' contact forces and the drag -drag v, as the step
    sums them. A free particle's momentum changes by dt f_i in the step; a pinned one's by the pin's reaction
    besides (pin_reactions). The pushes of free balls (balls=) are not included."""
    pos, vel, steps = _rows(sim, traj, steps)
    tension, n = _spring_terms(sim, pos, vel, steps)
    force = np.zeros_like(pos)
    pull = tension[..., None] * n
    np.add.at(force, (slice(None), slice(None), sim.robot.springs[:, 0]), pull)
    np.add.at(force, (slice(None), slice(None), sim.robot.springs[:, 1]), -pull)
    params = sim.params
    force[..., 1] -= (params["m"] * params["g"])[:, None, None]
    force += _contact(sim, pos, vel) - params["drag"][:, None, None, None] * vel
    return force


def pin_reactions(sim, traj, steps=None):
    """The force each pin exerts on its particle at each row of traj, shape (B, rows, n_pinned, dim), N, the pinned
    particles in the order of sim.robot.pinned.

    A pinned particle ends each step at rest where it was (v' = 0): the pin supplies whatever that takes,
    R = m (0 - v) / dt - f, with f the particle's own force (particle_forces: springs, weight, contact, drag). While
    the particle is at rest, as it is after the first step, R = -f: the pin carries the particle's own weight and
    the pull of its springs. At rest, the reactions of all the pins, the contacts and the drag balance the weight of
    the whole body: sum over the pins of R_y = n_particles m g for a body hanging clear of the ground."""
    pos, vel, steps = _rows(sim, traj, steps)
    pinned = np.asarray(sim.robot.pinned, dtype=int)
    force = particle_forces(sim, {"pos": pos, "vel": vel}, steps)[:, :, pinned]
    m = sim.params["m"][:, None, None, None]
    return -m * vel[:, :, pinned] / sim.dt - force


class Readouts:
    """Mixin of the system: the functions above as its methods."""

    def point_masses(self):
        """Each particle's mass, shape (B, n_particles), kg; see tisim.systems.mass_spring.readouts.point_masses."""
        return point_masses(self)

    def spring_forces(self, traj, steps=None):
        """The tension in each spring at each row of traj, (B, rows, n_springs), N, positive when it pulls its ends
        together; see tisim.systems.mass_spring.readouts.spring_forces."""
        return spring_forces(self, traj, steps)

    def particle_forces(self, traj, steps=None):
        """The force on each particle at each row of traj (springs, weight, contact, drag), (B, rows, n_particles,
        dim), N; see tisim.systems.mass_spring.readouts.particle_forces."""
        return particle_forces(self, traj, steps)

    def pin_reactions(self, traj, steps=None):
        """The force each pin exerts on its particle at each row of traj, (B, rows, n_pinned, dim), N, in the order
        of robot.pinned; see tisim.systems.mass_spring.readouts.pin_reactions."""
        return pin_reactions(self, traj, steps)
