"""Reacher: Gymnasium's two-link arm moves its fingertip to a target, as Gymnasium's Reacher-v5 defines the task,
simulated by tisim.systems.Articulation on the tree read from Gymnasium's own reacher.xml (MuJoCo compiles it, so
this environment needs the `mujoco` package: ``pip install tisim[mjcf]``).

    env step 0.02 s = 2 simulator steps of the file's 10 ms RK4, the same action; 50 steps (1 s), then truncated.
    reset, as Reacher-v5: the arm's two angles uniform in [-0.1, 0.1] rad, their velocities uniform in
        [-0.005, 0.005] rad/s; the target drawn uniformly in [-0.2, 0.2]^2 until it lies within 0.2 m of the
        shoulder, at rest.
    action a in [-1, 1]^2: the two motors' commands (gear 200 in the file).
    observation (10 numbers, Reacher-v5's): cos and sin of the two angles, the target's x and y, the two angular
        velocities, and the fingertip's x and y less the target's.
    reward on the state after the step, as Reacher-v5 weighs it: -|fingertip - target| - |a|^2.
Actions are clipped to the action space before they act (the reward sees the clipped action; Reacher-v5 charges
the unclipped one, and MuJoCo clips it). The reacher's walls never touch the arm, and its elbow's limit (+-3 rad)
acts through tisim's penalty law where MuJoCo's acts as a constraint: within the limits, a step is MuJoCo's.
"""
import os

import numpy as np

from tisim.envs.simulated import SimulatedEnv, box
from tisim.systems.articulation import Articulation, dynamics, load_mjcf
from tisim.systems.articulation.kinematics import body_poses

ARENA = 0.3  # [m] half the width of the reacher's arena (its walls)


def reacher_tree():
    """The tree of Gymnasium's reacher.xml (its target's slides have a nonzero ref: q is measured from the model's
    initial pose)."""
    import gymnasium

    path = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", "reacher.xml")
    return load_mjcf(path, ignore=("ref",))


class Reacher(SimulatedEnv):
    """Bring the reacher's fingertip to a random target (see the module docstring)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}
    SYSTEM = Articulation
    DT = 0.02
    SUBSTEPS = 2
    EPISODE_STEPS = 50
    PICTURE_SIZE = (240, 240)

    def __init__(self, render_mode=None, *, episode_steps=None):
        self.tree = reacher_tree()
        names = self.tree.body_names
        self._fingertip, self._target = names.index("fingertip"), names.index("target")
        self._target_home = self.tree.pos[self._target][:2]  # where the target's slides put it at q = 0
        self._frames = dynamics.structure_of(self.tree), dynamics.params_of(self.tree)
        self.action_space = box([-1.0, -1.0], [1.0, 1.0])
        self.observation_space = box([-1.0] * 4 + [-np.inf] * 6, [1.0] * 4 + [np.inf] * 6)
        super().__init__(render_mode, episode_steps=episode_steps)

    def system_params(self):
        return {"tree": self.tree}

    def initial_state(self, rng):
        q = rng.uniform(-0.1, 0.1, 4)
        while True:
            goal = rng.uniform(-0.2, 0.2, 2)
            if np.linalg.norm(goal) < 0.2:
                break
        q[2:] = goal - self._target_home
        qd = rng.uniform(-0.005, 0.005, 4)
        qd[2:] = 0.0
        return {"q": q, "qd": qd}

    def effort(self, action):
        return action

    def points(self, q):
        """The fingertip's and the target's positions in the world (n, 3) each, at coordinates q (n, 4)."""
        q = np.asarray(q, dtype=np.float64)
        _, origin, _ = dynamics.kinematics(*self._frames, [q[:, c] for c in range(q.shape[1])], dynamics.NUMPY)
        return (np.stack(np.broadcast_arrays(*origin[self._fingertip]), axis=1),
                np.stack(np.broadcast_arrays(*origin[self._target]), axis=1))

    def observe(self, state):
        q, qd = state["q"], state["qd"]
        fingertip, target = self.points(q)
        return np.concatenate([np.cos(q[:, :2]), np.sin(q[:, :2]), target[:, :2], qd[:, :2],
                               fingertip[:, :2] - target[:, :2]], axis=1)

    def reward(self, before, after, action):
        fingertip, target = self.points(after["q"])
        return -np.linalg.norm(fingertip - target, axis=1) - np.sum(action ** 2, axis=1)

    def draw(self, state):
        from tisim.viz.raster import Canvas

        canvas = Canvas(*self.PICTURE_SIZE, bounds=(-ARENA - 0.03, ARENA + 0.03, -ARENA - 0.03, ARENA + 0.03))
        corners = [(-ARENA, -ARENA), (ARENA, -ARENA), (ARENA, ARENA), (-ARENA, ARENA)]
        for a, b in zip(corners, corners[1:] + corners[:1]):
            canvas.line(a, b, 5, (200, 110, 150))
        xpos, _ = body_poses(self.tree, state["q"])
        canvas.circle(xpos[self._target][:2], 0.018, (220, 60, 60))
        names = self.tree.body_names
        joints = [xpos[names.index(name)][:2] for name in ("body0", "body1", "fingertip")]
        for a, b in zip(joints, joints[1:]):
            canvas.line(a, b, 7, (0, 100, 150))
        for point in joints[:2]:
            canvas.circle(point, 0.012, (40, 40, 40))
        canvas.circle(joints[2], 0.011, (0, 190, 140))
        return canvas.image()
