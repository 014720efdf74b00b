# Teach a soft robot to walk to the right by gradient descent through its physics.
#
# A mass-spring robot from assets/robots/ (quadruped by default, biped, worm, or quadruped3d: the same code in 3D)
# stands on the ground. Each actuator changes the rest length of its springs by a periodic pattern, activation(t) =
# 0.25 tanh(sum_h a_h sin(2 pi h f t) + b_h cos(2 pi h f t)), h = 1..3, f = 2 Hz: a few coefficients per actuator,
# optimized with Adam. The loss is minus
# the mean x of all particles over the last gait cycle (0.5 s of the 1 s horizon), which does not reward ending the
# horizon leaning forward; its gradient with respect to the 2000 x A activations comes from one backward pass through
# the rollout (contact and friction included), and the chain rule through the pattern gives the gradient for the
# coefficients. The distance walked is the mean x of the particles after 1 s, from where they started.
#
# The recipe, and why (tisim/systems/mass_spring/system.py; the measurements are in docs/tutorials/soft_walker.md):
# - dt = 0.5 ms, MassSpring's own step: at 1 ms the ground damping reverses a landing particle's vertical velocity
#   every step (dt kd / m = 2), the rollout turns chaotic and its gradient with it.
# - friction's velocity scale eps = 0.1 m/s: at 0.05 a loaded foot's friction can overshoot zero slip in a step.
# - each gait's gradient is normalized to unit length before Adam: a stride that nearly trips gives a gradient
#   thousands of times longer than usual, which would freeze Adam's steps for the rest of the run.
# - three gaits drawn from --seed learn side by side as one batch, and the best gait any of them reaches is kept:
#   alone, about one gait in twenty fails to reach 0.25 m in 60 iterations.
# Prints, per iteration, how far the body's mean over the last cycle moved (and the best so far); writes
# out/soft_walker.gif (the first attempt above the best one) and out/soft_walker.json (robot, seed, starts, the first
# and the best gait's distance in metres, iterations, seconds).
#
# Command: python demos/soft_walker.py [--robot quadruped] [--iterations 60] [--seed 0] [--starts 3] [--out out]
import argparse
import json
import pathlib

import numpy as np

import tisim
from tisim import viz
from tisim.gui import picture_or_reason
from tisim.optim import Adam, minimize
from tisim.systems.mass_spring import MassSpring, mean_x_weights

HORIZON, DT, FREQUENCY, HARMONICS, AMPLITUDE, CYCLE = 2000, 5e-4, 2.0, 3, 0.25, 0.5
EPS, LEARNING_RATE, STARTS = 0.1, 0.05, 3


def pattern_basis(T, dt):
    """(T, 2H) sines and cosines of the gait's harmonics."""
    t = np.arange(T)[:, None] * dt
    h = np.arange(1, HARMONICS + 1)[None, :]
    return np.concatenate([np.sin(2 * np.pi * h * FREQUENCY * t), np.cos(2 * np.pi * h * FREQUENCY * t)], axis=1)


def walk(robot, iterations, seed, starts=STARTS, report=print):
    """Optimize `starts` gaits side by side; returns the simulator, the first and the best activations (T, A), the
    distances they walk in the horizon [m], their losses (and the best one as recorded during the run) and the
    optimizer's Result."""
    sim = MassSpring(horizon=HORIZON, batch=starts, dt=DT, robot=robot, eps=EPS)
    basis = pattern_basis(sim.T, sim.dt)
    weights, n = mean_x_weights(sim)["pos"], round(CYCLE / sim.dt)
    last_cycle = tisim.losses.TerminalSum({"pos": weights / n}, steps=range(sim.T - n + 1, sim.T + 1))
    start = sim.robot.particles[:, 0].mean()

    def activations(gait):
        return AMPLITUDE * np.tanh(np.einsum("tk,bka->bta", basis, gait))

    def objective(values):
        a = activations(values["gait"])
        sim.set_actions(a)
        g = sim.gradient(last_cycle)
        better = g.per_batch < best["loss"]  # each gait's best so far: a late, diverged iterate never wins
        best["loss"][better], best["gait"][better] = g.per_batch[better], values["gait"][better]
        dz = g.actions * (AMPLITUDE - a * a / AMPLITUDE)  # chain rule through the pattern: d(A tanh z)/dz
        grad = np.einsum("tk,bta->bka", basis, dz)
        grad /= np.linalg.norm(grad, axis=(1, 2), keepdims=True) + 1e-12
        return g.per_batch.min(), {"gait": grad}

    def progress(iteration, values, value):
        report(f"iteration {iteration:3d}: the body's mean x over the last cycle moved {-value - start:+.3f} m "
               f"(best so far {-best['loss'].min() - start:+.3f} m)")

    first = np.random.default_rng(seed).normal(scale=0.3, size=(starts, basis.shape[1], sim.action_layout.size))
    best = {"loss": np.full(starts, np.inf), "gait": first.copy()}
    result = minimize(objective, {"gait": first}, optimizer=Adam(lr=LEARNING_RATE), iterations=iterations,
                      callback=progress)
    actions = {"first": activations(first)[0], "best": activations(best["gait"])[np.argmin(best["loss"])]}
    at_the_end = tisim.losses.TerminalSum(mean_x_weights(sim))
    distances, losses = {}, {}
    for name, a in actions.items():
        sim.set_actions(np.broadcast_to(a, (starts,) + a.shape))
        distances[name] = float(-sim.evaluate(at_the_end)[0] - start)
        losses[name] = float(sim.evaluate(last_cycle)[0])
    losses["recorded"] = float(best["loss"].min())
    return sim, actions, distances, losses, result


def pictures(sim, actions, path, iterations):
    """The first attempt above the best one, one GIF, each captioned; a 3D robot is seen from the front right, one
    camera framing both gaits' paths."""
    trajectories = {}
    for name, a in actions.items():
        sim.set_actions(np.broadcast_to(a, (sim.B,) + a.shape))
        trajectories[name] = {k: v[:1] for k, v in sim.rollout().items()}
    reach = np.concatenate([t["pos"][0, :, :, 0].ravel() for t in trajectories.values()])
    bounds = (reach.min() - 0.05, reach.max() + 0.05, -0.05, 0.37)  # room above the robot for the caption
    camera = None
    if sim.sizes.get("dim") == 3:
        camera = viz.look_at_rollouts(trajectories.values(), size=(400, 130), direction=(0.3, 0.3, 1.0),
                                      band=viz.CAPTION_BAND)
    captions = {"first": f"{sim.robot.name}: first gait",
                "best": f"{sim.robot.name}: optimized gait ({iterations} iterations)"}
    rows = [viz.frames(sim, trajectories[name], every=50, size=(400, 130), bounds=bounds, camera=camera,
                       caption=captions.get(name, name)) for name in actions]
    return viz.save_gif(path, [np.concatenate(pair, axis=0) for pair in zip(*rows)], fps=20, colors=64)


def main(argv=None):
    parser = argparse.ArgumentParser(description=(
        "Teach a mass-spring robot to walk right: a periodic pattern per actuator, optimized with Adam by gradients "
        "through the rollout, contact and friction included. Writes soft_walker.json and soft_walker.gif (the "
        "first gait above the best one; a 3D robot needs Vulkan)."))
    parser.add_argument("--robot", default="quadruped",
                        help="a name in assets/robots/ (quadruped, biped, worm, quadruped3d) or a robot JSON file")
    parser.add_argument("--iterations", type=int, default=60, help="Adam iterations (default 60)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the starting gaits (default 0)")
    parser.add_argument("--starts", type=int, default=STARTS,
                        help=f"gaits optimized side by side, one batch (default {STARTS})")
    parser.add_argument("--out", default="out", help="folder for soft_walker.json and soft_walker.gif (default out)")
    args = parser.parse_args(argv)
    if args.iterations < 1 or args.starts < 1:
        parser.error(f"--iterations and --starts must be >= 1, got {args.iterations} and {args.starts}")
    sim, actions, distances, losses, result = walk(args.robot, args.iterations, args.seed, args.starts)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    figures = dict(robot=sim.robot.name, seed=args.seed, starts=args.starts, first=distances["first"],
                   best=distances["best"], iterations=result.iterations, seconds=round(result.seconds, 2))
    (out / "soft_walker.json").write_text(json.dumps(figures, indent=1) + "\n")
    print(f"{sim.robot.name}: walked {distances['first']:+.3f} m with the first gait, {distances['best']:+.3f} m "
          f"with the best of {result.iterations} iterations ({result.seconds:.1f} s); wrote {out / 'soft_walker.json'}")
    # in 3D the pictures need GGUI, so Vulkan
    gif = picture_or_reason(lambda: pictures(sim, actions, out / "soft_walker.gif", result.iterations))
    if gif:
        print(f"wrote {gif}")
    return dict(figures, best_loss=losses["best"], best_recorded=losses["recorded"], history=result.history, gif=gif)


if __name__ == "__main__":
    main()
