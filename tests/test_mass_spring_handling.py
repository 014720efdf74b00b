"""An articulated robot touching a mass-spring body both ways (tisim.systems.Handling): momentum and angular
momentum of a body thrown at a free cloth, a free ball resting on a pinned cloth where a numpy solve balances it, the
gradients against central differences and against Taichi's reverse mode, bad input."""
import numpy as np
import pytest
from test_mass_spring_balls import spring_network_equilibrium

import tisim
from tisim.systems import Handling
from tisim.systems.articulation import Builder
from tisim.systems.articulation.kinematics import quat_to_matrix
from tisim.systems.mass_spring import cloth, grid
from tisim.testing import assert_gradients_agree

TO_BODY = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])  # tree (x, y, z) -> body (x, z, -y)


def free_body(shape, mass, inertia, at, friction=0.5, damping=0.0):
    """A tree of one free body at `at` (the tree's frame) with a capsule lying along its x, a box of 6 x 4 x 3 cm
    turned about an oblique axis, or a sphere of radius `shape`; damping on its free joint."""
    b = Builder("free")
    body = b.body(0, pos=at, mass=mass, inertia=(inertia,) * 3)
    b.free(body, damping=damping)
    if shape == "capsule":
        half_turn = np.sqrt(0.5)
        b.capsule(body, 0.02, 0.04, quat=(half_turn, half_turn, 0.0, 0.0), friction=friction)
    elif shape == "box":
        turn = np.array([0.9, 0.2, -0.3, 0.25])
        b.box(body, (0.03, 0.02, 0.015), pos=(0.005, -0.004, 0.002), quat=tuple(turn / np.linalg.norm(turn)),
              friction=friction)
    else:
        b.sphere(body, shape, friction=friction)
    return b.build()


@pytest.mark.parametrize("shape", ["capsule", "box"])
def test_a_body_thrown_at_a_free_cloth_keeps_momentum_and_angular_momentum(shape):
    """A spinning capsule or box (on a body of isotropic inertia, centre of mass at its frame's origin) thrown down
    onto a free 5 x 5 cloth without gravity, far above the ground: the pushes act on the particles and, at the same
    points, back on the body, so the sum of the particles' and the body's momentum, and of their angular momentum
    about the origin (the body's: c x M v + I w), stay what they were, to rounding (measured 1e-16 of 0.16 kg m/s),
    while the body hands the cloth most of its downward momentum."""
    m, M, inertia = 0.01, 0.2, 1e-4
    sheet = cloth(5, 5, spacing=0.04, origin=(0.42, 1.4, 0.42), pin="none", flat=True)
    sim = Handling(horizon=1000, robot=sheet, tree=free_body(shape, M, inertia, (0.5, -0.5, 1.45)), g=0.0,
                   softness=0.002)
    sim.set_initial_state(qd=[0.1, 0.05, -0.8, 3.0, -2.0, 1.0])
    traj = sim.rollout()

    def momenta(t):
        x, v, q, qd = (traj[name][0, t] for name in ("pos", "vel", "q", "qd"))
        c, u = TO_BODY @ q[:3], TO_BODY @ qd[:3]
        w = TO_BODY @ quat_to_matrix(q[3:] / np.linalg.norm(q[3:])) @ qd[3:]
        return np.concatenate([m * v.sum(0) + M * u, m * np.cross(x, v).sum(0) + M * np.cross(c, u) + inertia * w])

    start = momenta(0)
    drift = max(np.abs(momenta(t) - start).max() for t in range(0, 1001, 50))
    assert drift < 1e-14, drift
    assert traj["qd"][0, -1, 2] > -0.4  # the body slowed from -0.8 m/s: the cloth took its momentum
    assert traj["pos"][0, -1, :, 1].mean() < 1.4 - 0.01


def test_a_free_ball_rests_on_a_pinned_cloth_where_the_springs_balance():
    """A frictionless 50 g ball of 6 cm (a sphere on a free body) dropped onto a 5 x 5 cloth pinned at its corners,
    off its centre, its motion damped (its free joint's damping): it comes to rest where numpy's solve of springs,
    weights and the soft penalty (the balls' test's helper) balances the cloth and the ball, every particle and the
    ball's centre within 1e-9 m."""
    radius, softness, M = 0.06, 0.002, 0.05
    sheet = cloth(5, 5, spacing=0.05, origin=(0.4, 0.3, 0.4), pin="corners", flat=True)
    sim = Handling(horizon=20000, robot=sheet, tree=free_body(radius, M, 1e-4, (0.52, -0.49, 0.37), 0.0, 0.05),
                   softness=softness, drag=1.0)
    traj = sim.rollout()
    centre = TO_BODY @ traj["q"][0, -1, :3]
    positions, ball, at_rest, residual = spring_network_equilibrium(
        sheet, traj["pos"][0, -1], centre, radius, M, k=1000.0, kc=5000.0, softness=softness, m=0.01, g=9.8)
    assert at_rest < 1e-9 and residual < 1e-11, (at_rest, residual)
    assert 0.3 - positions[:, 1].min() > 0.01
    np.testing.assert_allclose(traj["pos"][0, -1], positions, rtol=0, atol=1e-9)
    np.testing.assert_allclose(centre, ball, rtol=0, atol=1e-9)


def test_a_box_on_a_slide_rests_on_a_pinned_cloth_where_the_springs_balance():
    """A frictionless 50 g box of 12 x 12 x 2 cm on a vertical slide (damped), lowered onto a 5 x 5 cloth pinned at
    its corners: it comes to rest where numpy's solve of springs, weights and the soft penalty below the box's
    nearest faces (the slide holding it level and in place) balances the cloth and the box's weight, every particle
    and the box's height within 1e-9 m; nine particles under it, the cloth sagging 1.9 cm (the soft contact holds the
    box's 0.49 N 0.9 to 1.3 cm above them: 2 mm softness)."""
    half, softness, M = np.array([0.06, 0.01, 0.06]), 0.002, 0.05  # the box's half extents in the body's frame
    sheet = cloth(5, 5, spacing=0.05, origin=(0.4, 0.3, 0.4), pin="corners", flat=True)
    b = Builder("lowered")
    body = b.body(0, pos=(0.505, -0.5, 0.311), mass=M, inertia=(1e-4,) * 3)
    b.slide(body, axis=(0.0, 0.0, 1.0), damping=0.05)
    b.box(body, (half[0], half[2], half[1]), friction=0.0)
    sim = Handling(horizon=20000, robot=sheet, tree=b.build(), softness=softness, drag=1.0)
    traj = sim.rollout()
    centre = np.array([0.505, 0.311 + traj["q"][0, -1, 0], 0.5])

    def below_the_box(p, c):  # point_box's depth and normal, written here again
        q = p - c
        depth = half - np.abs(q)
        nearest = np.argmin(depth, axis=1)
        normal = np.zeros_like(q)
        normal[np.arange(len(q)), nearest] = np.where(q[np.arange(len(q)), nearest] >= 0.0, 1.0, -1.0)
        return depth.min(axis=1), normal

    positions, box, at_rest, residual = spring_network_equilibrium(
        sheet, traj["pos"][0, -1], centre, None, M, k=1000.0, kc=5000.0, softness=softness, m=0.01, g=9.8,
        depth=below_the_box, moves=(1,))
    assert at_rest < 1e-9 and residual < 1e-11, (at_rest, residual)
    footprint = np.abs(positions - box)[:, [0, 2]] < half[[0, 2]]
    assert np.sum(footprint.all(axis=1)) == 9 and 0.3 - positions[:, 1].min() > 0.01, positions
    np.testing.assert_allclose(traj["pos"][0, -1], positions, rtol=0, atol=1e-9)
    assert abs(centre[1] - box[1]) < 1e-9, (centre, box)


def handled(cls=Handling):
    """The default rod pressed by its motor onto a small cloth pinned at its corners, for 40 steps from random
    velocities, soft contact with friction, a target on the particles and the rod."""
    sheet = cloth(4, 4, spacing=0.04, origin=(0.42, 0.3, 0.42), pin="corners", flat=True)
    sim = cls(horizon=40, robot=sheet, softness=0.002, q=[0.2], qd=[-1.0])
    rng = np.random.default_rng(0)
    sim.set_actions(rng.normal(0.3, 0.2, (40, 1)))
    n = sim.n_particles
    sim.set_initial_state(vel=rng.normal(0.0, 0.1, (n, 3)))
    loss = tisim.losses.TerminalTarget({"pos": sim.initial_state["pos"][0] + 0.01, "vel": np.full((n, 3), 0.1),
                                        "q": [0.5], "qd": [0.2]})
    return sim, loss


def boxed(cls=Handling):
    """A spinning 0.1 kg box thrown down onto a small cloth pinned at its corners, with friction, for 60 steps; a
    target on the particles and the box's place and velocity."""
    sheet = cloth(4, 4, spacing=0.04, origin=(0.42, 0.3, 0.42), pin="corners", flat=True)
    sim = cls(horizon=60, robot=sheet, tree=free_body("box", 0.1, 2e-5, (0.48, -0.48, 0.33)), softness=0.002)
    sim.set_initial_state(qd=[0.05, -0.1, -0.6, 4.0, -3.0, 2.0])
    loss = tisim.losses.TerminalTarget({"pos": sim.initial_state["pos"][0] + 0.01, "q": [0.5, -0.5, 0.3, 1, 0, 0, 0],
                                        "qd": [0.1] * 6})
    return sim, loss


class TaichiReverse(Handling):
    """Handling with Taichi's reverse mode of the particles' phase in place of the hand-written reverses."""
    REVERSES = {}


@pytest.mark.parametrize("scene", [handled, boxed], ids=["rod", "box"])
def test_the_hand_written_reverses_are_taichis_reverse_mode(scene):
    sims = [scene(cls) for cls in (Handling, TaichiReverse)]
    assert np.abs(sims[0][0].rollout()["pos"][0, -1, :, 1] - 0.3).max() > 0.005  # the shape presses the cloth
    ours, taichis = (sim.gradient(loss) for sim, loss in sims)
    assert_gradients_agree(ours, taichis)


def test_gradients_match_central_differences():
    """Every group against Richardson-extrapolated float64 central differences: the rod's mass, friction and
    motor, its start and actions, with the cloth's own. The parameters at a step of 1e-6 (the softness, 2 mm, is
    curved at 1e-5: 4e-4 there), the states and actions at 1e-5 (at 1e-6 and below, round-off: a particle's
    velocity wanders from 2e-6 to 1e-4). Measured worst: 2.2e-7, 1.6e-6, 2.9e-7."""
    sim, loss = handled()
    g = sim.gradient(loss)
    for name in ("geom_friction", "body_mass", "gear"):
        assert np.abs(g.params[name]).max() > 1e-6, name
    for groups, step in ((("params",), 1e-6), (("initial_state", "actions"), 1e-5)):
        report = tisim.gradcheck(sim, loss, groups=groups, step=step, max_entries=12, extrapolate=True)
        assert report.worst <= 1e-5, str(report)


def test_a_boxs_gradients_match_central_differences():
    """The thrown box's friction, mass and inertia, its start and the cloth's, against Richardson-extrapolated float64
    central differences: the parameters at a step of 1e-6, the states at 1e-5."""
    sim, loss = boxed()
    g = sim.gradient(loss)
    for name in ("geom_friction", "body_mass", "body_inertia"):
        assert np.abs(g.params[name]).max() > 1e-6, name
    for groups, step in ((("params",), 1e-6), (("initial_state",), 1e-5)):
        report = tisim.gradcheck(sim, loss, groups=groups, step=step, max_entries=12, extrapolate=True)
        assert report.worst <= 1e-5, str(report)


@pytest.mark.parametrize("make, message", [
    (lambda: Handling(horizon=2, robot=grid(3, 2, actuate_every_spring=False)), "must be 3D"),
    (lambda: Handling(horizon=2, robot="quadruped3d"), "no actuators"),
    (lambda: Handling(horizon=2, n_motors=2), "n_motors"),
    (lambda: Handling(horizon=2, tree=3), "tree must be a Tree or an MJCF file path"),
    (lambda: Handling(horizon=0), "Handling: horizon must be an integer >= 1"),
])
def test_bad_input(make, message):
    with pytest.raises((ValueError, TypeError), match=message):
        make()


def test_a_tree_with_nothing_to_touch_is_refused():
    b = Builder("bare")
    b.free(b.body(0, pos=(0.5, -0.5, 0.5), mass=1.0, inertia=(1e-3,) * 3))
    with pytest.raises(ValueError, match="Handling: the tree 'bare' has no sphere, capsule or box"):
        Handling(horizon=2, tree=b.build())
