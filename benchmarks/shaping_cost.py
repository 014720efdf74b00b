# What the kinematic tools cost: each clay task's scene (tisim/envs/shape.py) stepped by Shaping, beside the same
# clay stepped by MPM alone (no tools; the same material, floor and parameters), at 500 steps and batch 1: one
# rollout + loss, and one rollout + loss + backward pass ("what an optimizer iteration pays"), medians over repeats,
# the two simulators interleaved in one process; compile time (first call) left out.
#
# Command: python benchmarks/shaping_cost.py [--repeats 20] [--threads 1] [--out out]
import argparse
import json
import pathlib
import statistics
import time

from machine import describe

import tisim
from tisim.envs import shape
from tisim.losses import TerminalTarget
from tisim.systems.mpm import MPM


def clock(call):
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description="The cost of Shaping's tools against MPM alone.")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls of each kind (default 20)")
    parser.add_argument("--threads", type=int, default=1, help="Taichi's CPU threads (default 1)")
    parser.add_argument("--out", default="out", help="folder for shaping_cost.json (default out)")
    args = parser.parse_args()
    tisim.init(precision="f64", threads=args.threads)
    rows = []
    for task in ("Pinch", "RollingPin", "Move"):
        kind = getattr(shape, task)
        tools = kind.scene()
        tools.set_actions(shape.plan_actions(kind.hidden_plan(0)))
        alone = MPM(horizon=shape.STEPS, body=kind.clay(), n_grid=shape.N_GRID, **shape.CLAY, **kind.SETTINGS)
        times = {}
        for name, sim in (("Shaping", tools), ("MPM", alone)):
            loss = TerminalTarget({"pos": kind.clay().particles + 0.01})
            sim.gradient(loss)  # compiles
            times[name] = (sim, loss, [], [])
        for _ in range(args.repeats):
            for sim, loss, forward, full in times.values():
                forward.append(clock(lambda: sim.evaluate(loss)))
                full.append(clock(lambda: sim.gradient(loss).params))
        row = {"task": task, "points": int(tools.n_particles), "tools": int(tools.n_tools)}
        for name, (_, _, forward, full) in times.items():
            row[name] = {"rollout_ms": 1e3 * statistics.median(forward),
                         "rollout_and_gradient_ms": 1e3 * statistics.median(full)}
        row["ratio_rollout"] = row["Shaping"]["rollout_ms"] / row["MPM"]["rollout_ms"]
        row["ratio_gradient"] = row["Shaping"]["rollout_and_gradient_ms"] / row["MPM"]["rollout_and_gradient_ms"]
        rows.append(row)
    lines = ["| task | points | tools | MPM: rollout / + gradient [ms] | Shaping: rollout / + gradient [ms] | "
             "ratio |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['task']} | {r['points']} | {r['tools']} | {r['MPM']['rollout_ms']:.0f} / "
                     f"{r['MPM']['rollout_and_gradient_ms']:.0f} | {r['Shaping']['rollout_ms']:.0f} / "
                     f"{r['Shaping']['rollout_and_gradient_ms']:.0f} | {r['ratio_rollout']:.2f} / "
                     f"{r['ratio_gradient']:.2f} |")
    print("\n".join(lines))
    folder = pathlib.Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    figures = {"benchmark": "shaping_cost", "date": time.strftime("%Y-%m-%d"), "steps": shape.STEPS,
               "repeats": args.repeats, "machine": describe(f"{args.threads} thread(s)"), "rows": rows}
    (folder / "shaping_cost.json").write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
