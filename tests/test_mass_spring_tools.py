"""Kinematic tools on a mass-spring body (tisim.systems.Manipulation): Coulomb's law on a sliding tool, a held
sphere pressing a pinned cloth where its springs balance, the gradients against central differences and against
Taichi's reverse mode, bad input."""
import numpy as np
import pytest
from test_mass_spring_balls import spring_network_equilibrium

import tisim
from tisim.systems.mass_spring import Manipulation, cloth, grid
from tisim.systems.mpm import Tool
from tisim.testing import assert_gradients_agree


def test_a_cloth_on_a_sliding_tool_is_dragged_by_coulombs_law():
    """A free 4 x 4 cloth lying at rest on a wide box tool (each particle at the depth m g / kc where the penalty
    carries it) that slides sideways at w = 0.5 m/s: the friction mu m g tanh(slip / eps) speeds every particle up
    together (the springs stay at rest), so the slip s = w - v follows ds/dt = -mu g tanh(s / eps), whose solution
    sinh(s / eps) = sinh(w / eps) e^(-mu g t / eps) is computed here apart from the code. Measured at a step of 0.1
    ms: within 0.017% of w at every 10 ms (the explicit step's error); the cloth ends moving with the tool."""
    mu, eps, m, kc, g, w, dt = 0.5, 0.05, 0.01, 5000.0, 9.8, 0.5, 1e-4
    sheet = cloth(4, 4, spacing=0.03, origin=(0.45, 0.3 - m * g / kc, 0.45), pin="none", flat=True)
    table = Tool.box([0.5, 0.28, 0.5], [0.2, 0.02, 0.2], mu=mu)
    sim = Manipulation(horizon=2000, robot=sheet, tools=[table], dt=dt, eps=eps, m=m, kc=kc, kd=0.0)
    sim.set_actions(np.broadcast_to([[w, 0.0, 0.0]], (2000, 1, 3)))
    traj = sim.rollout()
    velocity = traj["vel"][0, :, :, 0]
    assert np.ptp(velocity, axis=1).max() < 1e-12  # every particle alike
    t = np.arange(0, 2001, 100) * dt
    slip = eps * np.arcsinh(np.sinh(w / eps) * np.exp(-mu * g * t / eps))
    np.testing.assert_allclose(velocity[::100, 0], w - slip, rtol=0, atol=5e-4 * w)
    assert slip[-1] < 1e-5 and abs(velocity[-1, 0] - (w - slip[-1])) < 1e-7  # caught up with the tool
    assert np.abs(traj["vel"][0, :, :, 1]).max() < 1e-9  # resting on the tool throughout


def test_a_held_sphere_presses_a_pinned_cloth_where_its_springs_balance():
    """A sphere tool lowered 3 cm into a 5 x 5 cloth pinned at its corners, off its centre, then held still: the
    cloth comes to rest where the forces computed in numpy (springs, weights, the soft penalty: the helper of the
    balls' test, the sphere held) balance, every
    particle within 1e-9 m of Newton's solution started there; the cloth is pressed 1.8 cm below its plane."""
    radius, softness = 0.06, 0.002
    sheet = cloth(5, 5, spacing=0.05, origin=(0.4, 0.3, 0.4), pin="corners", flat=True)
    sphere = Tool.sphere([0.52, 0.3 + radius + 0.005, 0.49], radius)
    steps = 20000
    down = np.zeros((steps, 1, 3))
    down[:350, 0, 1] = -0.1  # 3.5 cm down in 0.175 s, then held
    sim = Manipulation(horizon=steps, robot=sheet, tools=[sphere], softness=softness, drag=1.0)
    sim.set_actions(down)
    traj = sim.rollout()
    positions, _, at_rest, residual = spring_network_equilibrium(
        sheet, traj["pos"][0, -1], traj["tool_pos"][0, -1, 0], radius, None, k=1000.0, kc=5000.0,
        softness=softness, m=0.01, g=9.8)
    assert at_rest < 1e-9 and residual < 1e-11, (at_rest, residual)
    assert 0.3 - positions[:, 1].min() > 0.015
    np.testing.assert_allclose(traj["pos"][0, -1], positions, rtol=0, atol=1e-9)


def handled(cls=Manipulation, dim=3):
    """A rounded box with friction pushed down and across a small cloth (3D, pinned at its corners) or a free 2D
    sheet on the ground, for 30 steps from random velocities, soft contact, a target on the particles and the
    tool."""
    if dim == 3:
        body = cloth(4, 4, spacing=0.04, origin=(0.44, 0.3, 0.44), pin="corners", flat=True)
        tool = Tool.box([0.5, 0.33, 0.5], [0.04, 0.02, 0.03], radius=0.01, mu=0.4)
        push = [0.3, -0.8, 0.2]
    else:
        body = grid(4, 2, spacing=0.05, actuate_every_spring=False)
        tool = Tool.capsule([0.08, 0.09], 0.03, 0.02, axis=0, mu=0.4)
        push = [0.3, -0.8]
    sim = cls(horizon=30, robot=body, tools=[tool], softness=0.002)
    rng = np.random.default_rng(0)
    sim.set_actions(rng.normal(push, 0.2, (30, 1, dim)))
    n = sim.n_particles
    sim.set_initial_state(vel=rng.normal(0.0, 0.1, (n, dim)))  # off the damping's switch at rest, vn = 0
    loss = tisim.losses.TerminalTarget({"pos": sim.initial_state["pos"][0] + 0.01, "vel": np.full((n, dim), 0.1),
                                        "tool_pos": [tool.centre - 0.02]})
    return sim, loss


class TaichiReverse(Manipulation):
    """Manipulation with Taichi's reverse mode of its phases in place of the hand-written reverses."""
    REVERSES = {}


@pytest.mark.parametrize("dim", [2, 3])
def test_the_tools_hand_written_reverses_are_taichis_reverse_mode(dim):
    ours, taichis = (sim.gradient(loss) for sim, loss in (handled(cls, dim) for cls in (Manipulation, TaichiReverse)))
    assert_gradients_agree(ours, taichis)


@pytest.mark.parametrize("dim", [2, 3])
def test_tool_gradients_match_central_differences(dim):
    """Every group against Richardson-extrapolated float64 central differences, the tool's size, friction, start
    and velocities with the body's own (measured worst: 1.0e-6 in 2D, 3.0e-6 in 3D, at a step of 1e-6)."""
    sim, loss = handled(dim=dim)
    g = sim.gradient(loss)
    for name in ("tool_half", "tool_radius", "tool_mu"):
        assert np.abs(g.params[name]).max() > 1e-3, name  # the tool acts through each
    report = tisim.gradcheck(sim, loss, step=1e-6, max_entries=12, extrapolate=True)
    assert report.worst <= 1e-5, str(report)


def test_the_actions_are_the_tools_velocities():
    sim = Manipulation(horizon=3)
    assert sim.actions.shape == (1, 3, 1, 3)
    with pytest.raises(ValueError, match=r"actions \(tool_vel\) must have shape \(3, 1, 3\)"):
        sim.set_actions(np.zeros((3, 3)))
    np.testing.assert_allclose(sim.initial_state["tool_pos"][0], [[0.5, 0.32, 0.5]])


@pytest.mark.parametrize("make, message", [
    (lambda: Manipulation(horizon=2, tools=[]), "Manipulation: tools must be a non-empty list"),
    (lambda: Manipulation(horizon=2, robot=grid(3, 2), tools=[Tool.sphere([0.1, 0.2], 0.05)]), "no actuators"),
    (lambda: Manipulation(horizon=2, robot=grid(3, 2, actuate_every_spring=False),
                          tools=[Tool.sphere([0.1, 0.2, 0.0], 0.05)]), "every tool must have 2 coordinates"),
    (lambda: Manipulation(horizon=2, tools=[Tool.sphere([0.5, 0.5, 0.5], 0.1)], n_tools=2), "not a keyword"),
    (lambda: Manipulation(horizon=0), "Manipulation: horizon must be an integer >= 1"),
])
def test_bad_input(make, message):
    with pytest.raises(ValueError, match=message):
        make()
