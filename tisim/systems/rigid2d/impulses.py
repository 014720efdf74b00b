"""Rigid2D's contact="qp" step: the contacts of a step solved together for their impulses, as phases
(tisim/core/phases.py), and differentiated through the solution (solver_gradient="implicit", the default) or through the
sweeps that found it ("unrolled").

The problem. Contact c between bodies i and j (j may be the floor) has the normal n_c, the tangent t_c (n_c turned
+90 deg) and the arms from both centres to its point; D_c maps the bodies' velocities to the relative velocity
(v_n, v_t) at the point, and an impulse p_c = (p_n, p_t) there changes the bodies' velocities by M^-1 D_c^T p_c
(M: masses and inertias). With v*_c the relative velocity after the contact-free step, G_cd = D_c M^-1 D_d^T (the
Delassus matrix, W_c = G_cc) and v_c = v*_c + sum_d G_cd p_d, each contact's impulse solves its own problem given the
others' (tisim.physics.complementarity.contact_impulse): apart (p_c = 0, v_n >= b_c), stick (v_c = (b_c, 0), |p_t| <= mu
p_n) or slip (v_n = b_c, p_t = side mu p_n against the sliding direction). b_c closes the overlap by the step's end, or
for an impact restitutes -e times the approach speed.

The solves.
- implicit: projected Gauss-Seidel in one kernel that is never differentiated (each contact in turn against the
  others' latest impulses, over-relaxed by OVERRELAXATION and put back into its cone, until a sweep changes none
  by more than TOLERANCE of the largest, at most `sweeps` sweeps). Its derivative comes from the conditions the
  solution meets: with the modes fixed, r(p) = 0 is linear in p, r_c = v_c - (b_c, 0) where c sticks,
  (v_n - b_c, p_t - side mu p_n) where it slips, p_c where apart, so dp = -A^-1 dr/dinputs with A = dr/dp. The
  adjoint solves A^T lambda = pbar by Gauss-Seidel on the transposed system: apart contacts have no conditions on
  the inputs and drop out, and the others' coupling is G again, so a sweep looks like the forward one, with
  lambda's velocity changes in place of the impulses'.
- unrolled: projected Jacobi, a repeated phase differentiated sweep by sweep: each contact's exact two-body
  solution against the velocity changes the others made in the sweep before (W_c p_c counted once), relaxed halfway
  from its previous impulse (which keeps the coupled iteration a contraction), with Chebyshev semi-iterative weights
  for an estimated spectral radius 0.95. Its gradient is the iterations' (checked against central differences); it
  converges to the exact solution's more slowly than the impulses (on a box sliding on a box, against 96 sweeps:
  390% off after 16 sweeps, 2.3% after 32, 6e-7 after 64), and the backward pass costs a launch per sweep per step.
"""
import math

import taichi as ti

from tisim.core.phases import IMPLICIT, RESIDUAL
from tisim.core.quantities import Scratch
from tisim.physics.complementarity import SLIP, contact_impulse, contact_mode, contact_multiplier
from tisim.physics.contact import cross2

SWEEPS = 64  # default (most) sweeps of the qp solve: a stack of two boxes converges to round-off
TOLERANCE = 1e-15  # the implicit solve stops when a sweep changes no impulse by more than this of the largest
RELAXATION = 0.5  # each unrolled sweep after the first moves an impulse this far towards its contact's own solution
SPECTRAL_RADIUS = 0.95  # of the relaxed sweep, estimated (measured best on a stack): sets the Chebyshev weights
OVERRELAXATION = 1.3  # of the implicit solve's Gauss-Seidel: on a stack, 64 sweeps reach 3e-12 (1.0: 3e-8; 1.5: 2e-12)
# The adjoint's diagonal blocks are made this much heavier, and its sweeps are not over-relaxed: where contacts
# constrain a body redundantly (a flat box's two corners sticking to the floor) A is singular, and without both the
# backward pass grew along its null space from step to step (measured on a sliding stack: gradients off by 1e67;
# dL/dangle 30 against 6e-4 by central differences). Measured against 96 unrolled sweeps: 1e-12 still grows;
# 1e-10 to 1e-8 agree to 2e-11; 1e-6 to 1e-9 (its bias).
REVERSE_SLACK = 1e-8
AXES = (("px", "vx", 0), ("py", "vy", 1), ("angle", "omega", 2))  # each coordinate, its velocity, its entry


@ti.func
def chebyshev(r):
    """The Chebyshev semi-iterative weight of sweep r >= 2, 2 T_(r-1)(1/rho) / (rho T_r(1/rho)) for the spectral
    radius rho (the limit of the recursion w_(r+1) = 4 / (4 - rho^2 w_r), from w_2 = 2 / (2 - rho^2))."""
    a = ti.static(math.acosh(1.0 / SPECTRAL_RADIUS))
    return 2.0 * (ti.exp((r - 1) * a) + ti.exp((1 - r) * a)) / (SPECTRAL_RADIUS * (ti.exp(r * a) + ti.exp(-r * a)))


class Impulses:
    """The phases of Rigid2D's contact="qp" step (a mixin: Rigid2D supplies the bodies and the geometry)."""

    SCRATCH = (  # each contact's problem, then its solution
        Scratch("touching", "-", "1 where the combination is a contact (a disc and the floor, ...), else 0",
                shape=("n_contacts",), keep=False),
        Scratch("normal", "-", "each contact's normal, pushing its first body", shape=("n_contacts", 2), keep=False),
        Scratch("arms", "m", "the contact point from the first and from the second body's centre",
                shape=("n_contacts", 4), keep=False),
        Scratch("delassus", "1/kg", "each contact's Delassus matrix (w_nn, w_nt, w_tt)", shape=("n_contacts", 3),
                keep=False),
        Scratch("free_velocity", "m/s", "relative normal and tangential velocity at the contact after the "
                "contact-free step", shape=("n_contacts", 2), keep=False),
        Scratch("least_velocity", "m/s", "the least relative normal velocity the contact allows",
                shape=("n_contacts",), keep=False),
        Scratch("impulse", "N s", "each contact's normal and tangential impulse (unrolled: each sweep's)",
                shape=("n_sweep_contacts", 2), keep=False),
        Scratch("velocity_change", "m/s, m/s, rad/s", "each body's change of (vx, vy, omega) by the impulses "
                "(unrolled: each sweep's)", shape=("n_sweep_bodies", 3), keep=False),
        Scratch("mode", "-", "each contact's mode at the solution: 0 apart, 1 stick, 2 slip with p_t = mu p_n, "
                "-2 with p_t = -mu p_n (implicit solve)", shape=("n_contacts",), keep=False),
        Scratch("residual", "m/s, N s", "each contact's conditions at the solution (implicit solve; zero when solved)",
                shape=("n_contacts", 2), keep=False),
        Scratch("multiplier", "1/s", "each contact's adjoint lambda (implicit solve's backward pass)",
                shape=("n_contacts", 2), keep=False),
        Scratch("solution_change", "m/s, m/s, rad/s", "each body's velocity change by the solution's impulses, for "
                "its residual (implicit solve)", shape=("n_bodies", 3), keep=False),
        Scratch("solver_velocity", "m/s, m/s, rad/s", "each body's velocity change during the implicit solve (and "
                "lambda's during its adjoint)", shape=("n_bodies", 3), keep=False),
    )

    @property
    def PHASES(self):  # noqa: N802 (the engine's name for a step's phases; penalty contact has none: a plain step)
        if self.contact != "qp" or self.sweeps == 1:
            return ()
        if self.solver_gradient == "implicit":
            return (("touch", "n_contacts"), ("impulses", "n_contacts", IMPLICIT),
                    ("conditions", "n_contacts", RESIDUAL), ("apply", "n_contacts"), ("move", "n_bodies"))
        return ("touch", "n_contacts"), ("sweep", "n_contacts", self.sweeps), ("move", "n_bodies")

    # ---- each contact's problem ---------------------------------------------------------------------------------
    @ti.func
    def body_at(self, s: ti.template(), i, c, n, tangent):
        """Body i at the point c (qp contact): the velocity of its material point there now and after the
        contact-free step, and its share (w_nn, w_nt, w_tt) of the contact's Delassus matrix."""
        arm = c - self.position(s, i)
        now, a = self.point_velocity(s, i, arm), self.free_acceleration(s, i)
        free = now + s.dt * (ti.Vector([a[0], a[1]]) + a[2] * ti.Vector([-arm[1], arm[0]]))
        inverse_m, inverse_i = 1.0 / s.param("m", i), 1.0 / self.inertia(s, i)
        rn, rt = cross2(arm, n), cross2(arm, tangent)
        return now, free, ti.Vector([inverse_m + inverse_i * rn * rn, inverse_i * rn * rt,
                                     inverse_m + inverse_i * rt * rt])

    @ti.func
    def problem(self, s: ti.template(), i, j, d, n, tangent, c):
        """Contact (d, n, c) of body i with body j (j = n_bodies: the floor) as a problem for its impulse: the
        Delassus matrix (w_nn, w_nt, w_tt), the relative (v_n, v_t) after the contact-free step, and the least normal
        velocity. That closes the gap -d by the step's end, or for an impact (the free step would close it, at an
        approach speed above what one step of the free accelerations adds) restitutes -e times the approach."""
        now, free, share = self.body_at(s, i, c, n, tangent)
        now_j, free_j, share_j = ti.Vector([0.0, 0.0]), ti.Vector([0.0, 0.0]), ti.Vector([0.0, 0.0, 0.0])
        if j < self.n_bodies:  # else the floor: at rest, infinite mass
            now_j, free_j, share_j = self.body_at(s, j, c, n, tangent)
        approach, vn, vt = (now - now_j).dot(n), (free - free_j).dot(n), (free - free_j).dot(tangent)
        impact = -d + s.dt * vn < 0.0 and -approach > ti.abs(vn - approach)
        target = ti.select(impact, ti.max(d / s.dt, -s.param("e") * approach), d / s.dt)
        return share + share_j, ti.Vector([vn, vt]), target

    @ti.func
    def qp_law(self, s: ti.template(), i, j, d, n, tangent, c):
        """(fn, ft): the impulses of the contact's problem, solved alone (one sweep), over dt."""
        m, free, target = self.problem(s, i, j, d, n, tangent, c)
        pn, pt = contact_impulse(m[0], m[1], m[2], free[0], free[1], target, s.param("mu"))
        return pn / s.dt, pt / s.dt

    @ti.func
    def pose(self, s: ti.template(), q, i, j, d, nx, ny, c):
        """touch's record of contact q (d, n = (nx, ny), c) of body i with body j. n comes in by components: as a
        vector, Taichi 1.7's reverse pass loads its adjoint before storing it (it warns; the gradient is garbage)."""
        n = ti.Vector([nx, ny])
        m, free, target = self.problem(s, i, j, d, n, ti.Vector([-ny, nx]), c)
        arm_j = ti.Vector([0.0, 0.0])
        if j < self.n_bodies:
            arm_j = c - self.position(s, j)
        arm = c - self.position(s, i)
        s.accumulate("touching", q, 1.0)
        s.accumulate("normal", q, n)
        s.accumulate("arms", q, ti.Vector([arm[0], arm[1], arm_j[0], arm_j[1]]))
        s.accumulate("delassus", q, m)
        s.accumulate("free_velocity", q, free)
        s.accumulate("least_velocity", q, target)

    # ---- velocity changes --------------------------------------------------------------------------------------
    @ti.func
    def velocity_change(self, s: ti.template(), name: ti.template(), slot, arm):
        """The velocity change of a body's material point at arm, from its entry `slot` of scratch `name`."""
        dv = s.scratch(name, slot)
        return ti.Vector([dv[0] - dv[2] * arm[1], dv[1] + dv[2] * arm[0]])

    @ti.func
    def kick(self, s: ti.template(), name: ti.template(), slot, i, impulse, arm):
        """Body i's velocity change from an impulse at arm, into entry `slot` of scratch `name`."""
        m = s.param("m", i)
        s.accumulate(name, slot, ti.Vector([impulse[0] / m, impulse[1] / m, cross2(arm, impulse) / self.inertia(s, i)]))

    @ti.func
    def seen(self, s: ti.template(), name: ti.template(), q, first, p_own):
        """The relative (v_n, v_t) at contact q from the velocity changes in scratch `name` (entries first + body),
        less what its own impulse p_own made of them: what the others' impulses add to its free velocity."""
        nb = ti.static(self.n_bodies)
        i, j = q // (4 * (nb + 1)), (q // 4) % (nb + 1)
        n = s.scratch("normal", q)
        tangent = ti.Vector([-n[1], n[0]])
        arms = s.scratch("arms", q)
        m = s.scratch("delassus", q)
        change = self.velocity_change(s, name, first + i, ti.Vector([arms[0], arms[1]]))
        if j < nb:
            change -= self.velocity_change(s, name, first + j, ti.Vector([arms[2], arms[3]]))
        return ti.Vector([change.dot(n) - m[0] * p_own[0] - m[1] * p_own[1],
                          change.dot(tangent) - m[1] * p_own[0] - m[2] * p_own[1]])

    @ti.func
    def kick_both(self, s: ti.template(), name: ti.template(), q, first, p):
        """Contact q's impulse p = (p_n, p_t) into the velocity changes of both its bodies (entries first + body)."""
        nb = ti.static(self.n_bodies)
        i, j = q // (4 * (nb + 1)), (q // 4) % (nb + 1)
        n, arms = s.scratch("normal", q), s.scratch("arms", q)
        impulse = p[0] * n + p[1] * ti.Vector([-n[1], n[0]])
        self.kick(s, name, first + i, i, impulse, ti.Vector([arms[0], arms[1]]))
        if j < nb:
            self.kick(s, name, first + j, j, -impulse, ti.Vector([arms[2], arms[3]]))

    # ---- solver_gradient="unrolled": projected Jacobi sweeps, differentiated as computed ------------------------
    @ti.func
    def sweep(self, s: ti.template(), q, r):
        """Sweep r of the projected Jacobi iteration, Chebyshev-accelerated: contact q's exact two-body solution
        (contact_impulse) against the velocity changes every other contact made in sweep r - 1."""
        nb, nc = ti.static(self.n_bodies, self.n_contacts)
        if s.scratch("touching", q) > 0.0:
            m = s.scratch("delassus", q)
            seen = s.scratch("free_velocity", q)
            p_old = ti.Vector([0.0, 0.0])
            if r > 0:
                p_old = s.scratch("impulse", (r - 1) * nc + q)
                seen += self.seen(s, "velocity_change", q, (r - 1) * nb, p_old)
            pn, pt = contact_impulse(m[0], m[1], m[2], seen[0], seen[1], s.scratch("least_velocity", q),
                                     s.param("mu"))
            p = p_old + ti.select(r > 0, RELAXATION, 1.0) * (ti.Vector([pn, pt]) - p_old)
            if r > 1:
                before = s.scratch("impulse", (r - 2) * nc + q)
                p = before + chebyshev(r) * (p - before)
            s.accumulate("impulse", r * nc + q, p)
            self.kick_both(s, "velocity_change", q, r * nb, p)

    # ---- solver_gradient="implicit": Gauss-Seidel, differentiated through the solution's conditions -------------
    @ti.func
    def impulses_solve(self, s: ti.template()):
        """Projected Gauss-Seidel (never differentiated): each contact's exact two-body solution against the
        others' latest impulses, in turn, until a sweep changes no impulse by more than TOLERANCE of the largest or
        `sweeps` sweeps are done; then each contact's mode at the solution."""
        nc, mu = ti.static(self.n_contacts), s.param("mu")
        r, moving = 0, True
        while r < self.sweeps and moving:
            change, size = 0.0, 0.0
            for q in range(nc):
                if s.scratch("touching", q) > 0.0:
                    m, p_old = s.scratch("delassus", q), s.scratch("impulse", q)
                    seen = s.scratch("free_velocity", q) + self.seen(s, "solver_velocity", q, 0, p_old)
                    pn, pt = contact_impulse(m[0], m[1], m[2], seen[0], seen[1],
                                             s.scratch("least_velocity", q), mu)
                    p = p_old + OVERRELAXATION * (ti.Vector([pn, pt]) - p_old)
                    p[0] = ti.max(p[0], 0.0)
                    p[1] = ti.min(ti.max(p[1], -mu * p[0]), mu * p[0])
                    delta = p - p_old
                    s.accumulate("impulse", q, delta)
                    self.kick_both(s, "solver_velocity", q, 0, delta)
                    change, size = ti.max(change, ti.abs(delta).max()), ti.max(size, ti.abs(pn) + ti.abs(pt))
            moving = change > TOLERANCE * size
            r += 1
        for q in range(nc):
            if s.scratch("touching", q) > 0.0:
                m, p = s.scratch("delassus", q), s.scratch("impulse", q)
                seen = s.scratch("free_velocity", q) + self.seen(s, "solver_velocity", q, 0, p)
                mode, side, _, _, _ = contact_mode(m[0], m[1], m[2], seen[0], seen[1],
                                                   s.scratch("least_velocity", q), mu)
                s.accumulate("mode", q, ti.select(mode == SLIP, 2.0 * side, ti.cast(mode, float)))

    @ti.func
    def impulses(self, s: ti.template(), q):
        """The first phase of the solution's residual: contact q's impulse into the velocity changes of its bodies,
        M^-1 D_q^T p_q (the residual's own copy: the later phases' derivatives must reach the impulses apart),
        where it is not apart."""
        active = ti.select(s.scratch("mode", q) != 0.0, 1.0, 0.0)  # branch-free: see below
        self.kick_both(s, "solution_change", q, 0, active * s.scratch("impulse", q))

    @ti.func
    def conditions(self, s: ti.template(), q):
        """Contact q's conditions at the solution, r_q (zero when solved): v_q - (b_q, 0) where it sticks,
        (v_n - b_q, p_t - side mu p_n) where it slips, v_q = v*_q + D_q M^-1 sum_d D_d^T p_d (nothing where it is
        apart: p_q = 0 there does not depend on the inputs)."""
        mode = s.scratch("mode", q)
        p, free = s.scratch("impulse", q), s.scratch("free_velocity", q)
        seen = free + self.seen(s, "solution_change", q, 0, ti.Vector([0.0, 0.0]))
        edge = p[1] - ti.math.sign(mode) * s.param("mu") * p[0]
        s.accumulate("residual", q, ti.select(mode != 0.0, 1.0, 0.0) * ti.Vector([
            seen[0] - s.scratch("least_velocity", q), ti.select(ti.abs(mode) > 1.5, edge, seen[1])]))

    @ti.func
    def impulses_reverse(self, s: ti.template(), bar: ti.template()):
        """lambda with A^T lambda = pbar (A = dr/dp; pbar, the later phases' derivative of the impulses, from
        bar) by Gauss-Seidel on the transposed system of the contacts that are not apart (never differentiated);
        -lambda into bar as the derivative of the residual. Each sweep, contact q's block solve
        (contact_multiplier) against the velocity change the others' lambda (its rows of G) make at q, the way the
        forward solve goes; the same TOLERANCE and most sweeps."""
        nb, nc, mu = ti.static(self.n_bodies), ti.static(self.n_contacts), s.param("mu")
        for k in range(nb):  # the solve's velocity changes, now lambda's
            s.accumulate("solver_velocity", k, -s.scratch("solver_velocity", k))
        r, moving = 0, True
        while r < self.sweeps and moving:
            change, size = 0.0, 0.0
            for q in range(nc):
                mode = s.scratch("mode", q)
                if mode != 0.0:
                    slip = ti.abs(mode) > 1.5
                    m, old = s.scratch("delassus", q), s.scratch("multiplier", q)
                    rows_old = ti.Vector([old[0], ti.select(slip, 0.0, old[1])])  # lambda's rows of G
                    g = bar.scratch("impulse", q) - self.seen(s, "solver_velocity", q, 0, rows_old)
                    ln, lt = contact_multiplier(m[0] * (1.0 + REVERSE_SLACK), m[1], m[2] * (1.0 + REVERSE_SLACK), slip,
                                                ti.math.sign(mode), mu, g[0], g[1])
                    s.accumulate("multiplier", q, ti.Vector([ln, lt]) - old)
                    self.kick_both(s, "solver_velocity", q, 0, ti.Vector([ln, ti.select(slip, 0.0, lt)]) - rows_old)
                    change = ti.max(change, ti.max(ti.abs(ln - old[0]), ti.abs(lt - old[1])))
                    size = ti.max(size, ti.abs(ln) + ti.abs(lt))
            moving = change > TOLERANCE * size
            r += 1
        for q in range(nc):
            if s.scratch("mode", q) != 0.0:
                bar.accumulate("residual", q, -s.scratch("multiplier", q))

    @ti.func
    def apply(self, s: ti.template(), q):
        """Contact q's impulse into its bodies' velocity changes (zero where it is no contact).

        The implicit step's differentiated phases are branch-free: with the kicks inside a branch, the first
        backward pass of each simulator left garbage (1e75) in the normals' derivative, at random, on several
        threads only (an adjoint Taichi 1.7 does not zero); a contact that is not one has zero normal and arms."""
        self.kick_both(s, "velocity_change", q, 0, s.scratch("impulse", q))

    @ti.func
    def move(self, s: ti.template(), i):
        """Body i's contact-free step plus the impulses' velocity change (unrolled: the last sweep's), and its dt
        share of the move."""
        self.free_motion(s, i)
        dv = s.scratch("velocity_change", ti.static(self.n_sweep_bodies - self.n_bodies) + i)
        for q, v, e in ti.static(AXES):
            s.advance(q, i, s.dt * dv[e])
            s.advance(v, i, dv[e])
