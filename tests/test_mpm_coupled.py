"""Free rigid bodies and MPM material pushing each other (tisim.systems.Coupled): momentum exchanged and conserved, a
block resting on an elastic slab at the compression its weight gives, gradients through both directions against
central differences and Taichi's reverse mode, bad input."""
import numpy as np
import pytest

import tisim
from tisim.systems.mpm import BAND, Body, Coupled, Tool
from tisim.testing import assert_gradients_agree

from test_mpm import GRID, neo_hookean_column_shortening


def total_momentum(sim, traj):
    """The points' momentum plus the tools', (T+1, dim)."""
    masses = np.asarray(sim.point_masses()).reshape(-1)
    points = np.einsum("p,tpk->tk", masses, traj["vel"][0])
    return points + np.einsum("q,tqk->tk", np.ravel(sim.params["tool_mass"][0]), traj["tool_vel"][0])


@pytest.mark.parametrize("dim", [2, 3])
def test_momentum_passes_between_material_and_tool_and_is_conserved(dim):
    """A 3 kg ball thrown at a jelly block, without gravity, away from the walls: the ball gives the block its
    momentum (measured along x: 2D from 1.0 to -0.015 m/s, a rebound, in 40 steps; 3D, coarser, to 0.39 in 11) and
    the sum of both stays what it was to rounding (measured 6e-16 and 3e-16 of it)."""
    n_grid = 32 if dim == 2 else 16
    h = 1.0 / n_grid
    body = Body.box([0.45] * dim, [0.6] * dim, h / 2)
    ball = Tool.sphere([0.38] + [0.52] * (dim - 1), 0.04)
    E = 1e4 if dim == 2 else 3e3
    dt = 0.3 * h / np.sqrt(E / 1000.0)
    sim = Coupled(horizon=int(0.12 / dt), body=body, n_grid=n_grid, dt=dt, tools=[ball], g=0.0, E=E,
                  material="neo_hookean", tool_mass=[3.0])
    sim.set_initial_state(tool_vel=[[1.0] + [0.1] * (dim - 1)])
    traj = sim.rollout()
    assert traj["tool_vel"][0, -1, 0, 0] < 0.5  # an exchange took place
    p = total_momentum(sim, traj)
    assert np.abs(p - p[0]).max() < 1e-13 * np.abs(p[0]).max(), np.abs(p - p[0]).max()


def test_a_block_rests_on_an_elastic_slab_at_the_compression_its_weight_gives():
    """A rigid block of 40 kg (per metre of depth) laid on a slab 0.2 m wide and high (nu = 0, E = 1e5 Pa, rho = 1000
    kg/m^2) on the floor, wider than the slab so that it presses the whole top: at rest, the slab's shortening between
    its fifth row and the row two cells below its top (clear of the floor's band and of the layer the block's reach
    covers) is the neo-Hookean one under its own weight and the block's pressure M g / W, computed apart from the code
    (linear elasticity is within 1% of it): measured 1.0005 on 32 cells (1.0023 on 64). A softness of one cell:
    sharper, the block chatters (the module's docstring)."""
    E, rho, mass, n_grid = 1e5, 1000.0, 40.0, 32
    h, base = 1.0 / n_grid, BAND / n_grid
    body = Body.box([0.4, base], [0.6, base + 0.2], h / 2)
    y = np.round(body.particles[:, 1], 12)
    rows, columns = np.unique(y), np.unique(np.round(body.particles[:, 0], 12))
    height, width = len(rows) * h / 2, len(columns) * h / 2
    block = Tool.box([0.5, base + height + 2.25 * h + 0.03], [0.14, 0.03])
    dt = 0.3 * h / np.sqrt(E / rho)
    sim = Coupled(horizon=int(3.0 / dt), body=body, n_grid=n_grid, dt=dt, E=E, nu=0.0, rho=rho, drag=20.0,
                  tools=[block], material="neo_hookean", tool_mass=[mass])
    traj = sim.rollout()
    assert np.abs(traj["tool_vel"][0, -1]).max() < 1e-5 and np.abs(traj["vel"][0, -1]).max() < 1e-4  # at rest
    pos = traj["pos"][0, :, :, 1]
    low, high = y == rows[4], y == rows[-5]
    measured = (pos[0, high].mean() - pos[0, low].mean()) - (pos[-1, high].mean() - pos[-1, low].mean())
    pressure = mass * 9.8 / width
    expected = neo_hookean_column_shortening(rows[4] - base, rows[-5] - base, height, E, rho, top=pressure)
    assert measured / expected == pytest.approx(1.0, abs=0.005)


def thrown(cls=Coupled, dim=2):
    """A 0.5 kg rounded box thrown at a small spinning block with friction, pushed on by the actions' forces for 10
    steps, with a target on the points' and the tool's motion, so that the gradient runs both ways: from the tool
    into the material and from the material back into the tool's place and velocity."""
    body = Body.box([0.4] * dim, [0.6] * dim, 0.5 / GRID)
    tool = Tool.box([0.32] * dim, [0.035] * dim, radius=0.02, mu=0.3)
    sim = cls(horizon=10, body=body, n_grid=GRID, tools=[tool], material="neo_hookean", tool_softness=0.02,
              tool_mass=[0.5])
    rng = np.random.default_rng(0)
    n = len(body.particles)
    sim.set_initial_state(vel=rng.normal(-0.5, 0.3, (n, dim)), C=rng.normal(0.0, 1.0, (n, dim, dim)),
                          tool_vel=[[1.5] * dim])
    sim.set_actions(rng.normal(0.5, 0.3, (10, 1, dim)))
    loss = tisim.losses.TerminalTarget({"pos": body.particles + 0.05, "vel": np.full((n, dim), 0.1),
                                        "tool_pos": [[0.35] * dim], "tool_vel": [[0.3] * dim]})
    return sim, loss


@pytest.mark.parametrize("dim", [2, pytest.param(3, marks=pytest.mark.stress)])
def test_coupled_gradients_match_central_differences(dim):
    """Every group against Richardson-extrapolated float64 central differences. Parameters and the initial state
    at a step of 1e-5 (measured worst: 2D 7e-6, on nu, whose derivative is 1e-4 of the largest; 3D 9e-6, on an
    entry of C); the forces, whose effect is dt / M of them, at a step of 1e-2 N (2D 3e-7; at 1e-3 N the
    differences wander between 1e-7 and 1e-5 with the last bits of the rollout: rounding and the push's switches)."""
    sim, loss = thrown(dim=dim)
    g = sim.gradient(loss)
    for name in ("tool_mass", "tool_half", "tool_radius", "tool_mu", "tool_softness"):
        assert np.abs(g.params[name]).max() > 1e-3, name  # the tool acts through each
    report = tisim.gradcheck(sim, loss, groups=("params", "initial_state"), step=1e-5, max_entries=12,
                             extrapolate=True)
    assert report.worst <= 5e-5, str(report)  # rounding's share of the differences varies between CPUs
    report = tisim.gradcheck(sim, loss, groups=("actions",), step=1e-2, max_entries=12, extrapolate=True)
    assert report.worst <= 1e-5, str(report)


class TaichiReverse(Coupled):
    """Coupled with Taichi's reverse mode of its phases in place of the hand-written reverses."""
    REVERSES = {}


def sliding(cls=Coupled):
    """A disc sliding on the floor into the side of the default clay block, pushed on by the actions, for 100 steps
    of 1 ms: the floor stops its fall every step while the clay pushes back."""
    sim = cls(horizon=100, tools=[Tool.sphere([0.33, BAND / 32 + 0.0299], 0.03, mu=0.2)], tool_mass=[2.0], dt=1e-3)
    sim.set_initial_state(tool_vel=[[0.5, 0.0]])
    sim.set_actions(np.random.default_rng(1).normal([2.0, -1.0], 0.5, (100, 1, 2)))
    n = sim.n_particles
    return sim, tisim.losses.TerminalTarget({"pos": sim.initial_state["pos"][0] + 0.01, "vel": np.zeros((n, 2)),
                                             "tool_pos": [[0.4, 0.2]]})


@pytest.mark.parametrize("scene", [thrown, sliding])
def test_the_coupled_hand_written_reverses_are_taichis_reverse_mode(scene):
    """The tools' phase (the impulse back onto the tool, the walls' stop) and the grid's reverse with the impulses
    equal Taichi's reverse mode of the phases to 1e-12 in float64, in every group: a tool thrown at a block, and one
    sliding on the floor into the clay."""
    ours, taichis = (sim.gradient(loss) for sim, loss in (scene(cls) for cls in (Coupled, TaichiReverse)))
    assert_gradients_agree(ours, taichis)


def test_the_actions_are_forces_and_a_free_tool_falls():
    """Out of the material's reach a tool falls freely: semi-implicit Euler under g and the action's force, computed
    here apart from the code. (A tool's reach fades exponentially: with the default softness of a cell, the clay
    0.4 m away still moves this tool by 1e-9 of its motion; with 2 mm, by nothing.)"""
    assert Coupled(horizon=1).params["tool_softness"][0] == pytest.approx(1.0 / 32)  # a cell, by default
    sim = Coupled(horizon=5, tools=[Tool.sphere([0.2, 0.8], 0.03)], tool_mass=[2.0], dt=0.002, tool_softness=0.002)
    assert sim.actions.shape == (1, 5, 1, 2)
    with pytest.raises(ValueError, match=r"actions \(tool_force\) must have shape \(5, 1, 2\)"):
        sim.set_actions(np.zeros((5, 2)))
    sim.set_actions(np.broadcast_to([[[4.0, 0.0]]], (5, 1, 2)))
    traj = sim.rollout()
    x, v = np.array([0.2, 0.8]), np.zeros(2)
    for _ in range(5):
        v = v + 0.002 * np.array([4.0 / 2.0, -9.8])
        x = x + 0.002 * v
    np.testing.assert_allclose(traj["tool_vel"][0, -1, 0], v, rtol=1e-12)
    np.testing.assert_allclose(traj["tool_pos"][0, -1, 0], x, rtol=1e-12)


def test_a_free_tool_lands_on_the_floor_and_slides_along_it():
    """A disc let go beside the clay, moving sideways at 0.3 m/s: it falls freely until its rim reaches the floor
    (BAND cells up, where the material's floor is), then stops falling and slides on without friction, its sideways
    velocity kept; it stays where the step that reached the floor left it, less than that step's fall below the
    floor's surface."""
    dt, floor, radius = 1e-3, BAND / 32, 0.03
    sim = Coupled(horizon=300, tools=[Tool.sphere([0.15, 0.4], radius)], tool_mass=[2.0], dt=dt, tool_softness=0.002)
    sim.set_initial_state(tool_vel=[[0.3, 0.0]])
    traj = sim.rollout()
    y, v = traj["tool_pos"][0, :, 0, 1], traj["tool_vel"][0, :, 0]
    landed = 1 + int(np.argmax(v[1:, 1] == 0.0))  # the first step after the start it does not fall
    assert 0 < landed < 300 and np.all(v[landed:, 1] == 0.0)
    surface = floor + radius  # where its centre is when its rim touches the floor
    assert y[landed - 2] > surface >= y[landed - 1] > surface - dt * abs(v[landed - 1, 1])  # the step that crossed
    assert np.all(y[landed - 1:] == y[landed - 1])  # and there it stays
    np.testing.assert_allclose(v[:, 0], 0.3, rtol=1e-12)


@pytest.mark.parametrize("make, message", [
    (lambda: Coupled(horizon=2, tools=[Tool.sphere([0.5, 0.5], 0.1)], tool_mass=[0.0]),
     r"tool_mass must be in \(0, inf\)"),
    (lambda: Coupled(horizon=2, tools=[]), "Coupled: tools must be a non-empty list"),
    (lambda: Coupled(horizon=2, tools=[Tool.sphere([0.5, 0.5, 0.5], 0.1)]), "Coupled: every tool must have 2"),
])
def test_bad_input(make, message):
    with pytest.raises(ValueError, match=message):
        make()
