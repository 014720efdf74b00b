# How strong is this clay? Drop a steel ball into it twice, film how it sinks, and find the clay's yield stress and
# stiffness for which a simulated ball sinks the same way: gradients through the two-way contact between a rigid ball
# and MPM clay (tisim.systems.Coupled: the clay slows the ball down, the ball dents the clay).
#
# A 2D bed of von Mises clay, 0.4 m wide and 12 cm deep (64 x 64 cells, 765 points), and a steel disc of 3 cm radius
# (22 kg per metre of depth) dropped onto it at 1 m/s and at 3 m/s. Of each drop only the ball's height is recorded,
# every 5 ms for 0.2 s, with 0.3 mm of noise. The recorded clay yields at 2,500 Pa and has E = 100 kPa; the fit
# starts from a clay of 1,000 Pa and 30 kPa and runs L-BFGS on both, in log space, through every step of both drops:
# the gradient of the ball's path with respect to the clay comes back through the clay's push on the ball.
#
# Command: python demos/ball_penetrometer.py [--iterations 10] [--seed 0] [--out out]
#          -> out/ball_penetrometer.json (the figures), out/ball_penetrometer.png (the ball's depth against time:
#             recorded, first guess, fitted) and out/ball_penetrometer.gif (the fast drop into the first guess's clay
#             beside the fitted clay's)
import argparse
import json
import pathlib
import time

import numpy as np

import tisim
from tisim import viz
from tisim.losses import Tracking
from tisim.optim import lbfgs
from tisim.systems.mpm import BAND, Body, Coupled, Tool

TRUE, GUESS = dict(yield_stress=2500.0, E=1e5), dict(yield_stress=1000.0, E=3e4)
N_GRID, HORIZON, EVERY, NOISE = 64, 1000, 25, 3e-4  # cells a side; steps of 0.2 ms; recorded every 5 ms; [m]
RADIUS, DENSITY, SPEEDS = 0.03, 7800.0, (1.0, 3.0)  # the steel ball [m], [kg/m^3]; its speed in each drop [m/s]
BED = 0.12  # the clay's depth [m]


def clay_bed(**values):
    """The clay and the ball just above it, both drops as the batch; values: the clay's yield stress and E."""
    base = BAND / N_GRID
    clay = Body.box([0.3, base], [0.7, base + BED], 0.5 / N_GRID)
    ball = Tool.sphere([0.5, base + BED + RADIUS + 0.002], RADIUS)
    sim = Coupled(horizon=HORIZON, batch=len(SPEEDS), body=clay, n_grid=N_GRID, tools=[ball], material="von_mises",
                  nu=0.3, rho=1800.0, tool_mass=[DENSITY * np.pi * RADIUS ** 2], **values)
    sim.set_initial_state(tool_vel=[[[0.0, -speed]] for speed in SPEEDS])
    return sim


def depth(traj):
    """How deep the ball's bottom is below the clay's top [m], (B, T+1)."""
    return BAND / N_GRID + BED - (traj["tool_pos"][:, :, 0, 1] - RADIUS)


def record(truth, rng):
    """The film: the ball's height every EVERY steps, with noise; NaN (not recorded) between frames."""
    traj = truth.rollout()
    data = np.full_like(traj["tool_pos"], np.nan)
    data[:, ::EVERY, :, 1] = traj["tool_pos"][:, ::EVERY, :, 1] + NOISE * rng.normal(size=data[:, ::EVERY, :, 1].shape)
    return traj, data


def plot(recorded, data, first, fitted, dt, path):
    """The ball's depth against time in each drop: the recorded frames, the first guess and the fit."""
    import matplotlib.pyplot as plt
    t = np.arange(HORIZON + 1) * dt * 1000.0
    bottom = BAND / N_GRID + BED - (data[:, :, 0, 1] - RADIUS)
    figure, axes = plt.subplots(1, len(SPEEDS), figsize=(9.0, 3.6), layout="constrained", sharey=True)
    for b, ax in enumerate(axes):
        ax.plot(t[::EVERY], 100 * bottom[b, ::EVERY], "o", ms=3, color="black", label="recorded (0.3 mm noise)")
        ax.plot(t, 100 * depth(first)[b], color="tab:red", label="first guess")
        ax.plot(t, 100 * depth(fitted)[b], color="tab:blue", ls="--", label="fitted")
        ax.set_title(f"dropped at {SPEEDS[b]:g} m/s")
        ax.set_xlabel("time [ms]")
    axes[0].invert_yaxis()  # deeper is lower (the axes share theirs)
    axes[0].set_ylabel("ball's bottom below the clay's top [cm]")
    axes[0].legend(loc="lower left")
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def main(iterations=10, seed=0, out="out", progress=True):
    tisim.init(precision="f64")
    truth = clay_bed(**TRUE)
    recorded, data = record(truth, np.random.default_rng(seed))
    model = clay_bed(**GUESS)
    first = model.rollout()
    loss, names = Tracking({"tool_pos": data}), list(GUESS)

    def objective(z):  # the loss and its gradient in z = log(value), the chain rule through value = exp(z)
        model.set_params(**dict(zip(names, np.exp(z))))
        g = model.gradient(loss)
        return g.value, np.array([g.params[name].sum() for name in names]) * np.exp(z)

    def value(z):
        model.set_params(**dict(zip(names, np.exp(z))))
        return float(np.sum(model.evaluate(loss)))

    def report(iteration, z, total):
        if progress:
            print(f"iteration {iteration + 1:2d}: loss {total:.3e}, " + ", ".join(
                f"{name} {v:.5g}" for name, v in zip(names, np.exp(z))), flush=True)

    began = time.time()
    z, final_loss, history = lbfgs(objective, np.log([GUESS[name] for name in names]), iterations=iterations,
                                   value=value, callback=report)
    seconds = time.time() - began
    model.set_params(**dict(zip(names, np.exp(z))))
    fitted = {name: float(model.params[name][0, 0]) for name in GUESS}
    errors = {name: abs(fitted[name] / TRUE[name] - 1.0) for name in fitted}
    final = model.rollout()
    miss = {which: float(np.nanmax(np.abs(traj["tool_pos"] - data)[..., 1])) for which, traj in
            (("first", first), ("fitted", final))}
    for name in fitted:
        print(f"{name}: recorded clay {TRUE[name]:g}, first guess {GUESS[name]:g}, fitted {fitted[name]:.5g} "
              f"(error {100 * errors[name]:.2f}%)")
    print(f"the ball's height against the film: {1000 * miss['first']:.1f} mm off at worst with the first guess, "
          f"{1000 * miss['fitted']:.2f} mm fitted (noise {1000 * NOISE:g} mm)")
    deepest = depth(recorded)[:, -1]
    figures = dict(true=TRUE, guess=GUESS, fitted=fitted, relative_error=errors, iterations=len(history) - 1,
                   seed=seed, seconds=round(seconds, 1), final_loss=float(final_loss), worst_height_error_m=miss,
                   noise_m=NOISE, speeds_m_s=list(SPEEDS), recorded_final_depth_m=deepest.tolist(), losses=history)
    folder = pathlib.Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ball_penetrometer.json").write_text(json.dumps(figures, indent=2))
    png = plot(recorded, data, first, final, model.dt, folder / "ball_penetrometer.png")
    gif = picture(model, first, final, folder / "ball_penetrometer.gif", len(history) - 1)
    print(f"wrote {folder / 'ball_penetrometer.json'}, {png} and {gif}")
    return figures


def picture(model, first, fitted, path, iterations):
    """The fast drop into the first guess's clay beside the fitted clay's (the recorded one's twin), captioned;
    returns the GIF's path."""
    bounds, fast = (0.25, 0.75, 0.0, 0.3), len(SPEEDS) - 1
    panels = [viz.frames(model, traj, batch_index=fast, every=50, size=(280, 168), bounds=bounds, caption=words)
              for traj, words in ((first, "first guess"), (fitted, f"fitted ({iterations} iterations)"))]
    return viz.save_gif(path, viz.side_by_side(*panels), fps=10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(
        "Identify a clay's yield stress and Young's modulus from how a steel ball dropped into it sinks (its "
        "height filmed with noise, two drops), by gradient descent through the two-way contact between the ball "
        "and MPM clay. Writes ball_penetrometer.json, ball_penetrometer.png (depth against time) and "
        "ball_penetrometer.gif (the fast drop into the first guess's clay beside the fitted clay's)."))
    parser.add_argument("--iterations", type=int, default=10, help="L-BFGS iterations (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the recording's noise (default 0)")
    parser.add_argument("--out", default="out", help="folder for the JSON, PNG and GIF (default out)")
    args = parser.parse_args()
    if args.iterations < 0:
        parser.error(f"--iterations must be >= 0, got {args.iterations}")
    main(args.iterations, args.seed, args.out)
