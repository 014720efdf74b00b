"""Rigid discs and boxes in a vertical plane (x right, y up), with penalty contacts and regularized Coulomb friction,
or impulses from each contact's convex problem (contact="qp").

Bodies 0 .. n_discs-1 are discs of radius r, the rest boxes of half extents (hx, hy). Body i has mass m_i, moment of
inertia I_i = m r^2 / 2 (disc) or m (hx^2 + hy^2) / 3 (box: m (w^2 + h^2) / 12), centre p_i = (px, py), angle,
velocity v_i = (vx, vy) and angular velocity omega_i (angles anticlockwise):
    m_i v_i'     = sum_c F_c - m_i g e_y - drag m_i v_i + f_i
    I_i omega_i' = sum_c (c - p_i) x F_c - drag I_i omega_i + tau_i        (f_i, tau_i: the wrench action)
Contacts: disc-floor and box corner-floor (ground="on"; the floor is y = 0), disc-disc, disc-box (the box point closest
to the disc centre) and box-box (each box's corners against the other box: a vertex-face test, which misses edge-on-edge
touches, e.g. two equally wide boxes stacked exactly aligned). The geometry (tisim.physics.contact: disk_ground,
corner_ground, disk_disk, disk_box, corner_box) gives an overlap d, a normal n that pushes body a, and the point c in
the middle of the overlap. With w the velocity of a's material point at c relative to b's, vn = w.n and vt = w.t (t = n
turned +90 deg):
    fn = penalty_normal(d, vn, k, restitution_damping(e, k, m_ab), softness)   m_ab = m_a m_b / (m_a + m_b); floor: m_a
    ft = friction_clip_to_stop(friction_coulomb_tanh(vt, fn, mu, eps), vt, m_t, dt)
         m_t = 1 / sum over both bodies of (1 / m + ((c - p) x t)^2 / I): the effective mass at c along t
    F_c = fn n + ft t on body a at c, and -F_c on body b at the same point c.
Semi-implicit Euler (v and omega first, then p and the angle with the new velocities). It is linear in the forces, so
each force adds its own share to x[t+1] (push); each pair's forces are equal, opposite and act at one point, and
p' - p is parallel to v', so with g = 0, drag = 0, no floor and no wrench a step conserves the momentum sum m v and
the angular momentum sum (m p x v + I omega) exactly, to round-off.
Penetration: an impact at normal speed v sinks at most about v sqrt(m_ab / k) deep, the undamped spring's amplitude
(discretization adds 0.2% at dt sqrt(k / m_ab) = 0.12 and 2% at 0.39; m_ab overestimates the mass behind a box corner,
so corners sink less), plus the static sag m g / k of a resting body (shared between the corners of a box).
contact="qp": each contact's impulse p = (p_n, p_t) solves the contact's convex problem at the velocity level
(tisim.physics.complementarity.contact_impulse): with W the contact's Delassus matrix (the relative velocity change at
c per unit impulse, from both bodies' 1 / m and ((c - p) x n or t)^2 / I) and w* the relative velocity after the
contact-free step, p_n >= 0 keeps w_n >= b, complementary, and |p_t| <= mu p_n by maximal dissipation: apart,
stick or slip, exactly. b = d / dt closes the overlap by the step's end (a speculative contact: bodies never
interpenetrate), or for an impact (the free step would close the gap, at an approach speed above what one step of
the free accelerations adds) b = -e times the approach speed. The impulse enters the step as the force p / dt.
The contacts of a step are solved together, in phases (tisim/systems/rigid2d/impulses.py): a phase records each
contact's problem; with solver_gradient="implicit" (the default) over-relaxed projected Gauss-Seidel finds the
impulses (at most `sweeps` sweeps, default 64, stopping once a sweep changes nothing), never differentiated, and
the backward pass takes their derivative from the conditions the solution meets (the implicit function theorem,
one adjoint solve a step); with "unrolled", `sweeps` sweeps of Chebyshev-accelerated projected Jacobi are
differentiated as computed (a launch per sweep per step backward). A last phase moves the bodies. sweeps=1 solves
each contact alone, from the contact-free velocities, in a plain step (one kernel, no phases): exact where
contacts come in pairs (billiard balls), but a body with two contacts gets overlapping impulses, and a stack
creeps sideways by centimetres or falls.
k, softness and eps are penalty contact's and unused here.
Non-smooth parts: the contact switch at d = 0 (softened by softness > 0), the nearest-face and closest-point switches
of the box geometry, the friction clip, and which corners touch; in qp mode the stick-slip switch and the impact's.
The step loops over every (body, corner, body or floor) combination at run time, so a scene compiles in a few seconds
whatever its size (unrolled with ti.static, even two boxes take minutes to compile the backward pass: Taichi's
store-to-load forwarding grows with the square of the unrolled code); combinations that are not contacts (NONE) cost
an integer test. Each contact advances x[b, t+1] directly, so no local set before that loop is read inside it
(Taichi's reverse mode gets that wrong: docs/taichi_pitfalls.md#locals-across-a-dynamic-loop).
"""
import taichi as ti

from tisim.core.engine import System
from tisim.core.model import check_run
from tisim.core.quantities import Quantity, Size
from tisim.physics.contact import (
    corner_box,
    corner_ground,
    cross2,
    disk_box,
    disk_disk,
    disk_ground,
    friction_clip_to_stop,
    friction_coulomb_tanh,
    penalty_normal,
    restitution_damping,
    rotate,
)
from tisim.physics.integrators import semi_implicit_euler
from tisim.systems.rigid2d.impulses import AXES, SWEEPS, Impulses

NONE, DISK_DISK, DISK_BOX, CORNER_BOX, DISK_GROUND, CORNER_GROUND = range(6)  # kinds of contact


class Rigid2D(Impulses, System):
    """n_discs discs, then n_boxes boxes, in a vertical plane over an optional floor; the action: a wrench per body."""

    PARAMS = (
        Quantity("g", 9.8, "m/s^2", "gravitational acceleration (along -y)", bounds="[0, inf)"),
        Quantity("m", 1.0, "kg", "mass of each body", shape=("n_bodies",), bounds="(0, inf)"),
        Quantity("r", 0.1, "m", "radius of each disc", shape=("n_discs",), bounds="(0, inf)"),
        Quantity("hx", 0.1, "m", "half-width of each box", shape=("n_boxes",), bounds="(0, inf)"),
        Quantity("hy", 0.1, "m", "half-height of each box", shape=("n_boxes",), bounds="(0, inf)"),
        Quantity("k", 1e5, "N/m", "contact stiffness", bounds="(0, inf)"),
        Quantity("e", 0.5, "-", "coefficient of restitution of every contact", bounds="[0, 1]"),
        Quantity("softness", 0.0, "m", "softplus length of the contact activation; 0 = hard switch", bounds="[0, inf)"),
        Quantity("mu", 0.5, "-", "Coulomb coefficient of every contact", bounds="[0, inf)"),
        Quantity("eps", 0.01, "m/s", "velocity scale of the regularized friction law", bounds="(0, inf)"),
        Quantity("drag", 0.0, "1/s", "linear drag rate of every body's velocity and angular velocity",
                 bounds="[0, inf)"),
    )
    STATE = (
        Quantity("px", 0.0, "m", "horizontal position of each body's centre", shape=("n_bodies",)),
        Quantity("py", 1.0, "m", "height of each body's centre", shape=("n_bodies",)),
        Quantity("angle", 0.0, "rad", "orientation of each body, anticlockwise", shape=("n_bodies",)),
        Quantity("vx", 0.0, "m/s", "horizontal velocity of each body", shape=("n_bodies",)),
        Quantity("vy", 0.0, "m/s", "vertical velocity of each body", shape=("n_bodies",)),
        Quantity("omega", 0.0, "rad/s", "angular velocity of each body, anticlockwise", shape=("n_bodies",)),
    )
    ACTION = (Quantity("wrench", 0.0, "N, N, N m", "force (fx, fy) on each body's centre and torque about it",
                       shape=("n_bodies", 3)),)
    STRUCTURE = (Size("n_discs", 1, minimum=0), Size("n_boxes", 0, minimum=0), "sweeps", "n_bodies", "n_contacts",
                 "n_sweep_contacts", "n_sweep_bodies")
    OPTIONS = {"ground": ("on", "off"), "contact": ("penalty", "qp"), "solver_gradient": ("implicit", "unrolled")}
    DT = 1e-3

    def __init__(self, horizon, batch=1, dt=None, *, n_discs=1, n_boxes=0, sweeps=None,
                 **values):
        check_run("Rigid2D", horizon, batch, dt)
        for key, count in (("n_discs", n_discs), ("n_boxes", n_boxes)):
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"Rigid2D: {key} must be an integer >= 0, got {count!r}")
        if n_discs + n_boxes < 1:
            raise ValueError("Rigid2D: needs at least one body (n_discs + n_boxes >= 1), got none")
        for key in ("n_bodies", "n_contacts", "n_sweep_contacts", "n_sweep_bodies"):
            if key in values:
                raise ValueError(f"Rigid2D: {key} follows from n_discs and n_boxes; pass those instead")
        for key in ("sweeps", "solver_gradient"):
            given = sweeps if key == "sweeps" else values.get(key)
            valid = key == "sweeps" or given in self.OPTIONS[key]  # else the engine names the choices
            if given is not None and valid and values.get("contact", "penalty") != "qp":
                raise ValueError(f"Rigid2D: {key} applies to contact='qp' (its contact solve), got {key}={given!r} "
                                 f"with contact={values.get('contact', 'penalty')!r}")
        sweeps = (SWEEPS if values.get("contact") == "qp" else 1) if sweeps is None else sweeps
        if isinstance(sweeps, bool) or not isinstance(sweeps, int) or sweeps < 1:
            raise ValueError(f"Rigid2D: sweeps must be an integer >= 1, got {sweeps!r}")
        n = n_discs + n_boxes
        slots = sweeps if values.get("solver_gradient") == "unrolled" else 1  # an unrolled sweep keeps its own
        super().__init__(horizon, batch, dt, n_discs=n_discs, n_boxes=n_boxes, sweeps=sweeps, n_bodies=n,
                         n_contacts=4 * n * (n + 1), n_sweep_contacts=slots * 4 * n * (n + 1),
                         n_sweep_bodies=slots * n, **values)

    # ---- body i at step t (i may be a run-time index) -------------------------------------------------------------
    @ti.func
    def position(self, s: ti.template(), i):
        return ti.Vector([s.state("px", i), s.state("py", i)])

    @ti.func
    def point_velocity(self, s: ti.template(), i, arm):
        """Velocity of body i's material point at arm = point - centre: v + omega x arm."""
        omega = s.state("omega", i)
        return ti.Vector([s.state("vx", i) - omega * arm[1], s.state("vy", i) + omega * arm[0]])

    @ti.func
    def half_extents(self, s: ti.template(), i):
        return ti.Vector([s.param("hx", i - self.n_discs), s.param("hy", i - self.n_discs)])

    @ti.func
    def inertia(self, s: ti.template(), i):
        # theta packs r, hx, hy one after the other, so both formulas read valid entries for any body; select picks
        h = self.half_extents(s, i)
        m = s.param("m", i)
        return ti.select(i < self.n_discs, 0.5 * m * s.param("r", i) ** 2, m * h.dot(h) / 3.0)

    @ti.func
    def corner(self, s: ti.template(), i, k):
        """Corner k of box i [m], anticlockwise from the lower left in the box frame."""
        sign = ti.Vector([ti.select(k == 1 or k == 2, 1.0, -1.0), ti.select(k >= 2, 1.0, -1.0)])
        angle = s.state("angle", i)
        return self.position(s, i) + rotate(angle, sign * self.half_extents(s, i))

    # ---- contacts ----------------------------------------------------------------------------------------------------
    @ti.func
    def pair_kind(self, i, j, k):
        """Body i (corner k, for a box) against body j, or the floor when j = n_bodies; each contact once: a disc
        against later discs, every box and the floor; a box's corners against every other box and the floor."""
        nd, nb = ti.static(self.n_discs, self.n_bodies)
        kind = NONE
        if i < nd and k == 0:
            if j == nb:
                kind = DISK_GROUND
            elif j >= nd:
                kind = DISK_BOX
            elif j > i:
                kind = DISK_DISK
        elif i >= nd:
            if j == nb:
                kind = CORNER_GROUND
            elif j >= nd and j != i:
                kind = CORNER_BOX
        if ti.static(self.ground == "off"):
            kind = ti.select(j == nb, NONE, kind)
        return kind

    @ti.func
    def geometry(self, s: ti.template(), kind, i, j, k):
        """(d, n, c) of a contact of the given kind; n pushes body i. Kinds the structure cannot have are not
        compiled."""
        nd, n_boxes, ground = ti.static(self.n_discs, self.n_boxes, self.ground == "on")
        d, n, c = 0.0, ti.Vector([0.0, 0.0]), ti.Vector([0.0, 0.0])
        if ti.static(nd >= 2):
            if kind == DISK_DISK:
                d, n, c = disk_disk(self.position(s, i), s.param("r", i),
                                    self.position(s, j), s.param("r", j))
        if ti.static(nd >= 1 and n_boxes >= 1):
            if kind == DISK_BOX:
                d, n, c = disk_box(self.position(s, i), s.param("r", i), self.position(s, j),
                                   s.state("angle", j), self.half_extents(s, j))
        if ti.static(n_boxes >= 2):
            if kind == CORNER_BOX:
                d, n, c = corner_box(self.corner(s, i, k), self.position(s, j),
                                     s.state("angle", j), self.half_extents(s, j))
        if ti.static(ground and nd >= 1):
            if kind == DISK_GROUND:
                d, n, c = disk_ground(self.position(s, i), s.param("r", i))
        if ti.static(ground and n_boxes >= 1):
            if kind == CORNER_GROUND:
                d, n, c = corner_ground(self.corner(s, i, k))
        return d, n, c

    @ti.func
    def at_point(self, s: ti.template(), i, c, tangent):
        """Body i at the point c: the velocity of its material point there, 1 / m and (arm x tangent)^2 / I."""
        arm = c - self.position(s, i)
        return self.point_velocity(s, i, arm), 1.0 / s.param("m", i), \
            cross2(arm, tangent) ** 2 / self.inertia(s, i)

    @ti.func
    def contact_law(self, s: ti.template(), d, vn, vt, m_ab, m_t):
        """(fn, ft) from the overlap d, the relative normal and tangential velocities, the reduced mass m_ab and the
        effective tangential mass m_t."""
        k = s.param("k")
        fn = penalty_normal(d, vn, k, restitution_damping(s.param("e"), k, m_ab),
                            s.param("softness"))
        ft = friction_coulomb_tanh(vt, fn, s.param("mu"), s.param("eps"))
        return fn, friction_clip_to_stop(ft, vt, m_t, s.dt)

    # ---- contact="qp": the phases are Impulses' (tisim/systems/rigid2d/impulses.py) ----------------------------
    @ti.func
    def touch(self, s: ti.template(), q):
        """Contact q's problem: its normal, the arms from both centres to the point c, its Delassus matrix, the
        relative velocity after the contact-free step and the least normal velocity it allows."""
        nb = ti.static(self.n_bodies)
        i, j, k = q // (4 * (nb + 1)), (q // 4) % (nb + 1), q % 4
        kind = self.pair_kind(i, j, k)
        if kind != NONE:
            d, n, c = self.geometry(s, kind, i, j, k)
            self.pose(s, q, i, j, d, n[0], n[1], c)

    @ti.func
    def contact_pair(self, s: ti.template(), i, j, d, nx, ny, c):
        """The contact (d, n = (nx, ny), c) of body i with body j (j = n_bodies: the floor), pushed into both steps.
        n comes in by components: as a vector argument Taichi 1.7's reverse pass warns of a load before a store."""
        n, tangent = ti.Vector([nx, ny]), ti.Vector([-ny, nx])
        fn, ft = 0.0, 0.0
        if ti.static(self.contact == "qp"):
            fn, ft = self.qp_law(s, i, j, d, n, tangent, c)
        else:
            w, inverse_m, inverse_turn = self.at_point(s, i, c, tangent)
            w_j, inverse_m_j, inverse_turn_j = ti.Vector([0.0, 0.0]), 0.0, 0.0  # the floor: at rest, infinite mass
            if j < self.n_bodies:
                w_j, inverse_m_j, inverse_turn_j = self.at_point(s, j, c, tangent)
            fn, ft = self.contact_law(s, d, (w - w_j).dot(n), (w - w_j).dot(tangent), 1.0 / (inverse_m + inverse_m_j),
                                      1.0 / (inverse_m + inverse_turn + inverse_m_j + inverse_turn_j))
        f = fn * n + ft * tangent
        self.push(s, i, f, c)
        if j < self.n_bodies:
            self.push(s, j, -f, c)

    # ---- integration: semi-implicit Euler, one share of x[b, t+1] per force ------------------------------------------
    @ti.func
    def push(self, s: ti.template(), i, f, c):
        """Add the force f acting at the point c on body i: its share semi_implicit_euler(0, 0, a, dt) of x[b, t+1]."""
        m = s.param("m", i)
        a = ti.Vector([f[0] / m, f[1] / m, cross2(c - self.position(s, i), f) / self.inertia(s, i)])
        for q, v, e in ti.static(AXES):
            dq, dv = semi_implicit_euler(0.0, 0.0, a[e], s.dt)
            s.advance(q, i, dq)
            s.advance(v, i, dv)

    @ti.func
    def free_acceleration(self, s: ti.template(), i):
        """Body i's (ax, ay, angular acceleration) under the wrench action, gravity and drag."""
        m, drag = s.param("m", i), s.param("drag")
        wrench = s.action("wrench", i)
        return ti.Vector([wrench[0] / m - drag * s.state("vx", i),
                          wrench[1] / m - s.param("g") - drag * s.state("vy", i),
                          wrench[2] / self.inertia(s, i) - drag * s.state("omega", i)])

    @ti.func
    def free_motion(self, s: ti.template(), i):
        """Body i's step under the wrench action, gravity and drag, from x[b, t] into x[b, t+1]."""
        a = self.free_acceleration(s, i)
        for q, v, e in ti.static(AXES):
            q_next, v_next = semi_implicit_euler(s.state(q, i), s.state(v, i), a[e], s.dt)
            s.advance(q, i, q_next)
            s.advance(v, i, v_next)

    @ti.func
    def step(self, s: ti.template()):
        nb = ti.static(self.n_bodies)
        for i in range(nb):
            self.free_motion(s, i)
        for q in range(4 * nb * (nb + 1)):  # body i (corner k) against body j or the floor (j = n_bodies)
            i, j, k = q // (4 * (nb + 1)), (q // 4) % (nb + 1), q % 4
            kind = self.pair_kind(i, j, k)
            if kind != NONE:
                d, n, c = self.geometry(s, kind, i, j, k)
                self.contact_pair(s, i, j, d, n[0], n[1], c)
