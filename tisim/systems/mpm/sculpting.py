"""MPM material shaped by kinematic tools that move and turn: the actions are the tools' twists.

Shaping's tools (tisim/systems/mpm/shaping.py) keep their axes along the grid's; here each tool also has an
orientation (state) and the actions give it an angular velocity besides its velocity, so a capsule can lever and
scrape and a disc or a rolling pin can roll. In a step, tool k with velocity u_k and angular velocity w_k (its
action, tool_twist) moves and turns to

    2D: X_k' = X_k + dt u_k,  theta_k' = theta_k + dt w_k       (tool_angle, anticlockwise from the grid's axes)
    3D: X_k' = X_k + dt u_k,  q_k' = turn(w_k, dt) q_k           (tool_orientation, a quaternion; w_k about the
                                                                  grid's axes, tisim/physics/rotations.py)

and the material meets it there: a node at offset d = x - X_k' from its centre sees the rounded box in its turned
frame (its signed distance taken in the box's own frame, the normal turned back: tisim/systems/mpm/tools.py's
at_angle and turned_box) moving as a rigid body does there, u_k + w_k x d. The push is Shaping's (a moving wall with
Coulomb friction, fading outside the surface), so a spinning disc or sphere without friction leaves the material as
a still one does, and a rolling one (|w| = |u| / r at the contact) moves its surface with the material beneath it.
A held angular velocity turns a 3D tool exactly (the step's turn is the exponential, not its first-order part), and
any nonzero quaternion stands for its rotation, so rounding in its length never skews the tool.
"""
import numpy as np
import taichi as ti

from tisim.core.quantities import Quantity
from tisim.physics import rotations
from tisim.systems.mpm import tools as laws
from tisim.systems.mpm.body import Body
from tisim.systems.mpm.shaping import Shaping


class Sculpting(Shaping):
    """A body of MPM material (default: a 2D block of von Mises clay on the floor) and kinematic tools that move and
    turn as the actions say: tools, a list of tisim.systems.mpm.Tool (their start, shape and friction; default: a
    3 cm disc 1 cm above the block's middle). In 2D each tool starts at tool_angle (default 0: its axes along the
    grid's) and the actions, shape (T, n_tools, 3), are velocity (x, y) [m/s] and angular velocity [rad/s,
    anticlockwise]. In 3D each starts at tool_orientation (a quaternion; default: the identity) and the actions,
    shape (T, n_tools, 6), are velocity (x, y, z) [m/s] and angular velocity (x, y, z) [rad/s]."""

    STATE = Shaping.STATE + (Quantity("tool_angle", 0.0, "rad", "turn of each tool from the grid's axes, "
                                      "anticlockwise", shape=("n_tools",)),)
    ACTION = (Quantity("tool_twist", 0.0, "m/s, m/s, rad/s", "velocity (x, y) and angular velocity (anticlockwise) "
                       "of each tool during the step", shape=("n_tools", 3)),)

    def __new__(cls, horizon=None, batch=1, dt=None, body=None, *args, **kwargs):
        # a 3D body's tools turn by quaternions: the same physics, declared with their shapes (Sculpting3D)
        space = cls is Sculpting and isinstance(body, Body) and body.dim == 3
        return super().__new__(Sculpting3D if space else cls)

    def __init__(self, horizon, batch=1, dt=None, body=None, n_grid=32, tools=None, **values):
        super().__init__(horizon, batch, dt, body, n_grid, tools, **values)
        if self.dim == 3:
            self.set_initial_state(tool_orientation=np.tile([1.0, 0.0, 0.0, 0.0], (self.n_tools, 1)))

    def set_initial_state(self, **values):
        """As every system's; a 3D tool's orientation must be a nonzero quaternion."""
        if "tool_orientation" in values:
            q = np.asarray(values["tool_orientation"], dtype=float)
            if q.ndim and q.shape[-1] == 4 and np.any(np.sum(q * q, axis=-1) < 1e-12):
                raise ValueError("set_initial_state: tool_orientation must be nonzero quaternions (w, x, y, z), "
                                 "each of length at least 1e-6 (any such length stands for its rotation); one is "
                                 "shorter")
        super().set_initial_state(**values)

    # ---- the action: the velocity and the angular velocity -------------------------------------------------------
    @ti.func
    def velocity(self, s: ti.template(), k):
        a = s.action("tool_twist", k)
        return ti.Vector([a[i] for i in ti.static(range(self.dim))])

    @ti.func
    def add_velocity(self, s: ti.template(), bar: ti.template(), k, value):
        if ti.static(self.dim == 2):
            bar.add_action("tool_twist", k, ti.Vector([value[0], value[1], 0.0]))
        else:
            bar.add_action("tool_twist", k, ti.Vector([value[0], value[1], value[2], 0.0, 0.0, 0.0]))

    @ti.func
    def spin(self, s: ti.template(), k):
        """Tool k's angular velocity during the step [rad/s]: a number in 2D, a vector in 3D."""
        a = s.action("tool_twist", k)
        if ti.static(self.dim == 2):
            return a[2]
        else:
            return ti.Vector([a[3], a[4], a[5]])

    @ti.func
    def add_spin(self, s: ti.template(), bar: ti.template(), k, value):
        if ti.static(self.dim == 2):
            bar.add_action("tool_twist", k, ti.Vector([0.0, 0.0, value]))
        else:
            bar.add_action("tool_twist", k, ti.Vector([0.0, 0.0, 0.0, value[0], value[1], value[2]]))

    @ti.func
    def turned(self, s: ti.template(), k):
        """Tool k's orientation at the end of the step, where the body meets it: its angle in 2D, its quaternion in
        3D."""
        if ti.static(self.dim == 2):
            return s.state("tool_angle", k) + s.dt * self.spin(s, k)
        else:
            return rotations.product(rotations.turn(self.spin(s, k), s.dt), s.state("tool_orientation", k))

    @ti.func
    def add_turned(self, s: ti.template(), bar: ti.template(), k, value):
        if ti.static(self.dim == 2):
            bar.add_state("tool_angle", k, value)
            self.add_spin(s, bar, k, s.dt * value)
        else:
            w = self.spin(s, k)
            turn_bar, q_bar = rotations.product_reverse(rotations.turn(w, s.dt), s.state("tool_orientation", k),
                                                        value)
            bar.add_state("tool_orientation", k, q_bar)
            self.add_spin(s, bar, k, rotations.turn_reverse(w, s.dt, turn_bar))

    # ---- the tools' phase ------------------------------------------------------------------------------------------
    @ti.func
    def tools(self, s: ti.template(), k):
        s.advance("tool_pos", k, self.moved(s, k))
        if ti.static(self.dim == 2):
            s.advance("tool_angle", k, self.turned(s, k))
        else:
            s.advance("tool_orientation", k, self.turned(s, k))

    @ti.func
    def tools_fused(self, s: ti.template(), k):
        s.set_next("tool_pos", k, self.moved(s, k))
        if ti.static(self.dim == 2):
            s.set_next("tool_angle", k, self.turned(s, k))
        else:
            s.set_next("tool_orientation", k, self.turned(s, k))

    @ti.func
    def tools_reverse(self, s: ti.template(), bar: ti.template(), k):
        self.add_moved(s, bar, k, bar.next_state("tool_pos", k))
        if ti.static(self.dim == 2):
            self.add_turned(s, bar, k, bar.next_state("tool_angle", k))
        else:
            self.add_turned(s, bar, k, bar.next_state("tool_orientation", k))

    # ---- the grid: the turned shape, and the rigid motion at the node ---------------------------------------------
    @ti.func
    def shape(self, s: ti.template(), c, k):
        d, half, radius = self.node(c) - self.moved(s, k), s.param("tool_half", k), s.param("tool_radius", k)
        if ti.static(self.dim == 2):
            return laws.at_angle(d, self.turned(s, k), half, radius)
        else:
            phi, n = laws.turned_box(d, rotations.axes(self.turned(s, k)), half)
            return phi - radius, n

    @ti.func
    def shape_reverse(self, s: ti.template(), bar: ti.template(), c, k, phi_bar, n_bar):
        d, half = self.node(c) - self.moved(s, k), s.param("tool_half", k)
        turned = self.turned(s, k)
        if ti.static(self.dim == 2):
            d_bar, angle_bar, half_bar = laws.at_angle_reverse(d, turned, half, phi_bar, n_bar)
            self.add_moved(s, bar, k, -d_bar)
            self.add_turned(s, bar, k, angle_bar)
            bar.add_param("tool_half", k, half_bar)
        else:
            d_bar, axes_bar, half_bar = laws.turned_box_reverse(d, rotations.axes(turned), half, phi_bar, n_bar)
            self.add_moved(s, bar, k, -d_bar)
            self.add_turned(s, bar, k, rotations.axes_reverse(turned, axes_bar))
            bar.add_param("tool_half", k, half_bar)
        bar.add_param("tool_radius", k, -phi_bar)

    @ti.func
    def surface_velocity(self, s: ti.template(), c, k):
        """u + w x d: the tool's rigid motion at cell c's node, offset d from the tool's centre."""
        d, w = self.node(c) - self.moved(s, k), self.spin(s, k)
        if ti.static(self.dim == 2):
            return self.velocity(s, k) + w * ti.Vector([-d[1], d[0]])
        else:
            return self.velocity(s, k) + w.cross(d)

    @ti.func
    def surface_velocity_reverse(self, s: ti.template(), bar: ti.template(), c, k, u_bar):
        d, w = self.node(c) - self.moved(s, k), self.spin(s, k)
        self.add_velocity(s, bar, k, u_bar)
        if ti.static(self.dim == 2):
            self.add_spin(s, bar, k, u_bar.dot(ti.Vector([-d[1], d[0]])))
            self.add_moved(s, bar, k, -w * ti.Vector([u_bar[1], -u_bar[0]]))
        else:  # u_bar . (w x d) = w . (d x u_bar) = d . (u_bar x w)
            self.add_spin(s, bar, k, d.cross(u_bar))
            self.add_moved(s, bar, k, -u_bar.cross(w))


class Sculpting3D(Sculpting):
    """Sculpting with a 3D body, which Sculpting(body=<a 3D Body>, ...) makes: each tool's orientation is a
    quaternion and its twist has six entries (Sculpting's docstring)."""

    STATE = Shaping.STATE + (Quantity("tool_orientation", 0.0, "-", "orientation of each tool: a quaternion (w, x, "
                                      "y, z), of any nonzero length, turning the tool's frame into the grid's "
                                      "(default: 1, 0, 0, 0)", shape=("n_tools", 4)),)
    ACTION = (Quantity("tool_twist", 0.0, "m/s, rad/s", "velocity (x, y, z) and angular velocity (about the grid's "
                       "x, y and z) of each tool during the step", shape=("n_tools", 6)),)

    def __init__(self, horizon, batch=1, dt=None, body=None, n_grid=32, tools=None, **values):
        if not (isinstance(body, Body) and body.dim == 3):
            raise ValueError("Sculpting3D: body must be a 3D tisim.systems.mpm.Body (Sculpting takes either)")
        super().__init__(horizon, batch, dt, body, n_grid, tools, **values)
