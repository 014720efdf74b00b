"""Cartpole against Gymnasium's CartPole equations in numpy, its hanging equilibrium, cart friction and gradients."""
import numpy as np
import pytest

import tisim
from tisim.systems import Cartpole

G, M_CART, M_POLE, L = 9.8, 1.0, 0.1, 0.5  # Gymnasium's values; L is the half-length
LOSS = tisim.losses.TerminalTarget({"x": 0.3, "x_dot": 0.0, "theta": 0.0, "theta_dot": 0.0})


def gradcheck_all_groups(sim, loss):
    """tisim.gradcheck in params and initial_state at the default step, and in actions at step 1e-4."""
    # Params and initial state at the default step (1e-5). One action moves the final state by only ~dt per unit, so
    # round-off in the loss would reach ~1e-6 of its gradient there; actions take step 1e-4 (truncation < 1e-7).
    report = tisim.gradcheck(sim, loss, groups=("params", "initial_state"), max_entries=20)
    report.update(tisim.gradcheck(sim, loss, groups=("actions",), step=1e-4, max_entries=20))
    return report


def gymnasium_step(x, x_dot, theta, theta_dot, force, dt):
    """One step of Gymnasium's CartPole (kinematics_integrator='semi-implicit euler'), with a continuous force."""
    total = M_CART + M_POLE
    sin, cos = np.sin(theta), np.cos(theta)
    temp = (force + M_POLE * L * theta_dot**2 * sin) / total
    theta_acc = (G * sin - cos * temp) / (L * (4.0 / 3.0 - M_POLE * cos**2 / total))
    x_acc = temp - M_POLE * L * theta_acc * cos / total
    x_dot = x_dot + dt * x_acc
    x = x + dt * x_dot
    theta_dot = theta_dot + dt * theta_acc
    theta = theta + dt * theta_dot
    return x, x_dot, theta, theta_dot


def test_step_matches_gymnasium_equations():
    """Rollouts under random forces match a numpy transcription of Gymnasium's CartPole step to 1e-12."""
    # 200 steps of random forces (|F| <= 10 N) from four starts, hanging and near upright, agree with the numpy
    # transcription of Gymnasium's equations to 1e-12.
    steps, dt = 200, 0.02
    rng = np.random.default_rng(0)
    start = dict(x=np.array([0.0, 0.5, -1.0, 0.2]), x_dot=np.array([0.0, -0.3, 1.0, 0.1]),
                 theta=np.array([np.pi, np.pi - 0.4, np.pi + 1.0, 0.05]), theta_dot=np.array([0.0, 0.5, -1.0, 0.0]))
    force = rng.uniform(-10.0, 10.0, size=(4, steps))
    force[3] = rng.uniform(-1.0, 1.0, size=steps)  # the near-upright start: small pushes, short horizon below
    sim = Cartpole(horizon=steps, batch=4, dt=dt, **start)
    sim.set_actions(force)
    traj = sim.rollout()
    state = tuple(start[k].copy() for k in ("x", "x_dot", "theta", "theta_dot"))
    expected = [state]
    for t in range(steps):
        state = gymnasium_step(*state, force[:, t], dt)
        expected.append(state)
    expected = np.array(expected)  # (T+1, 4 states, B)
    for k, name in enumerate(("x", "x_dot", "theta", "theta_dot")):
        # the upright start falls over; keep it to the first 40 steps, before round-off is amplified past 1e-12
        np.testing.assert_allclose(traj[name][:3], expected[:, k, :3].T, rtol=0, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(traj[name][3, :41], expected[:41, k, 3], rtol=0, atol=1e-12, err_msg=name)
    assert np.ptp(traj["theta"][:3], axis=1).min() > 0.5 and np.ptp(traj["x"][:3], axis=1).min() > 0.5


def test_hanging_rest_is_an_equilibrium():
    """Hanging at rest, cart and pole stay put (to 1e-13), also with friction stiff at the default dt."""
    # theta = pi, at rest, no force: after 500 steps cart and pole have not moved (to 1e-13), without cart friction and
    # with friction stiff at the default dt (mu_cart = 0.1, 0.3: dt mu g / eps > 1).
    sim = Cartpole(horizon=500, batch=3, theta=np.pi, mu_cart=[0.0, 0.1, 0.3])
    traj = sim.rollout()
    for name in ("x", "x_dot", "theta_dot"):
        np.testing.assert_allclose(traj[name], 0.0, rtol=0, atol=1e-13, err_msg=name)
    np.testing.assert_allclose(traj["theta"], np.pi, rtol=0, atol=1e-13)


def test_upright_rest_is_an_unstable_equilibrium():
    """Upright rest stays exact; a 1e-6 rad tilt grows at the linearized rate within 0.5%."""
    # theta = 0 at rest stays exactly there; 1e-6 rad off, theta grows like exp(lambda t) with the linearized rate
    # lambda = sqrt(g / (l (4/3 - m_pole / M))) (to 0.5%, fitted over 1-2.5 s).
    traj = Cartpole(horizon=150, batch=2, theta=[0.0, 1e-6]).rollout()
    assert np.all(traj["theta"][0] == 0.0) and np.all(traj["x"][0] == 0.0)
    rate = np.sqrt(G / (L * (4.0 / 3.0 - M_POLE / (M_CART + M_POLE))))
    t = np.arange(151) * 0.02
    fitted = np.polyfit(t[50:126], np.log(traj["theta"][1, 50:126]), 1)[0]
    assert traj["theta"][1, 125] < 0.02  # still in the linear regime
    assert fitted == pytest.approx(rate, rel=5e-3)


def test_cart_friction_decelerates_a_sliding_cart():
    """Cart friction removes momentum at the rate of its impulse and stops the cart near v0^2 / (2 mu g)."""
    # Pole swinging below the cart (theta0 = pi - 0.3), x_dot0 = 1 m/s, no force, dt = 1 ms: with mu_cart = 0 the
    # horizontal momentum p = (m_cart + m_pole) x_dot + m_pole l theta_dot cos(theta) is conserved (to 1e-4, the O(dt)
    # error of the step); with mu_cart = 0.1 it changes by the friction impulse -sum dt mu M g tanh(x_dot/eps) (to
    # 1e-4), the cart stops within ~v0 / (mu g) and travels ~v0^2 / (2 mu g) (within 10%).
    steps, dt, mu = 2000, 1e-3, np.array([0.0, 0.1])
    sim = Cartpole(horizon=steps, batch=2, dt=dt, theta=np.pi - 0.3, x_dot=1.0, mu_cart=mu)
    traj = sim.rollout()
    total = M_CART + M_POLE
    momentum = total * traj["x_dot"] + M_POLE * L * traj["theta_dot"] * np.cos(traj["theta"])
    impulse = -dt * np.cumsum(mu[:, None] * total * G * np.tanh(traj["x_dot"][:, :-1] / 0.01), axis=1)
    np.testing.assert_allclose(momentum[:, 1:] - momentum[:, :1], impulse, rtol=0, atol=1e-4)
    assert np.abs(momentum[0] - momentum[0, 0]).max() < 1e-4 and impulse[1, -1] < -1.0
    stop_time = 1.0 / (0.1 * G)
    assert np.abs(traj["x_dot"][1, int(1.5 * stop_time / dt):]).max() < 0.02
    assert traj["x"][1, -1] == pytest.approx(1.0 / (2 * 0.1 * G), rel=0.1)
    assert traj["x"][0, -1] == pytest.approx(steps * dt * 1.0, rel=0.05)


@pytest.mark.parametrize("mu_cart", [0.0, 0.1])
def test_gradcheck(mu_cart):
    """Cartpole: the backward pass matches float64 central differences to 1e-6 in all three groups."""
    # T = 100, random forces, with and without cart friction; the cart keeps moving one way, clear of tanh's steep zone
    # |x_dot| < eps, where central differences would lose accuracy (the backward pass does not).
    steps = 100
    sim = Cartpole(horizon=steps, batch=2, mu_cart=mu_cart, theta=[np.pi - 0.3, np.pi + 0.5], x_dot=[3.0, -3.5],
                   theta_dot=[0.5, 0.0])
    sim.set_actions(np.random.default_rng(2).uniform(-2.0, 2.0, size=(2, steps)))
    assert np.abs(sim.rollout()["x_dot"]).min() > 10 * 0.01
    report = gradcheck_all_groups(sim, LOSS + 0.01 * tisim.losses.Effort())
    assert set(report) == {"params", "initial_state", "actions"}
    assert report.worst <= 1e-6, str(report)
