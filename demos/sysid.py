# System identification: recover a cart-pole's masses, pole length and track friction, and a sliding block's
# friction coefficient, from recorded trajectories, by gradient descent through the simulator.
#
# The recordings in assets/data/ were made by this script (--record) with known true values, several experiments
# each (different initial states and force sequences), and Gaussian noise on the observed states. Only positions
# and angles are observed; velocities are not (NaN in the data). The fit starts from textbook values; the masses,
# length and friction are fitted in log space, so they stay positive.
#
# Prints the true, initial and fitted values and writes out/sysid.json (the same figures).
#
# Command: python demos/sysid.py [--record] [--iterations 600] [--out out]
import argparse
import json
import pathlib

import numpy as np

import tisim
from tisim.losses import Tracking
from tisim.optim import Adam
from tisim.tasks import identify

DATA = pathlib.Path(__file__).resolve().parent.parent / "assets" / "data"
CARTPOLE_TRUE = dict(m_cart=1.3, m_pole=0.15, l=0.6, mu_cart=0.05)
CARTPOLE_GUESS = dict(m_cart=1.0, m_pole=0.1, l=0.5, mu_cart=0.01)
BLOCK_TRUE, BLOCK_GUESS = dict(mu=0.42), dict(mu=0.2)
NOISE = 1e-3  # [m] and [rad]


def record(system, true, observed, experiments, horizon, seed):
    """Simulate the experiments with the true values; observe some states with noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(horizon) * system.DT
    forces = np.stack([3 * np.sin(2 * np.pi * (0.5 + 0.3 * e) * t + e) for e in range(experiments)])
    initial = experiments_initial_state(system, rng, experiments)
    sim = system(horizon=horizon, batch=experiments, **initial, **true)
    sim.set_actions(forces)
    traj = sim.rollout()
    data = {f"observed_{k}": traj[k] + NOISE * rng.normal(size=traj[k].shape) for k in observed}
    data.update({f"initial_{k}": v for k, v in initial.items()}, forces=forces,
                **{f"true_{k}": v for k, v in true.items()})
    return data


def experiments_initial_state(system, rng, n):
    if system is tisim.systems.Cartpole:
        return dict(theta=np.pi + rng.normal(0, 0.5, n), theta_dot=rng.normal(0, 0.5, n), x=np.zeros(n))
    return dict(v=rng.uniform(1.0, 2.0, n))


def fit(system, path, guess, iterations=600, lr=0.05):
    """Load a recording and fit the parameters in ``guess``; returns (fitted, true) dicts."""
    data = np.load(path, allow_pickle=False)  # a recording is data: never unpickle
    forces = data["forces"]
    initial = {k[len("initial_"):]: data[k] for k in data.files if k.startswith("initial_")}
    observed = {k[len("observed_"):]: data[k] for k in data.files if k.startswith("observed_")}
    true = {k[len("true_"):]: float(data[k]) for k in data.files if k.startswith("true_")}
    sim = system(horizon=forces.shape[1], batch=forces.shape[0], **initial, **guess)
    sim.set_actions(forces)
    result = identify(sim, Tracking(observed), list(guess), iterations=iterations, optimizer=Adam(lr=lr))
    return {k: float(v) for k, v in result.values.items()}, true, result


def report(name, guess, fitted, true):
    print(f"{name}: {'parameter':>10} {'true':>9} {'initial':>9} {'fitted':>9} {'rel. error':>11}")
    for k in guess:
        print(f"{'':{len(name) + 1}} {k:>10} {true[k]:>9.4f} {guess[k]:>9.4f} {fitted[k]:>9.4f} "
              f"{fitted[k] / true[k] - 1:>+11.2e}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=(
        "System identification: fit a cart-pole's masses, pole length and track friction, and a sliding block's "
        "friction coefficient, to the noisy recordings in assets/data/, by gradient descent through the "
        "simulator. Prints true, initial and fitted values; writes sysid.json."))
    parser.add_argument("--record", action="store_true",
                        help="first re-make the recordings in assets/data/ from the true values")
    parser.add_argument("--iterations", type=int, default=600, help="Adam iterations per system (default 600)")
    parser.add_argument("--out", default="out", help="folder for sysid.json, the fitted figures (default out)")
    args = parser.parse_args(argv)
    cartpole, block = DATA / "cartpole_sysid.npz", DATA / "sliding_block_sysid.npz"
    if args.record:
        DATA.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(cartpole, **record(tisim.systems.Cartpole, CARTPOLE_TRUE, ("x", "theta"), 4, 100, 0))
        np.savez_compressed(block, **record(tisim.systems.SlidingBlock, BLOCK_TRUE, ("x",), 3, 600, 1))
    results = {}
    for name, system, path, guess in (("cart-pole", tisim.systems.Cartpole, cartpole, CARTPOLE_GUESS),
                                      ("sliding block", tisim.systems.SlidingBlock, block, BLOCK_GUESS)):
        fitted, true, result = fit(system, path, guess, iterations=args.iterations)
        report(name, guess, fitted, true)
        results[name] = dict(fitted=fitted, true=true, loss=result.loss, seconds=result.seconds)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sysid.json").write_text(json.dumps({name: {k: (float(v) if k in ("loss", "seconds") else v)
                                                       for k, v in r.items()} for name, r in results.items()},
                                               indent=2) + "\n")
    print(f"wrote {out / 'sysid.json'}")
    return results


if __name__ == "__main__":
    main()
