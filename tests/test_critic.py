"""SHAC's critic (tisim.optim.critic) and the bootstrapped windows of train_policy: the value's gradient and the
TD(lambda) targets against direct computations, the regression, and the policy gradient of a bootstrapped window
against float64 central differences."""
import copy

import numpy as np
import pytest
import taichi as ti

import tisim
from tisim.learn.policy import Policy
from tisim.optim.critic import Critic
from tisim.optim.policy_training import _bootstrapped
from tisim.policy import closed_loop

from conftest import load_demo

demo = load_demo("policy_swingup")


def attached(hidden=(8, 8), **options):
    critic = Critic(lambda traj: -demo.rewards(traj), hidden=hidden, **options)
    critic.attach(demo.Swing(horizon=1).model.policy)
    critic.weights = critic.network.initial_weights(3) + 0.1  # nonzero biases too
    critic.target = critic.weights * 0.5
    return critic


def states(batch, seed=0):
    rng = np.random.default_rng(seed)
    return {"x": rng.normal(size=batch), "x_dot": rng.normal(size=batch), "theta": rng.uniform(-4, 4, batch),
            "theta_dot": rng.normal(size=batch)}


def test_the_value_gradient_is_the_values_derivative():
    critic = attached()
    mean, scale = np.array([0.1, -0.2, 0.0, 0.3, 0.0]), np.array([1.0, 2.0, 1.0, 0.5, 5.0])
    x = states(4)
    values, slopes = critic.value_gradient(x, mean, scale)
    np.testing.assert_allclose(values, critic.value(critic.observations(x, mean, scale)), rtol=1e-14)
    h = 1e-6
    for name in x:
        up, down = dict(x), dict(x)
        up[name], down[name] = x[name] + h, x[name] - h
        central = (critic.value(critic.observations(up, mean, scale))
                   - critic.value(critic.observations(down, mean, scale))) / (2 * h)
        np.testing.assert_allclose(slopes[name], central, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("lam", [0.0, 1.0, 0.7])
def test_td_lambda_targets(lam):
    # lambda = 0: one-step targets; lambda = 1: the discounted costs of the window plus the discounted last value;
    # in between, the (1 - lambda) lambda^(n-1) mixture of the n-step returns, computed here from its definition
    gamma, h = 0.9, 5
    critic = attached(gamma=gamma, lam=lam)
    rng = np.random.default_rng(1)
    traj = {k: rng.normal(size=(2, h + 1)) for k in ("x", "x_dot", "theta", "theta_dot")}
    targets, inputs = critic.targets(traj, 0.0, 1.0)
    costs = -demo.rewards(traj)
    later = critic.value(critic.observations(traj, 0.0, 1.0)[:, 1:], target=True)
    np.testing.assert_allclose(inputs, critic.observations(traj, 0.0, 1.0)[:, :-1], rtol=0)
    for t in range(h):
        def n_step(n):  # sum of n discounted costs, then the target value where they end
            return sum(gamma ** k * costs[:, t + k] for k in range(n)) + gamma ** n * later[:, t + n - 1]
        steps = h - t
        expected = sum((1 - lam) * lam ** (n - 1) * n_step(n) for n in range(1, steps)) + lam ** (steps - 1) * \
            n_step(steps)
        np.testing.assert_allclose(targets[:, t], expected, rtol=1e-12)


def test_the_regression_fits_a_smooth_value():
    critic = attached(hidden=(16,), epochs=200, lr=1e-2, tau=0.0)
    rng = np.random.default_rng(2)
    x = {k: rng.normal(size=(64, 2)) for k in ("x", "x_dot", "theta", "theta_dot")}
    # zero costs and lambda 0 make the target gamma V'(o[1]): give V' a fixed function to copy through a one-step window
    critic.costs = lambda traj: np.zeros((64, 1))
    critic.lam = 0.0
    truth = critic.weights.copy()
    critic.target = truth
    critic.weights = critic.network.initial_weights(7)
    inputs = critic.observations(x, 0.0, 1.0)
    before = np.mean((critic.value(inputs[:, 0]) - critic.gamma * critic.value(inputs[:, 1], target=True)) ** 2)
    error = critic.fit(x, 0.0, 1.0)
    assert error < before / 10, (error, before)


def test_a_bootstrapped_windows_gradient_against_central_differences():
    # d/dw [window loss + gamma^T V(x[T]) / T], per batch element, with the critic as it was before its fit
    gamma, T = 0.95, 6
    Swing = closed_loop(tisim.systems.Cartpole, hidden=(3,), limit=5.0, angles=("theta",))
    start = states(2, 4)
    sim = Swing(horizon=T, batch=2, seed=1, **{**start, "theta": np.pi + 0.3 * start["theta"]})
    theta = sim.index("theta")

    @ti.func
    def cost(s: ti.template(), p: ti.template(), u: ti.template(), b, t):
        return ti.pow(gamma, t - 1) * (1.0 - ti.cos(s[b, t, theta])) / T

    loss = tisim.losses.Custom(cost, steps=range(1, T + 1))
    critic = Critic(lambda traj: np.zeros((2, T)), hidden=(4,), gamma=gamma)
    critic.attach(sim.model.policy)
    critic.weights = critic.network.initial_weights(5) + 0.2
    before = copy.deepcopy(critic)
    _, g, _ = _bootstrapped(sim, loss, critic)
    assert not np.array_equal(critic.weights, before.weights)  # the critic was fitted after the gradient
    weights = sim.params["w_policy"][0].copy()

    def objective(w):
        sim.set_params(w_policy=w)
        window = sim.evaluate(loss)
        last = {k: v[:, -1] for k, v in sim.rollout().items()}
        value = before.value(before.observations(last, 0.0, 1.0))
        return window + gamma ** T / T * value

    step = 1e-6
    for k in range(len(weights)):
        up, down = weights.copy(), weights.copy()
        up[k] += step
        down[k] -= step
        central = (objective(up) - objective(down)) / (2 * step)
        np.testing.assert_allclose(g.params["w_policy"][:, k], central, rtol=1e-6, atol=1e-10)


def test_refusals():
    with pytest.raises(TypeError, match="costs must be a function"):
        Critic(None)
    with pytest.raises(ValueError, match="gamma must be a number in \\[0, 1\\]"):
        Critic(np.zeros, gamma=1.5)
    with pytest.raises(ValueError, match="epochs must be an integer >= 1"):
        Critic(np.zeros, epochs=0)
    sim = demo.Swing(horizon=4)
    with pytest.raises(TypeError, match="critic must be a tisim.optim.critic.Critic"):
        tisim.tasks.train_policy(sim, tisim.losses.TerminalTarget({"x": 0.0}), demo.reset, episode_steps=8,
                                 critic=object())


def test_the_value_gradient_through_centred_and_clock_features():
    # dV/dx through a body's positions seen from their centroid and a clock's harmonics, against central differences
    shapes = [("pos", (3, 2)), ("vel", (3, 2)), ("clock", ())]
    policy = Policy(shapes, [], (4,), 2, None, centred=("pos",), clock=(1.5, 2))
    critic = Critic(lambda traj: None, hidden=(5,))
    critic.attach(policy)
    rng = np.random.default_rng(7)
    critic.weights = critic.network.initial_weights(3, scale=2.0)
    states = {"pos": rng.normal(size=(4, 3, 2)), "vel": rng.normal(size=(4, 3, 2)), "clock": rng.uniform(0, 2, 4)}
    mean, scale = rng.normal(size=policy.n_observations) * 0.1, rng.uniform(0.5, 2.0, policy.n_observations)
    value, grad = critic.value_gradient(states, mean, scale)
    step = 1e-6
    for name, array in states.items():
        for index in np.ndindex(array.shape[1:]):
            up, down = ({**states, name: array.copy()} for _ in range(2))
            up[name][(slice(None),) + index] += step
            down[name][(slice(None),) + index] -= step
            central = (critic.value(critic.observations(up, mean, scale))
                       - critic.value(critic.observations(down, mean, scale))) / (2 * step)
            np.testing.assert_allclose(grad[name][(slice(None),) + index], central, rtol=1e-6, atol=1e-9,
                                       err_msg=f"{name}{index}")
    np.testing.assert_allclose(value, critic.value(critic.observations(states, mean, scale)), rtol=1e-14)
