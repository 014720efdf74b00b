# Identify a jelly from a video of it: Young's modulus and Poisson's ratio of a 2D block that drops and bounces,
# fitted by gradient descent through the material point method to noisy observations of its points.
#
# A "true" jelly (E = 4,000 Pa, nu = 0.3) is dropped 0.1 m onto a sticky floor; every 20th step the positions of
# its points are observed with 1 mm of noise (the frames of the video), and nothing else is. The fit starts from a
# jelly half as stiff and half as squeezable, and follows the gradient of the tracking loss through every step of
# the simulation, impact included; E and nu are fitted in log space (both stay positive).
#
# Command: python demos/mpm_sysid.py [--iterations 80] [--seed 0] [--out out]
#          -> out/mpm_sysid.json (the figures) and out/mpm_sysid.gif (the true jelly beside the fitted one)
import argparse
import json
import pathlib

import numpy as np

import tisim
from tisim import viz
from tisim.losses import Tracking
from tisim.optim import Adam
from tisim.systems.mpm import BAND, MPM, Body
from tisim.tasks import identify

TRUE, GUESS = dict(E=4000.0, nu=0.3), dict(E=2000.0, nu=0.15)
N_GRID, HORIZON, EVERY, NOISE = 24, 1200, 20, 1e-3  # cells per side; steps of 0.2 ms; observed every 4 ms; [m]


def jelly(**values):
    """A 0.2 m block whose bottom hangs 0.1 m above the floor's band."""
    bottom = BAND / N_GRID + 0.1
    body = Body.box([0.4, bottom], [0.6, bottom + 0.2], 0.5 / N_GRID)
    return MPM(horizon=HORIZON, body=body, n_grid=N_GRID, **values)


def observe(sim, rng):
    """The video: the points' positions every EVERY steps, with noise; NaN (not observed) between frames."""
    pos = sim.rollout()["pos"][0]
    data = np.full_like(pos, np.nan)
    data[::EVERY] = pos[::EVERY] + NOISE * rng.normal(size=pos[::EVERY].shape)
    return pos, data


def main(iterations=80, seed=0, out="out"):
    tisim.init(precision="f64")
    truth = jelly(**TRUE)
    true_path, data = observe(truth, np.random.default_rng(seed))
    model = jelly(**GUESS)
    loss = Tracking({"pos": data})
    result = identify(model, loss, ["E", "nu"], iterations=iterations, optimizer=Adam(lr=0.05), progress=True)
    fitted = {name: float(model.params[name][0, 0]) for name in ("E", "nu")}
    errors = {name: abs(fitted[name] / TRUE[name] - 1.0) for name in fitted}
    for name in fitted:
        print(f"{name}: true {TRUE[name]:g}, start {GUESS[name]:g}, fitted {fitted[name]:.5g} "
              f"(error {100 * errors[name]:.2f}%)")
    figures = dict(true=TRUE, guess=GUESS, fitted=fitted, relative_error=errors, iterations=iterations, seed=seed,
                   final_loss=float(result.loss), noise_m=NOISE, frames_observed=int(HORIZON // EVERY + 1))
    folder = pathlib.Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mpm_sysid.json").write_text(json.dumps(figures, indent=2))
    gif = picture(truth, model, folder / "mpm_sysid.gif", iterations)
    print(f"wrote {folder / 'mpm_sysid.json'} and {gif}")
    return figures


def picture(truth, model, path, iterations):
    """The recorded jelly beside the fitted one, captioned; returns the GIF's path."""
    bounds = (0.0, 1.0, 0.0, 1.0)
    true_frames = viz.frames(truth, truth.rollout(), every=40, size=(220, 220), bounds=bounds,
                             caption="jelly: recorded")
    fit_frames = viz.frames(model, model.rollout(), every=40, size=(220, 220), bounds=bounds,
                            caption=f"fitted ({iterations} iterations)")
    return viz.save_gif(path, viz.side_by_side(true_frames, fit_frames), fps=15)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(
        "Identify a 2D jelly's Young's modulus and Poisson's ratio from noisy frames of it dropping and bouncing, "
        "by gradient descent through the material point method. Writes mpm_sysid.json (true, guessed and fitted "
        "values) and mpm_sysid.gif (the recorded jelly beside the fitted one)."))
    parser.add_argument("--iterations", type=int, default=80, help="Adam iterations (default 80)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the observation noise (default 0)")
    parser.add_argument("--out", default="out", help="folder for mpm_sysid.json and mpm_sysid.gif (default out)")
    args = parser.parse_args()
    main(args.iterations, args.seed, args.out)
