"""The checkpointed backward pass: the same gradients as unrolling, in a fraction of the memory."""
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tisim
from tisim.losses import Custom, Effort, TerminalSum, TerminalTarget, Tracking
from tisim.systems.mass_spring import MassSpring, mean_x_weights, reference_actions


def cartpole_case():
    sim = tisim.systems.Cartpole(horizon=120, batch=3, theta=np.pi - np.array([0.1, 0.2, 0.3]))
    sim.set_actions(np.random.default_rng(0).normal(size=(3, 120)))
    data = np.full(121, np.nan)
    data[::7] = 0.5
    loss = (TerminalTarget({"theta": 0.0, "x": 0.3}) + Tracking({"x": data}) + 0.01 * Effort()
            + TerminalSum({"x_dot": 2.0}) + TerminalSum({"theta": -0.5}, steps=range(60, 121, 3)))
    return sim, loss


@pytest.mark.parametrize("segments", [None, 1, 7, 33, 120])
def test_checkpointed_equals_unrolled_bitwise(segments):
    """In deterministic mode, checkpointed gradients equal the unrolled ones bit for bit, for any segment count."""
    sim, loss = cartpole_case()
    unrolled = sim.gradient(loss)
    checkpointed = sim.gradient(loss, method="checkpointed", segments=segments)
    assert checkpointed.value == pytest.approx(unrolled.value, rel=1e-13)
    np.testing.assert_array_equal(checkpointed.actions, unrolled.actions)
    for name in unrolled.params:
        np.testing.assert_array_equal(checkpointed.params[name], unrolled.params[name])
    for name in unrolled.initial_state:
        np.testing.assert_array_equal(checkpointed.initial_state[name], unrolled.initial_state[name])
    with pytest.raises(ValueError, match="not kept by method='checkpointed'"):
        _ = checkpointed.adjoint


def test_checkpointed_matches_central_differences_on_a_soft_body():
    """On a mass-spring robot through ground contact, checkpointed and unrolled agree to 1e-12 and with differences."""
    sim = MassSpring(horizon=90, robot="worm")
    sim.set_actions(reference_actions(sim))
    loss = TerminalSum(mean_x_weights(sim)) + 1e-3 * Effort()
    unrolled, checkpointed = sim.gradient(loss), sim.gradient(loss, method="checkpointed", segments=9)
    for name in unrolled.params:
        np.testing.assert_allclose(checkpointed.params[name], unrolled.params[name], rtol=1e-12, atol=1e-18)
    np.testing.assert_allclose(checkpointed.actions, unrolled.actions, rtol=1e-12, atol=1e-18)
    report = tisim.gradcheck(sim, loss, groups=("params",), step=1e-6, max_entries=6)
    assert report.worst <= 1e-3, str(report)


def test_custom_losses_per_segment():
    """A Custom loss over many steps is split across segments and still sums to the unrolled value and gradient."""
    import taichi as ti

    sim = tisim.systems.Pendulum(horizon=50, theta=1.0)
    k = sim.index("theta")

    @ti.func
    def height(x: ti.template(), theta: ti.template(), u: ti.template(), b, t):
        return 1.0 - ti.cos(x[b, t, k])

    loss = Custom(height, steps=range(0, 51, 3))
    unrolled, checkpointed = sim.gradient(loss), sim.gradient(loss, method="checkpointed", segments=6)
    assert checkpointed.value == pytest.approx(unrolled.value, rel=1e-13)
    np.testing.assert_allclose(checkpointed.params["l"], unrolled.params["l"], rtol=1e-12)


def test_bad_segments():
    """segments outside [1, T] and segments with method='unrolled' are rejected."""
    sim, loss = cartpole_case()
    for bad in (0, 121, 2.5, True):
        with pytest.raises(ValueError, match=r"segments must be an integer in \[1, 120\]"):
            sim.gradient(loss, method="checkpointed", segments=bad)
    with pytest.raises(ValueError, match="segments applies to method='checkpointed' and 'continuous_adjoint' only"):
        sim.gradient(loss, segments=4)


def test_nonfinite_step_is_named():
    """A checkpointed run that diverges names the global step where it went non-finite."""
    sim = tisim.systems.ScalarLinear(horizon=40, a=1e20, theta=1.0)
    with pytest.raises(tisim.NonFiniteError, match=r"non-finite at step (\d+) of 40"):
        sim.gradient(TerminalTarget({"x": 0.0}), method="checkpointed", segments=5)


PEAK = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tisim
    from tisim.systems.mass_spring import MassSpring, mean_x_weights

    def resident_kib():
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))

    tisim.init(deterministic=True)
    method, horizon = sys.argv[1], int(sys.argv[2])
    small = MassSpring(horizon=10, robot="worm")  # compile first: compiling takes memory of its own
    small.gradient(tisim.losses.TerminalSum(mean_x_weights(small)), method=method)
    before = resident_kib()
    sim = MassSpring(horizon=horizon, robot="worm")
    g = sim.gradient(tisim.losses.TerminalSum(mean_x_weights(sim)), method=method)
    # every buffer a pass needs stays allocated on the simulator, so what is resident now is the pass's peak
    print(json.dumps({"peak_kib": resident_kib() - before, "dk": float(np.abs(g.params["k"]).sum())}))
""")


def test_checkpointing_halves_peak_memory(tmp_path):
    """At T = 20,000 steps of a 33-particle robot the checkpointed pass needs less than half the unrolled memory."""
    script = tmp_path / "peak.py"
    script.write_text(PEAK)
    runs = {}
    for method in ("unrolled", "checkpointed"):
        out = subprocess.run([sys.executable, str(script), method, "20000"], capture_output=True, text=True,
                             timeout=600, check=True)
        runs[method] = json.loads(out.stdout.strip().splitlines()[-1])
    assert runs["checkpointed"]["dk"] == pytest.approx(runs["unrolled"]["dk"], rel=1e-12)
    assert runs["unrolled"]["peak_kib"] > 30_000  # x and its gradient: 2 x 20001 x 132 x 8 bytes = 42 MB
    assert runs["checkpointed"]["peak_kib"] < 0.5 * runs["unrolled"]["peak_kib"], runs
