# How far does a change of theta reach? |dx_T/dtheta| against the horizon T.
#
# For x[t+1] = a x[t] + theta,  dx_T/dtheta = 1 + a + ... + a^(T-1) = (1 - a^T) / (1 - a):
#   a = 0.8 (contracting)  saturates at 1/(1 - a) = 5, the sensitivity of the fixed point theta/(1 - a);
#   a = 1.1 (amplifying)   grows like a^T.
# In both, dx_T/dtheta - 1/(1 - a) = -a^T / (1 - a): the log of that gap is a line of slope log a, and the fit
# of its tail recovers log a. For x[t+1] = A x[t] + B u[t] + theta in 2-D, with A a rotation scaled by rho
# (rho = 0.9 vs 1.05), the spectral radius rho plays the part of a; there the first row of dx_T/dtheta is shown.
#
# Every horizon comes from ONE rollout of length T_max and ONE backward pass of L = x_T[0]. The step is the same
# at every t, so lambda_{T-k} = dx_T/dx_{T-k} = A^k does not depend on T, and the sensitivity of a k-step run is
# the sum of the last k adjoints, lambda_{T-k+1} + ... + lambda_T.
#
# Command: python demos/sensitivity_growth.py [--out out] [--max-horizon 40]
import argparse
import os

import numpy as np
import taichi as ti

import tisim

SCALAR_A = (0.8, 1.1)  # coefficient a of ScalarLinear [-]
ROTATION_RHO, ROTATION_PHI = (0.9, 1.05), 0.3  # spectral radius [-] and rotation per step [rad] of the 2-D A


@ti.func
def first_final_state(x: ti.template(), theta: ti.template(), u: ti.template(), b, T):
    """L = x_T[0], so the adjoint is lambda_t = d x_T[0] / d x_t."""
    return x[b, T, 0]


def scaled_rotation(rho, phi):
    """rho times the rotation by phi: eigenvalues rho e^(+-i phi), shape (2, 2)."""
    return rho * np.array([[np.cos(phi), -np.sin(phi)], [np.sin(phi), np.cos(phi)]])


def sensitivity_series(sim, loss):
    """d x_k[0] / d theta for every horizon k = 1..T from one backward pass, shape (B, T, n)."""
    lam = sim.gradient(loss).adjoint["x"].reshape(sim.B, sim.T + 1, -1)  # lambda_t = d x_T[0] / d x_t
    return np.cumsum(lam[:, :0:-1], axis=1)  # add lambda_T, lambda_{T-1}, ..., lambda_1


def analyse(label, A, series, horizon):
    """Compare one series with its closed form, its limit row 0 of (I - A)^-1, and fit the rate of the gap."""
    A = np.atleast_2d(A)
    resolvent = np.linalg.inv(np.eye(len(A)) - A)[0]
    closed = np.array([resolvent @ (np.eye(len(A)) - np.linalg.matrix_power(A, T)) for T in horizon])
    gap = np.linalg.norm(series - resolvent, axis=1)  # = |row 0 of (I - A)^-1 A^T|, a geometric sequence
    tail = horizon >= horizon[-1] // 2
    radius = max(abs(np.linalg.eigvals(A)))
    return dict(label=label, radius=radius, series=np.linalg.norm(series, axis=1),
                closed_form=np.linalg.norm(closed, axis=1), limit=np.linalg.norm(resolvent), gap=gap,
                rate=np.polyfit(horizon[tail], np.log(gap[tail]), 1)[0], log_radius=np.log(radius))


def print_tables(horizon, cases):
    shown = [T for T in horizon if T <= 5 or T % 5 == 0 or T == horizon[-1]]
    print("|dx_T/dtheta| (2-D: first row), from the summed adjoints of one run")
    print(f"{'T':>4}" + "".join(f"{c['label']:>16}" for c in cases))
    for T in shown:
        print(f"{T:>4}" + "".join(f"{c['series'][T - 1]:>16.6g}" for c in cases))
    error = max(np.max(abs(c["series"] / c["closed_form"] - 1)) for c in cases)
    print(f"largest relative difference from the closed form |row 0 of (I - A)^-1 (I - A^T)|: {error:.1e}")
    print(f"\n{'system':<16}{'at T_max':>12}{'limit':>12}{'fitted rate':>14}{'log radius':>14}")
    for c in cases:
        limit = f"{c['limit']:.6g}" if c["radius"] < 1 else "none"
        print(f"{c['label']:<16}{c['series'][-1]:>12.6g}{limit:>12}{c['rate']:>14.6f}{c['log_radius']:>14.6f}")


def plot(horizon, cases, path):
    """Left: |dx_T/dtheta| against T (dotted: the limit of a contracting map); right: its distance from the steady
    state's sensitivity, whose slope is the log of the spectral radius. One legend, beside the panels."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(12, 4.4), layout="constrained")
    left, right = figure.subplots(1, 2)
    for c in cases:
        line, = left.semilogy(horizon, c["series"], "o-", markersize=3, label=c["label"])
        if c["radius"] < 1:
            left.axhline(c["limit"], color=line.get_color(), linestyle=":", linewidth=1)
        right.semilogy(horizon, c["gap"], "o-", markersize=3, color=line.get_color(),
                       label=f"{c['label']}: slope {c['rate']:.4f}")
    left.set_title("sensitivity: saturates (dotted: limit) or grows", fontsize=10)
    left.set_ylabel("|dx_T/dtheta| [-]")
    right.set_title("distance from the steady state's sensitivity\nx* = (I - A)^-1 theta; slope = log radius",
                    fontsize=10)
    right.set_ylabel("|dx_T/dtheta - dx*/dtheta| [-]")
    for ax in (left, right):
        ax.set_xlabel("horizon T [steps]")
        ax.grid(True, which="both", alpha=0.3)
    right.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, title="system")
    figure.savefig(path, dpi=110)
    return figure


def main(argv=None):
    parser = argparse.ArgumentParser(description=(
        "How the sensitivity |dx_T/dtheta| of linear maps grows with the horizon T: it saturates for contracting "
        "maps and grows at the rate log(spectral radius) for amplifying ones, checked against the closed form. "
        "Writes sensitivity_growth.png."))
    parser.add_argument("--out", default="out", help="folder for sensitivity_growth.png (default out)")
    parser.add_argument("--max-horizon", type=int, default=40, help="largest horizon T (default 40)")
    args = parser.parse_args(argv)
    if args.max_horizon < 4:
        parser.error(f"--max-horizon must be >= 4, got {args.max_horizon}")
    T_max = args.max_horizon
    horizon = np.arange(1, T_max + 1)
    loss = tisim.losses.Custom(first_final_state)

    scalar = tisim.systems.ScalarLinear(horizon=T_max, batch=len(SCALAR_A), a=np.array(SCALAR_A))
    rotations = np.stack([scaled_rotation(rho, ROTATION_PHI) for rho in ROTATION_RHO])
    planar = tisim.systems.Linear(horizon=T_max, batch=len(ROTATION_RHO), n=2, m=1, A=rotations)
    cases = [analyse(f"scalar a={a:g}", a, s, horizon)
             for a, s in zip(SCALAR_A, sensitivity_series(scalar, loss))]
    cases += [analyse(f"2-D rho={rho:g}", A, s, horizon)
              for rho, A, s in zip(ROTATION_RHO, rotations, sensitivity_series(planar, loss))]

    print_tables(horizon, cases)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "sensitivity_growth.png")
    plot(horizon, cases, path)
    print(f"\nwrote {path}")
    return dict(horizon=horizon, cases={c["label"]: c for c in cases}, png=path)


if __name__ == "__main__":
    main()
