# A cloth's digital twin: the stiffness field and the damping of a hanging cloth, identified from a few dozen
# tracked points of one recorded motion, by gradients through every step of its mass-spring model.
#
# A 32 x 32 cloth hangs from its top corners; a gust pushes it out of its plane as it is let go. Its springs'
# stiffness varies smoothly over the sheet (the "true" field: stiffer in one corner, softer across the middle). A
# camera tracks 36 of its 1,024 particles (a 6 x 6 grid of markers) every 10 ms with 1 mm of noise, and nothing
# else. The twin starts from a uniform cloth of the wrong stiffness and damping and fits the field, one log
# stiffness per cell of a 16 x 16 grid over the sheet (256 parameters; each spring takes its cell's), and the
# damping, by L-BFGS on the tracking loss plus a smoothness prior on the field (neighbouring cells alike). The
# untracked 988 particles are the held-out check: how well the twin predicts where they went.
#
# Command: python demos/cloth_sysid.py [--iterations 80] [--seed 0] [--size 32] [--out out] [--gui]
#          -> out/cloth_sysid.json (the figures), out/cloth_sysid.png (true and fitted fields),
#             out/cloth_sysid.gif (the recorded cloth, the twin's first guess and the fitted twin side by side,
#             the tracked markers as dark dots, where a Vulkan driver is present);
#          --gui then replays the twin in a window, the camera circling it
import argparse
import json
import pathlib
import time

import numpy as np

import tisim
from tisim import viz
from tisim.gui import WindowUnavailable, picture_or_reason, window_problem
from tisim.losses import Tracking
from tisim.optim import lbfgs
from tisim.robots import cloth
from tisim.scene import Scene
from tisim.systems.mass_spring import MassSpring

HORIZON, EVERY, NOISE = 800, 20, 1e-3  # steps of 0.5 ms (0.4 s); a frame every 10 ms; marker noise [m]
CELLS, MARKERS = 16, 6  # the field's cells per side; markers per side
K0, TRUE_DAMPING, GUESS_K, GUESS_DAMPING = 600.0, 1.0, 300.0, 0.3  # N/m, N s/m
PRIOR = 2e-4  # weight of the smoothness prior, sum over neighbouring cells of (log k - log k')^2


def true_field(u, v):
    """log stiffness over the sheet (u across, v down, both in [0, 1]): stiffer at the top left, softer across the
    middle."""
    return np.log(K0) + 0.4 * np.exp(-((u - 0.2) ** 2 + (v - 0.2) ** 2) / 0.08) - 0.3 * np.exp(-(v - 0.6) ** 2 / 0.05)


def sheet(size):
    """The cloth, each spring's cell of the field, and the cells' centres (u, v)."""
    robot = cloth(size, size, spacing=0.6 / (size - 1), origin=(0.2, 0.9, 0.5), pin="top corners")
    rest = robot.particles[robot.springs].mean(axis=1)  # each spring's middle
    u = (rest[:, 0] - 0.2) / 0.6
    v = (0.9 - rest[:, 1]) / 0.6
    cell = np.minimum((v * CELLS).astype(int), CELLS - 1) * CELLS + np.minimum((u * CELLS).astype(int), CELLS - 1)
    centres = (np.arange(CELLS) + 0.5) / CELLS
    cu, cv = np.meshgrid(centres, centres)
    return robot, cell, cu.ravel(), cv.ravel()


def gust(robot):
    """The push: out of the plane, strongest at the bottom, with a sideways part."""
    depth = (robot.particles[:, 1].max() - robot.particles[:, 1]) / np.ptp(robot.particles[:, 1])
    return np.outer(depth, [0.3, 0.0, 1.2])


def smoothness(theta):
    """The prior and its gradient: sum of squared differences of neighbouring cells."""
    grid = theta.reshape(CELLS, CELLS)
    value, grad = 0.0, np.zeros_like(grid)
    for axis in (0, 1):
        d = np.diff(grid, axis=axis)
        value += np.sum(d ** 2)
        pad = [(0, 0), (0, 0)]
        pad[axis] = (1, 0)  # d[i] = grid[i + 1] - grid[i] pulls grid[i + 1] down and grid[i] up
        grad += 2 * np.pad(d, pad)
        pad[axis] = (0, 1)
        grad -= 2 * np.pad(d, pad)
    return PRIOR * value, PRIOR * grad.ravel()


def main(iterations=80, seed=0, size=32, out="out", progress=True, gui=False, offscreen=False):
    if size < 2 * MARKERS:
        raise ValueError(f"cloth_sysid: size must be at least {2 * MARKERS} particles per side, got {size}")
    tisim.init(precision="f64")
    if gui and window_problem(offscreen):  # fail before the work, not after it
        raise WindowUnavailable(window_problem(offscreen))
    robot, cell, cu, cv = sheet(size)
    start_vel = gust(robot)
    truth_theta = true_field(cu, cv)
    truth = MassSpring(horizon=HORIZON, robot=robot, k=np.exp(truth_theta[cell]), damping=TRUE_DAMPING, drag=0.01)
    truth.set_initial_state(vel=start_vel)
    true_path = truth.rollout()["pos"][0]

    rows = np.linspace(0, size - 1, MARKERS).round().astype(int)
    markers = (rows[:, None] * size + rows[None, :]).ravel()
    rng = np.random.default_rng(seed)
    data = np.full_like(true_path, np.nan)
    data[::EVERY, markers] = true_path[::EVERY, markers] + NOISE * rng.normal(size=data[::EVERY, markers].shape)
    loss = Tracking({"pos": data})

    twin = MassSpring(horizon=HORIZON, robot=robot, k=GUESS_K, damping=GUESS_DAMPING, drag=0.01)
    twin.set_initial_state(vel=start_vel)
    held_out = np.setdiff1d(np.arange(size * size), markers)

    def prediction_error():
        """RMS distance of the untracked particles from where the recorded cloth took them, over all steps [m]."""
        path = twin.rollout()["pos"][0]
        return float(np.sqrt(np.mean(np.sum((path[:, held_out] - true_path[:, held_out]) ** 2, axis=-1))))

    before = prediction_error()
    guess_rollout = {k: v.copy() for k, v in twin.rollout().items()}
    def unpack(z):
        """The variables: one log stiffness per cell, then log damping."""
        return np.exp(z[:-1])[cell], float(np.exp(z[-1]))

    def objective(z):
        k, damping = unpack(z)
        twin.set_params(k=k, damping=damping)
        g = twin.gradient(loss)
        prior, prior_grad = smoothness(z[:-1])
        # the chain rule through k_s = exp(z[cell(s)]) and damping = exp(z[-1])
        dz = np.append(np.bincount(cell, weights=g.params["k"][0] * k, minlength=CELLS * CELLS) + prior_grad,
                       g.params["damping"][0] * damping)
        return g.value + prior, dz

    def value(z):
        k, damping = unpack(z)
        twin.set_params(k=k, damping=damping)
        return float(np.sum(twin.evaluate(loss))) + smoothness(z[:-1])[0]

    def report(it, z, total):
        if progress and (it % 10 == 0 or it == iterations - 1):
            print(f"iteration {it:3d}: loss {total:.4e}, damping {np.exp(z[-1]):.3f} N s/m", flush=True)

    began = time.time()
    z0 = np.append(np.full(CELLS * CELLS, np.log(GUESS_K)), np.log(GUESS_DAMPING))
    z, final, history = lbfgs(objective, z0, iterations=iterations, value=value, callback=report)
    values = {"theta": z[:-1], "log_damping": z[-1]}
    twin.set_params(k=unpack(z)[0], damping=unpack(z)[1])
    after = prediction_error()

    field_error = np.exp(values["theta"] - truth_theta) - 1.0
    figures = dict(
        size=size, particles=size * size, springs=len(robot.springs), cells=CELLS * CELLS, markers=len(markers),
        frames=int(HORIZON // EVERY + 1), noise_m=NOISE, iterations=iterations, seed=seed,
        seconds=round(time.time() - began, 1), final_loss=final,
        field_rms_relative_error=float(np.sqrt(np.mean(field_error ** 2))),
        field_median_abs_relative_error=float(np.median(np.abs(field_error))),
        guess_field_rms_relative_error=float(np.sqrt(np.mean((GUESS_K / np.exp(truth_theta) - 1) ** 2))),
        damping=dict(true=TRUE_DAMPING, guess=GUESS_DAMPING, fitted=float(np.exp(values["log_damping"]))),
        held_out_rms_error_m=dict(guess=before, fitted=after), history=history)
    figures["damping"]["relative_error"] = abs(figures["damping"]["fitted"] / TRUE_DAMPING - 1)
    print(f"stiffness field: RMS error {100 * figures['field_rms_relative_error']:.1f}% (median "
          f"{100 * figures['field_median_abs_relative_error']:.1f}%; the uniform guess: "
          f"{100 * figures['guess_field_rms_relative_error']:.0f}%)")
    print(f"damping: true {TRUE_DAMPING}, fitted {figures['damping']['fitted']:.3f} N s/m")
    print(f"held-out particles: RMS error {1e3 * before:.1f} mm with the guess, {1e3 * after:.2f} mm with the twin "
          f"(marker noise {1e3 * NOISE:g} mm)")
    folder = pathlib.Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cloth_sysid.json").write_text(json.dumps(figures, indent=2))
    fields(truth_theta, values["theta"], folder / "cloth_sysid.png")
    print(f"wrote {folder / 'cloth_sysid.json'} and {folder / 'cloth_sysid.png'}")
    rollouts = {f"recorded, {len(markers)} markers": (truth, truth.rollout()),
                "twin, first guess": (twin, guess_rollout),
                f"fitted twin, {iterations} iterations": (twin, twin.rollout())}
    gif = picture_or_reason(lambda: pictures(rollouts, markers, folder / "cloth_sysid.gif"))
    if gif:
        figures["gif"] = str(gif)
        print(f"wrote {gif}")
    if gui:  # the twin's motion, the camera circling it, until the window is closed (opened after the GIF's scene
        # was closed: a window open while another scene closed crashed in GGUI)
        with Scene((800, 600), offscreen=offscreen, title="tisim: cloth twin") as window:
            figures["replays"] = viz.orbit(twin, twin.rollout(), window, rounds=1 if offscreen else None)
    return figures


def pictures(rollouts, markers, path):
    """The recorded cloth, the twin's first guess and the fitted twin side by side, captioned, one camera framing
    all three, the tracked markers drawn as dark dots."""
    size = (280, 240)
    camera = viz.look_at_rollouts([traj for _, traj in rollouts.values()], size=size, band=viz.CAPTION_BAND)
    panels = [viz.frames(sim, traj, every=40, size=size, markers=markers, camera=camera, caption=words)
              for words, (sim, traj) in rollouts.items()]
    return viz.save_gif(path, viz.side_by_side(viz.side_by_side(panels[0], panels[1]), panels[2]), fps=12)


def fields(true_theta, fitted_theta, path):
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(8, 3.6), constrained_layout=True)
    low, high = np.exp(min(true_theta.min(), fitted_theta.min())), np.exp(max(true_theta.max(), fitted_theta.max()))
    for ax, theta, title in ((axes[0], true_theta, "true stiffness"), (axes[1], fitted_theta, "fitted")):
        image = ax.imshow(np.exp(theta).reshape(CELLS, CELLS), vmin=low, vmax=high, cmap="viridis")
        ax.set_title(f"{title} [N/m]")
        ax.set_xticks([])
        ax.set_yticks([])
    figure.colorbar(image, ax=axes, shrink=0.8)
    figure.savefig(path, dpi=90)
    plt.close(figure)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(
        "A cloth's digital twin: identify the stiffness field (16 x 16 cells) and the damping of a hanging cloth "
        "from 36 tracked markers of one recorded motion, by L-BFGS through every step of its mass-spring model. "
        "Writes cloth_sysid.json, cloth_sysid.png (true and fitted fields) and cloth_sysid.gif (the recording, the "
        "twin's first guess and the fitted twin, markers drawn; needs Vulkan)."))
    parser.add_argument("--iterations", type=int, default=80, help="L-BFGS iterations (default 80)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the markers' noise (default 0)")
    parser.add_argument("--size", type=int, default=32, help="particles per side of the cloth (default 32, >= 12)")
    parser.add_argument("--out", default="out", help="folder for the JSON, PNG and GIF (default out)")
    parser.add_argument("--gui", action="store_true",
                        help="then replay the twin in a window, the camera circling it (needs Vulkan)")
    args = parser.parse_args()
    if args.iterations < 0:
        parser.error(f"--iterations must be >= 0, got {args.iterations}")
    try:
        main(args.iterations, args.seed, args.size, args.out, gui=args.gui)
    except WindowUnavailable as error:
        raise SystemExit(f"cloth_sysid: {error}") from None
