# Train one feedback controller that brings Gymnasium's reacher to any target, through the simulator; then move the
# target once it is there.
#
# The arm is tisim.systems.Articulation on the tree of Gymnasium's reacher.xml (as tisim/Reacher-v0), stepped at
# its 10 ms. The controller is a network inside the rollout (tisim.policy.closed_loop): every step it reads the
# sines and cosines of the joints' coordinates (the target's two slides among them) and their velocities,
# standardized over a first rollout, through one tanh layer of 32, and sets the two motor commands to
# 0.2 tanh(output). The gear is 200, so a command of 0.2 is already a strong push on this light arm, and a network
# free to command 1 spins it; the output layer starts scaled down four times, so that the fresh network pushes as
# gently as one bounded at 0.05 (with which training learns, but slowly) until training asks for more
# (docs/tutorials/policies.md).
# Training is analytic policy gradients over windows (tisim.tasks.train_policy): 32 environments, episodes of 1 s,
# half of them starting as Reacher-v5's do (the target anywhere within 0.2 m of the shoulder, the arm near zero) and
# half with the arm anywhere, windows of 50 steps, each window's loss the mean squared distance from fingertip to
# target over its steps, one Adam step a window.
# Each seed's controller is scored on 64 fixed starts never trained on: the fingertip's mean distance to the target
# after 1 s, before and after training and every so often while it trains; the mean return of tisim/Reacher-v0
# (Reacher-v5's reward, -distance - |a|^2 every 20 ms over 50 steps) with the controller acting on the environment's
# state every 20 ms, beside the motors off; and, after that first second, the target moved to a new place: the
# distance just after the move and 1 s later (the arm reaching on from wherever it ended, where no training episode
# starts).
# Writes out/reacher_policy.json (per seed: the curve, the scores, the training's seconds; the medians),
# out/reacher_policy.png (distance against windows and against seconds) and out/reacher_policy.gif (the best seed's
# controller on four starts, their targets moved at 1 s).
#
# Command: python demos/reacher_policy.py [--seeds 3] [--iterations 6000] [--out out]
import argparse
import json
import pathlib
import time

import numpy as np

import tisim
from tisim import viz
from tisim.envs.reach import Reacher
from tisim.optim import Adam
from tisim.policy import closed_loop, normalization
from tisim.systems.articulation import Articulation
from tisim.tasks import train_policy

EPISODE, WINDOW, ENVIRONMENTS, LEARNING_RATE = 100, 50, 32, 3e-3  # steps of 10 ms, steps, -, Adam's step
LIMIT, HIDDEN = 0.2, (32,)
GENTLE = 0.05  # the fresh network's output layer is scaled by GENTLE / LIMIT
STARTS, EVALUATION_SEED = 64, 1000  # the scoring's starts and their seed
TASK = Reacher()
Arm = closed_loop(Articulation, hidden=HIDDEN, limit=LIMIT, angles=("q",))


def simulator(horizon, batch):
    return Arm(horizon=horizon, batch=batch, tree=TASK.tree)


def starts(rng, batch):
    """Reacher-v5's starts: {"q": (batch, 4), "qd": (batch, 4)}, the target's slides being q[:, 2:]."""
    states = [TASK.initial_state(rng) for _ in range(batch)]
    return {name: np.stack([state[name] for state in states]) for name in ("q", "qd")}


def training_starts(rng, batch):
    """Half the episodes start as Reacher-v5's, half with the arm anywhere (the shoulder at any angle, the elbow
    within +-2.8 rad of its +-3, both turning at up to 1 rad/s), so that the controller learns to reach from wherever
    an earlier reach left the arm, too."""
    state = starts(rng, batch)
    half = batch // 2
    state["q"][:half, 0] = rng.uniform(-np.pi, np.pi, half)
    state["q"][:half, 1] = rng.uniform(-2.8, 2.8, half)
    state["qd"][:half, :2] = rng.uniform(-1.0, 1.0, (half, 2))
    return state


def distance(q):
    """The fingertip's distance to the target at coordinates q (n, 4) [m]."""
    fingertip, target = TASK.points(q)
    return np.linalg.norm(fingertip - target, axis=1)


class Scores:
    """The controller's scores on the fixed starts."""

    def __init__(self):
        self.sim = simulator(EPISODE, STARTS)
        self.start = starts(np.random.default_rng(EVALUATION_SEED), STARTS)
        self.sim.set_initial_state(**self.start)

    def use(self, params):
        """params: {"w_policy", "obs_mean", "obs_scale"}, one controller's (1-D each)."""
        self.sim.set_params(**params)

    def distance(self, params):
        """Mean distance after 1 s [m], and the rollout."""
        self.use(params)
        traj = self.sim.rollout()
        return float(distance(traj["q"][:, -1]).mean()), traj

    def moved(self, params):
        """After its episode of 1 s the target moves to a new place, and the arm reaches on from wherever it is (no
        training episode starts there): the rollout of 2 s, the mean distance just after the move and 1 s later
        [m]."""
        self.use(params)
        first = self.sim.rollout()
        later = {name: values[:, -1].copy() for name, values in first.items()}
        later["q"][:, 2:] = starts(np.random.default_rng(EVALUATION_SEED + 1), STARTS)["q"][:, 2:]
        later["qd"][:, 2:] = 0.0
        self.sim.set_initial_state(**later)
        second = self.sim.rollout()
        self.sim.set_initial_state(**self.start)
        traj = {name: np.concatenate([first[name], second[name][:, 1:]], axis=1) for name in first}
        return float(distance(later["q"]).mean()), float(distance(traj["q"][:, -1]).mean()), traj

    def gymnasium_return(self, params=None):
        """Mean return of tisim/Reacher-v0 over the 64 episodes of seed EVALUATION_SEED, the controller acting on
        the environment's state every 20 ms (None: the motors off)."""
        import gymnasium

        import tisim.envs  # noqa: F401 (registers the environments)

        envs = gymnasium.make_vec("tisim/Reacher-v0", num_envs=STARTS)
        envs.reset(seed=EVALUATION_SEED)
        policy, total = self.sim.model.policy, np.zeros(STARTS)
        for _ in range(envs.unwrapped.task.episode_steps):
            state = envs.unwrapped.state
            action = np.zeros((STARTS, 2)) if params is None else policy.act_numpy(
                params["w_policy"], params["obs_mean"], params["obs_scale"], state)
            _, reward, _, _, _ = envs.step(action)
            total += reward
        envs.close()
        return float(total.mean())


def initial_weights(network, seed):
    """The network's initial weights (Glorot's), its output layer (the last hidden width times the outputs, and
    their biases, at the end of the flat layout) scaled by GENTLE / LIMIT."""
    weights = network.initial_weights(seed)
    outputs = network.sizes[-1]
    weights[-(network.sizes[-2] + 1) * outputs:] *= GENTLE / LIMIT
    return weights


def train(seed, iterations, scores, every, report=print):
    """One controller: (its parameters {"w_policy", "obs_mean", "obs_scale"}, the curve {windows, seconds,
    distance_m}, the training's seconds)."""
    sim = simulator(WINDOW, ENVIRONMENTS)
    sim.set_params(w_policy=initial_weights(sim.model.policy.network, seed))
    first = simulator(EPISODE, STARTS)  # the standardization: the new network's states from other starts
    first.set_initial_state(**starts(np.random.default_rng(seed), STARTS))
    first.set_params(w_policy=sim.params["w_policy"][0])
    sim.set_params(**normalization(first, first.rollout()))
    params = {name: sim.params[name][0] for name in ("w_policy", "obs_mean", "obs_scale")}
    loss = sim.point_target("fingertip", "target", steps=range(1, WINDOW + 1), weight=1.0 / WINDOW)
    curve = {"windows": [0], "seconds": [0.0], "distance_m": [scores.distance(params)[0]]}
    clock = {"start": time.perf_counter(), "paused": 0.0}

    def callback(iteration, weights, value):
        if (iteration + 1) % every == 0:
            pause = time.perf_counter()
            curve["windows"].append(iteration + 1)
            curve["seconds"].append(pause - clock["start"] - clock["paused"])
            curve["distance_m"].append(scores.distance({**params, "w_policy": weights})[0])
            report(f"seed {seed}: {iteration + 1} windows, {curve['seconds'][-1]:.1f} s: "
                   f"{curve['distance_m'][-1]:.3f} m")
            clock["paused"] += time.perf_counter() - pause

    result = train_policy(sim, loss, training_starts, episode_steps=EPISODE,
                          iterations=iterations, optimizer=Adam(lr=LEARNING_RATE), clip=1.0, seed=seed,
                          progress=False, callback=callback)
    seconds = time.perf_counter() - clock["start"] - clock["paused"]
    return {**params, "w_policy": result.values["w_policy"]}, curve, seconds


def pictures(traj, path):
    """Four starts side by side, every fourth step (real time), the targets moved at 1 s."""
    steps = range(0, 2 * EPISODE + 1, 4)
    rows = [[TASK.draw({"q": traj["q"][b, t]}) for t in steps] for b in range(4)]
    strip = [np.concatenate(frame, axis=1) for frame in zip(*rows)]
    times = [t * TASK.tree.timestep for t in steps]
    words = ["one controller, four targets" if t < EPISODE else "the targets moved at 1 s" for t in steps]
    strip = [viz.caption([picture], line, times=[time_s])[0] for picture, line, time_s in zip(strip, words, times)]
    return viz.save_gif(path, strip, fps=25, colors=32)


def plot(runs, path):
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=True)
    for run in runs:
        for axis, x in zip(axes, ("windows", "seconds")):
            axis.plot(run["curve"][x], run["curve"]["distance_m"], marker=".", label=f"seed {run['seed']}")
    axes[0].set_xlabel("training windows (50 steps x 32 environments)")
    axes[1].set_xlabel("training time [s]")
    axes[0].set_ylabel("distance to target after 1 s [m]")
    for axis in axes:
        axis.set_yscale("log")
        axis.grid(alpha=0.3)
    axes[0].legend()
    figure.suptitle("reacher: one controller for every target, trained through the simulator")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def main(seeds=3, iterations=6000, out="out", report=print):
    tisim.init()
    scores = Scores()
    every = max(iterations // 12, 1)
    figures = {"window_steps": WINDOW, "episode_steps": EPISODE, "environments": ENVIRONMENTS, "limit": LIMIT,
               "hidden": list(HIDDEN), "iterations": iterations, "starts": STARTS,
               "return_motors_off": scores.gymnasium_return(), "seeds": []}
    report(f"tisim/Reacher-v0, motors off: mean return {figures['return_motors_off']:.2f}")
    best = None
    for seed in range(seeds):
        params, curve, seconds = train(seed, iterations, scores, every, report)
        after, _ = scores.distance(params)
        moved, reached, traj = scores.moved(params)
        run = dict(seed=seed, distance_before_m=curve["distance_m"][0], distance_after_m=after,
                   distance_target_moved_m=moved, distance_1s_after_move_m=reached,
                   return_after=scores.gymnasium_return(params), seconds=round(seconds, 1), curve=curve)
        figures["seeds"].append(run)
        report(f"seed {seed}: distance after 1 s {run['distance_before_m']:.3f} -> {after:.3f} m "
               f"({seconds:.0f} s of training); the target moved at 1 s: {moved:.3f} m off, {reached:.3f} m 1 s later; "
               f"tisim/Reacher-v0 return {run['return_after']:.2f}")
        if best is None or after < best[0]:
            best = after, traj
    runs = figures["seeds"]
    for name in ("distance_after_m", "distance_target_moved_m", "distance_1s_after_move_m", "return_after"):
        figures[f"median_{name}"] = float(np.median([run[name] for run in runs]))
    folder = pathlib.Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "reacher_policy.json").write_text(json.dumps(figures, indent=2) + "\n")
    figures["plot"] = str(plot(runs, folder / "reacher_policy.png"))
    figures["gif"] = str(pictures(best[1], folder / "reacher_policy.gif"))
    report(f"median over {seeds} seeds: {figures['median_distance_after_m']:.3f} m after 1 s, "
           f"{figures['median_distance_1s_after_move_m']:.3f} m 1 s after the target moved (from "
           f"{figures['median_distance_target_moved_m']:.3f} m), return "
           f"{figures['median_return_after']:.2f} (motors off {figures['return_motors_off']:.2f}); wrote "
           f"{folder / 'reacher_policy.json'}, {figures['plot']} and {figures['gif']}")
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(
        "Train one feedback controller for Gymnasium's reacher (any target) by gradients through the simulator, "
        "score it on fixed starts and in tisim/Reacher-v0, and move the target mid-reach. Writes "
        "reacher_policy.json, reacher_policy.png and reacher_policy.gif."))
    parser.add_argument("--seeds", type=int, default=3, help="controllers trained, seeds 0..N-1 (default 3)")
    parser.add_argument("--iterations", type=int, default=6000, help="training windows a seed (default 6000)")
    parser.add_argument("--out", default="out", help="folder for the JSON, the plot and the GIF (default out)")
    args = parser.parse_args()
    if args.seeds < 1 or args.iterations < 1:
        parser.error(f"--seeds and --iterations must be >= 1, got {args.seeds} and {args.iterations}")
    main(args.seeds, args.iterations, args.out)
