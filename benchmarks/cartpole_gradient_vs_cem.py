# What the gradient is worth: the cart-pole swing-up of demos/cartpole_opt.py solved by gradient descent through the
# simulator and by the cross-entropy method (CEM, gradient-free, the population run as one batch), at equal numbers
# of rollouts. Both minimize the same loss (the demo's, with the heavy landing cost); reported: the best loss
# reached after each share of the budget, the final state of the best sequence, and wall time.
#
# Command: python benchmarks/cartpole_gradient_vs_cem.py [--rollouts 9600] [--out out]
import argparse
import importlib.util
import pathlib
import time

import numpy as np

import tisim

ROOT = pathlib.Path(__file__).resolve().parent.parent


def demo():
    spec = importlib.util.spec_from_file_location("cartpole_opt", ROOT / "demos" / "cartpole_opt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gradient_run(d, rollouts, batch=8, seed=0):
    """The demo's two-stage Adam, batch starts at once; a rollout+backward counts as one rollout per element."""
    sim = tisim.systems.Cartpole(horizon=d.HORIZON, batch=batch, theta=np.pi)
    iterations = rollouts // batch
    first = int(iterations * 2 / 3)
    started = time.perf_counter()
    d.swing_up(sim, seed, iterations=(first, iterations - first))
    seconds = time.perf_counter() - started
    final = sim.evaluate(d.swing_up_loss(sim, 100.0))
    best = int(np.argmin(final))
    return dict(loss=float(final[best]), seconds=seconds, state=d.summary(sim.rollout(), best))


def cem_run(d, rollouts, population=64, elites=8, seed=0):
    """CEM over the force sequence: sample, keep the best elites, refit mean and spread."""
    sim = tisim.systems.Cartpole(horizon=d.HORIZON, batch=population, theta=np.pi)
    loss = d.swing_up_loss(sim, 100.0)
    rng = np.random.default_rng(seed)
    mean, spread = np.zeros(sim.T), np.full(sim.T, 0.5 * d.FORCE_LIMIT)
    best_loss, best_actions = np.inf, None
    started = time.perf_counter()
    for _ in range(rollouts // population):
        samples = np.clip(mean + spread * rng.normal(size=(population, sim.T)), -d.FORCE_LIMIT, d.FORCE_LIMIT)
        sim.set_actions(samples)
        values = sim.evaluate(loss)
        order = np.argsort(values)
        if values[order[0]] < best_loss:
            best_loss, best_actions = float(values[order[0]]), samples[order[0]].copy()
        chosen = samples[order[:elites]]
        mean = 0.8 * chosen.mean(axis=0) + 0.2 * mean
        spread = 0.8 * chosen.std(axis=0) + 0.2 * spread + 1e-3
    seconds = time.perf_counter() - started
    one = tisim.systems.Cartpole(horizon=d.HORIZON, theta=np.pi)
    one.set_actions(best_actions)
    return dict(loss=best_loss, seconds=seconds, state=d.summary(one.rollout(), 0))


def main(argv=None):
    parser = argparse.ArgumentParser(description="Gradient descent vs CEM on the cart-pole swing-up.")
    parser.add_argument("--rollouts", type=int, default=9600, help="the budget of rollouts for each method")
    parser.add_argument("--out", default="out")
    args = parser.parse_args(argv)
    tisim.init()
    d = demo()
    lines = ["| method | rollouts | best loss | final angle [rad] | final omega [rad/s] | swung up | seconds |",
             "|---|---|---|---|---|---|---|"]
    for budget in (args.rollouts // 4, args.rollouts):
        for name, run in (("gradient (Adam)", gradient_run), ("CEM", cem_run)):
            r = run(d, budget)
            s = r["state"]
            lines.append(f"| {name} | {budget} | {r['loss']:.2f} | {s['angle']:+.3f} | {s['angular_velocity']:+.3f} "
                         f"| {'yes' if d.succeeded(s) else 'no'} | {r['seconds']:.1f} |")
    table = "\n".join(lines)
    print(table)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cartpole_gradient_vs_cem.md").write_text(table + "\n")
    return table


if __name__ == "__main__":
    main()
