"""Kinematic tools that turn (Sculpting): a tool that does not turn steps as Shaping's, a box turned a quarter is the
box with its sides swapped, a frictionless disc's spin does nothing and a frictional one's rolls, the gradients
against central differences and against Taichi's reverse mode, the picture, bad input; in 2D and (quaternions) 3D."""
import numpy as np
import pytest

import tisim
from tisim import viz
from tisim.systems.mpm import BAND, Body, Sculpting, Shaping, Tool
from tisim.systems.mpm.sculpting import Sculpting3D
from tisim.testing import assert_gradients_agree
from tisim.viz.bodies import with_tools
from tisim.viz.drawings import draw_shaping
from tisim.viz.raster import BACKGROUND, ROD

from test_mpm import GRID
from test_mpm_tools import pushed

N_GRID = 32
FLOOR = BAND / N_GRID
SLAB = Body.box([0.4, FLOOR], [0.6, FLOOR + 0.08], 0.5 / N_GRID)


def pressed(cls, tool, steps=150, spin=0.0, **values):
    """A slab of von Mises clay that `tool` (starting 4 cm above its top) presses, moving down at 0.5 m/s and right
    at 0.3 m/s, turning at `spin` rad/s (Sculpting only): the rollout."""
    sim = cls(horizon=steps, body=SLAB, n_grid=N_GRID, tools=[tool], material="von_mises", **values)
    velocity = np.broadcast_to([[0.3, -0.5]], (steps, 1, 2))
    sim.set_actions(velocity if cls is Shaping else np.concatenate([velocity, np.full((steps, 1, 1), spin)], -1))
    return sim, sim.rollout()


def test_a_tool_that_does_not_turn_steps_as_shapings():
    """At angle 0 without spin, a rounded box steps exactly as Shaping's: the same points, velocities and tool, and
    the same gradients (the twist's velocity part is Shaping's action's)."""
    tool = Tool.box([0.45, FLOOR + 0.12], [0.04, 0.01], radius=0.01, mu=0.3)
    (_, ours), (_, theirs) = (pressed(cls, tool, steps=60) for cls in (Shaping, Sculpting))
    for name in ("pos", "vel", "C", "F", "tool_pos"):
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
    assert np.abs(ours["pos"][0, -1] - ours["pos"][0, 0]).max() > 1e-3  # it dents the clay
    (shaping, loss), (sculpting, _) = pushed(Shaping), pushed(Sculpting)
    g, h = shaping.gradient(loss), sculpting.gradient(loss)
    for group in ("params", "initial_state"):
        for name, value in getattr(g, group).items():
            np.testing.assert_allclose(getattr(h, group)[name], value, rtol=1e-12, atol=1e-12 * np.abs(value).max())
    np.testing.assert_allclose(h.actions[..., :2], g.actions, rtol=1e-12, atol=1e-12 * np.abs(g.actions).max())
    assert np.abs(h.initial_state["tool_angle"]).max() > 1e-3  # the box's angle matters to the loss


def test_a_box_turned_a_quarter_is_the_box_with_its_sides_swapped():
    """A 8 cm by 2 cm rounded box at a quarter turn presses the clay as a 2 cm by 8 cm one at angle 0 does, to
    rounding (cos(pi / 2) is 6e-17): the shape is taken in the box's own frame and its normal turned back."""
    flat, upright = (Tool.box([0.45, FLOOR + 0.12], half, radius=0.01, mu=0.3) for half in ([0.04, 0.01], [0.01, 0.04]))
    _, turned = pressed(Sculpting, flat, tool_angle=[np.pi / 2])
    _, reference = pressed(Shaping, upright)
    assert np.abs(reference["pos"][0, -1] - reference["pos"][0, 0]).max() > 5e-3
    np.testing.assert_allclose(turned["pos"], reference["pos"], rtol=0, atol=1e-15)
    assert turned["tool_angle"][0, -1, 0] == pytest.approx(np.pi / 2, abs=1e-15)


def test_a_frictionless_discs_spin_leaves_the_clay_as_a_still_disc_does():
    """A disc without friction pushes only along its normal, which its rigid turning does not move: spinning at
    30 rad/s it dents the clay as a disc that does not turn, to rounding; its angle is the spin's integral."""
    disc = Tool.sphere([0.45, FLOOR + 0.12], 0.03)
    sim, still = pressed(Sculpting, disc)
    _, spinning = pressed(Sculpting, disc, spin=30.0)
    assert np.abs(still["pos"][0, -1] - still["pos"][0, 0]).max() > 5e-3
    np.testing.assert_allclose(spinning["pos"], still["pos"], rtol=0, atol=1e-15)
    np.testing.assert_allclose(spinning["tool_angle"][0, :, 0], 30.0 * sim.dt * np.arange(sim.T + 1), rtol=1e-13)


@pytest.mark.perturbed
def test_a_rolling_pin_drags_the_clay_less_than_a_sliding_one():
    """A 4 cm disc with friction 1, pressed 1.2 cm into a 0.4 m by 8 cm slab, then moved 10 cm to the right: rolling
    (angular velocity -u / r, its rim still where it meets the clay) it carries the slab along less than half as far
    as sliding without turning does, and spinning backwards further than sliding (measured: the points' mean
    displacements 2.9, 8.6 and 15.8 mm)."""
    body = Body.box([0.3, FLOOR], [0.7, FLOOR + 0.08], 0.5 / N_GRID)
    carried = rolled(body, N_GRID, Tool.sphere([0.4, FLOOR + 0.122], 0.04, mu=1.0))
    assert 0 < carried["rolling"] < 0.5 * carried["sliding"] < 0.75 * carried["backwards"], carried


def rolled(body, n_grid, pin, steps=400, down=100):
    """How far a von Mises slab's points are carried along x, on average, by `pin` (radius r, friction 1) pressed
    1.2 cm in over `down` steps, then moved 10 cm along x, rolling (turning at -u / r about z), sliding and spinning
    backwards: {"rolling": m, "sliding": m, "backwards": m}."""
    sim = Sculpting(horizon=steps, body=body, n_grid=n_grid, tools=[pin], material="von_mises", E=1e5,
                    yield_stress=3000.0)
    twist = np.zeros((steps, 1, sim.actions.shape[-1]))  # the angular velocity about z is the last entry
    twist[:down, 0, 1] = -0.012 / (down * sim.dt)
    u = 0.1 / ((steps - down) * sim.dt)
    twist[down:, 0, 0] = u
    carried = {}
    for name, spin in (("rolling", -u / pin.radius), ("sliding", 0.0), ("backwards", u / pin.radius)):
        twist[down:, 0, -1] = spin
        sim.set_actions(twist)
        pos = sim.rollout()["pos"][0]
        carried[name] = np.mean(pos[-1, :, 0] - pos[down, :, 0])
    return carried


def twisted(cls=Sculpting):
    """A small spinning block that a turned rounded box, moving toward it and turning with friction, pushes at a
    corner for 10 steps, with a target on the points' and the tool's motion and angle (test_mpm_tools.py's pushed,
    turning)."""
    body = Body.box([0.4, 0.4], [0.6, 0.6], 0.5 / GRID)
    tool = Tool.box([0.32, 0.32], [0.045, 0.025], radius=0.02, mu=0.3)
    sim = cls(horizon=10, body=body, n_grid=GRID, tools=[tool], material="neo_hookean", tool_softness=0.02,
              tool_angle=[0.4])
    rng = np.random.default_rng(0)
    n = len(body.particles)
    sim.set_initial_state(vel=rng.normal(-0.5, 0.3, (n, 2)), C=rng.normal(0.0, 1.0, (n, 2, 2)))
    sim.set_actions(np.concatenate([rng.normal(1.5, 0.3, (10, 1, 2)), rng.normal(3.0, 1.0, (10, 1, 1))], -1))
    loss = tisim.losses.TerminalTarget({"pos": body.particles + 0.05, "vel": np.full((n, 2), 0.1),
                                        "tool_pos": [[0.35, 0.35]], "tool_angle": [0.0]})
    return sim, loss


def test_turning_tool_gradients_match_central_differences():
    """Every group against Richardson-extrapolated float64 central differences: the tool's sizes, friction and
    softness, its start, its angle and its twists, with the material's own."""
    sim, loss = twisted()
    g = sim.gradient(loss)
    assert np.abs(g.actions[..., 2]).max() > 1e-4  # the spin acts through the box's angle and its rigid motion
    report = tisim.gradcheck(sim, loss, step=1e-5, max_entries=12, extrapolate=True)
    assert report.worst <= 1e-6, str(report)


class TaichiReverse(Sculpting):
    """Sculpting with Taichi's reverse mode of its phases in place of the hand-written reverses."""
    REVERSES = {}


def test_the_turning_tools_hand_written_reverses_are_taichis_reverse_mode():
    ours, taichis = (sim.gradient(loss) for sim, loss in (twisted(cls) for cls in (Sculpting, TaichiReverse)))
    assert_gradients_agree(ours, taichis)


def test_a_turned_tool_is_drawn_at_its_angle():
    """A 16 cm by 1 cm bar at 45 degrees: its picture covers the diagonal through its centre and not the grid's axes
    there."""
    canvas = viz.Canvas(200, 200, bounds=(0.3, 0.7, 0.3, 0.7))
    params = {"tool_half": np.array([[0.08, 0.005]]), "tool_radius": np.array([0.0]), "n_grid": N_GRID,
              "target": np.zeros((0, 2))}
    draw_shaping(canvas, {"pos": np.zeros((0, 2)), "tool_pos": np.array([[0.5, 0.5]]),
                              "tool_angle": np.array([np.pi / 4])}, params)
    image = canvas.image()
    colour = lambda point: tuple(int(c) for c in image[tuple(canvas.to_pixels(point).astype(int)[::-1])])  # noqa
    assert colour((0.55, 0.55)) == ROD and colour((0.45, 0.45)) == ROD
    assert colour((0.55, 0.5)) == BACKGROUND and colour((0.5, 0.55)) == BACKGROUND


# ---- 3D: orientations as quaternions ---------------------------------------------------------------------------
GRID_3D = 24
FLOOR_3D = BAND / GRID_3D
SLAB_3D = Body.box([0.3, FLOOR_3D, 0.4], [0.7, FLOOR_3D + 0.08, 0.6], 0.5 / GRID_3D)


def quaternion(axis, angle):
    """The unit quaternion of a turn by `angle` about `axis`."""
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    return np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * axis])


def pressed_3d(cls, tool, steps=150, spin=(0.0, 0.0, 0.0), **state):
    """SLAB_3D's clay pressed by `tool` (starting 4 cm above it) moving down at 0.5 m/s and along x at 0.3 m/s,
    turning at `spin` (Sculpting only), from the initial state given: the simulator and its rollout."""
    sim = cls(horizon=steps, body=SLAB_3D, n_grid=GRID_3D, tools=[tool], material="von_mises")
    if state:
        sim.set_initial_state(**state)
    width = sim.actions.shape[-1]  # Shaping's 3, Sculpting's 6
    sim.set_actions(np.broadcast_to(np.concatenate([[0.3, -0.5, 0.0], spin])[:width], (steps, 1, width)))
    return sim, sim.rollout()


def test_a_3d_tool_turns_exactly_and_a_quarter_turn_swaps_its_sides():
    """In 3D (Sculpting3D, which Sculpting makes for a 3D body): a tool at the identity without spin steps exactly
    as Shaping's; a 12 x 3 x 6 cm rounded box turned a quarter about z presses the clay as a 3 x 12 x 6 cm one that
    does not turn (to rounding: 2.8e-17 m measured); the same quaternion at length 2 changes nothing; a held angular
    velocity about a slanted axis turns the tool by the exact angle (1.3e-15 measured); a frictionless sphere spinning
    about a slanted axis dents the clay as a still one does."""
    flat, upright = (Tool.box([0.5, FLOOR_3D + 0.135, 0.5], half, radius=0.01, mu=0.3)
                     for half in ([0.06, 0.015, 0.03], [0.015, 0.06, 0.03]))
    _, reference = pressed_3d(Shaping, upright)
    assert np.abs(reference["pos"][0, -1] - reference["pos"][0, 0]).max() > 5e-3
    sim, same = pressed_3d(Sculpting, upright)
    assert type(sim).__name__ == "Sculpting3D" and isinstance(sim, Sculpting)
    for name in ("pos", "vel", "C", "F", "tool_pos"):
        np.testing.assert_array_equal(same[name], reference[name], err_msg=name)
    quarter = quaternion([0.0, 0.0, 1.0], np.pi / 2)
    for length in (1.0, 2.0):
        _, turned = pressed_3d(Sculpting, flat, tool_orientation=[length * quarter])
        np.testing.assert_allclose(turned["pos"], reference["pos"], rtol=0, atol=1e-15)
    w = np.array([7.0, -14.0, 3.5])
    _, spun = pressed_3d(Sculpting, flat, spin=w)
    exact = quaternion(w, np.linalg.norm(w) * sim.dt * sim.T)
    np.testing.assert_allclose(spun["tool_orientation"][0, -1, 0], exact, rtol=0, atol=1e-13)
    # a frictionless sphere pushes along its normals only, which its turning does not move
    ball = Tool.sphere([0.5, FLOOR_3D + 0.12, 0.5], 0.03)
    (_, still), (_, spinning) = (pressed_3d(Sculpting, ball, spin=w) for w in ((0.0, 0.0, 0.0), (20.0, -30.0, 10.0)))
    assert np.abs(still["pos"][0, -1] - still["pos"][0, 0]).max() > 5e-3
    np.testing.assert_allclose(spinning["pos"], still["pos"], rtol=0, atol=1e-15)


@pytest.mark.perturbed
def test_a_3d_rolling_pin_drags_the_clay_less_than_a_sliding_one():
    """A capsule along z of radius 4 cm with friction 1, pressed 1.2 cm into the slab and moved 10 cm along x,
    carries the clay less far rolling (angular velocity -u / r about z) than sliding, and sliding less far than
    spinning backwards (2D's rolling pin, in 3D: the rigid motion w x d; measured 4.0, 13.8 and 17.3 mm)."""
    carried = rolled(SLAB_3D, GRID_3D, Tool.capsule([0.4, FLOOR_3D + 0.122, 0.5], 0.06, 0.04, axis=2, mu=1.0))
    assert 0 < carried["rolling"] < 0.5 * carried["sliding"] < 0.75 * carried["backwards"], carried


def twisted_3d(cls=Sculpting):
    """twisted in 3D: a small spinning block that a rounded box, turned about a slanted axis (its quaternion of
    length 1.001), moving and turning at random (about 30 rad/s), pushes for 10 steps; a target on the points, the
    tool's place and its orientation."""
    body = Body.box([0.4] * 3, [0.6] * 3, 0.5 / 16)
    tool = Tool.box([0.32] * 3, [0.045, 0.025, 0.035], radius=0.02, mu=0.3)
    sim = cls(horizon=10, body=body, n_grid=16, tools=[tool], material="neo_hookean", tool_softness=0.02)
    rng = np.random.default_rng(0)
    n = len(body.particles)
    sim.set_initial_state(vel=rng.normal(-0.5, 0.3, (n, 3)), C=rng.normal(0.0, 1.0, (n, 3, 3)),
                          tool_orientation=[[0.9, 0.2, -0.3, 0.25]])
    sim.set_actions(np.concatenate([rng.normal(1.5, 0.3, (10, 1, 3)), rng.normal(0.0, 30.0, (10, 1, 3))], -1))
    loss = tisim.losses.TerminalTarget({"pos": body.particles + 0.05, "tool_pos": [[0.35] * 3],
                                        "tool_orientation": [[1.0, 0.0, 0.0, 0.0]]})
    return sim, loss


def test_3d_turning_tool_gradients_match_central_differences():
    """Every parameter and every twist, and 60 entries of the start, against Richardson-extrapolated float64 central
    differences at a step of 1e-4 (3D rounds off at 1e-5, as Shaping's does), relative to each entry or to a
    thousandth of its group's largest, whichever is larger: many entries of the start are 1e-8 of the largest, where
    rounding, not the gradient, sets the difference (measured: 2.1e-6 on a twist, 1.8e-7 on the parameters, 1.4e-7
    on the start; 6e-6, 3.5e-7 and 2.8e-7 at a step of 3e-5). The quaternion's four entries on their own after."""
    sim, loss = twisted_3d()
    g = sim.gradient(loss)
    assert np.abs(g.initial_state["tool_orientation"]).max() > 1e-3 and np.abs(g.actions[..., 3:]).max() > 1e-6
    report = tisim.gradcheck(sim, loss, step=1e-4, extrapolate=True, max_entries=60)
    for check in report.values():
        scale = np.maximum(np.abs(check.central), 1e-3 * np.abs(check.central).max())
        assert (np.abs(check.backward - check.central) / scale).max() <= 1e-5, str(report)
    start = sim.initial_state["tool_orientation"]

    def loss_at(orientation):
        sim.set_initial_state(tool_orientation=orientation)
        return float(np.ravel(sim.evaluate(loss))[0])
    for i, e in enumerate(1e-5 * np.eye(4)):
        central = (loss_at(start + e) - loss_at(start - e)) / 2e-5
        assert central == pytest.approx(g.initial_state["tool_orientation"][0, 0, i], rel=1e-6, abs=1e-9)


class TaichiReverse3D(Sculpting3D):
    """Sculpting3D with Taichi's reverse mode of its phases in place of the hand-written reverses."""
    REVERSES = {}


@pytest.mark.stress  # Taichi's reverse of the 3D step takes about 6 minutes to compile
def test_the_3d_turning_tools_hand_written_reverses_are_taichis_reverse_mode():
    """To 1e-12, except the density's derivative, a sum that cancels to 1e-6 of its terms (1.9e-11 measured)."""
    (_, ours), (_, taichis) = ((sim, sim.gradient(loss)) for sim, loss in (twisted_3d(cls) for cls in
                                                                             (Sculpting, TaichiReverse3D)))
    ours.params["rho"] = taichis.params["rho"] = np.zeros(1)
    assert_gradients_agree(ours, taichis)


def test_a_turned_3d_tool_is_pictured_turned():
    """A 12 x 3 x 6 cm box rounded by 1 cm, a quarter turn about z (its quaternion at length 2): its picture is the
    bounding box turned, 3.5 x 14 x 8 cm; a tool that does not turn keeps Shaping's box."""
    params = {"tool_half": np.array([[0.06, 0.015, 0.03]]), "tool_radius": np.array([0.01])}
    state = {"tool_pos": np.array([[0.5, 0.3, 0.5]]), "tool_orientation": [2 * quaternion([0, 0, 1], np.pi / 2)]}
    vertices, triangles = with_tools({}, state, params)["solid"]
    np.testing.assert_allclose(vertices.max(axis=0) - [0.5, 0.3, 0.5], [0.025, 0.07, 0.04], atol=1e-15)
    assert triangles.shape == (12, 3)
    boxes = with_tools({}, {"tool_pos": state["tool_pos"]}, params)["boxes"]
    np.testing.assert_allclose(boxes[0][1], [0.07, 0.025, 0.04])


@pytest.mark.parametrize("make, message", [
    (lambda: Sculpting(horizon=2, tools=[Tool.sphere([0.5, 0.5, 0.5], 0.1)]), "every tool must have 2 coordinates"),
    (lambda: Sculpting3D(horizon=2, tools=[Tool.sphere([0.5, 0.5], 0.1)]), "Sculpting3D: body must be a 3D"),
    (lambda: Sculpting(horizon=2, body=Body.box([0.4] * 3, [0.6] * 3, 0.05), tools=[Tool.sphere([0.5] * 3, 0.1)])
     .set_initial_state(tool_orientation=[[0.0, 1e-7, 0.0, 0.0]]), "tool_orientation must be nonzero quaternions"),
    (lambda: Sculpting(horizon=3, body=Body.box([0.4] * 3, [0.6] * 3, 0.05), tools=[Tool.sphere([0.5] * 3, 0.1)])
     .set_actions(np.zeros((3, 1, 3))), r"actions \(tool_twist\) must have shape \(3, 1, 6\)"),
    (lambda: Sculpting(horizon=2, tools=[]), "Sculpting: tools must be a non-empty list"),
    (lambda: Sculpting(horizon=3, tools=[Tool.sphere([0.5, 0.5], 0.1)]).set_actions(np.zeros((3, 1, 2))),
     r"actions \(tool_twist\) must have shape \(3, 1, 3\)"),
])
def test_bad_input(make, message):
    with pytest.raises(ValueError, match=message):
        make()
