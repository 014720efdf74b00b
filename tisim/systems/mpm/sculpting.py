"""MPM material shaped by kinematic tools that move and turn: the actions are the tools' twists (2D).

Shaping's tools (tisim/systems/mpm/shaping.py) keep their axes along the grid's; here each tool also has an angle
(state, tool_angle, anticlockwise from the grid's axes) and the actions give it an angular velocity besides its
velocity, so a capsule can lever and scrape and a disc can roll. In a step, tool k with velocity u_k and angular
velocity w_k (its action, tool_twist = (u_x, u_y, w)) moves to

    X_k' = X_k + dt u_k,    theta_k' = theta_k + dt w_k,

and the material meets it there: a node at offset d = x - X_k' from its centre sees the rounded box at the angle
theta_k' (its signed distance in the box's own frame, tisim/systems/mpm/tools.py's at_angle) moving as a rigid
body does there, u_k + w_k e_z x d. The push is Shaping's (a moving wall with Coulomb friction, fading outside the
surface), so a spinning disc without friction leaves the material as a still one does, and a rolling one (w = -u / r
at the contact) moves its surface with the material beneath it. Tools turn in 2D only: in 3D the angle would be a
rotation (three numbers and their composition), which this system does not have.
"""
import taichi as ti

from tisim.core.quantities import Quantity
from tisim.systems.mpm import tools as laws
from tisim.systems.mpm.body import Body
from tisim.systems.mpm.shaping import Shaping


class Sculpting(Shaping):
    """A body of MPM material (default: a 2D block of von Mises clay on the floor) and kinematic tools that move and
    turn as the actions say: tools, a list of tisim.systems.mpm.Tool (their start, shape and friction; default: a
    3 cm disc 1 cm above the block's middle), each starting at tool_angle (default 0: its axes along the grid's); the
    actions are the tools' twists, shape (T, n_tools, 3): velocity (x, y) [m/s] and angular velocity [rad/s,
    anticlockwise]. 2D only (the module's docstring)."""

    STATE = Shaping.STATE + (Quantity("tool_angle", 0.0, "rad", "turn of each tool from the grid's axes, "
                                      "anticlockwise", shape=("n_tools",)),)
    ACTION = (Quantity("tool_twist", 0.0, "m/s, m/s, rad/s", "velocity (x, y) and angular velocity (anticlockwise) "
                       "of each tool during the step", shape=("n_tools", 3)),)

    def __init__(self, horizon, batch=1, dt=None, body=None, n_grid=32, tools=None, **values):
        dims = {t.dim for t in tools if isinstance(t, laws.Tool)} if isinstance(tools, (list, tuple)) else set()
        if isinstance(body, Body) and body.dim == 3 or 3 in dims:
            raise ValueError(f"{type(self).__name__}: tools turn in 2D only; in 3D, Shaping's and Coupled's tools "
                             "move without turning")
        super().__init__(horizon, batch, dt, body, n_grid, tools, **values)

    # ---- the action: the velocity and the angular velocity -------------------------------------------------------
    @ti.func
    def velocity(self, s: ti.template(), k):
        a = s.action("tool_twist", k)
        return ti.Vector([a[0], a[1]])

    @ti.func
    def add_velocity(self, s: ti.template(), bar: ti.template(), k, value):
        bar.add_action("tool_twist", k, ti.Vector([value[0], value[1], 0.0]))

    @ti.func
    def spin(self, s: ti.template(), k):
        """Tool k's angular velocity during the step [rad/s]."""
        return s.action("tool_twist", k)[2]

    @ti.func
    def add_spin(self, s: ti.template(), bar: ti.template(), k, value):
        bar.add_action("tool_twist", k, ti.Vector([0.0, 0.0, value]))

    @ti.func
    def turned(self, s: ti.template(), k):
        """Tool k's angle at the end of the step, where the body meets it."""
        return s.state("tool_angle", k) + s.dt * self.spin(s, k)

    @ti.func
    def add_turned(self, s: ti.template(), bar: ti.template(), k, value):
        bar.add_state("tool_angle", k, value)
        self.add_spin(s, bar, k, s.dt * value)

    # ---- the tools' phase ------------------------------------------------------------------------------------------
    @ti.func
    def tools(self, s: ti.template(), k):
        s.advance("tool_pos", k, self.moved(s, k))
        s.advance("tool_angle", k, self.turned(s, k))

    @ti.func
    def tools_fused(self, s: ti.template(), k):
        s.set_next("tool_pos", k, self.moved(s, k))
        s.set_next("tool_angle", k, self.turned(s, k))

    @ti.func
    def tools_reverse(self, s: ti.template(), bar: ti.template(), k):
        self.add_moved(s, bar, k, bar.next_state("tool_pos", k))
        self.add_turned(s, bar, k, bar.next_state("tool_angle", k))

    # ---- the grid: the turned shape, and the rigid motion at the node ---------------------------------------------
    @ti.func
    def shape(self, s: ti.template(), c, k):
        return laws.at_angle(self.node(c) - self.moved(s, k), self.turned(s, k), s.param("tool_half", k),
                             s.param("tool_radius", k))

    @ti.func
    def shape_reverse(self, s: ti.template(), bar: ti.template(), c, k, phi_bar, n_bar):
        d_bar, angle_bar, half_bar = laws.at_angle_reverse(self.node(c) - self.moved(s, k), self.turned(s, k),
                                                           s.param("tool_half", k), phi_bar, n_bar)
        self.add_moved(s, bar, k, -d_bar)
        self.add_turned(s, bar, k, angle_bar)
        bar.add_param("tool_half", k, half_bar)
        bar.add_param("tool_radius", k, -phi_bar)

    @ti.func
    def surface_velocity(self, s: ti.template(), c, k):
        """u + w e_z x d: the tool's rigid motion at cell c's node, offset d from the tool's centre."""
        d = self.node(c) - self.moved(s, k)
        return self.velocity(s, k) + self.spin(s, k) * ti.Vector([-d[1], d[0]])

    @ti.func
    def surface_velocity_reverse(self, s: ti.template(), bar: ti.template(), c, k, u_bar):
        d, w = self.node(c) - self.moved(s, k), self.spin(s, k)
        self.add_velocity(s, bar, k, u_bar)
        self.add_spin(s, bar, k, u_bar.dot(ti.Vector([-d[1], d[0]])))
        self.add_moved(s, bar, k, -w * ti.Vector([u_bar[1], -u_bar[0]]))
