# The reacher (tisim/Reacher-v0: Gymnasium's Reacher-v5 task on its reacher.xml): one controller for every target,
# learned by analytic policy gradients through the simulator (APG, demos/reacher_policy.py's training), beside
# stable-baselines3's PPO on the Gymnasium environment, several seeds each.
#
# Every method is scored the same way, every so often while it trains: the mean return of its policy, acting
# deterministically, over 64 episodes of tisim/Reacher-v0 from fixed starts (seeds 1000..: 50 steps of 20 ms,
# Reacher-v5's reward -|fingertip - target| - |a|^2 each), and the fingertip's mean distance to the target at the
# episodes' end. Environment steps are the environment's 20 ms steps: APG's are its windows' simulator steps (10 ms)
# halved, times its environments. Seconds are training's, the scoring left out.
#
#   apg  demos/reacher_policy.py's controller and training: one tanh layer of 32 reading the joints' sines, cosines
#        and velocities, commands 0.2 tanh(output), the output layer starting scaled down four times; 32
#        environments (half of the episodes starting as Reacher-v5's, half with the arm anywhere), windows of 50
#        steps of 10 ms, Adam 3e-3. It is scored acting on the environment's state every 20 ms (it trained acting
#        every 10 ms). One training window runs before the clocks start, so that compiling the closed loop's
#        gradient (about 85 s, once per machine: Taichi caches it) is not counted as training.
#   ppo  stable_baselines3.PPO("MlpPolicy") with benchmarks/policy_baselines.py's settings: 16 environments (one
#        simulator), n_steps 256, batch 256, 10 epochs, lr 3e-4, gamma 0.99, GAE 0.95, clip 0.2, networks (64, 64)
#        tanh, observations and rewards normalized; it reads Reacher-v5's 10 observations.
#
# One process, one method at a time, each on one thread (Taichi's and PyTorch's), so that the seconds compare.
# Writes out/policy_baselines_reacher.json (the curves), .md (the table) and .png (return against steps and seconds).
#
# Command: python benchmarks/policy_baselines_reacher.py [--methods apg,ppo] [--seeds 3] [--ppo-steps 1000000]
#          [--apg-iterations 6000] [--out out]
import argparse
import importlib.util
import json
import pathlib
import time

import numpy as np
from machine import describe
from policy_baselines import ONE_THREAD, Curve, run_ppo, summary

ROOT = pathlib.Path(__file__).resolve().parent.parent
EPISODES, EVALUATION_SEED, TASK = 64, 1000, "tisim/Reacher-v0"


def demo():
    spec = importlib.util.spec_from_file_location("reacher_policy", ROOT / "demos" / "reacher_policy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Score:
    """Mean return over the fixed episodes, of a policy given as act(observations (n, 10), states) -> actions
    (n, 2); and the fingertip's mean distance to the target at the end [m]."""

    SECOND = "distance_m"

    def __init__(self, task):
        import gymnasium

        import tisim.envs  # noqa: F401 (registers the environments)
        self.envs = gymnasium.make_vec(TASK, num_envs=EPISODES)
        self.steps, self.task = self.envs.unwrapped.task.episode_steps, task

    def __call__(self, act):
        obs, _ = self.envs.reset(seed=EVALUATION_SEED)
        total = np.zeros(EPISODES)
        for _ in range(self.steps):
            action = np.clip(act(obs, self.envs.unwrapped.state), -1.0, 1.0)
            obs, reward, _, _, _ = self.envs.step(action)
            total += reward
        fingertip, target = self.task.points(self.envs.unwrapped.state["q"])
        return float(total.mean()), float(np.linalg.norm(fingertip - target, axis=1).mean())


def run_apg(d, seed, iterations, score):
    curve = Curve(score)
    every = max(iterations // 20, 1)
    policy = d.simulator(1, 1).model.policy

    def act_of(params):
        return lambda obs, state: policy.act_numpy(params["w_policy"], params["obs_mean"], params["obs_scale"],
                                                   state)

    steps_per_window = d.WINDOW * d.ENVIRONMENTS // 2  # the environment's step is two of the simulator's

    class Scores(d.Scores):  # the demo's scoring while it trains, replaced by the environment's
        def distance(self, params):
            iteration = len(curve.data["steps"]) * every if curve.data["steps"] else 0
            curve.record(iteration * steps_per_window, act_of(params))
            return curve.data["distance_m"][-1], None

    params, _, _ = d.train(seed, iterations, Scores(), every, report=lambda line: None)
    if curve.data["steps"][-1] < iterations * steps_per_window:
        curve.record(iterations * steps_per_window, act_of(params))
    return curve.data


def picture(curves, path):
    """Return against steps (a log scale: the methods' budgets differ) and seconds; PPO's first dips (to -31) are
    cut off below the motors-off return, so that the region where the methods differ shows."""
    from tisim import plots
    labels = {"apg": "APG (through the simulator)", "ppo": "PPO (stable-baselines3)"}
    figure = plots.learning_curves_figure({labels[m]: runs for m, runs in curves.items()},
                                          title="reacher: return over 64 fixed episodes while training")
    for axes, linear_below in zip(figure.axes, (1e4, 1.0)):
        axes.set_xscale("symlog", linthresh=linear_below)
        axes.set_ylim(-12.5, -3.5)
    figure.savefig(path, dpi=100)


def main():
    parser = argparse.ArgumentParser(description="APG through the simulator against PPO on the reacher.")
    parser.add_argument("--methods", default="apg,ppo")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--ppo-steps", type=int, default=1_000_000)
    parser.add_argument("--apg-iterations", type=int, default=6000)
    parser.add_argument("--out", default="out")
    args = parser.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    if not methods or any(m not in ("apg", "ppo") for m in methods):
        parser.error(f"--methods takes apg and ppo, got {args.methods!r}")
    if args.seeds < 1 or args.ppo_steps < 1 or args.apg_iterations < 1:
        parser.error("--seeds, --ppo-steps and --apg-iterations must be >= 1")

    import tisim
    tisim.init(threads=1)
    d = demo()
    score = Score(d.TASK)
    curves = {m: [] for m in methods}
    if "apg" in methods:  # compile the closed loop's kernels outside the clocks
        d.train(0, 1, d.Scores(), 1, report=lambda line: None)
    for method in methods:
        for seed in range(args.seeds):
            if method == "apg":
                curve = run_apg(d, seed, args.apg_iterations, score)
            else:
                curve = run_ppo(seed, args.ppo_steps, score, TASK)
            curves[method].append(curve)
            print(f"{method} seed {seed}: return {curve['return'][0]:.2f} -> {curve['return'][-1]:.2f}, distance "
                  f"{curve['distance_m'][-1]:.3f} m, after {curve['steps'][-1]:,} environment steps, "
                  f"{curve['seconds'][-1]:.0f} s of training", flush=True)

    rows, level, table = summary(curves, digits=2, second="distance_m")
    print(table)

    import stable_baselines3
    import torch
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = {"what": "reacher policies: APG through the simulator, PPO", "task": TASK,
              "scoring": f"mean return over {EPISODES} episodes from seeds {EVALUATION_SEED}.., deterministic policy",
              "command": f"python benchmarks/policy_baselines_reacher.py --methods {args.methods} --seeds "
                         f"{args.seeds} --ppo-steps {args.ppo_steps} --apg-iterations {args.apg_iterations}",
              "versions": {"tisim": tisim.__version__, "stable_baselines3": stable_baselines3.__version__,
                           "torch": torch.__version__},
              "date": time.strftime("%Y-%m-%d"), "machine": describe(ONE_THREAD),
              "ppo_final_return_median": level, "rows": rows, "curves": curves}
    (out / "policy_baselines_reacher.json").write_text(json.dumps(record, indent=1))
    (out / "policy_baselines_reacher.md").write_text(table + "\n")
    picture(curves, out / "policy_baselines_reacher.png")
    print(f"wrote {out / 'policy_baselines_reacher.json'}, {out / 'policy_baselines_reacher.md'} and "
          f"{out / 'policy_baselines_reacher.png'}")


if __name__ == "__main__":
    main()
