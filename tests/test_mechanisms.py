"""Gradient mechanisms against each other and against central differences: forward mode and the continuous adjoint
(checkpointing has tests/test_checkpointing.py)."""
import numpy as np
import pytest

import tisim
from tisim.core.protocol import Protocol
from tisim.robots import grid
from tisim.systems import Cartpole, Linear, MassSpring, Pendulum, ScalarLinear

PENDULUM_LOSS = (tisim.losses.TerminalTarget({"theta": 0.5, "theta_dot": 0.0}, weights={"theta_dot": 0.1})
                 + 0.01 * tisim.losses.Effort())
CARTPOLE_LOSS = tisim.losses.TerminalTarget({"x": 0.2, "theta": 0.0, "theta_dot": 0.0}) + 1e-3 * tisim.losses.Effort()


def pendulum(horizon=150, dt=0.01, batch=2):
    # batch element 1 has a shorter rod and starts swinging
    sim = Pendulum(horizon=horizon, batch=batch, dt=dt, theta=[0.3, -0.8][:batch], theta_dot=[0.0, 1.0][:batch],
                   c=0.1, l=[1.0, 0.7][:batch])
    t = np.arange(horizon) * dt
    sim.set_actions(0.5 * np.sin(3 * t))
    return sim


def cartpole(horizon=100, dt=0.02, mu_cart=0.0):
    # track friction (mu_cart > 0) is stiff near rest: fine for comparing mechanisms, not for central differences
    sim = Cartpole(horizon=horizon, batch=2, dt=dt, theta=[3.0, 0.4], mu_cart=mu_cart)
    t = np.arange(horizon) * dt
    sim.set_actions(np.stack([2 * np.sin(2 * t), np.cos(5 * t)]))
    return sim


def flat(groups):
    return np.concatenate([v.reshape(v.shape[0], -1) for v in groups.values()], axis=1)


# ---- forward mode ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, loss", [(pendulum, PENDULUM_LOSS), (cartpole, CARTPOLE_LOSS)])
def test_forward_gradient_equals_unrolled_and_central_differences(make, loss):
    """method="forward_mode" gives the unrolled params and initial-state gradients to 1e-10, and central differences
    to 1e-5 (measured worst 1.2e-6: the cart-pole's mu_cart at 0, on the friction clip's kink); it has no action
    gradients and says so."""
    sim = make()
    unrolled, forward = sim.gradient(loss), sim.gradient(loss, method="forward_mode")
    assert forward.value == pytest.approx(unrolled.value, rel=1e-12)
    for group in ("params", "initial_state"):
        a, b = flat(getattr(unrolled, group)), flat(getattr(forward, group))
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12 * np.abs(a).max())
    report = tisim.gradcheck(sim, loss, groups=("params", "initial_state"), method="forward_mode")
    assert report.worst < 1e-5, str(report)
    with pytest.raises(ValueError, match="method='forward_mode'.*params and initial_state"):
        _ = forward.actions


def test_jvp_equals_the_gradient_along_a_direction():
    """tisim.jvp along a random direction in all three groups equals <gradient, direction> (1e-10), and its final
    tangent equals the Jacobians times the direction."""
    sim = cartpole(mu_cart=0.05)
    rng = np.random.default_rng(3)
    dparams = {name: rng.normal(size=2) for name in ("m_cart", "m_pole", "l")}
    dstate = {name: rng.normal(size=2) for name in ("x", "theta", "theta_dot")}
    dactions = rng.normal(size=(2, sim.T))
    result = tisim.jvp(sim, CARTPOLE_LOSS, params=dparams, initial_state=dstate, actions=dactions)
    g = sim.gradient(CARTPOLE_LOSS)
    expected = (sum(g.params[k] * v for k, v in dparams.items()) + sum(g.initial_state[k] * v for k, v in
                                                                         dstate.items())
                + (g.actions * dactions).sum(axis=1))
    np.testing.assert_allclose(result.derivative, expected, rtol=1e-10)
    np.testing.assert_allclose(result.value, g.per_batch, rtol=1e-12)
    packed = {"params": np.zeros((2, sim.param_layout.size)), "initial_state": np.zeros((2, 4))}
    for name, v in dparams.items():
        packed["params"][:, sim.param_layout.offsets[name]] = v
    for name, v in dstate.items():
        packed["initial_state"][:, sim.state_layout.offsets[name]] = v
    tangent = sum(np.einsum("bsn,bn->bs", sim.jacobian(wrt=w, mode="reverse").matrix, packed[w]) for w in packed)
    tangent += np.einsum("bsn,bn->bs", sim.jacobian(wrt="actions", mode="reverse").matrix, dactions)
    np.testing.assert_allclose(flat(result.final_state), tangent, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("wrt", ["params", "initial_state", "actions"])
def test_forward_jacobian_equals_reverse(wrt):
    """jacobian(mode="forward") equals mode="reverse" on Linear (3 states) and Cartpole, in every group."""
    linear = Linear(horizon=12, batch=2, n=3, m=2)
    rng = np.random.default_rng(0)
    linear.set_params(A=np.eye(3) + 0.1 * rng.normal(size=(2, 3, 3)), B=rng.normal(size=(2, 3, 2)))
    linear.set_initial_state(x=rng.normal(size=(2, 3)))
    linear.set_actions(rng.normal(size=(2, 12, 2)))
    for sim in (linear, cartpole(horizon=30)):
        forward, reverse = sim.jacobian(wrt=wrt, mode="forward"), sim.jacobian(wrt=wrt, mode="reverse")
        assert forward.cols == reverse.cols and forward.rows == reverse.rows
        scale = np.abs(reverse.matrix).max()
        np.testing.assert_allclose(forward.matrix, reverse.matrix, rtol=1e-10, atol=1e-13 * scale)


def test_auto_mode_picks_forward_when_inputs_are_fewer(monkeypatch):
    """mode="auto" runs forward mode exactly when the inputs are fewer than the final-state entries."""
    import tisim.autodiff.jacobians as jacobians
    calls = []
    original = jacobians.forward_jacobian
    monkeypatch.setattr(jacobians, "forward_jacobian", lambda sim, wrt: calls.append(wrt) or original(sim, wrt))
    ScalarLinear(horizon=5).jacobian(wrt="params")  # 2 inputs (a, b), 1 output: reverse
    assert calls == []
    sim = Linear(horizon=5, n=3, m=1)
    sim.jacobian(wrt="actions")  # 5 inputs, 3 outputs: reverse
    assert calls == []
    Linear(horizon=2, n=3, m=1).jacobian(wrt="actions")  # 2 inputs, 3 outputs: forward
    assert calls == ["actions"]


def test_forward_mode_keeps_nothing_per_step_on_a_long_horizon():
    """A 100,000-step pendulum: forward-mode gradients without allocating the trajectory (sim.x stays None), equal to
    the checkpointed reverse-mode gradients to 1e-9."""
    sim = pendulum(horizon=100_000, dt=1e-3, batch=1)
    loss = tisim.losses.TerminalTarget({"theta": 0.2})
    forward = sim.gradient(loss, method="forward_mode")
    assert sim.x is None
    assert Protocol.of(sim).held("forward mode").length <= 1024  # the one segment buffer, whatever T is
    checkpointed = sim.gradient(loss, method="checkpointed")
    np.testing.assert_allclose(flat(forward.params), flat(checkpointed.params), rtol=1e-9)
    np.testing.assert_allclose(flat(forward.initial_state), flat(checkpointed.initial_state), rtol=1e-9)


@pytest.mark.parametrize("make", [lambda: MassSpring(horizon=5, robot=grid(2, 2)),
                                  lambda: MassSpring(horizon=5, robot=grid(2, 2)),
                                  lambda: tisim.systems.Rigid2D(horizon=5),
                                  lambda: tisim.systems.ResidualPendulum(horizon=5, hidden=3),
                                  lambda: tisim.systems.StiffChain(horizon=5, n=2)],
                         ids=["MassSpring", "MassSpring-phased", "Rigid2D", "ResidualPendulum", "StiffChain"])
def test_forward_mode_unsupported_step_is_a_clear_error(make):
    """Steps that Taichi 1.7's forward mode cannot compile (ti.Vector arithmetic; StiffChain's detached Newton
    solve), and phased steps, raise a NotImplementedError naming the system, not Taichi's internal error;
    jacobian(mode="auto") falls back to reverse mode."""
    sim = make()
    loss = tisim.losses.TerminalTarget({sim.STATE[0].name: 0.0})
    with pytest.raises(NotImplementedError, match=f"{type(sim).__name__}.*use method='unrolled'"):
        sim.gradient(loss, method="forward_mode")
    sim = Cartpole(horizon=3)
    assert sim.jacobian(wrt="params", mode="auto").matrix.shape == (1, 4, 6)


@pytest.mark.parametrize("call, message", [
    (lambda sim: tisim.jvp(sim, params={"mass": 1.0}), "jvp: params: unknown parameter name 'mass'"),
    (lambda sim: tisim.jvp(sim, actions=np.ones(3)), r"actions must have shape \(20,\)"),
    (lambda sim: tisim.jvp(sim, initial_state={"theta": np.nan}), "NaN"),
    (lambda sim: sim.jacobian(mode="fwd"), "mode must be one of.*Perhaps you meant 'forward'"),
    (lambda sim: sim.gradient(PENDULUM_LOSS, method="forward_mode", segments=3), "segments applies to"),
])
def test_bad_forward_mode_input(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call(Pendulum(horizon=20))


def test_negative_directions_are_allowed_where_values_are_bounded():
    """A direction is not a value: a negative mass direction is fine (the mass itself must stay positive)."""
    sim = pendulum(horizon=20, batch=1)
    result = tisim.jvp(sim, PENDULUM_LOSS, params={"m": -1.0})
    assert result.derivative[0] == pytest.approx(-sim.gradient(PENDULUM_LOSS).params["m"][0], rel=1e-10)


# ---- continuous adjoint ---------------------------------------------------------------------------------------------
def adjoint_gaps(make, loss, dts, horizon_s):
    """Largest relative gap between the continuous adjoint and the unrolled gradient, params and initial state."""
    gaps = []
    for dt in dts:
        sim = make(horizon=int(round(horizon_s / dt)), dt=dt)
        exact, adjoint = sim.gradient(loss), sim.gradient(loss, method="continuous_adjoint")
        a = np.concatenate([flat(exact.params), flat(exact.initial_state)], axis=1)
        b = np.concatenate([flat(adjoint.params), flat(adjoint.initial_state)], axis=1)
        gaps.append(np.abs(a - b).max() / np.abs(a).max())
    return np.array(gaps)


@pytest.mark.parametrize("make, loss, dts, horizon_s", [
    (pendulum, PENDULUM_LOSS, [0.02, 0.01, 0.005], 1.5),
    (cartpole, CARTPOLE_LOSS, [0.02, 0.01, 0.005], 1.0),
])
def test_continuous_adjoint_converges_to_the_discrete_gradient(make, loss, dts, horizon_s):
    """The continuous adjoint differs from the exact discrete gradient by O(dt): halving dt halves the gap
    (each ratio in [1.6, 2.5]), and at the finest dt the gap is below 2%."""
    # measured (pendulum, largest relative gap over params and initial state): 4.0e-2, 2.1e-2, 1.04e-2
    gaps = adjoint_gaps(make, loss, dts, horizon_s)
    ratios = gaps[:-1] / gaps[1:]
    assert np.all((1.6 <= ratios) & (ratios <= 2.5)), (gaps, ratios)
    assert gaps[-1] < 2e-2, gaps


def test_continuous_adjoint_action_gradients_and_tracking_loss():
    """Action gradients and a tracking loss (jumps of lambda at every observed step) converge too: the gap at
    dt = 2.5 ms is below a quarter of that at 10 ms."""
    gaps = []
    for dt in (0.01, 0.0025):
        sim = pendulum(horizon=int(round(1.0 / dt)), dt=dt, batch=1)
        data = {"theta": np.where(np.arange(sim.T + 1) % 4 == 0, 0.1, np.nan)}
        loss = tisim.losses.Tracking(data) * dt + PENDULUM_LOSS
        exact, adjoint = sim.gradient(loss), sim.gradient(loss, method="continuous_adjoint")
        gaps.append(max(np.abs(exact.actions - adjoint.actions).max() / np.abs(exact.actions).max(),
                        np.abs(flat(exact.params) - flat(adjoint.params)).max() / np.abs(flat(exact.params)).max()))
    assert gaps[1] < gaps[0] / 4 and gaps[1] < 1e-2, gaps


@pytest.mark.parametrize("make, loss, horizon", [(pendulum, PENDULUM_LOSS, 500), (cartpole, CARTPOLE_LOSS, 500)])
def test_continuous_adjoint_against_central_differences(make, loss, horizon):
    """At dt = 2 ms the continuous adjoint matches central differences of the discrete loss within 1% of each group's
    largest entry. It approximates to O(dt), so small entries carry the same absolute error: entry by entry the
    relative gap reaches 8% (cart-pole, m_cart)."""
    sim = make(horizon=horizon, dt=0.002)
    report = tisim.gradcheck(sim, loss, groups=("params", "initial_state"), method="continuous_adjoint")
    for check in report.values():
        gap = np.abs(check.backward - check.central).max() / np.abs(check.central).max()
        assert gap < 1e-2, (check.group, gap)


def test_continuous_adjoint_needs_an_ode():
    with pytest.raises(TypeError, match="method='continuous_adjoint' needs a system defined by an ODE.*ScalarLinear"):
        ScalarLinear(horizon=5).gradient(tisim.losses.TerminalTarget({"x": 1.0}), method="continuous_adjoint")


@pytest.mark.parametrize("old, new", [("forward", "forward_mode"), ("adjoint", "continuous_adjoint")])
def test_renamed_methods_warn_and_give_the_same_gradient(old, new):
    """The methods' earlier names still work, warn that they are renamed, and give the new name's gradient."""
    sim = tisim.systems.Pendulum(horizon=40)
    loss = tisim.losses.TerminalTarget({"theta": 0.5})
    expected = sim.gradient(loss, method=new).params["l"]
    with pytest.warns(DeprecationWarning, match=f"method='{old}' is now method='{new}'"):
        got = sim.gradient(loss, method=old).params["l"]
    np.testing.assert_array_equal(got, expected)
