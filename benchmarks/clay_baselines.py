# PlasticineLab's question on tisim's clay tasks (tisim/envs/shape.py: Pinch, RollingPin, Move, Chopsticks): does
# the gradient through the simulation shape the clay better than search and than reinforcement learning? Three
# targets of each task (hidden plans 0, 1, 2), each fitted by:
#
#   adam  demos/plasticine_pinch.py's Adam on the open-loop plan (the tools' velocities over 25 intervals), 90
#         iterations (60 at a learning rate of 0.05 m/s, 30 at 0.01; a stick's turn in units that move its end at
#         1 m/s, 20.8 rad/s), one rollout and one backward pass each
#   cem   the demo's CEM on the same plan, 32 plans a round run as one batch, for Adam's wall-clock
#   ppo   stable_baselines3.PPO("MlpPolicy") on the task's Gymnasium environment (the same scene and target; an
#         action every 4 ms, 25 an episode), 16 environments as one simulator's batch, n_steps 64, batch 256, 10
#         epochs, lr 3e-4, gamma 0.99, GAE 0.95, clip 0.2, networks (64, 64) tanh, observations and rewards
#         normalized; for `--ppo-factor` times Adam's wall-clock (default 4), scored at Adam's wall-clock and at
#         the end
#
# Scored alike: the intersection over union (IoU) of the cells the clay fills at the end with those the target fills
# (cells as wide as the points' spacing) and the normalized incremental IoU; PPO's policy acts deterministically
# from the episode's start (the task has no randomness). One process, one method at a time, one thread each.
# Writes out/clay_baselines_<task>.json and prints a table.
#
# Command: python benchmarks/clay_baselines.py [--tasks Pinch,RollingPin,Move,Chopsticks] [--targets 3]
#          [--ppo-factor 4] [--out out]
import argparse
import importlib.util
import json
import pathlib
import time

import numpy as np
from machine import describe
from policy_baselines import sb3_vector_env

import tisim

ROOT = pathlib.Path(__file__).resolve().parent.parent
ENVIRONMENTS = 16


def demo():
    spec = importlib.util.spec_from_file_location("plasticine_pinch", ROOT / "demos" / "plasticine_pinch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ppo_score(env, model, normalize):
    """IoU and loss at the end of one deterministic episode of the policy, from the task's start."""
    obs, _ = env.reset()
    for _ in range(env.episode_steps):
        action, _ = model.predict(normalize(obs[None]), deterministic=True)
        obs, *_ = env.step(action[0])
    final = {k: np.asarray(v)[None] for k, v in env.state.items()}
    return float(env.loss(final)[0]), final["pos"][0]


def run_ppo(task, target, seconds, checkpoint, seed=0):
    """PPO for `seconds` of training (scoring left out), its score recorded after each update that crosses
    `checkpoint` seconds and at the end: [{seconds, steps, loss, pos}]."""
    import gymnasium
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)
    env = VecNormalize(sb3_vector_env(ENVIRONMENTS, seed, f"tisim/{task}-v0", target=target), gamma=0.99)
    single = gymnasium.make(f"tisim/{task}-v0", target=target).unwrapped
    model = PPO("MlpPolicy", env, n_steps=64, batch_size=256, n_epochs=10, learning_rate=3e-4, gamma=0.99,
                gae_lambda=0.95, clip_range=0.2, ent_coef=0.0,
                policy_kwargs=dict(net_arch=dict(pi=[64, 64], vf=[64, 64]), activation_fn=torch.nn.Tanh),
                seed=seed, device="cpu", verbose=0)
    record, clock = [], {"spent": 0.0, "since": time.perf_counter(), "next": checkpoint}

    def score():
        loss, pos = ppo_score(single, model, env.normalize_obs)
        record.append(dict(seconds=clock["spent"], steps=int(model.num_timesteps), loss=loss, pos=pos))

    class Budget(BaseCallback):
        def _on_rollout_end(self):
            clock["spent"] += time.perf_counter() - clock["since"]
            if clock["spent"] >= clock["next"]:
                clock["next"] = float("inf")
                score()
            clock["since"] = time.perf_counter()

        def _on_step(self):
            return clock["spent"] + time.perf_counter() - clock["since"] < seconds

    model.learn(total_timesteps=10 ** 9, callback=Budget())
    clock["spent"] += time.perf_counter() - clock["since"]
    score()
    return record


def warm_up(task, sim, population):
    """Compile what each method runs before any clock starts: the gradient, a population's rollout, a vector
    environment's step."""
    import gymnasium

    sim.gradient(compile_loss(sim))
    population.evaluate(compile_loss(population))
    vector = gymnasium.make_vec(f"tisim/{task}-v0", num_envs=ENVIRONMENTS)
    vector.reset(seed=0)
    vector.step(np.zeros((ENVIRONMENTS,) + vector.single_action_space.shape))


def compile_loss(sim):
    """Any loss on the points (for compiling)."""
    from tisim.losses import TerminalTarget

    return TerminalTarget({"pos": sim.initial_state["pos"][0]})


def main():
    parser = argparse.ArgumentParser(description="Adam, CEM and PPO on tisim's clay tasks.")
    parser.add_argument("--tasks", default="Pinch,RollingPin,Move,Chopsticks",
                        help="of tisim/envs/shape.py (default all four)")
    parser.add_argument("--targets", type=int, default=3, help="hidden plans 0, 1, ... (default 3)")
    parser.add_argument("--ppo-factor", type=float, default=4.0, help="PPO's time as a multiple of Adam's (default 4)")
    parser.add_argument("--out", default="out")
    args = parser.parse_args()
    from tisim.envs import shape

    tisim.init(precision="f64", threads=1)
    d = demo()
    folder = pathlib.Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    for task in args.tasks.split(","):
        kind = getattr(shape, task)
        sim, population = kind.scene(), kind.scene(batch=32)
        warm_up(task, sim, population)
        rows = []
        for target in range(args.targets):
            sim.set_actions(shape.plan_actions(kind.hidden_plan(target)))
            goal = sim.rollout()["pos"][0, -1]
            loss = d.TerminalTarget({"pos": goal}, weights={"pos": 1.0 / sim.n_particles})
            sim.set_actions(np.zeros_like(sim.actions))
            base = d.score(sim.rollout()["pos"][0, -1], goal)

            def scored(pos, loss_value, seconds, steps):
                value = d.score(pos, goal)
                return dict(iou=value, normalized_incremental_iou=(value - base) / (1 - base), loss=loss_value,
                            seconds=seconds, env_steps=steps)

            def final_of(plan):
                sim.set_actions(shape.plan_actions(plan))
                return sim.rollout()["pos"][0, -1], float(sim.evaluate(loss)[0])

            scale = np.asarray(kind.UNIT)  # 1 m/s, and for a turn what moves a tool's end 1 m/s
            plan, seconds, _ = d.fit_by_gradient(sim, loss, 90, 25, 0.05, scale)
            adam = scored(*final_of(plan), seconds, 90 * kind.EPISODE_STEPS)

            def loss_of(samples):
                population.set_actions(shape.plan_actions(scale * samples))
                return population.evaluate(loss)

            cem_plan, rollouts = d.fit_by_cem(loss_of, seconds, target, (25,) + sim.action_shape)
            cem = scored(*final_of(scale * cem_plan), seconds, rollouts * kind.EPISODE_STEPS)
            ppo = [scored(r["pos"], r["loss"], r["seconds"], r["steps"])
                   for r in run_ppo(task, target, args.ppo_factor * seconds, seconds)]
            rows.append(dict(target=target, iou_at_start=base, adam=adam, cem=cem, ppo=ppo))
            print(f"{task} {target}: start {base:.3f}; Adam {adam['iou']:.3f} in {seconds:.0f} s; CEM "
                  f"{cem['iou']:.3f}; " + "; ".join(f"PPO {p['iou']:.3f} at {p['seconds']:.0f} s "
                                                     f"({p['env_steps']} steps)" for p in ppo), flush=True)
        figures = {"benchmark": "clay_baselines", "task": task, "date": time.strftime("%Y-%m-%d"),
                   "machine": describe("one method at a time, one thread each"), "ppo_factor": args.ppo_factor,
                   "env_steps": "an env step is 4 ms of one environment (20 simulator steps); a plan's rollout 25",
                   "targets": rows}
        (folder / f"clay_baselines_{task}.json").write_text(json.dumps(figures, indent=2))
        print(f"{task}: IoU (normalized incremental IoU)\n| target | start | Adam | CEM (same time) | PPO (same time) "
              "| PPO (end) |\n|---|---|---|---|---|---|")
        for row in rows:
            cells = [f"{r['iou']:.3f} ({r['normalized_incremental_iou']:.2f})"
                     for r in (row["adam"], row["cem"], row["ppo"][0], row["ppo"][-1])]
            print(f"| {row['target']} | {row['iou_at_start']:.3f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
