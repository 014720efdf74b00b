"""The material point method: conservation laws, free fall, friction, the stability limit, bodies, bad input."""
import json

import numpy as np
import pytest

import tisim
from tisim.systems.mpm import BAND, MPM, Body

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


def full_loss(sim, body):
    """A target on every state, so every input entry moves the loss."""
    dim, n = body.dim, len(body.particles)
    return tisim.losses.TerminalTarget({
        "pos": body.particles + 0.05, "vel": np.full((n, dim), 0.1),
        "F": np.broadcast_to(1.1 * np.eye(dim), (n, dim, dim)), "C": np.full((n, dim, dim), 0.2)})


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


def cross(a, b):
    """a x b over the last axis: a scalar in 2D, a vector in 3D."""
    if a.shape[-1] == 2:
        return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    return np.cross(a, b)


def angular_momentum(sim, traj):
    """Total angular momentum about the origin, (T+1,) in 2D or (T+1, 3) in 3D: each point's x_p x m_p v_p plus its
    APIC affine part, the angular momentum of its velocity field about x_p, m_p h^2 / 4 times the antisymmetric
    part of C_p (for quadratic B-splines, sum_i w_ip (x_i - x_p)(x_i - x_p)^T = h^2 / 4 I)."""
    mass = sim.params["rho"][0, 0] * sim.body.volume
    x, v, C = traj["pos"][0], traj["vel"][0], traj["C"][0]
    spin = mass / (4 * sim.sizes["n_grid"] ** 2)
    if sim.body.dim == 2:
        return mass * cross(x, v).sum(axis=1) + spin * (C[..., 1, 0] - C[..., 0, 1]).sum(axis=1)
    axial = np.stack([C[..., 2, 1] - C[..., 1, 2], C[..., 0, 2] - C[..., 2, 0], C[..., 1, 0] - C[..., 0, 1]], -1)
    return mass * cross(x, v).sum(axis=1) + spin * axial.sum(axis=1)


@pytest.mark.parametrize("dim, material", [(2, "neo_hookean"), (2, "corotated"), (3, "neo_hookean")])
def test_angular_momentum_is_conserved_with_the_affine_part(dim, material):
    """APIC transfers carry angular momentum in C_p, and a symmetric Kirchhoff stress exerts no net torque: the
    total, points' x p plus their affine part, is conserved to rounding on a spinning, deforming block (measured
    4e-15 relative in 2D). Without the affine part it drifts by 6e-3 in these 40 steps: the test can tell."""
    sim, body = block(dim, n_grid=ROOMY, horizon=40, g=0.0, material=material)
    r = body.particles - 0.5
    spin = np.zeros((dim, dim))
    spin[0, 1], spin[1, 0] = -2.0, 2.0  # 2 rad/s about the z axis, plus noise in every component
    rng = np.random.default_rng(0)
    sim.set_initial_state(vel=r @ spin.T + rng.normal(0.0, 0.05, r.shape),
                          C=spin + rng.normal(0.0, 0.5, (len(r), dim, dim)))
    traj = sim.rollout()
    L = angular_momentum(sim, traj)
    assert np.abs(L - L[0]).max() <= 1e-12 * np.abs(L[0]).max()
    orbital = sim.params["rho"][0, 0] * body.volume * cross(traj["pos"][0], traj["vel"][0]).sum(axis=1)
    assert np.abs(orbital - orbital[0]).max() > 1e-4 * np.abs(orbital[0]).max()


def bar_frequency(dim, n_grid, E=1e4, rho=1000.0, length=0.375, thickness=1 / 16):
    """The first longitudinal mode of a free bar (no gravity, clear of the walls: no point's stencil reaches a wall's
    band on 16 cells or more), from the zero crossings of its modal velocity sum_p v_x cos(pi s_p / L) over two
    periods."""
    h, c = 1.0 / n_grid, np.sqrt(E / rho)
    start = 0.5 - length / 2
    lower = [start] + [0.5 - thickness / 2] * (dim - 1)
    body = Body.box(lower, [start + length] + [0.5 + thickness / 2] * (dim - 1), h / 2)
    dt = 0.2 * h / c
    steps = int(np.ceil(2 * 2 * length / c / dt))
    sim = MPM(horizon=steps, body=body, n_grid=n_grid, dt=dt, E=E, nu=0.0, rho=rho, g=0.0)
    shape = np.cos(np.pi * (body.particles[:, 0] - start) / length)
    vel = np.zeros_like(body.particles)
    vel[:, 0] = 0.01 * c * shape
    sim.set_initial_state(vel=vel)
    a = sim.rollout()["vel"][0, :, :, 0] @ shape
    k = np.flatnonzero(np.sign(a[:-1]) != np.sign(a[1:]))
    crossings = (k - a[k] / (a[k + 1] - a[k])) * dt
    return 1.0 / (2.0 * np.diff(crossings).mean()), c / (2 * length)


def test_a_free_bar_rings_at_its_first_longitudinal_mode():
    """A bar of length L = 0.375 m rings at f = sqrt(E / rho) / (2 L), the 1D wave equation's free-free mode. With
    nu = 0 there is no lateral contraction, so the thin-bar theory is exact and the 2D modulus is E itself. Measured
    errors 2.6%, 0.70%, 0.18% (all below the theory) on 16, 32, 64 cells: second order in h; the same in 3D on 16
    cells."""
    errors = []
    for n_grid in (16, 32, 64):
        f, theory = bar_frequency(2, n_grid)
        errors.append(abs(f / theory - 1.0))
    assert errors[0] < 0.04 and errors[1] < 0.01 and errors[2] < 0.003, errors
    assert errors[1] < errors[0] / 3 and errors[2] < errors[1] / 3, errors  # converging at about h^2
    f, theory = bar_frequency(3, 16)
    assert abs(f / theory - 1.0) < 0.04


def sliding(floor, n_grid=32, speed=1.0, **values):
    """A stiff block launched along the floor at 1 m/s: (times, its mean horizontal velocity)."""
    h = 1.0 / n_grid
    body = Body.box([0.2, BAND * h], [0.3, BAND * h + 0.05], h / 2)
    E = 1e5
    dt = 0.2 * h / np.sqrt(E / 1000.0)
    sim = MPM(horizon=int(0.3 / dt), body=body, n_grid=n_grid, dt=dt, E=E, floor=floor, **values)
    vel = np.zeros_like(body.particles)
    vel[:, 0] = speed
    sim.set_initial_state(vel=vel)
    return np.arange(sim.T + 1) * dt, sim.rollout()["vel"][0, :, :, 0].mean(axis=1)


@pytest.mark.parametrize("mu", [0.2, 0.4])
def test_coulomb_friction_decelerates_a_sliding_block_at_mu_g(mu):
    """Coulomb's law on the floor's grid cells adds up to a friction force mu M g on the block: while it slides it
    decelerates at mu g, as a rigid block would (measured 1.009 and 1.021 times mu g on 32 cells, 1.002 and 1.010
    on 64). A slip floor does not slow it."""
    t, v = sliding("friction", mu=mu)
    sliding_phase = (t > 0.02) & (v > 0.2)  # after the landing, before it stops
    deceleration = -np.polyfit(t[sliding_phase], v[sliding_phase], 1)[0]
    assert abs(deceleration / (mu * 9.8) - 1.0) < 0.03, deceleration
    t, v = sliding("slip")
    assert abs(v[-1] - 1.0) < 1e-3


def wall_impact(walls, mu=0.0, dim=2, n_grid=32):
    """A stiff block thrown at the left wall (0.5 m/s into it) while moving up along it (1 m/s), without gravity:
    the change of its mean velocity (normal, tangential) over the impact."""
    h = 1.0 / n_grid
    low, high = [BAND * h + 0.01] + [0.4] * (dim - 1), [BAND * h + 0.06] + [0.5] * (dim - 1)
    body = Body.box(low, high, h / 2)
    E = 1e5
    dt = 0.2 * h / np.sqrt(E / 1000.0)
    sim = MPM(horizon=int(0.08 / dt), body=body, n_grid=n_grid, dt=dt, E=E, g=0.0, walls=walls, mu=mu)
    vel = np.zeros_like(body.particles)
    vel[:, 0], vel[:, 1] = -0.5, 1.0
    sim.set_initial_state(vel=vel)
    v = sim.rollout()["vel"][0].mean(axis=1)
    return v[-1, 0] - v[0, 0], v[-1, 1] - v[0, 1]


@pytest.mark.parametrize("mu", [0.2, 0.4])
def test_a_coulomb_wall_takes_mu_times_the_normal_impulse(mu):
    """Side walls with walls="friction": a block that slides along the wall all through its impact loses tangential
    momentum mu times the normal momentum the wall gives it, Coulomb's law for an impulse (measured 0.2000 and
    0.4000); a slip wall takes none, a sticky one more than the Coulomb walls."""
    normal, tangential = wall_impact("friction", mu)
    assert normal > 0.5  # it stopped and bounced back
    assert abs(-tangential / normal / mu - 1.0) < 0.01, (normal, tangential)
    normal, tangential = wall_impact("slip")
    assert normal > 0.5 and abs(tangential) < 1e-9
    assert wall_impact("sticky")[1] < -0.5


def test_a_fluid_bears_no_shear_and_an_elastic_body_does():
    """A block sheared at constant volume (F = I + 0.2 e_x e_y^T, J = 1), at rest and without gravity: the solid
    springs back, the fluid feels no stress and stays at rest. Under gravity a fluid column collapses and spreads
    over the floor; the solid column of the same E stands."""
    for material, moves in (("neo_hookean", True), ("corotated", True), ("fluid", False)):
        sim, body = block(2, n_grid=ROOMY, horizon=20, g=0.0, material=material)
        sheared = np.eye(2) + [[0.0, 0.2], [0.0, 0.0]]
        sim.set_initial_state(F=np.broadcast_to(sheared, (len(body.particles), 2, 2)))
        speed = np.abs(sim.rollout()["vel"][0, -1]).max()
        assert (speed > 1e-2) if moves else (speed < 1e-12), (material, speed)
    widths = {}
    for material in ("neo_hookean", "fluid"):
        h = 1.0 / 32
        body = Body.box([0.45, BAND * h], [0.55, BAND * h + 0.3], h / 2)
        sim = MPM(horizon=2000, body=body, n_grid=32, dt=2e-4, E=2e4, material=material)
        x = sim.rollout()["pos"][0, -1, :, 0]
        widths[material] = x.max() - x.min()
    assert widths["neo_hookean"] < 0.12 < 0.3 < widths["fluid"], widths


def left_stretch_deviator(F):
    """|dev V| for each F = V R (numpy, by the SVD F = U S W^T: V = U S U^T), computed apart from the code."""
    U, S, _ = np.linalg.svd(F)
    V = np.einsum("pij,pj,pkj->pik", U, S, U)
    dim = F.shape[-1]
    deviator = V - np.trace(V, axis1=1, axis2=2)[:, None, None] / dim * np.eye(dim)
    return np.linalg.norm(deviator, axis=(1, 2))


def neo_hookean_column_shortening(z1, z2, height, E, rho, g=9.8, top=0.0):
    """Shortening between reference heights z1 < z2 of a nu = 0 neo-Hookean column of the given height standing
    on a floor (numpy, apart from the code), pressed on its top by a pressure `top` [Pa]. With nu = 0 the sides stay
    put and the stretch lam along the column carries what lies above it: mu (lam - 1 / lam) = -(top + rho g (height -
    z)), mu = E / 2; solved for lam, integrated."""
    z = np.linspace(z1, z2, 20001)
    load = -(top + rho * g * (height - z)) / (E / 2)
    lam = (load + np.sqrt(load * load + 4)) / 2
    return float(np.sum((1 - lam[1:] + 1 - lam[:-1]) / 2 * np.diff(z)))


def column_shortening(traj, body, h, base, low):
    """A settled column's measured shortening between its row `low` and its top row (rows of points h / 2 apart),
    the two rows' reference heights above its base, and the column's height (its rows times h / 2)."""
    y = np.round(body.particles[:, 1], 12)
    rows = np.unique(y)
    pos = traj["pos"][0, :, :, 1]
    a, b = y == rows[low], y == rows[-1]
    measured = (pos[0, b].mean() - pos[0, a].mean()) - (pos[-1, b].mean() - pos[-1, a].mean())
    return measured, rows[low] - base, rows[-1] - base, len(rows) * h / 2


def test_an_elastic_column_settles_at_its_compression_under_its_own_weight():
    """A column (0.3 m asked, nu = 0, E = 1e5 Pa, rho = 1000 kg/m^2) released on the floor settles (drag 20/s;
    undamped, APIC transfers keep it oscillating about its equilibrium for many periods). Its points fill whole
    lattice rows, so the material stands 0.297 m high on 32 and 64 cells (19 and 38 rows of h/2), and that height, not
    the one asked, carries the weight. Against the exact neo-Hookean answer (stiffer than linear by about 1%; the
    strain at the base is 3%), between the fifth row and the top, clear of the floor's band: measured 1.0009 on 32
    cells, 1.0003 on 64. The whole column, its lowest row in the band's reach, is softer by an error that shrinks
    with the cell: 1.019, 1.009. Linear elasticity's rho g (L z - z^2 / 2) / E from z1 to z2 matches the whole
    column within 2% (1.009, 0.999)."""
    E, rho = 1e5, 1000.0
    errors = []
    for n_grid in (32, 64):
        h = 1.0 / n_grid
        body = Body.box([0.45, BAND * h], [0.55, BAND * h + 0.3], h / 2)
        dt = 0.3 * h / np.sqrt(E / rho)
        sim = MPM(horizon=int(1.5 / dt), body=body, n_grid=n_grid, dt=dt, E=E, nu=0.0, rho=rho, drag=20.0)
        traj = sim.rollout()
        assert np.abs(traj["vel"][0, -1]).max() < 1e-6  # at rest
        measured, z1, z2, height = column_shortening(traj, body, h, BAND * h, 4)
        assert measured / neo_hookean_column_shortening(z1, z2, height, E, rho) == pytest.approx(1.0, abs=0.003)
        measured, z1, z2, height = column_shortening(traj, body, h, BAND * h, 0)
        exact = neo_hookean_column_shortening(z1, z2, height, E, rho)
        errors.append(measured / exact - 1.0)
        linear = rho * 9.8 * ((height * z2 - z2**2 / 2) - (height * z1 - z1**2 / 2)) / E
        assert measured / linear == pytest.approx(1.0, abs=0.02)
    assert 0.0 < errors[1] < 0.7 * errors[0] < 0.03, errors  # the floor's error shrinks with the cell


def test_von_mises_clay_slumps_where_a_solid_stands():
    """A 0.2 m block resting on the floor under its own weight (rho g H = 1,960 Pa at its base). Corotated, it
    stands (its height 0.184 m after 0.6 s, its largest deviatoric stretch 5.6 times the yield limit). Von Mises with
    a yield stress far above the load is the same solid to rounding; with 200 Pa it slumps into a wide heap
    (measured: height 0.092 m, width 0.55 m), and every point ends on or inside the yield surface |dev V| <= yield /
    (sqrt(6) G), checked by an SVD in numpy."""
    h = 1.0 / 32
    body = Body.box([0.4, BAND * h], [0.6, BAND * h + 0.2], h / 2)
    final = {}
    for material, strength in (("corotated", 200.0), ("von_mises", 1e9), ("von_mises", 200.0)):
        sim = MPM(horizon=3000, body=body, n_grid=32, E=3e4, nu=0.2, material=material, yield_stress=strength)
        traj = sim.rollout()
        final[material, strength] = traj["pos"][0, -1], traj["F"][0, -1]
    height = {key: pos[:, 1].max() - pos[:, 1].min() for key, (pos, _) in final.items()}
    assert height["corotated", 200.0] > 0.17 and height["von_mises", 200.0] < 0.1, height
    np.testing.assert_allclose(final["von_mises", 1e9][0], final["corotated", 200.0][0], rtol=0, atol=1e-12)
    limit = 200.0 / (np.sqrt(6) * 3e4 / (2 * 1.2))
    assert left_stretch_deviator(final["von_mises", 200.0][1]).max() <= limit * (1 + 1e-9)
    assert left_stretch_deviator(final["corotated", 200.0][1]).max() > 4 * limit  # the solid goes beyond it


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


@pytest.mark.parametrize("attribute, forms", [
    ("FUSED", {"scatter": ("no_such_form", "n_particles")}), ("FUSED", {"scatter": ("scatter_point", "no_such_size")}),
    ("FUSED", {"nowhere": ("gather", "n_pairs")}), ("REVERSES", {"gather": ("no_such_reverse", "n_particles")}),
    ("REVERSES", {"stress": ("gather_reverse", "n_cells_")})])
def test_a_phase_form_must_name_a_phase_a_function_and_a_size(attribute, forms):
    Broken = type("Broken", (MPM,), {attribute: forms})
    with pytest.raises(ValueError, match=f"Broken: {attribute} maps a plain phase"):
        Broken(horizon=2, n_grid=GRID, body=Body.box([0.4, 0.4], [0.6, 0.6], 0.5 / GRID))


def test_the_grid_is_not_kept_per_step():
    """The grid is recomputed in the backward pass: its scratch is one step's worth whatever the horizon."""
    widths = []
    for T in (5, 20):
        sim, body = block(2, horizon=T)
        sim.gradient(full_loss(sim, body))
        widths.append(sim._scratch(T).shape[1])
    points = sim.sizes["n_particles"]
    # affine and deformation per point; grid mass, momentum, velocity
    assert widths[0] == widths[1] == points * (4 + 4) + GRID ** 2 * (1 + 2 + 2)


def test_a_body_from_cells_fills_each_cell_with_its_points():
    """points_per_cell^d points per cell on a regular lattice, each with the cell's actuator and group, and the
    points' volumes adding up to the cells' area."""
    cells = [[0, 0], [1, 0], [1, 1]]
    body = Body.from_cells(cells, 0.1, [0.2, 0.3], points_per_cell=2, actuators=[-1, 0, 1], groups=[0, 0, 1])
    assert len(body.particles) == 12 and np.isclose(body.volume * 12, 3 * 0.1 ** 2)
    np.testing.assert_allclose(body.particles[:4], [[0.225, 0.325], [0.225, 0.375], [0.275, 0.325], [0.275, 0.375]])
    assert body.actuators.tolist() == [-1] * 4 + [0] * 4 + [1] * 4 and body.groups.tolist() == [0] * 8 + [1] * 4
    cube = Body.from_cells([[0, 0, 0]], 0.1, [0.4, 0.4, 0.4], points_per_cell=3)
    assert len(cube.particles) == 27 and np.allclose(cube.particles.mean(axis=0), 0.45)


def test_the_walker_asset_loads_onto_the_floor():
    body = Body.load("walker", origin=[0.1, BAND / 64])
    assert len(body.particles) == 24 * 9 and sorted(set(body.actuators.tolist())) == [-1, 0, 1, 2, 3]
    assert np.isclose(body.particles[:, 1].min(), BAND / 64 + 0.025 / 6)
    MPM(horizon=2, body=body, n_grid=64).rollout()


@pytest.mark.parametrize("change, message", [
    (dict(cells=[[0, 0], [0, 0]]), "cells must not repeat a cell"),
    (dict(cells=[[0, 0.5]]), "cells must be a list of"),
    (dict(cell=-0.1), "cell must be a number > 0"),
    (dict(origin=[0.1]), "origin must be 2 finite coordinates"),
    (dict(points_per_cell=0), "points_per_cell must be an integer >= 1"),
    (dict(actuators=[0, 1]), r"actuators must list one integer per cell \(1 cells\)"),
    (dict(groups=[-1]), "groups must be >= 0"),
    (dict(colour="red"), r"unknown fields \['colour'\]"),
])
def test_a_malformed_body_file_is_refused_by_field(tmp_path, change, message):
    document = dict(name="one", cells=[[0, 0]], cell=0.05, origin=[0.4, 0.4])
    document.update(change)
    path = tmp_path / "one.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError, match=f"body file .*one.json.*: {message}"):
        Body.load(path)


def test_a_missing_body_file_names_the_known_ones():
    with pytest.raises(FileNotFoundError, match=r"body files in assets/bodies: \[.*'walker'"):
        Body.load("no_such_body")


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
    (lambda: MPM(horizon=2, floor="ice"), ValueError, r"floor must be one of \['sticky', 'slip', 'friction'\]"),
    (lambda: MPM(horizon=2, walls="glue"), ValueError, r"walls must be one of \['slip', 'sticky', 'friction'\]"),
    (lambda: MPM(horizon=2, material="clay"), ValueError, r"material must be one of \['neo_hookean', 'corotated'"),
    (lambda: MPM(horizon=2, mu=-0.1), ValueError, r"mu must be in \[0, inf\)"),
    (lambda: MPM(horizon=2, yield_stress=0.0), ValueError, r"yield_stress must be in \(0, inf\)"),
    (lambda: MPM(horizon=2, nu=0.5), ValueError, r"nu must be in \[0, 0.5\)"),
])
def test_bad_input(make, error, message):
    with pytest.raises(error, match=message):
        make()
