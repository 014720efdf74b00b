# Ant gait: Gymnasium's ant, read from its MJCF file with its floor contacts and joint limits, learns to move
# forward (+x) by gradient descent through its physics.
#
# The ant is tisim.systems.Articulation on the tree load_mjcf reads from ant.xml: a free torso, four legs of two
# hinges each, eight motors of gear 150; contacts of the torso's sphere and the legs' capsules with the floor, and
# the hips' and ankles' limits, by tisim's penalty laws, stepped by semi-implicit Euler at 2 ms (MuJoCo steps it at
# 10 ms with its implicit constraint solver; a penalty contact needs the smaller step). Each motor follows a periodic
# pattern, ctrl(t) = 0.5 tanh(sum_h a_h sin(2 pi h f t) + b_h cos(2 pi h f t)), h = 1, 2, f = 2 Hz: 32
# coefficients, optimized with Adam. The gait learns on one cycle: the loss is minus the torso's mean x over the
# last 0.1 s of a 0.5 s rollout, plus 5 / m times the mean square of the torso's height from 0.55 m (left to
# itself, the gait learns to leap: the ant's motors throw it two metres up). Its gradient with respect to the
# 250 x 8 motor commands comes from one backward pass through the rollout (contacts, friction and limits
# included); the chain rule through the pattern gives the coefficients' gradient, normalized to unit length per
# gait (a stride that nearly flips the ant gives a gradient far longer than usual). Over longer windows the ant's
# bounding turns chaotic and the gradient with it: learned on 2 s, the gaits wander (docs/tutorials/articulated.md).
# Five gaits, drawn from seeds 0 to 4, learn side by side as one batch; each keeps the best gait it reached, which
# then walks for 2 s. It bounds and tumbles rather than walks.
# Compiling the ant's step and its reverse takes about ten minutes the first time on 2 cores (Taichi's passes over
# one long straight-line kernel: docs/speed.md); Taichi's offline cache keeps both for later runs.
# Prints the distance each seed's gait goes in 2 s, first and best; writes out/ant_gait.gif (the best gait, seen
# from the side, in 3D: needs Vulkan), out/ant_gait.png (the distance per iteration and seed) and out/ant_gait.json.
#
# Command: python demos/ant_gait.py [--out out] [--iterations 80] [--seeds 5] [--short]
import argparse
import json
import os
import pathlib
import time

import numpy as np

import tisim
from tisim.gui import picture_or_reason
from tisim.optim import Adam, minimize
from tisim.systems.articulation import Articulation, load_mjcf

WINDOW, WALK, DT, LAST = 250, 1000, 0.002, 50  # steps learned on, steps walked, s, steps of the last 0.1 s
FREQUENCY, HARMONICS, AMPLITUDE, LEARNING_RATE = 2.0, 2, 0.5, 0.02
STANCE, KEEP_LOW = 0.55, 5.0  # [m] the torso's height standing; the weight [1/m] of its mean squared rise from it


def ant():
    """Gymnasium's ant with its floor and limits, stepped by Euler at 2 ms."""
    import gymnasium
    tree = load_mjcf(os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", "ant.xml"))
    tree.integrator, tree.timestep = "euler", DT
    return tree


def pattern_basis(T, dt):
    """(T, 2H) sines and cosines of the gait's harmonics."""
    t = np.arange(T)[:, None] * dt
    h = np.arange(1, HARMONICS + 1)[None, :]
    return np.concatenate([np.sin(2 * np.pi * h * FREQUENCY * t), np.cos(2 * np.pi * h * FREQUENCY * t)], axis=1)


def learn(iterations, seeds, report=print):
    """Optimize one gait per seed side by side; returns the simulator, the first and the best gaits' coefficients
    (seeds, 2H, 8), the distance each walks in the horizon [m] and the per-iteration distances."""
    tree = ant()
    sim = Articulation(horizon=WINDOW, batch=seeds, tree=tree)
    basis = pattern_basis(sim.T, sim.dt)
    weights = np.zeros(sim.n_coordinates)
    weights[0] = -1.0 / LAST  # minus the torso's x, averaged over the window's last 0.1 s
    forward = tisim.losses.TerminalSum({"q": weights}, steps=range(sim.T - LAST + 1, sim.T + 1))
    stance = np.full((sim.T + 1, sim.n_coordinates), np.nan)  # NaN: not tracked
    stance[:, 2] = STANCE
    loss = forward + tisim.losses.Tracking({"q": stance}, weights=KEEP_LOW / (sim.T + 1))
    start = sim.rollout()["q"][:, 0, 0]

    def commands(gait, basis=basis):
        return AMPLITUDE * np.tanh(np.einsum("tk,bka->bta", basis, gait))

    curves = []

    def objective(values):
        a = commands(values["gait"])
        sim.set_actions(a)
        g = sim.gradient(loss)
        value = np.where(np.isfinite(g.per_batch), g.per_batch, np.inf)
        better = value < best["loss"]
        best["loss"][better], best["gait"][better] = value[better], values["gait"][better]
        grad = np.einsum("tk,bta->bka", basis, np.nan_to_num(g.actions) * (AMPLITUDE - a * a / AMPLITUDE))
        grad /= np.linalg.norm(grad, axis=(1, 2), keepdims=True) + 1e-12
        curves.append(-sim.evaluate(forward) - start)
        return float(np.sum(np.where(np.isfinite(value), value, 0.0))), {"gait": grad}

    def progress(iteration, values, value):
        report(f"iteration {iteration:3d}: the torso's mean x over the window's last 0.1 s, per seed [m]: "
               f"{np.array2string(curves[-1], precision=2)}")

    first = np.stack([np.random.default_rng(seed).normal(scale=0.5, size=(basis.shape[1], 8))
                      for seed in range(seeds)])
    best = {"loss": np.full(seeds, np.inf), "gait": first.copy()}
    started = time.perf_counter()
    minimize(objective, {"gait": first}, optimizer=Adam(lr=LEARNING_RATE), iterations=iterations, callback=progress)
    seconds = time.perf_counter() - started
    walker = Articulation(horizon=WALK, batch=seeds, tree=tree)  # the same kernels: the horizon is not compiled in
    long = pattern_basis(walker.T, walker.dt)
    distances = {}
    for name, gait in (("first", first), ("best", best["gait"])):
        walker.set_actions(commands(gait, long))
        distances[name] = walker.rollout()["q"][:, -1, 0] - start
    return walker, commands(best["gait"], long), distances, np.array(curves), seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=(
        "Gymnasium's ant, with its floor contacts and joint limits, learns a periodic pattern for its motors by "
        "gradients through its physics, one gait per seed. Writes ant_gait.json, ant_gait.png and ant_gait.gif (3D: "
        "needs Vulkan). The first run compiles for about ten minutes."))
    parser.add_argument("--out", default="out", help="folder for ant_gait.gif, ant_gait.png and ant_gait.json")
    parser.add_argument("--iterations", type=int, default=80, help="Adam iterations (>= 1)")
    parser.add_argument("--seeds", type=int, default=5, help="gaits learned side by side, from seeds 0, 1, ...")
    parser.add_argument("--short", action="store_true", help="5 iterations and 2 seeds, for tests")
    args = parser.parse_args(argv)
    if args.iterations < 1 or args.seeds < 1:
        parser.error(f"--iterations and --seeds must be >= 1, got {args.iterations} and {args.seeds}")
    iterations, seeds = (5, 2) if args.short else (args.iterations, args.seeds)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tisim.init()
    print("compiling the ant's step and its reverse (about ten minutes the first time; cached afterwards)")
    sim, best, distances, curves, seconds = learn(iterations, seeds)
    heights = sim.rollout()["q"][:, :, 2]
    for seed in range(seeds):
        print(f"seed {seed}: walked {distances['first'][seed]:+.2f} m in 2 s with its first gait, "
              f"{distances['best'][seed]:+.2f} m with its best")
    figures = dict(seeds=seeds, iterations=iterations, seconds=round(seconds, 1),
                   first_m=distances["first"].round(3).tolist(), best_m=distances["best"].round(3).tolist(),
                   best_torso_height_range_m=[heights.min(axis=1).round(3).tolist(),
                                              heights.max(axis=1).round(3).tolist()])
    (out / "ant_gait.json").write_text(json.dumps(figures, indent=1) + "\n")

    import matplotlib.pyplot as plt
    figure, axes = plt.subplots(figsize=(6.4, 3.6), layout="constrained")
    for seed in range(seeds):
        axes.plot(np.arange(1, len(curves) + 1), curves[:, seed], label=f"seed {seed}")
    axes.set(xlabel="iteration", ylabel="torso's mean x at 0.4-0.5 s [m]",
             title="ant: gaits learned through the physics, one per seed")
    axes.legend(loc="upper left", fontsize=8)
    figure.savefig(out / "ant_gait.png", dpi=100)
    plt.close(figure)

    def pictures():
        from tisim import viz
        from tisim.viz.bodies import articulation_frames
        b = int(np.argmax(distances["best"]))
        sim.set_actions(np.broadcast_to(best[b], (sim.B,) + best[b].shape))
        frames = articulation_frames(sim.tree, sim.rollout()["q"][b], every=20, size=(640, 260),
                                     direction=(0.0, 0.3, 1.0), margin=0.2)
        return viz.save_gif(out / "ant_gait.gif", frames, fps=25)
    gif = picture_or_reason(pictures)
    print(f"wrote {out / 'ant_gait.json'}, {out / 'ant_gait.png'}" + (f" and {gif}" if gif else ""))
    return dict(figures, gif=gif)


if __name__ == "__main__":
    main()
