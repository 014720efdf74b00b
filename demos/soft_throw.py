# Throw a soft ball off a wall into a target: its initial velocity and spin, optimized through the bounce.
#
# A ball of springs (19 cubic cells, 3 cm each) is thrown from the left towards a wall (a static box). It must hit
# the wall, bounce back and be inside a target on the floor, 5 cm across, one second after the throw. Six numbers
# are chosen: the velocity of the throw and its spin (each particle starts at v + w x (x - centre)). The loss is
# the squared horizontal distance of the ball from the target at the end, and its gradient comes through every
# step, both impacts and the rolling on the floor included; contact is soft (a softness of 2 mm) so that the
# gradient sees the impact coming. Adam, from a throw that bounces off the wall but ends 24 cm from the target.
#
# Command: python demos/soft_throw.py [--iterations 60] [--out out] [--gui]
#          -> out/soft_throw.json (the figures) and out/soft_throw.gif (the first throw beside the optimized one,
#             the target drawn and labelled, one camera framing both paths and the wall);
#          --gui then replays the best throw in a window, the camera circling the ball
import argparse
import itertools
import json
import pathlib

import numpy as np

import tisim
from tisim import viz
from tisim.gui import WindowUnavailable, picture_or_reason, window_problem
from tisim.losses import Tracking
from tisim.optim import Adam, minimize
from tisim.robots import from_cells
from tisim.scene import Scene
from tisim.systems.mass_spring import MassSpring

HORIZON = 2000  # steps of 0.5 ms: one second
WALL = ((0.85, 0.25, 0.5), (0.03, 0.25, 0.3))  # centre and half extents [m]
TARGET, TARGET_RADIUS = np.array([0.5, 0.4]), 0.05  # (x, z) on the floor [m]
FIRST = dict(velocity=np.array([1.2, 1.5, 0.0]), spin=np.zeros(3))  # [m/s], [rad/s]


def ball():
    """19 cells of 3 cm: a 3 x 3 x 3 block without its corners, its centre 0.3 m up at x = 0.2."""
    cells = [c for c in itertools.product(range(3), repeat=3) if sum(abs(k - 1) for k in c) <= 2]
    robot = from_cells(cells, {}, spacing=0.03, bottom=0.255, name="ball")
    robot.particles[:, [0, 2]] += [0.155, 0.455]
    return robot


MARKS = [((TARGET[0], 0.0, TARGET[1]), TARGET_RADIUS, "target")]  # the target on the floor, labelled


def pictures(sim, first_path, best_path, iterations, path):
    """The first throw beside the optimized one, captioned, one camera framing both paths, the wall and the target."""
    rollouts = [{"pos": p[None], "vel": np.zeros_like(p[None])} for p in (first_path, best_path)]
    params = {"box_center": [WALL[0]], "box_half": [WALL[1]]}
    camera = viz.look_at_rollouts(rollouts, params, marks=MARKS, band=viz.CAPTION_BAND)
    captions = ("soft throw: first attempt", f"optimized ({iterations} iterations)")
    panels = [viz.frames(sim, r, every=80, marks=MARKS, camera=camera, caption=words)
              for r, words in zip(rollouts, captions)]
    return viz.save_gif(path, viz.side_by_side(*panels), fps=12)


def main(iterations=60, out="out", progress=True, gui=False, offscreen=False):
    tisim.init(precision="f64")
    if gui and window_problem(offscreen):  # fail before the work, not after it
        raise WindowUnavailable(window_problem(offscreen))
    robot = ball()
    sim = MassSpring(horizon=HORIZON, robot=robot, boxes=[WALL], softness=0.002, mu=0.4, eps=0.05, k=2000.0)
    centre = robot.particles.mean(axis=0)
    arm = robot.particles - centre
    n = len(robot.particles)
    goal = np.full((HORIZON + 1, n, 3), np.nan)  # observed: x and z of every particle at the end, nothing else
    goal[-1][:, [0, 2]] = TARGET + arm[:, [0, 2]]  # where each would be with the ball centred on the target
    loss = Tracking({"pos": goal}, weights=1.0 / n)

    def throw(values):
        sim.set_initial_state(vel=values["velocity"] + np.cross(values["spin"], arm))

    def objective(values):
        throw(values)
        gradient = sim.gradient(loss)
        g = gradient.initial_state["vel"][0]  # dL/dv of each particle
        # v_i = v + w x r_i:  dL/dv = sum_i g_i,  dL/dw = sum_i r_i x g_i
        return gradient.value, {"velocity": g.sum(axis=0), "spin": np.cross(arm, g).sum(axis=0)}

    def miss(values):
        throw(values)
        path = sim.rollout()["pos"][0]
        end = path[-1].mean(axis=0)[[0, 2]]
        touched_wall = path[:, :, 0].max() > WALL[0][0] - WALL[1][0] - 0.01
        return float(np.linalg.norm(end - TARGET)), bool(touched_wall), path

    first_miss, first_wall, first_path = miss(FIRST)
    result = minimize(objective, {k: v.copy() for k, v in FIRST.items()}, optimizer=Adam(lr=0.02),
                      iterations=iterations, progress=progress, description="throwing")
    best_miss, best_wall, best_path = miss(result.values)
    figures = dict(first=dict(miss_m=first_miss, hit_wall=first_wall, **{k: v.tolist() for k, v in FIRST.items()}),
                   best=dict(miss_m=best_miss, hit_wall=best_wall,
                             **{k: np.asarray(v).tolist() for k, v in result.values.items()}),
                   target=TARGET.tolist(), target_radius_m=TARGET_RADIUS, inside=best_miss < TARGET_RADIUS,
                   iterations=result.iterations, seconds=round(result.seconds, 1),
                   losses=[h["loss"] for h in result.history])
    print(f"first throw misses the target by {100 * first_miss:.1f} cm (wall {'hit' if first_wall else 'missed'}); "
          f"after {result.iterations} iterations by {100 * best_miss:.2f} cm (wall {'hit' if best_wall else 'missed'})"
          f": {'inside' if figures['inside'] else 'outside'} the {100 * TARGET_RADIUS:g} cm target")
    folder = pathlib.Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "soft_throw.json").write_text(json.dumps(figures, indent=2))
    print(f"wrote {folder / 'soft_throw.json'}")
    gif = picture_or_reason(lambda: pictures(sim, first_path, best_path, result.iterations, folder / "soft_throw.gif"))
    if gif:
        figures["gif"] = str(gif)
        print(f"wrote {gif}")
    if gui:  # the best throw, the camera circling the ball, until the window is closed (opened after the GIF's
        # scene was closed: a window open while another scene closed crashed in GGUI)
        with Scene((800, 600), offscreen=offscreen, title="tisim: soft throw") as window:
            throw(result.values)
            figures["replays"] = viz.orbit(sim, sim.rollout(), window, rounds=1 if offscreen else None, every=40)
    return figures


def parse(argv=None):
    parser = argparse.ArgumentParser(description=(
        "Throw a soft ball of springs off a wall so that it comes to rest inside a 5 cm target on the floor: the "
        "throw's velocity and spin are optimized with Adam, by gradients through both impacts and the rolling. "
        "Writes soft_throw.json and soft_throw.gif (the first throw beside the optimized one, the target drawn)."))
    parser.add_argument("--iterations", type=int, default=60, help="Adam iterations (default 60)")
    parser.add_argument("--out", default="out", help="folder for soft_throw.json and soft_throw.gif (default out)")
    parser.add_argument("--gui", action="store_true",
                        help="then replay the best throw in a window, the camera circling the ball (needs Vulkan)")
    return parser, parser.parse_args(argv)


if __name__ == "__main__":
    parser, args = parse()
    if args.iterations < 0:
        parser.error(f"--iterations must be >= 0, got {args.iterations}")
    try:
        main(args.iterations, args.out, gui=args.gui)
    except WindowUnavailable as error:
        raise SystemExit(f"soft_throw: {error}") from None
