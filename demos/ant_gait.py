# Ant gait: Gymnasium's ant, read from its MJCF file with its floor contacts and joint limits, learns to walk
# forward (+x) by gradient descent through its physics.
#
# The ant is tisim.systems.Articulation on the tree load_mjcf reads from ant.xml: a free torso, four legs of two
# hinges each, eight motors of gear 150; contacts of the torso's sphere and the legs' capsules with the floor, and
# the hips' and ankles' limits, by tisim's penalty laws, stepped by semi-implicit Euler at 2 ms (MuJoCo steps it at
# 10 ms with its implicit constraint solver; a penalty contact needs the smaller step). Each motor follows a periodic
# pattern, ctrl(t) = 0.3 tanh(sum_h a_h sin(2 pi h f t) + b_h cos(2 pi h f t)), h = 1, 2, f = 2 Hz: 32
# coefficients, optimized with Adam over a 2 s walk. The loss is minus the torso's mean x over the walk's last 0.1 s,
# plus 5 / m^2 times the mean square of the torso's height from 0.55 m and 20 times the mean square of the x and y
# parts of its orientation's quaternion (its tilt: 0 upright). Left to reach as far as it can, the ant's strong
# motors make it leap and tumble, and its rollout grows too sensitive to its actions for a useful gradient over 2 s;
# kept level and low, and at 0.3 of the motors' range, it walks, and the gradient over the whole walk serves. Its
# gradient with respect to the 1000 x 8 motor commands comes from one backward pass through the rollout (contacts,
# friction and limits included); the chain rule through the pattern gives the coefficients' gradient, normalized to
# unit length per gait (a stride that nearly flips the ant gives a gradient far longer than usual). The iterates
# still wander, so each gait keeps the best it reached. Five gaits, drawn from seeds 0 to 4, learn side by side as
# one batch.
# Compiling the ant's step and its reverse takes about ten to fifteen minutes the first time on 2 cores (Taichi's
# passes over one long straight-line kernel: docs/speed.md); Taichi's offline cache keeps both for later runs.
# Prints the distance each seed's gait goes in 2 s, first and best, and how far its torso tilts; writes
# out/ant_gait.gif (the best gait, seen from the side, in 3D: needs Vulkan), out/ant_gait.png (the distance per
# iteration and seed) and out/ant_gait.json.
#
# Command: python demos/ant_gait.py [--out out] [--iterations 150] [--seeds 5] [--short]
import argparse
import json
import pathlib
import time

import numpy as np

import tisim
from tisim.envs.walk import ant_tree
from tisim.gui import picture_or_reason
from tisim.optim import Adam, minimize
from tisim.systems.articulation import Articulation

WALK, LAST = 1000, 50  # steps walked (2 s at the tree's 2 ms), steps of the last 0.1 s
FREQUENCY, HARMONICS, AMPLITUDE, LEARNING_RATE = 2.0, 2, 0.3, 0.02
STANCE, KEEP_LOW = 0.55, 5.0  # [m] the torso's height standing; the weight [1/m^2] of its mean squared rise from it
KEEP_LEVEL = 20.0  # the weight of the mean square of the torso's quaternion's x and y parts (sin^2 of half its tilt)


def pattern_basis(T, dt):
    """(T, 2H) sines and cosines of the gait's harmonics."""
    t = np.arange(T)[:, None] * dt
    h = np.arange(1, HARMONICS + 1)[None, :]
    return np.concatenate([np.sin(2 * np.pi * h * FREQUENCY * t), np.cos(2 * np.pi * h * FREQUENCY * t)], axis=1)


def learn(iterations, seeds, report=print):
    """Optimize one gait per seed side by side; returns the simulator, each seed's best motor commands (seeds, T, 8),
    the distance the first and the best gaits walk [m] and the per-iteration distances."""
    tree = ant_tree()
    sim = Articulation(horizon=WALK, batch=seeds, tree=tree)
    basis = pattern_basis(sim.T, sim.dt)
    weights = np.zeros(sim.n_coordinates)
    weights[0] = -1.0 / LAST  # minus the torso's x, averaged over the walk's last 0.1 s
    forward = tisim.losses.TerminalSum({"q": weights}, steps=range(sim.T - LAST + 1, sim.T + 1))
    stance = np.full((sim.T + 1, sim.n_coordinates), np.nan)  # NaN: not tracked
    stance[:, 2] = STANCE
    level = np.full((sim.T + 1, sim.n_coordinates), np.nan)
    level[:, 4:6] = 0.0  # the free joint's coordinates: x, y, z, then the quaternion w, x, y, z
    loss = (forward + tisim.losses.Tracking({"q": stance}, weights=KEEP_LOW / (sim.T + 1))
            + tisim.losses.Tracking({"q": level}, weights=KEEP_LEVEL / (sim.T + 1)))
    start = sim.rollout()["q"][:, 0, 0]

    def commands(gait):
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
        if iteration % 10 == 0 or iteration == iterations:
            report(f"iteration {iteration:3d}: the torso's mean x over the walk's last 0.1 s, per seed [m]: "
                   f"{np.array2string(curves[-1], precision=2)}")

    first = np.stack([np.random.default_rng(seed).normal(scale=0.5, size=(basis.shape[1], 8))
                      for seed in range(seeds)])
    best = {"loss": np.full(seeds, np.inf), "gait": first.copy()}
    started = time.perf_counter()
    minimize(objective, {"gait": first}, optimizer=Adam(lr=LEARNING_RATE), iterations=iterations, callback=progress)
    seconds = time.perf_counter() - started
    distances = {}
    for name, gait in (("first", first), ("best", best["gait"])):
        sim.set_actions(commands(gait))
        distances[name] = sim.rollout()["q"][:, -1, 0] - start
    return sim, commands(best["gait"]), distances, np.array(curves), seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=(
        "Gymnasium's ant, with its floor contacts and joint limits, learns a periodic pattern for its motors by "
        "gradients through its physics, one gait per seed. Writes ant_gait.json, ant_gait.png and ant_gait.gif (3D: "
        "needs Vulkan). The first run compiles for ten to fifteen minutes."))
    parser.add_argument("--out", default="out", help="folder for ant_gait.gif, ant_gait.png and ant_gait.json")
    parser.add_argument("--iterations", type=int, default=150, help="Adam iterations (>= 1)")
    parser.add_argument("--seeds", type=int, default=5, help="gaits learned side by side, from seeds 0, 1, ...")
    parser.add_argument("--short", action="store_true",
                        help="5 iterations, for tests (with the default 5 seeds it shares the full run's compile)")
    args = parser.parse_args(argv)
    if args.iterations < 1 or args.seeds < 1:
        parser.error(f"--iterations and --seeds must be >= 1, got {args.iterations} and {args.seeds}")
    iterations, seeds = (5 if args.short else args.iterations), args.seeds
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tisim.init()
    print("compiling the ant's step and its reverse (ten to fifteen minutes the first time; cached afterwards)")
    sim, best, distances, curves, seconds = learn(iterations, seeds)
    q = sim.rollout()["q"]
    heights = q[:, :, 2]
    tilts = np.degrees(2 * np.arcsin(np.minimum(1.0, np.hypot(q[:, :, 4], q[:, :, 5])))).max(axis=1)
    for seed in range(seeds):
        print(f"seed {seed}: walked {distances['first'][seed]:+.2f} m in 2 s with its first gait, "
              f"{distances['best'][seed]:+.2f} m with its best, its torso tilting at most {tilts[seed]:.0f} degrees")
    figures = dict(seeds=seeds, iterations=iterations, seconds=round(seconds, 1),
                   first_m=distances["first"].round(3).tolist(), best_m=distances["best"].round(3).tolist(),
                   best_torso_height_range_m=[heights.min(axis=1).round(3).tolist(),
                                              heights.max(axis=1).round(3).tolist()],
                   best_largest_tilt_deg=tilts.round(1).tolist())
    (out / "ant_gait.json").write_text(json.dumps(figures, indent=1) + "\n")

    import matplotlib.pyplot as plt
    figure, axes = plt.subplots(figsize=(6.4, 3.6), layout="constrained")
    for seed in range(seeds):
        axes.plot(np.arange(1, len(curves) + 1), curves[:, seed], label=f"seed {seed}")
    axes.set(xlabel="iteration", ylabel="torso's mean x at 1.9-2 s [m]",
             title="ant: gaits learned through the physics, one per seed")
    axes.legend(loc="upper left", fontsize=8)
    figure.savefig(out / "ant_gait.png", dpi=100)
    plt.close(figure)

    def pictures():
        from tisim import viz
        from tisim.viz.bodies import articulation_frames
        b = int(np.argmax(distances["best"]))
        sim.set_actions(np.broadcast_to(best[b], (sim.B,) + best[b].shape))
        every = 20
        frames = articulation_frames(sim.tree, sim.rollout()["q"][b], every=every, size=(640, 260),
                                     direction=(0.0, 0.3, 1.0), margin=0.2)
        frames = viz.caption(frames, f"Gymnasium's ant, seed {b}'s best learned gait",
                             times=np.arange(len(frames)) * every * sim.dt)
        return viz.save_gif(out / "ant_gait.gif", frames, fps=25)
    gif = picture_or_reason(pictures)
    print(f"wrote {out / 'ant_gait.json'}, {out / 'ant_gait.png'}" + (f" and {gif}" if gif else ""))
    return dict(figures, gif=gif)


if __name__ == "__main__":
    main()
