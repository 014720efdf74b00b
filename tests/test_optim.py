"""Optimizers and the optimization loop: convergence, constraints, the non-finite guard, snapshots and resume."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from tisim.core.derivatives import NonFiniteError
from tisim.optim import Adam, GradientDescent, lbfgs, minimize

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
    result = minimize(bowl, {"p": np.zeros(3)}, optimizer=Adam(lr=0.1), iterations=300, bounds={"p": (-1.0, 1.0)},
                      record_values=True)
    np.testing.assert_allclose(result.values["p"], [1.0, -1.0, 0.5], atol=1e-3)
    assert all(np.all(np.abs(h["values"]["p"]) <= 1.0) for h in result.history)

    def positive(values):
        d = values["m"] - 0.25
        return float(d @ d), {"m": 2 * d}

    result = minimize(positive, {"m": np.array([4.0, 0.01])}, optimizer=Adam(lr=0.1), iterations=1500, log_space=["m"],
                      record_values=True)
    np.testing.assert_allclose(result.values["m"], [0.25, 0.25], rtol=1e-3)
    assert all(np.all(h["values"]["m"] > 0) for h in result.history)


def test_gradient_clipping_limits_the_step():
    """With clip, gradient descent moves by at most lr * clip per iteration."""
    result = minimize(bowl, {"p": np.array([100.0, 0.0, 0.0])}, optimizer=GradientDescent(lr=0.1), iterations=3,
                      clip=1.0, record_values=True)
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
    """A run stopped mid-way and resumed from its snapshot ends bitwise equal to an uninterrupted run, history and
    recorded values included."""
    straight = minimize(bowl, {"p": np.zeros(3)}, optimizer=Adam(lr=0.05), iterations=40, record_values=True)
    path = str(tmp_path / "run.npz")

    def interrupt(i, values, loss):
        if i == 23:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        minimize(bowl, {"p": np.zeros(3)}, optimizer=Adam(lr=0.05), iterations=40, snapshot=path,
                 snapshot_every=5, callback=interrupt, record_values=True)
    resumed = minimize(bowl, {"p": np.zeros(3)}, optimizer=Adam(lr=0.05), iterations=40, snapshot=path,
                       snapshot_every=5, record_values=True)
    np.testing.assert_array_equal(resumed.values["p"], straight.values["p"])
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in straight.history]
    for a, b in zip(resumed.history, straight.history):
        assert a.keys() == b.keys() and a["iteration"] == b["iteration"]
        np.testing.assert_array_equal(a["values"]["p"], b["values"]["p"])


KILLED_RUN = textwrap.dedent("""
    import sys, time
    import numpy as np
    from tisim.optim import Adam, minimize
    target = np.array([3.0, -2.0, 0.5])
    def bowl(v):
        time.sleep(0.002)
        d = v["p"] - target
        return float(d @ d), {"p": 2 * d}
    r = minimize(bowl, {"p": np.zeros(3)}, optimizer=Adam(lr=0.05), iterations=1000, snapshot=sys.argv[1],
                 snapshot_every=1)
    np.save(sys.argv[2], r.values["p"])
    np.save(sys.argv[2] + ".loss.npy", [h["loss"] for h in r.history])
""")


def test_killed_process_resumes_to_the_same_result(tmp_path):
    """A process killed with SIGKILL at random moments, again and again, resumes from its snapshot each time and
    ends bitwise equal to an uninterrupted run, with one history entry per iteration."""
    script, path = tmp_path / "run.py", str(tmp_path / "run.npz")
    script.write_text(KILLED_RUN)
    reference = str(tmp_path / "reference.npy")
    subprocess.run([sys.executable, str(script), str(tmp_path / "other.npz"), reference], check=True)
    rng, kills = np.random.default_rng(), 0
    for _ in range(4):
        process = subprocess.Popen([sys.executable, str(script), path, str(tmp_path / "killed.npy")])
        deadline = time.time() + 60
        while not os.path.exists(path) and time.time() < deadline:
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.4))
        process.send_signal(signal.SIGKILL)
        if process.wait() == -signal.SIGKILL and not os.path.exists(tmp_path / "killed.npy"):
            kills += 1
    assert kills >= 2, "the runs finished before they were killed; make them longer"
    subprocess.run([sys.executable, str(script), path, str(tmp_path / "resumed.npy")], check=True)
    np.testing.assert_array_equal(np.load(tmp_path / "resumed.npy"), np.load(reference))
    np.testing.assert_array_equal(np.load(tmp_path / "resumed.npy.loss.npy"), np.load(reference + ".loss.npy"))


EVIL_PICKLE = textwrap.dedent("""
    import os, pickle, sys
    class Payload:
        def __reduce__(self):
            return (os.system, ("touch " + sys.argv[2],))
    with open(sys.argv[1], "wb") as f:
        pickle.dump(Payload(), f)
""")


def test_a_snapshot_is_data_never_code(tmp_path):
    """A pickle (here one that would create a file when unpickled) or a damaged file at the snapshot path is refused
    with a clear error, and nothing in it runs."""
    script, path, witness = tmp_path / "evil.py", tmp_path / "run.npz", tmp_path / "ran"
    script.write_text(EVIL_PICKLE)
    subprocess.run([sys.executable, str(script), str(path), str(witness)], check=True)
    with pytest.raises(ValueError, match="is not a tisim snapshot"):
        minimize(bowl, {"p": np.zeros(3)}, iterations=5, snapshot=str(path))
    assert not witness.exists()
    minimize(bowl, {"p": np.zeros(3)}, iterations=5, snapshot=str(path.with_name("good.npz")), snapshot_every=1)
    damaged = path.with_name("good.npz").read_bytes()
    path.write_bytes(damaged[: len(damaged) // 2])
    with pytest.raises(ValueError, match="is not a tisim snapshot"):
        minimize(bowl, {"p": np.zeros(3)}, iterations=5, snapshot=str(path))


def test_a_snapshot_of_another_problem_is_refused(tmp_path):
    """Resuming checks the problem: another horizon (actions of another shape), another optimizer setting, or another
    simulator with the same parameter shapes is an error naming the difference."""
    import tisim
    from tisim.losses import TerminalTarget, Tracking
    from tisim.tasks import identify, optimize_actions

    path = str(tmp_path / "run.npz")
    loss = TerminalTarget({"theta": 0.0})
    optimize_actions(tisim.systems.Pendulum(horizon=20), loss, iterations=3, snapshot=path, snapshot_every=1)
    with pytest.raises(ValueError, match=r"different problem: variables\['actions'\] is \[1, 20\] in the snapshot "
                                         r"and \[1, 30\] here"):
        optimize_actions(tisim.systems.Pendulum(horizon=30), loss, iterations=5, snapshot=path)
    with pytest.raises(ValueError, match=r"optimizer\['lr'\] is 0.1 in the snapshot and 0.2 here"):
        optimize_actions(tisim.systems.Pendulum(horizon=20), loss, iterations=5, snapshot=path,
                         optimizer=Adam(lr=0.2))
    resumed = optimize_actions(tisim.systems.Pendulum(horizon=20), loss, iterations=5, snapshot=path)
    assert resumed.iterations == 5 and len(resumed.history) == 5
    fit = str(tmp_path / "fit.npz")
    data = {"theta": np.zeros(21)}
    identify(tisim.systems.Pendulum(horizon=20), Tracking(data), ["l"], iterations=2, snapshot=fit)
    with pytest.raises(ValueError, match=r"problem\['horizon'\] is 20 in the snapshot and 30 here"):
        identify(tisim.systems.Pendulum(horizon=30), Tracking({"theta": np.zeros(31)}), ["l"], iterations=4,
                 snapshot=fit)


def test_a_long_run_keeps_a_small_snapshot(tmp_path):
    """3,000 iterations of a cart-pole swing (B=2, T=150) leave a snapshot of a few numbers per iteration, not
    every iterate's actions (those only with record_values=True)."""
    import tisim
    from tisim.losses import Effort, TerminalTarget
    from tisim.tasks import optimize_actions

    sim = tisim.systems.Cartpole(horizon=150, batch=2, theta=np.pi)
    path = tmp_path / "swing.npz"
    optimize_actions(sim, TerminalTarget({"theta": 0.0}) + 1e-3 * Effort(), limits=(-10, 10), iterations=3000,
                     snapshot=str(path), snapshot_every=3000)
    assert path.stat().st_size < 200_000, path.stat().st_size  # measured with the pickle format: 7.5 MB


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


def rosenbrock(x):
    value = np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)
    grad = np.zeros_like(x)
    grad[:-1] = -400 * x[:-1] * (x[1:] - x[:-1] ** 2) - 2 * (1 - x[:-1])
    grad[1:] += 200 * (x[1:] - x[:-1] ** 2)
    return value, grad


def test_lbfgs_finds_the_rosenbrock_minimum():
    """L-BFGS reaches (1, ..., 1) of the 10-dimensional Rosenbrock valley from (-1, ..., -1) to 1e-8, its loss
    falling at every accepted step; pricing the trial steps by value alone gives the same path."""
    x, loss, history = lbfgs(rosenbrock, np.full(10, -1.0), iterations=300)
    assert np.abs(x - 1).max() < 1e-8 and loss < 1e-15
    assert all(b <= a for a, b in zip(history, history[1:])) and history[-1] < history[0]
    y, _, again = lbfgs(rosenbrock, np.full(10, -1.0), iterations=300, value=lambda z: rosenbrock(z)[0])
    np.testing.assert_array_equal(x, y)
    assert again == history


def test_lbfgs_shortens_a_step_that_blows_up():
    """A trial step that raises NonFiniteError (a simulation past its stability limit) is halved, not fatal."""
    def blows_up_far(x):
        if np.abs(x).max() > 2.0:
            raise NonFiniteError("rollout turned non-finite")
        return float(np.sum((x - 1.5) ** 2)), 2 * (x - 1.5)
    x, loss, _ = lbfgs(blows_up_far, np.zeros(3), iterations=50)
    assert np.abs(x - 1.5).max() < 1e-8


@pytest.mark.parametrize("keywords, message", [(dict(iterations=-1), "iterations must be an int >= 0"),
                                               (dict(memory=0), "memory must be an int >= 1")])
def test_lbfgs_bad_arguments(keywords, message):
    with pytest.raises(ValueError, match=f"lbfgs: {message}"):
        lbfgs(rosenbrock, np.zeros(2), **keywords)


def test_the_earlier_snapshot_keywords_warn_and_still_resume(tmp_path):
    """checkpoint= and checkpoint_every=, minimize's earlier names for snapshot= and snapshot_every=, warn and work."""
    path = str(tmp_path / "run.npz")
    with pytest.warns(DeprecationWarning, match="checkpoint= is now snapshot="):
        minimize(bowl, {"p": np.zeros(3)}, optimizer=Adam(lr=0.05), iterations=4, checkpoint=path, checkpoint_every=2)
    assert os.path.exists(path)
    with pytest.raises(TypeError, match="unexpected keyword arguments \\['snapshots'\\]"):
        minimize(bowl, {"p": np.zeros(3)}, iterations=1, snapshots=path)
