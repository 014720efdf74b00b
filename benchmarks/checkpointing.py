# Memory and time of the gradient, unrolled against checkpointed (and forward mode for the pendulum), as the horizon
# grows: a pendulum at T = 1e3, 1e4, 1e5 steps, the 256-particle reference mass-spring body at T = 1e3, 1e4 (906
# actuated springs: its actions, O(T) in any method, weigh as much as its states) and the 33-particle worm robot
# (5 actuators) at T = 1e3, 1e4, 1e5, and MPM's default 2D jelly (169 points on a 32 x 32 grid, the grid recomputed
# in the backward pass) at T = 1e3, 1e4, all f64. Each case runs in its own process, so that the resident memory it adds
# (its arrays, kept on the simulator after the pass) is its own; time is the median of a few gradient calls after a
# first, compiling one, at the small size and at the measured one.
#
# Command: python benchmarks/checkpointing.py [--repeats 3] [--systems pendulum,mass_spring,worm,mpm] [--out out]
#          -> out/checkpointing.md and .png
import argparse
import json
import pathlib
import subprocess
import sys

import numpy as np

CASE = """
import json, statistics, sys, time
import numpy as np
import tisim
from tisim.systems.mass_spring import MassSpring, mean_x_weights, reference_actions

def resident_kib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))

system, horizon, method, repeats = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
tisim.init()

def make(T):
    if system == "mpm":
        sim = tisim.systems.MPM(horizon=T)
        return sim, tisim.losses.TerminalTarget({"pos": sim.initial_state["pos"][0] + 0.01})
    if system == "pendulum":
        sim = tisim.systems.Pendulum(horizon=T, theta=1.0)
        return sim, tisim.losses.TerminalTarget({"theta": 0.0})
    sim = MassSpring(horizon=T, robot="worm" if system == "worm" else None)
    sim.set_actions(reference_actions(sim))
    return sim, tisim.losses.TerminalSum(mean_x_weights(sim))

small, small_loss = make(10)
small.gradient(small_loss, method=method)  # compile first: compiling takes memory of its own
before = resident_kib()
sim, loss = make(horizon)
sim.gradient(loss, method=method).params  # untimed: kernel variants for this size (serial or not) compile here
times = []
for _ in range(repeats):
    started = time.perf_counter()
    g = sim.gradient(loss, method=method)
    g.params
    times.append(time.perf_counter() - started)
print(json.dumps({"kib": resident_kib() - before, "seconds": statistics.median(times), "value": g.value}))
"""


def run(system, horizon, method, repeats):
    out = subprocess.run([sys.executable, "-c", CASE, system, str(horizon), method, str(repeats)],
                         capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{system}, T={horizon}, {method} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# forward mode cannot compile MassSpring's step (a Taichi 1.7 limit) and does not run phased steps (MPM)
METHODS = {"pendulum": ("unrolled", "checkpointed", "forward_mode"), "mass_spring": ("unrolled", "checkpointed"),
           "worm": ("unrolled", "checkpointed"), "mpm": ("unrolled", "checkpointed")}


def main(argv=None):
    parser = argparse.ArgumentParser(description="Memory and time of unrolled, checkpointed and forward gradients.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="out")
    parser.add_argument("--systems", default="pendulum,mass_spring,worm,mpm",
                        help="comma-separated subset of pendulum, mass_spring, worm, mpm")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    lines = ["| system | T | method | resident MB added | memory / unrolled | seconds | time / unrolled |",
             "|---|---|---|---|---|---|---|"]
    cases = (("pendulum", "pendulum", (1_000, 10_000, 100_000)),
             ("mass_spring", "mass-spring 256", (1_000, 10_000)),
             ("worm", "mass-spring worm", (1_000, 10_000, 100_000)),
             ("mpm", "MPM jelly 169 points", (1_000, 10_000)))
    results = {}
    chosen = args.systems.split(",")
    unknown = sorted(set(chosen) - set(METHODS))
    if unknown:
        parser.error(f"--systems: unknown {unknown}; choose from {sorted(METHODS)}")
    for name, system, horizons in cases:
        if name not in chosen:
            continue
        for T in horizons:
            full = None
            for method in METHODS[name]:
                row = run(name, T, method, args.repeats)
                full = full or row
                assert abs(row["value"] - full["value"]) <= 1e-9 * abs(full["value"]), (full, row)
                results.setdefault((system, method), []).append((T, row["kib"] / 1024, row["seconds"]))
                lines.append(f"| {system} | {T:,} | {method} | {row['kib'] / 1024:.1f} | "
                             f"{row['kib'] / max(full['kib'], 1):.2f} | {row['seconds']:.3f} | "
                             f"{row['seconds'] / full['seconds']:.2f} |")
                print(lines[-1], flush=True)
    table = "\n".join(lines)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "checkpointing.md").write_text(table + "\n")
    plot(results, out / "checkpointing.png")
    print(table)
    return table


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (memory, time) = plt.subplots(1, 2, figsize=(10, 4))
    for (system, method), rows in results.items():
        T, mb, seconds = np.array(rows).T
        style = {"unrolled": "o-", "checkpointed": "s--", "forward_mode": "^:"}[method]
        memory.loglog(T, np.maximum(mb, 0.1), style, label=f"{system}, {method}")
        time.loglog(T, seconds, style, label=f"{system}, {method}")
    memory.set(xlabel="horizon T [steps]", ylabel="resident memory added [MB]")
    time.set(xlabel="horizon T [steps]", ylabel="rollout + gradient [s]")
    memory.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
