# Slide a napkin across a table with one fingertip so that it ends on a target: how hard to press and which way to
# drag, chosen by gradients through friction between a kinematic tool and a cloth (tisim.systems.Manipulation).
#
# A free 6 x 6 napkin (15 cm across, 36 particles of 10 g, springs of 1,000 N/m) lies on the ground, whose Coulomb
# friction is 0.3; a fingertip, a rigid sphere of 2 cm radius whose friction against the napkin is 1.0, presses on it
# and drags it. The fingertip's velocity is held over 5 intervals of 0.1 s (15 numbers); the loss is the squared
# distance of every particle from where the napkin, moved 8 cm along x and 5 cm along z, would put it (the target
# drawn). The gradient comes back through the regularized friction at both of the napkin's faces, the penalty of
# the fingertip's press and the springs. Adam, from a fingertip that only presses down.
#
# Command: python demos/napkin_drag.py [--iterations 40] [--out out]
#          -> out/napkin_drag.json (the figures) and out/napkin_drag.gif (the first plan beside the optimized one,
#             the target drawn; 3D, needs Vulkan)
import argparse
import json
import pathlib

import numpy as np

import tisim
from tisim import viz
from tisim.gui import picture_or_reason
from tisim.losses import TerminalTarget
from tisim.optim import Adam, minimize
from tisim.systems.mass_spring import Manipulation, cloth
from tisim.systems.mpm import Tool

HORIZON, PIECES = 1000, 5  # steps of 0.5 ms (0.5 s); intervals of the plan
SHIFT = np.array([0.08, 0.0, 0.05])  # where the napkin should go [m]
FIRST = np.zeros((PIECES, 3))
FIRST[0, 1] = -0.05  # the first plan: press 5 mm in, then hold still [m/s]


def plan_actions(plan):
    """The fingertip's velocity at every step, (T, 1, 3), from a plan of PIECES velocities."""
    return np.repeat(np.asarray(plan, dtype=float), HORIZON // PIECES, axis=0)[:, None, :]


def main(iterations=40, out="out", progress=True):
    tisim.init(precision="f64")
    napkin = cloth(6, 6, spacing=0.03, origin=(0.2, 0.0, 0.2), pin="none", flat=True)
    fingertip = Tool.sphere([0.275, 0.025, 0.275], 0.02, mu=1.0)
    sim = Manipulation(horizon=HORIZON, robot=napkin, tools=[fingertip], softness=0.001, mu=0.3)
    start = sim.initial_state["pos"][0]
    loss = TerminalTarget({"pos": start + SHIFT})

    def objective(values):
        sim.set_actions(plan_actions(values["plan"]))
        g = sim.gradient(loss)
        pieces = g.actions[0, :, 0].reshape(PIECES, HORIZON // PIECES, 3).sum(axis=1)
        return g.value, {"plan": pieces}

    def outcome(plan):
        sim.set_actions(plan_actions(plan))
        traj = {k: v[0] for k, v in sim.rollout().items()}
        centre = traj["pos"][-1].mean(axis=0) - start.mean(axis=0)
        return float(np.linalg.norm((centre - SHIFT)[[0, 2]])), traj

    first_miss, first = outcome(FIRST)
    result = minimize(objective, {"plan": FIRST.copy()}, optimizer=Adam(lr=0.02), iterations=iterations,
                      progress=progress, description="dragging")
    best_miss, best = outcome(result.values["plan"])
    figures = dict(first=dict(miss_m=first_miss, plan=FIRST.tolist()),
                   best=dict(miss_m=best_miss, plan=np.asarray(result.values["plan"]).tolist()),
                   shift_m=SHIFT.tolist(), iterations=result.iterations, seconds=round(result.seconds, 1),
                   losses=[h["loss"] for h in result.history])
    print(f"the napkin's centre ends {100 * first_miss:.1f} cm from the target with the first plan; after "
          f"{result.iterations} iterations {100 * best_miss:.2f} cm")
    folder = pathlib.Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "napkin_drag.json").write_text(json.dumps(figures, indent=2))
    print(f"wrote {folder / 'napkin_drag.json'}")
    gif = picture_or_reason(lambda: pictures(sim, start, first, best, result.iterations, folder / "napkin_drag.gif"))
    if gif:
        figures["gif"] = str(gif)
        print(f"wrote {gif}")
    return figures


def pictures(sim, start, first, best, iterations, path):
    """The first plan beside the optimized one, captioned, one camera framing both and the target."""
    goal = start.mean(axis=0) + SHIFT
    marks = [((goal[0], 0.0, goal[2]), 0.015, "target")]
    camera = viz.look_at_rollouts((first, best), marks=marks, band=viz.CAPTION_BAND)
    captions = ("napkin: first plan", f"optimized ({iterations} iterations)")
    panels = [viz.frames(sim, {k: v[None] for k, v in r.items()}, every=40, marks=marks, camera=camera, caption=words)
              for r, words in zip((first, best), captions)]
    return viz.save_gif(path, viz.side_by_side(*panels), fps=12)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(
        "Drag a napkin lying on the ground to a target with one fingertip: the fingertip's velocities over five "
        "intervals optimized with Adam, by gradients through the friction between a kinematic tool and a cloth. "
        "Writes napkin_drag.json and napkin_drag.gif (the first plan beside the optimized one, the target drawn)."))
    parser.add_argument("--iterations", type=int, default=40, help="Adam iterations (default 40)")
    parser.add_argument("--out", default="out", help="folder for napkin_drag.json and .gif (default out)")
    args = parser.parse_args()
    if args.iterations < 0:
        parser.error(f"--iterations must be >= 0, got {args.iterations}")
    main(args.iterations, args.out)
