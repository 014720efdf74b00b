# Per-iteration cost of every system: one rollout + loss, and one rollout + loss + backward pass + dL/da ("what an
# optimizer iteration pays", with fresh actions each time), at T=500 and batch 1, and the backward/forward ratio.
# Same process, interleaved, medians over repeats; compile time (first call) reported apart.
#
# Command: python benchmarks/systems.py [--horizon 500] [--batch 1] [--repeats 50] [--arch cpu] [--out out]
import argparse
import pathlib
import statistics
import time

import numpy as np

import tisim
from tisim.losses import Effort, TerminalTarget
from tisim.robots import grid

CASES = {  # system (and a variant's name): (constructor values, a terminal target on its states)
    "ScalarLinear": ({}, {"x": 2.0}),
    "Linear": ({"n": 8, "m": 2}, {"x": np.zeros(8)}),
    "Pendulum": ({"theta": 1.0}, {"theta": 0.0}),
    "DoublePendulum": ({"theta1": 1.0, "theta2": 0.5}, {"theta1": 0.0}),
    "Cartpole": ({"theta": np.pi}, {"theta": 0.0, "x": 0.0}),
    "BouncingBall": ({"py": 1.0, "vx": 1.0}, {"px": 2.0}),
    "BouncingBall impact": ({"contact": "impact", "py": 1.0, "vx": 1.0}, {"px": 2.0}),
    "BouncingBall qp": ({"contact": "qp", "py": 1.0, "vx": 1.0}, {"px": 2.0}),
    "BouncingBall qp kappa": ({"contact": "qp", "kappa": 1e-4, "py": 1.0, "vx": 1.0}, {"px": 2.0}),
    "SlidingBlock": ({"v": 1.0}, {"x": 0.5}),
    "SlidingBlock qp": ({"friction": "qp", "v": 1.0}, {"x": 0.5}),
    "ResidualPendulum": ({"theta": 1.0}, {"theta": 0.0}),
    "StiffChain": ({}, {"x": np.zeros(3)}),
    "Rigid2D": ({"n_discs": 2, "n_boxes": 1}, {"px": np.zeros(3), "py": np.zeros(3)}),
    "Rigid2D qp": ({"n_discs": 2, "n_boxes": 1, "contact": "qp"}, {"px": np.zeros(3), "py": np.zeros(3)}),
    "Rigid2D qp unrolled": ({"n_discs": 2, "n_boxes": 1, "contact": "qp", "solver_gradient": "unrolled"},
                            {"px": np.zeros(3), "py": np.zeros(3)}),
    "Rigid2D qp sweeps=1": ({"n_discs": 2, "n_boxes": 1, "contact": "qp", "sweeps": 1},
                            {"px": np.zeros(3), "py": np.zeros(3)}),
    "Rigid2D billiards": ({"n_discs": 3, "ground": "off", "g": 0.0, "px": [0.0, 0.3, 0.6], "vx": [1.0, 0.0, 0.0]},
                          {"px": np.zeros(3), "py": np.zeros(3)}),
    "Rigid2D billiards qp": ({"n_discs": 3, "ground": "off", "g": 0.0, "px": [0.0, 0.3, 0.6], "vx": [1.0, 0.0, 0.0],
                              "contact": "qp", "sweeps": 1}, {"px": np.zeros(3), "py": np.zeros(3)}),
    "MassSpring": ({"robot": grid(8, 4)}, {"pos": grid(8, 4).particles + [0.1, 0.0]}),  # 32 particles, 98 springs
}


def clock(call):
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def measure(name, horizon, batch, repeats):
    values, target = CASES[name]
    system = getattr(tisim.systems, name.split()[0])
    started = time.perf_counter()
    sim = system(horizon=horizon, batch=batch, **values)
    loss = TerminalTarget(target) + 1e-3 * Effort()
    sim.gradient(loss)
    first = time.perf_counter() - started
    shape = sim.actions.shape
    pool = [np.random.default_rng(i).normal(scale=0.1, size=shape) for i in range(4)]
    forward, full = [], []
    for i in range(repeats):
        u = pool[i % 4]
        forward.append(clock(lambda: (sim.set_actions(u), sim.evaluate(loss))))
        full.append(clock(lambda: (sim.set_actions(u), sim.gradient(loss).actions)))
    f, g = statistics.median(forward), statistics.median(full)
    size = sim.state_layout.size
    return f"| {name} | {size} | {first * 1e3:.0f} | {f * 1e3:.3f} | {g * 1e3:.3f} | {(g - f) / f:.2f} |"


def main(argv=None):
    parser = argparse.ArgumentParser(description="Per-iteration cost of every tisim system.")
    parser.add_argument("--horizon", type=int, default=500)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--arch", default="cpu")
    parser.add_argument("--out", default="out")
    args = parser.parse_args(argv)
    tisim.init(arch=args.arch)
    lines = [f"T={args.horizon}, B={args.batch}, arch={args.arch}, f64; times in ms, medians of {args.repeats}; "
             "backward/forward = (gradient - rollout) / rollout.", "",
             "| system | S | first call (compile) | rollout + loss | rollout + gradient | backward/forward |",
             "|---|---|---|---|---|---|"]
    lines += [measure(name, args.horizon, args.batch, args.repeats) for name in CASES]
    table = "\n".join(lines)
    print(table)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "systems.md").write_text(table + "\n")
    return table


if __name__ == "__main__":
    main()
