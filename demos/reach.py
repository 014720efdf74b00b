# Reach: Gymnasium's reacher, a two-link arm read from its MJCF file, moves its fingertip through three targets in
# turn, by trajectory optimization of its two motors' commands through the simulator.
#
# The arm is tisim.systems.Articulation on the tree load_mjcf reads from reacher.xml (MuJoCo compiles it; its RK4 at
# 10 ms, motors of gear 200 on the two hinges, the elbow limited to +-3 rad). The loss asks the fingertip to be at
# target k around time t_k (within 50 ms either side), L = sum_k sum_t |p_tip(t) - y_k|^2 [m^2] by
# Articulation.point_target, plus a little effort; Adam (tisim.tasks.optimize_actions) follows its gradient with
# respect to the 2 x 150 motor commands, kept inside their range [-1, 1], from the arm at rest and the motors off.
# Prints the fingertip's distance to each target at its time, before and after, and writes out/reach.gif (the arena
# seen from above: the arm, the targets numbered in order, the fingertip's path), out/reach_loss.png (the loss per
# iteration) and out/reach.json (the same figures).
#
# Command: python demos/reach.py [--out out] [--iterations 800] [--short]
import argparse
import json
import pathlib
import time

import numpy as np

import tisim
from tisim import plots, viz
from tisim.envs.reach import ARENA, reacher_tree
from tisim.losses import Effort
from tisim.optim import Adam
from tisim.systems.articulation import Articulation
from tisim.systems.articulation.kinematics import body_poses
from tisim.tasks import optimize_actions

HORIZON = 150  # steps of the reacher's 10 ms: 1.5 s
TARGETS = np.array([[0.15, 0.08, 0.01], [-0.05, 0.17, 0.01], [-0.12, -0.10, 0.01]])  # [m], in the arm's reach
TIMES = (40, 85, 130)  # the step at which the fingertip should be at each target
HOLD = 5  # steps either side of each time


def path_loss(sim):
    """The fingertip at each target around its time, and a little effort."""
    loss = 1e-4 * Effort()
    for target, t in zip(TARGETS, TIMES):
        loss = loss + sim.point_target("fingertip", target, steps=range(t - HOLD, t + HOLD + 1))
    return loss


def fingertip(tree, q):
    """The fingertip's position in the world at coordinates q (numpy kinematics)."""
    xpos, _ = body_poses(tree, q)
    return xpos[tree.body_names.index("fingertip")]


def misses(tree, traj):
    """The fingertip's distance to each target at its time [m]."""
    return [float(np.linalg.norm(fingertip(tree, traj["q"][0, t]) - target)) for target, t in zip(TARGETS, TIMES)]


def picture(tree, q, trail, t):
    """The arena from above: its walls, the targets numbered, the fingertip's path so far, the arm."""
    canvas = viz.Canvas(360, 360, bounds=(-ARENA - 0.03, ARENA + 0.03, -ARENA - 0.03, ARENA + 0.03))
    corners = [(-ARENA, -ARENA), (ARENA, -ARENA), (ARENA, ARENA), (-ARENA, ARENA)]
    for a, b in zip(corners, corners[1:] + corners[:1]):
        canvas.line(a, b, 6, (200, 110, 150))
    for k, (target, step) in enumerate(zip(TARGETS, TIMES)):
        reached = abs(t - step) <= HOLD
        canvas.circle(target[:2], 0.018, (220, 60, 60) if reached else (235, 160, 160))
        canvas.text((target[0] + 0.025, target[1] + 0.01), str(k + 1), size_px=14, box=False)
    for a, b in zip(trail, trail[1:]):
        canvas.line(a[:2], b[:2], 2, (120, 180, 160))
    xpos, _ = body_poses(tree, q)
    joints = [xpos[tree.body_names.index(name)][:2] for name in ("body0", "body1", "fingertip")]
    for a, b in zip(joints, joints[1:]):
        canvas.line(a, b, 9, (0, 100, 150))
    for point in joints[:2]:
        canvas.circle(point, 0.012, (40, 40, 40))
    canvas.circle(joints[2], 0.011, (0, 190, 140))
    canvas.text((-ARENA, ARENA + 0.005), f"t = {t * 0.01:.2f} s", size_px=13, box=False)
    return canvas.image()


def main(argv=None):
    parser = argparse.ArgumentParser(description=(
        "Gymnasium's reacher, from its MJCF file, moves its fingertip through three targets in turn: its motors' "
        "commands optimized by Adam through the simulator. Writes reach.gif, reach_loss.png and reach.json."))
    parser.add_argument("--out", default="out", help="folder for reach.gif, reach_loss.png and reach.json")
    parser.add_argument("--iterations", type=int, default=800, help="Adam iterations (>= 1)")
    parser.add_argument("--short", action="store_true", help="40 iterations and a GIF of every tenth step, for tests")
    args = parser.parse_args(argv)
    if args.iterations < 1:
        parser.error(f"--iterations must be >= 1, got {args.iterations}")
    iterations = 40 if args.short else args.iterations
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    tisim.init()
    tree = reacher_tree()
    arm = Articulation(horizon=HORIZON, tree=tree)
    loss = path_loss(arm)
    before = misses(tree, arm.rollout())
    print("fingertip's distance to targets 1, 2, 3 at their times, motors off [m]:", np.round(before, 3))

    start = time.perf_counter()
    result = optimize_actions(arm, loss, limits=(-1.0, 1.0), initial=np.zeros((HORIZON, 2)), iterations=iterations,
                              optimizer=Adam(lr=0.05), progress=True)
    seconds = time.perf_counter() - start
    traj = arm.rollout()
    after = misses(tree, traj)
    print(f"after {iterations} iterations of Adam ({seconds:.1f} s, compiling included) [m]:", np.round(after, 3))

    tips = [fingertip(tree, traj["q"][0, t]) for t in range(HORIZON + 1)]
    every = 10 if args.short else 1
    frames = [picture(tree, traj["q"][0, t], tips[:t + 1], t) for t in range(0, HORIZON + 1, every)]
    viz.save_gif(out / "reach.gif", frames, fps=100 // every)
    plots.plot_history(result.history, out / "reach_loss.png", title="reach: the fingertip through three targets",
                       loss_label="loss [m^2]")
    report = dict(targets=TARGETS.tolist(), times_s=[t * tree.timestep for t in TIMES], iterations=iterations,
                  seconds=seconds, miss_before_m=before, miss_after_m=after,
                  loss_before=float(result.history[0]["loss"]), loss_after=float(result.loss))
    (out / "reach.json").write_text(json.dumps(report, indent=2))
    print(f"wrote {out / 'reach.gif'}, {out / 'reach_loss.png'} and {out / 'reach.json'}")
    return report


if __name__ == "__main__":
    main()
