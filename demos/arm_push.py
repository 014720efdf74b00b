# Push a jelly block across the floor to a target with a two-link arm read from MJCF: the arm's motor torques, chosen
# by gradients through the contact between an articulated robot and a soft body, which push each other.
#
# The arm (assets/robots/pusher_arm.xml: two capsule links of 12 and 10 cm, a round fingertip of 3.5 cm, hinges about
# the vertical, 4.7 cm above the floor) and a soft cube (64 particles 3 cm apart, 0.64 kg, springs of 1,000 N/m,
# friction 0.5 with the floor) are one simulator, tisim.systems.Handling: each push of the arm's shapes on a particle
# acts back on the arm's links, so the block slows the arm as the arm moves the block. The torques of the two motors
# are held over eight intervals of 0.125 s (16 numbers); the loss is the squared distance of every particle from where
# the block, moved 6 cm along -x and 10 cm along -z, would put it (the target drawn). The gradient comes back through
# the arm's dynamics (Taichi's reverse mode of the tree's step), the pushes both ways and the block's springs and
# floor friction (the hand-written reverses). The contact is soft (2 mm), so that the gradient sees a touch coming.
# L-BFGS, from a steady 0.1 N m at the shoulder that sweeps the arm through the block's corner (Adam, at learning
# rates from 0.005 to 0.03, wandered on this loss: contacts that come and go make it rough at the scale of its steps).
# The particles are what touches: a fingertip narrower than the gaps between them could slip into the block, which is
# why the fingertip is wider than the 3 cm spacing.
#
# Command: python demos/arm_push.py [--iterations 30] [--out out]
#          -> out/arm_push.json (the figures) and out/arm_push.gif (the first plan beside the optimized one, the
#             target drawn; 3D, needs Vulkan)
import argparse
import dataclasses
import json
import pathlib
import time

import numpy as np

import tisim
from tisim import viz
from tisim.core.assets import ASSETS
from tisim.gui import picture_or_reason
from tisim.losses import TerminalTarget
from tisim.optim import lbfgs
from tisim.systems import Articulation, Handling
from tisim.systems.mass_spring import from_cells

ARM = ASSETS / "robots" / "pusher_arm.xml"
HORIZON, PIECES = 2000, 8  # steps of 0.5 ms (1 s); intervals of the plan
SHIFT = np.array([-0.06, 0.0, -0.10])  # where the block should go [m]
SOFTNESS = 0.002  # [m] of the contact law's activation: the gradient sees a touch coming
FIRST = np.zeros((PIECES, 2))
FIRST[:, 0] = 0.1  # the first plan: the shoulder's motor at 0.1 N m throughout, the elbow's at nothing


def jelly_block():
    """A cube of 3 x 3 x 3 cells, 9 cm across, on the floor in front of the arm (its corners, edges, face and body
    diagonals springs)."""
    cube = from_cells([(i, j, k) for i in range(3) for j in range(3) for k in range(3)], {}, spacing=0.03,
                      bottom=0.002, name="jelly block")
    return dataclasses.replace(cube, particles=cube.particles + [0.455, 0.0, 0.36])


def plan_actions(plan):
    """The motors' actions at every step, (T, 2), from a plan of PIECES pairs."""
    return np.repeat(np.asarray(plan, dtype=float), HORIZON // PIECES, axis=0)


def main(iterations=30, out="out", progress=True):
    tisim.init(precision="f64")
    # a 10 g particle and up to 26 springs around it: the springs' damping 0.1 N s/m keeps the explicit step
    # stable, the floor's kd 5 N s/m well below dt kd / m = 2 (tisim/systems/mass_spring/system.py)
    sim = Handling(horizon=HORIZON, robot=jelly_block(), tree=ARM, m=0.01, damping=0.1, kd=5.0, eps=0.1, mu=0.5,
                   softness=SOFTNESS)
    start = sim.initial_state["pos"][0]
    loss = TerminalTarget({"pos": start + SHIFT})

    def objective(z):
        sim.set_actions(plan_actions(z.reshape(PIECES, 2)))
        g = sim.gradient(loss)
        return g.value, g.actions[0].reshape(PIECES, HORIZON // PIECES, 2).sum(axis=1).ravel()

    def value(z):
        sim.set_actions(plan_actions(z.reshape(PIECES, 2)))
        return float(sim.evaluate(loss)[0])

    def report(iteration, z, total):
        if progress:
            print(f"iteration {iteration + 1:2d}: loss {total:.4f}", flush=True)

    def outcome(plan):
        sim.set_actions(plan_actions(plan))
        traj = {k: v[0] for k, v in sim.rollout().items()}
        centre = traj["pos"][-1].mean(axis=0) - start.mean(axis=0)
        return float(np.linalg.norm((centre - SHIFT)[[0, 2]])), traj

    first_miss, first = outcome(FIRST)
    began = time.time()
    z, final_loss, history = lbfgs(objective, FIRST.ravel(), iterations=iterations, value=value, callback=report)
    seconds = time.time() - began
    plan = z.reshape(PIECES, 2)
    best_miss, best = outcome(plan)
    # the same torques on the arm alone: the block held it back
    alone = Articulation(horizon=HORIZON, tree=ARM)
    alone.set_actions(plan_actions(plan))
    turned, turned_alone = float(best["q"][-1, 0]), float(alone.rollout()["q"][0, -1, 0])
    figures = dict(first=dict(miss_m=first_miss, plan=FIRST.tolist()),
                   best=dict(miss_m=best_miss, plan=plan.tolist(), shoulder_rad=turned,
                             shoulder_alone_rad=turned_alone),
                   shift_m=SHIFT.tolist(), iterations=len(history) - 1, seconds=round(seconds, 1),
                   losses=[float(h) for h in history])
    print(f"the block's centre ends {100 * first_miss:.1f} cm from the target with the first plan; after "
          f"{len(history) - 1} iterations ({seconds:.0f} s) {100 * best_miss:.2f} cm. Pushing it, the shoulder "
          f"turned {turned:.2f} rad in 1 s; with the same torques and no block, {turned_alone:.2f} rad")
    folder = pathlib.Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "arm_push.json").write_text(json.dumps(figures, indent=2))
    print(f"wrote {folder / 'arm_push.json'}")
    gif = picture_or_reason(lambda: pictures(sim, start, first, best, len(history) - 1, folder / "arm_push.gif"))
    if gif:
        figures["gif"] = str(gif)
        print(f"wrote {gif}")
    return figures


def pictures(sim, start, first, best, iterations, path):
    """The first plan beside the optimized one, captioned, one camera framing both and the target, from above."""
    goal = start.mean(axis=0) + SHIFT
    marks = [((goal[0], 0.0, goal[2]), 0.02, "target")]
    camera = viz.look_at_rollouts((first, best), {"tree": sim.tree}, (320, 240), marks, (0.1, 3.0, 0.6),
                                  band=viz.CAPTION_BAND)
    captions = ("jelly block: first plan", f"optimized ({iterations} iterations)")
    panels = [viz.frames(sim, {k: v[None] for k, v in r.items()}, every=50, marks=marks, camera=camera, caption=words)
              for r, words in zip((first, best), captions)]
    return viz.save_gif(path, viz.side_by_side(*panels), fps=12)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(
        "Push a soft block to a target with a two-link arm read from MJCF: the motor torques over eight intervals "
        "optimized with L-BFGS, by gradients through the two-way contact between the arm and the block. Writes "
        "arm_push.json and arm_push.gif (the first plan beside the optimized one, the target drawn)."))
    parser.add_argument("--iterations", type=int, default=30, help="L-BFGS iterations (default 30)")
    parser.add_argument("--out", default="out", help="folder for arm_push.json and .gif (default out)")
    args = parser.parse_args()
    if args.iterations < 0:
        parser.error(f"--iterations must be >= 0, got {args.iterations}")
    main(args.iterations, args.out)
