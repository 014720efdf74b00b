"""MPM material shaped by kinematic tools: the actions are the tools' velocities (PlasticineLab's setting).

The material is MPM's (tisim/systems/mpm/system.py: the same materials, walls and options); the tools are rounded
boxes that push it through the grid (tisim/systems/mpm/tools.py). Each step adds a phase that moves the tools,
x_tool' = x_tool + dt u, and the grid phase applies each tool, in order, after the walls. Every phase keeps its
hand-written reverse, so on a CPU the backward pass stays one launch.
"""
import numpy as np
import taichi as ti

from tisim.core.model import check_run
from tisim.core.quantities import Quantity
from tisim.systems.mpm import tools as laws
from tisim.systems.mpm.body import Body
from tisim.systems.mpm.system import BAND, MPM
from tisim.systems.mpm.tools import Tool


class Shaping(laws.DrivenTools, MPM):
    """A body of MPM material (default: a 2D block of von Mises clay on the floor) and kinematic tools that move as
    the actions say: tools, a list of tisim.systems.mpm.Tool (their start, shape and friction; default: a 3 cm disc
    1 cm above the default block's middle); the actions are the tools' velocities, shape (T, n_tools, dim). The
    material's points take no activation (a body with actuators is refused). The tools' sizes, friction and softness
    are parameters like the material's, so they can be fitted."""

    PARAMS = MPM.PARAMS + laws.SHAPES + (
        Quantity("tool_softness", 0.002, "m", "length over which a tool's reach fades outside its surface",
                 bounds="(0, inf)"),
    )
    STATE = MPM.STATE + (laws.PLACE,)
    ACTION = (laws.DRIVE,)
    STRUCTURE = MPM.STRUCTURE + ("n_tools",)
    PHASES = (("tools", "n_tools"),) + MPM.PHASES
    FUSED = dict(MPM.FUSED, tools=("tools_fused", "n_tools"))
    REVERSES = dict(MPM.REVERSES, tools=("tools_reverse", "n_tools"))

    FREE = False  # the tools feel nothing back (Coupled's do)

    def __init__(self, horizon, batch=1, dt=None, body=None, n_grid=32, tools=None, **values):
        name = type(self).__name__
        check_run(name, horizon, batch, dt)
        if body is None and isinstance(n_grid, (int, np.integer)) and n_grid > 0:
            # MPM checks n_grid itself, with its allowed range
            body = Body.box([0.4, BAND / n_grid], [0.6, BAND / n_grid + 0.1], 0.5 / n_grid)
            values.setdefault("material", "von_mises")
            if tools is None:
                tools = [Tool.sphere([0.5, BAND / n_grid + 0.14], 0.03)]
        known = isinstance(body, Body)  # else MPM names what body must be
        start = laws.take_tools(name, tools, body.dim if known else None, values,
                                known and bool(np.any(body.actuators >= 0)))
        super().__init__(horizon, batch, dt, body, n_grid, n_tools=len(tools), **values)
        if start is not None:
            self.set_initial_state(tool_pos=start)

    # ---- the material's points take no activation ----------------------------------------------------------------
    @ti.func
    def activation(self, s: ti.template(), p):
        return 0.0

    @ti.func
    def add_activation(self, bar: ti.template(), p, value):
        pass

    # ---- the grid: the walls, then each tool ---------------------------------------------------------------------
    @ti.func
    def node(self, c):
        """Cell c's node position [m]."""
        return ti.Vector([ti.cast((c // self.n_grid ** k) % self.n_grid, float) for k in ti.static(range(self.dim))]) \
            / self.n_grid

    @ti.func
    def shape(self, s: ti.template(), c, k):
        """(phi, n): tool k's signed distance at cell c's node and its outward normal there."""
        return laws.rounded_box(self.node(c) - self.moved(s, k), s.param("tool_half", k), s.param("tool_radius", k))

    @ti.func
    def shape_reverse(self, s: ti.template(), bar: ti.template(), c, k, phi_bar, n_bar):
        """Add the derivatives of shape(s, c, k), given phi_bar and n_bar, into what it came from."""
        d_bar, half_bar = laws.rounded_box_reverse(self.node(c) - self.moved(s, k), s.param("tool_half", k), phi_bar,
                                                   n_bar)
        self.add_moved(s, bar, k, -d_bar)
        bar.add_param("tool_half", k, half_bar)
        bar.add_param("tool_radius", k, -phi_bar)

    @ti.func
    def surface_velocity(self, s: ti.template(), c, k):
        """The velocity of tool k's material at cell c's node: the tool's (it does not turn)."""
        return self.velocity(s, k)

    @ti.func
    def surface_velocity_reverse(self, s: ti.template(), bar: ti.template(), c, k, u_bar):
        self.add_velocity(s, bar, k, u_bar)

    @ti.func
    def pushed_by(self, s: ti.template(), c, v, k: ti.template()):
        """Cell c's velocity v after tool k's push."""
        phi, n = self.shape(s, c, k)
        return laws.push(v, self.surface_velocity(s, c, k), phi, n, s.param("tool_mu", k), s.param("tool_softness"))

    @ti.func
    def pushed(self, s: ti.template(), c, v, tools: ti.template()):
        """Cell c's velocity v after the first `tools` tools' pushes, in order."""
        result = v
        for k in ti.static(range(tools)):
            result = self.pushed_by(s, c, result, k)
        return result

    @ti.func
    def grid(self, s: ti.template(), c):
        v = self.walled(s, c)
        for k in ti.static(range(self.n_tools)):
            after = self.pushed_by(s, c, v, k)
            if ti.static(self.FREE):  # the momentum the push gives the cell, taken from the tool
                self.take_impulse(s, c, k, s.scratch("grid_mass", c) * (v - after))
            v = after
        s.assign("grid_velocity", c, v)

    @ti.func
    def grid_reverse(self, s: ti.template(), bar: ti.template(), c):
        v_bar = bar.scratch("grid_velocity", c)
        m = s.scratch("grid_mass", c)
        # else it adds nothing (the walls' reverse says why); a free tool's impulse reaches every cell with mass
        if ti.abs(v_bar).max() > 0.0 or (ti.static(self.FREE) and m > 0.0):
            walled, m_bar = self.walled(s, c), 0.0
            for j in ti.static(range(self.n_tools - 1, -1, -1)):
                v = self.pushed(s, c, walled, j)  # before tool j, as the grid computes it
                phi, n = self.shape(s, c, j)
                u, mu, softness = self.surface_velocity(s, c, j), s.param("tool_mu", j), s.param("tool_softness")
                impulse_bar = ti.Vector.zero(float, self.dim)
                if ti.static(self.FREE):  # the impulse m (v - after) on the tool
                    taken = v - laws.push(v, u, phi, n, mu, softness)
                    impulse_bar = self.take_impulse_reverse(s, bar, c, j, m * taken)
                    m_bar += impulse_bar.dot(taken)
                v_bar_in, u_bar, phi_bar, n_bar, mu_bar, softness_bar = laws.push_reverse(
                    v, u, phi, n, mu, softness, v_bar - m * impulse_bar)
                v_bar = v_bar_in + m * impulse_bar
                self.shape_reverse(s, bar, c, j, phi_bar, n_bar)
                self.surface_velocity_reverse(s, bar, c, j, u_bar)
                bar.add_param("tool_mu", j, mu_bar)
                bar.add_param("tool_softness", 0, softness_bar)
            self.walled_reverse(s, bar, c, v_bar)
            if ti.static(self.FREE):
                bar.accumulate("grid_mass", c, m_bar)
