# Learning what the physics leaves out: a pendulum whose real motion has quadratic air drag, which the model lacks.
#
# "Reality" is a pendulum with linear damping c and air drag -k w|w| (simulated here in numpy). Eight recorded swings
# (angle and angular velocity, 3 s each, from different starts) train three models, and eight other swings test them
# by multi-step prediction from their initial states alone:
#   physics only         tisim's Pendulum, fitting l and c (it has no drag term to fit)
#   physics + residual   ResidualPendulum: the same physics plus a small network's angular acceleration, all fitted
#                        together through rollouts (one backward pass gives dL/dl, dL/dc and dL/dweights)
#   pure network         no physics: x' = x + dt N(x), a network trained on one-step differences (PyTorch)
# Prints the held-out RMS angle error of each and writes out/residual_learning.png.
#
# Command: python demos/residual_learning.py [--iterations 400] [--out out]
import argparse
import pathlib
import time

import numpy as np

import tisim
from tisim.losses import Tracking
from tisim.optim import Adam
from tisim.tasks import identify

TRUE = dict(g=9.8, l=1.0, m=1.0, c=0.1)
DRAG = 0.3  # [1/rad] quadratic air drag of reality
DT, HORIZON, SWINGS = 0.01, 300, 8
GUESS = dict(l=0.8, c=0.05)


def reality(theta0, omega0):
    """(B, T+1) angle and angular velocity of the real pendulum (semi-implicit Euler, as tisim steps)."""
    q, w = np.array(theta0, float), np.array(omega0, float)
    qs, ws = [q], [w]
    for _ in range(HORIZON):
        alpha = -TRUE["g"] / TRUE["l"] * np.sin(q) - TRUE["c"] * w / (TRUE["m"] * TRUE["l"] ** 2) - DRAG * w * np.abs(w)
        w = w + DT * alpha
        q = q + DT * w
        qs.append(q)
        ws.append(w)
    return np.stack(qs, axis=1), np.stack(ws, axis=1)


def starts(seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(-2.5, 2.5, SWINGS), rng.uniform(-2.0, 2.0, SWINGS)


def fit(system, names, data, initial, iterations, **extra):
    sim = system(horizon=HORIZON, batch=SWINGS, dt=DT, theta=initial[0], theta_dot=initial[1], **GUESS, **extra)
    result = identify(sim, Tracking(data), names, iterations=iterations, optimizer=Adam(lr=0.02))
    return sim, result


def predict(sim, initial):
    """The fitted model's prediction of held-out swings from their initial states alone."""
    sim.set_initial_state(theta=initial[0], theta_dot=initial[1])
    return sim.rollout()["theta"]


def pure_network(data, initial, iterations, seed=0):
    """x' = x + dt N(sin q, cos q, w) with N trained on one-step differences; returns held-out predictions."""
    import torch

    torch.manual_seed(seed)
    q, w = data["theta"], data["theta_dot"]
    features = np.stack([np.sin(q[:, :-1]), np.cos(q[:, :-1]), w[:, :-1]], axis=-1).reshape(-1, 3)
    rates = np.stack([np.diff(q, axis=1), np.diff(w, axis=1)], axis=-1).reshape(-1, 2) / DT
    net = torch.nn.Sequential(torch.nn.Linear(3, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2)).double()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    inputs, targets = torch.tensor(features), torch.tensor(rates)
    for _ in range(iterations * 5):
        optimizer.zero_grad()
        loss = ((net(inputs) - targets) ** 2).mean()
        loss.backward()
        optimizer.step()
    q, w = np.array(initial[0], float), np.array(initial[1], float)
    out = [q]
    with torch.no_grad():
        for _ in range(HORIZON):
            rate = net(torch.tensor(np.stack([np.sin(q), np.cos(q), w], axis=-1))).numpy()
            q, w = q + DT * rate[:, 0], w + DT * rate[:, 1]
            out.append(q)
    return np.stack(out, axis=1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=(
        "Model a damped pendulum with a force the physics model lacks three ways: physics only, physics plus a "
        "small residual network inside the step, and a pure network; all fitted to one recorded swing and judged "
        "on another. Writes residual_learning.png (the held-out swing and each model's error)."))
    parser.add_argument("--iterations", type=int, default=400, help="Adam iterations per model (default 400)")
    parser.add_argument("--out", default="out", help="folder for residual_learning.png (default out)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    train, test = starts(1), starts(2)
    q, w = reality(*train)
    data = {"theta": q, "theta_dot": w}
    truth = reality(*test)[0]
    physics, _ = fit(tisim.systems.Pendulum, ["l", "c"], data, train, args.iterations)
    hybrid, _ = fit(tisim.systems.ResidualPendulum, ["l", "c", "w_residual"], data, train, args.iterations, hidden=16)
    predictions = {"physics only": predict(physics, test), "physics + residual": predict(hybrid, test)}
    try:
        predictions["pure network"] = pure_network(data, test, args.iterations)
    except ImportError:
        print("pure network: skipped (needs PyTorch: pip install tisim[torch])")
    errors = {name: float(np.sqrt(np.mean((p - truth) ** 2))) for name, p in predictions.items()}
    for name, error in errors.items():
        print(f"{name:>20}: held-out RMS angle error over {HORIZON * DT:.0f} s = {error:.4f} rad")
    print(f"fitted l: physics {physics.params['l'][0]:.3f}, with residual {hybrid.params['l'][0]:.3f} (true "
          f"{TRUE['l']}); training took {time.perf_counter() - started:.1f} s")
    path = pathlib.Path(args.out) / "residual_learning.png"
    plot(truth, predictions, errors, path)
    print(f"wrote {path}")
    return dict(errors=errors, seconds=time.perf_counter() - started, png=path)


def plot(truth, predictions, errors, path):
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 3.8), layout="constrained")
    swing, bars = figure.subplots(1, 2, gridspec_kw={"width_ratios": [3, 1]})
    t = np.arange(truth.shape[1]) * DT
    swing.plot(t, truth[0], "k", lw=2, label="reality")
    for name, p in predictions.items():
        swing.plot(t, p[0], label=name)
    swing.set(xlabel="t [s]", ylabel="theta [rad]", title="a held-out swing: reality and each fitted model")
    swing.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    bars.bar(range(len(errors)), list(errors.values()))
    bars.set_xticks(range(len(errors)), [n.replace(" ", "\n") for n in errors], fontsize=7)
    bars.set(ylabel="held-out RMS error [rad]", xlabel="model", title="error")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
