"""Swing-up tasks: a cart-pole and a pendulum brought from hanging to upright, as Gymnasium environments.

CartpoleSwingUp (the cart-pole swing-up of SHAC, Xu et al. 2022, on tisim.systems.Cartpole):
    env step 1/60 s = 4 simulator steps of 1/240 s with the same force; 240 steps (4 s), then truncated.
    reset: x, x_dot, theta_dot uniform in [-0.1, 0.1], theta = pi (hanging) plus uniform [-0.1, 0.1].
    action a in [-1, 1]; force = max_force * a (default 10 N; the pole weighs 0.1 kg, and a hand-written
        energy-pumping controller brings it upright within the episode with 5 N already).
    observation (x, x_dot, sin theta, cos theta, theta_dot), theta from upright (0 balanced, pi hanging).
    reward on the state after the step: -(phi^2 + 0.1 theta_dot^2 + 0.05 x^2 + 0.1 x_dot^2), phi = theta wrapped
        to (-pi, pi].
PendulumSwingUp (Gymnasium's Pendulum-v1 task on tisim.systems.Pendulum, a point mass on a massless rod):
    env step 0.05 s = 5 simulator steps of 0.01 s; 200 steps (10 s), then truncated.
    reset: theta uniform in [-pi, pi), theta_dot uniform in [-1, 1].
    action: the torque tau in [-max_torque, max_torque] N m (default 2; the bob's weight gives up to 9.8 N m, so the
        pendulum must be swung up, not lifted).
    observation (cos theta, sin theta, theta_dot), theta from the DOWNWARD vertical (tisim's Pendulum): upright is
        theta = pi.
    reward, as Pendulum-v1, on the state before the step and the torque applied:
        -(phi^2 + 0.1 theta_dot^2 + 0.001 tau^2), phi = theta - pi wrapped to (-pi, pi] (0 upright).
Both clip actions to the action space before applying them (the reward sees the clipped action). Observations and
actions are float64, tisim's precision.
"""
import numpy as np

from tisim.envs.simulated import SimulatedEnv, box, positive_number, wrap_angle
from tisim.systems.cartpole import Cartpole
from tisim.systems.pendulum import Pendulum

CART_VIEW = 2.5  # [m] half the width of the track shown; the view follows the cart once it leaves the middle


class CartpoleSwingUp(SimulatedEnv):
    """Swing the pole of tisim's Cartpole up from hanging and balance it (see the module docstring)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 60}
    SYSTEM = Cartpole
    DT = 1.0 / 60.0
    SUBSTEPS = 4
    EPISODE_STEPS = 240
    NOISE = 0.1  # half-width of the uniform reset noise on every state

    def __init__(self, render_mode=None, *, max_force=10.0, episode_steps=None):
        self.max_force = positive_number(type(self).__name__, "max_force", max_force)
        self.action_space = box([-1.0], [1.0])
        self.observation_space = box([-np.inf, -np.inf, -1.0, -1.0, -np.inf], [np.inf, np.inf, 1.0, 1.0, np.inf])
        super().__init__(render_mode, episode_steps=episode_steps)

    def initial_state(self, rng):
        x, x_dot, theta, theta_dot = rng.uniform(-self.NOISE, self.NOISE, size=4)
        return {"x": x, "x_dot": x_dot, "theta": np.pi + theta, "theta_dot": theta_dot}

    def effort(self, action):
        return self.max_force * action[:, 0]

    def observe(self, state):
        theta = state["theta"]
        return np.stack([state["x"], state["x_dot"], np.sin(theta), np.cos(theta), state["theta_dot"]], axis=1)

    def reward(self, before, after, action):
        phi = wrap_angle(after["theta"])
        return -(phi ** 2 + 0.1 * after["theta_dot"] ** 2 + 0.05 * after["x"] ** 2 + 0.1 * after["x_dot"] ** 2)

    def draw(self, state):
        from tisim.viz.drawings import HINGE_HEIGHT, draw_cartpole
        from tisim.viz.raster import Canvas

        params = {k: float(v[0]) for k, v in self.sim.params.items()}
        reach = 2 * params["l"] + 0.1
        middle = 0.0 if abs(state["x"]) <= CART_VIEW - reach else state["x"]
        canvas = Canvas(*self.PICTURE_SIZE, bounds=(middle - CART_VIEW, middle + CART_VIEW, HINGE_HEIGHT - reach,
                                                    HINGE_HEIGHT + reach))
        draw_cartpole(canvas, state, params)
        return canvas.image()


class PendulumSwingUp(SimulatedEnv):
    """Gymnasium's Pendulum-v1 task on tisim's Pendulum (see the module docstring)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}
    SYSTEM = Pendulum
    DT = 0.05
    SUBSTEPS = 5
    EPISODE_STEPS = 200

    def __init__(self, render_mode=None, *, max_torque=2.0, episode_steps=None):
        self.max_torque = positive_number(type(self).__name__, "max_torque", max_torque)
        self.action_space = box([-self.max_torque], [self.max_torque])
        self.observation_space = box([-1.0, -1.0, -np.inf], [1.0, 1.0, np.inf])
        super().__init__(render_mode, episode_steps=episode_steps)

    def initial_state(self, rng):
        return {"theta": rng.uniform(-np.pi, np.pi), "theta_dot": rng.uniform(-1.0, 1.0)}

    def effort(self, action):
        return action[:, 0]

    def observe(self, state):
        theta = state["theta"]
        return np.stack([np.cos(theta), np.sin(theta), state["theta_dot"]], axis=1)

    def reward(self, before, after, action):
        phi = wrap_angle(before["theta"] - np.pi)
        return -(phi ** 2 + 0.1 * before["theta_dot"] ** 2 + 0.001 * action[:, 0] ** 2)

    def draw(self, state):
        from tisim.viz.drawings import draw_pendulum, view_pendulum
        from tisim.viz.raster import Canvas

        params = {k: float(v[0]) for k, v in self.sim.params.items()}
        canvas = Canvas(*self.PICTURE_SIZE, bounds=view_pendulum(None, params))
        draw_pendulum(canvas, state, params)
        return canvas.image()
