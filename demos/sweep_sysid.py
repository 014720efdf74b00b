# Identify 64 cart-poles, one per recording, as a sweep across worker processes or a Ray cluster.
#
# Each recording is of a different cart-pole: its cart mass, pole mass, pole length and track friction are drawn at
# random, and so is the noise on its observed positions and angles. Four experiments each (initial states and force
# sequences of their own), 2 s at 50 Hz; only x and theta are observed. The recordings are made here, in one batched
# rollout, and travel to the workers as numpy arrays; each job fits the four parameters to its recording by gradient
# descent from textbook values (tisim.tasks.identify), as demos/sysid.py does for one. The plot shows fitted against
# true for each parameter.
# Writes out/sweep_sysid.png, out/sweep_sysid.json (the errors) and the results folder out/sweep_sysid/ (one file a
# job: running the same command again resumes, and only jobs without a result run).
#
# Command: python demos/sweep_sysid.py [--recordings 64] [--backend processes|ray|serial] [--workers N]
#                                      [--address HOST:PORT] [--iterations 1500] [--out out]
import argparse
import json
import pathlib

import numpy as np

import tisim
from tisim import sweep
from tisim.losses import Tracking
from tisim.optim import Adam
from tisim.tasks import identify

RANGES = dict(m_cart=(0.8, 1.6), m_pole=(0.08, 0.25), l=(0.4, 0.8), mu_cart=(0.02, 0.1))  # the true values' ranges
GUESS = dict(m_cart=1.0, m_pole=0.1, l=0.5, mu_cart=0.01)
NOISE = (0.5e-3, 3e-3)  # [m] and [rad]: the range of each recording's noise level
EXPERIMENTS, HORIZON = 4, 100


def record(n, seed):
    """n recordings, each of its own cart-pole, from one batched rollout; and the true values and noise of each."""
    rng = np.random.default_rng(seed)
    true = {k: rng.uniform(low, high, n) for k, (low, high) in RANGES.items()}
    noise = rng.uniform(*NOISE, n)
    t = np.arange(HORIZON) * tisim.systems.Cartpole.DT
    rates = rng.uniform(0.3, 1.5, (n * EXPERIMENTS, 1))
    forces = 3 * np.sin(2 * np.pi * rates * t + rng.uniform(0, 2 * np.pi, (n * EXPERIMENTS, 1)))
    initial = dict(theta=np.pi + rng.normal(0, 0.5, n * EXPERIMENTS), theta_dot=rng.normal(0, 0.5, n * EXPERIMENTS),
                   x=np.zeros(n * EXPERIMENTS))
    sim = tisim.systems.Cartpole(horizon=HORIZON, batch=n * EXPERIMENTS, **initial,
                                 **{k: np.repeat(v, EXPERIMENTS) for k, v in true.items()})
    sim.set_actions(forces)
    trajectory = sim.rollout()
    recordings, truths = [], []
    for i in range(n):
        rows = slice(i * EXPERIMENTS, (i + 1) * EXPERIMENTS)
        observed = {k: trajectory[k][rows] + noise[i] * rng.normal(size=trajectory[k][rows].shape)
                    for k in ("x", "theta")}
        recordings.append(dict(recording=i, forces=forces[rows], observed=observed,
                               initial={k: v[rows] for k, v in initial.items()}))
        truths.append(dict(noise=float(noise[i]), **{k: float(v[i]) for k, v in true.items()}))
    return recordings, truths


def fit(config):
    """One job: fit the four parameters to one recording. Runs in a worker; everything it needs is in config."""
    sim = tisim.systems.Cartpole(horizon=HORIZON, batch=EXPERIMENTS, **config["initial"], **GUESS)
    sim.set_actions(config["forces"])
    result = identify(sim, Tracking(config["observed"]), list(GUESS), iterations=config["iterations"],
                      optimizer=Adam(lr=0.05))
    return dict(fitted={k: float(v) for k, v in result.values.items()}, loss=float(result.loss))


def main(argv=None):
    parser = argparse.ArgumentParser(description=(
        "Identify many cart-poles, one per noisy recording, as a sweep of independent jobs (processes, threads or "
        "a Ray cluster) that resumes where it stopped. Writes sweep_sysid.json and sweep_sysid.png (fitted "
        "against true value per parameter)."))
    parser.add_argument("--recordings", type=int, default=64, help="recordings, one job each (default 64)")
    parser.add_argument("--backend", default="processes", choices=sweep.BACKENDS,
                        help="where the jobs run (default processes)")
    parser.add_argument("--workers", type=int, default=None, help="jobs at once (default: one per core or CPU)")
    parser.add_argument("--address", default=None, help="a running Ray cluster's HOST:PORT (implies --backend ray)")
    parser.add_argument("--iterations", type=int, default=1500, help="Adam iterations per recording (default 1500)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the recordings' true values and noise")
    parser.add_argument("--out", default="out", help="folder for the JSON, the PNG and the sweep's results "
                                                      "(default out)")
    args = parser.parse_args(argv)
    if args.recordings < 1 or args.iterations < 1:
        parser.error("--recordings and --iterations must be at least 1")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    backend = "ray" if args.address else args.backend

    recordings, truths = record(args.recordings, args.seed)
    configs = [dict(r, iterations=args.iterations) for r in recordings]
    result = sweep.run(fit, configs, backend=backend, workers=args.workers, address=args.address,
                       folder=out / "sweep_sysid")

    done = [o for o in result.outcomes if o.ok]
    errors = {k: np.array([o.value["fitted"][k] / truths[o.index][k] - 1 for o in done]) for k in GUESS}
    print(f"relative errors over {len(done)} recordings: {'parameter':>9} {'median |e|':>11} {'90% |e|':>9} "
          f"{'max |e|':>9}")
    for k, e in errors.items():
        print(f"{'':>43} {k:>9} {np.median(np.abs(e)):>11.2e} {np.quantile(np.abs(e), 0.9):>9.2e} "
              f"{np.max(np.abs(e)):>9.2e}")
    plot(done, truths, out / "sweep_sysid.png")
    figures = dict(recordings=args.recordings, iterations=args.iterations, seed=args.seed, backend=backend,
                   sweep=result.summary(),
                   errors={k: dict(median=float(np.median(np.abs(e))), q90=float(np.quantile(np.abs(e), 0.9)),
                                   max=float(np.max(np.abs(e)))) for k, e in errors.items()})
    (out / "sweep_sysid.json").write_text(json.dumps(figures, indent=1) + "\n")
    print(f"wrote {out / 'sweep_sysid.png'} and {out / 'sweep_sysid.json'}")
    return figures


def plot(outcomes, truths, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axes = plt.subplots(1, len(GUESS), figsize=(3.2 * len(GUESS), 3.2))
    for ax, k in zip(axes, GUESS):
        true = [truths[o.index][k] for o in outcomes]
        ax.plot(RANGES[k], RANGES[k], color="0.7", lw=1)
        ax.scatter(true, [o.value["fitted"][k] for o in outcomes], s=12)
        ax.axhline(GUESS[k], color="C3", lw=0.8, ls="--", label="start")
        ax.set(title=k, xlabel="true", ylabel="fitted")
    axes[0].legend(loc="upper left")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


if __name__ == "__main__":
    main()
