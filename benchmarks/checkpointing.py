# Memory and time of the backward pass, unrolled against checkpointed, as the horizon grows: a pendulum at
# T = 1e3, 1e4, 1e5 steps, the 256-particle reference mass-spring body at T = 1e3, 1e4 (906 actuated springs: its
# actions, O(T) in any method, weigh as much as its states) and the 33-particle worm robot (5 actuators) at
# T = 1e3, 1e4, 1e5, all f64. Each case runs in its own process, so that the resident memory it adds (its arrays,
# kept on the simulator after the pass) is its own; time is the median of a few gradient calls after a first,
# compiling one.
#
# Command: python benchmarks/checkpointing.py [--repeats 3] [--out out]
import argparse
import json
import pathlib
import subprocess
import sys

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
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description="Memory and time of unrolled against checkpointed gradients.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="out")
    args = parser.parse_args(argv)
    lines = ["| system | T | unrolled MB | checkpointed MB | memory ratio | unrolled s | checkpointed s | time ratio |",
             "|---|---|---|---|---|---|---|---|"]
    cases = (("pendulum", "pendulum", (1_000, 10_000, 100_000)),
             ("mass_spring", "mass-spring 256", (1_000, 10_000)),
             ("worm", "mass-spring worm", (1_000, 10_000, 100_000)))
    for name, system, horizons in cases:
        for T in horizons:
            full, saved = (run(name, T, method, args.repeats) for method in ("unrolled", "checkpointed"))
            assert abs(full["value"] - saved["value"]) <= 1e-9 * abs(full["value"]), (full, saved)
            lines.append(f"| {system} | {T:,} | {full['kib'] / 1024:.1f} | {saved['kib'] / 1024:.1f} | "
                         f"{saved['kib'] / max(full['kib'], 1):.2f} | {full['seconds']:.3f} | "
                         f"{saved['seconds']:.3f} | {saved['seconds'] / full['seconds']:.2f} |")
            print(lines[-1], flush=True)
    table = "\n".join(lines)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "checkpointing.md").write_text(table + "\n")
    print(table)
    return table


if __name__ == "__main__":
    main()
