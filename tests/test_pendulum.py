"""Pendulum and DoublePendulum against mechanics: period, energy, damping, angular momentum, limits and gradients."""
import numpy as np
import pytest

import tisim
from tisim.systems import DoublePendulum, Pendulum

G = 9.8
LOSS = tisim.losses.TerminalTarget({"theta": 0.5, "theta_dot": 0.0}, weights={"theta": 1.0, "theta_dot": 0.1})
DOUBLE_LOSS = tisim.losses.TerminalTarget({"theta1": 0.5, "theta2": -0.5, "theta1_dot": 0.0, "theta2_dot": 0.0},
                                          weights={"theta1": 1.0, "theta2": 1.0, "theta1_dot": 0.1, "theta2_dot": 0.1})


def gradcheck_all_groups(sim, loss):
    """tisim.gradcheck in params and initial_state at the default step, and in actions at step 1e-4."""
    # Params and initial state at the default step (1e-5). One action moves the final state by only ~dt per unit, so
    # round-off in the loss would reach ~1e-6 of its gradient there; actions take step 1e-4 (truncation < 1e-7).
    report = tisim.gradcheck(sim, loss, groups=("params", "initial_state"), max_entries=20)
    report.update(tisim.gradcheck(sim, loss, groups=("actions",), step=1e-4, max_entries=20))
    return report


def zero_crossings(signal, dt):
    """Times where ``signal`` changes sign, linearly interpolated between steps [s]."""
    i = np.flatnonzero(np.sign(signal[:-1]) != np.sign(signal[1:]))
    return (i + signal[i] / (signal[i] - signal[i + 1])) * dt


def pendulum_energy(traj, m, l):
    """m g l (1 - cos theta) + m l^2 theta_dot^2 / 2 [J], shape (B, T+1)."""
    return m * G * l * (1 - np.cos(traj["theta"])) + 0.5 * m * l**2 * traj["theta_dot"] ** 2


def double_pendulum_energy(traj, m1, m2, l1, l2):
    """Kinetic plus potential energy of the two point masses [J], shape (B, T+1)."""
    q1, q2, w1, w2 = traj["theta1"], traj["theta2"], traj["theta1_dot"], traj["theta2_dot"]
    kinetic = 0.5 * (m1 + m2) * l1**2 * w1**2 + 0.5 * m2 * l2**2 * w2**2 + m2 * l1 * l2 * w1 * w2 * np.cos(q1 - q2)
    return kinetic - (m1 + m2) * G * l1 * np.cos(q1) - m2 * G * l2 * np.cos(q2)


def test_small_angle_period():
    """The small-angle period is 2 pi sqrt(l / g) within 0.5%, for l = 1 and l = 0.5."""
    # At theta0 = 0.05 rad the period from zero crossings is 2 pi sqrt(l/g) within 0.5%, for l = 1 and l = 0.5.
    dt, length = 0.01, np.array([1.0, 0.5])
    traj = Pendulum(horizon=2000, batch=2, dt=dt, l=length, theta=0.05).rollout()
    for b in range(2):
        crossings = zero_crossings(traj["theta"][b], dt)
        assert len(crossings) >= 19
        period = 2 * (crossings[-1] - crossings[0]) / (len(crossings) - 1)
        assert period == pytest.approx(2 * np.pi * np.sqrt(length[b] / G), rel=5e-3)


def test_undamped_energy_is_bounded_without_drift():
    """Undamped at theta0 = 1 rad, the energy error stays below 1% over 10^4 steps and does not drift."""
    # theta0 = 1 rad, c = 0, 10^4 steps of 5 ms: the energy error stays below 1% (semi-implicit Euler is symplectic) and
    # the mean error over the last thousand steps is within 1e-3 of that over the first thousand.
    sim = Pendulum(horizon=10_000, dt=0.005, theta=1.0, l=0.8, m=1.5)
    energy = pendulum_energy(sim.rollout(), 1.5, 0.8)[0]
    error = energy / energy[0] - 1
    assert np.abs(error).max() < 1e-2
    assert abs(error[-1000:].mean() - error[:1000].mean()) < 1e-3


def test_damping_dissipates_energy_at_the_viscous_rate():
    """Damped, the energy falls every step and its period mean follows E0 exp(-c t / (m l^2))."""
    # c > 0: the energy falls at every step, and its mean over each period follows E0 exp(-c t / (m l^2)) within 0.1%
    # (small amplitude, light damping).
    dt, steps, c = 0.005, 4000, 0.1
    energy = pendulum_energy(Pendulum(horizon=steps, dt=dt, theta=0.2, c=c).rollout(), 1.0, 1.0)[0]
    assert np.all(np.diff(energy) < 0)
    n = int(round(2 * np.pi * np.sqrt(1 / G) / dt))
    starts = range(0, steps + 1 - n, n)
    means = np.array([energy[i:i + n].mean() for i in starts])
    times = np.array([(i + (n - 1) / 2) * dt for i in starts])
    np.testing.assert_allclose(means / means[0], np.exp(-c * (times - times[0])), rtol=1e-3)


def test_double_pendulum_energy_error_is_first_order_and_small():
    """From chaotic starts the double pendulum's energy error is below 0.5% at dt = 1e-4 and O(dt)."""
    # Chaotic start (theta1 = theta2 = 2 rad, and theta1 = 3, theta2 = 1, theta2_dot = 2), c = 0, 5 s: at dt = 1e-4 |E -
    # E0| stays below 0.5% of (m1 + m2) g l1 + m2 g l2, and it is ~10x larger at dt = 1e-3 (first order in dt).
    scale = 2 * G + G
    worst = {}
    for dt in (1e-3, 1e-4):
        sim = DoublePendulum(horizon=int(round(5 / dt)), batch=2, dt=dt, theta1=[2.0, 3.0], theta2=[2.0, 1.0],
                             theta2_dot=[0.0, 2.0])
        energy = double_pendulum_energy(sim.rollout(), 1.0, 1.0, 1.0, 1.0)
        worst[dt] = np.abs(energy - energy[:, :1]).max(axis=1) / scale
    assert np.all(worst[1e-4] < 5e-3), worst
    assert np.all((5 < worst[1e-3] / worst[1e-4]) & (worst[1e-3] / worst[1e-4] < 20)), worst


def test_double_pendulum_torques_change_angular_momentum_about_the_pivot():
    """With g = 0 only the pivot torque changes the angular momentum about the pivot; the elbow's is internal."""
    # g = 0: the elbow torque is internal and leaves the angular momentum about the pivot unchanged; the pivot torque
    # tau1 changes it at the rate tau1 (1 s at dt = 1e-4, to 1e-3).
    dt, steps = 1e-4, 10_000
    sim = DoublePendulum(horizon=steps, batch=2, dt=dt, g=0.0, m1=0.7, m2=1.3, l1=0.9, l2=0.6, theta1=0.3,
                         theta2=-0.5, theta1_dot=1.0)
    tau = np.zeros((2, steps, 2))
    tau[0, :, 1], tau[1, :, 0] = 1.0, 1.0
    sim.set_actions(tau)
    traj = sim.rollout()
    q1, q2, w1, w2 = traj["theta1"], traj["theta2"], traj["theta1_dot"], traj["theta2_dot"]
    momentum = (0.7 + 1.3) * 0.81 * w1 + 1.3 * (0.36 * w2 + 0.9 * 0.6 * (w1 + w2) * np.cos(q1 - q2))
    assert abs(traj["theta2_dot"][0, -1] - traj["theta2_dot"][0, 0]) > 0.5, "the elbow torque did nothing"
    change = momentum[:, -1] - momentum[:, 0]
    np.testing.assert_allclose(change, [0.0, steps * dt * 1.0], atol=1e-3)


def test_double_pendulum_with_light_lower_bob_is_a_pendulum():
    """With m2 -> 0 the upper rod follows the single Pendulum to 1e-7, whatever l2."""
    # m2 = 1e-9: the upper rod follows the single Pendulum (l = l1, m = m1, same torque) to 1e-7 for any l2.
    dt, steps, l2 = 1e-3, 2000, np.array([0.3, 1.0, 2.5])
    tau = 0.3 * np.sin(np.arange(steps) * dt * 3.0)
    double = DoublePendulum(horizon=steps, batch=3, dt=dt, l1=0.8, l2=l2, m1=1.2, m2=1e-9, theta1=1.0,
                            theta2=[2.0, -1.0, 0.5], theta2_dot=[3.0, 0.0, -2.0], theta1_dot=-0.5)
    double.set_actions(np.stack([tau, np.zeros(steps)], axis=1))
    single = Pendulum(horizon=steps, dt=dt, l=0.8, m=1.2, theta=1.0, theta_dot=-0.5)
    single.set_actions(tau)
    upper, reference = double.rollout(), single.rollout()
    assert np.ptp(reference["theta"]) > 1.5
    np.testing.assert_allclose(upper["theta1"], np.broadcast_to(reference["theta"], (3, steps + 1)), rtol=0, atol=1e-7)
    np.testing.assert_allclose(upper["theta1_dot"], np.broadcast_to(reference["theta_dot"], (3, steps + 1)), rtol=0,
                               atol=1e-7)


def test_pendulum_gradcheck():
    """Pendulum: the backward pass matches float64 central differences to 1e-6 in all three groups."""
    # T = 100, damped and undamped, large and small swings, random torques.
    steps = 100
    sim = Pendulum(horizon=steps, batch=2, theta=[0.3, 2.0], theta_dot=[0.0, -1.0], c=[0.0, 0.2], l=[1.0, 0.7])
    sim.set_actions(0.5 * np.random.default_rng(0).normal(size=(2, steps)))
    report = gradcheck_all_groups(sim, LOSS + 0.01 * tisim.losses.Effort())
    assert set(report) == {"params", "initial_state", "actions"}
    assert report.worst <= 1e-6, str(report)


def test_double_pendulum_gradcheck():
    """DoublePendulum: the backward pass matches float64 central differences to 1e-6 in all three groups."""
    # T = 100, dt = 10 ms, a mild and a chaotic start, random joint torques.
    steps = 100
    sim = DoublePendulum(horizon=steps, batch=2, dt=1e-2, theta1=[0.5, 2.0], theta2=[-0.3, 2.5], theta1_dot=[0.0, 1.0])
    sim.set_actions(0.5 * np.random.default_rng(1).normal(size=(2, steps, 2)))
    report = gradcheck_all_groups(sim, DOUBLE_LOSS + 0.01 * tisim.losses.Effort())
    assert report.worst <= 1e-6, str(report)
