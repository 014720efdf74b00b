"""The jobs of the sweep tests, and a script that runs them as a sweep (the Ray cluster test and the interrupted-driver
test run it as a subprocess; its job function then travels to the workers by value).

    python tests/sweep_driver.py --backend ray --address 127.0.0.1:6379 --folder DIR --jobs 8

Each job rolls out a pendulum batch from its configuration and takes a gradient, so a worker really initializes and
compiles tisim. Two variables shape a run for the fault tests without changing any configuration (and so any result):
SWEEP_TEST_PIDS names a folder where each job attempt leaves a file "<job>-<pid>-<parent pid>" as it starts, and
SWEEP_TEST_SLEEP a time each job waits after that, which gives a test the moment to kill the worker in mid-job.
"""
import argparse
import os
import sys
import time

import numpy as np

import tisim
from tisim import sweep
from tisim.losses import TerminalTarget


def job(config):
    pids, sleep = os.environ.get("SWEEP_TEST_PIDS"), float(os.environ.get("SWEEP_TEST_SLEEP", "0"))
    if pids:
        open(os.path.join(pids, f"{config['job']}-{os.getpid()}-{os.getppid()}"), "w").close()
    time.sleep(sleep)
    if config.get("diverge"):  # an unstable map: NonFiniteError naming the step
        sim = tisim.systems.ScalarLinear(horizon=200, a=1e3)
        sim.rollout()
    sim = tisim.systems.Pendulum(horizon=80, batch=2, l=config["l"], c=config["c"])
    sim.set_initial_state(theta=np.array([0.3, 1.2]), theta_dot=np.array([0.0, -0.5]))
    trajectory = sim.rollout()
    gradient = sim.gradient(TerminalTarget({"theta": np.pi}))
    return dict(theta=trajectory["theta"], dL_dl=gradient.params["l"], loss=float(gradient.value),
                label=f"l={config['l']:.3f}")


def configs(n, failing=True):
    """n pendulums with lengths from 0.5 m; with failing, job 3 has an invalid length and job 5 diverges."""
    out = [dict(job=i, l=0.5 + 0.125 * i, c=0.05) for i in range(n)]
    if failing and n > 5:
        out[3]["l"] = -1.0
        out[5]["diverge"] = True
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="serial", choices=sweep.BACKENDS)
    parser.add_argument("--address", default=None)
    parser.add_argument("--folder", default=None)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--jobs", type=int, default=8)
    args = parser.parse_args(argv)
    result = sweep.run(job, configs(args.jobs), backend=args.backend, address=args.address, folder=args.folder,
                       workers=args.workers, deterministic=True, progress=False)
    print(result.table())
    sys.stdout.flush()


if __name__ == "__main__":
    main()
