"""MPM material and free rigid bodies that push each other: two-way coupling through the grid.

The rigid bodies are tisim.systems.mpm.Tool shapes (rounded boxes: spheres, capsules, boxes) with a mass, a
velocity of their own (state, not action) and a force the actions give them. In a step, tool k moves as follows:

    u_k = U_k + dt (f_k / M_k - g e_y)    its velocity as the material meets it: its weight and the action's force
    grid phase                            each cell's velocity v -> v' by tool k's push (tisim/systems/mpm/tools.py)
                                          at the tool's velocity u_k and place X_k + dt u_k; the momentum the cell
                                          gains, m_i (v' - v), is taken from the tool: J_k = -sum_i m_i (v' - v)
    U_k' = u_k + J_k / M_k,  X_k' = X_k + dt U_k'

The material's momentum changes by exactly what the tools lose (the transfers conserve it: tisim/systems/mpm/system.py),
so without gravity and walls the total sum_p m_p v_p + sum_k M_k U_k stays what it was, to rounding. The coupling is
staggered: a cell takes the tool's velocity as if the tool were fixed, and the tool receives the reaction after. A
tool much lighter than the material it meets in a step can gain more than a collision would give it (the added-mass
limit of staggered schemes); the tests use tools heavier than the cells they touch. A tool resting on the material
settles when its reach fades over about a cell (tool_softness = h, the default here): with a sharper fade the rows of
nodes it holds change abruptly as it moves, and it chatters (a block on an elastic slab, softness h / 2, still moved
at 5 mm/s after 3 s, where with h it came to rest to 1e-6 m/s).

The bodies translate only (in 2D, Tumbling's turn): each keeps its axes along the grid's, as if on a carriage that
holds its rotation (a frictionless sphere, or a box pressed square on, is exact; an off-centre push that would turn a
free body does not).
They meet the material, and the walls and the floor as the material does (a free tool whose box reaches past one
stops moving into it, sliding along it without friction); not each other.
"""
import numpy as np
import taichi as ti

from tisim.core.quantities import Quantity, Scratch
from tisim.systems.mpm.shaping import Shaping
from tisim.systems.mpm.system import BAND, MPM


class Coupled(Shaping):
    """A body of MPM material and free rigid bodies, tools=[tisim.systems.mpm.Tool, ...], that it pushes and that
    push it back (default: a 3 cm disc of 1 kg dropped from 1 cm onto a 2D block of von Mises clay). Each tool's
    velocity is state (tool_vel) and its mass a parameter (tool_mass); the actions are forces on the tools besides
    their weight (tool_force, shape (T, n_tools, dim); zero: they fall freely). 2D masses and forces are per metre
    of depth, as the material's. The module's docstring gives the step and its limits."""

    PARAMS = Shaping.PARAMS + (
        Quantity("tool_mass", 1.0, "kg", "mass of each tool (2D: per metre of depth)", shape=("n_tools",),
                 bounds="(0, inf)"),
    )
    STATE = Shaping.STATE + (Quantity("tool_vel", 0.0, "m/s", "velocity of each tool", shape=("n_tools", "dim")),)
    ACTION = (Quantity("tool_force", 0.0, "N", "force on each tool besides its weight and the material's push (2D: "
                       "per metre of depth)", shape=("n_tools", "dim")),)
    SCRATCH = MPM.SCRATCH + (Scratch("tool_impulse", "N s", "the material's impulse on each tool during the step",
                                     shape=("n_tools", "dim"), keep=False),)
    # the tools move after the grid, which sums their impulses; gather stays last
    PHASES = MPM.PHASES[:3] + (("tools", "n_tools"),) + MPM.PHASES[3:]
    FREE = True

    def __init__(self, horizon, batch=1, dt=None, body=None, n_grid=32, tools=None, **values):
        # a tool resting on the material settles where its reach fades over about a cell; sharper, it chatters
        # (the module's docstring)
        if isinstance(n_grid, (int, np.integer)) and not isinstance(n_grid, bool) and n_grid > 0:
            values.setdefault("tool_softness", 1.0 / n_grid)
        super().__init__(horizon, batch, dt, body, n_grid, tools, **values)

    @ti.func
    def force(self, s: ti.template(), k):
        """The action's force on tool k."""
        return s.action("tool_force", k)

    @ti.func
    def add_force(self, bar: ti.template(), k, value):
        bar.add_action("tool_force", k, value)

    @ti.func
    def velocity(self, s: ti.template(), k):
        """Tool k's velocity as the material meets it: its velocity moved on by its weight and the action's force."""
        acceleration = self.force(s, k) / s.param("tool_mass", k) - s.param("g") * ti.Vector.unit(self.dim, 1, float)
        return s.state("tool_vel", k) + s.dt * acceleration

    @ti.func
    def add_velocity(self, s: ti.template(), bar: ti.template(), k, value):
        M = s.param("tool_mass", k)
        bar.add_state("tool_vel", k, value)
        self.add_force(bar, k, s.dt / M * value)
        bar.add_param("tool_mass", k, -s.dt * value.dot(self.force(s, k)) / (M * M))
        bar.add_param("g", 0, -s.dt * value[1])

    @ti.func
    def take_impulse(self, s: ti.template(), c, k, J):
        """Give tool k the impulse J = m (v - v') that its push took from cell c's momentum."""
        s.accumulate("tool_impulse", k, J)

    @ti.func
    def take_impulse_reverse(self, s: ti.template(), bar: ti.template(), c, k, J):
        """The derivative with respect to J of what take_impulse(s, c, k, J) added (anything else it depends on
        gets its part here)."""
        return bar.scratch("tool_impulse", k)

    @ti.func
    def reach(self, s: ti.template(), k):
        """How far tool k's shape reaches from its centre along each of the grid's axes: the half extents of the box
        that bounds it."""
        return s.param("tool_half", k) + s.param("tool_radius", k)

    @ti.func
    def kept(self, s: ti.template(), k, U):
        """1 per axis, or 0 where tool k's box reaches past a wall (the walls' BAND cells in, as the material's) and
        the velocity U would take it further: a free tool stops moving into the walls and the floor, sliding along
        them without friction."""
        reach = self.reach(s, k)
        X, low, high = s.state("tool_pos", k), BAND / self.n_grid, 1.0 - BAND / self.n_grid
        return ti.Vector([1.0 - ti.select((X[j] - reach[j] <= low and U[j] < 0.0)
                                          or (X[j] + reach[j] >= high and U[j] > 0.0), 1.0, 0.0)
                          for j in ti.static(range(self.dim))])

    @ti.func
    def pushed_back(self, s: ti.template(), k):
        """Tool k's velocity at the end of the step: the material's impulse added, then the walls'."""
        U = self.velocity(s, k) + s.scratch("tool_impulse", k) / s.param("tool_mass", k)
        return U * self.kept(s, k, U)

    @ti.func
    def tools(self, s: ti.template(), k):
        U = self.pushed_back(s, k)
        s.advance("tool_vel", k, U)
        s.advance("tool_pos", k, s.state("tool_pos", k) + s.dt * U)

    @ti.func
    def tools_fused(self, s: ti.template(), k):
        U = self.pushed_back(s, k)
        s.set_next("tool_vel", k, U)
        s.set_next("tool_pos", k, s.state("tool_pos", k) + s.dt * U)

    @ti.func
    def tools_reverse(self, s: ti.template(), bar: ti.template(), k):
        M = s.param("tool_mass", k)
        pos_bar = bar.next_state("tool_pos", k)
        pushed = self.velocity(s, k) + s.scratch("tool_impulse", k) / M
        U_bar = (bar.next_state("tool_vel", k) + s.dt * pos_bar) * self.kept(s, k, pushed)
        bar.add_state("tool_pos", k, pos_bar)
        bar.accumulate("tool_impulse", k, U_bar / M)
        bar.add_param("tool_mass", k, -U_bar.dot(s.scratch("tool_impulse", k)) / (M * M))
        self.add_velocity(s, bar, k, U_bar)
