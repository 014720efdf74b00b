"""ScalarLinear and Linear against their closed forms: rollouts, float64 central differences and Jacobians."""
import numpy as np
import pytest

import tisim

T = 5
A_SCALAR = np.array([0.9, -0.5, 1.1])  # one a per batch element, contracting, oscillating and amplifying
N, M = 3, 2


def scalar_sim(rng):
    sim = tisim.systems.ScalarLinear(horizon=T, batch=len(A_SCALAR), a=A_SCALAR, theta=np.array([1.0, -0.3, 0.7]),
                                     x=np.array([0.0, 2.0, -1.5]))
    sim.set_actions(rng.normal(size=(len(A_SCALAR), T)))
    return sim


def linear_sim(rng, batch=3):
    sim = tisim.systems.Linear(horizon=T, batch=batch, n=N, m=M, A=0.4 * rng.normal(size=(batch, N, N)),
                               B=rng.normal(size=(batch, N, M)), theta=rng.normal(size=(batch, N)),
                               x=rng.normal(size=(batch, N)))
    sim.set_actions(rng.normal(size=(batch, T, M)))
    return sim


def linear_reference(A, B, theta, x0, u):
    """x[t+1] = A x[t] + B u[t] + theta for one batch element, as a numpy loop; shape (T+1, n)."""
    x = [x0]
    for t in range(len(u)):
        x.append(A @ x[t] + B @ u[t] + theta)
    return np.array(x)


def test_scalar_rollout_closed_form():
    """ScalarLinear follows x_t = a^t x0 + theta (1 - a^t)/(1 - a) + sum_s a^(t-1-s) u_s."""
    sim = scalar_sim(np.random.default_rng(0))
    a, theta, x0, u = sim.params["a"], sim.params["theta"], sim.initial_state["x"], sim.actions
    expected = np.empty((sim.B, T + 1))
    for t in range(T + 1):
        driven = sum(a ** (t - 1 - s) * u[:, s] for s in range(t))
        expected[:, t] = a ** t * x0 + theta * (1 - a ** t) / (1 - a) + driven
    np.testing.assert_allclose(sim.rollout()["x"], expected, rtol=1e-12, atol=1e-12)


def test_linear_rollout_numpy_loop():
    """Linear (n = 3, m = 2, different A, B, theta, x0, u per batch element) matches a numpy loop."""
    sim = linear_sim(np.random.default_rng(1))
    p, x0, u = sim.params, sim.initial_state["x"], sim.actions
    expected = [linear_reference(p["A"][b], p["B"][b], p["theta"][b], x0[b], u[b]) for b in range(sim.B)]
    np.testing.assert_allclose(sim.rollout()["x"], np.array(expected), rtol=1e-12, atol=1e-12)


def terminal_and_effort(sim):
    target = np.linspace(-1.0, 1.0, N) if isinstance(sim, tisim.systems.Linear) else 2.0
    return tisim.losses.TerminalTarget({"x": target}) + 0.1 * tisim.losses.Effort()


def tracking(sim):
    data = np.sin(np.arange(T + 1))[:, None] * np.ones(N) if isinstance(sim, tisim.systems.Linear) \
        else np.cos(np.arange(T + 1.0))
    data[2] = np.nan  # one unobserved step
    return tisim.losses.Tracking({"x": data})


@pytest.mark.parametrize("make_sim", [scalar_sim, linear_sim], ids=["ScalarLinear", "Linear"])
@pytest.mark.parametrize("make_loss", [terminal_and_effort, tracking], ids=["TerminalTarget+Effort", "Tracking"])
def test_gradcheck(make_sim, make_loss):
    """The backward pass matches float64 central differences in params, initial_state and actions."""
    sim = make_sim(np.random.default_rng(2))
    report = tisim.gradcheck(sim, make_loss(sim))
    assert set(report) == {"params", "initial_state", "actions"}
    for check in report.values():
        assert check.worst <= 1e-6, str(report)


def test_scalar_jacobians():
    """ScalarLinear: dx_T/dx0 = a^T, dx_T/du_s = a^(T-1-s), dx_T/dtheta = sum a^k, dx_T/da = sum a^(T-1-s) x_s."""
    sim = scalar_sim(np.random.default_rng(3))
    a, x = sim.params["a"], sim.rollout()["x"]
    powers = a[:, None] ** (T - 1 - np.arange(T))  # a^(T-1-s), shape (B, T)
    params = sim.jacobian(wrt="params")
    assert params.cols == ["a", "theta"] and params.rows == ["x"]
    np.testing.assert_allclose(params.matrix[:, 0, 0], np.sum(powers * x[:, :T], axis=1), rtol=1e-10)
    np.testing.assert_allclose(params.matrix[:, 0, 1], (1 - a ** T) / (1 - a), rtol=1e-10)
    np.testing.assert_allclose(sim.jacobian(wrt="initial_state").matrix[:, 0, 0], a ** T, rtol=1e-10)
    np.testing.assert_allclose(sim.jacobian(wrt="actions").matrix[:, 0, :], powers, rtol=1e-10)


def test_linear_jacobians():
    """Linear: dx_T/dx0 = A^T, dx_T/du_s = A^(T-1-s) B, dx_T/dtheta = sum_k A^k, and dx_T/dA, dx_T/dB."""
    sim = linear_sim(np.random.default_rng(4))
    p, x, u = sim.params, sim.rollout()["x"], sim.actions
    J_params = sim.jacobian(wrt="params").matrix
    J_x0 = sim.jacobian(wrt="initial_state").matrix
    J_u = sim.jacobian(wrt="actions").matrix.reshape(sim.B, N, T, M)
    for b in range(sim.B):
        A, B = p["A"][b], p["B"][b]
        powers = np.array([np.linalg.matrix_power(A, T - 1 - s) for s in range(T)])  # A^(T-1-s), (T, n, n)
        dA = np.einsum("sri,sj->rij", powers, x[b, :T])  # d x_T[r] / d A[i, j]
        dB = np.einsum("sri,sk->rik", powers, u[b])  # d x_T[r] / d B[i, k]
        expected = np.concatenate([dA.reshape(N, -1), dB.reshape(N, -1), powers.sum(axis=0)], axis=1)
        np.testing.assert_allclose(J_params[b], expected, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(J_x0[b], np.linalg.matrix_power(A, T), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(J_u[b].transpose(1, 0, 2), powers @ B, rtol=1e-10, atol=1e-10)
