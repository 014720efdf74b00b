# Swing a cart-pole up from hanging to balanced, and hold it, by gradient descent on the force sequence.
#
# The pole starts at rest hanging down (theta = pi). We optimize 200 forces (4 s at dt = 0.02 s), each within
# +-10 N, through the differentiable rollout. The loss asks the pole to be upright, 1 - cos(theta), more and more
# as time goes on and fully for the last second (the hold), the cart to stay near the centre, and everything to be
# at rest at the end. A batch of random starting sequences is optimized at once; the best one wins.
#   stage 1, find a swing:  Adam on the forces with a light terminal cost
#   stage 2, land it:       a 100x heavier terminal cost and a smaller step
# With --mpc the loss drives receding-horizon control instead: plan 1.5 s ahead, apply 0.1 s, re-plan, for 6 s, on
# a plant whose pole is 20% heavier than the planner believes.
# Writes out/cartpole_opt.gif (first attempt beside the optimized one) and out/cartpole_opt_loss.png (the second
# stage's start marked); with --mpc out/cartpole_opt_mpc.gif and out/cartpole_opt_mpc.png instead. With --gui a
# window shows each attempt while the optimization runs, with the stage and its iteration, then replays the result
# and stays up on its final frame until you press Esc or close it (needs a display and Vulkan; see tisim/viz/gui.py).
#
# Command: python demos/cartpole_opt.py [--mpc] [--gui [--close-after S]] [--batch 8] [--seed 0]
#          [--iterations 800,400] [--out out]
import argparse
import pathlib
import sys
import time

import numpy as np
import taichi as ti

import tisim
from tisim import plots, viz
from tisim.gui import DONE, Window, WindowUnavailable
from tisim.losses import Custom, Effort, TerminalTarget
from tisim.tasks import optimize_actions, receding_horizon

HORIZON, SWING, FORCE_LIMIT = 200, 150, 10.0  # steps, steps until fully upright is asked for, N
REST = {"x": 0.0, "x_dot": 0.0, "theta": 0.0, "theta_dot": 0.0}


def swing_up_loss(sim, landing_weight, swing=SWING):
    """Upright more and more until `swing`, fully after; cart near the centre; at rest at the end."""
    theta, x = sim.index("theta"), sim.index("x")

    @ti.func
    def upright(x_: ti.template(), theta_: ti.template(), u: ti.template(), b, t):
        ramp = ti.min(t / swing, 1.0) ** 4
        return ramp * (1.0 - ti.cos(x_[b, t, theta])) + 0.1 * x_[b, t, x] ** 2

    landing = TerminalTarget(REST, weights={"theta": 10.0, "theta_dot": 1.0, "x": 1.0, "x_dot": 1.0})
    return Custom(upright, steps=range(sim.T + 1)) + landing_weight * landing + 1e-4 * Effort()


def wrapped(angle):
    return (angle + np.pi) % (2 * np.pi) - np.pi


def summary(traj, b):
    return dict(angle=float(wrapped(traj["theta"][b, -1])), angular_velocity=float(traj["theta_dot"][b, -1]),
                cart=float(traj["x"][b, -1]), cart_velocity=float(traj["x_dot"][b, -1]),
                cart_extent=float(np.abs(traj["x"][b]).max()))


def succeeded(s):
    return abs(s["angle"]) < 0.05 and abs(s["angular_velocity"]) < 0.1 and s["cart_extent"] < 2.4


def first_attempt(sim, seed):
    """The random forces the optimization starts from, within the limits."""
    return np.clip(np.random.default_rng(seed).normal(size=(sim.B, sim.T)), -FORCE_LIMIT, FORCE_LIMIT)


def swing_up(sim, seed, iterations=(800, 400), progress=False, callback=None):
    """Two-stage trajectory optimization of every batch element; returns the two Results."""
    start = first_attempt(sim, seed)
    find = optimize_actions(sim, swing_up_loss(sim, 1.0), limits=(-FORCE_LIMIT, FORCE_LIMIT), initial=start,
                            iterations=iterations[0], optimizer=tisim.optim.Adam(lr=0.3), progress=progress,
                            callback=callback)
    land = optimize_actions(sim, swing_up_loss(sim, 100.0), limits=(-FORCE_LIMIT, FORCE_LIMIT),
                            iterations=iterations[1], optimizer=tisim.optim.Adam(lr=0.1), progress=progress,
                            callback=callback)
    return find, land


STAGES = ("stage 1 of 2: find a swing", "stage 2 of 2: land it (100x terminal cost)")
SIZE, VIEW = (800, 560), (-2.6, 2.6, -1.35, 2.3)  # the window [px] and its world rectangle [m]: room on top
PANEL = (0.02, 0.02, 0.60, 0.23)  # for the text panel: x, y, width, height as fractions of the window


def window_frame(window, state, params, lines):
    """One frame of the window: the cart-pole in ``state`` and the panel's lines."""
    canvas = viz.Canvas(*window.size, bounds=VIEW)
    viz.draw_cartpole(canvas, state, params)
    window.draw(canvas.image())
    with window.panel("cart-pole swing-up", *PANEL) as panel:
        for line in lines:
            panel.text(line)


class LiveView:
    """An optimizer callback that draws the attempt just evaluated (batch element 0), its motion replayed as the
    iterations go by, with the stage, its iteration and the loss; closing the window stops the optimization.
    The iteration count starts again with each stage (each is its own optimizer run); the panel says which."""

    def __init__(self, window, sim, iterations, every=5):
        self.window, self.sim, self.every, self.shown = window, sim, every, 0
        self.iterations, self.stage, self.last, self.ended = iterations, 0, 0, []
        self.params = {k: float(v[0]) for k, v in sim.params.items()}

    def __call__(self, iteration, values, loss):
        if not self.window.running:
            return True
        if iteration <= self.last:  # the next stage's optimizer has started
            self.ended.append((self.last, self.loss))
            self.stage += 1
        self.last, self.loss = iteration, loss
        if iteration % self.every and iteration != 1:
            return False
        traj = self.sim.rollout()
        t = (self.shown * 3) % (self.sim.T + 1)
        lines = [f"{STAGES[self.stage]}, iteration {iteration} of {self.iterations[self.stage]}",
                 f"loss (sum over the batch) {loss:.2f}", f"attempt 1 of {self.sim.B}, step {t} of {self.sim.T}"]
        lines += [f"stage 1 ended after {n} iterations at loss {value:.2f}" for n, value in self.ended[:1]]
        window_frame(self.window, {k: float(v[0, t]) for k, v in traj.items()}, self.params, lines)
        self.window.show()
        self.shown += 1
        return False


def busy(window, state, params, lines):
    """Draw one frame saying what runs now (the window cannot redraw while it runs)."""
    if window is not None and window.running:
        window_frame(window, state, params, lines)
        window.show()


def replay(window, traj, b, params, lines, close_after=None):
    """Replay batch element b of the result once (25 frames a second), then stay on its final frame until the user
    presses Esc or closes the window (or close_after seconds pass); R replays again."""
    steps = traj["x"].shape[1]
    start = [0]

    def frame(k):
        t = min(2 * (k - start[0]), steps - 1)
        if "r" in window.keys() or "R" in window.keys():
            start[0], t = k, 0
        state = {key: float(v[b, t]) for key, v in traj.items()}
        status = [f"replaying the result, step {t} of {steps - 1}"] if t < steps - 1 else \
            ["final state shown; R: replay", DONE]
        window_frame(window, state, params, lines + status)

    return window.linger(frame, close_after=close_after, fps=25)


def perturbed_success(count=10, seed=1):
    """Swing up from `count` randomly perturbed hanging states at once; returns how many succeed."""
    rng = np.random.default_rng(seed)
    initial = dict(theta=np.pi + rng.normal(0, 0.2, count), theta_dot=rng.normal(0, 0.2, count),
                   x=rng.normal(0, 0.2, count), x_dot=rng.normal(0, 0.1, count))
    sim = tisim.systems.Cartpole(horizon=HORIZON, batch=count, **initial)
    swing_up(sim, seed)
    traj = sim.rollout()
    return sum(succeeded(summary(traj, b)) for b in range(count))


def mpc(seed, plan_steps=75, apply=5, steps=300, callback=None):
    """The first plan as in the open-loop demo; then re-plans with a uniform upright cost, warm-started.
    callback(step, states) after each re-plan (for a window)."""
    planner = tisim.systems.Cartpole(horizon=plan_steps, theta=np.pi)
    plant = tisim.systems.Cartpole(horizon=apply, theta=np.pi, m_pole=0.12)
    swing_up(planner, seed, iterations=(600, 300))
    return receding_horizon(planner, plant, swing_up_loss(planner, 100.0, swing=1), steps=steps, apply=apply,
                            limits=(-FORCE_LIMIT, FORCE_LIMIT), iterations=50, lr=0.05, callback=callback)


def pictures(out, first, final, params, history, b, *, stages=(), mpc=False, dt=0.02):
    """The first attempt beside the final one, captioned, as a GIF, and the loss history: cartpole_opt.gif and
    cartpole_opt_loss.png, or with mpc cartpole_opt_mpc.gif and cartpole_opt_mpc.png (the loss of each re-plan)."""
    both = {k: np.concatenate([first[k][b], final[k][b]]) for k in final}
    view = viz.view_cartpole(both, {k: float(v[0]) for k, v in params.items()})
    captions = ("cart-pole, no force", "receding horizon, heavier pole") if mpc else \
        ("cart-pole, first attempt", "optimized")
    before = viz.frames("Cartpole", first, params, batch_index=b, every=2, bounds=view, caption=captions[0], dt=dt)
    after = viz.frames("Cartpole", final, params, batch_index=b, every=2, bounds=view, caption=captions[1], dt=dt)
    name = "cartpole_opt_mpc" if mpc else "cartpole_opt"
    gif = viz.save_gif(out / f"{name}.gif", viz.side_by_side(before, after), fps=25)
    if mpc:
        plot = plots.plot_history(history, out / f"{name}.png", xlabel="re-plan (every 0.1 s)",
                                  title="cart-pole, receding horizon: each re-plan's loss after its 50 iterations")
    else:
        plot = plots.plot_history(history, out / f"{name}_loss.png", stages=stages, loss_label="loss (batch sum)",
                                  title="cart-pole swing-up: stage 1 finds a swing, stage 2 lands it "
                                        "(100x terminal cost)")
    return gif, plot


def main(argv=None):
    parser = argparse.ArgumentParser(description=(
        "Swing a cart-pole up from hanging and hold it upright: 200 forces (4 s) optimized by gradient descent "
        "through the simulator, in two stages (find a swing, then land it). Writes cartpole_opt.gif (the first "
        "attempt beside the optimized one) and cartpole_opt_loss.png (loss and gradient norm per iteration)."))
    parser.add_argument("--batch", type=int, default=8,
                        help="random starting force sequences optimized at once; the best one wins (default 8)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random starting forces (default 0)")
    parser.add_argument("--mpc", action="store_true",
                        help="receding-horizon control instead (plan 1.5 s, apply 0.1 s, re-plan) on a plant whose "
                             "pole is 20%% heavier than the planner's; writes cartpole_opt_mpc.gif and .png")
    parser.add_argument("--out", default="out", help="folder for the GIF and the loss plot (default out)")
    parser.add_argument("--iterations", default="800,400",
                        help="iterations of stage 1 (find a swing) and stage 2 (land it), as 'n1,n2' (default 800,400; "
                             "not with --mpc)")
    parser.add_argument("--gui", action="store_true",
                        help="watch the optimization in a window, which then replays the result and stays up on its "
                             "final frame until you press Esc or close it")
    parser.add_argument("--close-after", type=float, default=None, metavar="SECONDS",
                        help="with --gui: close the window this many seconds after the run ends (for scripts and "
                             "tests; default: it stays until you close it)")
    args = parser.parse_args(argv)
    stage_iterations = tuple(int(n) for n in args.iterations.split(","))
    if len(stage_iterations) != 2 or min(stage_iterations) < 1:
        parser.error(f"--iterations takes two positive counts 'n1,n2', got {args.iterations!r}")
    window = None
    if args.gui:
        try:
            window = Window("tisim: cart-pole swing-up", SIZE)
        except WindowUnavailable as error:
            print(error, file=sys.stderr)
            return 2
    shown = {k: float(v[0]) for k, v in tisim.systems.Cartpole(horizon=1).params.items()} if window else None
    hanging = {**REST, "theta": np.pi}  # the window's first frame
    started = time.perf_counter()
    if args.mpc:
        def replanned(step, states):
            busy(window, {k: float(v[0]) for k, v in states.items()}, shown,
                 [f"receding horizon: step {step} of 300, re-planned every 0.1 s", "on a pole 20% heavier"])

        busy(window, hanging, shown, ["receding horizon: planning the first 1.5 s (1 re-plan of 60)"])
        run = mpc(args.seed, callback=replanned if window else None)
        traj, best, iterations = run.states, 0, sum(p.iterations for p in run.plans)
        history = [p.history[-1] for p in run.plans]  # each re-plan's last iteration
        first = tisim.systems.Cartpole(horizon=traj["x"].shape[1] - 1, theta=np.pi).rollout()  # no force at all
        stages = ()
    else:
        sim = tisim.systems.Cartpole(horizon=HORIZON, batch=args.batch, theta=np.pi)
        busy(window, hanging, shown, [f"{STAGES[0]}: starting (the first iteration compiles the kernels)"])
        find, land = swing_up(sim, args.seed, iterations=stage_iterations, progress=window is None,
                              callback=LiveView(window, sim, stage_iterations) if window else None)
        traj = sim.rollout()
        best = int(np.argmin(sim.gradient(swing_up_loss(sim, 100.0)).per_batch))
        iterations, history = find.iterations + land.iterations, find.history + land.history
        stages = [(find.iterations, "stage 2")]
        sim.set_actions(first_attempt(sim, args.seed))
        first = sim.rollout()
    seconds = time.perf_counter() - started
    if window is not None:
        busy(window, {k: float(v[best, -1]) for k, v in traj.items()}, shown,
             [f"optimization done ({iterations} iterations)", "writing the GIF and the loss plot"])
    gif, plot = pictures(pathlib.Path(args.out), first, traj, tisim.systems.Cartpole(horizon=1).params, history, best,
                         stages=stages, mpc=args.mpc)
    result = summary(traj, best)
    result.update(iterations=iterations, seconds=seconds, success=succeeded(result))
    print(f"{'receding-horizon' if args.mpc else 'open-loop'} swing-up: {iterations} iterations in {seconds:.1f} s")
    print(f"  final angle from upright {result['angle']:+.4f} rad, angular velocity {result['angular_velocity']:+.4f}"
          f" rad/s, cart at {result['cart']:+.3f} m moving {result['cart_velocity']:+.3f} m/s,"
          f" cart stayed within +-{result['cart_extent']:.2f} m: {'success' if result['success'] else 'FAILED'}")
    print(f"  wrote {gif} ({gif.stat().st_size // 1024} KB) and {plot}")
    result["history"], result["trajectory"] = history, traj
    if window is not None and window.running:
        print("the window replays the result and stays on its final frame: press Esc or close it", flush=True)
        outcome = "success" if result["success"] else "not balanced"
        lines = [f"{'receding horizon' if args.mpc else 'both stages'} done: {iterations} iterations, {outcome}",
                 f"final angle from upright {result['angle']:+.3f} rad, cart at {result['cart']:+.2f} m"]
        result["window_frames"] = replay(window, traj, best, shown, lines, close_after=args.close_after)
    return result


if __name__ == "__main__":
    result = main()
    sys.exit(result if isinstance(result, int) else 0)
