"""The gradient health report: adjoint growth, non-finite steps, and the switches a rollout crossed."""
import numpy as np
import pytest
import taichi as ti

import tisim
from tisim import diagnostics, plots
from tisim.losses import Custom, TerminalTarget


@pytest.mark.parametrize("a", [0.8, 1.1])
def test_growth_rate_is_the_log_eigenvalue(a):
    """For x[t+1] = a x[t] + theta, |lambda_t| = |lambda_T| a^(T-t): the fitted growth per step is log a."""
    report = diagnostics.health(tisim.systems.ScalarLinear(horizon=40, a=a), TerminalTarget({"x": 0.0}))
    assert report.growth[0] == pytest.approx(np.log(a), rel=1e-10)
    assert report.first_nonfinite is None and np.isfinite(report.value)


def test_nonfinite_rollout_is_located():
    """A diverging rollout is reported at the step the engine names, not as a traceback."""
    report = diagnostics.health(tisim.systems.ScalarLinear(horizon=400, a=1e2), TerminalTarget({"x": 0.0}))
    step, batch, where = report.first_nonfinite
    assert where == "rollout" and batch == 0 and step == 156  # 100^154 overflows float64 (1.8e308) two steps later
    assert "first non-finite: step 156" in str(report)


@ti.func
def root_of_final(x: ti.template(), theta: ti.template(), u: ti.template(), b, t):
    return ti.sqrt(x[b, t, 0])


def test_nonfinite_adjoint_with_a_finite_rollout():
    """sqrt at 0 has an infinite slope: the rollout is finite, the adjoint is not, and the report says which."""
    report = diagnostics.health(tisim.systems.ScalarLinear(horizon=5, a=0.0, theta=0.0), Custom(root_of_final))
    assert report.first_nonfinite[0] == 5 and "adjoint" in report.first_nonfinite[2]


def test_contact_switches_are_counted(tmp_path):
    """A ball dropped from 1 m touches the floor twice in 1.5 s: four switches, at the bounce times."""
    sim = tisim.systems.BouncingBall(horizon=1500, py=1.0)
    report = diagnostics.health(sim, TerminalTarget({"py": 0.5}))
    assert report.switches()["contact"][0] == 4
    first_touch = np.argmax(report.events["contact"][0]) * sim.dt
    assert first_touch == pytest.approx(np.sqrt(2 * 0.9 / 9.8), abs=2e-3)  # the bottom falls 0.9 m
    assert "contact switches" in str(report)
    assert plots.plot_health(report, tmp_path / "health.png").stat().st_size > 10_000


def test_sticking_block_switches_once():
    """A block sliding to a stop under stick-slip friction crosses one switch, from sliding to stuck."""
    sim = tisim.systems.SlidingBlock(horizon=1500, v=2.0, friction="stick_slip")
    report = diagnostics.health(sim, TerminalTarget({"x": 0.0}))
    assert report.switches()["sliding"][0] == 1 and report.events["sliding"][0, 0]


def test_last_bits_moves_every_input_in_its_last_bits_only():
    """Inside last_bits, parameters, initial states and actions (constructor and setters) shrink by at most `size`
    relative, some by more than nothing; bounds hold (e = 1 stays <= 1, a zero stays zero); outside, nothing moves."""
    actions = np.linspace(0.5, 2.0, 40)[:, None] * [1.0, -0.5]  # (T, 2): a force per step
    with diagnostics.last_bits(1e-12, seed=1):
        sim = tisim.systems.BouncingBall(horizon=40, batch=3, e=1.0, vx=0.0, py=1.5)
        sim.set_actions(actions)
        sim.set_params(m=2.0)
        moved = dict(py=sim.initial_state["py"], e=sim.params["e"], m=sim.params["m"], vx=sim.initial_state["vx"],
                     actions=sim.actions)
    nominal = dict(py=1.5, e=1.0, m=2.0, vx=0.0, actions=np.broadcast_to(actions, moved["actions"].shape))
    for name, value in moved.items():
        expected = np.asarray(nominal[name], dtype=np.float64)
        assert np.all(np.abs(value - expected) <= 1e-12 * np.abs(expected)), name
        assert np.all(np.abs(value) <= np.abs(expected)), name
        assert np.any(value != expected) == np.any(expected != 0), f"{name}: moved {value} from {expected}"
    exact = tisim.systems.BouncingBall(horizon=40, batch=3, e=1.0, py=1.5)
    assert np.all(exact.initial_state["py"] == 1.5) and np.all(exact.params["e"] == 1.0)


def test_last_bits_checks_its_size_and_leaves_errors_alone():
    """A size outside [0, 1e-3] is refused before anything moves; bad input inside the block gets its usual error."""
    for size in (-1e-12, 0.1, "tiny", True):
        with pytest.raises(ValueError, match=r"last_bits: size must be a relative size in \[0, 1e-3\]"):
            with diagnostics.last_bits(size):
                pass
    with diagnostics.last_bits(1e-12, seed=2):
        sim = tisim.systems.ScalarLinear(horizon=3)
        with pytest.raises(TypeError, match="theta must be numeric"):
            sim.set_params(theta="one")


@pytest.mark.perturbed
def test_marked_tests_run_exactly_and_perturbed(last_bits):
    """The suite's perturbed marker (tests/conftest.py) runs a test exactly and once per seed with the inputs moved."""
    sim = tisim.systems.ScalarLinear(horizon=3, theta=1.0)
    assert (sim.params["theta"][0] == 1.0) == (last_bits is None)
