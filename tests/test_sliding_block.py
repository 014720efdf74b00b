"""SlidingBlock against Coulomb friction: stopping distance, static friction, creep of the regularized laws, gradients
and what bad input gets."""
import numpy as np
import pytest

import tisim
from tisim.systems import SlidingBlock

G = 9.8
LAWS = ("tanh", "huber", "stick_slip", "qp")
LOSS = tisim.losses.TerminalTarget({"x": 1.0, "v": 0.5})


def gradcheck_all_groups(sim, loss):
    """tisim.gradcheck in params and initial_state at the default step, and in actions at step 1e-4."""
    # Params and initial state at the default step (1e-5). One action moves the final state by only ~dt per unit, so
    # round-off in the loss would reach ~1e-6 of its gradient there; actions take step 1e-4 (truncation < 1e-7).
    report = tisim.gradcheck(sim, loss, groups=("params", "initial_state"), max_entries=20)
    report.update(tisim.gradcheck(sim, loss, groups=("actions",), step=1e-4, max_entries=20))
    return report


@pytest.mark.parametrize("friction", LAWS)
def test_stopping_distance(friction):
    """Each friction law stops a block sliding at v0 after v0^2 / (2 mu g) within 1%."""
    # v0 = 2 m/s, mu = 0.3, no push, dt = 1 ms: the block stops after v0^2 / (2 mu g) = 0.680 m (within 1%), in about v0
    # / (mu g) = 0.68 s, and does not move back.
    v0, mu = 2.0, 0.3
    traj = SlidingBlock(horizon=1500, friction=friction, mu=mu, v=v0).rollout()
    x, v = traj["x"][0], traj["v"][0]
    assert x[-1] == pytest.approx(v0**2 / (2 * mu * G), rel=1e-2)
    assert np.all(np.diff(x) >= 0)
    stop = int(round(1.1 * v0 / (mu * G) / 1e-3))
    assert np.abs(v[stop:]).max() < 1e-3 and abs(x[-1] - x[stop]) < 1e-4
    if friction in ("stick_slip", "qp"):
        assert np.all(v[stop:] == 0.0)  # static friction holds the block exactly


def test_stick_slip_static_push_leaves_block_at_rest():
    """stick_slip: a push below mu_s m g leaves the block exactly at rest; above, it accelerates exactly."""
    # stick_slip, block at rest: a push of 4 N (> mu m g = 2.94 N, < mu_s m g = 4.9 N) leaves it exactly at rest; a push
    # of 6 N (> mu_s m g) accelerates it at (F - mu m g) / m from the first step.
    steps, dt, force = 1000, 1e-3, np.array([4.0, 6.0])
    sim = SlidingBlock(horizon=steps, batch=2, friction="stick_slip", mu=0.3, mu_s=0.5)
    sim.set_actions(np.repeat(force[:, None], steps, axis=1))
    traj = sim.rollout()
    np.testing.assert_allclose(traj["x"][0], 0.0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(traj["v"][0], 0.0, rtol=0, atol=1e-15)
    acceleration = (6.0 - 0.3 * G) / 1.0
    np.testing.assert_allclose(traj["v"][1], acceleration * dt * np.arange(steps + 1), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(traj["x"][1, -1], acceleration * dt**2 * steps * (steps + 1) / 2, rtol=1e-12)


def test_regularized_laws_creep_under_a_static_push():
    """Under a sub-threshold push the regularized laws creep at the velocity where the law balances it."""
    # A 2 N push below mu m g = 2.94 N: stick_slip stays at rest, but the regularized laws creep at the velocity where
    # the law balances the push: eps atanh(F / (mu m g)) (tanh) and eps F / (mu m g) (huber), ~ eps, to 1e-9.
    steps, force, mu, eps = 2000, 2.0, 0.3, 0.01
    creep = {"tanh": eps * np.arctanh(force / (mu * G)), "huber": eps * force / (mu * G), "stick_slip": 0.0,
             "qp": 0.0}
    for friction, expected in creep.items():
        sim = SlidingBlock(horizon=steps, friction=friction, mu=mu, eps=eps)
        sim.set_actions(np.full(steps, force))
        v = sim.rollout()["v"][0]
        assert v[-1] == pytest.approx(expected, rel=1e-9, abs=1e-15), friction
    assert 0.5 * eps < creep["tanh"] < eps  # the order of magnitude the module docstring states


def test_stiff_regularized_friction_does_not_chatter():
    """Stiff regularized friction (dt mu g / eps = 29) stops the block without reversing it."""
    # eps = 1e-4 and dt = 1 ms make the regularized law stiff (dt mu g / eps = 29): friction still only stops the block,
    # never reverses it; it comes to rest within v0 / (mu g) + 2 dt and stays there (|v| < 1e-12).
    v0, mu, eps, dt = 0.5, 0.3, 1e-4, 1e-3
    for friction in ("tanh", "huber"):
        traj = SlidingBlock(horizon=400, friction=friction, mu=mu, eps=eps, v=v0).rollout()
        v = traj["v"][0]
        assert np.all(v >= 0), friction
        stop = int(np.ceil(v0 / (mu * G) / dt)) + 2
        assert np.abs(v[stop:]).max() < 1e-12, friction
        assert traj["x"][0, -1] == pytest.approx(v0**2 / (2 * mu * G), rel=2e-2)


@pytest.mark.parametrize("friction", ["tanh", "huber"])
def test_gradcheck_while_sliding(friction):
    """Sliding one way: the backward pass matches float64 central differences to 1e-6 in all three groups."""
    # T = 300, random pushes; v keeps its sign: sliding fast (saturated law) and creeping inside the regularized zone
    # 0 < v < eps (eps = 0.1, a push of ~1.5 N).
    steps = 300
    sim = SlidingBlock(horizon=steps, batch=3, friction=friction, v=[3.0, -2.5, 0.05], mu=[0.3, 0.2, 0.3],
                       m=[1.0, 2.5, 1.0], eps=[0.01, 0.01, 0.1])
    rng = np.random.default_rng(3)
    push = rng.uniform(-1.0, 1.0, size=(3, steps))
    push[2] = 1.5 + 0.3 * rng.uniform(-1.0, 1.0, size=steps)
    sim.set_actions(push)
    v = sim.rollout()["v"]
    assert np.abs(v[:2]).min() > 1.0 and 0.04 < v[2].min() and v[2].max() < 0.07
    report = gradcheck_all_groups(sim, LOSS + 0.01 * tisim.losses.Effort())
    assert set(report) == {"params", "initial_state", "actions"}
    assert report.worst <= 1e-6, str(report)


@pytest.mark.parametrize("kwargs, message", [
    (dict(mu=-0.1), r"mu must be in \[0, inf\), got -0.1"),
    (dict(mu_s=-1.0), r"mu_s must be in \[0, inf\), got -1"),
    (dict(m=0.0), r"m must be in \(0, inf\), got 0"),
    (dict(eps=0.0), r"eps must be in \(0, inf\), got 0"),
    (dict(friction="stick-slip"), r"friction must be one of \['tanh', 'huber', 'stick_slip', 'qp'\], got 'stick-slip'"
                                  r".*Perhaps you meant 'stick_slip'\?"),
    (dict(friction="coulomb"), r"friction must be one of \['tanh', 'huber', 'stick_slip', 'qp'\], got 'coulomb'"),
])
def test_bad_input_names_the_argument(kwargs, message):
    """Negative mu, mu_s, non-positive m, eps and unknown friction laws raise ValueError naming what is allowed."""
    with pytest.raises(ValueError, match=message):
        SlidingBlock(horizon=10, **kwargs)
