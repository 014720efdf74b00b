# Teach a soft robot made of material points to walk to the right (the task of DiffTaichi's diffmpm).
#
# The robot is assets/bodies/walker.json: a 0.2 m x 0.05 m slab on two legs, each leg two columns of actuated
# material whose fibres pull or push vertically, 4 actuators in all; in 3D the same cells extruded 0.05 m deep. It
# is a fixed-corotated solid (robust when a leg is squashed hard) on a sticky floor (a cell pressing into it stops).
# Each actuator follows a periodic pattern, activation(t) = tanh(sum_h a_h sin(2 pi h f t) + b_h cos(2 pi h f t)),
# h = 1, 2, f = 4 Hz: 16 coefficients, optimized with Adam. The loss is minus the mean x of the body after the
# 0.5 s horizon; its gradient with respect to the 1000 x 4 activations is one backward pass through the MPM rollout
# (the grid recomputed per step), and the chain rule through the pattern gives the coefficients'. Three gaits drawn
# from --seed learn side by side as one batch, each gradient normalized before Adam's step, and the best gait any
# of them reaches is kept: alone, seed 4's gait stalled at 0.8 body lengths.
# Why this recipe (measured; docs/tutorials/mpm.md has the figures): over 1 s (2,000 steps) the walk is chaotic, a
# step of 0.01 along the gradient already loses 4 cm where the slope promised a gain, and seeds stall or blow up; over
# 0.5 s a step of 0.1 still gains what the slope predicts.
# Prints the distance walked per iteration and writes out/mpm_walker.gif (the first gait above the best one) and
# out/mpm_walker.json (dimension, seed, starts, the first and the best distance in metres and in body lengths,
# iterations, seconds). With --gui it then replays the best gait in a window until it is closed (in 3D the camera
# circles the body; needs a display and Vulkan, see tisim/viz/gui.py).
#
# Command: python demos/mpm_walker.py [--dim 2] [--seed 0] [--iterations 100] [--horizon 1000] [--starts 3]
#          [--out out] [--gui]
import argparse
import json
import pathlib
import sys

import numpy as np

import tisim
from tisim import viz
from tisim.core.assets import ASSETS
from tisim.gui import Window, picture_or_reason, window_problem
from tisim.optim import Adam, minimize
from tisim.scene import Scene
from tisim.systems.mpm import BAND, MPM, Body

HORIZON, DT, FREQUENCY, HARMONICS, LEARNING_RATE, STARTS = 1000, 5e-4, 4.0, 2, 0.05, 3
N_GRID = {2: 64, 3: 32}
MATERIAL = dict(material="corotated", E=3e4, nu=0.2, rho=1000.0, actuation=2e4, floor="sticky")
LENGTH = 0.2  # the body's length [m]


def walker(dim, n_grid):
    """The walker standing on the floor at x = 0.1 m; in 3D its cells extruded two deep, centred in z."""
    if dim == 2:
        return Body.load("walker", origin=[0.1, BAND / n_grid])
    robot = json.loads((ASSETS / "bodies" / "walker.json").read_text())
    cells, cell = np.array(robot["cells"]), robot["cell"]
    deep = np.concatenate([np.column_stack([cells, np.full(len(cells), k)]) for k in (0, 1)])
    return Body.from_cells(deep, cell, [0.1, BAND / n_grid, 0.5 - cell], 2, robot["actuators"] * 2)


def pattern_basis(T, dt):
    t = np.arange(T)[:, None] * dt
    h = np.arange(1, HARMONICS + 1)[None, :]
    return np.concatenate([np.sin(2 * np.pi * h * FREQUENCY * t), np.cos(2 * np.pi * h * FREQUENCY * t)], axis=1)


def walk(dim, seed, iterations, horizon=HORIZON, starts=STARTS, report=print):
    """Optimize `starts` gaits side by side (one batch) from random starts drawn from `seed`; returns the simulator,
    the first and the best activations (T, A) (the first start's first gait, the best gait any start reached), the
    distances they walk [m] (and the best as recorded during the run) and the optimizer's Result."""
    n_grid = N_GRID[dim]
    body = walker(dim, n_grid)
    sim = MPM(horizon=horizon, batch=starts, body=body, n_grid=n_grid, dt=DT, **MATERIAL)
    basis = pattern_basis(sim.T, sim.dt)
    weights = np.zeros((len(body.particles), dim))
    weights[:, 0] = 1.0 / len(body.particles)
    mean_x = tisim.losses.TerminalSum({"pos": weights})
    start = body.particles[:, 0].mean()
    best = {"distance": -np.inf, "gait": None}

    def activations(gait):
        return np.tanh(np.einsum("tk,bka->bta", basis, gait))

    def objective(values):
        a = activations(values["gait"])
        sim.set_actions(a)
        g = sim.gradient(mean_x)
        distance = g.per_batch - start
        if distance.max() > best["distance"]:
            best.update(distance=float(distance.max()), gait=values["gait"][np.argmax(distance)].copy())
        # each start climbs its own distance (descending on its negative), its gradient normalized
        grad = -np.einsum("tk,bta->bka", basis, g.actions * (1.0 - a * a))
        return -distance.max(), {"gait": grad / (np.linalg.norm(grad, axis=(1, 2), keepdims=True) + 1e-12)}

    def progress(iteration, values, value):
        report(f"iteration {iteration:3d}: the best start walked {-value:+.3f} m (best so far "
               f"{best['distance']:+.3f} m)")

    first = np.random.default_rng(seed).normal(scale=0.3, size=(starts, basis.shape[1], sim.action_layout.size))
    result = minimize(objective, {"gait": first}, optimizer=Adam(lr=LEARNING_RATE), iterations=iterations,
                      callback=progress)
    actions = {"first": activations(first)[0], "best": activations(best["gait"][None])[0]}
    distances = {}
    for name, a in actions.items():
        sim.set_actions(np.broadcast_to(a, (starts,) + a.shape))
        distances[name] = float(sim.evaluate(mean_x)[0] - start)
    distances["recorded"] = best["distance"]
    return sim, actions, distances, result


def pictures(sim, actions, path, iterations):
    """The first gait above the best one, one GIF, each captioned; a 3D walker is seen from the front right, one
    camera framing both gaits' paths."""
    captions = {"first": f"{sim.sizes['dim']}D MPM walker: first gait",
                "best": f"{sim.sizes['dim']}D MPM walker: optimized gait ({iterations} iterations)"}
    rollouts = {}
    for name in ("first", "best"):
        sim.set_actions(np.broadcast_to(actions[name], (sim.B,) + actions[name].shape))
        rollouts[name] = {k: v[:1] for k, v in sim.rollout().items()}
    camera = None
    if sim.sizes["dim"] == 3:
        camera = viz.look_at_rollouts(rollouts.values(), {"n_grid": sim.sizes["n_grid"]}, (400, 150),
                                      direction=(0.3, 0.3, 1.0), band=viz.CAPTION_BAND)
    rows = [viz.frames(sim, rollouts[name], every=40, size=(400, 150), bounds=(0.0, 1.0, 0.0, 0.375),
                       caption=captions[name], camera=camera) for name in rollouts]
    return viz.save_gif(path, [np.concatenate(pair, axis=0) for pair in zip(*rows)], fps=25, colors=64)


def open_window(dim, offscreen=False):
    """The window the best gait is replayed in."""
    title = f"tisim: {dim}D MPM walker"
    return Scene((800, 600), offscreen=offscreen, title=title) if dim == 3 else Window(title, (800, 300),
                                                                                         offscreen=offscreen)


def replay(sim, actions, window, rounds=None):
    """The gait in the window, again and again until it is closed (or `rounds` times); in 3D the camera circles."""
    sim.set_actions(np.broadcast_to(actions, (sim.B,) + actions.shape))
    rollout = sim.rollout()
    if isinstance(window, Scene):
        return viz.orbit(sim, rollout, window, rounds=rounds)  # the camera as close as the walk allows
    pictures = viz.frames(sim, rollout, every=20, size=window.size, bounds=(0.0, 1.0, 0.0, 0.375))
    shown = 0
    while window.running and rounds != shown:
        for picture in pictures:
            window.draw(picture)
            window.show()
        shown += 1
    return shown


def main(argv=None):
    parser = argparse.ArgumentParser(description=(
        "Teach a soft walker made of material points (MPM) to walk right: a periodic pattern for each of its 4 "
        "actuators, optimized with Adam by gradients through the whole rollout. Writes mpm_walker.json and "
        "mpm_walker.gif (the first gait above the best one; in 3D needs Vulkan)."))
    parser.add_argument("--dim", type=int, default=2, choices=(2, 3), help="2D or 3D walker (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the starting gaits (default 0)")
    parser.add_argument("--iterations", type=int, default=100, help="Adam iterations (default 100)")
    parser.add_argument("--horizon", type=int, default=HORIZON, help="steps of 0.5 ms (default 1000: 0.5 s)")
    parser.add_argument("--starts", type=int, default=STARTS, help="gaits optimized side by side (batch size)")
    parser.add_argument("--out", default="out", help="folder for mpm_walker.json and mpm_walker.gif (default out)")
    parser.add_argument("--gui", action="store_true", help="replay the best gait in a window")
    parser.add_argument("--offscreen", action="store_true", help="with --gui: no display, one replay (for tests)")
    args = parser.parse_args(argv)
    if min(args.iterations, args.horizon, args.starts) < 1:
        parser.error(f"--iterations, --horizon and --starts must be >= 1, got {args.iterations}, {args.horizon} and "
                     f"{args.starts}")
    if args.gui and window_problem(args.offscreen):  # before the work; the window itself opens after the GIF
        print(f"--gui: {window_problem(args.offscreen)}", file=sys.stderr)
        return 2
    sim, actions, distances, result = walk(args.dim, args.seed, args.iterations, args.horizon, args.starts)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    figures = dict(dim=args.dim, seed=args.seed, starts=args.starts, horizon_s=sim.T * sim.dt,
                   first=distances["first"], best=distances["best"], best_body_lengths=distances["best"] / LENGTH,
                   iterations=result.iterations, seconds=round(result.seconds, 1))
    (out / "mpm_walker.json").write_text(json.dumps(figures, indent=1) + "\n")
    print(f"{args.dim}D walker, seed {args.seed}: {distances['first']:+.3f} m with the first gait, "
          f"{distances['best']:+.3f} m ({figures['best_body_lengths']:.2f} body lengths) with the best of "
          f"{result.iterations} iterations ({result.seconds:.0f} s); wrote {out / 'mpm_walker.json'}")
    # in 3D the pictures need GGUI, so Vulkan
    gif = picture_or_reason(lambda: pictures(sim, actions, out / "mpm_walker.gif", result.iterations))
    if gif:
        print(f"wrote {gif}")
    replays = 0
    if args.gui:  # opened now: while a GGUI window was open, closing the GIF's scene crashed it (Taichi 1.7.4)
        window = open_window(args.dim, args.offscreen)
        replays = replay(sim, actions["best"], window, rounds=1 if args.offscreen else None)
        if isinstance(window, Scene):
            window.close()
    return dict(figures, recorded=distances["recorded"], history=result.history, gif=gif, replays=replays)


if __name__ == "__main__":
    main()
