"""A Gymnasium vector environment whose sub-environments are the batch of one tisim simulator.

Every step of ``SimulatedVectorEnv(CartpoleSwingUp, num_envs)`` sets the states and actions of all num_envs batch
elements and runs one rollout of the task's SUBSTEPS steps: one kernel launch for all environments. It behaves as
Gymnasium's SyncVectorEnv over num_envs single environments of the same task would:
  - reset(seed=s) seeds sub-environment i with s + i (a list gives one seed each), so sub-environment i follows the
    single environment reset with seed s + i, action for action;
  - next-step autoreset (metadata["autoreset_mode"] = AutoresetMode.NEXT_STEP): the step after a sub-environment
    is truncated or terminated resets it instead of stepping it, and returns its reset observation, reward 0 and
    terminated = truncated = False; its action in that step is ignored;
  - reset(options={"reset_mask": mask}) resets only the sub-environments where the boolean mask (num_envs,) is True.
"""
import gymnasium
import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from tisim.envs.simulated import SimulatedEnv, advance, one, positive_integer


class SimulatedVectorEnv(VectorEnv):
    """num_envs environments of one task (a SimulatedEnv subclass, e.g. CartpoleSwingUp) stepped as one batch;
    keywords (render_mode, max_force, episode_steps, ...) go to the task."""

    def __init__(self, env_class, num_envs, **kwargs):
        if not (isinstance(env_class, type) and issubclass(env_class, SimulatedEnv)):
            raise TypeError(f"SimulatedVectorEnv: env_class must be a tisim environment class (such as "
                            f"tisim.envs.CartpoleSwingUp), got {env_class!r}")
        self.num_envs = positive_integer("SimulatedVectorEnv", "num_envs", num_envs)
        self.task = env_class(**kwargs)  # the task's settings, spaces and functions; its own simulator is unused
        self.render_mode = self.task.render_mode
        self.metadata = dict(self.task.metadata, autoreset_mode=AutoresetMode.NEXT_STEP)
        self.single_observation_space = self.task.observation_space
        self.single_action_space = self.task.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.sim = self.task.simulator(self.num_envs)
        self._generators = [None] * self.num_envs
        self._state = None  # {name: (num_envs,)} once reset
        self._steps = np.zeros(self.num_envs, dtype=np.int64)
        self._autoreset = np.zeros(self.num_envs, dtype=bool)

    @property
    def state(self):
        """{state name: array (num_envs, ...)} of the simulated systems now (None before the first reset)."""
        return None if self._state is None else {k: v.copy() for k, v in self._state.items()}

    def _generator(self, i, seed):
        if seed is not None or self._generators[i] is None:
            self._generators[i] = seeding.np_random(seed)[0]
        return self._generators[i]

    def _reset_one(self, i, seed=None):
        drawn = self.task.initial_state(self._generator(i, seed))
        for name in self._state:
            self._state[name][i] = drawn.get(name, 0.0)
        self._steps[i] = 0
        self._autoreset[i] = False

    def reset(self, *, seed=None, options=None):
        if seed is None:
            seeds = [None] * self.num_envs
        elif isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
            seeds = [int(seed) + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"SimulatedVectorEnv.reset: a list of seeds needs one per environment "
                                 f"({self.num_envs}), got {len(seeds)}")
        mask = np.ones(self.num_envs, dtype=bool)
        if options is not None and "reset_mask" in options:
            mask = np.asarray(options["reset_mask"])
            if mask.shape != (self.num_envs,) or mask.dtype != np.bool_:
                raise ValueError(f"SimulatedVectorEnv.reset: options['reset_mask'] must be a boolean array of shape "
                                 f"({self.num_envs},), got {mask.dtype} {mask.shape}")
            if self._state is None and not mask.all():
                raise gymnasium.error.ResetNeeded("SimulatedVectorEnv.reset: the first reset resets every environment")
        if self._state is None:
            self._state = self.task.zero_state(self.num_envs)
        for i in np.flatnonzero(mask):
            self._reset_one(i, seeds[i])
        return self.task.observe(self._state), {}

    def step(self, actions):
        if self._state is None:
            raise gymnasium.error.ResetNeeded("SimulatedVectorEnv: call reset() before step()")
        actions = self.task.checked_actions(actions, self.num_envs)
        before = self._state
        after = advance(self.sim, before, self.task.effort(actions))
        rewards = self.task.reward(before, after, actions)
        self._steps += 1
        truncated = self._steps >= self.task.episode_steps
        terminated = np.array(self.task.terminated(after), dtype=bool)
        restart = np.flatnonzero(self._autoreset)
        self._state = after
        for i in restart:  # these were done after the last step: reset instead of stepped
            self._reset_one(i)
        rewards[restart], truncated[restart], terminated[restart] = 0.0, False, False
        self._autoreset = terminated | truncated
        return self.task.observe(self._state), rewards, terminated, truncated, {}

    def render(self):
        """One picture (H, W, 3) uint8 per environment, a tuple (render_mode="rgb_array")."""
        if self.render_mode is None:
            gymnasium.logger.warn("SimulatedVectorEnv: render() needs render_mode='rgb_array' at construction")
            return None
        if self._state is None:
            raise gymnasium.error.ResetNeeded("SimulatedVectorEnv: call reset() before render()")
        return tuple(self.task.draw(one(self._state, i)) for i in range(self.num_envs))


def cartpole_swing_up_vector(num_envs, **kwargs):
    """The vector entry point of tisim/CartpoleSwingUp-v0 (gymnasium.make_vec)."""
    from tisim.envs.swing_up import CartpoleSwingUp

    return SimulatedVectorEnv(CartpoleSwingUp, num_envs, **kwargs)


def pendulum_swing_up_vector(num_envs, **kwargs):
    """The vector entry point of tisim/PendulumSwingUp-v0 (gymnasium.make_vec)."""
    from tisim.envs.swing_up import PendulumSwingUp

    return SimulatedVectorEnv(PendulumSwingUp, num_envs, **kwargs)


def reacher_vector(num_envs, **kwargs):
    """The vector entry point of tisim/Reacher-v0 (gymnasium.make_vec)."""
    from tisim.envs.reach import Reacher

    return SimulatedVectorEnv(Reacher, num_envs, **kwargs)


def ant_vector(num_envs, **kwargs):
    """The vector entry point of tisim/Ant-v0 (gymnasium.make_vec)."""
    from tisim.envs.walk import Ant

    return SimulatedVectorEnv(Ant, num_envs, **kwargs)


def soft_walker_vector(num_envs, **kwargs):
    """The vector entry point of tisim/SoftWalker-v0 (gymnasium.make_vec)."""
    from tisim.envs.walk import SoftWalker

    return SimulatedVectorEnv(SoftWalker, num_envs, **kwargs)


def pinch_vector(num_envs, **kwargs):
    """The vector entry point of tisim/Pinch-v0 (gymnasium.make_vec)."""
    from tisim.envs.shape import Pinch

    return SimulatedVectorEnv(Pinch, num_envs, **kwargs)


def rolling_pin_vector(num_envs, **kwargs):
    """The vector entry point of tisim/RollingPin-v0 (gymnasium.make_vec)."""
    from tisim.envs.shape import RollingPin

    return SimulatedVectorEnv(RollingPin, num_envs, **kwargs)


def move_vector(num_envs, **kwargs):
    """The vector entry point of tisim/Move-v0 (gymnasium.make_vec)."""
    from tisim.envs.shape import Move

    return SimulatedVectorEnv(Move, num_envs, **kwargs)


def chopsticks_vector(num_envs, **kwargs):
    """The vector entry point of tisim/Chopsticks-v0 (gymnasium.make_vec)."""
    from tisim.envs.shape import Chopsticks

    return SimulatedVectorEnv(Chopsticks, num_envs, **kwargs)
