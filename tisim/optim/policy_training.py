"""Training a closed-loop policy through the simulator: analytic policy gradients over short windows.

    Swing = tisim.policy.closed_loop(tisim.systems.Cartpole, hidden=(32, 32), limit=10.0, angles=("theta",))
    sim = Swing(horizon=32, batch=64, dt=1 / 60)          # a window of 32 steps, 64 environments
    result = tisim.tasks.train_policy(sim, cost, reset, episode_steps=240, iterations=300)

Each iteration runs one window of sim.T steps in every environment, from where its episode stands, and takes one
optimizer step on the policy's weights along the gradient of the window's loss, averaged over the environments: the
analytic policy gradient, one backward pass through the physics and the network together. Truncating the gradient at
the window (rather than back-propagating through whole episodes) is how SHAC (Xu et al. 2022) keeps it well
conditioned; SHAC adds a learned critic for what lies beyond the window, which this loop does not have: its policy
optimizes what the window's loss sees. The window's last states start the next window; every episode_steps steps all
environments start again from ``reset(rng, B)``.

Gradients exploding through long chains of contact or chaotic steps are the known failure of this method: the
gradient's norm is clipped (clip=, 1 by default, SHAC's setting), and a non-finite loss or gradient rejects the step
and halves the learning rate (as in ``tisim.optim.minimize``, which runs the loop: progress bar, callback and resumable
snapshots come from there).
"""
import numpy as np

from tisim.core.trajectory import download
from tisim.optim.optimizers import Adam, minimize


def train_policy(sim, loss, reset, *, episode_steps, iterations=100, optimizer=None, clip=1.0, seed=0, callback=None,
                 **options):
    """Train the policy of ``sim`` (a closed-loop simulator, ``tisim.policy.closed_loop``) to minimize ``loss``.

    sim: its horizon is the window, its batch the number of environments run side by side.
    loss: a tisim loss over the window (``tisim.losses.Custom(cost, steps=range(1, T + 1))`` for a running cost).
    reset(rng, batch): initial states {state name: array (batch,)} for new episodes, drawn with the numpy
        Generator rng (seeded by ``seed``).
    episode_steps: the length of an episode, a multiple of the window.
    optimizer: Adam(lr=1e-3) by default. clip: the largest gradient norm (None: no clipping). Other options go to
    ``minimize`` (progress, snapshot, snapshot_every).
    callback(iteration, weights, loss): called after every step; returning True stops the run.
    The final weights are left set on ``sim``; the ``Result`` has them as values["w_policy"] and each iteration's
    window loss (mean over environments) in its history.
    """
    if getattr(type(sim), "OPEN_LOOP", None) is None:
        raise TypeError(f"train_policy: sim must be a closed-loop simulator (tisim.policy.closed_loop), got "
                        f"{type(sim).__name__}")
    if isinstance(episode_steps, bool) or not isinstance(episode_steps, (int, np.integer)) or \
            episode_steps < sim.T or episode_steps % sim.T:
        raise ValueError(f"train_policy: episode_steps must be a multiple of the window (sim's horizon, {sim.T}), "
                         f"got {episode_steps!r}")
    if not callable(reset):
        raise TypeError(f"train_policy: reset must be a function (rng, batch) -> {{state: array}}, got {reset!r}")
    rng = np.random.default_rng(seed)
    windows = int(episode_steps) // sim.T
    clock = {"window": 0, "states": None, "weights": None}

    def objective(values):
        if clock["window"] % windows == 0:
            clock["states"] = reset(rng, sim.B)
        sim.set_initial_state(**clock["states"])
        sim.set_params(w_policy=values["w_policy"])
        g = sim.gradient(loss)
        states = sim.state_layout.unpack(download(sim.x))
        clock["states"] = {name: value[:, -1] for name, value in states.items()}
        clock["window"] += 1
        return g.value / sim.B, {"w_policy": g.params["w_policy"].mean(axis=0)}

    def follow(iteration, values, value):
        clock["weights"] = values["w_policy"]
        return bool(callback and callback(iteration, values["w_policy"], value))

    start = np.array(sim.params["w_policy"][0])
    result = minimize(objective, {"w_policy": start}, optimizer=optimizer or Adam(lr=1e-3), iterations=iterations,
                      clip=clip, callback=follow, description="training the policy",
                      problem={"system": type(sim).__name__, "window": sim.T, "batch": sim.B,
                               "episode_steps": int(episode_steps), "seed": seed}, **options)
    final = start if clock["weights"] is None else clock["weights"]
    sim.set_params(w_policy=final)
    result.values = {"w_policy": np.array(final)}
    return result
