"""Optimizers and the optimization loop: convergence, constraints, the non-finite guard, checkpoint and resume."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from tisim.optim import Adam, GradientDescent, minimize

TARGET = np.array([3.0, -2.0, 0.5])


def bowl(values):
    d = values["p"] - TARGET
    return float(d @ d), {"p": 2 * d}


@pytest.mark.parametrize("optimizer", [Adam(lr=0.1), GradientDescent(lr=0.1), GradientDescent(lr=0.05, momentum=0.8)],
                         ids=["adam", "gd", "momentum"])
def test_optimizers_reach_the_minimum_of_a_bowl(optimizer):
    """Each optimizer takes a quadratic bowl to its minimum."""
    result = minimize(bowl, {"p": np.zeros(3)}, optimizer=optimizer, iterations=400)
    np.testing.assert_allclose(result.values["p"], TARGET, atol=1e-3)
    assert result.loss < 1e-5 and result.iterations == 400 and len(result.history) == 400


def test_bounds_and_log_space():
    """Box bounds project every step; log-space variables stay positive and reach a positive optimum."""
    result = minimize(bowl, {"p": np.zeros(3)}, optimizer=Adam(lr=0.1), iterations=300, bounds={"p": (-1.0, 1.0)})
    np.testing.assert_allclose(result.values["p"], [1.0, -1.0, 0.5], atol=1e-3)
    assert all(np.all(np.abs(h["values"]["p"]) <= 1.0) for h in result.history)

    def positive(values):
        d = values["m"] - 0.25
        return float(d @ d), {"m": 2 * d}

    result = minimize(positive, {"m": np.array([4.0, 0.01])}, optimizer=Adam(lr=0.1), iterations=1500, log_space=["m"])
    np.testing.assert_allclose(result.values["m"], [0.25, 0.25], rtol=1e-3)
    assert all(np.all(h["values"]["m"] > 0) for h in result.history)


def test_gradient_clipping_limits_the_step():
    """With clip, gradient descent moves by at most lr * clip per iteration."""
    result = minimize(bowl, {"p": np.array([100.0, 0.0, 0.0])}, optimizer=GradientDescent(lr=0.1), iterations=3,
                      clip=1.0)
    steps = np.diff([h["values"]["p"] for h in result.history], axis=0)
    assert np.all(np.linalg.norm(steps, axis=1) <= 0.1 + 1e-12)
    assert result.history[0]["grad_norm"] > 1.0  # the history reports the unclipped norm


def test_nonfinite_steps_are_rejected_and_shrink_the_rate():
    """A step into a region where the objective is NaN is rejected: values kept, learning rate halved."""
    def cliff(values):
        p = values["p"]
        if p[0] > 1.0:
            return float("nan"), {"p": np.full(1, np.nan)}
        return float(-p[0]), {"p": np.array([-1.0])}

    optimizer = GradientDescent(lr=0.8)
    result = minimize(cliff, {"p": np.array([0.0])}, optimizer=optimizer, iterations=30)
    assert np.all(np.isfinite(result.values["p"])) and result.values["p"][0] <= 1.0
    assert optimizer.lr < 0.8
    assert all(np.isfinite(h["loss"]) for h in result.history)


def test_all_nonfinite_stops_the_run():
    """An objective that is never finite stops after 10 rejections with a reason."""
    result = minimize(lambda v: (float("inf"), {"p": v["p"]}), {"p": np.ones(2)}, iterations=100)
    assert result.stopped == "10 non-finite steps in a row" and result.history == []
    np.testing.assert_array_equal(result.values["p"], np.ones(2))


def test_early_stopping_and_callback():
    """tol stops a converged run early; a callback returning True stops it at once."""
    result = minimize(bowl, {"p": np.zeros(3)}, optimizer=Adam(lr=0.2), iterations=5000, tol=1e-6, patience=20)
    assert result.stopped.startswith("converged") and result.iterations < 5000
    seen = []
    result = minimize(bowl, {"p": np.zeros(3)}, iterations=50, callback=lambda i, v, loss: seen.append(i) or i == 7)
    assert result.stopped == "callback" and seen == list(range(1, 8))


def test_interrupted_run_resumes_to_the_same_result(tmp_path):
    """A run stopped mid-way and resumed from its checkpoint ends bitwise equal to an uninterrupted run."""
    straight = minimize(bowl, {"p": np.zeros(3)}, optimizer=Adam(lr=0.05), iterations=40)
    path = str(tmp_path / "run.pkl")

    def interrupt(i, values, loss):
        if i == 23:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        minimize(bowl, {"p": np.zeros(3)}, optimizer=Adam(lr=0.05), iterations=40, checkpoint=path,
                 checkpoint_every=5, callback=interrupt)
    resumed = minimize(bowl, {"p": np.zeros(3)}, optimizer=Adam(lr=0.05), iterations=40, checkpoint=path,
                       checkpoint_every=5)
    np.testing.assert_array_equal(resumed.values["p"], straight.values["p"])
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in straight.history]


KILLED_RUN = textwrap.dedent("""
    import sys, time
    import numpy as np
    from tisim.optim import Adam, minimize
    target = np.array([3.0, -2.0, 0.5])
    def bowl(v):
        time.sleep(0.002)
        d = v["p"] - target
        return float(d @ d), {"p": 2 * d}
    r = minimize(bowl, {"p": np.zeros(3)}, optimizer=Adam(lr=0.05), iterations=400, checkpoint=sys.argv[1],
                 checkpoint_every=1)
    np.save(sys.argv[2], r.values["p"])
""")


def test_killed_process_resumes_to_the_same_result(tmp_path):
    """A process killed with SIGKILL at an arbitrary moment resumes from its checkpoint to the uninterrupted result."""
    script, path = tmp_path / "run.py", str(tmp_path / "run.pkl")
    script.write_text(KILLED_RUN)
    reference = str(tmp_path / "reference.npy")
    subprocess.run([sys.executable, str(script), str(tmp_path / "other.pkl"), reference], check=True)
    process = subprocess.Popen([sys.executable, str(script), path, str(tmp_path / "killed.npy")])
    deadline = time.time() + 60
    while not os.path.exists(path) and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not os.path.exists(tmp_path / "killed.npy"), "the run finished before it was killed; make it longer"
    subprocess.run([sys.executable, str(script), path, str(tmp_path / "resumed.npy")], check=True)
    np.testing.assert_array_equal(np.load(tmp_path / "resumed.npy"), np.load(reference))


@pytest.mark.parametrize("make, message", [
    (lambda: Adam(lr=-1.0), "lr must be a finite number > 0"),
    (lambda: Adam(beta1=1.0), "beta1 and beta2 must be in"),
    (lambda: GradientDescent(momentum=1.5), "momentum must be in"),
    (lambda: minimize(bowl, {"p": np.zeros(3)}, log_space=["q"]), "'q' is not among the variables"),
    (lambda: minimize(bowl, {"p": np.zeros(3)}, log_space=["p"]), "must be > 0"),
    (lambda: minimize(bowl, {"p": np.zeros(3)}, iterations=-1), "iterations must be an int >= 0"),
])
def test_bad_arguments(make, message):
    """Bad optimizer and loop arguments are rejected with the argument named."""
    with pytest.raises(ValueError, match=message):
        make()
