"""Kinematic tools on MPM's grid: Coulomb's law on a moving tool, a column resting on a tool as on the floor, the
gradients against central differences and against Taichi's reverse mode, bad input."""
import numpy as np
import pytest

import tisim
from tisim.systems.mpm import Body, Shaping, Tool
from tisim.testing import assert_gradients_agree

from test_mpm import GRID, column_shortening, neo_hookean_column_shortening


def tool_impact(mu, dim, n_grid=32, lift=1.0):
    """A stiff block thrown at a tall frictional box (0.5 m/s into it) that moves along its face at `lift` m/s,
    without gravity: the change of the block's mean velocity (normal, tangential) over the impact."""
    h = 1.0 / n_grid
    low, high = [0.3] + [0.4] * (dim - 1), [0.35] + [0.5] * (dim - 1)
    body = Body.box(low, high, h / 2)
    wall = Tool.box([0.23] + [0.45] * (dim - 1), [0.05] + [0.3] * (dim - 1), mu=mu)
    E = 1e5
    dt = 0.2 * h / np.sqrt(E / 1000.0)
    sim = Shaping(horizon=int(0.08 / dt), body=body, n_grid=n_grid, dt=dt, E=E, g=0.0, tools=[wall],
                  material="neo_hookean", tool_softness=1e-4)
    vel = np.zeros_like(body.particles)
    vel[:, 0] = -0.5
    sim.set_initial_state(vel=vel)
    sim.set_actions(np.broadcast_to([[0.0, lift] + [0.0] * (dim - 2)], (sim.T, 1, dim)))
    traj = sim.rollout()
    v = traj["vel"][0].mean(axis=1)
    assert np.allclose(traj["tool_pos"][0, -1, 0, 1] - traj["tool_pos"][0, 0, 0, 1], lift * sim.T * dt)
    return v[-1, 0] - v[0, 0], v[-1, 1] - v[0, 1]


@pytest.mark.parametrize("dim, mu", [(2, 0.2), (2, 0.4), (3, 0.3)])
def test_a_moving_tool_drags_by_coulombs_law(dim, mu):
    """A block thrown at a tool whose face slides along it at 1 m/s, without gravity: the tool's friction gives the
    block tangential momentum mu times the normal momentum the tool gives it, Coulomb's law for an impulse, in the
    tool's frame (measured 0.2000 and 0.4000 in 2D to rounding, 0.2998 in 3D); a frictionless tool gives none."""
    normal, tangential = tool_impact(mu, dim)
    assert normal > 0.5  # it stopped and bounced back
    assert abs(tangential / normal / mu - 1.0) < 0.01, (normal, tangential)
    if dim == 2 and mu == 0.2:
        normal, tangential = tool_impact(0.0, dim)
        assert normal > 0.5 and abs(tangential) < 1e-9


def test_a_column_rests_on_a_tool_as_on_the_floor():
    """A column (nu = 0, E = 1e5 Pa, rho = 1000 kg/m^2) released on a box tool standing still 0.25 m above the
    floor settles at the neo-Hookean compression its weight gives (tests/test_mpm.py's reference, independent of the
    code), between its fifth row and its top: measured 1.0009 on 32 cells, as the same column on the floor (1.0009;
    the whole column 1.019 on both). The tool's reach fades over 0.1 mm, so the column rests on its face: its lowest
    row, a quarter cell above the face at the start, ends 0.24 cells above it."""
    E, rho, n_grid = 1e5, 1000.0, 32
    h = 1.0 / n_grid
    table = Tool.box([0.5, 0.15], [0.3, 0.1])
    body = Body.box([0.45, 0.25], [0.55, 0.55], h / 2)
    dt = 0.3 * h / np.sqrt(E / rho)
    sim = Shaping(horizon=int(1.5 / dt), body=body, n_grid=n_grid, dt=dt, E=E, nu=0.0, rho=rho, drag=20.0,
                  tools=[table], material="neo_hookean", tool_softness=1e-4)
    traj = sim.rollout()
    assert np.abs(traj["vel"][0, -1]).max() < 1e-6  # at rest
    measured, z1, z2, height = column_shortening(traj, body, h, 0.25, 4)
    assert measured / neo_hookean_column_shortening(z1, z2, height, E, rho) == pytest.approx(1.0, abs=0.003)
    assert 0.2 * h < traj["pos"][0, -1, :, 1].min() - 0.25 < 0.25 * h


def pushed(cls=Shaping, dim=2):
    """A small spinning block that a rounded box, moving toward it with friction, pushes at a corner for 10 steps,
    with a target on the points' and the tool's motion; every tool parameter in reach (a softness of 2 cm on 8
    cells), each half extent alike (a push along one axis leaves the others' derivatives at rounding's scale)."""
    body = Body.box([0.4] * dim, [0.6] * dim, 0.5 / GRID)
    tool = Tool.box([0.32] * dim, [0.035] * dim, radius=0.02, mu=0.3)
    sim = cls(horizon=10, body=body, n_grid=GRID, tools=[tool], material="neo_hookean", tool_softness=0.02)
    rng = np.random.default_rng(0)
    n = len(body.particles)
    sim.set_initial_state(vel=rng.normal(-0.5, 0.3, (n, dim)), C=rng.normal(0.0, 1.0, (n, dim, dim)))
    # (a tool that turns, Sculpting's, does not turn here)
    sim.set_actions(np.pad(rng.normal(1.5, 0.3, (10, 1, dim)), [(0, 0), (0, 0), (0, sim.actions.shape[-1] - dim)]))
    loss = tisim.losses.TerminalTarget({"pos": body.particles + 0.05, "vel": np.full((n, dim), 0.1),
                                        "tool_pos": [[0.35] * dim]})
    return sim, loss


@pytest.mark.parametrize("dim, step", [(2, 1e-5), pytest.param(3, 1e-4, marks=pytest.mark.stress)])
def test_tool_gradients_match_central_differences(dim, step):
    """Every group against Richardson-extrapolated float64 central differences: the tool's sizes, friction and
    softness, its start and its velocities, with the material's own. A switch of the push (a node turning from
    approaching the tool to leaving it) lies within 1e-4 of the 2D tool's start (measured: 7.7e-5 relative error there
    at a step of 1e-4, 3e-8 at 1e-5); in 3D the steps of 1e-5 round off (9e-6 on an entry of C, 2e-7 at 1e-4)."""
    sim, loss = pushed(dim=dim)
    g = sim.gradient(loss)
    for name in ("tool_half", "tool_radius", "tool_mu", "tool_softness"):
        assert np.abs(g.params[name]).max() > 1e-3, name  # the tool acts through each
    report = tisim.gradcheck(sim, loss, step=step, max_entries=12, extrapolate=True)
    assert report.worst <= 1e-6, str(report)


class TaichiReverse(Shaping):
    """Shaping with Taichi's reverse mode of its phases in place of the hand-written reverses."""
    REVERSES = {}


def test_the_tools_hand_written_reverses_are_taichis_reverse_mode():
    """The tools' phase and the grid's reverse with the tools (rounded box, push, Coulomb friction) equal Taichi's
    reverse mode of the phases to 1e-12 in float64, in every group."""
    ours, taichis = (sim.gradient(loss) for sim, loss in (pushed(cls) for cls in (Shaping, TaichiReverse)))
    assert_gradients_agree(ours, taichis)


@pytest.mark.parametrize("make, error, message", [
    (lambda: Shaping(horizon=2, body=Body.box([0.4, 0.4], [0.6, 0.6], 0.05)), ValueError,
     "Shaping: tools must be a non-empty list of tisim.systems.mpm.Tool"),
    (lambda: Shaping(horizon=2, tools=[]), ValueError, "tools must be a non-empty list"),
    (lambda: Shaping(horizon=0, tools=[]), ValueError, "Shaping: horizon must be an integer >= 1"),
    (lambda: Shaping(horizon=2, tools=[Tool.sphere([0.5, 0.5], 0.1)], n_tools=2), ValueError,
     "n_tools is not a keyword"),
    (lambda: Shaping(horizon=2, tools=[Tool.sphere([0.5, 0.5, 0.5], 0.1)]), ValueError,
     "every tool must have 2 coordinates"),
    (lambda: Shaping(horizon=2, tools=[Tool.sphere([0.5, 0.5], 0.1)],
                     body=Body.box([0.4, 0.4], [0.6, 0.6], 0.05, actuator=0)), ValueError, "no actuators"),
    (lambda: Shaping(horizon=2, tools=[Tool.sphere([0.5, 0.5], 0.1)], tool_softness=0.0), ValueError,
     r"tool_softness must be in \(0, inf\)"),
    (lambda: Tool.sphere([0.5, 0.5], -0.1), ValueError, "radius must be a finite number >= 0"),
    (lambda: Tool.box([0.5, 0.5], [0.1, 0.0]), ValueError, "needs a radius > 0 or every half extent > 0"),
    (lambda: Tool.box([0.5, 0.5], [0.1]), ValueError, "half must be 2 finite half extents"),
    (lambda: Tool.capsule([0.5, 0.5], 0.1, 0.05, axis=2), ValueError, r"axis must be in \[0, 2\)"),
    (lambda: Tool([0.5, np.nan], radius=0.1), ValueError, "centre must be 2 or 3 finite coordinates"),
])
def test_bad_input(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_the_tools_velocities_are_the_actions():
    sim = Shaping(horizon=3, tools=[Tool.sphere([0.2, 0.5], 0.05), Tool.capsule([0.8, 0.5], 0.1, 0.02, axis=1)])
    assert sim.actions.shape == (1, 3, 2, 2)
    with pytest.raises(ValueError, match=r"actions \(tool_vel\) must have shape \(3, 2, 2\)"):
        sim.set_actions(np.zeros((3, 2)))
    np.testing.assert_allclose(sim.params["tool_half"][0], [[0.0, 0.0], [0.0, 0.1]])
    np.testing.assert_allclose(sim.initial_state["tool_pos"][0], [[0.2, 0.5], [0.8, 0.5]])


@pytest.mark.parametrize("dim", [2, 3])
def test_occupancy_fills_the_cells_of_points_at_rest_and_iou_counts_shared_cells(dim):
    """Points on the grid's nodes fill exactly their nodes (a point gives its own node 0.75^d of itself, more than
    half, and its neighbours' shares stay below half outside the body: 0.125 x 0.875 on an edge); a copy shifted by
    two nodes along x shares all but two layers of an 8-node-wide block: IoU (8 - 2) / (8 + 2). Computed by hand,
    apart from the code."""
    from tisim.systems.mpm import iou, occupancy
    cells = 32
    axes = [np.arange(10, 18)] + [np.arange(12, 16)] * (dim - 1)
    points = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, dim) / cells
    filled = occupancy(points, cells)
    expected = np.zeros((cells,) * dim, bool)
    expected[(slice(10, 18),) + (slice(12, 16),) * (dim - 1)] = True
    np.testing.assert_array_equal(filled, expected)
    shifted = points + np.eye(dim)[0] * 2 / cells
    assert iou(points, points, cells) == 1.0
    assert iou(points, shifted, cells) == pytest.approx(6 / 10)
    with pytest.raises(ValueError, match="cells must be an integer >= 1"):
        occupancy(points, 0)


def test_a_sphere_in_line_with_a_node_column_gets_its_sideways_gradient():
    """A disc whose centre lies exactly on a column of nodes (x = 0.5 on 32 cells) pressed into a block that is not
    symmetric about it: the derivative of the points' mean x with respect to the disc's x matches central differences.
    On that column the normal's x part, d_x / |d|, passes smoothly through zero; a reverse taking the flat side of
    |d_x|'s kink there gives +0.0045 where the slope is -0.031 (measured: 1.3e-6 off, the difference's own
    error)."""
    sim = Shaping(horizon=60, tools=[Tool.sphere([0.5, 3 / 32 + 0.13], 0.03)], material="neo_hookean")
    sim.set_actions(np.broadcast_to([[0.0, -0.6]], (60, 1, 2)))
    n = sim.n_particles
    weights = np.zeros((n, 2))
    weights[:, 0] = 1.0 / n
    loss = tisim.losses.TerminalSum({"pos": weights})
    slope = sim.gradient(loss).initial_state["tool_pos"][0, 0, 0]
    values = []
    for sign in (1, -1):
        sim.set_initial_state(tool_pos=[[0.5 + sign * 1e-7, 3 / 32 + 0.13]])
        values.append(sim.evaluate(loss)[0])
    central = (values[0] - values[1]) / 2e-7  # the slope turns fast here (-0.031 at 0.5, -0.016 at 0.501): a small step
    assert abs(slope) > 1e-3 and slope == pytest.approx(central, rel=1e-5), (slope, central)
