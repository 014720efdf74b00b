# Every robot, every seed: how reliably demos/soft_walker.py learns to walk.
#
# Runs the soft walker's optimization (the same recipe and defaults) for each robot in assets/robots/ and each seed,
# prints one row per run (the distance walked in the 1 s horizon by the first gait and by the best one, iterations,
# seconds) and a summary per robot (how many runs walked at least the target, the range of the best distance), and
# writes every figure to out/soft_walker_seeds.json. These are the figures docs/tutorials/soft_walker.md quotes.
# With --last-bits 1e-12 every input of every simulator is shrunk by a random relative 1e-12
# (tisim.diagnostics.last_bits), as another CPU's rounding would move it: the table should hold all the same.
#
# Command: python demos/soft_walker_seeds.py [--robots biped,quadruped,worm] [--seeds 0-9] [--iterations 60]
#          [--starts 3] [--target 0.25] [--last-bits 0] [--last-bits-seed 1] [--out out]
import argparse
import json
import pathlib
import time

import numpy as np
from soft_walker import STARTS, walk

from tisim.core.assets import ASSETS
from tisim.diagnostics import last_bits


def seed_range(text):
    """"0-9" -> [0, ..., 9]; "3" -> [3]."""
    low, _, high = text.partition("-")
    try:
        seeds = list(range(int(low), int(high or low) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must look like 0-9 or 3, got {text!r}") from None
    if not seeds:
        raise argparse.ArgumentTypeError(f"seeds {text!r} is an empty range")
    return seeds


def run(robot, seed, iterations, starts, target):
    """One optimization; the figures of one table row."""
    lines = []
    sim, _, distances, _, result = walk(robot, iterations, seed, starts, report=lines.append)
    return dict(robot=sim.robot.name, seed=seed, first=distances["first"], best=distances["best"],
                reached=distances["best"] >= target, iterations=result.iterations, seconds=round(result.seconds, 2))


def main(argv=None):
    robots = ",".join(sorted(p.stem for p in (ASSETS / "robots").glob("*.json")))
    parser = argparse.ArgumentParser(description=(
        "Run the soft walker's optimization for every robot and seed and tabulate how far each walks (the first "
        "and the best gait): the figures the soft walker's tutorial quotes. Writes soft_walker_seeds.json."))
    parser.add_argument("--robots", default=robots, help=f"comma-separated robot names (default {robots})")
    parser.add_argument("--seeds", type=seed_range, default=seed_range("0-9"),
                        help="seeds to run: a range like 0-9, or one seed like 3 (default 0-9)")
    parser.add_argument("--iterations", type=int, default=60, help="Adam iterations per run (default 60)")
    parser.add_argument("--starts", type=int, default=STARTS, help=f"gaits side by side per run (default {STARTS})")
    parser.add_argument("--target", type=float, default=0.25, help="distance that counts as walking [m]")
    parser.add_argument("--last-bits", type=float, default=0.0, help="shrink every input by up to this (relative)")
    parser.add_argument("--last-bits-seed", type=int, default=1, help="seed of the --last-bits perturbation")
    parser.add_argument("--out", default="out", help="folder for soft_walker_seeds.json (default out)")
    args = parser.parse_args(argv)
    if args.iterations < 1 or args.starts < 1:
        parser.error(f"--iterations and --starts must be >= 1, got {args.iterations} and {args.starts}")
    if not 0 <= args.last_bits <= 1e-3:
        parser.error(f"--last-bits must be in [0, 1e-3], got {args.last_bits}")
    with last_bits(args.last_bits, args.last_bits_seed):
        rows = table(args)
    summary = summarize(rows, args.target)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "soft_walker_seeds.json"
    settings = dict(iterations=args.iterations, starts=args.starts, target=args.target, last_bits=args.last_bits,
                    last_bits_seed=args.last_bits_seed)
    path.write_text(json.dumps(dict(settings=settings, runs=rows, summary=summary), indent=1) + "\n")
    print(f"wrote {path}")
    return dict(runs=rows, summary=summary, json=path)


def table(args):
    """Every run, printed as it ends."""
    start, rows = time.perf_counter(), []
    print(f"{'robot':>10} {'seed':>4} {'first [m]':>10} {'best [m]':>9} {'iterations':>10} {'seconds':>8}")
    for robot in args.robots.split(","):
        for seed in args.seeds:
            rows.append(run(robot, seed, args.iterations, args.starts, args.target))
            r = rows[-1]
            print(f"{r['robot']:>10} {seed:>4} {r['first']:>+10.3f} {r['best']:>+9.3f} {r['iterations']:>10} "
                  f"{r['seconds']:>8.1f}", flush=True)
    print(f"{len(rows)} runs in {time.perf_counter() - start:.0f} s")
    return rows


def summarize(rows, target):
    """Per robot: how many runs walked at least `target`, the range and median of the best distance, the slowest."""
    summary = {}
    for robot in dict.fromkeys(r["robot"] for r in rows):
        best = np.array([r["best"] for r in rows if r["robot"] == robot])
        seconds = [r["seconds"] for r in rows if r["robot"] == robot]
        s = summary[robot] = dict(reached=int((best >= target).sum()), runs=len(best), best_min=float(best.min()),
                                  best_median=float(np.median(best)), best_max=float(best.max()),
                                  seconds_max=float(max(seconds)))
        print(f"{robot}: {s['reached']} of {s['runs']} runs walked >= {target} m; best {s['best_min']:+.3f} .. "
              f"{s['best_max']:+.3f} m (median {s['best_median']:+.3f}); at most {s['seconds_max']:.1f} s a run")
    return summary


if __name__ == "__main__":
    main()
