# Billiards: find the cue ball's initial velocity that sends the target ball into a goal circle.
#
# A table seen from above: Rigid2D with g = 0 and no floor, three discs (cue ball, target ball, obstacle ball), penalty
# contacts between the balls with a little friction, and the cloth's rolling resistance as a linear drag, so every ball
# comes to rest. The loss is the squared distance of the target ball's final position from the goal centre,
# L = |p_target(T) - goal|^2 [m^2]; its gradient with respect to the cue ball's initial velocity (vx, vy) [m/s] comes
# from one backward pass through the rollout and both collisions (sim.gradient, group initial_state), and Adam
# (tisim.optim.minimize) follows it. The initial guess aims straight at the target ball: the gradient only exists
# through a collision that happens. A cue ball that misses leaves the target ball where it is, and the loss is flat in
# the cue ball's velocity (a zero gradient, not a wrong one).
# Prints the miss distance before and after, and writes out/billiards.gif (the optimized shot on the table: its
# cushion, the goal circle labelled, a legend of the balls, the time).
# With --gui, aim by hand: drag from the cue ball (a line shows the shot) and release to shoot; press O to let the
# optimizer start from your shot, watch it aim, and see its result; Esc closes the window (needs a display and Vulkan;
# see tisim/viz/gui.py).
#
# Command: python demos/billiards.py [--out out] [--iterations 80] [--short] [--gui [--aim vx,vy] [--close-after S]]
#          [--contact penalty|qp]
import argparse
import pathlib
import sys
import time

import numpy as np
import taichi as ti

import tisim
from tisim import viz
from tisim.gui import DONE, Window, WindowUnavailable
from tisim.optim import Adam, minimize
from tisim.systems import Rigid2D

BALLS = dict(px=[0.0, 0.8, 1.2], py=[0.0, 0.1, -0.25], r=[0.05, 0.05, 0.05], m=[0.17, 0.17, 0.17])  # cue, target, other
TARGET = 1
GOAL, GOAL_RADIUS = (1.6, 0.75), 0.06  # [m]
TABLE = dict(g=0.0, k=2e4, e=0.9, mu=0.05, drag=0.8)  # ball-ball contact; drag [1/s] stands in for the cloth
HORIZON = 4000  # steps of the default dt = 1 ms: every ball is at rest by then
AIM = 1.5  # [m/s] initial guess: straight at the target ball
GOAL_COLOR = (120, 190, 120)


def miss_loss(sim):
    """L = |p_target(T) - goal|^2 [m^2] on the final step."""
    px, py = sim.index("px") + TARGET, sim.index("py") + TARGET

    @ti.func
    def miss(x: ti.template(), theta: ti.template(), u: ti.template(), b, t):
        return (x[b, t, px] - GOAL[0]) ** 2 + (x[b, t, py] - GOAL[1]) ** 2

    return tisim.losses.Custom(miss)


def shoot(sim, velocity):
    """Set the cue ball's initial velocity [m/s] (the others start at rest)."""
    vx, vy = np.zeros(3), np.zeros(3)
    vx[0], vy[0] = velocity
    sim.set_initial_state(vx=vx, vy=vy)


def optimize(sim, loss, start, iterations, watch=None):
    """Adam on the cue ball's (vx, vy); stops once the target ball ends within a fifth of the goal radius.
    watch(iteration, values, loss), when given, is called after every iteration (a window's progress) and stops the
    run by returning True."""
    def objective(values):
        shoot(sim, values["v0"])
        g = sim.gradient(loss)
        return g.value, {"v0": np.array([g.initial_state["vx"][0, 0], g.initial_state["vy"][0, 0]])}

    def inside(iteration, values, value):
        stop = bool(watch(iteration, values, value)) if watch is not None else False
        return stop or np.sqrt(value) < 0.2 * GOAL_RADIUS

    return minimize(objective, {"v0": np.array(start)}, optimizer=Adam(lr=0.05), iterations=iterations,
                    callback=inside, description="aiming")


FELT, CUSHION = (232, 240, 226), (150, 105, 70)
NAMES = ("cue ball", "target ball", "other ball")


def table(canvas, bounds):
    """The felt inside bounds [m] and its cushion, a brown frame along the edge."""
    xmin, xmax, ymin, ymax = bounds
    canvas.rectangle((0.5 * (xmin + xmax), 0.5 * (ymin + ymax)), (xmax - xmin, ymax - ymin), 0.0, FELT)
    corners = [(xmin, ymin), (xmax, ymin), (xmax, ymax), (xmin, ymax), (xmin, ymin)]
    for p, q in zip(corners, corners[1:]):
        canvas.line(p, q, 5.0, CUSHION)


def layout(traj, params, size):
    """(table, view): the table's bounds (table_view) and the world rectangle [m] a picture of size (width, height)
    shows, with bands of 22 pixels above the table (the caption) and 28 below (the legend)."""
    bounds = table_view(traj, params)
    top, bottom, side = 22, 28, 8  # [px]
    width, height = bounds[1] - bounds[0], bounds[3] - bounds[2]
    scale = min((size[0] - 2 * side) / width, (size[1] - top - bottom) / height)  # [px/m]
    spare = 0.5 * (size[1] / scale - height - (top + bottom) / scale)
    low = bounds[2] - bottom / scale - spare
    middle = 0.5 * (bounds[0] + bounds[1])
    return bounds, (middle - 0.5 * size[0] / scale, middle + 0.5 * size[0] / scale, low, low + size[1] / scale)


def pictures(traj, params, every, caption="billiards", size=(480, 340), dt=1e-3):
    """Frames of the shot on the table: its cushion, the goal circle (labelled), the balls, a caption with the time
    in a band above the table and a legend of the balls' colours in a band below it."""
    one = {k: v[0] for k, v in traj.items()}
    bounds, view = layout(traj, params, size)
    side, bottom = 8, 28  # [px]
    out = []
    for t in range(0, len(one["px"]), every):
        canvas = viz.Canvas(*size, bounds=view, background=(250, 250, 250))
        table(canvas, bounds)
        canvas.circle(GOAL, GOAL_RADIUS, GOAL_COLOR)
        canvas.circle(GOAL, GOAL_RADIUS, viz.MARK, filled=False, width_px=2.0)
        canvas.text((GOAL[0], GOAL[1] - GOAL_RADIUS - 0.02), "goal", viz.MARK, anchor="centre")
        viz.draw_rigid2d(canvas, {k: v[t] for k, v in one.items()}, params)
        picture = canvas.image()
        column = side
        for name, color in zip(NAMES, viz.drawings.RIGID_COLORS):
            viz.write(picture, f"\u25cf {name}", (column, size[1] - bottom + 4), color, box=False)
            column += viz.text_mask(f"\u25cf {name}").shape[1] + 16
        out.append(picture)
    return viz.caption(out, caption, times=[t * dt for t in range(0, len(one["px"]), every)])


def table_view(traj, params):
    """World bounds holding the balls' paths and the goal."""
    one = {k: v[0] for k, v in traj.items()}
    xmin, xmax, ymin, ymax = viz.view_rigid2d(one, params)
    return (min(xmin, GOAL[0] - 2 * GOAL_RADIUS, -0.3), max(xmax, GOAL[0] + 2 * GOAL_RADIUS, 2.0),
            min(ymin, GOAL[1] - 2 * GOAL_RADIUS, -0.6), max(ymax, GOAL[1] + 2 * GOAL_RADIUS, 1.0))


AIM_COLOR = (150, 60, 160)  # the aim line: the cue ball velocity it would get
SIZE = (800, 500)  # the window [px]
PANEL = (0.01, 0.01, 0.50, 0.27)  # its text panel: x, y, width, height as fractions of the window
SPEED_PER_METRE = 2.0  # [m/s] of cue ball velocity per metre dragged


def gui_frame(window, bounds, state, params, lines, aim=None):
    """One window frame: the table from above with the goal, the balls in ``state``, an aim line from the cue ball
    along the velocity ``aim`` [m/s] (None: none), and the panel's lines."""
    canvas = viz.Canvas(*window.size, bounds=bounds, background=FELT)  # all felt: a filled table costs a frame
    corners = [(bounds[0], bounds[2]), (bounds[1], bounds[2]), (bounds[1], bounds[3]), (bounds[0], bounds[3])]
    for p, q in zip(corners, corners[1:] + corners[:1]):
        canvas.line(p, q, 5.0, CUSHION)
    canvas.circle(GOAL, GOAL_RADIUS, GOAL_COLOR)
    canvas.circle(GOAL, GOAL_RADIUS, viz.MARK, filled=False, width_px=2.0)
    cue = np.array([state["px"][0], state["py"][0]])
    if aim is not None:
        tip = cue + np.asarray(aim) / SPEED_PER_METRE
        canvas.line(cue, tip, 2.0, AIM_COLOR)
        canvas.circle(tip, 4.0 / canvas.scale, AIM_COLOR)
    viz.draw_rigid2d(canvas, state, params)
    window.draw(canvas.image())
    with window.panel("billiards", *PANEL) as panel:
        for line in lines:
            panel.text(line)
    return canvas


def play(sim, loss, window, params, optimize_after=None, close_after=None):
    """Interactive aiming: drag from the cue ball, release to shoot; O optimizes from the last shot, each
    iteration's aim shown as it goes. Esc or closing the window ends it.

    optimize_after: a scripted shot (vx, vy) for runs without a mouse: it is shot, then optimized, then shown;
    offscreen the window ends there, on screen it stays for the user (or close_after seconds after it opened).
    Returns the last shot's velocity and miss distance [m]."""
    traj = sim.rollout()
    bounds = table_view(traj, params)
    view = viz.Canvas(*window.size, bounds=bounds).view  # the world rectangle the window shows [m]
    frame, press, shot, miss, status = 0, None, None, None, "aiming"
    scripted = list(optimize_after or ())
    start = {k: val[0, 0] for k, val in traj.items()}
    cue = (BALLS["px"][0], BALLS["py"][0])
    opened = time.perf_counter()

    def progress(iteration, values, value):
        """Show the optimizer's current aim and miss; closing the window stops it."""
        if not window.running or (close_after is not None and time.perf_counter() - opened > close_after):
            return True
        aim = values["v0"]
        gui_frame(window, bounds, start, params, [
            f"optimizing: iteration {iteration} of at most 80",
            f"v0 = ({aim[0]:.2f}, {aim[1]:.2f}) m/s", f"the target ball ends {100 * np.sqrt(value):.1f} cm from the "
            "goal centre", "Esc: stop and close"], aim=aim)
        window.show()
        return False

    while window.running and (close_after is None or time.perf_counter() - opened < close_after):
        (u, v), down = window.cursor()
        point = (view[0] + u * (view[1] - view[0]), view[2] + v * (view[3] - view[2]))
        if down and press is None:
            press = point
        released = press is not None and not down
        if released or scripted:
            velocity = np.array(scripted[:2]) if scripted else SPEED_PER_METRE * np.subtract(point, cue)
            shot, press, frame, status = velocity, None, 0, "shot"
            shoot(sim, shot)
            traj = sim.rollout()
            miss = float(np.sqrt(sim.evaluate(loss)[0]))
        if shot is not None and ("o" in window.keys() or "O" in window.keys() or scripted):
            gui_frame(window, bounds, start, params, ["optimizing from your shot: compiling the gradient"], aim=shot)
            window.show()
            result = optimize(sim, loss, shot, 80, watch=progress)
            shot = result.values["v0"]
            shoot(sim, shot)
            traj, frame, scripted, status = sim.rollout(), 0, [], f"optimized ({result.iterations} iterations)"
            miss = float(np.sqrt(sim.evaluate(loss)[0]))
        t = min(frame * 40, HORIZON)
        lines = ["drag from the cue ball and release to shoot", "O: optimize from this shot   Esc: close"]
        aim = None
        if press is not None:
            aim = SPEED_PER_METRE * np.subtract(point, cue)
            lines.append(f"release to shoot at v0 = ({aim[0]:.2f}, {aim[1]:.2f}) m/s")
        elif shot is not None:
            where = f"t = {t * sim.dt:.1f} s" if t < HORIZON else "at rest"
            lines.append(f"{status}: v0 = ({shot[0]:.2f}, {shot[1]:.2f}) m/s")
            lines.append(f"{where}: the target ball ends {100 * miss:.1f} cm from the goal centre "
                         f"({'in' if miss < GOAL_RADIUS else 'outside'} the goal)")
            if t >= HORIZON and status.startswith("optimized"):
                lines.append(DONE)
        state = {k: val[0, t] for k, val in traj.items()} if shot is not None else start
        gui_frame(window, bounds, state, params, lines, aim=aim)
        window.show()
        frame += 1
        if optimize_after is not None and window.offscreen and frame > HORIZON // 40:
            break
    return shot, miss


def main(argv=None):
    parser = argparse.ArgumentParser(description=(
        "Aim a billiard shot by gradient descent through the collisions: the cue ball's initial velocity that "
        "sends the target ball into the goal circle. Writes billiards.gif (the optimized shot on the table, the "
        "goal and a legend drawn); --gui to aim by hand."))
    parser.add_argument("--out", default="out", help="folder for billiards.gif (default out)")
    parser.add_argument("--iterations", type=int, default=80, help="most Adam iterations (default 80)")
    parser.add_argument("--short", action="store_true", help="a smaller GIF, for tests")
    parser.add_argument("--gui", action="store_true", help="aim by hand in a window")
    parser.add_argument("--offscreen", action="store_true", help="with --gui: no display (scripted, for tests)")
    parser.add_argument("--aim", default=None,
                        help="with --gui: a scripted shot 'vx,vy' [m/s], shot and then optimized from, no mouse needed "
                             "(with --offscreen the run ends after the optimized shot is shown)")
    parser.add_argument("--close-after", type=float, default=None, metavar="SECONDS",
                        help="with --gui: close the window this many seconds after it opens (for scripts and tests; "
                             "default: it stays until you press Esc or close it)")
    parser.add_argument("--contact", default="penalty", choices=Rigid2D.OPTIONS["contact"],
                        help="ball-ball contact: penalty springs (default) or impulses from a convex problem (qp)")
    args = parser.parse_args(argv)
    start_time = time.perf_counter()
    # balls meet two at a time, so one sweep of the qp solve is exact (stacks need Rigid2D's default 64)
    solve = dict(sweeps=1) if args.contact == "qp" else {}
    sim = Rigid2D(horizon=HORIZON, n_discs=3, ground="off", contact=args.contact, **solve, **BALLS, **TABLE)
    loss = miss_loss(sim)
    if args.gui:
        try:
            window = Window("tisim: billiards", SIZE, offscreen=args.offscreen)
        except WindowUnavailable as error:
            print(error, file=sys.stderr)
            return 2
        params = {**{k: v[0] for k, v in sim.params.items()}, "ground": 0}
        aim = [float(v) for v in args.aim.split(",")] if args.aim else None
        shot, miss = play(sim, loss, window, params, optimize_after=aim, close_after=args.close_after)
        return dict(velocity=shot, miss=miss, goal_radius=GOAL_RADIUS)
    aim = np.subtract(BALLS["px"][TARGET], BALLS["px"][0]), np.subtract(BALLS["py"][TARGET], BALLS["py"][0])
    start = AIM * np.array(aim) / np.hypot(*aim)
    shoot(sim, start)
    before = float(np.sqrt(sim.evaluate(loss)[0]))
    result = optimize(sim, loss, start, args.iterations)
    velocity = result.values["v0"]
    shoot(sim, velocity)
    traj = sim.rollout()
    after = float(np.hypot(traj["px"][0, -1, TARGET] - GOAL[0], traj["py"][0, -1, TARGET] - GOAL[1]))
    print(f"initial guess v0 = ({start[0]:.3f}, {start[1]:.3f}) m/s: the target ball misses the goal centre by "
          f"{before * 100:.1f} cm")
    print(f"optimized     v0 = ({velocity[0]:.3f}, {velocity[1]:.3f}) m/s after {result.iterations} iterations: "
          f"{after * 100:.2f} cm (goal radius {GOAL_RADIUS * 100:.0f} cm)")
    path = pathlib.Path(args.out) / "billiards.gif"
    params = {**{k: v[0] for k, v in sim.params.items()}, "ground": 0}
    caption = f"billiards: optimized shot ({result.iterations} iterations)"
    viz.save_gif(path, pictures(traj, params, every=200 if args.short else 50, caption=caption, dt=sim.dt), fps=20,
                 colors=48, keep=(viz.BACKGROUND, viz.INK, viz.MARK, FELT, CUSHION, GOAL_COLOR,
                                  *viz.drawings.RIGID_COLORS[:3]))
    print(f"wrote {path} ({time.perf_counter() - start_time:.1f} s)")
    return dict(miss_before=before, miss_after=after, goal_radius=GOAL_RADIUS, velocity=velocity,
                iterations=result.iterations, gif=str(path), contact=args.contact)


if __name__ == "__main__":
    result = main()
    sys.exit(result if isinstance(result, int) else 0)
