"""What a sweep gains from workers, and what each job pays for travelling to one (tisim/optim/sweep.py).

Throughput: --jobs cart-pole identifications of about a second each (4 experiments, T=100, 2,500 Adam iterations of
identify; each job makes its own recording from its seed) run by the serial backend, then by "processes" and "ray"
with 1 and 2 workers. Every backend runs deterministically and must return the serial results bit for bit before its
time counts. Reported per backend: the sweep's wall time (start-up included: a pool, or a local Ray instance, and each
worker's import of tisim and its kernels from Taichi's offline cache), jobs per second, and the speed-up over serial;
then the same with the start-up taken out (wall time less the start-up measured below). Ray runs on one local instance
started first (its own start-up reported apart), as a user with a cluster would run several sweeps. This machine's
speed drifts by 10-20% over minutes, so --rounds rounds run every case, each compared with its round's serial run.

Overhead: a sweep of one empty job (start-up: making the pool or starting Ray, and a worker's first job), and of
--empty empty jobs, whose wall time less the start-up, divided by the jobs, is the cost a job adds: pickling its
configuration and its result, the round trip to a worker, the driver's bookkeeping.

    .venv/bin/python benchmarks/sweep.py [--jobs 32] [--rounds 2] [--empty 500] [--out out]
        -> prints the table and writes out/sweep.md
"""
import argparse
import os
import pathlib
import platform
import subprocess
import sys
import time

import numpy as np

import tisim
from tisim import sweep
from tisim.losses import Tracking
from tisim.optim import Adam
from tisim.tasks import identify

TRUE, GUESS = dict(m_cart=1.3, m_pole=0.15, l=0.6, mu_cart=0.05), dict(m_cart=1.0, m_pole=0.1, l=0.5, mu_cart=0.01)


def identify_job(config):
    """About a second of work: record 4 experiments of a cart-pole (from the seed), fit its 4 parameters."""
    rng = np.random.default_rng(config["seed"])
    t = np.arange(100) * tisim.systems.Cartpole.DT
    forces = 3 * np.sin(2 * np.pi * rng.uniform(0.3, 1.5, (4, 1)) * t)
    initial = dict(theta=np.pi + rng.normal(0, 0.5, 4), theta_dot=rng.normal(0, 0.5, 4), x=np.zeros(4))
    truth = tisim.systems.Cartpole(horizon=100, batch=4, **initial, **TRUE)
    truth.set_actions(forces)
    observed = {k: v + 1e-3 * rng.normal(size=v.shape) for k, v in truth.rollout().items() if k in ("x", "theta")}
    sim = tisim.systems.Cartpole(horizon=100, batch=4, **initial, **GUESS)
    sim.set_actions(forces)
    result = identify(sim, Tracking(observed), list(GUESS), iterations=config["iterations"], optimizer=Adam(lr=0.05))
    return {k: float(v) for k, v in result.values.items()}


def empty_job(config):
    return config["i"]


def plain_processes(args, count):
    """Wall time of --jobs jobs split between ``count`` Python processes started at once, without tisim.sweep."""
    start = time.perf_counter()
    children = [subprocess.Popen([sys.executable, __file__, "--plain", ",".join(map(str, range(k, args.jobs, count))),
                                  "--iterations", str(args.iterations)]) for k in range(count)]
    assert all(child.wait() == 0 for child in children)
    return time.perf_counter() - start


def timed(fn, configs, **options):
    start = time.perf_counter()
    result = sweep.run(fn, configs, deterministic=True, progress=False, **options)
    return time.perf_counter() - start, result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=2500)
    parser.add_argument("--empty", type=int, default=500)
    parser.add_argument("--out", default="out")
    parser.add_argument("--plain", default=None, help=argparse.SUPPRESS)  # a child of plain_processes: these seeds
    args = parser.parse_args(argv)
    if args.plain is not None:
        tisim.init(deterministic=True)
        for seed in map(int, args.plain.split(",")):
            identify_job(dict(seed=seed, iterations=args.iterations))
        return
    import ray
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    tisim.init(deterministic=True)
    configs = [dict(seed=i, iterations=args.iterations) for i in range(args.jobs)]
    identify_job(dict(seed=0, iterations=2))  # compile here, so serial is not charged for it
    started = time.perf_counter()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    ray_start = time.perf_counter() - started

    cases = [("serial", None), ("processes", 1), ("processes", 2), ("ray", 1), ("ray", 2), ("plain", 2)]
    runs, serial = {case: [] for case in cases}, None
    for round_ in range(args.rounds):
        # this machine's speed drifts by 10-20% over minutes: each round runs every case, in alternating order, and a
        # case is compared with the serial run of its own round
        for case in cases if round_ % 2 == 0 else [cases[0]] + cases[:0:-1]:
            backend, workers = case
            if backend == "plain":
                runs[case].append(dict(wall=plain_processes(args, workers), startup=0.0, empty=0.0, job=0.0))
                print(f"round {round_ + 1}: {workers} plain processes: {runs[case][-1]['wall']:6.2f} s", flush=True)
                continue
            startup, _ = timed(empty_job, [dict(i=0)], backend=backend, workers=workers)
            empty_wall, empty = timed(empty_job, [dict(i=i) for i in range(args.empty)], backend=backend,
                                      workers=workers)
            assert empty.values == list(range(args.empty))
            wall, result = timed(identify_job, configs, backend=backend, workers=workers)
            assert not result.failures, result.table()
            serial = serial or result.values
            assert result.values == serial, f"{backend} with {workers} workers differs from the serial results"
            runs[case].append(dict(wall=wall, startup=startup, empty=empty_wall,
                                   job=float(np.mean([o.seconds for o in result.outcomes]))))
            print(f"round {round_ + 1}: {backend:>9} x{workers or 1}: {wall:6.2f} s for {args.jobs} jobs, start-up "
                  f"{startup:.2f} s, {args.empty} empty jobs {empty_wall:.2f} s", flush=True)
    ray.shutdown()

    def median(case, value):
        return float(np.median([value(r, s) for r, s in zip(runs[case], runs[cases[0]])]))

    lines = [f"# Sweep throughput and overhead ({platform.machine()}, {os.cpu_count()} cores)", "",
             f"{args.jobs} jobs of {median(cases[0], lambda r, s: r['job']):.2f} s each in the serial runs (cart-pole "
             f"identify, {args.iterations} iterations), {args.empty} empty jobs for the overhead; {args.rounds} rounds "
             "of every case, each compared with the serial run of its round, medians over the rounds. Every backend "
             f"returned the serial results bit for bit. Ray itself (ray.init, a local instance) started in "
             f"{ray_start:.1f} s, before the cases; the first ray case's start-up includes starting its worker "
             "processes, later ones find them running.", "",
             "| backend | workers | wall [s] | jobs/s | vs serial | start-up [s] | vs serial without start-up | "
             "overhead per job [ms] |",
             "|---|---|---|---|---|---|---|---|"]
    for case in cases[:-1]:
        wall, startup = median(case, lambda r, s: r["wall"]), median(case, lambda r, s: r["startup"])
        speedup = median(case, lambda r, s: s["wall"] / r["wall"])
        steady = median(case, lambda r, s: s["wall"] / (r["wall"] - r["startup"]) if r["wall"] > 2 * r["startup"]
                        else float("nan"))  # a start-up that is most of the sweep leaves nothing to compare
        overhead = median(case, lambda r, s: max(r["empty"] - r["startup"], 0.0) / (args.empty - 1))
        lines.append(f"| {case[0]} | {case[1] or 1} | {wall:.2f} | {args.jobs / wall:.2f} | {speedup:.2f}x | "
                     f"{startup:.2f} | {steady:.2f}x | {1e3 * overhead:.2f} |")
    plain = median(cases[-1], lambda r, s: s["wall"] / r["wall"])
    lines += ["", "The machine's own ceiling, in the same rounds: the same jobs split between two plain Python "
              f"processes started at once (no sweep; each imports tisim and loads its kernels, as a worker does): "
              f"{median(cases[-1], lambda r, s: r['wall']):.2f} s, {plain:.2f}x serial."]
    text = "\n".join(lines)
    print(text)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sweep.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
