"""MPM material and free rigid bodies that move and turn: Coupled's bodies, free to rotate (in 3D: Tumbling3D, below).

Coupled's bodies (tisim/systems/mpm/coupled.py) translate only. Here each also has an angle and an angular velocity
(state: tool_angle, tool_spin) and a moment of inertia about its centre (tool_inertia, per metre of depth; by
default a uniform body's of its shape and mass); the actions are wrenches, a force and a torque. In a step tool k,
with mass M, inertia I, velocity U and angular velocity W, moves as follows:

    u = U + dt (f / M - g e_y),  w = W + dt tau / I       as the material meets it, at X + dt u and theta + dt w,
                                                           its surface moving at u + w e_z x d (Sculpting's)
    grid phase                                             each cell the push changes gives back J_i = m_i (v - v'),
                                                           J = sum J_i and A = sum (x_i - X - dt u) x J_i
    U' = u + J / M,  W' = w + A / I,  X' = X + dt u,  theta' = theta + dt w

The body ends the step where the material met it, and takes the push's impulse into its velocity for the next step
(Coupled moves its bodies by the velocity after the push, X + dt U'). With the lever arms from that same place, a
frictionless disc, pushed along its normals only, gains no spin, and without gravity and walls the total angular
momentum about any point, the material's (sum m_p x_p x v_p and APIC's own part, m_p h^2 / 4 (C_yx - C_xy) on
MLS-MPM's quadratic weights) and the bodies' (X x M U + I W), stays what it was to rounding, as the momentum does.
The coupling is otherwise Coupled's, staggered, with its limits; the bodies meet the material, the walls and the floor
as Coupled's do (the walls stop their motion into them once their turned shape reaches one, not their turning), not
each other.
"""
import numpy as np
import taichi as ti

from tisim.core.quantities import Quantity, Scratch
from tisim.physics import rotations
from tisim.physics.contact import turned, turned_back
from tisim.systems.mpm.body import Body
from tisim.systems.mpm.coupled import Coupled
from tisim.systems.mpm.sculpting import Sculpting, Sculpting3D
from tisim.systems.mpm.system import BAND
from tisim.systems.mpm.tools import Tool


def second_moment(half, radius):
    """The polar second moment of area per unit area [m^2] of a 2D rounded box (half extents `half`, rounding
    `radius`) about its centre: a uniform body's I / M. The box, four side strips and four quarter discs."""
    a, b, r = float(half[0]), float(half[1]), float(radius)
    pieces = [(2 * a, 2 * b, 0.0, 0.0)] + [(r, 2 * b, s * (a + r / 2), 0.0) for s in (-1, 1)] \
        + [(2 * a, r, 0.0, s * (b + r / 2)) for s in (-1, 1)]
    area = sum(w * h for w, h, _, _ in pieces)
    moment = sum(w * h * ((w * w + h * h) / 12 + x * x + y * y) for w, h, x, y in pieces)
    quarter, e = np.pi * r * r / 4, 4 * r / (3 * np.pi)  # a quarter disc's area; its centroid's offset per axis
    # each of the four alike: about its corner pi r^4 / 8, moved to its centroid, then to the box's centre
    moment += 4 * (np.pi * r ** 4 / 8 - quarter * 2 * e * e + quarter * ((a + e) ** 2 + (b + e) ** 2))
    return moment / (area + 4 * quarter)


def principal_moments(half, radius, n=101):
    """The principal second moments (I_x, I_y, I_z) / M [m^2] of a uniform 3D rounded box (half extents `half`,
    rounding `radius`) about its centre and its own axes, by the midpoint rule on n^3 cells over its bounding box
    (off by 1 / n^2 for a box, 8e-4 for a ball)."""
    half = np.asarray(half, float)
    axes = [(np.arange(n) + 0.5) / n * 2 * e - e for e in half + radius]
    x, y, z = np.meshgrid(*axes, indexing="ij")
    outside = [np.maximum(np.abs(c) - h, 0.0) for c, h in zip((x, y, z), half)]
    inside = sum(o * o for o in outside) <= radius * radius + 1e-300
    x2, y2, z2 = (np.mean((c * c)[inside]) for c in (x, y, z))
    return np.array([y2 + z2, x2 + z2, x2 + y2])


class Tumbling(Coupled, Sculpting):
    """A body of MPM material and free rigid bodies that move and turn, tools=[tisim.systems.mpm.Tool, ...],
    pushing it and pushed back (default: a 9 by 3 cm capsule of 1 kg lying 1 cm above Coupled's block of clay).
    Each tool's angle and angular velocity are state (tool_angle, tool_spin), its moment of inertia a parameter
    (tool_inertia; default: a uniform body's of its shape and of the tool_mass given); the actions are wrenches on
    the tools besides their weight (tool_wrench, shape (T, n_tools, 3): force (x, y) and torque). The module's
    docstring gives the step. With a 3D body it makes a Tumbling3D (quaternions, three principal moments)."""

    PARAMS = Coupled.PARAMS + (
        Quantity("tool_inertia", 1.0, "kg m^2", "moment of inertia of each tool about its centre (2D: per metre of "
                 "depth)", shape=("n_tools",), bounds="(0, inf)"),
    )
    STATE = Coupled.STATE + Sculpting.STATE[-1:] + (
        Quantity("tool_spin", 0.0, "rad/s", "angular velocity of each tool, anticlockwise", shape=("n_tools",)),)
    ACTION = (Quantity("tool_wrench", 0.0, "N, N, N m", "force (x, y) and torque on each tool besides its weight "
                       "and the material's push (2D: per metre of depth)", shape=("n_tools", 3)),)
    SCRATCH = Coupled.SCRATCH + (Scratch("tool_angular_impulse", "N m s", "the material's angular impulse on each "
                                         "tool about its centre during the step", shape=("n_tools",), keep=False),)

    def __new__(cls, horizon=None, batch=1, dt=None, body=None, *args, **kwargs):
        # a 3D body's tools turn by quaternions, with three principal moments: Tumbling3D
        space = cls is Tumbling and isinstance(body, Body) and body.dim == 3
        return super().__new__(Tumbling3D if space else cls)

    def __init__(self, horizon, batch=1, dt=None, body=None, n_grid=32, tools=None, **values):
        if body is None and tools is None and isinstance(n_grid, (int, np.integer)) and n_grid > 0:
            # lying, so that its turn moves what it pushes; MPM checks n_grid itself
            tools = [Tool.capsule([0.5, BAND / n_grid + 0.125], 0.03, 0.015)]
        dim = body.dim if isinstance(body, Body) else 2
        if isinstance(tools, (list, tuple)) and tools and all(getattr(t, "dim", 0) == dim for t in tools) \
                and "tool_inertia" not in values:  # else Shaping names what tools must be
            mass = np.broadcast_to(np.asarray(values.get("tool_mass", 1.0), float), (len(tools),))
            moments = second_moment if dim == 2 else principal_moments
            values["tool_inertia"] = np.array([m * moments(t.half, t.radius) for m, t in zip(mass, tools)])
        super().__init__(horizon, batch, dt, body, n_grid, tools, **values)

    # ---- the action: a force and a torque ----------------------------------------------------------------------
    @ti.func
    def force(self, s: ti.template(), k):
        a = s.action("tool_wrench", k)
        return ti.Vector([a[0], a[1]])

    @ti.func
    def add_force(self, bar: ti.template(), k, value):
        bar.add_action("tool_wrench", k, ti.Vector([value[0], value[1], 0.0]))

    @ti.func
    def reach(self, s: ti.template(), k):
        """How far tool k's turned shape reaches from its centre along each of the grid's axes, at the step's start:
        a rounded box's outermost point along axis j lies sum_i |R_ji| half_i + radius out (R its rotation), so a
        turned body meets a wall where its corner does."""
        half, radius = s.param("tool_half", k), s.param("tool_radius", k)
        if ti.static(self.dim == 2):
            angle = s.state("tool_angle", k)
            c, n = ti.abs(ti.cos(angle)), ti.abs(ti.sin(angle))
            return ti.Vector([c * half[0] + n * half[1], n * half[0] + c * half[1]]) + radius
        else:
            return ti.abs(rotations.axes(s.state("tool_orientation", k))) @ half + radius

    @ti.func
    def moved(self, s: ti.template(), k):
        """Tool k's centre at the end of the step, where the material meets it: moved by its velocity, less what
        would take it further into a wall (Coupled's kept)."""
        u = self.velocity(s, k)
        return s.state("tool_pos", k) + s.dt * u * self.kept(s, k, u)

    @ti.func
    def add_moved(self, s: ti.template(), bar: ti.template(), k, value):
        bar.add_state("tool_pos", k, value)
        self.add_velocity(s, bar, k, s.dt * value * self.kept(s, k, self.velocity(s, k)))

    @ti.func
    def spin(self, s: ti.template(), k):
        """Tool k's angular velocity as the material meets it: its own moved on by the action's torque."""
        return s.state("tool_spin", k) + s.dt * s.action("tool_wrench", k)[2] / s.param("tool_inertia", k)

    @ti.func
    def add_spin(self, s: ti.template(), bar: ti.template(), k, value):
        inertia = s.param("tool_inertia", k)
        bar.add_state("tool_spin", k, value)
        bar.add_action("tool_wrench", k, ti.Vector([0.0, 0.0, s.dt / inertia * value]))
        bar.add_param("tool_inertia", k, -s.dt * value * s.action("tool_wrench", k)[2] / (inertia * inertia))

    # ---- the grid gives back an impulse and an angular impulse -----------------------------------------------------
    @ti.func
    def take_impulse(self, s: ti.template(), c, k, J):
        d = self.node(c) - self.moved(s, k)
        s.accumulate("tool_impulse", k, J)
        s.accumulate("tool_angular_impulse", k, d[0] * J[1] - d[1] * J[0])

    @ti.func
    def take_impulse_reverse(self, s: ti.template(), bar: ti.template(), c, k, J):
        d, A_bar = self.node(c) - self.moved(s, k), bar.scratch("tool_angular_impulse", k)
        self.add_moved(s, bar, k, -A_bar * ti.Vector([J[1], -J[0]]))
        return bar.scratch("tool_impulse", k) + A_bar * ti.Vector([-d[1], d[0]])

    # ---- the tools' phase: Coupled's, and the turn ---------------------------------------------------------------
    @ti.func
    def spun_back(self, s: ti.template(), k):
        """Tool k's angular velocity at the end of the step: the material's angular impulse added."""
        return self.spin(s, k) + s.scratch("tool_angular_impulse", k) / s.param("tool_inertia", k)

    @ti.func
    def tools(self, s: ti.template(), k):
        s.advance("tool_vel", k, self.pushed_back(s, k))
        s.advance("tool_spin", k, self.spun_back(s, k))
        s.advance("tool_pos", k, self.moved(s, k))
        s.advance("tool_angle", k, self.turned(s, k))

    @ti.func
    def tools_fused(self, s: ti.template(), k):
        s.set_next("tool_vel", k, self.pushed_back(s, k))
        s.set_next("tool_spin", k, self.spun_back(s, k))
        s.set_next("tool_pos", k, self.moved(s, k))
        s.set_next("tool_angle", k, self.turned(s, k))

    @ti.func
    def tools_reverse(self, s: ti.template(), bar: ti.template(), k):
        M, inertia = s.param("tool_mass", k), s.param("tool_inertia", k)
        impulse, A = s.scratch("tool_impulse", k), s.scratch("tool_angular_impulse", k)
        U_bar = bar.next_state("tool_vel", k) * self.kept(s, k, self.velocity(s, k) + impulse / M)
        W_bar = bar.next_state("tool_spin", k)
        bar.accumulate("tool_impulse", k, U_bar / M)
        bar.add_param("tool_mass", k, -U_bar.dot(impulse) / (M * M))
        bar.accumulate("tool_angular_impulse", k, W_bar / inertia)
        bar.add_param("tool_inertia", k, -W_bar * A / (inertia * inertia))
        self.add_velocity(s, bar, k, U_bar)
        self.add_spin(s, bar, k, W_bar)
        self.add_moved(s, bar, k, bar.next_state("tool_pos", k))
        self.add_turned(s, bar, k, bar.next_state("tool_angle", k))


@ti.func
def through(axes, moments, v):
    """axes diag(moments) axes^T v: the tensor whose principal values along the columns of `axes` are `moments`,
    applied to v (an inertia about a body's axes, or its inverse, in the world's)."""
    return turned(axes, moments * turned_back(axes, v))


@ti.func
def through_reverse(axes, moments, v, bar):
    """(axes_bar, moments_bar, v_bar) of through(axes, moments, v) given bar."""
    local = turned_back(axes, v)
    local_bar = turned_back(axes, bar)
    return bar.outer_product(moments * local) + v.outer_product(moments * local_bar), local_bar * local, \
        turned(axes, moments * local_bar)


class Tumbling3D(Tumbling):
    """Tumbling with a 3D body, which Tumbling(body=<a 3D Body>, ...) makes. Each tool's orientation is a quaternion
    (tool_orientation, Sculpting's), its angular velocity a vector in the grid's frame (tool_spin), its inertia three
    principal moments about its own axes (tool_inertia; default: a uniform body's of its shape and mass), and the
    actions six-entry wrenches, force and torque. In a step, with R and R' the tool's axes at its start and its end:

        w = W + dt I_R^-1 tau                                       (I_R = R diag(I) R^T)
        q_h = turn(w, dt / 2) q,  q' = turn(I_Rh^-1 I_R w, dt) q    (R_h: q_h's axes; the explicit midpoint)
        L' = I_R W + dt tau + A                                     A: the material's angular impulse about X'
        W' = I_R'^-1 L'

    so the angular momentum the body ends with is what it started with, the torque's and the material's added: a body
    flying free keeps its angular momentum exactly while its angular velocity turns with it, and its orientation is
    second order in dt (the material meets its surface moving at u + w x d)."""

    PARAMS = Coupled.PARAMS + (
        Quantity("tool_inertia", 1.0, "kg m^2", "principal moments of inertia of each tool about its centre and its "
                 "own axes", shape=("n_tools", 3), bounds="(0, inf)"),
    )
    STATE = Coupled.STATE + Sculpting3D.STATE[-1:] + (
        Quantity("tool_spin", 0.0, "rad/s", "angular velocity of each tool about the grid's axes",
                 shape=("n_tools", 3)),)
    ACTION = (Quantity("tool_wrench", 0.0, "N, N m", "force (x, y, z) and torque (about the grid's axes) on each tool "
                       "besides its weight and the material's push", shape=("n_tools", 6)),)
    SCRATCH = Coupled.SCRATCH + (Scratch("tool_angular_impulse", "N m s", "the material's angular impulse on each "
                                         "tool about its centre during the step", shape=("n_tools", 3), keep=False),)

    def __init__(self, horizon, batch=1, dt=None, body=None, n_grid=32, tools=None, **values):
        if not (isinstance(body, Body) and body.dim == 3):
            raise ValueError("Tumbling3D: body must be a 3D tisim.systems.mpm.Body (Tumbling takes either)")
        super().__init__(horizon, batch, dt, body, n_grid, tools, **values)

    # ---- the action: a force and a torque ----------------------------------------------------------------------
    @ti.func
    def force(self, s: ti.template(), k):
        a = s.action("tool_wrench", k)
        return ti.Vector([a[0], a[1], a[2]])

    @ti.func
    def add_force(self, bar: ti.template(), k, value):
        bar.add_action("tool_wrench", k, ti.Vector([value[0], value[1], value[2], 0.0, 0.0, 0.0]))

    @ti.func
    def torque(self, s: ti.template(), k):
        a = s.action("tool_wrench", k)
        return ti.Vector([a[3], a[4], a[5]])

    @ti.func
    def add_torque(self, bar: ti.template(), k, value):
        bar.add_action("tool_wrench", k, ti.Vector([0.0, 0.0, 0.0, value[0], value[1], value[2]]))

    @ti.func
    def spin(self, s: ti.template(), k):
        """Tool k's angular velocity as the material meets it: its own moved on by the action's torque."""
        axes = rotations.axes(s.state("tool_orientation", k))
        return s.state("tool_spin", k) + s.dt * through(axes, 1.0 / s.param("tool_inertia", k), self.torque(s, k))

    @ti.func
    def add_spin(self, s: ti.template(), bar: ti.template(), k, value):
        q, inertia = s.state("tool_orientation", k), s.param("tool_inertia", k)
        axes_bar, inverse_bar, torque_bar = through_reverse(rotations.axes(q), 1.0 / inertia, self.torque(s, k),
                                                            s.dt * value)
        bar.add_state("tool_spin", k, value)
        self.add_torque(bar, k, torque_bar)
        bar.add_param("tool_inertia", k, -inverse_bar / (inertia * inertia))
        bar.add_state("tool_orientation", k, rotations.axes_reverse(q, axes_bar))

    # ---- the turn: at the angular velocity of the step's middle ------------------------------------------------
    @ti.func
    def turned(self, s: ti.template(), k):
        """Tool k's orientation at the end of the step: turned by the angular velocity its angular momentum I_R w
        gives it halfway, where turning by w for half the step puts it (explicit midpoint: second order in dt)."""
        q, w, inertia = s.state("tool_orientation", k), self.spin(s, k), s.param("tool_inertia", k)
        halfway = rotations.product(rotations.turn(w, 0.5 * s.dt), q)
        middle = through(rotations.axes(halfway), 1.0 / inertia, through(rotations.axes(q), inertia, w))
        return rotations.product(rotations.turn(middle, s.dt), q)

    @ti.func
    def add_turned(self, s: ti.template(), bar: ti.template(), k, value):
        q, w, inertia = s.state("tool_orientation", k), self.spin(s, k), s.param("tool_inertia", k)
        halfway = rotations.product(rotations.turn(w, 0.5 * s.dt), q)
        start, between = rotations.axes(q), rotations.axes(halfway)
        momentum = through(start, inertia, w)
        middle = through(between, 1.0 / inertia, momentum)
        turn_bar, q_bar = rotations.product_reverse(rotations.turn(middle, s.dt), q, value)
        between_bar, inverse_bar, momentum_bar = through_reverse(between, 1.0 / inertia, momentum,
                                                                 rotations.turn_reverse(middle, s.dt, turn_bar))
        start_bar, inertia_bar, w_bar = through_reverse(start, inertia, w, momentum_bar)
        half_turn_bar, q_half_bar = rotations.product_reverse(rotations.turn(w, 0.5 * s.dt), q,
                                                              rotations.axes_reverse(halfway, between_bar))
        bar.add_state("tool_orientation", k, q_bar + q_half_bar + rotations.axes_reverse(q, start_bar))
        bar.add_param("tool_inertia", k, inertia_bar - inverse_bar / (inertia * inertia))
        self.add_spin(s, bar, k, w_bar + rotations.turn_reverse(w, 0.5 * s.dt, half_turn_bar))

    # ---- the grid gives back an impulse and an angular impulse -----------------------------------------------------
    @ti.func
    def take_impulse(self, s: ti.template(), c, k, J):
        s.accumulate("tool_impulse", k, J)
        s.accumulate("tool_angular_impulse", k, (self.node(c) - self.moved(s, k)).cross(J))

    @ti.func
    def take_impulse_reverse(self, s: ti.template(), bar: ti.template(), c, k, J):
        d, A_bar = self.node(c) - self.moved(s, k), bar.scratch("tool_angular_impulse", k)
        self.add_moved(s, bar, k, -J.cross(A_bar))
        return bar.scratch("tool_impulse", k) + A_bar.cross(d)

    # ---- the tools' phase: the angular momentum after the push, in the turned body -------------------------------
    @ti.func
    def angular_momentum(self, s: ti.template(), k):
        """Tool k's angular momentum at the end of the step, L' = I_R W + dt tau + A."""
        axes = rotations.axes(s.state("tool_orientation", k))
        return through(axes, s.param("tool_inertia", k), s.state("tool_spin", k)) + s.dt * self.torque(s, k) \
            + s.scratch("tool_angular_impulse", k)

    @ti.func
    def spun_back(self, s: ti.template(), k):
        """Tool k's angular velocity at the end of the step: its angular momentum through its turned inertia."""
        return through(rotations.axes(self.turned(s, k)), 1.0 / s.param("tool_inertia", k), self.angular_momentum(s, k))

    @ti.func
    def tools(self, s: ti.template(), k):
        s.advance("tool_vel", k, self.pushed_back(s, k))
        s.advance("tool_spin", k, self.spun_back(s, k))
        s.advance("tool_pos", k, self.moved(s, k))
        s.advance("tool_orientation", k, self.turned(s, k))

    @ti.func
    def tools_fused(self, s: ti.template(), k):
        s.set_next("tool_vel", k, self.pushed_back(s, k))
        s.set_next("tool_spin", k, self.spun_back(s, k))
        s.set_next("tool_pos", k, self.moved(s, k))
        s.set_next("tool_orientation", k, self.turned(s, k))

    @ti.func
    def tools_reverse(self, s: ti.template(), bar: ti.template(), k):
        M, inertia, impulse = s.param("tool_mass", k), s.param("tool_inertia", k), s.scratch("tool_impulse", k)
        U_bar = bar.next_state("tool_vel", k) * self.kept(s, k, self.velocity(s, k) + impulse / M)
        bar.accumulate("tool_impulse", k, U_bar / M)
        bar.add_param("tool_mass", k, -U_bar.dot(impulse) / (M * M))
        self.add_velocity(s, bar, k, U_bar)
        # W' = I_R'^-1 L', L' = I_R W + dt tau + A
        q, q_end = s.state("tool_orientation", k), self.turned(s, k)
        end_bar, inverse_bar, L_bar = through_reverse(rotations.axes(q_end), 1.0 / inertia,
                                                      self.angular_momentum(s, k), bar.next_state("tool_spin", k))
        start_bar, inertia_bar, W_bar = through_reverse(rotations.axes(q), inertia, s.state("tool_spin", k), L_bar)
        bar.add_state("tool_spin", k, W_bar)
        bar.add_param("tool_inertia", k, inertia_bar - inverse_bar / (inertia * inertia))
        bar.add_state("tool_orientation", k, rotations.axes_reverse(q, start_bar))
        self.add_torque(bar, k, s.dt * L_bar)
        bar.accumulate("tool_angular_impulse", k, L_bar)
        self.add_turned(s, bar, k, rotations.axes_reverse(q_end, end_bar) + bar.next_state("tool_orientation", k))
        self.add_moved(s, bar, k, bar.next_state("tool_pos", k))
