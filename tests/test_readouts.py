"""The readouts of MPM and MassSpring (masses, volumes, angular momentum, the walls' band, spring forces, pin
reactions), checked against physics worked out by hand: a body's mass, Hooke's law, a hanging body's weight, the
conservation of angular momentum, and the floor's measured level."""
import numpy as np
import pytest

from tisim.systems.mass_spring import MassSpring, Robot, cloth
from tisim.systems.mass_spring import readouts as spring_readouts
from tisim.systems.mpm import BAND, MPM, Body
from tisim.systems.mpm import readouts as mpm_readouts


# ---- MPM -------------------------------------------------------------------------------------------------------------
def test_mpm_point_masses_sum_to_density_times_the_bodys_area_or_volume():
    """Two blocks of two materials: 0.2 x 0.2 m of rho 1000 and 0.1 x 0.2 m of rho 400 (2D, plane strain: kg per
    metre of depth), so 40 + 8 = 48 kg per metre; a batch of two with another density for the second block. In 3D a
    0.1 m cube of rho 500 weighs 0.5 kg. The volumes sum to the area (volume) the points fill, and their current
    values follow det F."""
    s = 0.025  # divides both blocks' sides: the lattice fills them exactly
    body = Body.box([0.2, 0.2], [0.4, 0.4], s) + Body.box([0.5, 0.2], [0.6, 0.4], s, group=1)
    sim = MPM(horizon=1, batch=2, body=body, n_grid=16, rho=[[1000.0, 400.0], [1000.0, 900.0]])
    masses = mpm_readouts.point_masses(sim)
    assert masses.shape == (2, len(body.particles))
    np.testing.assert_allclose(masses.sum(axis=1), [1000.0 * 0.04 + 400.0 * 0.02, 1000.0 * 0.04 + 900.0 * 0.02],
                               rtol=1e-12)
    np.testing.assert_allclose(mpm_readouts.point_volumes(sim).sum(axis=1), 0.06, rtol=1e-12)
    squeezed = {"F": np.broadcast_to(np.diag([0.9, 1.2]), (2, 3, len(body.particles), 2, 2))}
    np.testing.assert_allclose(mpm_readouts.point_volumes(sim, squeezed).sum(axis=2), 0.06 * 1.08, rtol=1e-12)
    cube = MPM(horizon=1, body=Body.box([0.4] * 3, [0.5] * 3, 0.025), n_grid=16, rho=500.0)
    assert mpm_readouts.point_masses(cube).sum() == pytest.approx(0.5, rel=1e-12)


def spinning_block(n_grid=16):
    """A 0.2 m block spinning at 2 rad/s about its centre with random velocities and affine velocities on top,
    without gravity, clear of the walls: nothing outside it exerts a torque."""
    body = Body.box([0.4, 0.4], [0.6, 0.6], 0.5 / n_grid)
    sim = MPM(horizon=40, body=body, n_grid=n_grid, g=0.0, E=1e4)
    rng = np.random.default_rng(0)
    spin = np.array([[0.0, -2.0], [2.0, 0.0]])
    sim.set_initial_state(vel=(body.particles - 0.5) @ spin.T + rng.normal(0.0, 0.05, body.particles.shape),
                          C=spin + rng.normal(0.0, 0.5, (len(body.particles), 2, 2)))
    return sim


def test_mpm_angular_momentum_with_the_apic_part_is_conserved_and_without_it_is_not():
    """The total with the affine part, about the origin and about another fixed point, stays put to rounding over
    40 steps of a spinning, deforming block (measured 3e-15 and 1e-15 relative); the points' x x m v alone drifts
    by 5e-2 and 1e-2 of itself: angular momentum moves between the points' motion and their affine velocities."""
    sim = spinning_block()
    traj = sim.rollout()
    drift = {}
    for about in (None, [0.3, 0.7]):
        L = mpm_readouts.angular_momentum(sim, traj, about=about)
        assert L.shape == (1, sim.T + 1)
        drift[about is None] = np.abs(L - L[:, :1]).max() / np.abs(L[:, 0]).max()
        orbital = mpm_readouts.angular_momentum(sim, traj, about=about, affine=False)
        assert np.abs(orbital - orbital[:, :1]).max() > 1e-3 * np.abs(orbital[:, 0]).max()
    assert max(drift.values()) < 1e-13, drift
    # the final state alone gives the last row
    final = {name: traj[name][:, -1] for name in ("pos", "vel", "C")}
    np.testing.assert_allclose(mpm_readouts.angular_momentum(sim, final, about=[0.3, 0.7]), L[:, -1], rtol=1e-14)


def test_mpm_angular_momentum_of_a_rigid_spin_is_its_moment_of_inertia_times_the_rate():
    """A rigid rotation at w = 2 rad/s carried by the points (v = w x r, C = the spin matrix): L = w (I_points +
    M h^2 / 2), with I_points = sum m |r|^2 and the APIC part m h^2 / 4 (C_yx - C_xy) = m h^2 w / 2 a point."""
    sim = spinning_block()
    r = sim.body.particles - 0.5
    spin = np.array([[0.0, -2.0], [2.0, 0.0]])
    state = {"pos": sim.body.particles[None], "vel": (r @ spin.T)[None],
             "C": np.broadcast_to(spin, (1, len(r), 2, 2))}
    m = mpm_readouts.point_masses(sim)[0]
    h = 1.0 / sim.sizes["n_grid"]
    expected = 2.0 * (np.sum(m * (r ** 2).sum(axis=1)) + m.sum() * h * h / 2)
    assert mpm_readouts.angular_momentum(sim, state, about=[0.5, 0.5])[0] == pytest.approx(expected, rel=1e-12)


def test_mpm_wall_band_and_the_floors_measured_level():
    """The band is 3 cells: 3 / 32 m on a 32-cell grid, the floor at y = 3 h. A 0.2 x 0.4 m column of plane-strain
    neo-Hookean material (nu = 0.2) whose base carries 1% strain (rho g H (1 - nu^2) / E = 0.01) settles as linear
    elasticity on a rigid floor at y = 3 h says: its top's drop is linear elasticity's within 2% (measured 1.013 on
    32 cells, 1.000 on 64), its bottom row sinks 0.003 cells, and its shortening between its bottom row (or its
    fifth) and its top row is linear elasticity's within 1% (1.003, 0.997)."""
    n, nu, rho, g, height = 32, 0.2, 1000.0, 9.8, 0.4
    h = 1.0 / n
    E = rho * g * height * (1 - nu * nu) / 0.01
    body = Body.box([0.4, BAND * h], [0.6, BAND * h + height], h / 2)
    dt = 0.3 * h / np.sqrt(E / rho)
    sim = MPM(horizon=int(1.5 / dt), body=body, n_grid=n, dt=dt, E=E, nu=nu, rho=rho, drag=20.0)
    band = mpm_readouts.wall_band(sim)
    assert band == {"cells": 3, "width": 3 * h, "low": 3 * h, "high": 1 - 3 * h}
    final = sim.rollout(final=True)
    assert np.abs(final["vel"]).max() < 1e-6  # settled
    y0, y = np.round(body.particles[:, 1], 12), final["pos"][0, :, 1]
    rows = np.unique(y0)
    filled = len(rows) * h / 2  # the material's height, whole rows of h / 2

    def settled(row):
        return y[y0 == rows[row]].mean()

    def linear(z1, z2):
        """Linear plane-strain shortening between reference heights z1 < z2 above the floor: the strain at z is
        rho g (1 - nu^2) (H - z) / E (uniaxial stress in the plane, none across it)."""
        return rho * g * (1 - nu * nu) / E * ((filled * z2 - z2 ** 2 / 2) - (filled * z1 - z1 ** 2 / 2))

    sink = (rows[0] - settled(0)) / h
    assert 0.0 < sink < 0.01
    z = rows - band["low"]
    top_drop = rows[-1] - settled(-1)
    assert top_drop / linear(0.0, z[-1]) == pytest.approx(1.0, abs=0.02)
    assert ((rows[-1] - rows[0]) - (settled(-1) - settled(0))) / linear(z[0], z[-1]) == pytest.approx(1.0, abs=0.01)
    assert ((rows[-1] - rows[4]) - (settled(-1) - settled(4))) / linear(z[4], z[-1]) == pytest.approx(1.0, abs=0.01)


# ---- MassSpring ------------------------------------------------------------------------------------------------------
def test_spring_forces_follow_hookes_law_with_actuation_and_damping():
    """Three particles, worked out by hand. Spring 0 joins (0, 0) and (0.3, 0.4): r = 0.5 m, rest 0.4 m, k = 100 N/m,
    so 10 N of tension; driven by an actuator at a = 0.25 its rest length is 0.5 m and its tension 0. Spring 1 joins
    (0.3, 0.4) and (0.3, 0.1): r = 0.3 m, rest 0.4 m, k = 50 N/m, so -5 N (pushing its ends apart). With the ends of
    spring 1 closing at 0.2 m/s along it and damping 3 N s/m, the damper adds -0.6 N."""
    robot = Robot("triangle", [[0.0, 0.0], [0.3, 0.4], [0.3, 0.1]], [[0, 1], [1, 2]], actuators=[[0]])
    sim = MassSpring(horizon=2, robot=robot, k=[100.0, 50.0], rest=[0.4, 0.4], damping=0.0, g=0.0)
    sim.set_initial_state(pos=robot.particles + [0.0, 1.0])  # clear of the ground
    sim.set_actions([[0.0], [0.25]])
    state = {"pos": sim.initial_state["pos"][:, None], "vel": np.zeros((1, 1, 3, 2))}
    np.testing.assert_allclose(spring_readouts.spring_forces(sim, state, steps=[0]), [[[10.0, -5.0]]], atol=1e-12)
    np.testing.assert_allclose(spring_readouts.spring_forces(sim, state, steps=[1]), [[[0.0, -5.0]]], atol=1e-12)
    sim.set_params(damping=3.0)
    state["vel"][0, 0, 2] = [0.0, 0.2]  # particle 2 moves up, towards particle 1 above it
    np.testing.assert_allclose(spring_readouts.spring_forces(sim, state, steps=[0]), [[[10.0, -5.6]]], atol=1e-12)
    # the force on each particle is the springs' along their unit vectors: particle 1 is pulled towards 0 by 10 N
    # and pushed up, away from 2, by 5.6 N
    force = spring_readouts.particle_forces(sim, state, steps=[0])[0, 0]
    np.testing.assert_allclose(force[1], 10.0 * np.array([-0.6, -0.8]) + [0.0, 5.6], atol=1e-12)
    np.testing.assert_allclose(force.sum(axis=0), 0.0, atol=1e-12)  # internal forces: no net force without weight


def test_a_pin_holds_a_hanging_particle_by_hand():
    """A particle of m = 0.01 kg hangs from a pinned one by a vertical spring (k = 100 N/m, rest 0.2 m) stretched by
    m g / k: the spring's tension is m g = 0.098 N, the hanging particle stays at rest, and the pin carries both
    particles' weight, 2 m g = 0.196 N upwards."""
    m, g, k, rest = 0.01, 9.8, 100.0, 0.2
    robot = Robot("pendant", [[0.5, 1.0], [0.5, 1.0 - rest]], [[0, 1]], pinned=[0])
    sim = MassSpring(horizon=50, robot=robot, k=k, rest=rest, m=m, g=g)
    sim.set_initial_state(pos=[[0.5, 1.0], [0.5, 1.0 - rest - m * g / k]])
    traj = sim.rollout()
    np.testing.assert_allclose(traj["pos"][0, -1], sim.initial_state["pos"][0], atol=1e-12)
    np.testing.assert_allclose(spring_readouts.spring_forces(sim, traj), m * g, rtol=1e-9)
    reactions = spring_readouts.pin_reactions(sim, traj)
    assert reactions.shape == (1, sim.T + 1, 1, 2)
    np.testing.assert_allclose(reactions[0, :, 0], np.broadcast_to([0.0, 2 * m * g], (sim.T + 1, 2)), atol=1e-9)
    np.testing.assert_allclose(spring_readouts.point_masses(sim), [[m, m]])


def test_a_hanging_cloths_pins_carry_its_weight():
    """A 6 x 6 cloth (36 particles of 0.01 kg) hangs from its two top corners and settles (air drag 0.05 N s/m): the
    two pins' reactions sum to its weight, 36 m g = 3.528 N upwards, to 1e-6 N (measured 8e-10 relative), and nothing
    sideways; by symmetry each carries half, and as the sagging sheet pulls the corners towards each other, the
    pins push them apart. While it swings, at the start, they do not balance it."""
    sheet = cloth(6, 6, spacing=0.05, origin=(0.3, 1.0, 0.5), pin="top corners")
    sim = MassSpring(horizon=3000, robot=sheet, drag=0.05)
    final = sim.rollout(final=True)
    assert np.abs(final["vel"]).max() < 1e-6
    weight = 36 * 0.01 * 9.8
    reactions = spring_readouts.pin_reactions(sim, final)[0, 0]  # (2 pins, 3)
    np.testing.assert_allclose(reactions.sum(axis=0), [0.0, weight, 0.0], atol=1e-6)
    np.testing.assert_allclose(reactions[:, 1], weight / 2, rtol=1e-6)
    assert reactions[0, 0] < 0 < reactions[1, 0]  # pin 0 is the left corner (x = 0.3), pin 1 the right
    start = spring_readouts.pin_reactions(sim, {"pos": sheet.particles[None], "vel": np.zeros((1, 36, 3))}, steps=[0])
    assert abs(start[0, 0, :, 1].sum() - weight) > 0.5 * weight  # as built the sheet is unstretched: pins hold 2 m g
