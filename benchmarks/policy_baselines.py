# What the gradient through the simulator buys a policy: the cart-pole swing-up (tisim/CartpoleSwingUp-v0, SHAC's
# task) learned by SHAC through the simulator, by stable-baselines3's PPO on the Gymnasium environment, and by the
# cross-entropy method (CEM) on the weights of the same policy network SHAC trains, several seeds each.
#
# Every method is scored the same way, every so often while it trains: the mean return of its policy, acting
# deterministically, over 32 episodes of tisim/CartpoleSwingUp-v0 from fixed starts (the environment's own steps of
# 4 substeps of 1/240 s; SHAC and CEM train on one step of 1/60 s, as demos/policy_swingup.py does). The curves give
# that return against environment steps (one step: 1/60 s of one environment; SHAC's steps are its windows', CEM's
# every candidate's episodes) and against seconds of training (the scoring's own time left out).
#
#   shac     demos/policy_swingup.py's SHAC (windows of 40 steps, its critic, its policy network) on 4 environments
#            with Adam's step 1e-2: SHAC learns per iteration, so fewer environments need fewer steps (16, the
#            demo's, needed about 3x the steps for the same returns; 64, as in Xu et al., more still in 600
#            iterations)
#   refined  the same SHAC run, then the demo's second stage: analytic policy gradients through whole episodes
#            (8 environments, Adam 2e-3, 1500 iterations); the shac curves are this run's first stage
#   lbfgs    the same SHAC run, then L-BFGS (tisim.optim.lbfgs) on the mean cost of 16 whole episodes from starts
#            drawn once: fixed starts make the cost a deterministic function of the weights, so a quasi-Newton
#            method can take long steps; 40 iterations, every rollout counted (gradients and line-search trials)
#   ppo      stable_baselines3.PPO("MlpPolicy"): 16 environments (tisim's SimulatedVectorEnv, one simulator),
#            n_steps 256, batch 256, 10 epochs, lr 3e-4, gamma 0.99, GAE 0.95, clip 0.2, networks (64, 64) tanh,
#            observations and rewards normalized (VecNormalize): common settings for a small continuous-control task
#   cem      the policy network's weights (one tanh layer of 16, as SHAC's) sampled 64 at a time, each scored on 4
#            episodes of the training task run as one batch with the other candidates; the best 8 refit the mean and
#            spread
#
# One process, one method at a time, each on one thread (Taichi's and PyTorch's), so that the seconds compare.
# Writes out/policy_baselines.json (the curves), out/policy_baselines.png (return against steps and against seconds)
# and a table of the return each method reaches and the steps and seconds each needs to reach PPO's final return.
#
# Command: python benchmarks/policy_baselines.py [--methods shac,refined,lbfgs,ppo,cem] [--seeds 3]
#          [--ppo-steps 1000000] [--shac-iterations 1000] [--cem-iterations 150] [--out out]
import argparse
import importlib.util
import json
import pathlib
import time

import numpy as np
from machine import describe

ONE_THREAD = "each method on one thread (Taichi's and PyTorch's), one method at a time"

ROOT = pathlib.Path(__file__).resolve().parent.parent
EPISODES, EVALUATION_SEED = 32, 1000  # the scoring: episodes of the Gymnasium environment and their first seed
ENVIRONMENTS = 16
TASK = "tisim/CartpoleSwingUp-v0"


def demo():
    spec = importlib.util.spec_from_file_location("policy_swingup", ROOT / "demos" / "policy_swingup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Score:
    """Mean return over the fixed episodes of the Gymnasium environment, of a policy given as
    act(observations (n, 5)) -> actions (n, 1) in [-1, 1]; also the share that ends balanced (the pole within 0.2
    rad of upright through the last second)."""

    SECOND = "balanced"

    def __init__(self):
        import gymnasium

        import tisim.envs  # noqa: F401 (registers the environments)
        self.envs = gymnasium.make_vec(TASK, num_envs=EPISODES)
        self.steps = self.envs.unwrapped.task.episode_steps

    def __call__(self, act):
        obs, _ = self.envs.reset(seed=EVALUATION_SEED)
        total = np.zeros(EPISODES)
        upright = np.ones(EPISODES, dtype=bool)
        for step in range(self.steps):
            obs, reward, _, _, _ = self.envs.step(np.clip(act(obs), -1.0, 1.0))
            total += reward
            if step >= self.steps - 60:
                theta = self.envs.unwrapped.state["theta"]
                upright &= np.abs(np.arctan2(np.sin(theta), np.cos(theta))) < 0.2
        return float(total.mean()), float(upright.mean())


class Curve:
    """Score against environment steps and training seconds; the scoring's time is not training time. The score
    gives (return, a second figure named score.SECOND)."""

    def __init__(self, score):
        self.score, self.start, self.paused = score, time.perf_counter(), 0.0
        self.data = {"steps": [], "seconds": [], "return": [], score.SECOND: []}

    def record(self, steps, act):
        pause = time.perf_counter()
        value, second = self.score(act)
        self.data["steps"].append(int(steps))
        self.data["seconds"].append(pause - self.start - self.paused)
        self.data["return"].append(value)
        self.data[self.score.SECOND].append(second)
        self.paused += time.perf_counter() - pause
        return value


def network_policy(d, weights):
    """The closed-loop policy of demos/policy_swingup.py as act(obs): the env's action is the force / 10 N."""
    policy = d.Swing(horizon=1).model.policy
    return lambda obs: np.tanh(policy.network.apply_numpy(weights, obs / d.SCALE)).reshape(-1, 1)


SHAC = dict(environments=4, lr=1e-2)


def run_shac(d, seed, iterations, score, refine=None):
    """SHAC's curve; with refine="adam", the run goes on through the demo's whole episodes, with refine="lbfgs"
    through L-BFGS on fixed whole episodes (the demo's fit_fixed_episodes), and the curve's entry "refined_from"
    marks where."""
    curve = Curve(score)
    every = max(iterations // 20, 1)
    environments = SHAC["environments"]

    def callback(i, weights, loss):
        if i % every == 0:
            curve.record(i * d.METHODS["shac"]["window"] * environments, network_policy(d, weights))

    settings = d.METHODS["shac"]
    sim = d.Swing(horizon=settings["window"], batch=environments, dt=d.DT, seed=seed)
    sim.set_params(obs_scale=d.SCALE)
    from tisim.optim import Adam
    from tisim.optim.critic import Critic
    from tisim.tasks import train_policy
    critic = Critic(lambda traj: -d.rewards(traj), hidden=(32, 32), gamma=settings["gamma"], epochs=8, seed=seed)
    curve.record(0, network_policy(d, sim.params["w_policy"][0]))
    result = train_policy(sim, d.running_cost(sim, settings["window"], settings["gamma"]), d.reset,
                          episode_steps=d.EPISODE, iterations=iterations, optimizer=Adam(lr=SHAC["lr"]),
                          critic=critic, seed=seed, progress=False, callback=callback)
    steps = iterations * settings["window"] * environments
    curve.record(steps, network_policy(d, result.values["w_policy"]))
    if refine is None:
        return curve.data
    curve.data["refined_from"] = len(curve.data["steps"]) - 1
    if refine == "lbfgs":  # the demo's method lbfgs: L-BFGS on whole episodes from fixed starts
        stage = d.METHODS["lbfgs"]["fixed_episodes"]
        d.fit_fixed_episodes(result.values["w_policy"], seed, stage["episodes"], stage["iterations"],
                             lambda i, w, spent: curve.record(steps + spent, network_policy(d, w)))
        return curve.data
    stage = d.METHODS["refined"]["whole_episodes"]
    per, every = d.EPISODE * stage["environments"], max(stage["iterations"] // 20, 1)
    whole = d.Swing(horizon=d.EPISODE, batch=stage["environments"], dt=d.DT, seed=seed,
                    w_policy=result.values["w_policy"])
    whole.set_params(obs_scale=d.SCALE)

    def refining(i, weights, loss):
        if i % every == 0:
            curve.record(steps + i * per, network_policy(d, weights))

    result = train_policy(whole, d.running_cost(whole, d.EPISODE), d.reset, episode_steps=d.EPISODE,
                          iterations=stage["iterations"], optimizer=Adam(lr=stage["lr"]), seed=seed, progress=False,
                          callback=refining)
    if stage["iterations"] % every:
        curve.record(steps + stage["iterations"] * per, network_policy(d, result.values["w_policy"]))
    return curve.data


def sb3_vector_env(num_envs, seed, task=TASK, **options):
    """tisim's SimulatedVectorEnv (the environments as one simulator's batch) behind stable-baselines3's VecEnv
    interface: SB3 expects a finished environment reset within step, its last observation in the info. options go
    to the task (Pinch's target=)."""
    import gymnasium
    from stable_baselines3.common.vec_env import VecEnv

    import tisim.envs  # noqa: F401

    class TisimVecEnv(VecEnv):
        def __init__(self):
            self.env = gymnasium.make_vec(task, num_envs=num_envs, **options)
            super().__init__(num_envs, self.env.single_observation_space, self.env.single_action_space)
            self.first_seed = seed

        def reset(self):
            obs, _ = self.env.reset(seed=self.first_seed)
            self.first_seed = None
            return obs

        def step_async(self, actions):
            self.actions = actions

        def step_wait(self):
            obs, reward, terminated, truncated, _ = self.env.step(self.actions)
            done = terminated | truncated
            infos = [{} for _ in range(self.num_envs)]
            if done.any():
                for i in np.flatnonzero(done):
                    infos[i]["terminal_observation"] = obs[i].copy()
                    infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
                fresh, _ = self.env.reset(options={"reset_mask": done})
                obs = np.where(done[:, None], fresh, obs)
            return obs, reward, done, infos

        def close(self):
            self.env.close()

        def get_attr(self, name, indices=None):
            return [getattr(self.env, name)] * len(self._get_indices(indices))

        def set_attr(self, name, value, indices=None):
            setattr(self.env, name, value)

        def env_method(self, name, *args, indices=None, **kwargs):
            return [getattr(self.env, name)(*args, **kwargs)] * len(self._get_indices(indices))

        def env_is_wrapped(self, wrapper_class, indices=None):
            return [False] * len(self._get_indices(indices))

    return TisimVecEnv()


def run_ppo(seed, total_steps, score, task=TASK):
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)
    env = VecNormalize(sb3_vector_env(ENVIRONMENTS, seed, task), gamma=0.99)
    model = PPO("MlpPolicy", env, n_steps=256, batch_size=256, n_epochs=10, learning_rate=3e-4, gamma=0.99,
                gae_lambda=0.95, clip_range=0.2, ent_coef=0.0,
                policy_kwargs=dict(net_arch=dict(pi=[64, 64], vf=[64, 64]), activation_fn=torch.nn.Tanh),
                seed=seed, device="cpu", verbose=0)
    curve = Curve(score)
    every = max(total_steps // 20, ENVIRONMENTS * 256)

    def act(obs, state=None):
        action, _ = model.predict(env.normalize_obs(obs), deterministic=True)
        return action

    class Record(BaseCallback):
        def __init__(self):
            super().__init__()
            self.next = every

        def _on_step(self):
            if self.num_timesteps >= self.next:
                self.next += every
                curve.record(self.num_timesteps, act)
            return True

    curve.record(0, act)
    model.learn(total_timesteps=total_steps, callback=Record())
    if curve.data["steps"][-1] < model.num_timesteps:
        curve.record(model.num_timesteps, act)
    return curve.data


def run_cem(d, seed, iterations, score, population=64, starts=4, elites=8):
    """CEM on the policy weights; each candidate's cost is the training task's over `starts` episodes."""
    curve = Curve(score)
    rng = np.random.default_rng(seed)
    sim = d.Swing(horizon=d.EPISODE, batch=population * starts, dt=d.DT, seed=seed)
    sim.set_params(obs_scale=d.SCALE)
    n = sim.params["w_policy"].shape[1]
    mean, spread = sim.params["w_policy"][0].copy(), np.full(n, 0.5)
    every = max(iterations // 20, 1)
    curve.record(0, network_policy(d, mean))
    for i in range(1, iterations + 1):
        candidates = mean + spread * rng.normal(size=(population, n))
        sim.set_params(w_policy=np.repeat(candidates, starts, axis=0))
        sim.set_initial_state(**d.reset(rng, population * starts))
        traj = sim.rollout()
        returns = d.rewards(traj).sum(axis=1).reshape(population, starts).mean(axis=1)
        best = candidates[np.argsort(-returns)[:elites]]
        mean = 0.8 * best.mean(axis=0) + 0.2 * mean
        spread = 0.8 * best.std(axis=0) + 0.2 * spread + 1e-3
        if i % every == 0 or i == iterations:
            curve.record(i * population * starts * d.EPISODE, network_policy(d, mean))
    return curve.data


def reach(curve, level):
    """(steps, seconds) of the first score at or above level, or None."""
    for steps, seconds, value in zip(curve["steps"], curve["seconds"], curve["return"]):
        if value >= level:
            return steps, seconds
    return None


def summary(curves, digits=0, second=None):
    """(rows, level, a markdown table) of the curves {method: [curve per seed]}: per method the median final return
    (and of the score's second figure, when named), the steps, the median seconds, and per seed the steps and
    seconds to the level, PPO's median final return (None without PPO)."""
    level = float(np.median([c["return"][-1] for c in curves["ppo"]])) if "ppo" in curves else None
    rows = []
    for method, runs in curves.items():
        row = {"method": method, "final_return_median": float(np.median([c["return"][-1] for c in runs]))}
        if second:
            row[f"final_{second}_median"] = float(np.median([c[second][-1] for c in runs]))
        row.update(final_steps=runs[0]["steps"][-1],
                   final_seconds_median=float(np.median([c["seconds"][-1] for c in runs])))
        if level is not None:
            reached = [reach(c, level) for c in runs]
            row["reaches_ppo_final"] = [None if r is None else {"steps": r[0], "seconds": r[1]} for r in reached]
        rows.append(row)
    named = [f"median final {second}"] if second else []
    lines = ["| " + " | ".join(["method", "median final return", *named, "environment steps", "median seconds",
                                "steps and seconds to PPO's final return, per seed"]) + " |",
             "|" + "---|" * (5 + len(named))]
    for row in rows:
        reached = row.get("reaches_ppo_final")
        cell = "" if reached is None else ", ".join("not reached" if r is None else
                                                    f"{r['steps']:,} / {r['seconds']:.0f} s" for r in reached)
        figures = [f"{row['final_return_median']:.{digits}f}"] + \
            ([f"{row[f'final_{second}_median']:.3f}"] if second else [])
        lines.append("| " + " | ".join([row["method"], *figures, f"{row['final_steps']:,}",
                                        f"{row['final_seconds_median']:.0f}", cell]) + " |")
    return rows, level, "\n".join(lines)


def plot(curves, path):
    """Return against environment steps and against seconds, a line per seed; SHAC's stage is drawn over the
    refined runs' first stage, which it is."""
    from tisim import plots
    labels = {"refined": "SHAC, then whole episodes", "lbfgs": "SHAC, then L-BFGS on 16 fixed episodes",
              "shac": "SHAC (through the simulator)",
              "ppo": "PPO (stable-baselines3)", "cem": "CEM (weights)"}
    figure = plots.learning_curves_figure({labels[m]: curves[m] for m in labels if m in curves},
                                          title="cart-pole swing-up: return over 32 fixed episodes while training")
    for axes, linear_below in zip(figure.axes, (1e4, 1.0)):  # the methods' budgets differ by orders of magnitude
        axes.set_xscale("symlog", linthresh=linear_below)
    figure.savefig(path, dpi=100)


def main():
    parser = argparse.ArgumentParser(description="SHAC through the simulator against PPO and CEM on the cart-pole "
                                                 "swing-up.")
    parser.add_argument("--methods", default="shac,refined,lbfgs,ppo,cem")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--ppo-steps", type=int, default=1_000_000)
    parser.add_argument("--shac-iterations", type=int, default=1000)
    parser.add_argument("--cem-iterations", type=int, default=150)
    parser.add_argument("--out", default="out")
    args = parser.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    if not methods or any(m not in ("shac", "refined", "lbfgs", "ppo", "cem") for m in methods):
        parser.error(f"--methods takes shac, refined, lbfgs, ppo and cem, got {args.methods!r}")
    if args.seeds < 1 or args.ppo_steps < 1 or args.shac_iterations < 1 or args.cem_iterations < 1:
        parser.error("--seeds, --ppo-steps, --shac-iterations and --cem-iterations must be >= 1")

    import tisim
    tisim.init(precision="f64", threads=1)
    d = demo()
    score = Score()
    curves = {m: [] for m in methods}
    for method in methods:
        for seed in range(args.seeds):
            if method == "shac" and "refined" in methods:  # the refined run's first stage
                continue
            if method in ("shac", "refined", "lbfgs"):
                refine = {"refined": "adam", "lbfgs": "lbfgs"}.get(method)
                curve = run_shac(d, seed, args.shac_iterations, score, refine=refine)
                if method == "refined" and "shac" in methods:
                    first = curve["refined_from"] + 1
                    curves["shac"].append({k: v[:first] for k, v in curve.items() if k != "refined_from"})
            elif method == "ppo":
                curve = run_ppo(seed, args.ppo_steps, score)
            else:
                curve = run_cem(d, seed, args.cem_iterations, score)
            curves[method].append(curve)
            print(f"{method} seed {seed}: return {curve['return'][0]:.0f} -> {curve['return'][-1]:.0f} after "
                  f"{curve['steps'][-1]:,} environment steps, {curve['seconds'][-1]:.0f} s of training; balanced "
                  f"{100 * curve['balanced'][-1]:.0f}%", flush=True)

    rows, level, table = summary(curves)
    print(table)

    import stable_baselines3
    import torch
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = {"what": "cart-pole swing-up policies: SHAC through the simulator (and refined through whole "
                      "episodes by Adam or by L-BFGS), PPO, CEM", "task": TASK,
              "scoring": f"mean return over {EPISODES} episodes from seeds {EVALUATION_SEED}.., deterministic policy",
              "command": f"python benchmarks/policy_baselines.py --methods {args.methods} --seeds {args.seeds} "
                         f"--ppo-steps {args.ppo_steps} --shac-iterations {args.shac_iterations} "
                         f"--cem-iterations {args.cem_iterations}",
              "versions": {"tisim": tisim.__version__, "stable_baselines3": stable_baselines3.__version__,
                           "torch": torch.__version__},
              "date": time.strftime("%Y-%m-%d"), "machine": describe(ONE_THREAD),
              "ppo_final_return_median": level, "rows": rows, "curves": curves}
    (out / "policy_baselines.json").write_text(json.dumps(record, indent=1))
    (out / "policy_baselines.md").write_text(table + "\n")
    plot(curves, out / "policy_baselines.png")
    print(f"wrote {out / 'policy_baselines.json'}, {out / 'policy_baselines.md'} and {out / 'policy_baselines.png'}")


if __name__ == "__main__":
    main()
