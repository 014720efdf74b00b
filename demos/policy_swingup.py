# Train a policy network that swings the cart-pole up and keeps it up, by gradients through the simulator.
#
# The task is the cart-pole swing-up of SHAC (Xu et al. 2022), as tisim.envs' CartpoleSwingUp-v0 poses it: start
# hanging (plus uniform noise of 0.1 on every state), 240 steps of 1/60 s, reward -(phi^2 + 0.1 theta_dot^2 +
# 0.05 x^2 + 0.1 x_dot^2) with phi the pole's angle from upright, force within +-10 N.
# The policy is a network inside the rollout: it reads (x, x_dot, sin theta, cos theta, theta_dot), scaled, through
# one tanh layer of 16 and pushes with 10 tanh(output) N (tisim.policy.closed_loop). Training runs 16 environments
# side by side, window by window; each window's cost, back-propagated through the physics and the network in one
# backward pass, gives the policy's gradient (tisim.tasks.train_policy). Two ways:
#   apg      analytic policy gradients over windows of 80 steps (1.3 s), 800 iterations
#   shac     SHAC: windows of 40 steps completed by a learned critic's value of where they end, 1000 iterations
#   refined  SHAC as above, then analytic policy gradients through whole episodes (240 steps, 8 environments,
#            1500 iterations): once the policy holds the pole up, the closed loop is stable and the gradient through
#            the whole episode stays well conditioned; it sees the whole cost where SHAC's sees its critic's estimate
#   lbfgs    SHAC as above, then L-BFGS on 16 whole episodes from starts drawn once (40 iterations): fixed starts
#            make the cost a deterministic function of the weights, and a quasi-Newton method takes long steps
# Each runs for several seeds; the learning curves record the evaluation return (32 fixed starts) against
# environment steps and wall-clock.
# Then the trained policy meets what it was not trained on, a 20% heavier pole and a push of 5 N for 0.2 s while it
# balances, beside an open-loop plan: the very forces the policy applies from the hanging state on the nominal pole,
# replayed without feedback.
# The best policy also runs in Gymnasium's tisim/CartpoleSwingUp-v0, whose steps are 4 substeps of 1/240 s.
# Writes out/policy_swingup.png (learning curves), out/policy_swingup.gif (policy | open-loop plan, heavier pole and
# pushed) and out/policy_swingup.json (the curves and the robustness figures).
#
# Command: python demos/policy_swingup.py [--methods apg,refined,lbfgs] [--seeds 5] [--iterations N] [--out out]
import argparse
import json
import pathlib
import time

import numpy as np
import taichi as ti

import tisim
from tisim import plots, viz
from tisim.losses import Custom
from tisim.optim.critic import Critic
from tisim.policy import closed_loop
from tisim.tasks import train_policy

DT, EPISODE, FORCE = 1.0 / 60.0, 240, 10.0  # s, steps, N
ENVIRONMENTS, HIDDEN = 16, (16,)  # environments trained side by side, the policy's hidden width
# how each method trains: steps per window, iterations, Adam's step, the critic's discount (None: no critic)
METHODS = {"apg": dict(window=80, iterations=800, lr=1e-2, gamma=None),
           "shac": dict(window=40, iterations=1000, lr=5e-3, gamma=0.99),
           "refined": dict(window=40, iterations=1000, lr=5e-3, gamma=0.99,
                           whole_episodes=dict(environments=8, iterations=1500, lr=2e-3)),
           "lbfgs": dict(window=40, iterations=1000, lr=5e-3, gamma=0.99,
                         fixed_episodes=dict(episodes=16, iterations=40))}
LABELS = {"apg": "analytic policy gradients, windows of 80", "shac": "SHAC, windows of 40 and a critic",
          "refined": "SHAC, then whole episodes", "lbfgs": "SHAC, then L-BFGS on 16 fixed episodes"}
SCALE = np.array([1.0, 2.0, 1.0, 1.0, 5.0])  # typical sizes of (x, x_dot, sin, cos, theta_dot): the observation scale
EVALUATION_STARTS, EVERY = 32, 50  # fixed starts of the evaluation, iterations between evaluations
PUSH_STEP, PUSH_STEPS, PUSH = 150, 12, 5.0  # the push: at 2.5 s, for 0.2 s, 5 N
Swing = closed_loop(tisim.systems.Cartpole, hidden=HIDDEN, limit=FORCE, angles=("theta",))


def reset(rng, batch):
    """The task's starting states: hanging, with uniform noise of 0.1 on each state."""
    x, x_dot, theta, theta_dot = rng.uniform(-0.1, 0.1, size=(4, batch))
    return {"x": x, "x_dot": x_dot, "theta": np.pi + theta, "theta_dot": theta_dot}


def running_cost(sim, steps, gamma=1.0):
    """The task's cost (minus its reward) summed over steps 1..steps, step t discounted by gamma^(t-1), divided by
    steps."""
    x, x_dot, theta, theta_dot = (sim.index(name) for name in ("x", "x_dot", "theta", "theta_dot"))

    @ti.func
    def cost(s: ti.template(), p: ti.template(), u: ti.template(), b, t):
        phi = ti.atan2(ti.sin(s[b, t, theta]), ti.cos(s[b, t, theta]))  # the angle from upright, wrapped
        return ti.pow(gamma, t - 1) / steps * (phi * phi + 0.1 * s[b, t, theta_dot] ** 2 + 0.05 * s[b, t, x] ** 2
                                               + 0.1 * s[b, t, x_dot] ** 2)

    return Custom(cost, steps=range(1, steps + 1))


def rewards(traj):
    """The reward of every step of a rollout: (B, T)."""
    phi = np.arctan2(np.sin(traj["theta"][:, 1:]), np.cos(traj["theta"][:, 1:]))
    return -(phi ** 2 + 0.1 * traj["theta_dot"][:, 1:] ** 2 + 0.05 * traj["x"][:, 1:] ** 2
             + 0.1 * traj["x_dot"][:, 1:] ** 2)


def balanced(traj):
    """Per episode: the pole within 0.2 rad of upright through the last second."""
    phi = np.arctan2(np.sin(traj["theta"][:, -60:]), np.cos(traj["theta"][:, -60:]))
    return np.all(np.abs(phi) < 0.2, axis=1)


class Evaluation:
    """Whole episodes of a policy from fixed starts (seed 123), optionally on a heavier pole and with a push."""

    def __init__(self, starts=EVALUATION_STARTS, m_pole=0.1, push=False):
        self.sim = Swing(horizon=EPISODE, batch=starts, dt=DT, m_pole=m_pole, **reset(np.random.default_rng(123),
                                                                                        starts))
        self.sim.set_params(obs_scale=SCALE)
        self.sim.set_actions(pushes(starts) if push else np.zeros((starts, EPISODE)))

    def __call__(self, weights):
        """(mean return, fraction of episodes balanced at the end, the rollout)."""
        self.sim.set_params(w_policy=weights)
        traj = self.sim.rollout()
        return float(rewards(traj).sum(axis=1).mean()), float(balanced(traj).mean()), traj


def pushes(batch):
    """The push as a feed-forward force added to whatever acts: (batch, EPISODE)."""
    force = np.zeros((batch, EPISODE))
    force[:, PUSH_STEP:PUSH_STEP + PUSH_STEPS] = PUSH
    return force


def train(seed, method="apg", iterations=None, evaluation=None, every=EVERY):
    """Train one policy from seed by `method` (METHODS; iterations, if given, replaces each stage's count); returns
    (weights, curve): the curve's evaluation return against environment steps and training seconds (the evaluations'
    own time left out); a refined run's curve goes on through its second stage, which starts at its entry
    curve["refined_from"]."""
    settings = METHODS[method]
    window, chosen, iterations = settings["window"], iterations, iterations or settings["iterations"]
    sim = Swing(horizon=window, batch=ENVIRONMENTS, dt=DT, seed=seed)
    sim.set_params(obs_scale=SCALE)
    critic = None if settings["gamma"] is None else \
        Critic(lambda traj: -rewards(traj), hidden=(32, 32), gamma=settings["gamma"], epochs=8, seed=seed)
    evaluation = evaluation or Evaluation()
    curve = {"steps": [], "seconds": [], "return": [], "balanced": []}
    clock = {"start": time.perf_counter(), "paused": 0.0}

    def record(iteration, weights, steps_before=0, steps_per_iteration=window * ENVIRONMENTS):
        pause = time.perf_counter()
        value, share, _ = evaluation(weights)
        curve["steps"].append(steps_before + iteration * steps_per_iteration)
        curve["seconds"].append(pause - clock["start"] - clock["paused"])
        curve["return"].append(value)
        curve["balanced"].append(share)
        clock["paused"] += time.perf_counter() - pause

    record(0, sim.params["w_policy"][0])
    result = train_policy(sim, running_cost(sim, window, settings["gamma"] or 1.0), reset, episode_steps=EPISODE,
                          iterations=iterations, optimizer=tisim.optim.Adam(lr=settings["lr"]), critic=critic,
                          seed=seed, callback=lambda i, w, loss: i % every == 0 and record(i, w))
    if iterations % every:
        record(iterations, result.values["w_policy"])
    if "fixed_episodes" in settings:  # the second stage: L-BFGS on whole episodes from fixed starts
        curve["refined_from"] = len(curve["steps"]) - 1
        stage, before = settings["fixed_episodes"], curve["steps"][-1]
        weights, steps = fit_fixed_episodes(result.values["w_policy"], seed, stage["episodes"],
                                            chosen or stage["iterations"],
                                            lambda i, w, spent: i % every == 0 and record(0, w, before + spent))
        if curve["steps"][-1] != before + steps:
            record(0, weights, before + steps)
        return weights, curve
    stage = settings.get("whole_episodes")
    if stage is None:
        return result.values["w_policy"], curve
    # the second stage: the same policy through whole episodes, without the critic
    curve["refined_from"] = len(curve["steps"]) - 1
    before, count, per = curve["steps"][-1], chosen or stage["iterations"], EPISODE * stage["environments"]
    whole = Swing(horizon=EPISODE, batch=stage["environments"], dt=DT, seed=seed,
                  w_policy=result.values["w_policy"])
    whole.set_params(obs_scale=SCALE)
    result = train_policy(whole, running_cost(whole, EPISODE), reset, episode_steps=EPISODE, iterations=count,
                          optimizer=tisim.optim.Adam(lr=stage["lr"]), seed=seed,
                          callback=lambda i, w, loss: i % every == 0 and record(i, w, before, per))
    if count % every:
        record(count, result.values["w_policy"], before, per)
    return result.values["w_policy"], curve


def fit_fixed_episodes(weights, seed, episodes, iterations, callback=None):
    """The policy fitted by L-BFGS (tisim.optim.lbfgs) to whole episodes from `episodes` starts drawn once (seed +
    10000): fixed starts make their mean cost a deterministic function of the weights, which a quasi-Newton method
    needs. callback(iteration, weights, environment steps so far) after every iteration. Returns (the final weights,
    the environment steps spent): every rollout counts, each gradient's and each line-search trial's."""
    from tisim.optim import lbfgs

    sim = Swing(horizon=EPISODE, batch=episodes, dt=DT, seed=seed,
                **reset(np.random.default_rng(seed + 10_000), episodes))
    sim.set_params(obs_scale=SCALE)
    loss = running_cost(sim, EPISODE)
    spent = [0]

    def rolled(w):
        sim.set_params(w_policy=np.broadcast_to(w, (episodes, w.size)))
        spent[0] += episodes * EPISODE

    def mean_cost(w):
        rolled(w)
        g = sim.gradient(loss)
        return g.value / episodes, g.params["w_policy"].mean(axis=0)

    def rollout_only(w):
        rolled(w)
        return float(np.sum(sim.evaluate(loss))) / episodes

    def follow(i, w, cost):
        if callback:
            callback(i + 1, w, spent[0])

    weights, _, _ = lbfgs(mean_cost, weights, iterations=iterations, value=rollout_only, callback=follow)
    return weights, spent[0]


def open_loop_plan(weights):
    """The forces the policy applies from the hanging state on the nominal pole, to be replayed without feedback:
    the same motion where nothing differs, and no correction where something does."""
    sim = Swing(horizon=EPISODE, dt=DT, theta=np.pi, w_policy=weights)
    sim.set_params(obs_scale=SCALE)
    traj = sim.rollout()
    return sim.model.policy.act_numpy(weights, 0.0, SCALE, {k: v[0, :-1] for k, v in traj.items()})[:, 0]


def replay_open_loop(forces, m_pole=0.1, push=False):
    sim = tisim.systems.Cartpole(horizon=EPISODE, dt=DT, theta=np.pi, m_pole=m_pole)
    sim.set_actions(forces[None] + (pushes(1) if push else 0.0))
    return sim.rollout()


def robustness(weights, forces):
    """Nominal, heavier pole, and heavier pole pushed: the policy over the 32 evaluation starts, the plan from the
    hanging state it was made for."""
    out = {}
    for name, m_pole, push in (("nominal", 0.1, False), ("heavier", 0.12, False), ("heavier_pushed", 0.12, True)):
        value, share, policy_traj = Evaluation(m_pole=m_pole, push=push)(weights)
        plan = replay_open_loop(forces, m_pole, push)
        out[name] = {"policy_return": value, "policy_balanced": share,
                     "plan_return": float(rewards(plan).sum()), "plan_balanced": bool(balanced(plan)[0])}
        out[name]["trajectories"] = (policy_traj, plan)
    return out


def in_gymnasium(weights, episodes=32, seed=0):
    """Mean return of the policy in tisim.envs' CartpoleSwingUp-v0 (Gymnasium's API; each env step there is 4
    simulator steps of 1/240 s, where training took one of 1/60 s), or None without gymnasium installed."""
    try:
        import gymnasium

        import tisim.envs  # noqa: F401 (registers the environments)
    except ImportError:
        return None
    envs = gymnasium.make_vec("tisim/CartpoleSwingUp-v0", num_envs=episodes)
    policy = Swing(horizon=1).model.policy
    obs, _ = envs.reset(seed=seed)
    total = np.zeros(episodes)
    for _ in range(EPISODE):  # the observation is the policy's phi(x): (x, x_dot, sin theta, cos theta, theta_dot)
        force = policy.network.apply_numpy(weights, obs / SCALE)
        obs, reward, _, _, _ = envs.step(np.tanh(force))  # the env's action is the force / 10 N
        total += reward
    envs.close()
    return float(total.mean())


def pictures(out, curves, figures):
    plot = plots.plot_learning_curves({LABELS[m]: runs for m, runs in curves.items()}, out / "policy_swingup.png",
                                      title="cart-pole swing-up: evaluation return (32 starts) while training")
    policy_traj, plan = figures["heavier_pushed"]["trajectories"]
    params = {**{k: float(v[0]) for k, v in tisim.systems.Cartpole(horizon=1).params.items()}, "m_pole": 0.12}
    one = {k: v[:1] for k, v in policy_traj.items()}
    both = {k: np.concatenate([one[k][0], plan[k][0]]) for k in plan}
    view = viz.view_cartpole(both, params)
    left = viz.frames("Cartpole", one, params, every=3, size=(400, 280), bounds=view, dt=DT,
                      caption="policy; pole +20%, pushed at 2.5 s")
    right = viz.frames("Cartpole", plan, params, every=3, size=(400, 280), bounds=view, dt=DT,
                       caption="its forces replayed open-loop; same")
    gif = viz.save_gif(out / "policy_swingup.gif", viz.side_by_side(left, right), fps=20)
    return plot, gif


def main(argv=None):
    parser = argparse.ArgumentParser(description=(
        "Train a closed-loop policy for the cart-pole swing-up through the simulator, by analytic policy gradients "
        "over windows, by SHAC and by SHAC refined through whole episodes, over several seeds, and test the best on "
        "a heavier pole and a push against its own forces replayed open-loop. Writes policy_swingup.png, .gif and "
        ".json."))
    parser.add_argument("--methods", default="apg,refined",
                        help="comma-separated training methods: apg (windows of 80 steps), shac (windows of 40 and a "
                             "critic), refined (shac, then whole episodes), lbfgs (shac, then L-BFGS on fixed "
                             "episodes); default apg,refined")
    parser.add_argument("--seeds", type=int, default=5, help="training runs per method, seeds 0..n-1 (default 5)")
    parser.add_argument("--iterations", type=int, default=None,
                        help="training iterations per run and stage (default: 800 for apg, 1000 for shac, "
                             "1000 and 1500 for refined, 1000 and 40 for lbfgs)")
    parser.add_argument("--out", default="out", help="folder for the pictures and the JSON (default out)")
    args = parser.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        parser.error(f"--methods takes names among {list(METHODS)}, got {args.methods!r}")
    if args.seeds < 1 or (args.iterations is not None and args.iterations < 1):
        parser.error("--seeds and --iterations must be >= 1")
    out = pathlib.Path(args.out)
    evaluation = Evaluation()
    curves, finals = {}, {}
    for method in methods:
        curves[method], finals[method] = [], []
        for seed in range(args.seeds):
            weights, curve = train(seed, method, args.iterations, evaluation)
            curves[method].append(curve)
            finals[method].append(weights)
            if "refined_from" in curve:
                k = curve["refined_from"]
                print(f"{method} seed {seed}: after SHAC ({curve['steps'][k]:,} environment steps, "
                      f"{curve['seconds'][k]:.1f} s) return {curve['return'][k]:.0f}")
            print(f"{method} seed {seed}: return {curve['return'][0]:.0f} -> {curve['return'][-1]:.0f} after "
                  f"{curve['steps'][-1]:,} environment steps ({curve['seconds'][-1]:.1f} s of training); balanced at "
                  f"the end in {100 * curve['balanced'][-1]:.0f}% of the 32 evaluation episodes")
    method, best = max(((m, b) for m in methods for b in range(args.seeds)),
                       key=lambda pair: curves[pair[0]][pair[1]]["return"][-1])
    forces = open_loop_plan(finals[method][best])
    figures = robustness(finals[method][best], forces)
    for name, row in figures.items():
        print(f"{name:>15}: policy ({method}, seed {best}) return {row['policy_return']:.0f}, balanced "
              f"{100 * row['policy_balanced']:.0f}% | its forces replayed open-loop: return {row['plan_return']:.0f}, "
              f"{'balanced' if row['plan_balanced'] else 'fell'}")
    gymnasium_return = in_gymnasium(finals[method][best])
    if gymnasium_return is not None:
        print(f"in Gymnasium's tisim/CartpoleSwingUp-v0 (4 substeps of 1/240 s): policy ({method}, seed {best}) "
              f"return {gymnasium_return:.0f} over 32 episodes")
    plot, gif = pictures(out, curves, figures)
    report = {"task": {"dt": DT, "episode_steps": EPISODE, "max_force": FORCE, "environments": ENVIRONMENTS,
                       "hidden": list(HIDDEN)},
              "methods": {m: METHODS[m] for m in methods}, "curves": curves, "best": {"method": method, "seed": best},
              "gymnasium_return": gymnasium_return,
              "robustness": {k: {key: v for key, v in row.items() if key != "trajectories"}
                             for k, row in figures.items()}}
    out.mkdir(parents=True, exist_ok=True)
    (out / "policy_swingup.json").write_text(json.dumps(report, indent=1))
    print(f"wrote {plot}, {gif} and {out / 'policy_swingup.json'}")
    return report


if __name__ == "__main__":
    main()
