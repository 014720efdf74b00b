"""Free rigid balls and a mass-spring body pushing each other (two-way): momentum exchanged, not made; a ball's rest
on the ground where its penalty carries its weight; the hand-written reverses against Taichi's reverse mode; every
gradient group against float64 central differences."""
import numpy as np
import pytest
from test_mass_spring_3d import TaichiReverse

import tisim
from tisim.robots import cloth, grid
from tisim.systems.mass_spring import MassSpring


@pytest.mark.parametrize("dim", [2, 3])
def test_a_ball_and_a_free_body_exchange_momentum(dim):
    """A ball thrown at a free body without gravity, far above the ground (in 3D a cloth, in 2D a disc thrown at a
    block of springs): the total momentum m sum v_p + M V keeps its value to round-off through the impact, while the
    ball hands a good part of its momentum to the body."""
    if dim == 3:
        body, ball, throw = cloth(4, 4, spacing=0.05, origin=(0.4, 0.5, 0.4), pin="none", flat=True), \
            (0.47, 0.6, 0.47), [0.1, -1.0, 0.05]
    else:
        body, ball, throw = grid(4, 3), (0.08, 0.7), [0.1, -1.0]
        body.particles[:, 1] += 0.5
    sim = MassSpring(horizon=600, robot=body, balls=[(ball, 0.04)], g=0.0, kd=5.0, ball_mass=0.05)
    sim.set_initial_state(ball_vel=[throw])
    traj = sim.rollout()
    m, M = sim.params["m"][0], sim.params["ball_mass"][0, 0]
    momentum = m * traj["vel"][0].sum(axis=1) + M * traj["ball_vel"][0, :, 0]
    np.testing.assert_allclose(momentum, np.broadcast_to(momentum[0], momentum.shape), rtol=0,
                               atol=1e-13 * np.abs(momentum[0]).max())
    assert traj["ball_vel"][0, -1, 0, 1] > -0.5  # the impact took more than half the ball's downward speed
    assert traj["pos"][0, :, :, 1].min() > 0.1  # and nothing reached the ground


def test_a_ball_rests_on_the_ground_where_its_penalty_carries_its_weight():
    """A ball dropped onto the ground settles at the depth M g / kc where the penalty force carries its weight (the
    body, far away, never touches it)."""
    sim = MassSpring(horizon=4000, robot=cloth(2, 2, spacing=0.05, origin=(2.0, 0.5, 2.0), pin="top row", flat=True),
                     balls=[((0.5, 0.2, 0.5), 0.05)], ball_mass=0.2, kd=40.0)
    traj = sim.rollout()
    depth = 0.05 - traj["ball_pos"][0, -1, 0, 1]
    assert depth == pytest.approx(0.2 * 9.8 / 5000.0, rel=1e-9)
    assert np.abs(traj["ball_vel"][0, -1, 0]).max() < 1e-9



def spring_network_equilibrium(sheet, positions, centre, radius, M, k, kc, softness, m, g, depth=None,
                               moves=(0, 1, 2)):
    """The forces on a ball lying on a cloth, computed here in numpy: springs k (r - L) along each spring, weights,
    and the soft penalty kc s ln(1 + e^(d / s)) along the normal between the ball and each particle (d the depth).
    Newton's method (a numerical Jacobian), started from the given particle positions and ball centre, solves for
    the free particles and the ball where they balance; M None: a sphere held still at `centre` (the particles
    alone are solved for). depth(p, c) -> (d, n) per particle, if given, replaces the ball's (another shape about
    the centre c); moves: the axes along which the centre is free (the others held, as by a slide joint). Returns
    (positions, centre, the largest force at the start, the largest at the solution)."""
    positions, held, moves = np.array(positions, dtype=float), M is None, list(moves)

    def ball(p, c):
        delta = p - c
        distance = np.linalg.norm(delta, axis=1)
        return radius - distance, delta / distance[:, None]

    depth = depth or ball
    springs = sheet.springs
    rest = np.linalg.norm(sheet.particles[springs[:, 1]] - sheet.particles[springs[:, 0]], axis=1)
    free = np.setdiff1d(np.arange(len(positions)), sheet.pinned)

    def unpack(z):
        p, c = positions.copy(), np.array(centre, dtype=float)
        p[free] = (z if held else z[:-len(moves)]).reshape(-1, 3)
        if not held:
            c[moves] = z[-len(moves):]
        return p, c

    def residual(z):
        p, c = unpack(z)
        force = np.zeros_like(p)
        force[:, 1] -= m * g
        d = p[springs[:, 1]] - p[springs[:, 0]]
        r = np.linalg.norm(d, axis=1)
        pull = (k * (r - rest) / r)[:, None] * d
        np.add.at(force, springs[:, 0], pull)
        np.add.at(force, springs[:, 1], -pull)
        d, n = depth(p, c)
        push = (kc * softness * np.logaddexp(0.0, d / softness))[:, None] * n
        particles = (force + push)[free].ravel()
        return particles if held else np.concatenate([particles, (-push.sum(axis=0) - [0.0, M * g, 0.0])[moves]])

    z = positions[free].ravel() if held else np.concatenate([positions[free].ravel(), np.asarray(centre)[moves]])
    first = np.abs(residual(z)).max()
    for _ in range(30):
        f = residual(z)
        if np.abs(f).max() < 1e-12:
            break
        jacobian = np.stack([(residual(z + e) - residual(z - e)) / 2e-7 for e in 1e-7 * np.eye(len(z))], axis=1)
        z = z + np.linalg.solve(jacobian, -f)
    p, c = unpack(z)
    return p, c, first, np.abs(residual(z)).max()


def test_a_ball_rests_on_a_pinned_cloth_where_the_spring_network_balances_its_weight():
    """A ball laid on a 5 x 5 cloth pinned at its corners, 2 cm off its centre, comes to rest where the forces,
    computed independently in numpy (springs, weights, the soft penalty between ball and particles), balance: at the
    simulated rest they are below 1e-9 N on every particle and on the ball, and Newton's method on them, started
    there, moves no particle and not the ball by more than 1e-9 m; the cloth sags 2 cm under the ball. (Laid exactly
    over the centre particle, the ball balances on it, a rest that the slightest asymmetry undoes: the ball then
    settles 2.27 cm off the centre, between particles, as here.)"""
    radius, M = 0.06, 0.03
    sheet = cloth(5, 5, spacing=0.05, origin=(0.4, 0.3, 0.4), pin="corners", flat=True)
    sim = MassSpring(horizon=40000, robot=sheet, balls=[((0.52, 0.3 + radius + 0.005, 0.5), radius)], ball_mass=M,
                     softness=0.002, kd=20.0, drag=1.0)
    traj = sim.rollout()
    positions, centre, at_rest, residual = spring_network_equilibrium(
        sheet, traj["pos"][0, -1], traj["ball_pos"][0, -1, 0], radius, M, k=1000.0, kc=5000.0, softness=0.002,
        m=0.01, g=9.8)
    assert at_rest < 1e-9 and residual < 1e-11, (at_rest, residual)
    assert abs(centre[0] - 0.5227) < 1e-3 and 0.3 - positions[:, 1].min() > 0.015  # between particles, sagging
    np.testing.assert_allclose(traj["pos"][0, -1], positions, rtol=0, atol=1e-9)
    np.testing.assert_allclose(traj["ball_pos"][0, -1, 0], centre, rtol=0, atol=1e-9)


def balls_on_cloth(cls, softness):
    """A cloth pinned at its corners; one ball falls into it, another rolls on the ground beside it."""
    sheet = cloth(4, 4, spacing=0.05, origin=(0.4, 0.3, 0.4), pin="corners", flat=True)
    sim = cls(horizon=150, robot=sheet, balls=[((0.47, 0.37, 0.48), 0.04), ((0.6, 0.05, 0.3), 0.04)],
              softness=softness, ball_mass=[0.05, 0.08], kd=5.0, drag=0.01)
    sim.set_initial_state(ball_vel=[[0.1, -0.8, 0.05], [-0.2, -0.3, 0.0]])
    rng = np.random.default_rng(0)
    w = rng.normal(size=(sim.n_particles, 3))
    loss = tisim.losses.TerminalSum({"pos": w, "vel": 0.1 * w, "ball_pos": rng.normal(size=(2, 3)),
                                     "ball_vel": rng.normal(size=(2, 3))})
    return sim, loss


@pytest.mark.parametrize("softness", [0.0, 0.003])
def test_the_balls_hand_written_reverses_are_taichis_reverse_mode(softness):
    """The phases' hand-written reverses (the balls' and the particles' pushes on them) and Taichi's reverse mode of
    the branch-free phases: the same gradients in every group to 1e-12 of each group's largest entry; the fused
    forward pass and the per-step schedule take the same steps bit for bit."""
    (ours, loss), (taichis, taichi_loss) = balls_on_cloth(MassSpring, softness), balls_on_cloth(TaichiReverse, softness)
    fused = ours.rollout()
    ours._per_step = True
    per_step = ours.rollout()
    ours._per_step = False
    for name in fused:
        assert np.array_equal(fused[name], per_step[name]), name
    mine, reference = ours.gradient(loss), taichis.gradient(taichi_loss)
    for group in ("params", "initial_state"):
        for name, value in getattr(reference, group).items():
            if value.size == 0:
                continue
            scale = np.abs(value).max()
            if name.startswith("ball"):
                assert scale > 0, name  # the balls were felt
            np.testing.assert_allclose(getattr(mine, group)[name], value, rtol=0, atol=1e-12 * scale, err_msg=name)


def test_ball_gradients_match_central_differences():
    """A ball dropped onto a cloth pinned at its corners, with smooth contact (soft, undamped, and no spring damping,
    so that the pinned corners' first velocities matter to nothing): every parameter and initial state against
    Richardson-extrapolated float64 central differences, to 1e-5."""
    sheet = cloth(3, 3, spacing=0.05, origin=(0.45, 0.3, 0.45), pin="corners", flat=True)
    sim = MassSpring(horizon=160, robot=sheet, balls=[((0.5, 0.345, 0.51), 0.03)], softness=0.003, kd=0.0,
                     ball_mass=0.03, mu=0.3, damping=0.0)
    sim.set_initial_state(ball_vel=[[0.1, -0.6, 0.05]])
    rng = np.random.default_rng(0)
    loss = tisim.losses.TerminalSum({"ball_pos": rng.normal(size=(1, 3)), "ball_vel": 0.1 * rng.normal(size=(1, 3)),
                                     "pos": 0.3 * rng.normal(size=(9, 3))})
    report = tisim.gradcheck(sim, loss, groups=("params", "initial_state"), step=2e-5, max_entries=16,
                             extrapolate=True)
    assert report.worst <= 1e-5, str(report)
    g = sim.gradient(loss)
    for value in (g.params["ball_mass"], g.params["ball_radius"], g.initial_state["ball_pos"],
                  g.initial_state["ball_vel"]):
        assert np.abs(value).max() > 1e-3
    for name in ("ball_mass", "ball_radius"):  # gradcheck spaces its entries: these two one by one
        base = np.array(sim.params[name])
        values = []
        for sign in (1, -1):
            sim.set_params(**{name: base * (1 + sign * 1e-6)})
            values.append(float(sim.evaluate(loss)[0]))
        sim.set_params(**{name: base})
        difference = (values[0] - values[1]) / (2e-6 * base[0, 0])
        assert g.params[name][0, 0] == pytest.approx(difference, rel=1e-5), name


def test_balls_are_refused_by_name():
    with pytest.raises(ValueError, match=r"balls\[0\] must be a centre of 3 coordinates and a radius > 0"):
        MassSpring(horizon=3, robot=cloth(3, 3), balls=[((0.5, 0.5), 0.1)])
    with pytest.raises(ValueError, match=r"balls\[0\] must be a centre of 3 coordinates and a radius > 0"):
        MassSpring(horizon=3, robot=cloth(3, 3), balls=[((0.5, 0.5, 0.5), -0.1)])
