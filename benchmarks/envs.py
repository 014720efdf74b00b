"""Environment steps per second of tisim's Gymnasium environments, side by side in one process.

For each task: the single environment (gymnasium.make), Gymnasium's SyncVectorEnv over --envs single environments
(one simulator each, stepped one after another), and tisim's SimulatedVectorEnv (gymnasium.make_vec: the
environments are the batch of one simulator, stepped by one rollout). Random actions, --steps vector steps after a
warm-up that compiles the kernels; the best of --rounds rounds. Reported: environment steps per second and
SimulatedVectorEnv's over SyncVectorEnv's.

    .venv/bin/python benchmarks/envs.py [--envs 64] [--steps 200] [--rounds 3] [--json out/envs.json]
"""
import argparse
import json
import os
import platform
import time

import gymnasium

import tisim
import tisim.envs  # noqa: F401 (registers the environments)

TASKS = ("tisim/CartpoleSwingUp-v0", "tisim/PendulumSwingUp-v0")


def rate(env, steps, rounds, n):
    """Best environment steps per second of `steps` steps of env (n environments a step)."""
    env.reset(seed=0)
    for _ in range(5):  # compiles
        env.step(env.action_space.sample())
    best = 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(steps):
            env.step(env.action_space.sample())
        best = max(best, n * steps / (time.perf_counter() - start))
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=64, help="environments of the vector environments (default 64)")
    parser.add_argument("--steps", type=int, default=200, help="vector steps timed per round (default 200)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the best counts (default 3)")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args()
    tisim.init(precision="f64")
    rows = []
    for task in TASKS:
        single = rate(gymnasium.make(task), args.steps, args.rounds, 1)
        sync = rate(gymnasium.vector.SyncVectorEnv([lambda task=task: gymnasium.make(task)] * args.envs),
                    max(args.steps // 10, 5), args.rounds, args.envs)
        batched = rate(gymnasium.make_vec(task, num_envs=args.envs), args.steps, args.rounds, args.envs)
        rows.append({"task": task, "single": round(single), f"sync_vector_{args.envs}": round(sync),
                     f"simulated_vector_{args.envs}": round(batched), "simulated_over_sync": round(batched / sync, 1)})
        print(f"{task:28s} single {single:9,.0f}/s   SyncVectorEnv x{args.envs} {sync:9,.0f}/s   "
              f"SimulatedVectorEnv x{args.envs} {batched:11,.0f}/s   ({batched / sync:.0f}x)")
    if args.json:
        record = {"what": "environment steps per second of tisim.envs", "units": "environment steps per second",
                  "command": f"python benchmarks/envs.py --envs {args.envs} --steps {args.steps} --rounds "
                             f"{args.rounds}", "machine": {"cores": os.cpu_count(), "architecture": platform.machine()},
                  "software": {"gymnasium": gymnasium.__version__}, "rows": rows}
        with open(args.json, "w") as handle:
            json.dump(record, handle, indent=1)


if __name__ == "__main__":
    main()
