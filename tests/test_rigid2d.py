"""Rigid2D against rigid-body mechanics: conservation laws, resting contact, elastic collisions, rolling friction,
gradients and what bad input gets."""
import numpy as np
import pytest

import tisim
from tisim.autodiff.gradient_check import relative_errors
from tisim.systems import Rigid2D

G = 9.8
STATES = ("px", "py", "angle", "vx", "vy", "omega")


def inertia(sim):
    """Moments of inertia [kg m^2], shape (B, n_bodies): m r^2 / 2 for discs, m (hx^2 + hy^2) / 3 for boxes."""
    p = sim.params
    m = p["m"]
    return np.concatenate([0.5 * m[:, :sim.n_discs] * p["r"] ** 2,
                           m[:, sim.n_discs:] * (p["hx"] ** 2 + p["hy"] ** 2) / 3.0], axis=1)


def momenta(sim, traj):
    """Momentum (B, T+1, 2), angular momentum about the origin (B, T+1), their scales and kinetic energy (B, T+1)."""
    m, I = sim.params["m"][:, None, :], inertia(sim)[:, None, :]
    px, py, vx, vy, omega = (traj[k] for k in ("px", "py", "vx", "vy", "omega"))
    momentum = np.stack([(m * vx).sum(-1), (m * vy).sum(-1)], axis=-1)
    orbital, spin = m * (px * vy - py * vx), I * omega
    energy = 0.5 * (m * (vx ** 2 + vy ** 2) + I * omega ** 2).sum(-1)
    scale_p = (m * np.hypot(vx, vy)).sum(-1)
    scale_l = (np.abs(orbital) + np.abs(spin)).sum(-1)
    return momentum, (orbital + spin).sum(-1), scale_p, scale_l, energy


def gradient_errors(sim, loss, skip=()):
    """tisim.gradcheck in every group (actions at step 1e-4, 20 entries); the worst relative error per group, leaving
    out the parameters named in ``skip``."""
    # One action moves the final state by only ~dt per unit, so round-off in the loss would reach ~1e-6 of its gradient
    # at the default step; actions take step 1e-4 (truncation < 1e-7), as in test_bouncing_ball.
    report = tisim.gradcheck(sim, loss, groups=("params", "initial_state"))
    report.update(tisim.gradcheck(sim, loss, groups=("actions",), step=1e-4, max_entries=20))
    worst = {group: check.worst for group, check in report.items()}
    keep = np.array([label not in skip for label in sim.param_layout.labels()])
    params = report["params"]
    worst["params"] = float(relative_errors(params.backward[:, keep], params.central[:, keep]).max())
    return worst


def test_momentum_and_angular_momentum_conserved_through_collisions_with_friction():
    """g = 0, no floor: 3 discs and 2 boxes collide with friction; momentum and angular momentum stay to 1e-12."""
    # Measured: momentum to 7e-17 and angular momentum to 1.0e-13 of their scales (sum |m v|, sum |m p x v| + |I omega|)
    # over 3 s, while 46% of the kinetic energy is lost to restitution and friction (e = 0.5, mu = 0.5).
    sim = Rigid2D(horizon=3000, n_discs=3, n_boxes=2, ground="off", g=0.0, mu=0.5, e=0.5,
                  m=[1.0, 2.0, 0.5, 1.5, 1.0], r=[0.1, 0.15, 0.08], hx=[0.2, 0.1], hy=[0.1, 0.15],
                  px=[-1.0, 0.0, 1.0, 0.5, -0.5], py=[0.0, 0.05, -0.02, 0.6, -0.5], angle=[0.0, 0.0, 0.0, 0.3, -0.2],
                  vx=[1.5, 0.0, -1.0, 0.0, 0.3], vy=[0.0, 0.1, 0.0, -0.8, 0.7], omega=[0.0, 2.0, -1.0, 1.0, 0.0])
    traj = sim.rollout()
    momentum, angular, scale_p, scale_l, energy = momenta(sim, traj)
    assert energy[0, -1] < 0.7 * energy[0, 0]  # the bodies did collide, inelastically
    assert np.abs(traj["omega"][0, -1] - traj["omega"][0, 0]).min() > 0.1  # friction turned every body
    assert np.abs(momentum - momentum[:, :1]).max() <= 1e-12 * scale_p[0, 0]
    assert np.abs(angular - angular[:, :1]).max() <= 1e-12 * scale_l[0, 0]


def test_dropped_box_settles_within_the_penetration_bound_and_stays():
    """A box dropped tilted and spinning sinks less than v sqrt(m / k), settles flat and then stays put."""
    # Box 0.4 x 0.2 m, 1 kg, k = 1e5, dropped from 0.6 m at 0.3 rad, spinning and sliding. Measured: deepest corner
    # 4.7 mm against the bound v_impact sqrt(m / k) = 8.9 mm; at rest by 1 s on its long side (angle 1e-17) with the
    # static sag m g / (2 k) per corner; over the following 2 s px, py and angle move by 0 (friction_clip_to_stop
    # stops the residual slide exactly).
    hx, hy, m, k = 0.2, 0.1, 1.0, 1e5
    sim = Rigid2D(horizon=3500, n_discs=0, n_boxes=1, m=[m], hx=[hx], hy=[hy], k=k,
                  py=[0.6], angle=[0.3], vx=[0.5], omega=[1.0])
    traj = sim.rollout()
    px, py, angle, vy = (traj[name][0, :, 0] for name in ("px", "py", "angle", "vy"))
    corners = [py + sx * hx * np.sin(angle) + sy * hy * np.cos(angle) for sx in (-1, 1) for sy in (-1, 1)]
    lowest = np.min(corners, axis=0)
    impact = np.argmax(lowest < 0)
    bound = abs(vy[impact]) * np.sqrt(m / k)
    assert 0 < -lowest.min() < bound
    settled = slice(1500, None)  # 1.5 s on: the next 2 s
    assert np.abs(px[settled] - px[1500]).max() < 1e-3
    assert np.abs(py[settled] - py[1500]).max() < 1e-3
    assert np.abs(angle[settled]).max() < 1e-6
    np.testing.assert_allclose(-lowest[settled], m * G / (2 * k), rtol=1e-6)


def test_elastic_disc_collision_conserves_momentum_and_nearly_energy():
    """e = 1, mu = 0: momentum to 1e-12, kinetic energy to 1e-4 at dt = 0.1 ms (1e-2 at 1 ms), head-on outcome."""
    # Discs of 1 and 2 kg (r = 0.1 m) meet at 2 m/s with impact parameters 0 to 0.15 m, k = 1e4. Penalty contact in
    # discrete time gains a little energy as the contact switches on and off between steps: measured +3.1e-3, +7.9e-4,
    # +4.5e-5, +2.8e-4 of the kinetic energy at dt = 1 ms and +3.3e-5 .. -1.8e-6 at dt = 0.1 ms. Head-on, the velocities
    # after are those of the elastic collision, (-5/3, 1/3) m/s, and the deepest overlap is v sqrt(m_ab / k) (to 1e-3:
    # the spring is undamped at e = 1).
    offsets = np.array([0.0, 0.05, 0.1, 0.15])
    masses = np.array([1.0, 2.0])
    for dt, tolerance in ((1e-3, 1e-2), (1e-4, 1e-4)):
        sim = Rigid2D(horizon=int(round(0.6 / dt)), batch=4, dt=dt, n_discs=2, ground="off", g=0.0, e=1.0, mu=0.0,
                      k=1e4, m=masses, r=[0.1, 0.1], px=[-0.3, 0.3], py=np.stack([np.zeros(4), offsets], axis=1),
                      vx=[1.0, -1.0])
        traj = sim.rollout()
        momentum, _, scale_p, _, energy = momenta(sim, traj)
        distance = np.hypot(traj["px"][..., 0] - traj["px"][..., 1], traj["py"][..., 0] - traj["py"][..., 1])
        assert np.all(distance.min(axis=1) < 0.2) and np.all(distance[:, -1] > 0.2)  # all collide; all are apart
        assert np.abs(momentum - momentum[:, :1]).max() <= 1e-12 * scale_p.max()
        assert np.all(np.abs(energy[:, -1] / energy[:, 0] - 1) < tolerance)
    np.testing.assert_allclose(traj["vx"][0, -1], [-5 / 3, 1 / 3], rtol=1e-3)
    m_ab = masses.prod() / masses.sum()
    np.testing.assert_allclose(0.2 - distance[0].min(), 2.0 * np.sqrt(m_ab / 1e4), rtol=1e-3)


def test_sliding_disc_decelerates_then_rolls_at_two_thirds_speed():
    """A disc launched sliding without spin slows under friction until it rolls, at 2/3 of its speed (to 1e-3)."""
    # mu = 0.3: the slip v + omega r decays at 3 mu g (friction decelerates v by mu g and spins the disc up by
    # 2 mu g / r), so rolling starts at t = v0 / (3 mu g) = 0.227 s, at v0 / (1 + I / (m r^2)) = 2 v0 / 3. Measured: the
    # final speed 1.3329 for 4/3 (the contact point sits d/2 above the disc's lowest point). Both directions.
    r, mu = 0.1, 0.3
    sim = Rigid2D(horizon=600, batch=2, n_discs=1, r=[r], mu=mu, py=[r - G / 1e5], vx=[[2.0], [-2.0]])
    traj = sim.rollout()
    vx, omega = traj["vx"][:, :, 0], traj["omega"][:, :, 0]
    sign = np.sign(vx[:, :1])
    assert np.all(np.diff(sign * vx, axis=1) <= 1e-12)  # never speeds up
    assert np.all(sign * omega[:, 100:] < 0)  # spins the way it rolls
    slip = np.abs(vx + omega * r)
    assert np.all(slip[:, 200] > 0.05) and np.all(slip[:, 300] < 1e-3)
    np.testing.assert_allclose(vx[:, -1], sign[:, 0] * 2.0 * 2 / 3, rtol=1e-3)
    np.testing.assert_allclose(-omega[:, -1] * r, vx[:, -1], rtol=1e-3)


def test_gradcheck_free_flight():
    """Free flight of a disc and a box (gravity, drag, wrenches): backward matches central differences to 1e-6."""
    # Measured: 6.1e-7 (actions), 5.7e-8 (params), 1.4e-9 (initial state).
    steps = 100
    sim = Rigid2D(horizon=steps, batch=2, dt=1e-2, n_discs=1, n_boxes=1, ground="off", drag=0.2, m=[1.0, 2.0],
                  r=[0.1], hx=[0.2], hy=[0.1], px=[[0.0, 3.0], [0.0, 4.0]], py=[[0.0, 0.0], [1.0, 0.0]],
                  vx=[[1.0, -1.0], [0.5, 0.0]], omega=[[1.0, 2.0], [0.0, -1.0]], angle=[0.1, 0.2])
    sim.set_actions(np.random.default_rng(1).uniform(-1.0, 1.0, size=(2, steps, 2, 3)))
    traj = sim.rollout()
    reach = 0.1 + np.hypot(0.2, 0.1)  # no contact while the centres are farther apart than r + the box's half-diagonal
    assert np.hypot(traj["px"][..., 0] - traj["px"][..., 1], traj["py"][..., 0] - traj["py"][..., 1]).min() > reach
    loss = tisim.losses.TerminalTarget({name: np.zeros(2) for name in STATES}) + 0.01 * tisim.losses.Effort()
    worst = gradient_errors(sim, loss)
    assert max(worst.values()) <= 1e-6, worst


def test_gradcheck_sliding_contact():
    """A disc sliding and spinning on the floor (contact throughout): backward matches central differences to 1e-6."""
    # Hard contact that never opens, friction saturated (|slip| > 0.5 m/s >> eps). Measured: 4.6e-7. The derivative in
    # softness is left out: at softness = 0 it is one-sided (the backward pass sees the hard law; the difference at
    # -h is the hard law too, at +h the soft one).
    steps = 200
    sim = Rigid2D(horizon=steps, batch=2, n_discs=1, r=[0.1], mu=0.3, py=[0.1 - G / 1e5], vx=[[3.0], [-3.0]],
                  omega=[[0.0], [5.0]])
    sim.set_actions(np.random.default_rng(1).normal(size=(2, steps, 1, 3)) * [1.0, 1.0, 0.1])
    traj = sim.rollout()
    assert traj["py"].max() < 0.1 and np.abs(traj["vx"][:, -1] + 0.1 * traj["omega"][:, -1]).min() > 0.5
    loss = tisim.losses.TerminalTarget({name: np.zeros(1) for name in STATES})
    worst = gradient_errors(sim, loss, skip=("softness",))
    assert max(worst.values()) <= 1e-6, worst


def test_gradcheck_through_disc_collision():
    """Through a frictional disc-disc collision (hard contact): backward matches central differences to 1e-3."""
    # The contact switches on and off between steps, and penalty_normal's clamp (it never pulls) switches within it:
    # the loss is smooth only piecewise, and a difference whose +-h straddles a switch sees a kink the backward pass
    # does not. Measured over six random pushes: 4e-7 to 1e-6 in most entries, up to 1.9e-4 (this one) in the
    # parameters; the initial state and actions to 3e-7. Softness is left out (see test_gradcheck_sliding_contact).
    steps = 300
    sim = Rigid2D(horizon=steps, batch=2, n_discs=2, ground="off", g=0.0, mu=0.3, e=0.7, k=1e4, m=[1.0, 2.0],
                  r=[0.1, 0.15], px=[-0.25, 0.25], py=[[0.0, 0.05], [0.0, -0.08]], vx=[1.0, -1.0],
                  omega=[[0.0, 1.0], [2.0, 0.0]])
    sim.set_actions(np.random.default_rng(0).normal(size=(2, steps, 2, 3)) * 0.3)
    traj = sim.rollout()
    distance = np.hypot(traj["px"][..., 0] - traj["px"][..., 1], traj["py"][..., 0] - traj["py"][..., 1])
    assert np.all(distance.min(axis=1) < 0.24) and np.all(distance[:, -1] > 0.25)  # collided, and apart again
    loss = tisim.losses.TerminalTarget({name: np.zeros(2) for name in STATES})
    worst = gradient_errors(sim, loss, skip=("softness",))
    assert max(worst.values()) <= 1e-3, worst
    assert max(worst["initial_state"], worst["actions"]) <= 1e-5, worst


def test_gradcheck_every_contact_kind():
    """Discs and boxes piling up on the floor (all five contact kinds): backward matches differences, normwise 1e-6."""
    # Disc 0 drops to the floor and rolls into the long box's side, disc 1 lands on disc 0, the small box lands tilted
    # on the long box, which settles on the floor. The final state is very sensitive (|dL/dx0| up to 6e4): at the
    # default step 1e-5 the differences leave the linear regime (normwise error 0.57), at step 1e-9 they agree with the
    # backward pass to 1.5e-7 of the largest entry (actions: 8e-9; entry by entry 1e-4 at worst, in entries near zero).
    steps = 400
    sim = Rigid2D(horizon=steps, batch=2, n_discs=2, n_boxes=2, mu=0.4, e=0.5, k=3e4, r=[0.08, 0.08], hx=[0.3, 0.1],
                  hy=[0.08, 0.08], px=[-0.45, -0.43, 0.0, 0.1], py=[[0.25, 0.5, 0.1, 0.35], [0.25, 0.52, 0.1, 0.33]],
                  angle=[0.0, 0.0, 0.02, 0.3], vx=[[0.5, 0.0, 0.0, 0.0], [0.6, 0.1, 0.0, -0.2]])
    sim.set_actions(np.random.default_rng(0).normal(size=(2, steps, 4, 3)) * 0.1)
    loss = tisim.losses.TerminalTarget({name: np.zeros(4) for name in STATES})
    report = tisim.gradcheck(sim, loss, groups=("params", "initial_state"), step=1e-9)
    report.update(tisim.gradcheck(sim, loss, groups=("actions",), step=1e-4, max_entries=20))
    for group, check in report.items():
        assert np.abs(check.backward - check.central).max() <= 1e-6 * np.abs(check.central).max(), group


@pytest.mark.parametrize("kwargs, message", [
    (dict(m=[-1.0]), r"m must be in \(0, inf\), got -1"),
    (dict(m=[0.0]), r"m must be in \(0, inf\), got 0"),
    (dict(e=1.5), r"e must be in \[0, 1\], got 1.5"),
    (dict(e=-0.1), r"e must be in \[0, 1\], got -0.1"),
    (dict(r=[0.0]), r"r must be in \(0, inf\), got 0"),
    (dict(n_discs=-1), r"n_discs must be an integer >= 0, got -1"),
    (dict(n_discs=0, n_boxes=0), r"needs at least one body"),
    (dict(n_bodies=2), "n_bodies follows from n_discs and n_boxes"),
    (dict(n_contacts=8), "n_contacts follows from n_discs and n_boxes"),
    (dict(sweeps=8), "sweeps applies to contact='qp'"),
    (dict(solver_gradient="unrolled"), "solver_gradient applies to contact='qp' .* with contact='penalty'"),
    (dict(contact="qp", solver_gradient="adjoint"), r"solver_gradient must be one of \['implicit', 'unrolled'\]"),
    (dict(contact="qp", sweeps=0), "sweeps must be an integer >= 1, got 0"),
    (dict(contact="qp", sweeps=2.5), "sweeps must be an integer >= 1, got 2.5"),
    (dict(ground="maybe"), r"ground must be one of \['on', 'off'\], got 'maybe'"),
])
def test_bad_input_names_the_argument_and_what_is_allowed(kwargs, message):
    """Masses <= 0, e outside [0, 1], radii <= 0, bad counts and options raise ValueError saying what is allowed."""
    with pytest.raises(ValueError, match=message):
        Rigid2D(horizon=10, **kwargs)
