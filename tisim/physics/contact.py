"""Contact and friction laws as pure Taichi functions, shared by every system.

Normal force from penetration depth d >= 0 (d < 0: apart) and normal velocity vn (> 0: separating):
    penalty_normal(d, vn, k, c, s)   fn = max(0, k act(d) - c vn gate(d))
        hard (s = 0): act(d) = max(d, 0),         gate(d) = [d > 0]
        soft (s > 0): act(d) = s log(1 + e^(d/s)), gate(d) = sigmoid(d / s)   smooth in d; reaches ~ s k at d = 0
    penalty_normal_compression(d, vn, k, c)   fn = k d - c min(vn, 0) while d > 0, else 0: damped only while
                                     compressing, never pulling (the ground law of the reference mass-spring workload)
    restitution_damping(e, k, m)     c = 2 zeta sqrt(k m), zeta = -ln e / sqrt(pi^2 + ln^2 e): the linear
                                     spring-damper whose free bounce has coefficient of restitution e
        penalty_normal never pulls (fn >= 0), so the body leaves a little earlier and a little faster than that
        spring-damper: the realized restitution is exp(-tan(phi) (pi - 2 phi)), phi = asin(zeta) (Schwager and
        Poeschel 2007), 0.808 for e = 0.8 and 0.397 for e = 0.3 (measured in tests/test_bouncing_ball.py).

    penalty_normal_soft_compression(d, vn, k, c, s)   the same with the softness s >= 0: k act(d) - c min(vn, 0)
                                     gate(d), act and gate as penalty_normal's soft form; exactly the hard law at s = 0.
                                     Smooth in d; the damping's switch at vn = 0 stays (a body at rest sits on it).

Tangential (friction) force from tangential velocity vt and normal force fn:
    friction_coulomb_tanh(vt, fn, mu, eps)    ft = -mu fn tanh(vt / eps)
    friction_coulomb_huber(vt, fn, mu, eps)   ft = -mu fn clamp(vt / eps, -1, 1)   (gradient of a Huber function)
    friction_isotropic_tanh(vt, fn, mu, eps)  for a tangential velocity vector (2 or 3 entries): the force
        -mu fn tanh(|vt| / eps) vt / |vt|, the same law in every tangential direction; along a line it is
        friction_coulomb_tanh. tanh(s) / s is even in s, so the law is smooth at zero slip (there: -mu fn vt / eps).
    friction_clip_to_stop(ft, vt, m, dt)      ft clipped to |ft| <= m |vt| / dt, for an explicit step of the laws above:
        when dt mu fn / (m eps) > 1 the regularized law is stiff, and unclipped it would carry vt through zero and
        chatter (growing, up to mu fn dt / m per step); clipped, friction at most stops the body within the step.
    friction_stick_slip(v_free, fn, mu_s, mu, m, dt)
        the force that stops the body this step, if it is within mu_s fn (stick, exact rest); otherwise kinetic
        Coulomb -mu fn sign(v_free) (slip). v_free is the velocity the step would reach without friction.

Rigid alternative to penalty contact:
    restitution_toi(y, v, a, e, dt)   a ballistic step in the normal direction with an exact time of impact:
        if the free flight would cross y = 0 within the step, stop at the impact time tau, map v -> -e v and fly the
        remaining dt - tau. Exact for constant acceleration a, while each flight lasts longer than dt; a rebound that
        would land again within the same step ends the step at rest on the floor (y = 0, v = 0).
"""
import math

import taichi as ti

from tisim.core import runtime
from tisim.physics.integrators import ballistic

DISTANCE_FLOOR = 1e-30  # added under square roots: coincident centres give n = 0, zero slip no direction, not a NaN
SOFT_REACH = 750.0  # e^-z is exactly 0 in float32 and float64 beyond z = 750: a soft contact's force is 0 there


@ti.func
def penalty_normal(d, vn, k, c, s):
    act, gate = ti.max(d, 0.0), 0.0
    if s > 0.0:
        z = d / s
        act = s * (ti.max(z, 0.0) + ti.log(1.0 + ti.exp(-ti.abs(z))))  # softplus without overflow
        # sigmoid without overflow: 1 / (1 + e^-z) overflows for z < -709 and its derivative becomes inf * 0 = NaN
        gate = ti.exp(ti.min(z, 0.0)) / (1.0 + ti.exp(-ti.abs(z)))
    elif d > 0.0:
        gate = 1.0
    return ti.max(k * act - c * vn * gate, 0.0)


@ti.func
def penalty_normal_compression(d, vn, k, c):
    # branch-free: it runs inside per-particle loops, where Taichi 1.7's reverse mode mishandles branches
    return (k * d - c * ti.min(vn, 0.0)) * ti.select(d > 0.0, 1.0, 0.0)


def restitution_damping_value(e, k, m):
    """Python twin of restitution_damping, for messages and tests."""
    if e <= 0.0:
        return 2.0 * math.sqrt(k * m)
    zeta = -math.log(e) / math.sqrt(math.pi ** 2 + math.log(e) ** 2)
    return 2.0 * zeta * math.sqrt(k * m)


@ti.func
def restitution_damping(e, k, m):
    zeta = 1.0  # e = 0: critical damping
    if e > 0.0:
        zeta = -ti.log(e) / ti.sqrt(math.pi ** 2 + ti.log(e) ** 2)
    return 2.0 * zeta * ti.sqrt(k * m)


@ti.func
def friction_coulomb_tanh(vt, fn, mu, eps):
    return -mu * fn * ti.tanh(vt / eps)


@ti.func
def friction_coulomb_huber(vt, fn, mu, eps):
    return -mu * fn * ti.min(ti.max(vt / eps, -1.0), 1.0)


@ti.func
def friction_clip_to_stop(ft, vt, m, dt):
    cap = m * ti.abs(vt) / dt
    return ti.min(ti.max(ft, -cap), cap)


@ti.func
def friction_stick_slip(v_free, fn, mu_s, mu, m, dt):
    f = -m * v_free / dt  # the force that brings the body to rest this step
    if ti.abs(f) > mu_s * fn:
        f = -mu * fn * ti.math.sign(v_free)
    return f


@ti.func
def penalty_normal_soft_compression(d, vn, k, c, s):
    # branch-free, like penalty_normal_compression; s is floored so that the soft form, computed and then not
    # selected at s = 0, stays finite (a NaN there would reach the gradient as 0 * NaN)
    # One exp serves both: it is most of the law's cost in a body's per-particle loop.
    soft = ti.max(s, 1e-30)
    z = d / soft
    e = ti.exp(-ti.abs(z))
    act = soft * (ti.max(z, 0.0) + ti.log(1.0 + e))
    gate = ti.select(z < 0.0, e, 1.0) / (1.0 + e)
    return ti.select(s > 0.0, k * act - c * ti.min(vn, 0.0) * gate, penalty_normal_compression(d, vn, k, c))


def penalty_normal_soft_compression_value(d, vn, k, c, s):
    """Python twin of penalty_normal_soft_compression (floats or numpy arrays), for numpy referees of systems."""
    if s > 0.0:
        z = d / s
        e = math.exp(-abs(z))
        act = s * (max(z, 0.0) + math.log(1.0 + e))
        gate = (e if z < 0.0 else 1.0) / (1.0 + e)
        return k * act - c * min(vn, 0.0) * gate
    return (k * d - c * min(vn, 0.0)) if d > 0.0 else 0.0


def friction_isotropic_tanh_value(vt, fn, mu, eps):
    """Python twin of friction_isotropic_tanh for a numpy vector vt (numpy's tanh, within 7 ulp of tisim's)."""
    s = math.sqrt(float(vt @ vt) + DISTANCE_FLOOR)
    return -mu * fn * math.tanh(s / eps) / s * vt


@ti.func
def tanh_of_positive(z):
    """tanh(z) for z >= 0 from one exp: a libm tanh costs about three exps on the CPUs measured (a hanging cloth's
    forward pass spent a fifth of its time in it). Where (1 - e) / (1 + e) would cancel, below a cut, the series to
    z^9: in float64 below 0.02 (its next term < 1e-19 of z there; above, the cancellation costs < 1 / (2 z) = 25
    ulp), in float32 below 0.3. Measured against numpy's tanh: at most 7 ulp (f64), 3.5 ulp (f32)."""
    cut = ti.static(0.3 if runtime.real() == ti.f32 else 0.02)
    e = ti.exp(-2.0 * z)
    z2 = z * z
    series = z * (1.0 + z2 * (-1.0 / 3.0 + z2 * (2.0 / 15.0 + z2 * (-17.0 / 315.0 + z2 * (62.0 / 2835.0)))))
    return ti.select(z < cut, series, (1.0 - e) / (1.0 + e))


@ti.func
def tanh_of_positive_slope(z):
    """d tanh_of_positive(z) / dz, of the form tanh_of_positive takes at z: the series' derivative below the cut,
    4 e / (1 + e)^2 with e = e^-2z above it (1 - tanh^2 there would cancel)."""
    cut = ti.static(0.3 if runtime.real() == ti.f32 else 0.02)
    e = ti.exp(-2.0 * z)
    z2 = z * z
    series = 1.0 + z2 * (-1.0 + z2 * (2.0 / 3.0 + z2 * (-17.0 / 45.0 + z2 * (62.0 / 315.0))))
    return ti.select(z < cut, series, 4.0 * e / ((1.0 + e) * (1.0 + e)))


@ti.func
def friction_isotropic_tanh(vt, fn, mu, eps):
    s = ti.sqrt(vt.dot(vt) + DISTANCE_FLOOR)
    return -mu * fn * tanh_of_positive(s / eps) / s * vt


@ti.func
def restitution_toi(y, v, a, e, dt):
    y_next, v_next = ballistic(y, v, a, dt)
    if y_next < 0.0 and y >= 0.0:
        # first root of y + v tau + a tau^2 / 2 = 0 in (0, dt]; the stable form avoids cancellation
        disc = ti.sqrt(ti.max(v * v - 2.0 * a * y, 0.0))
        tau = 2.0 * y / (-v + disc) if (-v + disc) > 0.0 else 0.0
        v_hit = v + a * tau
        y_next, v_next = ballistic(0.0, -e * v_hit, a, dt - tau)
        if y_next < 0.0:
            # the rebound lands again within this step: the bounces shrink geometrically to rest (Zeno), so the
            # body rests on the floor; the heights so skipped are below |a| dt^2 / 8
            y_next, v_next = 0.0, 0.0
    return y_next, v_next


# ---- contact geometry of rigid shapes in 2D (Rigid2D) -------------------------------------------------------------
# Each pair function returns (d, n, c): the overlap d [m] (> 0 in contact), the unit normal n along which the contact
# pushes the FIRST shape (the second is pushed along -n), and the contact point c [m], the middle of the overlap along
# n. A law applies its force to both bodies at the same point c, so each pair's forces conserve angular momentum.
#     rotate(angle, q) = R(angle) q, anticlockwise;   cross2(r, f) = r_x f_y - r_y f_x, the torque of f at arm r
#     disk_ground(p, r)               disc (centre p, radius r) over the floor y = 0:  d = r - p_y,  n = (0, 1)
#     corner_ground(q)                a box corner q over the floor:  d = -q_y,  n = (0, 1)
#     disk_disk(p1, r1, p2, r2)       d = r1 + r2 - |p1 - p2|,  n = (p1 - p2) / |p1 - p2|
#     corner_box(q, p, angle, h)      a corner q against a box (centre p, angle, half extents h), in the box frame
#                                     q' = R(-angle)(q - p):  d = min(hx - |q'x|, hy - |q'y|),  n = outward normal of
#                                     the nearest face (the vertex-face test; d > 0 only inside the box)
#     disk_box(p, r, pb, angle, h)    s = the box point closest to the disc centre:  d = r - |p - s|,  n = (p - s) / |.|
#                                     (a centre inside the box is pushed out through the nearest face: d = r + depth)
# Non-smooth: the contact switch d = 0, the nearest-face switch (|q'x| and |q'y|), the clamp to the box outline.


@ti.func
def rotate(angle, q):
    c, s = ti.cos(angle), ti.sin(angle)
    return ti.Vector([c * q[0] - s * q[1], s * q[0] + c * q[1]])


@ti.func
def cross2(r, f):
    return r[0] * f[1] - r[1] * f[0]


@ti.func
def disk_ground(p, r):
    return r - p[1], ti.Vector([0.0, 1.0]), ti.Vector([p[0], 0.5 * (p[1] - r)])


@ti.func
def corner_ground(q):
    return -q[1], ti.Vector([0.0, 1.0]), ti.Vector([q[0], 0.5 * q[1]])


@ti.func
def disk_disk(p1, r1, p2, r2):
    delta = p1 - p2
    distance = ti.sqrt(delta.dot(delta) + DISTANCE_FLOOR)
    n = delta / distance
    return r1 + r2 - distance, n, 0.5 * (p1 + p2 + (r2 - r1) * n)


@ti.func
def box_face(q, h):
    """Depth of the box-frame point q inside the box of half extents h (< 0 outside) and the nearest face's normal."""
    dx, dy = h[0] - ti.abs(q[0]), h[1] - ti.abs(q[1])
    across = dx <= dy  # nearest face: a vertical side (normal along x) or the top or bottom
    side = ti.Vector([ti.select(q[0] >= 0.0, 1.0, -1.0), ti.select(q[1] >= 0.0, 1.0, -1.0)])
    return ti.min(dx, dy), ti.Vector([ti.select(across, side[0], 0.0), ti.select(across, 0.0, side[1])])


@ti.func
def corner_box(q, p, angle, h):
    d, face = box_face(rotate(-angle, q - p), h)
    n = rotate(angle, face)
    return d, n, q + 0.5 * d * n


@ti.func
def disk_box(p, r, pb, angle, h):
    q = rotate(-angle, p - pb)  # the disc centre in the box frame
    s = ti.max(ti.min(q, h), -h)  # the closest point of the box (q itself when inside)
    delta = q - s
    distance = ti.sqrt(delta.dot(delta) + DISTANCE_FLOOR)
    depth, face = box_face(q, h)
    inside = depth > 0.0  # then push out through the nearest face
    n = rotate(angle, ti.select(inside, face, delta / distance))
    d = ti.select(inside, r + depth, r - distance)
    surface = pb + rotate(angle, ti.select(inside, q + depth * face, s))
    return d, n, 0.5 * (surface + p - r * n)


# ---- a point against static shapes, in 2D or 3D (MassSpring) ------------------------------------------------------
# Each returns (d, n): the depth d of the point inside the shape (> 0 in contact) and the unit normal n along which
# the shape pushes it out. point_contact turns them into a penalty force with isotropic friction.
#     point_ground(p)              the floor y = 0 (y is up in 2D and 3D):  d = -p_y,  n = e_y
#     point_sphere(p, c, r)        a disc or ball:  d = r - |p - c|,  n = (p - c) / |p - c|
#     point_capsule(p, a, b, r)    the segment a..b widened by r: point_sphere about the segment's point nearest p
#     point_box(p, c, h)           an axis-aligned box of half extents h:  d = min_k (h_k - |q_k|), q = p - c,
#                                  n = sign(q_k) e_k along the axis of that minimum (the nearest face); d < 0 outside
#     point_turned_box(p, c, A, h) a box whose axes are A's columns: point_box in the box's frame, q = A^T (p - c),
#                                  its normal turned back, A n
# Non-smooth: the contact switch d = 0, and the box's nearest-face switch.
#
# For passes that are never differentiated (a fused forward pass, a hand-written reverse), `touching(d, s)` says
# where point_contact can be non-zero: inside the shape, or within a soft contact's reach, beyond which its e^-z is
# exactly 0 in float32 and float64. Elsewhere the force is 0 (up to the sign of a zero) and so is its derivative,
# so a branch on it skips the law's exps and square roots for every point that touches nothing. The *_adjoint
# functions are the reverses of the laws, written out: from the derivative of the loss by a function's result,
# those by its inputs (tests/test_mass_spring.py holds them to Taichi's reverse mode of the laws).
@ti.func
def point_ground(p):
    return -p[1], ti.Vector([1.0 if k == 1 else 0.0 for k in ti.static(range(p.n))])


@ti.func
def point_sphere(p, c, r):
    delta = p - c
    distance = ti.sqrt(delta.dot(delta) + DISTANCE_FLOOR)
    return r - distance, delta / distance


@ti.func
def point_capsule(p, a, b, r):
    """(depth, normal) of a point p against a capsule: the segment from a to b widened by r (a sphere where a = b),
    the normal pointing from the segment's nearest point to p."""
    e = b - a
    return point_sphere(p, a + segment_parameter(p - a, e) * e, r)


@ti.func
def segment_parameter(w, e):
    """t in [0, 1] of the point a + t e of a segment nearest a point at offset w from a (0 for a point, e = 0)."""
    ee = e.dot(e)
    return ti.select(ee > 0.0, ti.min(ti.max(w.dot(e) / ti.max(ee, 1e-300), 0.0), 1.0), 0.0)


@ti.func
def point_box(p, c, h):
    q = p - c
    depth = h - ti.abs(q)
    d = depth.min()
    # built whole, not entry by entry: a store into an entry of a local vector made Taichi 1.7's reverse pass
    # warn "Loading variable ... before anything is stored", the sign of silently wrong gradients
    n = ti.Vector([first_minimum(depth, d, k) * ti.select(q[k] >= 0.0, 1.0, -1.0) for k in ti.static(range(p.n))])
    return d, n


@ti.func
def first_minimum(depth, d, k: ti.template()):
    """1 if axis k is the first whose depth is the minimum d (ties go to the first axis), else 0."""
    w = ti.select(depth[k] <= d, 1.0, 0.0)
    for j in ti.static(range(k)):
        w *= ti.select(depth[j] <= d, 0.0, 1.0)
    return w


@ti.func
def point_contact(d, n, v, k, c, s, mu, eps):
    """The force on a point at depth d along the normal n moving at v: a penalty normal force (softness s, damped
    while compressing) and isotropic regularized Coulomb friction on the tangential velocity."""
    vn = v.dot(n)
    fn = penalty_normal_soft_compression(d, vn, k, c, s)
    return fn * n + friction_isotropic_tanh(v - vn * n, fn, mu, eps)


@ti.func
def touching(d, s):
    """Whether a point at depth d can feel point_contact's force (softness s): see the note above point_ground."""
    return d > 0.0 or (s > 0.0 and d > -SOFT_REACH * s)


@ti.func
def penalty_normal_soft_compression_reverse(d, vn, k, c, s, fn_bar):
    """The reverse of penalty_normal_soft_compression: (d, vn, k, c, s)-derivatives from fn_bar = dL/dfn.
    With z = d / s, act = s softplus(z), gate = sigmoid(z): dact/dd = gate, dact/ds = softplus(z) - z gate,
    dgate/dz = gate (1 - gate)."""
    squeeze, closing = ti.min(vn, 0.0), ti.select(vn < 0.0, 1.0, 0.0)
    on = ti.select(d > 0.0, 1.0, 0.0)  # the hard law's switch
    d_bar, vn_bar = k * on, -c * on * closing
    k_bar, c_bar, s_bar = d * on, -squeeze * on, 0.0
    if s > 0.0:
        soft = ti.max(s, 1e-30)
        z = d / soft
        e = ti.exp(-ti.abs(z))
        plus = ti.max(z, 0.0) + ti.log(1.0 + e)
        gate = ti.select(z < 0.0, e, 1.0) / (1.0 + e)
        slope = gate * ti.select(z < 0.0, 1.0, e) / (1.0 + e)
        d_bar = k * gate - c * squeeze * slope / soft
        vn_bar = -c * gate * closing
        k_bar, c_bar = soft * plus, -squeeze * gate
        s_bar = (k * (plus - z * gate) + c * squeeze * slope * z / soft) * ti.select(s > 1e-30, 1.0, 0.0)
    return fn_bar * d_bar, fn_bar * vn_bar, fn_bar * k_bar, fn_bar * c_bar, fn_bar * s_bar


@ti.func
def point_contact_reverse(d, n, v, k, c, s, mu, eps, f_bar):
    """The reverse of point_contact: from f_bar = dL/dF, (dL/dd, dL/dn, dL/dv, dL/d(k, c, s, mu, eps) as a
    5-vector). F = fn n + g vt with g = -mu fn tanh(z) / |vt|, z = |vt| / eps, vt = v - (v . n) n."""
    vn = v.dot(n)
    fn = penalty_normal_soft_compression(d, vn, k, c, s)
    vt = v - vn * n
    slip = ti.sqrt(vt.dot(vt) + DISTANCE_FLOOR)
    z = slip / eps
    tanh_z, slope = tanh_of_positive(z), tanh_of_positive_slope(z)
    g = -mu * fn * tanh_z / slip
    fn_bar, n_bar = f_bar.dot(n), fn * f_bar
    g_bar, vt_bar = f_bar.dot(vt), g * f_bar
    mu_bar = -fn * tanh_z / slip * g_bar
    fn_bar += -mu * tanh_z / slip * g_bar
    z_bar = -mu * fn * slope / slip * g_bar
    vt_bar += (-g / slip * g_bar + z_bar / eps) / slip * vt  # g's 1 / slip, then z = slip / eps
    eps_bar = -z_bar * z / eps
    vn_bar = -vt_bar.dot(n)
    n_bar -= vn * vt_bar
    d_bar, law_vn_bar, k_bar, c_bar, s_bar = penalty_normal_soft_compression_reverse(d, vn, k, c, s, fn_bar)
    vn_bar += law_vn_bar
    return d_bar, n_bar + vn_bar * v, vt_bar + vn_bar * n, ti.Vector([k_bar, c_bar, s_bar, mu_bar, eps_bar])


@ti.func
def point_sphere_reverse(p, c, d_bar, n_bar):
    """The reverse of point_sphere: dL/dp from dL/dd and dL/dn (dL/dc is its negative, dL/dr is d_bar)."""
    delta = p - c
    distance = ti.sqrt(delta.dot(delta) + DISTANCE_FLOOR)
    n = delta / distance
    return n_bar / distance - (d_bar + n_bar.dot(n) / distance) * n


@ti.func
def point_capsule_reverse(p, a, b, d_bar, n_bar):
    """The reverse of point_capsule: (dL/dp, dL/da, dL/db) from dL/dd and dL/dn (dL/dr is d_bar)."""
    e, w = b - a, p - a
    t = segment_parameter(w, e)
    p_bar = point_sphere_reverse(p, a + t * e, d_bar, n_bar)
    nearest_bar = -p_bar  # the nearest point c = a + t e enters as p - c
    a_bar, b_bar = (1.0 - t) * nearest_bar, t * nearest_bar
    ee = e.dot(e)
    along = w.dot(e)
    if ee > 0.0 and along > 0.0 and along < ee:  # t = w . e / e . e inside the segment (clamped, it is constant)
        t_bar = nearest_bar.dot(e)
        w_bar, e_bar = t_bar / ee * e, t_bar / ee * (w - 2.0 * t * e)
        p_bar += w_bar
        a_bar -= w_bar + e_bar
        b_bar += e_bar
    return p_bar, a_bar, b_bar


@ti.func
def point_box_reverse(p, c, h, d_bar):
    """The reverse of point_box (its normal is piecewise constant): (dL/dp, dL/dh) from dL/dd (dL/dc = -dL/dp)."""
    q = p - c
    depth = h - ti.abs(q)
    d = depth.min()
    h_bar = ti.Vector([first_minimum(depth, d, k) * d_bar for k in ti.static(range(p.n))])
    return -h_bar * ti.Vector([ti.select(q[k] >= 0.0, 1.0, -1.0) for k in ti.static(range(p.n))]), h_bar


@ti.func
def point_turned_box(p, c, axes, h):
    """(depth, normal) of a point p against a box centred at c with half extents h along the columns of axes (a
    rotation): point_box in the box's own frame, the normal turned back into the world."""
    d, n = point_box(turned_back(axes, p - c), ti.Vector.zero(float, 3), h)
    return d, turned(axes, n)


# A @ v and A^T v built whole, not by Taichi's matrix product, whose entry-by-entry stores made Taichi 1.7's reverse
# pass warn "Loading variable ... before anything is stored" (see point_box)
@ti.func
def turned(axes, v):
    return ti.Vector([axes[i, 0] * v[0] + axes[i, 1] * v[1] + axes[i, 2] * v[2] for i in ti.static(range(3))])


@ti.func
def turned_back(axes, v):
    return ti.Vector([axes[0, i] * v[0] + axes[1, i] * v[1] + axes[2, i] * v[2] for i in ti.static(range(3))])


@ti.func
def point_turned_box_reverse(p, c, axes, h, d_bar, n_bar):
    """The reverse of point_turned_box: (dL/dp, dL/daxes) from dL/dd and dL/dn (dL/dc = -dL/dp; h is a constant
    here)."""
    q = turned_back(axes, p - c)
    _, n = point_box(q, ti.Vector.zero(float, 3), h)
    q_bar, _ = point_box_reverse(q, ti.Vector.zero(float, 3), h, d_bar)
    # q = A^T (p - c): dL/dp = A dL/dq, dL/dA = (p - c) dL/dq^T; the world normal A n: dL/dA += dL/dn n^T
    return turned(axes, q_bar), (p - c).outer_product(q_bar) + n_bar.outer_product(n)
