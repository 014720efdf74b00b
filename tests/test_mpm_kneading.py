"""An articulated robot in MPM material, both ways (tisim.systems.Kneading): a free ball steps as Coupled's free
tool, momentum is exchanged and kept, the grid's hand-written reverse against Taichi's, central differences, bad
input."""
import numpy as np
import pytest

import tisim
from tisim.systems import Coupled, Kneading
from tisim.systems.articulation import Builder
from tisim.systems.mpm import BAND, Body, Tool
from tisim.testing import assert_gradients_agree

GRID = 16
TO_BODY = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])  # tree (x, y, z) -> material (x, z, -y)
BOX_HALF = np.array([0.04, 0.03, 0.04])  # [m] the boxes' half extents in the material's frame


def free_body(shape, mass, at, friction=0.0):
    """A tree of one free body of isotropic inertia at `at` (the material's frame): a sphere of radius `shape`, a
    capsule of radius 2 cm along its x, a box of half extents (4, 3, 4) cm in the material's frame ("box"), or that
    box turned about an oblique axis ("turned box")."""
    b = Builder("free")
    body = b.body(0, pos=TO_BODY.T @ np.asarray(at, float), mass=mass, inertia=(1e-3,) * 3)
    b.free(body)
    if shape == "capsule":
        b.capsule(body, 0.02, 0.04, quat=(np.sqrt(0.5), np.sqrt(0.5), 0.0, 0.0), friction=friction)
    elif shape in ("box", "turned box"):
        turn = np.array([0.9, 0.2, -0.3, 0.25]) if shape == "turned box" else np.array([1.0, 0.0, 0.0, 0.0])
        b.box(body, BOX_HALF[[0, 2, 1]], quat=tuple(turn / np.linalg.norm(turn)), friction=friction)
    else:
        b.sphere(body, shape, friction=friction)
    return b.build()


def assert_steps_as_coupleds_free_tool(body, shape, tool, start, velocity):
    """A frictionless 2 kg free body of the given shape and Coupled's free tool of the same shape and mass, thrown
    from start at velocity into the body of material: the body's centre and the tool's, and every point, agree to
    rounding; the body does not turn; the material slows it."""
    common = dict(horizon=150, body=body, n_grid=GRID, material="neo_hookean", E=3e3)
    ours = Kneading(tree=free_body(shape, 2.0, start), shape_softness=1.0 / GRID, **common)
    ours.set_initial_state(qd=np.concatenate([TO_BODY.T @ velocity, np.zeros(3)]))
    theirs = Coupled(tools=[tool], tool_mass=[2.0], **common)
    theirs.set_initial_state(tool_vel=[velocity])
    a, b = ours.rollout(), theirs.rollout()
    centre = np.einsum("jk,tk->tj", TO_BODY, a["q"][0, :, :3])
    assert -0.5 < b["tool_vel"][0, -1, 0, 1] < 0.1  # the block slowed it
    np.testing.assert_allclose(centre, b["tool_pos"][0, :, 0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(a["pos"], b["pos"], rtol=0, atol=1e-12)
    assert np.abs(a["qd"][0, :, 3:]).max() < 1e-9  # it did not turn


def test_a_free_ball_steps_as_coupleds_free_tool():
    """A frictionless 2 kg ball thrown down into a jelly block: its pushes pass through its centre, so it does not
    turn, and Kneading's step (the tree's free step, the push at the velocity it gives, the impulse back as a force
    held over the step) is Coupled's for a free sphere tool of the same mass (u = U + dt (f / M - g), U' = u +
    J / M): the points and the ball agree to rounding while the ball sinks in and is slowed."""
    base = BAND / GRID
    body = Body.box([0.4, base, 0.4], [0.6, base + 0.1, 0.6], 0.5 / GRID)
    start = np.array([0.5, base + 0.14, 0.48])
    assert_steps_as_coupleds_free_tool(body, 0.03, Tool.sphere(start, 0.03), start, np.array([0.3, -1.0, 0.1]))


def test_a_free_box_pressed_square_on_steps_as_coupleds_free_tool():
    """A frictionless 2 kg box dropped square onto the middle of a jelly block: the material pushes its bottom face
    evenly about its centre, so it does not turn, and it steps as Coupled's free box tool of the same mass (the
    box's distance computed in its own frame, turned back): the points and the box agree to rounding."""
    base = BAND / GRID
    # 7 x 7 points a column, mirror images about x = z = 0.5, a node, where the box's centre is: the pushes balance
    body = Body.box([0.390625, base, 0.390625], [0.609375, base + 0.1, 0.609375], 0.5 / GRID)
    start = np.array([0.5, base + 0.14, 0.5])
    assert_steps_as_coupleds_free_tool(body, "box", Tool.box(start, BOX_HALF), start, np.array([0.0, -1.0, 0.0]))


@pytest.mark.parametrize("shape", ["capsule", "turned box"])
def test_momentum_passes_between_material_and_a_spinning_body_and_is_kept(shape):
    """A spinning 3 kg capsule, or a box turned about an oblique axis, thrown at a jelly block without gravity, away
    from the walls: the sum of the points' and the body's momentum stays what it was to rounding while the block
    takes some."""
    body = Body.box([0.45] * 3, [0.6] * 3, 0.5 / GRID)
    sim = Kneading(horizon=120, body=body, n_grid=GRID, tree=free_body(shape, 3.0, [0.38, 0.52, 0.52], 0.3),
                   g=0.0, material="neo_hookean", E=3e3)
    sim.set_initial_state(qd=np.concatenate([TO_BODY.T @ np.array([1.0, 0.1, 0.1]), [4.0, -3.0, 2.0]]))
    traj = sim.rollout()
    masses = np.asarray(sim.point_masses()).reshape(-1)
    total = np.einsum("p,tpk->tk", masses, traj["vel"][0]) + 3.0 * np.einsum("jk,tk->tj", TO_BODY,
                                                                            traj["qd"][0, :, :3])
    assert traj["qd"][0, -1, 0] < 0.8  # an exchange took place
    assert np.abs(total - total[0]).max() < 1e-13 * np.abs(total[0]).max(), np.abs(total - total[0]).max()


def pressed(cls=Kneading, shape="capsule"):
    """A motor swings a hinged rod (a capsule with friction, or a box turned about its axis) down into a small jelly
    block for 10 steps from random point velocities, a target on the points and the rod."""
    b = Builder("rod")
    rod = b.body(0, pos=(0.4, -0.5, 0.38), mass=0.3, ipos=(0.05, 0.0, 0.0), inertia=(1e-5, 3e-4, 3e-4))
    b.motor(b.hinge(rod, axis=(0.0, 1.0, 0.0), damping=0.01), gear=1.0)
    if shape == "capsule":
        b.capsule(rod, 0.03, 0.05, pos=(0.05, 0.0, 0.0), quat=(np.sqrt(0.5), 0.0, np.sqrt(0.5), 0.0), friction=0.4)
    else:
        b.box(rod, (0.07, 0.03, 0.025), pos=(0.05, 0.0, 0.0), quat=(0.98, 0.2, 0.0, 0.0), friction=0.4)
    body = Body.box([0.4] * 3, [0.6, 0.5, 0.6], 0.5 / GRID)
    sim = cls(horizon=10, body=body, n_grid=GRID, tree=b.build(), material="neo_hookean", E=3e3,
              shape_softness=0.02, qd=[3.0])
    rng = np.random.default_rng(0)
    n = sim.n_particles
    sim.set_initial_state(vel=rng.normal(0.0, 0.3, (n, 3)))
    sim.set_actions(rng.normal(0.5, 0.3, (10, 1)))
    loss = tisim.losses.TerminalTarget({"pos": body.particles + 0.05, "vel": np.full((n, 3), 0.1), "q": [0.3],
                                        "qd": [1.0]})
    return sim, loss


class TaichiGrid(Kneading):
    """Kneading with Taichi's reverse mode of its grid phase in place of the hand-written one."""
    REVERSES = {name: entry for name, entry in Kneading.REVERSES.items() if name != "grid"}


@pytest.mark.parametrize("shape", ["capsule", "box"])
def test_the_grids_hand_written_reverse_is_taichis_reverse_mode(shape):
    sims = [pressed(cls, shape) for cls in (Kneading, TaichiGrid)]
    ours, taichis = (sim.gradient(loss) for sim, loss in sims)
    assert np.abs(ours.params["geom_friction"]).max() > 1e-6 and np.abs(ours.actions).max() > 1e-6
    assert_gradients_agree(ours, taichis)


def test_gradients_match_central_differences():
    """Every group against Richardson-extrapolated float64 central differences, the rod's friction, mass, frame and
    motor with the material's own, each at a step where the differences settle: the parameters at 1e-6 (measured
    worst 1.8e-5, on the rod's centre of mass; at 1e-5 the differences of its frame's place are 4% off, where the
    pushes' and stencils' kinks lie within the step), the initial state at 1e-5 (2.6e-6), the torques at 1e-3 N m
    (1.0e-7; their effect is dt / I of them, and at 1e-5 the differences wander by 2e-5)."""
    sim, loss = pressed()
    for group, step in (("params", 1e-6), ("initial_state", 1e-5), ("actions", 1e-3)):
        report = tisim.gradcheck(sim, loss, groups=(group,), step=step, max_entries=10, extrapolate=True)
        assert report.worst <= 5e-5, str(report)


def test_a_boxs_gradients_match_central_differences():
    """The same with a box for the rod, the parameters at 1e-6 and the initial state at 1e-5."""
    sim, loss = pressed(shape="box")
    for group, step in (("params", 1e-6), ("initial_state", 1e-5)):
        report = tisim.gradcheck(sim, loss, groups=(group,), step=step, max_entries=10, extrapolate=True)
        assert report.worst <= 5e-5, str(report)


@pytest.mark.parametrize("make, message", [
    (lambda: Kneading(horizon=2, body=Body.box([0.4, 0.2], [0.6, 0.3], 0.02)), "must be 3D"),
    (lambda: Kneading(horizon=2, body=Body.box([0.4, 0.1, 0.4], [0.6, 0.2, 0.6], 0.05, actuator=0)),
     "no actuators"),
    (lambda: Kneading(horizon=2, n_motors=2), "n_motors"),
    (lambda: Kneading(horizon=2, tree=3), "tree must be a Tree or an MJCF file path"),
    (lambda: Kneading(horizon=0), "Kneading: horizon must be an integer >= 1"),
])
def test_bad_input(make, message):
    with pytest.raises((ValueError, TypeError), match=message):
        make()


def test_a_tree_with_nothing_to_touch_is_refused():
    b = Builder("bare")
    b.free(b.body(0, pos=(0.5, 0.5, 0.5), mass=1.0, inertia=(1e-3,) * 3))
    with pytest.raises(ValueError, match="Kneading: the tree 'bare' has no sphere, capsule or box"):
        Kneading(horizon=2, tree=b.build())
