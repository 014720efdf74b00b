"""The Gymnasium environment over a tisim simulator: one env step is one short rollout of ``SUBSTEPS`` simulator steps.

A subclass describes a task, every function of it working on n environments at once so that the single environment
(n = 1) and the vector environment (tisim/envs/vector.py, n = num_envs) share it:
    SYSTEM, DT, SUBSTEPS, EPISODE_STEPS     the simulator class, the env step [s], simulator steps per env step, the
                                            default episode length (then truncated)
    action_space, observation_space         per environment (float64, as tisim computes)
    initial_state(rng)                      {state name: float or array} of one environment after a reset
    effort(action)                          actions (n, A) in the action space -> the simulator's actions (n, ...)
    observe(state)                          {state name: (n, ...)} -> observations (n, O)
    reward(before, after, action)           states before and after the step, actions (n, A) -> rewards (n,)
    terminated(state)                       {state name: (n, ...)} -> (n,) bool: the episode ended (never, unless
                                            a task says otherwise)
    draw(state)                             {state name: float or array} -> picture (H, W, 3) uint8

The simulator is made once (horizon SUBSTEPS, batch n, time step DT / SUBSTEPS) and reused: each step sets its
initial state and actions and runs one rollout, so no step compiles anything after the first.
"""
import math

import gymnasium
import numpy as np
from gymnasium import spaces

RENDER_MODES = ("rgb_array",)


def positive_integer(owner, name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{owner}: {name} must be an integer >= 1, got {value!r}")
    return int(value)


def positive_number(owner, name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{owner}: {name} must be a finite number > 0, got {value!r}")
    return float(value)


def wrap_angle(angle):
    """The angle in (-pi, pi], elementwise."""
    wrapped = np.mod(angle + np.pi, 2 * np.pi) - np.pi
    return np.where(wrapped == -np.pi, np.pi, wrapped)


def advance(sim, state, effort):
    """One env step of n environments: x[0] = state {name: (n, ...)}, the same effort (n, ...) for all of the
    simulator's steps; returns x[T] {name: (n, ...)}."""
    sim.set_initial_state(**state)
    sim.set_actions(np.repeat(np.asarray(effort)[:, None], sim.T, axis=1))
    return {name: states[:, -1].copy() for name, states in sim.rollout().items()}


def one(state, i):
    """Environment i's entries of a state {name: (n, ...)}: floats, or arrays for a state with several numbers."""
    return {k: float(v[i]) if np.ndim(v) == 1 else np.array(v[i]) for k, v in state.items()}


class SimulatedEnv(gymnasium.Env):
    """Base class of tisim's environments (see the module docstring); not an environment by itself."""

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": None}  # a task sets render_fps = 1 / DT
    SYSTEM = None
    DT = None
    SUBSTEPS = 1
    EPISODE_STEPS = None
    PICTURE_SIZE = (320, 240)  # width, height [pixels]

    def __init__(self, render_mode=None, *, episode_steps=None):
        name = type(self).__name__
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(f"{name}: render_mode must be None or one of {list(RENDER_MODES)}, got {render_mode!r}")
        self.render_mode = render_mode
        self.episode_steps = positive_integer(name, "episode_steps",
                                              self.EPISODE_STEPS if episode_steps is None else episode_steps)
        self.sim = self.simulator(1)
        self._state = None  # {name: (1,)} once reset
        self._steps = 0

    def simulator(self, batch):
        """A new simulator of this task for `batch` environments: horizon SUBSTEPS, time step DT / SUBSTEPS."""
        return self.SYSTEM(horizon=self.SUBSTEPS, batch=batch, dt=self.DT / self.SUBSTEPS, **self.system_params())

    def system_params(self):
        """Parameters given to the simulator (its declared defaults unless a task overrides this)."""
        return {}

    def zero_state(self, n):
        """{state name: zeros (n, ...)}: the states of n environments, before initial_state fills them in."""
        return {k: np.zeros((n,) + v.shape[1:]) for k, v in self.sim.initial_state.items()}

    def checked_actions(self, action, n):
        """Actions as a float64 array (n, A), clipped to the action space; anything of another size is refused."""
        shape = self.action_space.shape
        array = np.asarray(action, dtype=np.float64)
        if array.size != n * int(np.prod(shape)):
            raise ValueError(f"{type(self).__name__}: actions must have shape {(n,) + shape if n > 1 else shape}, "
                             f"got {array.shape}")
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{type(self).__name__}: actions must be finite, got {array.reshape(-1)}")
        return np.clip(array.reshape((n,) + shape), self.action_space.low, self.action_space.high)

    @property
    def state(self):
        """{state name: float or array} of the simulated system now (None before the first reset)."""
        return None if self._state is None else one(self._state, 0)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._state = {k: np.array([v], dtype=np.float64) for k, v in self.initial_state(self.np_random).items()}
        self._state = dict(self.zero_state(1), **self._state)
        self._steps = 0
        return self.observe(self._state)[0], {}

    def step(self, action):
        if self._state is None:
            raise gymnasium.error.ResetNeeded(f"{type(self).__name__}: call reset() before step()")
        action = self.checked_actions(action, 1)
        before, self._state = self._state, advance(self.sim, self._state, self.effort(action))
        self._steps += 1
        reward = float(self.reward(before, self._state, action)[0])
        terminated = bool(self.terminated(self._state)[0])
        return self.observe(self._state)[0], reward, terminated, self._steps >= self.episode_steps, {}

    def terminated(self, state):
        return np.zeros(len(next(iter(state.values()))), dtype=bool)

    def render(self):
        if self.render_mode is None:
            gymnasium.logger.warn(f"{type(self).__name__}: render() needs render_mode='rgb_array' at construction")
            return None
        if self._state is None:
            raise gymnasium.error.ResetNeeded(f"{type(self).__name__}: call reset() before render()")
        return self.draw(self.state)


def box(low, high):
    """A float64 Box from per-entry bounds."""
    return spaces.Box(np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64), dtype=np.float64)
