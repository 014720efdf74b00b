# Train a closed-loop controller for a soft quadruped through its physics, then push it.
#
# The controller is a network inside the rollout (tisim.policy.closed_loop on MassSpring): every step it reads the
# particles' positions relative to their centroid, their velocities, and sin/cos of three harmonics of a 2 Hz clock
# (DiffTaichi's walkers read such waves), through one tanh layer of 32, and sets each actuator's activation to
# 0.25 tanh(output). The observation is standardized over a first rollout, and the body's features are then scaled
# down ten times more, so that a new network acts mostly on the clock: it starts as a rhythm, and training decides
# how much to listen to the body.
# Training is analytic policy gradients over windows (tisim.tasks.train_policy): 4 environments, each episode of 1 s
# starting where the body was built, with random particle velocities of 5 cm/s and the whole body moving at a random
# speed of up to 0.5 m/s forwards or backwards (as after a shove); windows of 500 steps (0.25 s), each window's loss
# minus the body's mean x where it ends, one Adam step a window. Windows, because the gradient through a whole
# second of this closed loop grows a hundred-thousandfold and more (docs/tutorials/policies.md).
# Each seed's controller then walks 1 s and 2 s from 8 starts (at rest, and with 7 fixed draws of random particle
# velocities; every distance here is their mean), and again with a shove at 0.5 s (every particle's velocity
# changed by -0.5 m/s in x: a push backwards), beside the open-loop gait: the very activations the controller
# produced in each unpushed walk, replayed without feedback. Without the push the two walks are the same (to the
# rounding of numpy's network against Taichi's, grown over 2 s: a fraction of a millimetre).
# Writes out/soft_walker_policy.json (per seed: the 1 s distance before and after training, the 2 s walks with and
# without the push, closed and open loop, the training's seconds; the medians over seeds) and
# out/soft_walker_policy.gif (the best seed from rest, pushed: the controller above the replayed gait).
#
# Command: python demos/soft_walker_policy.py [--seeds 5] [--iterations 160] [--out out]
import argparse
import json
import pathlib
import time

import numpy as np

import tisim
from tisim import viz
from tisim.optim import Adam
from tisim.policy import closed_loop, normalization
from tisim.systems.mass_spring import MassSpring, mean_x_weights
from tisim.tasks import train_policy

ROBOT, DT, EPS = "quadruped", 5e-4, 0.1  # MassSpring's step and friction scale, as demos/soft_walker.py
EPISODE, WINDOW, ENVIRONMENTS, LEARNING_RATE = 2000, 500, 4, 3e-3  # steps, steps, -, Adam's step
LIMIT, HIDDEN, CLOCK, BODY_SCALE = 0.25, (32,), (2.0, 3), 10.0
WALK, PUSH_STEP, PUSH = 4000, 1000, (-0.5, 0.0)  # the evaluation: 2 s, the shove at 0.5 s, m/s on every particle
STARTS, SHOVE = 8, 0.5  # the evaluation's starts (each distance their mean); the training starts' speed, m/s
Walker = closed_loop(MassSpring, hidden=HIDDEN, limit=LIMIT, centred=("pos",), clock=CLOCK)


def simulator(horizon, batch=1):
    return Walker(horizon=horizon, batch=batch, dt=DT, robot=ROBOT, eps=EPS)


def at_rest(sim, batch, rng=None):
    """The body standing where it was built, the clock at 0; with rng, random particle velocities of 5 cm/s."""
    particles = sim.robot.particles
    vel = np.zeros((batch,) + particles.shape) if rng is None else rng.normal(0.0, 0.05, (batch,) + particles.shape)
    return {"pos": np.broadcast_to(particles, (batch,) + particles.shape).copy(), "vel": vel, "clock": np.zeros(batch)}


def shoved_start(sim, batch, rng):
    """at_rest with random particle velocities, the whole body moving at a random speed of up to SHOVE m/s in x."""
    state = at_rest(sim, batch, rng)
    state["vel"][..., 0] += rng.uniform(-SHOVE, SHOVE, (batch, 1))
    return state


def starts(sim):
    """The evaluation's starts: from rest, and STARTS - 1 more with random particle velocities (fixed: seed 1000)."""
    state = at_rest(sim, STARTS, np.random.default_rng(1000))
    state["vel"][0] = 0.0
    return state


def walked(traj, start):
    """How far the body's mean x moved from start by the end of a rollout, averaged over the batch [m]."""
    return float(traj["pos"][:, -1, :, 0].mean() - start)


def train(seed, iterations, report=print):
    """A controller trained from seed's initial weights. Returns its parameters (weights and normalization), the
    mean distances it walks in 1 s from the evaluation's starts before and after training, and the training's
    seconds."""
    evaluation = simulator(EPISODE, STARTS)
    evaluation.set_initial_state(**starts(evaluation))
    weights = evaluation.model.policy.network.initial_weights(seed)
    evaluation.set_params(w_policy=weights)
    scaling = normalization(evaluation, evaluation.rollout())
    scaling["obs_scale"][:-2 * CLOCK[1]] *= BODY_SCALE  # the body's features, all but the clock's
    evaluation.set_params(**scaling)
    start = evaluation.robot.particles[:, 0].mean()
    before = walked(evaluation.rollout(), start)
    sim = simulator(WINDOW, ENVIRONMENTS)
    sim.set_params(w_policy=np.broadcast_to(weights, (ENVIRONMENTS, weights.size)), **scaling)
    loss = tisim.losses.TerminalSum(mean_x_weights(sim))  # minus the mean x where the window ends
    clock = time.perf_counter()
    result = train_policy(sim, loss, lambda rng, batch: shoved_start(sim, batch, rng), episode_steps=EPISODE,
                          iterations=iterations, optimizer=Adam(lr=LEARNING_RATE), clip=1.0, seed=seed,
                          progress=False)
    seconds = time.perf_counter() - clock
    params = dict(w_policy=result.values["w_policy"], **scaling)
    evaluation.set_params(**params)
    after = walked(evaluation.rollout(), start)
    report(f"seed {seed}: walked {before:+.3f} m in 1 s before training, {after:+.3f} m after {iterations} windows "
           f"(mean of {STARTS} starts; {seconds:.0f} s)")
    return params, before, after, seconds


def pushed_walks(params):
    """The controller's 2 s walks from the evaluation's starts without and with the shove, and the open-loop replay
    of its unpushed activations, likewise: {name: trajectories} and {name: mean distance [m]}."""
    closed = simulator(WALK, STARTS)
    plain = MassSpring(horizon=WALK, batch=STARTS, dt=DT, robot=ROBOT, eps=EPS)
    closed.set_params(**params)
    initial = starts(closed)
    closed.set_initial_state(**initial)
    plain.set_initial_state(pos=initial["pos"], vel=initial["vel"])
    start = closed.robot.particles[:, 0].mean()
    steady = closed.rollout()
    p = closed.params
    activations = np.stack([closed.model.policy.act_numpy(p["w_policy"][b], p["obs_mean"][b], p["obs_scale"][b],
                                                          {k: v[b, :-1] for k, v in steady.items()})
                            for b in range(STARTS)])
    plain.set_actions(activations)
    trajectories = {"closed loop": steady, "open loop": plain.rollout()}
    for name, sim in (("closed loop, pushed", closed), ("open loop, pushed", plain)):
        trajectories[name] = shoved(sim, activations)
    return trajectories, {name: walked(traj, start) for name, traj in trajectories.items()}


def shoved(sim, activations):
    """sim's walk (its initial state and actions as set) with every particle's velocity changed by PUSH at
    PUSH_STEP: the rollout to there, then on from the shoved state (the closed loop's clock runs on; the open loop's
    actions continue where they were)."""
    before = sim.rollout()
    state = {k: v[:, PUSH_STEP] for k, v in before.items()}
    state["vel"] = state["vel"] + np.asarray(PUSH)
    rest = type(sim)(horizon=WALK - PUSH_STEP, batch=sim.B, dt=DT, robot=ROBOT, eps=EPS, **state)
    if "clock" in state:
        rest.set_params(**{k: sim.params[k] for k in ("w_policy", "obs_mean", "obs_scale")})
    else:
        rest.set_actions(activations[:, PUSH_STEP:])
    after = rest.rollout()
    return {k: np.concatenate([before[k][:, :PUSH_STEP], after[k]], axis=1) for k in after}


def pictures(trajectories, path):
    """The pushed walks, the controller above the replayed gait, one frame every 100 steps (real time)."""
    reach = np.concatenate([trajectories[name]["pos"][0, :, :, 0].ravel()
                            for name in ("closed loop, pushed", "open loop, pushed")])
    bounds = (reach.min() - 0.05, reach.max() + 0.05, -0.05, 0.37)
    sim = simulator(WALK)
    rows = [viz.frames(sim, trajectories[name], every=100, size=(480, 130), bounds=bounds, caption=caption)
            for name, caption in (("closed loop, pushed", "controller, pushed back at 0.5 s"),
                                  ("open loop, pushed", "its gait replayed open-loop, pushed back at 0.5 s"))]
    return viz.save_gif(path, [np.concatenate(pair, axis=0) for pair in zip(*rows)], fps=20, colors=32)


def main(seeds=5, iterations=160, out="out", report=print):
    figures = {"robot": ROBOT, "window_steps": WINDOW, "episode_steps": EPISODE, "environments": ENVIRONMENTS,
               "iterations": iterations, "push_m_per_s": list(PUSH), "push_at_s": PUSH_STEP * DT, "seeds": []}
    best = None
    for seed in range(seeds):
        params, before, after, seconds = train(seed, iterations, report)
        trajectories, walks = pushed_walks(params)
        figures["seeds"].append(dict(seed=seed, before_m=before, after_m=after, seconds=round(seconds, 1),
                                     walks_2s_m=walks))
        report(f"seed {seed}, 2 s: {walks['closed loop']:+.3f} m; pushed: controller "
               f"{walks['closed loop, pushed']:+.3f} m, replayed gait {walks['open loop, pushed']:+.3f} m")
        if best is None or after > best[0]:
            best = after, trajectories
    runs = figures["seeds"]
    figures["median_after_m"] = float(np.median([r["after_m"] for r in runs]))
    figures["pushed_median_m"] = {name: float(np.median([r["walks_2s_m"][name] for r in runs]))
                                  for name in ("closed loop, pushed", "open loop, pushed")}
    folder = pathlib.Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "soft_walker_policy.json").write_text(json.dumps(figures, indent=2) + "\n")
    report(f"median over {seeds} seeds: {figures['median_after_m']:+.3f} m in 1 s after training; pushed, over 2 s: "
           f"controller {figures['pushed_median_m']['closed loop, pushed']:+.3f} m, replayed gait "
           f"{figures['pushed_median_m']['open loop, pushed']:+.3f} m; wrote {folder / 'soft_walker_policy.json'}")
    figures["gif"] = str(pictures(best[1], folder / "soft_walker_policy.gif"))
    report(f"wrote {figures['gif']}")
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(
        "Train a closed-loop controller (a network reading the body and a clock) for the mass-spring quadruped by "
        "gradients through the physics, then shove it and compare with its own gait replayed open-loop. Writes "
        "soft_walker_policy.json and soft_walker_policy.gif."))
    parser.add_argument("--seeds", type=int, default=5, help="controllers trained, seeds 0..N-1 (default 5)")
    parser.add_argument("--iterations", type=int, default=160, help="training windows a seed (default 160)")
    parser.add_argument("--out", default="out", help="folder for the JSON and the GIF (default out)")
    args = parser.parse_args()
    if args.seeds < 1 or args.iterations < 1:
        parser.error(f"--seeds and --iterations must be >= 1, got {args.seeds} and {args.iterations}")
    main(args.seeds, args.iterations, args.out)
