# Pinch a block of clay into a target shape with two fingers, by gradient descent through the material point method.
#
# Two capsule fingertips stand on either side of a 2D block of von Mises clay resting on the floor. The target is
# the shape a hidden pinch leaves behind: for 0.1 s the fingers move as a plan the seed draws (each finger's
# velocity, constant over five pieces of 20 ms), press into the clay and leave it dented. Starting from fingers that
# stand still, Adam fits a plan of the same kind, the fingers' velocities over 25 intervals of 4 ms (100 numbers), to
# the loss: the points' mean squared distance to where the hidden pinch left them, through every step of the
# simulation, contact and plastic flow included. The cross-entropy method (CEM, gradient-free: a population of 32
# plans a round, run as one batch) fits the same plan in the same wall-clock.
# The score is the intersection over union (IoU) of the cells the clay fills with those the target fills, and
# PlasticineLab's normalized incremental IoU, (IoU - IoU at the start) / (1 - IoU at the start). The scene and the
# hidden pinches are tisim/envs/shape.py's Pinch, the task reinforcement learners get as tisim/Pinch-v0.
#
# Command: python demos/plasticine_pinch.py [--seeds 3] [--iterations 90] [--intervals 25] [--lr 0.05] [--out out]
#          -> out/plasticine_pinch.json (the figures per seed) and out/plasticine_pinch.gif (the first seed's
#             pinch found by Adam, the target's points as rings)
import argparse
import json
import pathlib
import time

import numpy as np

import tisim
from tisim import viz
from tisim.envs.shape import N_GRID, STEPS, Pinch, plan_actions
from tisim.losses import TerminalTarget
from tisim.optim import Adam, minimize
from tisim.systems.mpm import iou


def score(points, target):
    """IoU of the cells the clay fills, on cells as wide as the points' spacing."""
    return iou(points, target, cells=2 * N_GRID)


def fit_by_gradient(sim, loss, iterations, intervals, lr, scale=1.0):
    """Adam on the plan, in two stages: `lr` for the first two thirds of the iterations (the fingers have to reach
    the clay), a fifth of it for the rest; each iteration one rollout and one backward pass. Adam moves the plan in
    units of `scale` (per entry of a tool's action: 1 m/s for a velocity, more rad/s for a turn).
    (plan, seconds, loss per iteration)"""
    def objective(values):
        sim.set_actions(plan_actions(scale * values["plan"]))
        g = sim.gradient(loss)
        return g.value, {"plan": scale * g.actions.reshape((1, intervals, -1) + sim.action_shape).sum(axis=2)}

    started, plan, history = time.perf_counter(), np.zeros((1, intervals) + sim.action_shape), []
    first = 2 * iterations // 3
    for rate, count in ((lr, first), (lr / 5, iterations - first)):
        result = minimize(objective, {"plan": plan}, optimizer=Adam(lr=rate), iterations=count, progress=True,
                          description=f"Adam, lr {rate:g}")
        plan = result.values["plan"]
        history += [float(h["loss"]) for h in result.history]
    return scale * plan, time.perf_counter() - started, history


def fit_by_cem(loss_of, seconds, seed, shape, population=32, elites=4):
    """CEM on a plan of the given shape (intervals, tools, 2) for `seconds` of wall-clock: sample, keep the best
    elites, refit mean and spread."""
    rng = np.random.default_rng(seed)
    mean, spread = np.zeros(shape), np.full(shape, 0.5)
    best, best_plan, rounds, started = np.inf, mean, 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        samples = mean + spread * rng.normal(size=(population,) + shape)
        values = loss_of(samples)
        order = np.argsort(values)
        if values[order[0]] < best:
            best, best_plan = float(values[order[0]]), samples[order[0]].copy()
        chosen = samples[order[:elites]]
        mean = 0.8 * chosen.mean(axis=0) + 0.2 * mean
        spread = 0.8 * chosen.std(axis=0) + 0.2 * spread + 1e-3
        rounds += 1
    return best_plan[None], rounds * population


def main(seeds=3, iterations=90, intervals=25, lr=0.05, out="out"):
    tisim.init(precision="f64")
    sim, population = Pinch.scene(), Pinch.scene(batch=32)
    folder = pathlib.Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    figures = dict(seeds=[], iterations=iterations, intervals=intervals, lr=lr, steps=STEPS, dt=sim.dt, n_grid=N_GRID,
                   points=sim.n_particles)
    for seed in range(seeds):
        sim.set_actions(plan_actions(Pinch.hidden_plan(seed)))
        target = sim.rollout()["pos"][0, -1]
        loss = TerminalTarget({"pos": target}, weights={"pos": 1.0 / sim.n_particles})
        sim.set_actions(np.zeros_like(sim.actions))
        start = sim.rollout()["pos"][0, -1]

        def scored(plan):
            sim.set_actions(plan_actions(plan))
            final = sim.rollout()["pos"][0, -1]
            return dict(loss=float(sim.evaluate(loss)[0]), iou=score(final, target))

        plan, seconds, history = fit_by_gradient(sim, loss, iterations, intervals, lr)
        adam = dict(scored(plan), seconds=seconds, rollouts=iterations, loss_history=history)

        def loss_of(samples):
            population.set_actions(plan_actions(samples))
            return population.evaluate(loss)

        cem_plan, rollouts = fit_by_cem(loss_of, seconds, seed, (intervals,) + sim.action_shape)
        cem = dict(scored(cem_plan), seconds=seconds, rollouts=rollouts)
        base = score(start, target)
        for result in (adam, cem):
            result["normalized_incremental_iou"] = (result["iou"] - base) / (1.0 - base)
        figures["seeds"].append(dict(seed=seed, iou_at_start=base, adam=adam, cem=cem))
        print(f"seed {seed}: IoU at the start {base:.3f}; Adam {adam['iou']:.3f} (loss {adam['loss']:.2e}, "
              f"{seconds:.0f} s); CEM {cem['iou']:.3f} (loss {cem['loss']:.2e}, {rollouts} rollouts)")
        if seed == 0:
            sim.set_actions(plan_actions(plan))
            traj = sim.rollout()
            pictures = viz.frames(sim, traj, {**sim.params, "target": target[None]}, every=20,
                                  bounds=(0.25, 0.75, 0.02, 0.27), size=(360, 180),
                                  caption="Adam's pinch (rings: the target)")
            viz.save_gif(folder / "plasticine_pinch.gif", pictures, fps=10)
    (folder / "plasticine_pinch.json").write_text(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(
        "Pinch a block of clay into the shape a hidden pinch leaves, by Adam through the material point method and by "
        "CEM in the same wall-clock. Writes plasticine_pinch.json and plasticine_pinch.gif."))
    parser.add_argument("--seeds", type=int, default=3, help="targets, one hidden pinch each (default 3)")
    parser.add_argument("--iterations", type=int, default=90, help="Adam iterations (default 90)")
    parser.add_argument("--intervals", type=int, default=25, help="pieces of the fitted plan (a divisor of 500)")
    parser.add_argument("--lr", type=float, default=0.05, help="Adam's first learning rate [m/s]")
    parser.add_argument("--out", default="out", help="folder for plasticine_pinch.json and .gif (default out)")
    args = parser.parse_args()
    for name in ("seeds", "iterations"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if not args.lr > 0:
        parser.error(f"--lr must be > 0, got {args.lr}")
    if args.intervals < 1 or STEPS % args.intervals:
        parser.error(f"--intervals must divide {STEPS}, got {args.intervals}")
    main(args.seeds, args.iterations, args.intervals, args.lr, args.out)
