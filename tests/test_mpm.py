"""The material point method: conservation laws, free fall, the stability limit, gradients, schedules, bad input."""
import numpy as np
import pytest

import tisim
from tisim.systems.mpm import MPM, Body

GRID = 8  # the small instances for gradients: 8^d cells, 4^d points
ROOMY = 16  # for physics: the block clear of the walls' band (3 cells on each side), 8^d points


def block(dim, n_grid=GRID, **values):
    body = Body.box([0.4] * dim, [0.6] * dim, 0.5 / n_grid)
    return MPM(horizon=values.pop("horizon", 12), body=body, n_grid=n_grid, **values), body


def spinning(sim, body, seed=0):
    """Random velocities and affine velocities, so that every state and every transfer term matters."""
    rng = np.random.default_rng(seed)
    n, dim = len(body.particles), body.dim
    sim.set_initial_state(vel=rng.normal(0.0, 0.3, (n, dim)), C=rng.normal(0.0, 1.0, (n, dim, dim)))


def momentum(sim, traj):
    mass = sim.params["rho"][0, 0] * sim.body.volume
    return mass * traj["vel"][0].sum(axis=1)  # (T+1, dim)


@pytest.mark.parametrize("dim", [2, 3])
def test_momentum_is_conserved_without_gravity_and_walls(dim):
    """The transfers conserve total momentum exactly (B-spline weights sum to one; the affine and stress terms add
    no net momentum), so away from the walls and without gravity it stays put to rounding."""
    sim, body = block(dim, n_grid=ROOMY, horizon=40, g=0.0)
    spinning(sim, body)
    traj = sim.rollout()
    p = momentum(sim, traj)
    assert np.abs(p - p[0]).max() <= 1e-13 * np.abs(p[0]).max() * 40
    assert np.abs(traj["F"][0, -1] - np.eye(dim)).max() > 1e-3  # the body did deform


@pytest.mark.parametrize("dim", [2, 3])
def test_free_fall_loses_momentum_at_m_g(dim):
    """Gravity acts on every cell with mass: the total momentum falls by M g dt per step, exactly, while the
    body is clear of the floor."""
    sim, body = block(dim, n_grid=ROOMY, horizon=30)
    traj = sim.rollout()
    p = momentum(sim, traj)
    total = sim.params["rho"][0, 0] * body.volume * len(body.particles)
    steps = np.arange(sim.T + 1)
    np.testing.assert_allclose(p[:, 1], -total * 9.8 * sim.dt * steps, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(p[:, 0], 0.0, atol=1e-15)


def test_a_dropped_block_bounces_off_the_floor():
    """Dropped 0.1 m onto the floor, the elastic block bounces: its mean vertical velocity turns upward, its centre
    of mass never climbs above the release height (no energy is made), and no point sinks through the floor. A wall
    acts on the grid cells in its band (3 cells), and a point stops once its whole stencil is in the band, so no
    point goes below 1.5 cells."""
    sim, body = block(2, n_grid=ROOMY, horizon=3000, E=2000.0)
    sim.set_initial_state(pos=body.particles - [0.0, 0.4 - 3 / ROOMY - 0.1])  # the bottom 0.1 m above the band
    traj = sim.rollout()
    height, rising = traj["pos"][0, :, :, 1].mean(axis=1), traj["vel"][0, :, :, 1].mean(axis=1)
    assert traj["pos"][0, :, :, 1].min() > 1.5 / ROOMY
    assert rising.max() > 0.5  # measured 0.99 m/s, against 1.39 m/s at impact
    assert height[1:].max() <= height[0]


def test_a_step_beyond_the_stability_limit_is_named():
    """dt far above h / c (c = sqrt(E / rho)) blows up; the engine names the first non-finite step."""
    sim, body = block(2, horizon=200, dt=5e-2, E=1e5)
    spinning(sim, body)
    with pytest.raises(tisim.NonFiniteError, match=r"step \d+"):
        sim.rollout()


def full_loss(sim, body):
    """A target on every state, so every input entry moves the loss."""
    dim, n = body.dim, len(body.particles)
    return tisim.losses.TerminalTarget({
        "pos": body.particles + 0.05, "vel": np.full((n, dim), 0.1),
        "F": np.broadcast_to(1.1 * np.eye(dim), (n, dim, dim)), "C": np.full((n, dim, dim), 0.2)})


@pytest.mark.parametrize("dim", [2, 3])
def test_gradients_match_central_differences(dim):
    """Every group against Richardson-extrapolated float64 central differences, on an actuated block."""
    n_grid = GRID
    body = Body.box([0.4] * dim, [0.6] * dim, 0.5 / n_grid)
    body.actuators[: len(body.particles) // 2] = 0
    sim = MPM(horizon=10, body=body, n_grid=n_grid, actuation=2000.0)
    spinning(sim, body)
    sim.set_actions(np.random.default_rng(1).normal(0.0, 0.5, (10, 1)))
    report = tisim.gradcheck(sim, full_loss(sim, body), step=1e-4, max_entries=10, extrapolate=True)
    assert report.worst <= 1e-6, str(report)


def test_every_schedule_gives_the_same_gradients():
    """Fused forward pass, a launch per step, and checkpointed: the same gradients to 1e-12."""
    results = []
    for per_step, method in ((False, "unrolled"), (True, "unrolled"), (False, "checkpointed")):
        sim, body = block(2)
        sim._per_step = per_step
        spinning(sim, body)
        g = sim.gradient(full_loss(sim, body), method=method)
        results.append(np.concatenate([np.ravel(v) for v in g.params.values()]
                                      + [np.ravel(v) for v in g.initial_state.values()] + [g.actions.ravel()]))
    for other in results[1:]:
        np.testing.assert_allclose(other, results[0], rtol=1e-12, atol=1e-12 * np.abs(results[0]).max())


def test_the_grid_is_not_kept_per_step():
    """The grid is recomputed in the backward pass: its scratch is one step's worth whatever the horizon."""
    widths = []
    for T in (5, 20):
        sim, body = block(2, horizon=T)
        sim.gradient(full_loss(sim, body))
        widths.append(sim._scratch(T).shape[1])
    points = sim.sizes["n_particles"]
    assert widths[0] == widths[1] == points * 2 * 2 + GRID ** 2 * (1 + 2 + 2)  # affine; grid mass, momentum, velocity


@pytest.mark.parametrize("make, error, message", [
    (lambda: MPM(horizon=2, body="jelly"), TypeError, "MPM: body must be a tisim.systems.mpm.Body"),
    (lambda: MPM(horizon=2, n_grid=4), ValueError, "MPM: n_grid must be an integer >= 8"),
    (lambda: MPM(horizon=2, n_grid=8, body=Body.box([0.0, 0.0], [0.2, 0.2], 0.05)), ValueError,
     "MPM: body particles must lie in"),
    (lambda: Body.box([0.5, 0.5], [0.4, 0.6], 0.01), ValueError, "lower < upper"),
    (lambda: Body.box([0.4, 0.4], [0.6, 0.6], 0.0), ValueError, "spacing must be > 0"),
    (lambda: Body(np.zeros((3, 4)), 1e-3), ValueError, r"particles must have shape \(N, 2\) or \(N, 3\)"),
    (lambda: Body(np.full((3, 2), 0.5), -1.0), ValueError, "volume must be a finite number > 0"),
    (lambda: Body(np.full((3, 2), 0.5), 1e-3, actuators=[0, -2, 0]), ValueError, "actuators must be >= -1"),
    (lambda: Body(np.full((3, 2), 0.5), 1e-3, groups=[0, -1, 0]), ValueError, "groups must be >= 0"),
    (lambda: Body(np.full((3, 2), 0.5), 1e-3, groups=[0, 1]), ValueError, r"groups must have shape \(3,\)"),
    (lambda: Body(np.full((3, 2), np.nan), 1e-3), ValueError, "particles must be finite"),
    (lambda: Body(np.full((3, 2), 0.5), "small"), ValueError, "volume must be a finite number > 0"),
    (lambda: Body.box([0.4, 0.4], [0.41, 0.41], 0.5), ValueError, "puts no point in the box"),
    (lambda: Body.box([0.4, 0.4], [0.6, 0.6], 0.05) + Body.box([0.4] * 3, [0.6] * 3, 0.05), ValueError,
     "only bodies of the same dimension"),
    (lambda: MPM(horizon=2, floor="ice"), ValueError, r"floor must be one of \['sticky', 'slip'\]"),
    (lambda: MPM(horizon=2, nu=0.5), ValueError, r"nu must be in \[0, 0.5\)"),
])
def test_bad_input(make, error, message):
    with pytest.raises(error, match=message):
        make()
