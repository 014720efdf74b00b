"""A mass-spring body (a cloth, a soft robot) handled by kinematic tools: the actions are the tools' velocities.

The tools are tisim.systems.mpm.Tool shapes, boxes rounded by a radius (spheres, capsules, boxes; their signed
distance phi and outward normal n from tisim/systems/mpm/tools.py). A tool touches the particles by the body's own
contact law (tisim/physics/contact.py's point_contact: the penalty kc with its softness, the damping kd while
compressing, regularized Coulomb friction with its own coefficient tool_mu over eps), at depth -phi along n, on the
particle's velocity relative to the tool's. The tools feel nothing back (kinematic, as Shaping's in MPM). Each step
adds a phase that moves the tools, x_tool' = x_tool + dt u, and the particles meet each tool where it is at the
step's end, as Shaping's grid does. Every phase keeps its hand-written reverse.
"""
import os

import taichi as ti

from tisim.core.model import check_run
from tisim.physics.contact import point_contact, point_contact_reverse, touching
from tisim.systems.mass_spring.robots import Robot, cloth
from tisim.systems.mass_spring.system import MassSpring
from tisim.systems.mpm import tools as laws
from tisim.systems.mpm.tools import Tool


class Manipulation(laws.DrivenTools, MassSpring):
    """A mass-spring body without actuators (default: a 10 x 10 cloth, 3 cm apart, pinned at its corners 0.3 m up)
    and kinematic tools that move as the actions say: tools, a list of tisim.systems.mpm.Tool (default: a 3 cm
    sphere pressing the cloth's middle by 1 mm); the actions are the tools' velocities, shape (T, n_tools, dim).
    The tools' sizes and friction are parameters like the body's, so they can be fitted. The body's other options
    (spheres, boxes, balls, its contact law's parameters) are MassSpring's."""

    PARAMS = MassSpring.PARAMS + laws.SHAPES
    STATE = MassSpring.STATE + (laws.PLACE,)
    ACTION = (laws.DRIVE,)
    STRUCTURE = MassSpring.STRUCTURE + ("n_tools",)
    PHASES = (("tools", "n_tools"),) + MassSpring.PHASES
    FUSED = dict(MassSpring.FUSED, tools=("tools_fused", "n_tools"))
    REVERSES = dict(MassSpring.REVERSES, tools=("tools_reverse", "n_tools"))

    def __init__(self, horizon, batch=1, dt=None, robot=None, tools=None, **values):
        check_run("Manipulation", horizon, batch, dt)
        if robot is None:
            robot = cloth(10, 10, spacing=0.03, origin=(0.365, 0.3, 0.365), pin="corners", flat=True)
            if tools is None:
                tools = [Tool.sphere([0.5, 0.32, 0.5], 0.03)]  # pressing the four middle particles 1 mm
        elif isinstance(robot, (str, os.PathLike)):
            robot = Robot.load(robot)
        known = isinstance(robot, Robot)  # else MassSpring names what robot must be
        start = laws.take_tools("Manipulation", tools, robot.dim if known else None, values,
                                known and bool(robot.actuators))
        super().__init__(horizon, batch, dt, robot, n_tools=len(tools), **values)
        if start is not None:
            self.set_initial_state(tool_pos=start)

    # ---- the tools' touch: added to the ground's and the obstacles' -------------------------------------------------
    @ti.func
    def contact(self, s: ti.template(), p, v, branch: ti.template()):
        f = MassSpring.contact(self, s, p, v, branch)
        kc, kd, soft, eps = s.param("kc"), s.param("kd"), s.param("softness"), s.param("eps")
        for k in ti.static(range(self.n_tools)):
            phi, n = laws.rounded_box(p - self.moved(s, k), s.param("tool_half", k), s.param("tool_radius", k))
            if ti.static(not branch):
                f += point_contact(-phi, n, v - s.action("tool_vel", k), kc, kd, soft, s.param("tool_mu", k), eps)
            elif touching(-phi, soft):
                f += point_contact(-phi, n, v - s.action("tool_vel", k), kc, kd, soft, s.param("tool_mu", k), eps)
        return f

    @ti.func
    def contact_reverse(self, s: ti.template(), bar: ti.template(), p, v, f_bar):
        p_bar, v_bar = MassSpring.contact_reverse(self, s, bar, p, v, f_bar)
        kc, kd, soft, eps = s.param("kc"), s.param("kd"), s.param("softness"), s.param("eps")
        law_bar = ti.Vector.zero(float, 5)
        for k in ti.static(range(self.n_tools)):
            offset, half, u = p - self.moved(s, k), s.param("tool_half", k), s.action("tool_vel", k)
            phi, n = laws.rounded_box(offset, half, s.param("tool_radius", k))
            if touching(-phi, soft):
                d_bar, n_bar, vb, lb = point_contact_reverse(-phi, n, v - u, kc, kd, soft, s.param("tool_mu", k),
                                                             eps, f_bar)
                offset_bar, half_bar = laws.rounded_box_reverse(offset, half, -d_bar, n_bar)
                p_bar += offset_bar
                v_bar += vb
                bar.add_state("tool_pos", k, -offset_bar)
                self.add_velocity(s, bar, k, -vb - s.dt * offset_bar)
                bar.add_param("tool_half", k, half_bar)
                bar.add_param("tool_radius", k, d_bar)
                bar.add_param("tool_mu", k, lb[3])
                law_bar += lb
        for k, name in ti.static(enumerate(("kc", "kd", "softness"))):
            bar.add_param(name, 0, law_bar[k])
        bar.add_param("eps", 0, law_bar[4])
        return p_bar, v_bar
