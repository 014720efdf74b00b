"""A 2D mass-spring body: particles joined by damped springs, some of them actuated, on a ground with friction.

For a spring s = (i, j) with rest length rest_s and actuator activation a (0 for passive springs):
    d = x_j - x_i,  r = |d|,  n = d / r,  L = rest_s (1 + a)
    f_s = (k_s (r - L) + c (v_j - v_i) . n) n        added to particle i, subtracted from particle j
    (c is the parameter "damping": in tisim "c" names rotational damping at a pivot, in N m s)
Ground y = 0:  depth p = -y;  fn = kc p - kd min(vy, 0) while p > 0 (penalty_normal_compression);
               ft = -mu fn tanh(vx / eps) (friction_coulomb_tanh)
Each particle: m v' = sum of spring forces + (ft, fn) - m g e_y; semi-implicit Euler.
This is the reference workload of design.md exactly. Non-smooth: the ground contact switch.

Explicit steps of the dissipative laws have limits of their own, beside the springs' stability limit: a particle
pressing into the ground loses dt kd / m of its normal velocity per step, so at dt kd / m = 2 (dt = 1 ms with the
defaults) the step reverses it instead of stopping it, and the friction law overshoots zero slip once
dt mu fn / (m eps) > 1. Neither blows up, but rollouts near those limits chatter at contact and turn chaotic, and so
do their gradients: a soft walker at dt = 1 ms gave adjoints that a 1e-9 change of the initial state turned around
(demos/soft_walker.py runs at the default dt = 0.5 ms, with eps = 0.1 m/s).

Layout: pos and vel are (n_particles, 2); k and rest are per spring; damping, m, kc, kd, mu, eps, g are global. The
topology (which particles each spring joins, which actuator drives it) is structure: it lives in Taichi fields on the
kernel host, one set per distinct robot. Each particle's update (step_item) gathers its springs from a padded incidence
table (static loop over the largest degree), the schedule taichi-facts.md found correct and fast; the engine loops it
over particles inside one kernel on a CPU and runs a launch per step, parallel over particles, on a GPU.
"""
import os

import numpy as np
import taichi as ti

from tisim import runtime
from tisim.contact import friction_coulomb_tanh, penalty_normal_compression
from tisim.engine import System
from tisim.integrators import semi_implicit_euler
from tisim.quantities import Quantity
from tisim.robots import Robot, grid


class MassSpring(System):
    """A mass-spring robot from a ``Robot`` (or a robot name / JSON path); default: the 32 x 8 reference grid."""

    PARAMS = (
        Quantity("g", 9.8, "m/s^2", "gravitational acceleration", bounds="[0, inf)"),
        Quantity("m", 0.01, "kg", "mass of each particle", bounds="(0, inf)"),
        Quantity("k", 1000.0, "N/m", "stiffness of each spring", shape=("n_springs",), bounds="[0, inf)"),
        Quantity("rest", 0.05, "m", "rest length of each spring (default: as built)", shape=("n_springs",),
                 bounds="(0, inf)"),
        Quantity("damping", 2.0, "N s/m", "viscous damping along each spring (design.md's c)", bounds="[0, inf)"),
        Quantity("kc", 5000.0, "N/m", "ground contact stiffness", bounds="[0, inf)"),
        Quantity("kd", 20.0, "N s/m", "ground contact damping while compressing", bounds="[0, inf)"),
        Quantity("mu", 0.6, "-", "Coulomb coefficient with the ground", bounds="[0, inf)"),
        Quantity("eps", 0.05, "m/s", "velocity scale of the regularized friction law", bounds="(0, inf)"),
    )
    STATE = (
        Quantity("pos", 0.0, "m", "particle positions (x, y)", shape=("n_particles", 2)),
        Quantity("vel", 0.0, "m/s", "particle velocities", shape=("n_particles", 2)),
    )
    ACTION = (Quantity("activation", 0.0, "-", "fractional change of the rest length of each actuator's springs",
                       shape=("n_actuators",), bounds="(-1, inf)"),)
    STRUCTURE = ("n_particles", "n_springs", "n_actuators", "degree")
    ITEMS = "n_particles"  # each particle's update reads step t only and writes its own next state
    DT = 5e-4

    def __init__(self, horizon, batch=1, dt=None, robot=None, **values):
        if not (robot is None or isinstance(robot, (Robot, str, os.PathLike))):
            raise TypeError(f"MassSpring: robot must be a Robot, a robot name or a JSON file path, got "
                            f"{type(robot).__name__}")
        self.robot = grid(32, 8) if robot is None else robot if isinstance(robot, Robot) else Robot.load(robot)
        spring_of = self.robot.incidence()[0]
        sizes = dict(n_particles=len(self.robot.particles), n_springs=len(self.robot.springs),
                     n_actuators=max(len(self.robot.actuators), 1), degree=spring_of.shape[1])
        super().__init__(horizon, batch, dt, **sizes, **values)
        if "pos" not in values:
            self.set_initial_state(pos=self.robot.particles)
        if "rest" not in values:
            self.set_params(rest=self.robot.rest_lengths())

    def _topology_key(self):
        return self.robot.key()

    def _bare_host(self):
        host = super()._bare_host()
        spring_of, other_of, present = self.robot.incidence()
        owner = self.robot.actuator_of_spring()
        builder = ti.FieldsBuilder()
        host.spring_of, host.other_of, host.present = ti.field(ti.i32), ti.field(ti.i32), ti.field(runtime.real())
        host.actuator_of, host.actuated = ti.field(ti.i32), ti.field(runtime.real())
        builder.dense(ti.ij, spring_of.shape).place(host.spring_of, host.other_of, host.present)
        builder.dense(ti.i, len(owner)).place(host.actuator_of, host.actuated)
        host.topology_tree = builder.finalize()
        host.spring_of.from_numpy(spring_of)
        host.other_of.from_numpy(other_of)
        host.present.from_numpy(present.astype(runtime.numpy_real()))
        host.actuator_of.from_numpy(np.maximum(owner, 0))  # passive springs read actuator 0 and weigh it by 0
        host.actuated.from_numpy((owner >= 0).astype(runtime.numpy_real()))
        return host

    @ti.func
    def spring_force(self, x: ti.template(), theta: ti.template(), u: ti.template(), b, t, i, s, j):
        """The force of spring s on particle i from particle j at the other end."""
        X, P, U = ti.static(self.X, self.P, self.U)
        d = ti.Vector([x[b, t, X.pos + 2 * j] - x[b, t, X.pos + 2 * i],
                       x[b, t, X.pos + 2 * j + 1] - x[b, t, X.pos + 2 * i + 1]])
        dv = ti.Vector([x[b, t, X.vel + 2 * j] - x[b, t, X.vel + 2 * i],
                        x[b, t, X.vel + 2 * j + 1] - x[b, t, X.vel + 2 * i + 1]])
        r = d.norm()
        n = d / r
        L = theta[b, P.rest + s] * (1.0 + self.actuated[s] * u[b, t, U.activation + self.actuator_of[s]])
        return (theta[b, P.k + s] * (r - L) + theta[b, P.damping] * dv.dot(n)) * n

    @ti.func
    def step_item(self, x: ti.template(), theta: ti.template(), u: ti.template(), dt, b, t, i):
        # Run inside a dynamic loop over particles: everything it uses is read here, since a local set before that
        # loop and read in it gets silently wrong gradients from Taichi 1.7's reverse mode (measured: the spring
        # terms flip sign).
        X, P = ti.static(self.X, self.P)
        m = theta[b, P.m]
        p = ti.Vector([x[b, t, X.pos + 2 * i], x[b, t, X.pos + 2 * i + 1]])
        v = ti.Vector([x[b, t, X.vel + 2 * i], x[b, t, X.vel + 2 * i + 1]])
        f = ti.Vector([0.0, -m * theta[b, P.g]])
        # no branches either (reverse mode crashes on them here): padding entries are weighed out by 0
        for q in ti.static(range(self.degree)):
            f += self.present[i, q] * self.spring_force(x, theta, u, b, t, i, self.spring_of[i, q],
                                                        self.other_of[i, q])
        fn = penalty_normal_compression(-p[1], v[1], theta[b, P.kc], theta[b, P.kd])
        f += ti.Vector([friction_coulomb_tanh(v[0], fn, theta[b, P.mu], theta[b, P.eps]), fn])
        p_next, v_next = semi_implicit_euler(p, v, f / m, dt)
        x[b, t + 1, X.pos + 2 * i] += p_next[0]
        x[b, t + 1, X.pos + 2 * i + 1] += p_next[1]
        x[b, t + 1, X.vel + 2 * i] += v_next[0]
        x[b, t + 1, X.vel + 2 * i + 1] += v_next[1]

    def events(self, traj):
        """"ground contact": some particle is below the ground (y < 0)."""
        return {"ground contact": (traj["pos"][..., 1] < 0).any(axis=2)}


def reference_actions(sim, amplitude=0.1, frequency=5.0):
    """The reference workload's actions a[t, s] = 0.1 sin(2 pi 5 t dt + phase_s), phase_s = 2 pi s / S."""
    t = np.arange(sim.T)[:, None] * sim.dt
    phase = 2 * np.pi * np.arange(sim.action_layout.size)[None, :] / sim.action_layout.size
    return amplitude * np.sin(2 * np.pi * frequency * t + phase)


def mean_x_weights(sim):
    """TerminalSum weights for minus the mean x of all particles (the reference workload's loss)."""
    w = np.zeros((sim.sizes["n_particles"], 2))
    w[:, 0] = -1.0 / sim.sizes["n_particles"]
    return {"pos": w}
