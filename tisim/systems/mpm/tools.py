"""Kinematic tools: rigid shapes that move as the actions say and push the material on MPM's grid.

A tool is a box of half extents b rounded by a radius r, so one law covers the shapes a gripper is made of: a sphere
(b = 0), a capsule (one half extent nonzero: in 2D a stadium), a box (r = 0) and a rounded box. Its signed distance
at an offset d from its centre, with q = |d| - b (per axis), is

    phi = |max(q, 0)| + min(max_k q_k, 0) - r,    n = grad phi (the outward normal),

the first term outside the box, the second inside. Shaping's and Coupled's tools keep their axes along the grid's;
Sculpting's and Tumbling's turn (2D: at_angle; 3D: turned_box, the box's shape in its own frame).

A tool acts on a grid cell after the walls (tisim/systems/mpm/system.py's grid phase), as a moving wall: with the
cell's velocity v, the tool's velocity u and the cell's velocity relative to it r = v - u, split into its normal
part v_n = r . n and its tangential part r_t = r - v_n n, a cell moving into the tool (v_n < 0) loses the normal part
and keeps of the tangential part what Coulomb's law leaves, |r_t| -> max(0, |r_t| + mu v_n); a cell moving away
keeps r. The tool's reach fades outside its surface over the softness length l:

    v' = v + w (r' - r),    w = exp(-max(phi, 0) / l),

so a cell inside the tool moves with it and one a few l outside is left alone; the derivatives with respect to the
tool's place and size are nonzero just before a touch (PlasticineLab's tools fade the same way). The tool's place
during a step is where it is at the step's end, x + dt u. Tools feel nothing back: they are kinematic.

Every function here has its hand-written reverse beside it, for the one-launch backward pass; the tests compare
them with Taichi's reverse mode and with central differences.
"""
from dataclasses import dataclass

import numpy as np
import taichi as ti

from tisim.core.quantities import Quantity
from tisim.physics.contact import turned, turned_back


@dataclass
class Tool:
    """One kinematic tool: its centre at the start [m], half extents of its box [m] (one per axis) and rounding
    radius [m], and its Coulomb friction coefficient with the material."""

    centre: np.ndarray
    half: np.ndarray = None  # default: zeros (a sphere of the radius)
    radius: float = 0.0
    mu: float = 0.0

    def __post_init__(self):
        self.centre = np.asarray(self.centre, dtype=np.float64)
        if self.centre.shape not in ((2,), (3,)) or not np.all(np.isfinite(self.centre)):
            raise ValueError(f"Tool: centre must be 2 or 3 finite coordinates, got {self.centre.tolist()}")
        self.half = np.zeros_like(self.centre) if self.half is None else np.asarray(self.half, dtype=np.float64)
        if self.half.shape != self.centre.shape or not np.all(np.isfinite(self.half)) or np.any(self.half < 0):
            raise ValueError(f"Tool: half must be {len(self.centre)} finite half extents >= 0 [m], got "
                             f"{np.ravel(self.half).tolist()}")
        for name in ("radius", "mu"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or \
                    not (np.isfinite(value) and value >= 0):
                raise ValueError(f"Tool: {name} must be a finite number >= 0, got {value!r}")
        if self.radius == 0 and np.any(self.half == 0):
            raise ValueError("Tool: a tool needs a radius > 0 or every half extent > 0 (it would have no inside)")

    @property
    def dim(self):
        return len(self.centre)

    @classmethod
    def sphere(cls, centre, radius, mu=0.0):
        """A sphere (in 2D a disc)."""
        return cls(centre, None, radius, mu)

    @classmethod
    def capsule(cls, centre, half_length, radius, axis=0, mu=0.0):
        """A capsule along the grid's axis `axis` (0: x, 1: y, 2: z): a segment of half length `half_length`
        rounded by `radius`."""
        half = np.zeros(len(np.ravel(centre)))
        if not 0 <= axis < len(half):
            raise ValueError(f"Tool.capsule: axis must be in [0, {len(half)}), got {axis!r}")
        half[axis] = half_length
        return cls(centre, half, radius, mu)

    @classmethod
    def box(cls, centre, half, radius=0.0, mu=0.0):
        """A box of half extents `half`, its edges rounded by `radius` (0: sharp)."""
        return cls(centre, half, radius, mu)


# The tools' quantities, declared alike by every system that has tools (Shaping, Coupled, Manipulation)
SHAPES = (
    Quantity("tool_half", 0.0, "m", "half extents of each tool's box", shape=("n_tools", "dim"), bounds="[0, inf)"),
    Quantity("tool_radius", 0.0, "m", "rounding radius of each tool's box", shape=("n_tools",), bounds="[0, inf)"),
    Quantity("tool_mu", 0.0, "-", "Coulomb friction coefficient between each tool and the body it touches",
             shape=("n_tools",), bounds="[0, inf)"),
)
PLACE = Quantity("tool_pos", 0.0, "m", "centre of each tool", shape=("n_tools", "dim"))
DRIVE = Quantity("tool_vel", 0.0, "m/s", "velocity of each tool during the step", shape=("n_tools", "dim"))


def take_tools(owner, tools, dim, values, actuated):
    """Check a system's tools (a non-empty list of Tool with `dim` coordinates; dim None: not known yet) and that
    its body has no actuators (actuated: whether it has), put the tools' sizes and friction into `values` where not
    given, and return their centres (None where tool_pos is given)."""
    if "n_tools" in values:
        raise ValueError(f"{owner}: n_tools is not a keyword: it is the number of tools; pass tools=")
    if not isinstance(tools, (list, tuple)) or not tools or not all(isinstance(t, Tool) for t in tools):
        raise ValueError(f"{owner}: tools must be a non-empty list of tisim.systems.mpm.Tool, got "
                         f"{type(tools).__name__}")
    if dim is not None and any(t.dim != dim for t in tools):
        raise ValueError(f"{owner}: every tool must have {dim} coordinates, as the body's")
    if actuated:
        raise ValueError(f"{owner}: the body must have no actuators (the actions move the tools)")
    for name, value in (("tool_half", [t.half for t in tools]), ("tool_radius", [t.radius for t in tools]),
                        ("tool_mu", [t.mu for t in tools])):
        values.setdefault(name, np.array(value))
    return None if "tool_pos" in values else np.array([t.centre for t in tools])


class DrivenTools:
    """Mixin of a phased system whose actions are its tools' velocities: the tools' phase, x_tool' = x_tool + dt u,
    with its fused form and its reverse. The body meets a tool where it is at the step's end."""

    @ti.func
    def velocity(self, s: ti.template(), k):
        """Tool k's velocity during the step: its action."""
        return s.action("tool_vel", k)

    @ti.func
    def add_velocity(self, s: ti.template(), bar: ti.template(), k, value):
        """Add the derivative `value` with respect to tool k's velocity during the step into what it came from."""
        bar.add_action("tool_vel", k, value)

    @ti.func
    def moved(self, s: ti.template(), k):
        """Tool k's centre at the end of the step, where the body meets it."""
        return s.state("tool_pos", k) + s.dt * self.velocity(s, k)

    @ti.func
    def add_moved(self, s: ti.template(), bar: ti.template(), k, value):
        """Add the derivative `value` with respect to moved(s, k) into what it came from."""
        bar.add_state("tool_pos", k, value)
        self.add_velocity(s, bar, k, s.dt * value)

    @ti.func
    def tools(self, s: ti.template(), k):
        s.advance("tool_pos", k, self.moved(s, k))

    @ti.func
    def tools_fused(self, s: ti.template(), k):
        s.set_next("tool_pos", k, self.moved(s, k))

    @ti.func
    def tools_reverse(self, s: ti.template(), bar: ti.template(), k):
        moved_bar = bar.next_state("tool_pos", k)
        bar.add_state("tool_pos", k, moved_bar)
        self.add_velocity(s, bar, k, s.dt * moved_bar)


@ti.func
def sign_of(d):
    """Each entry's sign, +1 for 0."""
    return ti.Vector([ti.select(d[k] >= 0.0, 1.0, -1.0) for k in ti.static(range(d.n))])


@ti.func
def guarded_length(out):
    # the 1e-30 keeps the derivative finite at the box's surface and inside, where the outside form is computed and
    # not chosen (reverse mode multiplies a zero by sqrt's infinite slope there otherwise)
    return ti.sqrt(out.dot(out) + 1e-30)


@ti.func
def rounded_box(d, half, radius):
    """(phi, n): the signed distance of the point at offset d from the centre of a box of half extents `half`
    rounded by `radius`, and its gradient n (the outward normal; inside, the normal of the nearest face)."""
    q = ti.abs(d) - half
    out = ti.max(q, 0.0)
    length = guarded_length(out)
    deepest, axis = q[0], 0
    for k in ti.static(range(1, d.n)):
        axis = ti.select(q[k] > deepest, k, axis)
        deepest = ti.max(q[k], deepest)
    outside = deepest > 0.0
    face = ti.Vector([ti.select(k == axis, 1.0, 0.0) for k in ti.static(range(d.n))])
    n = sign_of(d) * ti.select(outside, out / length, face)
    return ti.select(outside, length, deepest) - radius, n


@ti.func
def rounded_box_reverse(d, half, phi_bar, n_bar):
    """(d_bar, half_bar) of rounded_box(d, half, radius) given the derivatives phi_bar and n_bar of what it
    returned (radius_bar is -phi_bar)."""
    q = ti.abs(d) - half
    sign = sign_of(d)
    q_bar = ti.Vector.zero(float, d.n)
    if q.max() > 0.0:
        out = ti.max(q, 0.0)
        length = guarded_length(out)
        m = out / length
        # phi = |out|, n = sign m with m = out / |out|: dm = (I - m m^T) dout / |out|
        pulled = sign * n_bar
        out_bar = phi_bar * m + (pulled - m.dot(pulled) * m) / length
        # q_k = 0 counts as outside: for a zero half extent, d_k = 0 (a sphere's centre in line with a node) is where
        # n_k = d_k / |d| passes smoothly through zero, and only that side gives its slope 1 / |d|
        q_bar = ti.Vector([ti.select(q[k] >= 0.0, out_bar[k], 0.0) for k in ti.static(range(d.n))])
    else:  # phi = q_axis, n constant
        deepest, axis = q[0], 0
        for k in ti.static(range(1, d.n)):
            axis = ti.select(q[k] > deepest, k, axis)
            deepest = ti.max(q[k], deepest)
        q_bar = phi_bar * ti.Vector([ti.select(k == axis, 1.0, 0.0) for k in ti.static(range(d.n))])
    return sign * q_bar, -q_bar


@ti.func
def turned_box(d, axes, half):
    """(phi, n) of a box whose axes are the columns of `axes` (a rotation), at offset d from its centre in the world:
    rounded_box in the box's frame (no rounding), the normal turned back into the world."""
    phi, n = rounded_box(turned_back(axes, d), half, 0.0)
    return phi, turned(axes, n)


@ti.func
def turned_box_reverse(d, axes, half, phi_bar, n_bar):
    """(d_bar, axes_bar, half_bar) of turned_box(d, axes, half) given phi_bar and n_bar."""
    local = turned_back(axes, d)
    _, n = rounded_box(local, half, 0.0)
    local_bar, half_bar = rounded_box_reverse(local, half, phi_bar, turned_back(axes, n_bar))
    # local = A^T d: d_bar = A local_bar, A_bar = d local_bar^T; the world normal A n: A_bar += n_bar n^T
    return turned(axes, local_bar), d.outer_product(local_bar) + n_bar.outer_product(n), half_bar


@ti.func
def rotated(cos, sin, v):
    """The 2D vector v turned anticlockwise by the angle whose cosine and sine are given."""
    return ti.Vector([cos * v[0] - sin * v[1], sin * v[0] + cos * v[1]])


@ti.func
def at_angle(d, angle, half, radius):
    """(phi, n) of a 2D rounded box turned anticlockwise by `angle` from the grid's axes, at offset d from its
    centre: rounded_box in the box's frame, the normal turned back into the grid's."""
    cos, sin = ti.cos(angle), ti.sin(angle)
    phi, n = rounded_box(rotated(cos, -sin, d), half, radius)
    return phi, rotated(cos, sin, n)


@ti.func
def at_angle_reverse(d, angle, half, phi_bar, n_bar):
    """(d_bar, angle_bar, half_bar) of at_angle(d, angle, half, radius) given phi_bar and n_bar (radius_bar is
    -phi_bar)."""
    cos, sin = ti.cos(angle), ti.sin(angle)
    local = rotated(cos, -sin, d)
    _, normal = rounded_box(local, half, 0.0)  # the rounding moves phi, not n
    local_bar, half_bar = rounded_box_reverse(local, half, phi_bar, rotated(cos, -sin, n_bar))
    n = rotated(cos, sin, normal)
    # local = R(-angle) d turns by (local_y, -local_x) per radian, the world normal R(angle) normal by (-n_y, n_x)
    angle_bar = local_bar.dot(ti.Vector([local[1], -local[0]])) + n_bar.dot(ti.Vector([-n[1], n[0]]))
    return rotated(cos, sin, local_bar), angle_bar, half_bar


@ti.func
def push(v, u, phi, n, mu, softness):
    """The velocity of a cell moving at v after a tool moving at u, whose surface lies at signed distance phi with
    normal n, acted on it (the module's docstring)."""
    r = v - u
    normal = r.dot(n)
    tangential = r - normal * n
    speed = ti.sqrt(tangential.dot(tangential) + 1e-30)  # the 1e-30 guards 0 / 0 on a head-on push
    kept = ti.max(0.0, 1.0 + mu * normal / speed)
    pushed = ti.select(normal < 0.0, kept * tangential, r)
    return v + ti.exp(-ti.max(phi, 0.0) / softness) * (pushed - r)


@ti.func
def push_reverse(v, u, phi, n, mu, softness, out_bar):
    """(v_bar, u_bar, phi_bar, n_bar, mu_bar, softness_bar) of push(v, u, phi, n, mu, softness) given out_bar, the
    derivative of what it returned."""
    r = v - u
    normal = r.dot(n)
    tangential = r - normal * n
    speed = ti.sqrt(tangential.dot(tangential) + 1e-30)
    ratio = 1.0 + mu * normal / speed
    kept = ti.max(0.0, ratio)
    approaching = normal < 0.0
    pushed = ti.select(approaching, kept * tangential, r)
    reach = ti.max(phi, 0.0)
    w = ti.exp(-reach / softness)
    w_bar = out_bar.dot(pushed - r)
    phi_bar = ti.select(phi > 0.0, -w / softness * w_bar, 0.0)
    softness_bar = w_bar * w * reach / (softness * softness)
    pushed_bar = w * out_bar
    r_bar = -w * out_bar
    normal_bar, n_bar, mu_bar = 0.0, ti.Vector.zero(float, v.n), 0.0
    if approaching:
        kept_bar = pushed_bar.dot(tangential)
        tangential_bar = kept * pushed_bar
        if ratio > 0.0:
            mu_bar = kept_bar * normal / speed
            normal_bar = kept_bar * mu / speed
            tangential_bar += (-kept_bar * mu * normal / (speed * speed * speed)) * tangential
        r_bar += tangential_bar
        normal_bar -= tangential_bar.dot(n)
        n_bar -= normal * tangential_bar
    else:
        r_bar += pushed_bar
    r_bar += normal_bar * n
    n_bar += normal_bar * r
    return out_bar + r_bar, -r_bar, phi_bar, n_bar, mu_bar, softness_bar
