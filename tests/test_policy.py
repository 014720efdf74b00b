"""Closed-loop policies inside the rollout (tisim.learn.policy): the law against numpy, gradients against central
differences and a closed form, the mechanisms against each other, and the refusals."""
import numpy as np
import pytest

import tisim
from tisim.autodiff.gradient_check import gradcheck
from tisim.learn.policy import closed_loop, normalization

T = 12


def swing(batch=3, hidden=(4,), seed=0, horizon=T):
    Swing = closed_loop(tisim.systems.Cartpole, hidden=hidden, limit=5.0, angles=("theta",))
    rng = np.random.default_rng(seed)
    return Swing(horizon=horizon, batch=batch, seed=seed, theta=np.pi + rng.uniform(-0.5, 0.5, batch),
                 theta_dot=rng.uniform(-1, 1, batch), x=rng.uniform(-0.2, 0.2, batch))


def test_the_loop_applies_the_numpy_law():
    # the states a closed-loop rollout visits, replayed open-loop with the actions the numpy law gives for them:
    # the same trajectory, so the network inside the step is the documented one (features, normalization, limit)
    sim = swing()
    rng = np.random.default_rng(1)
    sim.set_params(obs_mean=rng.normal(size=5) * 0.1, obs_scale=rng.uniform(0.5, 2.0, size=5))
    feedforward = rng.normal(size=(3, T)) * 0.3
    sim.set_actions(feedforward)
    traj = sim.rollout()
    p = sim.params
    policy = sim.model.policy
    actions = feedforward + np.stack([policy.act_numpy(p["w_policy"][b], p["obs_mean"][b], p["obs_scale"][b],
                                                       {k: v[b, :-1] for k, v in traj.items()})[:, 0]
                                      for b in range(3)])
    assert np.all(np.abs(actions - feedforward) <= 5.0)
    assert np.ptp(actions - feedforward) > 0.1  # the policy acts
    plain = tisim.systems.Cartpole(horizon=T, batch=3, **sim.initial_state)
    plain.set_actions(actions)
    replay = plain.rollout()
    for name in traj:
        np.testing.assert_allclose(replay[name], traj[name], rtol=0, atol=1e-12)


def test_gradients_against_central_differences():
    sim = swing(batch=2)
    sim.set_params(obs_scale=np.array([1.0, 2.0, 1.0, 1.0, 3.0]))
    loss = tisim.losses.TerminalTarget({"theta": 0.0, "x": 0.0}) + 0.01 * tisim.losses.Effort()
    report = gradcheck(sim, loss, extrapolate=True, max_entries=40)
    assert report.worst < 1e-6, str(report)
    assert np.abs(sim.gradient(loss).params["w_policy"]).max() > 1e-3


def test_mechanisms_agree():
    sim = swing(batch=2)
    loss = tisim.losses.TerminalTarget({"theta": 0.0}) + 0.1 * tisim.losses.TerminalTarget({"x": 0.0})
    reference = sim.gradient(loss)
    other = sim.gradient(loss, method="checkpointed", segments=3)
    for name in ("w_policy", "m_pole", "obs_mean"):
        np.testing.assert_allclose(other.params[name], reference.params[name], rtol=1e-10,
                                   atol=1e-12 * np.abs(reference.params[name]).max())
    np.testing.assert_allclose(other.actions, reference.actions, rtol=1e-10, atol=1e-14)
    # Taichi 1.7's forward mode cannot compile arithmetic on vector locals, which the network is made of
    with pytest.raises(NotImplementedError, match="unrolled.*checkpointed"):
        sim.gradient(loss, method="forward_mode")


def test_a_linear_feedback_against_its_closed_form():
    # x[t+1] = a x + theta + u,  u = k (x - m) / s + c  (hidden=(): the network is one linear layer):
    # x[t+1] = r x + d with r = a + k / s, d = theta + c - k m / s, so
    # x_T = r^T x0 + d sum_{j<T} r^j and L = x_T^2
    a, theta, x0, k, c, m, s, horizon = 0.9, 0.3, 1.5, -0.4, 0.2, 0.25, 2.0, 7
    Loop = closed_loop(tisim.systems.ScalarLinear, hidden=())
    sim = Loop(horizon=horizon, a=a, theta=theta, x=x0, w_policy=np.array([k, c]), obs_mean=m, obs_scale=s)
    g = sim.gradient(tisim.losses.TerminalTarget({"x": 0.0}))
    r, d = a + k / s, theta + c - k * m / s
    j = np.arange(horizon)
    x_T = r ** horizon * x0 + d * np.sum(r ** j)
    dx_dr = horizon * r ** (horizon - 1) * x0 + d * np.sum(j[1:] * r ** (j[1:] - 1))
    dx_dd = np.sum(r ** j)
    assert sim.rollout()["x"][0, -1] == pytest.approx(x_T, rel=1e-13)
    expected_k = 2 * x_T * (dx_dr / s - dx_dd * m / s)
    expected_c = 2 * x_T * dx_dd
    np.testing.assert_allclose(g.params["w_policy"][0], [expected_k, expected_c], rtol=1e-12)
    np.testing.assert_allclose(g.params["obs_mean"][0], [-2 * x_T * dx_dd * k / s], rtol=1e-12)
    np.testing.assert_allclose(g.params["a"][0], 2 * x_T * dx_dr, rtol=1e-12)


def test_vector_actions_and_shared_models():
    # a vector action (Linear's u in R^m): one network output per entry, and equal policies share one model
    Loop = closed_loop(tisim.systems.Linear, hidden=(3,), limit=2.0)
    assert closed_loop(tisim.systems.Linear, hidden=(3,), limit=2.0) is Loop
    rng = np.random.default_rng(0)
    sim = Loop(horizon=5, batch=2, n=3, m=2, A=0.5 * np.eye(3), B=rng.normal(size=(3, 2)), x=rng.normal(size=(2, 3)))
    assert sim.params["w_policy"].shape == (2, 3 * 3 + 3 + 3 * 2 + 2)
    assert Loop(horizon=9, batch=1, n=3, m=2).model is sim.model
    traj = sim.rollout()
    p = sim.params
    actions = np.stack([sim.model.policy.act_numpy(p["w_policy"][b], 0.0, 1.0, {"x": traj["x"][b, :-1]})
                        for b in range(2)])
    plain = tisim.systems.Linear(horizon=5, batch=2, n=3, m=2, A=0.5 * np.eye(3), B=p["B"], x=traj["x"][:, 0])
    plain.set_actions(actions)
    np.testing.assert_allclose(plain.rollout()["x"], traj["x"], rtol=0, atol=1e-12)


def test_an_articulated_body_closes_the_loop():
    # the 3D double pendulum (two motors, joint angles observed through sines and cosines) with a network acting on
    # both motors: its rollout is the open-loop one under the actions the numpy law gives
    from tisim.systems.articulation import Articulation

    Arm = closed_loop(Articulation, hidden=(4,), limit=1.0, angles=("q",))
    sim = Arm(horizon=20, batch=2, seed=0, q=np.array([[0.3, -0.2], [0.1, 0.5]]))
    assert sim.model.policy.n_observations == 6 and sim.params["w_policy"].shape == (2, 6 * 4 + 4 + 4 * 2 + 2)
    traj = sim.rollout()
    p = sim.params
    actions = np.stack([sim.model.policy.act_numpy(p["w_policy"][b], p["obs_mean"][b], p["obs_scale"][b],
                                                   {k: v[b, :-1] for k, v in traj.items()}) for b in range(2)])
    assert np.ptp(actions) > 0.1
    plain = Articulation(horizon=20, batch=2, q=traj["q"][:, 0], qd=traj["qd"][:, 0])
    plain.set_actions(actions)
    replay = plain.rollout()
    for name in traj:
        np.testing.assert_allclose(replay[name], traj[name], rtol=0, atol=1e-12)
    loss = tisim.losses.TerminalTarget({"q": np.zeros(2)})
    assert np.abs(sim.gradient(loss).params["w_policy"]).max() > 1e-3
    # 16 entries evenly spread over the parameters: 7 of the weights, the normalization, the bodies' and joints'
    report = gradcheck(sim, loss, groups=("params",), max_entries=16, extrapolate=True)
    assert report.worst < 1e-6, str(report)


def test_normalization_standardizes_observations():
    sim = swing(batch=4)
    traj = sim.rollout()
    values = normalization(sim, traj)
    phi = sim.model.policy.features_numpy(traj).reshape(-1, 5)
    z = (phi - values["obs_mean"]) / values["obs_scale"]
    np.testing.assert_allclose(z.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(z.std(axis=0), 1.0, rtol=1e-12)
    sim.set_params(**values)


def test_a_clocked_policy_in_a_plain_step():
    """clock=(f, H) on a plain step: the state "clock" counts the time, the network reads sin and cos of 2 pi f t,
    and its gradient (through Taichi's reverse mode) agrees with central differences."""
    Clocked = closed_loop(tisim.systems.Cartpole, hidden=(3,), limit=5.0, angles=("theta",), clock=(1.5, 1))
    sim = Clocked(horizon=T, batch=2, seed=2, theta=np.array([3.0, 3.3]), x=np.array([0.1, -0.2]))
    traj = sim.rollout()
    np.testing.assert_allclose(traj["clock"], np.broadcast_to(np.arange(T + 1) * sim.dt, (2, T + 1)), atol=1e-15)
    phi = sim.model.policy.features_numpy({k: v[0] for k, v in traj.items()})
    np.testing.assert_allclose(phi[:, -2:], np.stack([np.sin(3 * np.pi * traj["clock"][0]),
                                                      np.cos(3 * np.pi * traj["clock"][0])], axis=1), atol=1e-15)
    loss = tisim.losses.TerminalTarget({"theta": 0.0, "x": 0.0})
    report = gradcheck(sim, loss, extrapolate=True, max_entries=30)
    assert report.worst < 1e-6, str(report)


def test_refusals():
    with pytest.raises(ValueError, match="angles.*'phi'"):
        closed_loop(tisim.systems.Cartpole, angles=("phi",))
    with pytest.raises(ValueError, match="limit must be a finite number > 0"):
        closed_loop(tisim.systems.Cartpole, limit=-1.0)
    with pytest.raises(ValueError, match="hidden must be an integer >= 1"):
        closed_loop(tisim.systems.Cartpole, hidden=(0,))
    with pytest.raises(TypeError, match="system class"):
        closed_loop("Cartpole")
    Swing = closed_loop(tisim.systems.Cartpole)
    with pytest.raises(TypeError, match="already closed-loop"):
        closed_loop(Swing)
    with pytest.raises(ValueError, match="n_policy is not a keyword"):
        Swing(horizon=3, n_policy=4)
    with pytest.raises(ValueError, match="seed must be an integer >= 0"):
        Swing(horizon=3, seed=-1)
    sim = Swing(horizon=3)
    with pytest.raises(ValueError, match="obs_scale"):
        sim.set_params(obs_scale=0.0)
    with pytest.raises(ValueError, match="w_policy"):
        sim.set_params(w_policy=np.zeros(3))
    with pytest.raises(ValueError, match="states must be .*'theta_dot'"):
        normalization(sim, {"x": np.zeros(3), "theta": np.zeros(3)})
    with pytest.raises(TypeError, match="continuous_adjoint.*ClosedLoopCartpole does not"):
        sim.gradient(tisim.losses.TerminalTarget({"x": 0.0}), method="continuous_adjoint")
