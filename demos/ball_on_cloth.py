# Drop a ball onto a trampoline so that it is over a target spot when the clock stops: where and how to drop it,
# chosen by gradients through the contact between a rigid ball and a cloth, which push each other.
#
# A square cloth (8 x 8 particles, 28 cm across) is pinned at its corners 30 cm above the floor; a rigid ball (4 cm
# radius, 50 g) falls onto it, sinks in, is thrown back up and lands again. The cloth moves the ball and the ball
# moves the cloth (tisim.systems.MassSpring with balls=: each push on a particle acts back on the ball). Five numbers
# are chosen: where the ball is let go (x and z, 20 cm up) and the velocity it is given. The loss is the squared
# horizontal distance of the ball from the target 0.6 s after the drop; its gradient comes back through both
# impacts, through the cloth's springs and the ball alike. Contact is soft (2 mm) so that the gradient sees the
# impacts coming. Adam, from a drop straight down over the cloth's centre.
#
# Command: python demos/ball_on_cloth.py [--iterations 40] [--out out]
#          -> out/ball_on_cloth.json (the figures) and out/ball_on_cloth.gif (the first drop beside the optimized
#             one, the target drawn and labelled; 3D, needs Vulkan)
import argparse
import json
import pathlib

import numpy as np

import tisim
from tisim import viz
from tisim.gui import picture_or_reason
from tisim.losses import Tracking
from tisim.optim import Adam, minimize
from tisim.robots import cloth
from tisim.systems.mass_spring import MassSpring

HORIZON = 1000  # steps of 0.5 ms: 0.5 s
RADIUS, MASS = 0.06, 0.05  # the ball [m], [kg]
TARGET, TARGET_RADIUS = np.array([0.43, 0.55]), 0.02  # (x, z) [m] where the ball should be at the end
FIRST = dict(where=np.array([0.5, 0.5]), velocity=np.zeros(3))  # over the cloth's centre, let go at rest
HEIGHT = 0.5  # the ball's centre when let go [m]


def trampoline():
    """8 x 8 particles 4 cm apart, lying level at y = 0.3 m, pinned at the four corners, centred on (0.5, 0.5)."""
    return cloth(10, 10, spacing=0.03, origin=(0.365, 0.3, 0.365), pin="corners", flat=True)


def pictures(sim, first, best, iterations, path):
    """The first drop beside the optimized one, captioned, one camera framing both and the target."""
    marks = [((TARGET[0], 0.3, TARGET[1]), TARGET_RADIUS, "target")]
    camera = viz.look_at_rollouts((first, best), {"ball_radius": [RADIUS]}, marks=marks, band=viz.CAPTION_BAND)
    captions = ("ball on cloth: first drop", f"optimized ({iterations} iterations)")
    panels = [viz.frames(sim, {k: v[None] for k, v in r.items()}, every=40, marks=marks, camera=camera, caption=words)
              for r, words in zip((first, best), captions)]
    return viz.save_gif(path, viz.side_by_side(*panels), fps=12)


def main(iterations=40, out="out", progress=True):
    tisim.init(precision="f64")
    x, z = FIRST["where"]
    sim = MassSpring(horizon=HORIZON, robot=trampoline(), balls=[((x, HEIGHT, z), RADIUS)], ball_mass=MASS,
                     softness=0.002, kd=5.0)
    goal = np.full((HORIZON + 1, 1, 3), np.nan)  # observed: the ball's x and z at the end, nothing else
    goal[-1, 0, [0, 2]] = TARGET
    loss = Tracking({"ball_pos": goal})

    def drop(values):
        x, z = values["where"]
        sim.set_initial_state(ball_pos=[[x, HEIGHT, z]], ball_vel=[values["velocity"]])

    def objective(values):
        drop(values)
        gradient = sim.gradient(loss)
        return gradient.value, {"where": gradient.initial_state["ball_pos"][0, 0, [0, 2]],
                                "velocity": gradient.initial_state["ball_vel"][0, 0]}

    def outcome(values):
        drop(values)
        traj = {k: v[0] for k, v in sim.rollout().items()}
        return float(np.linalg.norm(traj["ball_pos"][-1, 0, [0, 2]] - TARGET)), traj

    first_miss, first = outcome(FIRST)
    result = minimize(objective, {k: v.copy() for k, v in FIRST.items()}, optimizer=Adam(lr=0.01),
                      iterations=iterations, progress=progress, description="dropping")
    best_miss, best = outcome(result.values)
    sag = float(0.3 - best["pos"][:, :, 1].min())
    figures = dict(first=dict(miss_m=first_miss, **{k: v.tolist() for k, v in FIRST.items()}),
                   best=dict(miss_m=best_miss, **{k: np.asarray(v).tolist() for k, v in result.values.items()}),
                   target=TARGET.tolist(), target_radius_m=TARGET_RADIUS, inside=best_miss < TARGET_RADIUS,
                   deepest_sag_m=sag, iterations=result.iterations, seconds=round(result.seconds, 1),
                   losses=[h["loss"] for h in result.history])
    print(f"the first drop ends {100 * first_miss:.1f} cm from the target; after {result.iterations} iterations "
          f"{100 * best_miss:.2f} cm: {'inside' if figures['inside'] else 'outside'} the {100 * TARGET_RADIUS:g} cm "
          f"target (the cloth sagged up to {100 * sag:.1f} cm)")
    folder = pathlib.Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ball_on_cloth.json").write_text(json.dumps(figures, indent=2))
    print(f"wrote {folder / 'ball_on_cloth.json'}")
    gif = picture_or_reason(lambda: pictures(sim, first, best, result.iterations, folder / "ball_on_cloth.gif"))
    if gif:
        figures["gif"] = str(gif)
        print(f"wrote {gif}")
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(
        "Drop a rigid ball onto a cloth pinned at its corners so that it is over a target 0.6 s later: where it is "
        "let go and its velocity are optimized with Adam, by gradients through the two-way contact. Writes "
        "ball_on_cloth.json and ball_on_cloth.gif (the first drop beside the optimized one, the target drawn)."))
    parser.add_argument("--iterations", type=int, default=40, help="Adam iterations (default 40)")
    parser.add_argument("--out", default="out", help="folder for ball_on_cloth.json and .gif (default out)")
    args = parser.parse_args()
    if args.iterations < 0:
        parser.error(f"--iterations must be >= 0, got {args.iterations}")
    main(args.iterations, args.out)
