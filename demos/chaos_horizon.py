# Chaos and the horizon: ||dx_T/dx_0|| against T for the double pendulum and the single pendulum.
#
# The DoublePendulum (unit masses and rods, dt = 1 ms) released at rest from theta1 = theta2 = 2.0 rad is chaotic:
# nearby initial states separate like e^(lambda t), lambda the largest Lyapunov exponent [1/s], and so does the largest
# singular value of the Jacobian dx_T/dx_0 (the norm below; x mixes rad and rad/s). The single Pendulum (same dt,
# theta = 2.0 rad) is integrable: its period depends on its amplitude, so nearby states only drift apart in phase,
# ||dx_T/dx_0|| ~ t. Fits over the growth region t >= T_max / 4: the slope of log ||dx_T/dx_0|| against t estimates
# lambda (it tends to 0 for polynomial growth), and the slope of log ||.|| against log t is the power of a polynomial.
#
# Every horizon comes from ONE batched rollout of length T_max and ONE backward pass per system: batch element
# b = i n + k (horizon i, state k of n) has the loss x_k at step T_i (rows_at_horizons), so its adjoint at t = 0 is
# row k of dx_{T_i}/dx_0. The demo checks the longest horizon against tisim's jacobian(wrt="initial_state").
#
# Command: python demos/chaos_horizon.py [--out out] [--seconds 20] [--horizons 40] [--short]
import argparse
import os
import time

import numpy as np
import taichi as ti

import tisim
from tisim.systems import DoublePendulum, Pendulum

DT = 1e-3  # time step of both systems [s]
SYSTEMS = {"double pendulum": (DoublePendulum, dict(theta1=2.0, theta2=2.0)), "pendulum": (Pendulum, dict(theta=2.0))}


@ti.func
def rows_at_horizons(x: ti.template(), theta: ti.template(), u: ti.template(), b, t):
    """x_k at step T_i for element b = i n + k: n states, horizons T_i = (i + 1) T_max / (B / n)."""
    n = x.shape[2]
    stride = (x.shape[1] - 1) // (x.shape[0] // n)
    hit = 1.0 if t == (b // n + 1) * stride else 0.0
    return hit * x[b, t, b % n]


def jacobians(cls, initial, steps):
    """dx_T/dx_0 for T in steps = stride, 2 stride, ..., T_max (as rows_at_horizons expects), shape (len(steps), n, n),
    from one batched rollout and one backward pass."""
    n = len(cls.STATE)
    sim = cls(horizon=int(steps[-1]), batch=len(steps) * n, dt=DT, **initial)
    g = sim.gradient(tisim.losses.Custom(rows_at_horizons, steps=steps))
    return np.stack([g.initial_state[q.name] for q in cls.STATE], axis=1).reshape(len(steps), n, n)


def fit(seconds, norm):
    """Exponential rate [1/s] and polynomial power [-] of the norm over t >= T_max / 4; returns (rate, power, mask)."""
    grow = seconds >= seconds[-1] / 4
    rate = np.polyfit(seconds[grow], np.log(norm[grow]), 1)[0]
    power = np.polyfit(np.log(seconds[grow]), np.log(norm[grow]), 1)[0]
    return rate, power, grow


def print_table(steps, seconds, cases, rows=20):
    print(f"||dx_T/dx_0||_2 (largest singular value), dt = {DT:g} s")
    print(f"{'T':>7} {'t [s]':>7}" + "".join(f"{name:>18}" for name in cases))
    every = -(-len(steps) // rows)  # rows counted back from the last horizon
    for i in range(len(steps) - 1, -1, -every)[::-1]:
        print(f"{steps[i]:>7d} {seconds[i]:>7.2f}" + "".join(f"{c['norm'][i]:>18.6g}" for c in cases.values()))
    print(f"\nfit over t >= {seconds[-1] / 4:g} s{'':14}{'rate [1/s]':>12}{'power':>8}")
    for name, c in cases.items():
        print(f"{name:<33}{c['rate']:>12.4f}{c['power']:>8.2f}")


def plot(seconds, cases, path):
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullFormatter

    figure = Figure(figsize=(11, 4.4), layout="constrained")
    exp_axes, power_axes = figure.subplots(1, 2)
    for name, c in cases.items():
        t = seconds[c["grow"]]
        line, = exp_axes.semilogy(seconds, c["norm"], "o-", ms=3, label=name)
        exp_axes.semilogy(t, np.exp(np.polyval(np.polyfit(t, np.log(c["norm"][c["grow"]]), 1), t)), "--",
                          color=line.get_color(), label=f"fit: lambda = {c['rate']:.3f} 1/s")
        power_axes.loglog(seconds, c["norm"], "o-", ms=3, color=line.get_color(), label=name)
        power_axes.loglog(t, np.exp(np.polyval(np.polyfit(np.log(t), np.log(c["norm"][c["grow"]]), 1), np.log(t))),
                          "--", color=line.get_color(), label=f"fit: ~ t^{c['power']:.2f}")
    exp_axes.set(title="exponential growth: a line here (slope = lambda)", ylabel="||dx_T/dx_0||_2")
    power_axes.set(title="polynomial growth: a line here (slope = power)", ylabel="||dx_T/dx_0||_2")
    power_axes.xaxis.set_minor_formatter(NullFormatter())  # the minor ticks' labels ran into each other
    for ax in (exp_axes, power_axes):
        ax.set(xlabel="horizon T dt [s]")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")  # the curves start low on the left
    figure.savefig(path, dpi=110)


def main(argv=None):
    parser = argparse.ArgumentParser(description=(
        "How a gradient grows with the horizon: ||dx_T/dx_0|| against T for a chaotic double pendulum "
        "(exponential) and a regular pendulum (polynomial). Writes chaos_horizon.png."))
    parser.add_argument("--out", default="out", help="folder for chaos_horizon.png (default out)")
    parser.add_argument("--seconds", type=float, help="longest horizon [s] (default 20; 6 with --short)")
    parser.add_argument("--horizons", type=int, help="number of evenly spaced horizons (default 40; 12 with --short)")
    parser.add_argument("--short", action="store_true", help="tiny sizes, for tests")
    args = parser.parse_args(argv)
    seconds_max, count = args.seconds or (6.0 if args.short else 20.0), args.horizons or (12 if args.short else 40)
    stride = int(round(seconds_max / DT / count)) if count > 0 else 0
    if count < 4 or stride < 1:
        parser.error(f"need --horizons >= 4 and --seconds >= horizons * dt; got {count}, {seconds_max}")
    steps = stride * np.arange(1, count + 1)
    seconds = steps * DT

    start, cases = time.perf_counter(), {}
    for name, (cls, initial) in SYSTEMS.items():
        J = jacobians(cls, initial, steps)
        norm = np.linalg.norm(J, ord=2, axis=(1, 2))
        rate, power, grow = fit(seconds, norm)
        cases[name] = dict(jacobian=J, norm=norm, rate=rate, power=power, grow=grow, initial=initial)
    print_table(steps, seconds, cases)
    name, (cls, initial) = next(iter(SYSTEMS.items()))
    check = cls(horizon=int(steps[-1]), dt=DT, **initial).jacobian(wrt="initial_state").matrix[0]
    error = np.max(np.abs(check - cases[name]["jacobian"][-1])) / np.max(np.abs(check))
    print(f"\ncheck: the batched rows at T = {steps[-1]} equal {name} jacobian(wrt='initial_state') to {error:.1e}")
    chaotic, regular = cases["double pendulum"], cases["pendulum"]
    print(f"the double pendulum's sensitivity e-folds every {1 / chaotic['rate']:.3g} s (lambda = "
          f"{chaotic['rate']:.3g} 1/s), {chaotic['rate'] / regular['rate']:.3g}x the pendulum's fitted rate; the "
          f"pendulum's growth is a power, ~ t^{regular['power']:.2f}")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "chaos_horizon.png")
    plot(seconds, cases, path)
    print(f"wrote {path} ({time.perf_counter() - start:.1f} s)")
    return dict(steps=steps, seconds=seconds, dt=DT, cases=cases, jacobian_check=error, png=path)


if __name__ == "__main__":
    main()
