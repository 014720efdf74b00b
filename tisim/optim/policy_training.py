"""Training a closed-loop policy through the simulator: analytic policy gradients over short windows.

    Swing = tisim.policy.closed_loop(tisim.systems.Cartpole, hidden=(16,), limit=10.0, angles=("theta",))
    sim = Swing(horizon=80, batch=16, dt=1 / 60)          # a window of 80 steps, 16 environments
    result = tisim.tasks.train_policy(sim, loss, reset, episode_steps=240, iterations=800)

Each iteration runs one window of sim.T steps in every environment, from where its episode stands, and takes one
optimizer step on the policy's weights along the gradient of the window's loss, averaged over the environments: the
analytic policy gradient, one backward pass through the physics and the network together. The window's last states
start the next window; every episode_steps steps all environments start again from ``reset(rng, B)``.

Truncating the gradient at the window, rather than back-propagating through whole episodes, keeps it well
conditioned: gradients through long chains of unstable, chaotic or contact-rich steps grow with the horizon. Without
a critic the policy optimizes only what the window's loss sees, so the window must be long enough for progress to
show in it. With ``critic=Critic(...)`` (tisim/optim/critic.py) the loop is SHAC (Xu et al. 2022): the window's loss
is completed by a learned value of the state it ends in, fitted after every window, and shorter windows learn.

The gradient's norm is clipped (clip=, 1 by default, SHAC's setting), and a non-finite loss or gradient rejects the
step and halves the learning rate (as in ``tisim.optim.minimize``, which runs the loop: progress bar, callback and
resumable snapshots come from there; a resumed run restarts the episodes and, with a critic, the critic).
"""
import numpy as np

from tisim.core.trajectory import download
from tisim.optim.optimizers import Adam, minimize


class Episodes:
    """The environments' clock: where each window starts. Every episode_steps steps (a multiple of the window) the
    episodes start again from reset(rng, B); in between, a window starts where the last one ended."""

    def __init__(self, owner, sim, reset, episode_steps, seed):
        if isinstance(episode_steps, bool) or not isinstance(episode_steps, (int, np.integer)) or \
                episode_steps < sim.T or episode_steps % sim.T:
            raise ValueError(f"{owner}: episode_steps must be a multiple of the window (sim's horizon, {sim.T}), "
                             f"got {episode_steps!r}")
        if not callable(reset):
            raise TypeError(f"{owner}: reset must be a function (rng, batch) -> {{state: array}}, got {reset!r}")
        self.reset, self.batch, self.rng = reset, sim.B, np.random.default_rng(seed)
        self.windows, self.window, self.states = int(episode_steps) // sim.T, 0, None

    def start(self):
        """The states the next window starts from."""
        if self.window % self.windows == 0:
            self.states = self.reset(self.rng, self.batch)
        return self.states

    def ended(self, states):
        """Record where the window ended: states {name: (B, T + 1, ...)}."""
        self.states = {name: array[:, -1] for name, array in states.items()}
        self.window += 1


def train_policy(sim, loss, reset, *, episode_steps, iterations=100, optimizer=None, clip=1.0, critic=None, seed=0,
                 callback=None, **options):
    """Train the policy of ``sim`` (a closed-loop simulator, ``tisim.policy.closed_loop``) to minimize ``loss``.

    sim: its horizon is the window, its batch the number of environments run side by side.
    loss: a tisim loss over the window (``tisim.losses.Custom(cost, steps=range(1, T + 1))`` for a running cost).
    reset(rng, batch): initial states {state name: array (batch,)} for new episodes, drawn with the numpy
        Generator rng (seeded by ``seed``).
    episode_steps: the length of an episode, a multiple of the window.
    optimizer: Adam(lr=1e-3) by default. clip: the largest gradient norm (None: no clipping).
    critic: a ``tisim.optim.critic.Critic``: SHAC, the window's loss plus gamma^T V(x[T]) / T, V fitted after every
        window (the loss should then discount its steps by the critic's gamma, as that module says).
    callback(iteration, weights, loss): called after every step; returning True stops the run.
    Other options go to ``minimize`` (progress, snapshot, snapshot_every).
    The final weights are left set on ``sim``; the ``Result`` has them as values["w_policy"] and each iteration's
    window loss (mean over environments, with the critic's bootstrap when there is one) in its history.
    """
    if getattr(type(sim), "OPEN_LOOP", None) is None:
        raise TypeError(f"train_policy: sim must be a closed-loop simulator (tisim.policy.closed_loop), got "
                        f"{type(sim).__name__}")
    episodes = Episodes("train_policy", sim, reset, episode_steps, seed)
    if critic is not None:
        from tisim.optim.critic import Critic

        if not isinstance(critic, Critic):
            raise TypeError(f"train_policy: critic must be a tisim.optim.critic.Critic or None, got {critic!r}")
        critic.attach(sim.model.policy)
    clock = {"weights": None}

    def objective(values):
        sim.set_initial_state(**episodes.start())
        sim.set_params(w_policy=values["w_policy"])
        if critic is None:
            g = sim.gradient(loss)
            value = g.value / sim.B
            states = sim.state_layout.unpack(download(sim.x))
        else:
            value, g, states = _bootstrapped(sim, loss, critic)
        episodes.ended(states)
        return value, {"w_policy": g.params["w_policy"].mean(axis=0)}

    def follow(iteration, values, value):
        clock["weights"] = values["w_policy"]
        return bool(callback and callback(iteration, values["w_policy"], value))

    start = np.array(sim.params["w_policy"][0])
    result = minimize(objective, {"w_policy": start}, optimizer=optimizer or Adam(lr=1e-3), iterations=iterations,
                      clip=clip, callback=follow, description="training the policy",
                      problem={"system": type(sim).__name__, "window": sim.T, "batch": sim.B,
                               "episode_steps": int(episode_steps), "seed": seed, "critic": critic is not None},
                      **options)
    final = start if clock["weights"] is None else clock["weights"]
    sim.set_params(w_policy=final)
    result.values = {"w_policy": np.array(final)}
    return result


def _bootstrapped(sim, loss, critic):
    """The window's loss plus gamma^T V(x[T]) / T: (its mean over the batch, the gradient, the window's states); the
    critic is fitted to the window afterwards. The bootstrap's gradient with respect to x[T] enters the backward pass
    as a quadratic term whose slope at x[T] is that gradient: the same gradient, from a loss the engine has."""
    from tisim.core.losses import TerminalTarget

    states = sim.rollout()
    last = {name: array[:, -1] for name, array in states.items()}
    mean, scale = sim.params["obs_mean"][0], sim.params["obs_scale"][0]
    values, slopes = critic.value_gradient(last, mean, scale)
    factor = critic.gamma ** sim.T / sim.T
    half = {name: 0.5 * factor * slope for name, slope in slopes.items()}
    g = sim.gradient(loss + TerminalTarget({name: last[name] - half[name] for name in last}))
    quadratic = sum(np.sum(h.reshape(sim.B, -1) ** 2, axis=1) for h in half.values())
    window = g.per_batch - quadratic + factor * values
    critic.fit(states, mean, scale)
    return float(window.mean()), g, states


def train_policy_and_model(sim, plant, loss, reset, names, *, episode_steps, iterations=100, optimizer=None,
                           clip=1.0, seed=0, callback=None, **options):
    """Train the policy of ``sim`` on ``sim`` while fitting its parameters ``names`` to what ``plant`` does, in one
    loop: the model is identified from the data the policy collects while the policy learns on the model.

    plant: the system the policy is meant for, standing in for hardware: a simulator of sim's closed-loop class whose
        parameters differ from the model's (the loop never reads them). Each iteration runs the current policy on it
        for one window, from where its episodes stand, and records the states.
    Then the model replays that window, from the same states with the same policy, and the parameters ``names`` step
    along the gradient of the tracking error against the recording (in log space: they must be > 0); the policy
    steps along the gradient of ``loss`` over that window on the model. Both are one backward pass each, and one
    optimizer (Adam(lr=1e-3) by default) takes both steps. clip, seed, callback(iteration, weights, loss) and the other
    options are as in ``train_policy``. The final weights and parameters are left set on ``sim``; the ``Result`` has
    them in values, and in its history each iteration's window loss on the model.
    """
    from tisim.core.losses import Tracking

    if getattr(type(sim), "OPEN_LOOP", None) is None or type(plant) is not type(sim) or plant.T != sim.T or \
            plant.B != sim.B:
        raise TypeError("train_policy_and_model: sim and plant must be closed-loop simulators (tisim.policy."
                        "closed_loop) of one class, horizon and batch")
    if isinstance(names, str) or not names or any(n not in sim.param_layout.names for n in names) or \
            any(n in ("w_policy", "obs_mean", "obs_scale") for n in names):
        raise ValueError(f"train_policy_and_model: names must be a list of the model's physical parameters, among "
                         f"{[n for n in sim.param_layout.names if n not in ('w_policy', 'obs_mean', 'obs_scale')]}, "
                         f"got {names!r}")
    episodes = Episodes("train_policy_and_model", sim, reset, episode_steps, seed)
    clock = {"values": None}

    def objective(values):
        first = episodes.start()
        for simulator in (plant, sim):
            simulator.set_initial_state(**first)
            simulator.set_params(w_policy=values["w_policy"])
        sim.set_params(**{name: values[name] for name in names})
        recorded = plant.rollout()
        fit = sim.gradient(Tracking(recorded))
        g = sim.gradient(loss)
        episodes.ended(recorded)
        return g.value / sim.B, {"w_policy": g.params["w_policy"].mean(axis=0),
                                 **{name: fit.params[name].sum(axis=0) for name in names}}

    def follow(iteration, values, value):
        clock["values"] = values
        return bool(callback and callback(iteration, values["w_policy"], value))

    start = {"w_policy": np.array(sim.params["w_policy"][0]), **{name: np.array(sim.params[name][0]) for name in names}}
    result = minimize(objective, start, optimizer=optimizer or Adam(lr=1e-3), iterations=iterations, clip=clip,
                      log_space=tuple(names), callback=follow, description="training the policy and the model",
                      problem={"system": type(sim).__name__, "window": sim.T, "batch": sim.B, "names": list(names),
                               "episode_steps": int(episode_steps), "seed": seed}, **options)
    final = start if clock["values"] is None else clock["values"]
    sim.set_params(**final)
    result.values = {name: np.array(value) for name, value in final.items()}
    return result
