# Teach a soft robot to walk to the right by gradient descent through its physics.
#
# A mass-spring robot from assets/robots/ (quadruped by default, biped or worm) stands on the ground. Each actuator
# changes the rest length of its springs by a periodic pattern, activation(t) = 0.25 tanh(sum_h a_h sin(2 pi h f t) +
# b_h cos(2 pi h f t)), h = 1, 2, f = 2 Hz: a few coefficients per actuator, optimized with Adam. The loss is minus
# the mean x of all particles after 1 s; its gradient with respect to the 1000 x A activations comes from one
# backward pass through the rollout (contact and friction included), and the chain rule through the pattern gives
# the gradient for the coefficients. Prints the distance walked per iteration; writes out/soft_walker.gif with the
# first attempt above the last one.
#
# Command: python demos/soft_walker.py [--robot quadruped] [--iterations 40] [--seed 0] [--out out]
import argparse
import pathlib

import numpy as np

import tisim
from tisim import viz
from tisim.optim import Adam, minimize
from tisim.systems.mass_spring import MassSpring, mean_x_weights

HORIZON, DT, FREQUENCY, HARMONICS, AMPLITUDE = 1000, 1e-3, 2.0, 2, 0.25


def pattern_basis(T, dt):
    """(T, 2H) sines and cosines of the gait's harmonics."""
    t = np.arange(T)[:, None] * dt
    h = np.arange(1, HARMONICS + 1)[None, :]
    return np.concatenate([np.sin(2 * np.pi * h * FREQUENCY * t), np.cos(2 * np.pi * h * FREQUENCY * t)], axis=1)


def walk(robot, iterations, seed, report=print):
    """Optimize the gait coefficients; returns the simulator, the first and the best actions, and the Result."""
    sim = MassSpring(horizon=HORIZON, dt=DT, robot=robot)
    basis = pattern_basis(sim.T, sim.dt)
    loss = tisim.losses.TerminalSum(mean_x_weights(sim))
    start = sim.robot.particles[:, 0].mean()

    def objective(values):
        z = basis @ values["gait"]
        sim.set_actions(AMPLITUDE * np.tanh(z))
        g = sim.gradient(loss)
        dz = g.actions[0] * AMPLITUDE * (1 - np.tanh(z) ** 2)  # chain rule through the pattern
        return g.value, {"gait": basis.T @ dz}

    def progress(iteration, values, value):
        report(f"iteration {iteration:3d}: walked {-value - start:+.3f} m")

    first = np.random.default_rng(seed).normal(scale=0.3, size=(basis.shape[1], sim.action_layout.size))
    result = minimize(objective, {"gait": first}, optimizer=Adam(lr=0.1), iterations=iterations, callback=progress)
    actions = {name: AMPLITUDE * np.tanh(basis @ gait) for name, gait in
               (("first", first), ("best", result.values["gait"]))}
    distances = {}
    for name, a in actions.items():
        sim.set_actions(a)
        distances[name] = -sim.evaluate(loss)[0] - start
    return sim, actions, distances, result


def pictures(sim, actions, path):
    """The first attempt above the last one, one GIF."""
    trajectories = {}
    for name, a in actions.items():
        sim.set_actions(a)
        trajectories[name] = sim.rollout()
    reach = np.concatenate([t["pos"][0, :, :, 0].ravel() for t in trajectories.values()])
    bounds = (reach.min() - 0.05, reach.max() + 0.05, -0.05, 0.3)
    rows = [viz.frames(sim, trajectories[name], every=25, size=(400, 130), bounds=bounds) for name in actions]
    return viz.save_gif(path, [np.concatenate(pair, axis=0) for pair in zip(*rows)], fps=20, colors=16)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Optimize a periodic gait for a mass-spring robot.")
    parser.add_argument("--robot", default="quadruped", help="a name in assets/robots/ or a robot JSON file")
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="out")
    args = parser.parse_args(argv)
    sim, actions, distances, result = walk(args.robot, args.iterations, args.seed)
    gif = pictures(sim, actions, pathlib.Path(args.out) / "soft_walker.gif")
    print(f"{sim.robot.name}: walked {distances['first']:+.3f} m with the first gait, {distances['best']:+.3f} m "
          f"after {result.iterations} iterations ({result.seconds:.1f} s); wrote {gif}")
    return dict(distances=distances, iterations=result.iterations, seconds=result.seconds, gif=gif)


if __name__ == "__main__":
    main()
