"""Walking forward: Gymnasium's ant on an Articulation, and a soft mass-spring walker.

Ant: Gymnasium's four-legged ant runs forward, as Gymnasium's Ant-v5 defines the task (without its contact
forces), simulated by tisim.systems.Articulation on the tree read from Gymnasium's own ant.xml, its floor and joint
limits included (MuJoCo compiles the file, so this environment needs the `mujoco` package: ``pip install
tisim[mjcf]``).

    env step 0.05 s, as Ant-v5's, = 25 simulator steps of 2 ms (semi-implicit Euler), the same action: the penalty
        contacts need a finer step than MuJoCo's 10 ms; 1000 steps (50 s), then truncated.
    reset, as Ant-v5: the coordinates of the model's initial pose (the torso 0.75 m up) plus uniform noise in
        [-0.1, 0.1], the velocities 0.1 times standard normal noise.
    action a in [-1, 1]^8: the eight hip and ankle motors' commands (gear 150 in the file).
    observation (27 numbers, Ant-v5's without contact forces): the coordinates but the torso's x and y (its height,
        its orientation as a quaternion, the eight joint angles), then the 14 velocities.
    reward: 1 while healthy + (x after - x before) / 0.05 - 0.5 |a|^2, x the torso's.
    terminated when unhealthy: the torso's height leaves [0.2, 1.0] m, or a number is not finite.
Ant-v5 also charges 5e-4 times the squared external contact forces (clipped to 1), which tisim's penalty contacts do
not report: the reward here leaves that term out. Contacts and limits act through tisim's penalty laws, not MuJoCo's
soft constraints, so episodes are not Ant-v5's step for step. The first step compiles the ant's step (about a
minute).

SoftWalker: a mass-spring robot (tisim.systems.mass_spring.MassSpring; default the 2D "quadruped", 43 particles and
5 actuated spring groups) walks forward along x on the ground y = 0, DiffTaichi's soft walker task.
    env step 0.01 s = 20 simulator steps of 0.5 ms (semi-implicit Euler, the friction law's eps = 0.1 m/s, as
        demos/soft_walker.py); 500 steps (5 s), then truncated.
    reset: the body standing as built, every particle's velocity uniform in [-0.05, 0.05] m/s per axis.
    action a in [-1, 1]^A, one per actuator: the activation 0.25 a, each actuated spring's rest length times
        (1 + 0.25 a).
    observation: the particles' positions relative to their centroid, then their velocities (each particle's x, y
        or x, y, z, particle by particle), then the centroid's height: 4 N + 1 numbers in 2D (173 for the
        quadruped), 6 N + 1 in 3D. Where the body stands along x is not observed, so a gait learnt at x = 0 holds
        at x = 3; nor is the time: a policy that needs a rhythm makes its own.
    reward: the centroid's forward speed over the step, (x after - x before) / 0.01 s, less 0.01 |a|^2.
    terminated when a number is not finite.
"""
import os

import numpy as np

from tisim.envs.simulated import SimulatedEnv, box
from tisim.systems.articulation import Articulation, load_mjcf
from tisim.systems.articulation.kinematics import body_poses, quat_to_matrix
from tisim.systems.articulation.tree import CAPSULE, SPHERE, reference_coordinates
from tisim.systems.mass_spring import MassSpring, Robot

HEALTHY_Z = (0.2, 1.0)  # [m] the torso's heights of a healthy ant
ACTIVATION = 0.25  # the soft walker's largest change of an actuated spring's rest length, as a fraction
CONTROL_COST = 0.01  # the soft walker's cost per unit |a|^2 and env step


def ant_tree():
    """The tree of Gymnasium's ant.xml, stepped by semi-implicit Euler at 2 ms."""
    import gymnasium

    tree = load_mjcf(os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", "ant.xml"))
    tree.integrator, tree.timestep = "euler", 0.002
    return tree


class Ant(SimulatedEnv):
    """Run Gymnasium's ant forward along x (see the module docstring)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}
    SYSTEM = Articulation
    DT = 0.05
    SUBSTEPS = 25
    EPISODE_STEPS = 1000
    PICTURE_SIZE = (320, 240)

    def __init__(self, render_mode=None, *, episode_steps=None):
        self.tree = ant_tree()
        self._pose = reference_coordinates(self.tree)
        self.action_space = box([-1.0] * 8, [1.0] * 8)
        self.observation_space = box([-np.inf] * 27, [np.inf] * 27)
        super().__init__(render_mode, episode_steps=episode_steps)

    def system_params(self):
        return {"tree": self.tree}

    def initial_state(self, rng):
        return {"q": self._pose + rng.uniform(-0.1, 0.1, self._pose.size), "qd": 0.1 * rng.standard_normal(14)}

    def effort(self, action):
        return action

    def observe(self, state):
        return np.concatenate([state["q"][:, 2:], state["qd"]], axis=1)

    def healthy(self, state):
        finite = np.isfinite(state["q"]).all(axis=1) & np.isfinite(state["qd"]).all(axis=1)
        z = state["q"][:, 2]
        return finite & (HEALTHY_Z[0] <= z) & (z <= HEALTHY_Z[1])

    def reward(self, before, after, action):
        forward = (after["q"][:, 0] - before["q"][:, 0]) / self.DT
        return self.healthy(after) + forward - 0.5 * np.sum(action ** 2, axis=1)

    def terminated(self, state):
        return ~self.healthy(state)

    def draw(self, state):
        """The ant seen from its side (x right, z up), the view following its torso; the floor a line."""
        from tisim.viz.raster import Canvas

        tree = self.tree
        xpos, xmat = body_poses(tree, state["q"])
        middle = float(xpos[1][0])
        canvas = Canvas(*self.PICTURE_SIZE, bounds=(middle - 1.2, middle + 1.2, -0.3, 1.5))
        canvas.ground(0.0)
        for g, kind in enumerate(tree.geom_type):
            body = tree.geom_body[g]
            centre = xpos[body] + xmat[body] @ tree.geom_pos[g]
            if kind == CAPSULE:  # a leg segment: its axis, the geom frame's z
                axis = xmat[body] @ quat_to_matrix(tree.geom_quat[g])[:, 2] * tree.geom_size[g][1]
                canvas.line((centre - axis)[[0, 2]], (centre + axis)[[0, 2]], 6, (0, 100, 150))
            elif kind == SPHERE:  # the torso
                canvas.circle(centre[[0, 2]], tree.geom_size[g][0], (200, 140, 60))
        return canvas.image()


class SoftWalker(SimulatedEnv):
    """Walk a soft mass-spring robot forward along x (see the module docstring). robot: a robot name from
    tisim/assets/robots ("quadruped", "biped", "worm", "quadruped3d"), a robot JSON file or a Robot, with actuators."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 100}
    SYSTEM = MassSpring
    DT = 0.01
    SUBSTEPS = 20
    EPISODE_STEPS = 500
    VELOCITY_NOISE = 0.05  # [m/s] half-width of the reset's uniform particle velocities
    PICTURE_SIZE = (320, 240)

    def __init__(self, render_mode=None, *, robot="quadruped", episode_steps=None):
        if not isinstance(robot, (Robot, str, os.PathLike)):
            raise TypeError(f"SoftWalker: robot must be a Robot, a robot name or a JSON file path, got "
                            f"{type(robot).__name__}")
        self.robot = robot if isinstance(robot, Robot) else Robot.load(robot)
        if not self.robot.actuators:
            raise ValueError(f"SoftWalker: robot {self.robot.name!r} has no actuators; a walker needs at least one "
                             f"(such as \"quadruped\", \"biped\" or \"worm\")")
        n, dim = self.robot.particles.shape
        self.action_space = box([-1.0] * len(self.robot.actuators), [1.0] * len(self.robot.actuators))
        self.observation_space = box([-np.inf] * (2 * n * dim + 1), [np.inf] * (2 * n * dim + 1))
        super().__init__(render_mode, episode_steps=episode_steps)

    def system_params(self):
        return {"robot": self.robot, "eps": 0.1}

    def initial_state(self, rng):
        particles = self.robot.particles
        return {"pos": particles.copy(),
                "vel": rng.uniform(-self.VELOCITY_NOISE, self.VELOCITY_NOISE, particles.shape)}

    def effort(self, action):
        return ACTIVATION * action

    def observe(self, state):
        pos, vel = state["pos"], state["vel"]
        centroid = pos.mean(axis=1, keepdims=True)
        n = len(pos)
        return np.concatenate([(pos - centroid).reshape(n, -1), vel.reshape(n, -1), centroid[:, 0, 1:2]], axis=1)

    def reward(self, before, after, action):
        forward = (after["pos"][:, :, 0].mean(axis=1) - before["pos"][:, :, 0].mean(axis=1)) / self.DT
        return forward - CONTROL_COST * np.sum(action ** 2, axis=1)

    def terminated(self, state):
        return ~(np.isfinite(state["pos"]).all(axis=(1, 2)) & np.isfinite(state["vel"]).all(axis=(1, 2)))

    def draw(self, state):
        """The body from its side (x right, y up; a 3D body's z flattened), the view following its centroid."""
        from tisim.viz.drawings import draw_mass_spring
        from tisim.viz.raster import Canvas

        pos = np.asarray(state["pos"])[:, :2]
        middle = float(pos[:, 0].mean())
        reach = max(0.3, 0.75 * float(np.ptp(self.robot.particles[:, 0])))
        canvas = Canvas(*self.PICTURE_SIZE, bounds=(middle - reach, middle + reach, -0.05, 0.6 * reach))
        draw_mass_spring(canvas, {"pos": pos}, {"springs": self.robot.springs})
        return canvas.image()
