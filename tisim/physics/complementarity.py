"""Hard contact as a small convex problem solved inside the step: the velocity-level impulse of one point contact
with Coulomb friction, exact or on an interior-point central path, differentiated through its solution.

Per unit mass (an impulse as the velocity change w it causes), for a body whose normal and tangential motion at the
contact are decoupled (a point mass, a disc that does not spin):
    normal    w_n >= 0,  s = z + w_n >= 0,  w_n s = kappa      z = v_n* - b
              v_n*: the normal velocity the step would end with without contact; b: the least normal velocity the
              contact allows (b = -gap / dt keeps the body out of the floor by the end of the step; a restitution
              target -e v_n when an impact is due in the step). kappa = 0 is complementarity: w_n = max(0, -z).
    friction  w_t minimizes (v_t* + w_t)^2 / 2 over |w_t| <= c = mu w_n (maximal dissipation; in 2D the Coulomb cone
              is an interval), kappa > 0 adding the log barrier -kappa (log(c - w_t) + log(c + w_t)).
              kappa = 0: w_t = clamp(-v_t*, -c, c), exact stick (the body stops) or slip (the full mu w_n).
These two are the whole complementarity problem here: the normal impulse does not depend on the friction, so solving
the normal first and then the friction within the cone it sets is exact (no Anitescu separation, no linearized cone).

Between two bodies that turn (tisim.systems.Rigid2D), an impulse p = (p_n, p_t) at the contact changes the relative
velocity there by W p, W = [[w_nn, w_nt], [w_nt, w_tt]] (the Delassus matrix: inverse masses and inertias seen at
the contact), which couples the normal and the friction. contact_impulse solves that problem exactly (kappa = 0):
separation if the free motion already satisfies v_n* >= b, else stick (W p = (b - v_n*, -v_t*) inside the cone
|p_t| <= mu p_n), else slip on the cone's edge against the sliding direction.

kappa [m^2/s^2] is the smoothness knob of an interior-point method, the central path's parameter (as in Dojo): with
kappa > 0 both impulses are smooth functions of the state and the parameters, strictly inside their constraints, and
they reach the exact ones as kappa -> 0. A body resting on the floor under gravity g floats kappa / g above it (the
normal impulse g dt times the slack gap / dt equals kappa). No kappa lets a body into the floor: s >= 0 always.

The normal impulse on the central path has a closed form, w_n = (sqrt(z^2 + 4 kappa) - z) / 2. The friction impulse
does not: with w_t = c tanh(u), the barrier's stationarity becomes
    g(u) = alpha + tanh u + k sinh 2u = 0,      alpha = v_t* / c,  k = kappa / c^2,
increasing in u with no poles, solved by NEWTON_STEPS Newton steps from a guess built on both of its asymptotes (at
most 6 steps reached |g| < 1e-14 (1 + |alpha|) for k in [1e-16, 1e4] and |alpha| in [1e-6, 1e6], in float64). Its
derivative is taken by the implicit function theorem (tisim.autodiff.implicit): the earlier steps detached, the last one
with a detached g'(u); `implicit=False` differentiates every step as computed instead (the derivative of the map the
iterations compute, which is the exact solution's only once they have converged).
"""
import taichi as ti

from tisim.autodiff.implicit import detach

NEWTON_STEPS = 8
TINY = 1e-30  # floors kappa where the smooth form is computed and then not selected, to keep it finite
U_MAX = 20.0  # tanh(20) is 1 in float64; beyond, the barrier term only overflows


@ti.func
def normal_impulse(z, kappa):
    """w_n >= 0 with w_n (z + w_n) = kappa (kappa = 0: max(0, -z)), z = v_n* - b [m/s]."""
    r = ti.sqrt(z * z + 4.0 * ti.max(kappa, TINY))
    # no cancellation on either side, and finite on the side not taken (its derivative would be 0 * inf)
    smooth = ti.select(z > 0.0, 2.0 * ti.max(kappa, TINY) / (ti.abs(z) + r), 0.5 * (r - z))
    return ti.select(kappa > 0.0, smooth, ti.max(-z, 0.0))


@ti.func
def _barrier(u, alpha, k):
    """g(u) and g'(u) (Taichi 1.7 has no sinh or cosh)."""
    grow, shrink, y = ti.exp(2.0 * u), ti.exp(-2.0 * u), ti.tanh(u)
    return alpha + y + 0.5 * k * (grow - shrink), 1.0 - y * y + k * (grow + shrink)


@ti.func
def _guess(alpha, k):
    """A start near the root of g: atanh(-alpha) inside the cone, and from the other end the root of the quadratic
    that g becomes in e^(2|u|) when |u| is large (near or past the edge of the cone)."""
    size, d = ti.abs(alpha), 1.0 - ti.abs(alpha)
    root = ti.sqrt(d * d + 4.0 * k)
    grow = ti.select(d > 0.0, 4.0 / (ti.abs(d) + root), (root + ti.abs(d)) / k)  # e^(2|u|), stable either side
    inside = ti.min(size / (1.0 + 2.0 * k), 0.9)
    far = 0.5 * ti.log(ti.max(grow, 1.0))
    return -ti.math.sign(alpha) * ti.min(ti.max(0.5 * ti.log((1.0 + inside) / (1.0 - inside)), far), U_MAX)


@ti.func
def friction_impulse(v_free, c, kappa, steps: ti.template(), implicit: ti.template()):
    """w_t in [-c, c] [m/s] that stops v_free as far as the cone c = mu w_n >= 0 allows (kappa = 0), or its central-
    path point (kappa > 0); `steps` Newton steps, differentiated by the implicit function theorem if `implicit`."""
    w = ti.min(ti.max(-v_free, -c), c)
    if kappa > 0.0:  # a branch, not a select: at kappa = 0 the Newton steps cost nothing
        cs = ti.max(c, 1e-12)
        alpha, k = v_free / cs, kappa / (cs * cs)
        u = _guess(alpha, k)
        if ti.static(implicit):
            u = detach(u)
        for _ in ti.static(range(steps - 1)):
            g, slope = _barrier(u, alpha, k)
            u = ti.min(ti.max(u - g / slope, -U_MAX), U_MAX)
            if ti.static(implicit):
                u = detach(u)
        g, slope = _barrier(u, alpha, k)
        if ti.static(implicit):
            slope = detach(slope)
        w = c * ti.tanh(ti.min(ti.max(u - g / slope, -U_MAX), U_MAX))
    return w


APART, STICK, SLIP = 0, 1, 2  # the modes of a contact's solution


@ti.func
def contact_mode(w_nn, w_nt, w_tt, vn, vt, b, mu):
    """(mode, side, stick impulses (p_n, p_t), slip normal impulse) of contact_impulse's problem (its arguments):
    mode APART, STICK or SLIP, the last on the cone's edge p_t = side mu p_n."""
    need = b - vn  # the normal velocity the contact must add, at least
    det = ti.max(w_nn * w_tt - w_nt * w_nt, 1e-30)
    pn_stick, pt_stick = (w_tt * need + w_nt * vt) / det, (-w_nn * vt - w_nt * need) / det
    side = ti.select(pt_stick > 0.0, 1.0, -1.0)
    pn_slip = need / ti.max(w_nn + side * mu * w_nt, 1e-30)
    stick = pn_stick >= 0.0 and ti.abs(pt_stick) <= mu * pn_stick
    mode = ti.select(need > 0.0, ti.select(stick, STICK, SLIP), APART)
    return mode, side, pn_stick, pt_stick, pn_slip


@ti.func
def contact_impulse(w_nn, w_nt, w_tt, vn, vt, b, mu):
    """(p_n, p_t) [N s] of one contact: W = [[w_nn, w_nt], [w_nt, w_tt]] [1/kg], contact-free relative velocity
    (vn, vt) [m/s], least normal velocity b [m/s], Coulomb coefficient mu; the exact solution (see above)."""
    mode, side, pn_stick, pt_stick, pn_slip = contact_mode(w_nn, w_nt, w_tt, vn, vt, b, mu)
    pn = ti.select(mode == STICK, pn_stick, ti.select(mode == SLIP, pn_slip, 0.0))
    pt = ti.select(mode == STICK, pt_stick, ti.select(mode == SLIP, side * mu * pn_slip, 0.0))
    return pn, pt


@ti.func
def contact_multiplier(w_nn, w_nt, w_tt, slip, side, mu, gn, gt):
    """lambda with A^T lambda = (gn, gt), A the Jacobian of a contact's conditions by its own impulse: W when it
    sticks (W p = the velocity it must add), and when it slips the normal row of W with the cone's edge
    p_t - side mu p_n = 0. The block of the adjoint of a coupled solve (tisim.systems.rigid2d.impulses)."""
    det = ti.max(w_nn * w_tt - w_nt * w_nt, 1e-30)
    ln = ti.select(slip, (gn + side * mu * gt) / ti.max(w_nn + side * mu * w_nt, 1e-30), (w_tt * gn - w_nt * gt) / det)
    lt = ti.select(slip, gt - w_nt * ln, (w_nn * gt - w_nt * gn) / det)
    return ln, lt
