# Discretize-then-differentiate against differentiate-then-discretize.
#
# tisim's backward pass differentiates the discrete rollout exactly: the discrete adjoint. The continuous adjoint
# (method="continuous_adjoint") first writes the adjoint ODE of the system's equations of motion,
#     d lambda/dt = -(dF/dx)^T lambda,   dJ/dtheta = integral of (dF/dtheta)^T lambda dt,
# and only then integrates it (backward, with RK4). Both are approximations of the derivative of the continuous-time
# problem, so they disagree by O(dt); as dt halves, the gap should halve. This demo measures that gap for a driven,
# damped pendulum and a cart-pole over the same 2 s of motion, and checks forward mode, which must agree with the
# discrete adjoint to round-off at every dt.
#
# Command: python demos/adjoint_gap.py [--out out] [--finest 0.0025]
import argparse
import os
import time

import numpy as np

import tisim
from tisim.systems import Cartpole, Pendulum

SECONDS = 2.0
CASES = {
    "pendulum": (lambda T, dt: Pendulum(horizon=T, dt=dt, theta=0.3, c=0.1), lambda t: 0.5 * np.sin(3 * t),
                 tisim.losses.TerminalTarget({"theta": 0.5, "theta_dot": 0.0})),
    "cart-pole": (lambda T, dt: Cartpole(horizon=T, dt=dt, theta=3.0), lambda t: 2.0 * np.sin(2 * t),
                  tisim.losses.TerminalTarget({"x": 0.2, "theta": 0.0, "theta_dot": 0.0})),
}


def flat(gradient):
    return np.concatenate([v.ravel() for v in (*gradient.params.values(), *gradient.initial_state.values())])


def measure(make, drive, loss, dt):
    """Relative gaps of the continuous adjoint and of forward mode to the discrete gradient, and their times."""
    T = int(round(SECONDS / dt))
    sim = make(T, dt)
    sim.set_actions(drive(np.arange(T) * dt))
    row = {"dt": dt, "T": T}
    exact = flat(sim.gradient(loss))
    for method in ("unrolled", "continuous_adjoint", "forward_mode"):
        started = time.perf_counter()
        g = flat(sim.gradient(loss, method=method))
        row[method + " s"] = time.perf_counter() - started
        row[method] = np.abs(g - exact).max() / np.abs(exact).max()
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=(
        "The gap between the continuous adjoint (an ODE solved backward) and the discrete adjoint (the exact "
        "gradient of the discrete rollout) as dt shrinks. Writes adjoint_gap.png."))
    parser.add_argument("--out", default="out", help="folder for adjoint_gap.png (default out)")
    parser.add_argument("--finest", type=float, default=0.0025, help="smallest dt [s] (halving from 0.04)")
    args = parser.parse_args(argv)
    if not 0 < args.finest <= 0.04:
        parser.error(f"--finest must be in (0, 0.04] seconds, got {args.finest}")
    dts = [0.04]
    while dts[-1] / 2 >= args.finest * (1 - 1e-9):
        dts.append(dts[-1] / 2)
    results = {}
    for name, (make, drive, loss) in CASES.items():
        print(f"\n{name}: largest gap relative to the largest entry of the exact (discrete) gradient")
        print(f"{'dt [s]':>8} {'T':>6} {'cont. adjoint gap':>18} {'ratio':>6} {'forward-mode gap':>17} "
              f"{'unrolled s':>11} {'cont. adj. s':>12} {'fwd mode s':>11}")
        rows = []
        for dt in dts:
            row = measure(make, drive, loss, dt)
            # the gap's ratio to the previous (twice as large) dt's: about 2 for a first-order gap
            ratio = f"{rows[-1]['continuous_adjoint'] / row['continuous_adjoint']:>6.2f}" if rows else f"{'-':>6}"
            rows.append(row)
            print(f"{dt:>8.4g} {row['T']:>6} {row['continuous_adjoint']:>18.3e} {ratio} {row['forward_mode']:>17.1e} "
                  f"{row['unrolled s']:>11.4f} {row['continuous_adjoint s']:>12.3f} {row['forward_mode s']:>11.3f}",
                  flush=True)
        results[name] = rows
    plot(results, args.out)
    return results


def plot(results, folder):
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    fig, ax = plt.subplots(figsize=(8, 3.8), layout="constrained")
    for name, rows in results.items():
        dts = np.array([r["dt"] for r in rows])
        ax.loglog(dts, [r["continuous_adjoint"] for r in rows], "o-", label=f"{name}: continuous adjoint")
        ax.loglog(dts, [max(r["forward_mode"], 1e-17) for r in rows], "x:", label=f"{name}: forward mode")
    ax.loglog(dts, dts / dts[0] * rows[0]["continuous_adjoint"], "k--", lw=0.8, label="slope 1")
    ax.set_xlabel("dt [s]")
    ax.set_ylabel("gap to the discrete gradient (relative) [-]")
    ax.set_title("continuous adjoint and forward mode against the discrete gradient", fontsize=10)
    ax.xaxis.set_minor_formatter(NullFormatter())  # the minor ticks' labels ran into each other
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "adjoint_gap.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
