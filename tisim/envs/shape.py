"""Shaping clay, tasks of PlasticineLab's kind, simulated by tisim.systems.Shaping (MPM clay, kinematic tools):

    Pinch        two upright capsule fingertips (3 cm by 5 cm), 5 mm from the sides of a 0.24 m by 0.1 m block,
                 halfway up, dent it: the hidden plan presses both in by 3 to 6 cm over two pieces, the pair lower
                 or higher by up to 2 cm, holds for one and leaves over the last two
    RollingPin   a 6 cm disc above the left end of a 0.2 m by 0.06 m slab flattens it: the hidden plan lowers it
                 0.5 to 1.5 cm into the slab, rolls it 8 to 14 cm to the right over three pieces and lifts it
    Move         a 4 cm by 5 cm pusher low beside a 0.1 m cube of clay on a floor with Coulomb friction (mu 0.5)
                 slides it: the hidden plan pushes it 3 to 6 cm over four pieces, up to 5 mm higher or lower, and
                 backs off
    Chopsticks   two upright sticks (capsules 9.6 cm by 1.2 cm, friction 0.5) beside a 0.2 m by 8 cm block, which
                 turn as well as move (tisim.systems.Sculpting): the hidden plan brings them in by 1 to 3 cm while
                 it turns their lower ends toward each other by 0.2 to 0.5 rad over two pieces, holds for one and
                 draws them out over the last two
The clay is von Mises clay (E 1e5 Pa, yield stress 2,000 Pa: it holds its shape under its own weight) at rest on the
floor, points half a cell apart on 64 x 64 cells; every episode starts from the task's scene.

    target: the shape the hidden plan (a seed's, `target=`, 0 by default) leaves: for 0.1 s each tool moves at a
        velocity constant over five pieces of 20 ms.
    env step 4 ms = 20 simulator steps of 0.2 ms, the same action; 25 steps (0.1 s), then truncated.
    action a in [-1, 1]^(2 x tools): the tools' velocities (x, y each) are SPEED a, SPEED = 2.5 m/s (the hidden
        plans' fastest is 2.33 m/s); Chopsticks' a in [-1, 1]^(3 x tools) adds each stick's angular velocity,
        SPIN a, SPIN = 25 rad/s (the hidden plans' fastest is 12.5 rad/s).
    observation (2 x tools + 2 x points numbers): the tools' centres, then each point's offset from where the
        target has it [m]; Chopsticks' has the sticks' angles [rad] after their centres.
    reward: 1e4 times the decrease over the step of the loss, the points' mean squared distance to their places in
        the target [m^2]; an episode's return is 1e4 times the loss at the start less the loss at its end.
The loss knows where each point belongs (the target is made from the same clay). The first step compiles the
clay's step (about a minute).
"""
import numpy as np

from tisim.envs.simulated import SimulatedEnv, advance, box
from tisim.systems.mpm import BAND, Body, Sculpting, Shaping, Tool

N_GRID, STEPS, PIECES = 64, 500, 5  # cells per side; simulator steps of a plan (0.2 ms); pieces of a hidden plan
FLOOR = BAND / N_GRID  # [m] the floor's surface
CLAY = dict(material="von_mises", E=1e5, nu=0.3, yield_stress=2000.0)
REWARD_SCALE = 1e4  # [1/m^2]
SPEED = 2.5  # [m/s] a tool's velocity at an action of 1
SPIN = 25.0  # [rad/s] a stick's angular velocity at an action of 1
PIECE = STEPS * Shaping.DT / PIECES  # [s] a piece of a hidden plan


def plan_actions(plan, steps=STEPS):
    """A plan (B, pieces, tools, 2 or 3) of velocities (and angular velocities), constant over each of its equal
    pieces, as the actions of `steps` simulator steps (B, steps, tools, 2 or 3)."""
    return np.repeat(plan, steps // plan.shape[1], axis=1)


class ShapingTask(SimulatedEnv):
    """A clay-shaping task (the module docstring): a subclass gives its clay, its tools, any other settings of the
    simulator, and its hidden plans."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 25}
    SYSTEM = Shaping
    DT = 0.004
    SUBSTEPS = 20
    EPISODE_STEPS = 25
    PICTURE_SIZE = (360, 180)
    VIEW = (0.2, 0.8, 0.02, 0.32)  # [m] what a picture shows
    SETTINGS = {}  # the simulator's other settings (options, parameters)
    SCALE = (SPEED, SPEED)  # each tool's action of 1, per entry: velocity (x, y) [m/s]
    UNIT = (1.0, 1.0)  # a plan's unit per entry for an optimizer: 1 m/s, and for a turn what moves a tool's end 1 m/s

    @staticmethod
    def clay():
        raise NotImplementedError

    @staticmethod
    def tools():
        raise NotImplementedError

    @staticmethod
    def hidden_plan(seed):
        """The seed's plan: the tools' velocities (1, PIECES, tools, len(SCALE)) [m/s, and rad/s for a turn]."""
        raise NotImplementedError

    @classmethod
    def scene(cls, horizon=STEPS, batch=1, dt=None):
        """A Shaping simulator of the task's clay and tools."""
        return cls.SYSTEM(horizon=horizon, batch=batch, dt=dt, body=cls.clay(), n_grid=N_GRID, tools=cls.tools(),
                          **CLAY, **cls.SETTINGS)

    def __init__(self, render_mode=None, *, episode_steps=None, target=0):
        name = type(self).__name__
        if isinstance(target, bool) or not isinstance(target, (int, np.integer)) or target < 0:
            raise ValueError(f"{name}: target must be an integer >= 0 (the hidden plan's seed), got {target!r}")
        tools, points, turns = len(self.tools()), len(self.clay().particles), len(self.SCALE) - 2
        self.action_space = box([-1.0] * len(self.SCALE) * tools, [1.0] * len(self.SCALE) * tools)
        self.observation_space = box([0.0] * 2 * tools + [-np.pi] * turns * tools + [-1.0] * 2 * points,
                                     [1.0] * 2 * tools + [np.pi] * turns * tools + [1.0] * 2 * points)
        super().__init__(render_mode, episode_steps=episode_steps)
        self._start = {k: v[0] for k, v in self.sim.initial_state.items()}
        state = {k: v[None] for k, v in self._start.items()}
        for piece in np.repeat(self.hidden_plan(target)[0], STEPS // self.SUBSTEPS // PIECES, axis=0):
            state = advance(self.sim, state, piece[None])
        self.target = state["pos"][0]

    def simulator(self, batch):
        return self.scene(self.SUBSTEPS, batch, self.DT / self.SUBSTEPS)

    def initial_state(self, rng):
        return dict(self._start)

    def effort(self, action):
        return np.asarray(self.SCALE) * action.reshape(len(action), -1, len(self.SCALE))

    def loss(self, state):
        """The points' mean squared distance to their places in the target (n,) [m^2]."""
        return np.mean(np.sum((state["pos"] - self.target) ** 2, axis=-1), axis=-1)

    def observe(self, state):
        n = len(state["pos"])
        angles = state.get("tool_angle", np.zeros((n, 0)))
        return np.concatenate([state["tool_pos"].reshape(n, -1), angles, (state["pos"] - self.target).reshape(n, -1)],
                              axis=1).clip(self.observation_space.low, self.observation_space.high)

    def reward(self, before, after, action):
        return REWARD_SCALE * (self.loss(before) - self.loss(after))

    def draw(self, state):
        from tisim import viz

        traj = {k: np.asarray(v)[None, None] for k, v in state.items()}
        params = {**self.sim.params, "target": self.target[None]}
        return viz.frames(self.sim, traj, params, bounds=self.VIEW, size=self.PICTURE_SIZE)[0]


class Pinch(ShapingTask):
    """Pinch the clay between two fingertips into the target's shape (the module docstring)."""

    VIEW = (0.25, 0.75, 0.02, 0.27)

    @staticmethod
    def clay():
        return Body.box([0.38, FLOOR], [0.62, FLOOR + 0.1], 0.5 / N_GRID)

    @staticmethod
    def tools():
        return [Tool.capsule([x, FLOOR + 0.05], 0.01, 0.015, axis=1) for x in (0.36, 0.64)]

    @staticmethod
    def hidden_plan(seed):
        rng = np.random.default_rng(seed)
        plan = np.zeros((1, PIECES, 2, 2))
        plan[0, :2, 0, 0], plan[0, :2, 1, 0] = rng.uniform(0.03, 0.06, 2) / (2 * PIECE) * [1, -1]
        plan[0, 0, :, 1] = rng.uniform(-0.02, 0.02) / PIECE
        plan[0, 3:, 0, 0], plan[0, 3:, 1, 0] = -1.0, 1.0
        return plan


class RollingPin(ShapingTask):
    """Flatten a slab of clay with a rolling disc into the target's shape (the module docstring)."""

    VIEW = (0.25, 0.75, 0.02, 0.27)

    @staticmethod
    def clay():
        return Body.box([0.4, FLOOR], [0.6, FLOOR + 0.06], 0.5 / N_GRID)

    @staticmethod
    def tools():
        return [Tool.sphere([0.42, FLOOR + 0.06 + 0.035], 0.03)]

    @staticmethod
    def hidden_plan(seed):
        rng = np.random.default_rng(seed)
        plan = np.zeros((1, PIECES, 1, 2))
        plan[0, 0, 0, 1] = -rng.uniform(0.01, 0.02) / PIECE  # 5 mm to reach the slab, then 0.5 to 1.5 cm into it
        plan[0, 1:4, 0, 0] = rng.uniform(0.08, 0.14) / (3 * PIECE)
        plan[0, 4, 0, 1] = 0.04 / PIECE
        return plan


class Move(ShapingTask):
    """Push a cube of clay along a frictional floor into the target's place and shape (the module docstring)."""

    SETTINGS = dict(floor="friction", mu=0.5)

    @staticmethod
    def clay():
        return Body.box([0.35, FLOOR], [0.45, FLOOR + 0.1], 0.5 / N_GRID)

    @staticmethod
    def tools():
        return [Tool.box([0.325, FLOOR + 0.03], [0.02, 0.025])]

    @staticmethod
    def hidden_plan(seed):
        rng = np.random.default_rng(seed)
        plan = np.zeros((1, PIECES, 1, 2))
        plan[0, :4, 0, 0] = (0.005 + rng.uniform(0.03, 0.06)) / (4 * PIECE)
        plan[0, 0, 0, 1] = rng.uniform(-0.005, 0.005) / PIECE
        plan[0, 4, 0, 0] = -0.5
        return plan


class Chopsticks(ShapingTask):
    """Press two sticks into the clay's sides, turning their lower ends toward each other, into the target's shape
    (the module docstring): the sticks turn as well as move."""

    SYSTEM = Sculpting
    SCALE = (SPEED, SPEED, SPIN)
    UNIT = (1.0, 1.0, 1.0 / 0.048)  # [m/s, m/s, rad/s] a stick's end lies 4.8 cm from its centre
    VIEW = (0.25, 0.75, 0.02, 0.27)

    @staticmethod
    def clay():
        return Body.box([0.4, FLOOR], [0.6, FLOOR + 0.08], 0.5 / N_GRID)

    @staticmethod
    def tools():
        return [Tool.capsule([x, FLOOR + 0.07], 0.042, 0.006, axis=1, mu=0.5) for x in (0.388, 0.612)]

    @staticmethod
    def hidden_plan(seed):
        rng = np.random.default_rng(seed)
        plan = np.zeros((1, PIECES, 2, 3))
        plan[0, :2, 0, 0], plan[0, :2, 1, 0] = rng.uniform(0.01, 0.03, 2) / (2 * PIECE) * [1, -1]
        plan[0, :2, 0, 2], plan[0, :2, 1, 2] = rng.uniform(0.2, 0.5, 2) / (2 * PIECE) * [1, -1]
        plan[0, 3:, 0, 0], plan[0, 3:, 1, 0] = -1.0, 1.0
        return plan
