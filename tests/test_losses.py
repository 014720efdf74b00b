"""Losses: values against numpy formulas, gradients against central differences, bad input."""
import numpy as np
import pytest
import taichi as ti

import tisim
from tisim.losses import Custom, Effort, TerminalSum, TerminalTarget, Tracking
from tisim.systems import Linear, ScalarLinear


def random_linear(batch=2, horizon=5, seed=0):
    rng = np.random.default_rng(seed)
    sim = Linear(horizon=horizon, batch=batch, n=2, m=2, A=rng.normal(size=(2, 2)) * 0.6, B=rng.normal(size=(2, 2)),
                 theta=rng.normal(size=2), x=rng.normal(size=2))
    sim.set_actions(rng.normal(size=(batch, horizon, 2)))
    return sim


def test_values_match_numpy_formulas():
    """TerminalTarget, Tracking (NaN = unobserved), Effort and a weighted sum evaluate to their formulas."""
    sim = random_linear()
    x, u = sim.rollout()["x"], sim.actions
    data = np.random.default_rng(1).normal(size=(6, 2))
    data[::2, 1] = np.nan
    terminal = TerminalTarget({"x": [1.0, -1.0]}, weights=3.0)
    tracking = Tracking({"x": data}, weights={"x": 0.5})
    seen = np.isfinite(data)
    expected = {
        terminal: 3.0 * ((x[:, -1] - [1.0, -1.0]) ** 2).sum(axis=1),
        tracking: 0.5 * np.where(seen, (x - np.nan_to_num(data)) ** 2, 0).sum(axis=(1, 2)),
        Effort(): (u ** 2).sum(axis=(1, 2)),
        TerminalSum({"x": [0.5, -2.0]}): x[:, -1] @ np.array([0.5, -2.0]),
    }
    for loss, value in expected.items():
        np.testing.assert_allclose(sim.gradient(loss).per_batch, value, rtol=1e-13)
    combined = 2.0 * terminal + tracking + 0.1 * Effort()
    np.testing.assert_allclose(sim.gradient(combined).per_batch,
                               2 * expected[terminal] + expected[tracking] + 0.1 * (u ** 2).sum(axis=(1, 2)),
                               rtol=1e-13)


def test_per_batch_targets():
    """A target or data set per batch element applies to that element only."""
    sim = ScalarLinear(horizon=3, batch=2)
    g = sim.gradient(TerminalTarget({"x": [2.0, 3.0]}))
    np.testing.assert_allclose(g.per_batch, [(2.71 - 2) ** 2, (2.71 - 3) ** 2], rtol=1e-13)
    data = np.full((2, 4), np.nan)
    data[1, 3] = 3.0
    np.testing.assert_allclose(sim.gradient(Tracking({"x": data})).per_batch, [0.0, (2.71 - 3) ** 2], rtol=1e-13)


@ti.func
def cubic_final(x: ti.template(), theta: ti.template(), u: ti.template(), b, T):
    return x[b, T, 0] ** 3 + theta[b, 0] * x[b, T - 1, 1]


@pytest.mark.parametrize("make_loss", [
    lambda: TerminalTarget({"x": [1.0, -1.0]}) + 0.1 * Effort(),
    lambda: Tracking({"x": np.random.default_rng(2).normal(size=(6, 2))}, weights=0.3),
    lambda: Custom(cubic_final) + Effort(),
    lambda: TerminalSum({"x": [0.5, -2.0]}) + TerminalTarget({"x": [0.0, 1.0]}),
    lambda: TerminalSum({"x": [0.25, -1.0]}, steps=range(1, 6)) + 0.1 * Effort(),
], ids=["terminal+effort", "tracking", "custom+effort", "sum+terminal", "sum-over-steps+effort"])
def test_loss_gradients_match_central_differences(make_loss):
    """Every loss kind differentiates correctly in all three groups (float64 central differences)."""
    report = tisim.gradcheck(random_linear(), make_loss())
    assert report.worst <= 1e-6, str(report)


@ti.func
def squared_first(x: ti.template(), theta: ti.template(), u: ti.template(), b, t):
    return x[b, t, 0] ** 2


def test_custom_loss_over_steps():
    """Custom(f, steps) sums f over the given steps, and differentiates correctly."""
    sim = random_linear()
    x = sim.rollout()["x"]
    loss = Custom(squared_first, steps=range(2, 6))
    np.testing.assert_allclose(sim.gradient(loss).per_batch, (x[:, 2:6, 0] ** 2).sum(axis=1), rtol=1e-13)
    assert tisim.gradcheck(sim, loss).worst <= 1e-6
    with pytest.raises(ValueError, match=r"steps must lie in \[0, 5\]"):
        sim.gradient(Custom(squared_first, steps=[0, 6]))
    with pytest.raises(ValueError, match="non-empty 1-D sequence"):
        Custom(squared_first, steps=[])


def test_linear_loss_over_steps():
    """TerminalSum(w, steps) sums w . x[t] over the given steps (a time average when w is scaled by 1 / len(steps));
    zero weights add nothing; steps outside [0, T] or empty are refused."""
    sim = random_linear()
    x = sim.rollout()["x"]
    w = np.array([0.5, 0.0])
    loss = TerminalSum({"x": w / 3}, steps=[1, 3, 5])
    np.testing.assert_allclose(sim.gradient(loss).per_batch, x[:, [1, 3, 5]].mean(axis=1) @ w, rtol=1e-13)
    assert len(loss.linear_entries(sim)) == 3  # the zero weight of x[1] makes no entries
    with pytest.raises(ValueError, match=r"TerminalSum: steps must lie in \[0, 5\]"):
        sim.gradient(TerminalSum({"x": w}, steps=range(3, 7)))
    with pytest.raises(ValueError, match="TerminalSum: steps must be a non-empty 1-D sequence"):
        TerminalSum({"x": w}, steps=[])
    with pytest.raises(ValueError, match="TerminalSum: steps must be a non-empty 1-D sequence"):
        TerminalSum({"x": w}, steps=[1.5])


def test_custom_loss_value():
    """A custom Taichi-function loss evaluates what it says."""
    sim = random_linear()
    x, A = sim.rollout()["x"], sim.params["A"]
    np.testing.assert_allclose(sim.gradient(Custom(cubic_final)).per_batch,
                               x[:, -1, 0] ** 3 + A[:, 0, 0] * x[:, -2, 1], rtol=1e-13)


def test_bad_losses_raise_clear_errors():
    """Wrong names, shapes and weights in a loss are named before any kernel runs."""
    sim = ScalarLinear(horizon=3, batch=2)
    cases = [
        (lambda: sim.gradient(TerminalTarget({"y": 1.0})), "unknown state name 'y'"),
        (lambda: sim.gradient(TerminalTarget({"x": [1.0, 2.0, 3.0]})), "x must have shape"),
        (lambda: sim.gradient(Tracking({"x": np.zeros(3)})), r"data\['x'\] must have shape \(4,\) or \(2, 4\)"),
        (lambda: sim.gradient(Tracking({"x": np.full(4, np.nan)})), "no observed"),
        (lambda: TerminalTarget({"x": 1.0}, weights=-1.0), "weights must be finite and >= 0"),
        (lambda: TerminalTarget({"x": 1.0}, weights={"v": 1.0}), "weights name states"),
        (lambda: TerminalTarget({}), "non-empty dict"),
        (lambda: Custom(3.0), "must be a @ti.func"),
        (lambda: sim.gradient(TerminalSum({"x": [1.0, 2.0]})), r"weights\['x'\] must be a scalar or shape \(\)"),
        (lambda: TerminalSum({"x": np.nan}), "must be finite"),
        (lambda: TerminalSum({"x": {"a": 1}}), r"weights\['x'\] must be numbers"),
        (lambda: Tracking({"x": "ab"}), r"data\['x'\] must be numbers"),
        (lambda: TerminalTarget({"x": 1.0}, weights=None), "weights must be numbers >= 0"),
        (lambda: TerminalTarget({"x": 1.0}, weights={"x": "2"}), "weights must be numbers >= 0"),
        (lambda: sim.gradient("x"), "'str' object has no attribute 'bind'|not a tisim loss"),
    ]
    for call, message in cases:
        with pytest.raises((ValueError, TypeError, AttributeError), match=message):
            call()
    with pytest.raises(TypeError):
        TerminalTarget({"x": 1.0}) * "2"
