"""Free rigid bodies in clay that move and turn (Tumbling): momentum and angular momentum conserved to rounding, a
frictionless disc gains no spin, the default inertia a uniform body's, the gradients against central differences and
against Taichi's reverse mode, bad input; in 2D and (quaternions, three moments) 3D, where a free body turns as Euler's
equations say."""
import numpy as np
import pytest

import tisim
from tisim.systems.mpm import BAND, Body, Coupled, Tool, Tumbling
from tisim.systems.mpm.tumbling import Tumbling3D, principal_moments, second_moment
from tisim.testing import assert_gradients_agree

from test_mpm import GRID

N_GRID = 32
H = 1.0 / N_GRID
FLOOR = BAND / N_GRID


def thrown_at_jelly(cls, tool, horizon=None, **state):
    """A 3 kg tool thrown at a jelly block without gravity, away from the walls: the simulator and its rollout."""
    E = 1e4
    dt = 0.3 * H / np.sqrt(E / 1000.0)
    sim = cls(horizon=horizon or int(0.12 / dt), body=Body.box([0.45, 0.45], [0.6, 0.6], H / 2), n_grid=N_GRID,
              dt=dt, tools=[tool], g=0.0, E=E, material="neo_hookean", tool_mass=[3.0])
    sim.set_initial_state(tool_vel=[[1.0, 0.1]], **state)
    return sim, sim.rollout()


def test_momentum_and_angular_momentum_pass_between_material_and_body_and_are_conserved():
    """A spinning rounded box with friction, turned 0.3 rad, thrown at a jelly block: it gives the block its
    momentum and its spin (measured: 5 rad/s to -0.01, 1 m/s to 0.006), and the momentum and the angular momentum
    about the origin of both together stay what they were to rounding (measured 3.6e-15 of 3 and 8.9e-16 of 1.44),
    the block's angular momentum counting APIC's affine part, m h^2 / 4 (C_yx - C_xy)."""
    box = Tool.box([0.37, 0.52], [0.03, 0.015], radius=0.01, mu=0.4)
    sim, traj = thrown_at_jelly(Tumbling, box, tool_angle=[0.3], tool_spin=[5.0])
    m, M, inertia = np.ravel(sim.point_masses()), 3.0, sim.params["tool_inertia"][0, 0]
    x, v, C = traj["pos"][0], traj["vel"][0], traj["C"][0]
    X, U, W = traj["tool_pos"][0, :, 0], traj["tool_vel"][0, :, 0], traj["tool_spin"][0, :, 0]
    assert abs(W[-1]) < 1.0 and U[-1, 0] < 0.5  # an exchange took place
    momentum = np.einsum("p,tpk->tk", m, v) + M * U
    angular = np.einsum("p,tp->t", m, x[..., 0] * v[..., 1] - x[..., 1] * v[..., 0]
                        + H * H / 4 * (C[..., 1, 0] - C[..., 0, 1])) \
        + M * (X[:, 0] * U[:, 1] - X[:, 1] * U[:, 0]) + inertia * W
    assert np.abs(momentum - momentum[0]).max() < 1e-13 * np.abs(momentum[0]).max()
    assert np.abs(angular - angular[0]).max() < 1e-13 * abs(angular[0]), np.abs(angular - angular[0]).max()


def test_a_frictionless_disc_gains_no_spin_and_bounces_as_coupleds():
    """Without friction a disc is pushed along its normals only, through its centre: it gains no spin (within
    1e-12 rad/s) and leaves the block with the velocity Coupled's disc, which cannot turn, leaves with (within 1%;
    it ends each step where the material met it, Coupled's a velocity's step further)."""
    ball = Tool.sphere([0.38, 0.52], 0.04)
    _, ours = thrown_at_jelly(Tumbling, ball)
    _, theirs = thrown_at_jelly(Coupled, ball)
    assert theirs["tool_vel"][0, -1, 0, 0] < 0.5  # it hit the block
    assert np.abs(ours["tool_spin"]).max() < 1e-12
    np.testing.assert_allclose(ours["tool_vel"][0, -1, 0], theirs["tool_vel"][0, -1, 0], rtol=0, atol=0.01)


def test_a_body_falls_onto_the_floor_and_stays_there():
    """A disc dropped beside the clay lands on the floor and stays on it: the walls stop its motion into them, its
    place included (within 1e-12 m of where it landed over 500 more steps)."""
    body = Body.box([0.1, FLOOR], [0.2, FLOOR + 0.05], H / 2)
    sim = Tumbling(horizon=1500, body=body, tools=[Tool.sphere([0.7, 0.3], 0.03)])
    low = sim.rollout()["tool_pos"][0, :, 0, 1] - 0.03
    assert low[1000] <= FLOOR and np.abs(low[1000:] - low[1000]).max() < 1e-12


def landed(traj, surface, dt=1e-3):
    """Where a free body dropped onto the floor lands: the first step after the start it does not fall must be the
    step after the one whose place first lies below `surface` (where its centre is when its lowest point touches the
    floor), that place less than that step's fall below it, and there it stays."""
    y, v = traj["tool_pos"][0, :, 0, 1], traj["tool_vel"][0, :, 0, 1]
    first = 1 + int(np.argmax(v[1:] == 0.0))
    assert 0 < first < len(v) - 10 and np.all(v[first:] == 0.0)
    assert y[first - 2] > surface >= y[first - 1] > surface - dt * abs(v[first - 1])
    assert np.all(y[first - 1:] == y[first - 1])


def test_a_turned_body_meets_the_floor_where_its_corner_does():
    """A rounded box turned 0.6 rad, dropped beside the clay: it stops falling when its lowest corner reaches the
    floor, |sin| a + |cos| b + r above it (2.45 cm; unturned it would be 1.5 cm), and keeps its angle."""
    body = Body.box([0.1, FLOOR], [0.2, FLOOR + 0.05], H / 2)
    half, radius, angle = np.array([0.02, 0.01]), 0.005, 0.6
    sim = Tumbling(horizon=300, body=body, dt=1e-3, tools=[Tool.box([0.7, 0.3], half, radius)],
                   tool_softness=0.001)
    sim.set_initial_state(tool_angle=[angle])
    traj = sim.rollout()
    landed(traj, FLOOR + abs(np.sin(angle)) * half[0] + abs(np.cos(angle)) * half[1] + radius)
    assert np.all(traj["tool_angle"][0, :, 0] == angle)


def lattice_second_moment(half, radius, n=1201):
    """The same polar second moment per unit area, by counting a fine lattice's points inside the shape."""
    (a, b), r = half, radius
    x, y = np.meshgrid(np.linspace(-a - r, a + r, n), np.linspace(-b - r, b + r, n))
    inside = np.maximum(np.abs(x) - a, 0) ** 2 + np.maximum(np.abs(y) - b, 0) ** 2 <= r * r
    return np.mean((x * x + y * y)[inside])


def test_the_default_inertia_is_a_uniform_bodys_of_its_shape_and_mass():
    """A disc's M r^2 / 2 and a box's M (w^2 + h^2) / 12 exactly; a capsule and a rounded box within 1e-3 of a fine
    lattice's count; the simulator's default is each tool's mass times its shape's, and a given inertia is kept."""
    assert second_moment([0.0, 0.0], 0.03) == pytest.approx(0.03 ** 2 / 2, rel=1e-14)
    assert second_moment([0.04, 0.01], 0.0) == pytest.approx((0.08 ** 2 + 0.02 ** 2) / 12, rel=1e-14)
    for half, radius in (([0.0, 0.03], 0.01), ([0.04, 0.01], 0.02)):
        assert second_moment(half, radius) == pytest.approx(lattice_second_moment(half, radius), rel=1e-3)
    tools = [Tool.sphere([0.3, 0.5], 0.03), Tool.capsule([0.7, 0.5], 0.03, 0.01, axis=1)]
    sim = Tumbling(horizon=2, tools=tools, tool_mass=[2.0, 0.5])
    np.testing.assert_allclose(sim.params["tool_inertia"][0], [2.0 * 0.03 ** 2 / 2, 0.5 * second_moment(
        [0.0, 0.03], 0.01)], rtol=1e-14)
    assert Tumbling(horizon=2, tools=tools, tool_inertia=[1e-3, 2e-3]).params["tool_inertia"][0, 1] == 2e-3


def tumbled(cls=Tumbling):
    """A 5 kg turned rounded box thrown spinning at a small spinning block with friction, pushed and turned by the
    actions' wrenches (forces of hundreds of newtons, torques of tens of newton metres: enough to move it within 10
    steps of 0.2 ms) for 10 steps, with a target on the points' motion and the box's place, velocity, angle and spin,
    so that the gradient runs both ways."""
    body = Body.box([0.4, 0.4], [0.6, 0.6], 0.5 / GRID)
    tool = Tool.box([0.32, 0.32], [0.045, 0.025], radius=0.02, mu=0.3)
    sim = cls(horizon=10, body=body, n_grid=GRID, tools=[tool], material="neo_hookean", tool_softness=0.02,
              tool_mass=[5.0], tool_inertia=[0.05])
    rng = np.random.default_rng(0)
    n = len(body.particles)
    sim.set_initial_state(vel=rng.normal(-0.5, 0.3, (n, 2)), C=rng.normal(0.0, 1.0, (n, 2, 2)),
                          tool_vel=[[1.5, 1.5]], tool_angle=[0.4], tool_spin=[3.0])
    sim.set_actions(rng.normal(0.5, 0.3, (10, 1, 3)) * [1000.0, 1000.0, 100.0])
    loss = tisim.losses.TerminalTarget({"pos": body.particles + 0.05, "vel": np.full((n, 2), 0.1),
                                        "tool_pos": [[0.35, 0.35]], "tool_vel": [[0.0, 0.0]], "tool_angle": [0.0],
                                        "tool_spin": [0.0]})
    return sim, loss


def test_tumbling_gradients_match_central_differences():
    """Every group against Richardson-extrapolated float64 central differences: the body's mass, inertia, sizes
    and friction, its start (place, velocity, angle, spin) and the wrenches, with the material's own. Rounding,
    which the coupled step amplifies, limits the smaller steps: measured 1.2e-6 at a step of 1e-4, 1.8e-5 at 1e-5
    and 7e-5 at 1e-6 (the errors falling as the step grows: rounding, not a wrong derivative; the hand-written
    reverses also equal Taichi's reverse mode, below)."""
    sim, loss = tumbled()
    g = sim.gradient(loss)
    assert np.abs(g.params["tool_inertia"]).max() > 1e-6 and np.abs(g.actions[..., 2]).max() > 1e-9
    report = tisim.gradcheck(sim, loss, step=1e-4, max_entries=12, extrapolate=True)
    assert report.worst <= 1e-5, str(report)


class TaichiReverse(Tumbling):
    """Tumbling with Taichi's reverse mode of its phases in place of the hand-written reverses."""
    REVERSES = {}


def test_the_tumbling_hand_written_reverses_are_taichis_reverse_mode():
    ours, taichis = (sim.gradient(loss) for sim, loss in (tumbled(cls) for cls in (Tumbling, TaichiReverse)))
    assert_gradients_agree(ours, taichis)


# ---- 3D: quaternions and three principal moments ----------------------------------------------------------------
GRID_3D = 16
H_3D = 1.0 / GRID_3D
JELLY_3D = Body.box([0.45, 0.4, 0.4], [0.6, 0.6, 0.6], H_3D / 2)


def rotation(q):
    """The rotation matrix of the quaternion q (any nonzero length), written out here."""
    w, x, y, z = np.asarray(q, float) / np.linalg.norm(q)
    return np.array([[w * w + x * x - y * y - z * z, 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), w * w - x * x + y * y - z * z, 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), w * w - x * x - y * y + z * z]])


def thrown_at_jelly_3d(tool, dt=None, horizon=None, **state):
    """A 3 kg tool thrown at a 3D jelly block without gravity (Tumbling3D): the simulator and its rollout."""
    E = 1e4
    dt = dt or 0.3 * H_3D / np.sqrt(E / 1000.0)
    sim = Tumbling(horizon=horizon or int(0.12 / dt), body=JELLY_3D, n_grid=GRID_3D, dt=dt, tools=[tool], g=0.0, E=E,
                   material="neo_hookean", tool_mass=[3.0], **state.pop("values", {}))
    sim.set_initial_state(**state)
    return sim, sim.rollout()


def test_3d_momentum_and_angular_momentum_pass_between_material_and_body_and_are_conserved():
    """A turned rounded box with friction, spinning about a slanted axis, thrown at a jelly block (Tumbling3D): it
    gives the block its spin (measured: (2, -3, 5) rad/s to (0.02, 0.04, -0.82)), and the momentum and the angular
    momentum about the origin of both together stay what they were to rounding (measured 4.4e-16 and 7.2e-16), the
    block's counting APIC's affine part, m h^2 / 4 times C's axial vector, and the body's I_R W = R diag(I) R^T W."""
    box = Tool.box([0.35, 0.5, 0.5], [0.03, 0.015, 0.02], radius=0.01, mu=0.4)
    q0 = np.array([0.95, 0.1, 0.2, -0.15]) / np.linalg.norm([0.95, 0.1, 0.2, -0.15])
    sim, traj = thrown_at_jelly_3d(box, tool_vel=[[1.0, 0.1, -0.05]], tool_orientation=[q0],
                                   tool_spin=[[2.0, -3.0, 5.0]])
    assert type(sim).__name__ == "Tumbling3D"
    m, M, inertia = np.ravel(sim.point_masses()), 3.0, sim.params["tool_inertia"][0, 0]
    x, v, C = traj["pos"][0], traj["vel"][0], traj["C"][0]
    X, U, W, Q = (traj[name][0, :, 0] for name in ("tool_pos", "tool_vel", "tool_spin", "tool_orientation"))
    assert np.abs(W[-1]).max() < 1.0 and U[-1, 0] < 0.5  # an exchange took place
    axial = np.stack([C[..., 2, 1] - C[..., 1, 2], C[..., 0, 2] - C[..., 2, 0], C[..., 1, 0] - C[..., 0, 1]], -1)
    own = np.array([rotation(q) @ (inertia * (rotation(q).T @ w)) for q, w in zip(Q, W)])
    angular = np.einsum("p,tpk->tk", m, np.cross(x, v) + H_3D ** 2 / 4 * axial) + M * np.cross(X, U) + own
    momentum = np.einsum("p,tpk->tk", m, v) + M * U
    assert np.abs(momentum - momentum[0]).max() < 1e-13 * np.abs(momentum[0]).max()
    assert np.abs(angular - angular[0]).max() < 1e-13 * np.abs(angular[0]).max()


def test_a_frictionless_3d_ball_gains_no_spin():
    """Pushed along its normals only, through its centre, a frictionless ball thrown at the block does not turn."""
    _, traj = thrown_at_jelly_3d(Tool.sphere([0.38, 0.5, 0.5], 0.04), tool_vel=[[1.0, 0.1, -0.05]])
    assert traj["tool_vel"][0, -1, 0, 0] < 0.5 and np.abs(traj["tool_spin"]).max() < 1e-12


def euler_reference(q, W, inertia, duration, steps=20000):
    """The orientation of a free rigid body (principal moments `inertia`, angular velocity W in the world at the
    orientation q) after `duration`: its angular momentum L fixed, dq/dt = (0, w) q / 2 with w = R I^-1 R^T L, by
    classical Runge-Kutta in numpy."""
    L = rotation(q) @ (inertia * (rotation(q).T @ W))

    def rate(q):
        w = rotation(q) @ ((rotation(q).T @ L) / inertia)
        return 0.5 * np.concatenate([[-w @ q[1:]], q[0] * w + np.cross(w, q[1:])])
    h = duration / steps
    for _ in range(steps):
        k1 = rate(q)
        k2 = rate(q + h / 2 * k1)
        k3 = rate(q + h / 2 * k2)
        q = q + h / 6 * (k1 + 2 * k2 + 2 * k3 + rate(q + h * k3))
    return q


@pytest.mark.perturbed
def test_a_free_3d_body_keeps_its_angular_momentum_and_turns_as_eulers_equations_say():
    """A 12 x 6 x 3 cm box spinning near its intermediate axis, flying free (its reach ends 5 mm out: the block is
    beyond it): its angular momentum in the world stays what it was to rounding (4.7e-14 over 300 steps, measured),
    while its angular velocity turns with it; after 0.3 s (a 1.5 rad turn) its axes are within 1e-4 of a
    Runge-Kutta solution of Euler's equations, and within a quarter of that at half the step (second order: the turn
    takes the angular velocity of the step's middle; measured 3.29e-5 and 8.23e-6, where a turn by the start's
    angular velocity was off by 0.0178 and 0.0089)."""
    box = Tool.box([0.27, 0.3, 0.3], [0.06, 0.03, 0.015], mu=0.3)
    q0, W0 = np.array([0.9, 0.1, 0.3, -0.2]) / np.linalg.norm([0.9, 0.1, 0.3, -0.2]), np.array([0.5, 12.0, 0.3])
    errors = []
    for dt in (1e-3, 5e-4):
        sim, traj = thrown_at_jelly_3d(box, dt=dt, horizon=int(round(0.3 / dt)), tool_orientation=[q0],
                                       tool_spin=[W0], values=dict(tool_softness=0.001))
        inertia = sim.params["tool_inertia"][0, 0]
        Q, W = traj["tool_orientation"][0, :, 0], traj["tool_spin"][0, :, 0]
        L = np.array([rotation(q) @ (inertia * (rotation(q).T @ w)) for q, w in zip(Q, W)])
        assert np.abs(L - L[0]).max() < 1e-12 * np.abs(L[0]).max()
        errors.append(np.abs(rotation(Q[-1]) - rotation(euler_reference(q0, W0, inertia, 0.3))).max())
    assert errors[0] < 1e-4 and 3.6 < errors[0] / errors[1] < 4.4, errors


def test_a_turned_3d_body_meets_the_floor_where_its_corner_does():
    """A rounded box turned about a slanted axis, dropped beside a clay block: it stops falling when its lowest
    point reaches the floor, sum_i |R_yi| half_i + r above it (R its rotation, written in this test), and keeps its
    orientation."""
    floor = BAND / GRID_3D
    body = Body.box([0.2, floor, 0.2], [0.3, floor + 0.05, 0.3], H_3D / 2)
    half, radius = np.array([0.03, 0.015, 0.02]), 0.005
    q0 = np.array([0.9, 0.3, -0.2, 0.25]) / np.linalg.norm([0.9, 0.3, -0.2, 0.25])
    sim = Tumbling(horizon=250, body=body, n_grid=GRID_3D, dt=1e-3, tools=[Tool.box([0.7, 0.35, 0.6], half, radius)],
                   tool_softness=0.001)
    sim.set_initial_state(tool_orientation=[q0])
    traj = sim.rollout()
    reach = np.abs(rotation(q0)[1]) @ half + radius
    assert reach > half[1] + radius + 0.01  # unturned it would stop a centimetre lower
    landed(traj, floor + reach)
    assert np.all(traj["tool_orientation"][0, :, 0] == q0)


def test_the_3d_default_inertia_is_a_uniform_bodys_of_its_shape_and_mass():
    """A ball's 2 M r^2 / 5 within 2e-3 (8e-4 measured) and a box's M (b^2 + c^2) / 3 within 2e-4 (half extents a,
    b, c; the midpoint rule's 1 / n^2, 9.8e-5); the simulator's default is each tool's mass times its shape's
    moments."""
    np.testing.assert_allclose(principal_moments([0.0] * 3, 0.03), [2 * 0.03 ** 2 / 5] * 3, rtol=2e-3)
    a, b, c = 0.06, 0.03, 0.015
    np.testing.assert_allclose(principal_moments([a, b, c], 0.0), [(b * b + c * c) / 3, (a * a + c * c) / 3,
                                                                   (a * a + b * b) / 3], rtol=2e-4)
    tools = [Tool.box([0.3] * 3, [a, b, c]), Tool.sphere([0.7] * 3, 0.03)]
    sim = Tumbling(horizon=2, body=JELLY_3D, n_grid=GRID_3D, tools=tools, tool_mass=[2.0, 0.5])
    np.testing.assert_allclose(sim.params["tool_inertia"][0], [2.0 * principal_moments([a, b, c], 0.0),
                                                               0.5 * principal_moments([0.0] * 3, 0.03)], rtol=1e-14)


def tumbled_3d(cls=Tumbling, seed=0):
    """tumbled in 3D: a 5 kg turned rounded box thrown spinning about a slanted axis at a small spinning block with
    friction, pushed and turned by random wrenches (forces of tens of newtons, torques of tenths of a newton metre)
    for 10 steps; a target on the points and the box's place, orientation and spin."""
    body = Body.box([0.4] * 3, [0.6] * 3, 0.5 / GRID_3D)
    tool = Tool.box([0.33] * 3, [0.045, 0.025, 0.035], radius=0.02, mu=0.3)
    sim = cls(horizon=10, body=body, n_grid=GRID_3D, tools=[tool], material="neo_hookean", tool_softness=0.02,
              tool_mass=[5.0])
    rng = np.random.default_rng(seed)
    n = len(body.particles)
    sim.set_initial_state(vel=rng.normal(-0.5, 0.3, (n, 3)), C=rng.normal(0.0, 1.0, (n, 3, 3)),
                          tool_orientation=[[0.9, 0.2, -0.3, 0.25]], tool_vel=[[1.5, 1.2, 1.4]],
                          tool_spin=[[20.0, -10.0, 30.0]])
    sim.set_actions(np.concatenate([rng.normal(0.0, 30.0, (10, 1, 3)), rng.normal(0.0, 0.3, (10, 1, 3))], -1))
    loss = tisim.losses.TerminalTarget({"pos": body.particles + 0.05, "tool_pos": [[0.35] * 3],
                                        "tool_orientation": [[1.0, 0.0, 0.0, 0.0]], "tool_spin": [[0.0, 0.0, 0.0]]})
    return sim, loss


def test_3d_tumbling_gradients_match_central_differences():
    """Every parameter (the body's mass, three moments, sizes and friction among them) at a step of 5e-5, every
    wrench and 60 entries of the start (the quaternion and the spin among them) at 1e-4, against Richardson-
    extrapolated float64 central differences, relative to each entry or a thousandth of its group's largest: rounding,
    which the coupled step amplifies, sets the floor (measured over three seeds: 1.2e-5 worst on a wrench, 1.5e-6 on
    the start, 6.9e-7 on the parameters; at 1e-4 a stick-slip switch of the friction lies within reach of the box's
    size, 1.3e-2 there)."""
    sim, loss = tumbled_3d()
    g = sim.gradient(loss)
    assert np.abs(g.params["tool_inertia"]).max() > 1.0 and np.abs(g.initial_state["tool_orientation"]).max() > 1.0
    for groups, step in ((("params",), 5e-5), (("initial_state", "actions"), 1e-4)):
        report = tisim.gradcheck(sim, loss, groups=groups, step=step, extrapolate=True, max_entries=60)
        for check in report.values():
            scale = np.maximum(np.abs(check.central), 1e-3 * np.abs(check.central).max())
            assert (np.abs(check.backward - check.central) / scale).max() <= 1e-4, str(report)


class TaichiReverse3D(Tumbling3D):
    """Tumbling3D with Taichi's reverse mode of its phases in place of the hand-written reverses."""
    REVERSES = {}


@pytest.mark.stress  # Taichi's reverse of the 3D coupled step takes minutes to compile
def test_the_3d_tumbling_hand_written_reverses_are_taichis_reverse_mode():
    """To 1e-12, except the density's derivative, a sum that cancels (Sculpting3D's test says more)."""
    ours, taichis = (sim.gradient(loss) for sim, loss in (tumbled_3d(cls) for cls in (Tumbling, TaichiReverse3D)))
    ours.params["rho"] = taichis.params["rho"] = np.zeros(1)
    assert_gradients_agree(ours, taichis)


@pytest.mark.parametrize("make, message", [
    (lambda: Tumbling(horizon=2, tools=[Tool.sphere([0.5, 0.5, 0.5], 0.1)]), "every tool must have 2 coordinates"),
    (lambda: Tumbling3D(horizon=2, tools=[Tool.sphere([0.5, 0.5], 0.1)]), "Tumbling3D: body must be a 3D"),
    (lambda: Tumbling(horizon=3, body=JELLY_3D, n_grid=GRID_3D, tools=[Tool.sphere([0.3] * 3, 0.03)])
     .set_actions(np.zeros((3, 1, 3))), r"actions \(tool_wrench\) must have shape \(3, 1, 6\)"),
    (lambda: Tumbling(horizon=2, tools=[Tool.sphere([0.5, 0.5], 0.1)], tool_inertia=[0.0]),
     r"tool_inertia must be in \(0, inf\)"),
    (lambda: Tumbling(horizon=3, tools=[Tool.sphere([0.5, 0.5], 0.1)]).set_actions(np.zeros((3, 1, 2))),
     r"actions \(tool_wrench\) must have shape \(3, 1, 3\)"),
])
def test_bad_input(make, message):
    with pytest.raises(ValueError, match=message):
        make()
