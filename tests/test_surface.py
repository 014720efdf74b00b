"""The public surface under hostile input (tests/fuzz_surface.py, hypothesis) and the bound launch path under stress
(tests/soak_launch.py), each in a subprocess of its own, so that a crash of the process is seen as one.

TISIM_FUZZ_EXAMPLES and TISIM_SOAK_SIMULATORS make them longer for an occasional run."""
import json
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent


def run(script, *args, timeout=900):
    done = subprocess.run([sys.executable, str(HERE / script), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=HERE.parent)
    assert done.returncode == 0, (f"{script} exited with {done.returncode} (a negative code is a signal: a crash)\n"
                                  + done.stdout[-3000:] + done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_hostile_inputs_are_refused_by_name_or_give_finite_results():
    """Every system's constructor, setters, losses, gradients by every mechanism, Jacobians, the tasks and robot
    files, under hypothesis: each input works (finite results, or NonFiniteError naming the step) or is refused
    with a ValueError or TypeError naming the argument, and the process never crashes."""
    summary = run("fuzz_surface.py", "--examples", os.environ.get("TISIM_FUZZ_EXAMPLES", "10"))
    assert summary["tried"] >= 800, summary
    for kind in ("constructor", "set_params", "set_initial_state", "set_actions", "loss", "gradient", "jacobian",
                 "optimize_actions", "identify", "robot file"):
        assert summary.get(f"{kind} accepted", 0) > 0 and summary.get(f"{kind} refused", 0) > 0, (kind, summary)


def test_bound_calls_agree_with_plain_calls_under_random_lifetimes():
    """Pairs of simulators of every system (random batch and horizon), one bound and one on Taichi's own call path,
    made, used by every mechanism and dropped in random order with collections and runtime restarts: bitwise the
    same answers, and resident memory bounded after the warm-up."""
    pairs = int(os.environ.get("TISIM_SOAK_SIMULATORS", "40"))
    summary = run("soak_launch.py", "--simulators", str(pairs), "--restarts", "0.02")
    assert summary["pairs"] == pairs and summary["questions"] >= pairs and summary["restarts"] >= 1, summary
