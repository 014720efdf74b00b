"""The contact and friction laws of tisim.physics.contact, evaluated in Taichi and compared with their formulas and
physics."""
import math

import numpy as np
import pytest
import taichi as ti

from tisim.physics import contact

G = 9.8


@ti.kernel
def evaluate(law: ti.template(), arity: ti.template(), outputs: ti.template(), args: ti.types.ndarray(ndim=2),
             out: ti.types.ndarray(ndim=2)):
    for i in range(args.shape[0]):
        value = law(*[args[i, j] for j in ti.static(range(arity))])
        if ti.static(outputs == 1):
            out[i, 0] = value
        else:
            for j in ti.static(range(outputs)):
                out[i, j] = value[j]


def law(function, *columns, outputs=1):
    """Evaluate a contact Taichi function row by row over broadcast numpy columns; returns (N,) or (N, outputs)."""
    args = np.stack(np.broadcast_arrays(*[np.asarray(c, dtype=np.float64) for c in columns]), axis=1)
    args = np.ascontiguousarray(args.reshape(-1, len(columns)))
    out = np.zeros((len(args), outputs))
    evaluate(function, len(columns), outputs, args, out)
    return out[:, 0] if outputs == 1 else out


def law_gradient(function, *columns):
    """d(output)/d(each argument) of a scalar contact function by Taichi's reverse mode; shape (N, arguments)."""
    args = np.stack(np.broadcast_arrays(*[np.asarray(c, dtype=np.float64) for c in columns]), axis=1)
    x = ti.ndarray(ti.f64, args.shape, needs_grad=True)
    y = ti.ndarray(ti.f64, (len(args), 1), needs_grad=True)
    x.from_numpy(np.ascontiguousarray(args))
    evaluate(function, len(columns), 1, x, y)
    x.grad.fill(0.0)
    y.grad.fill(1.0)
    evaluate.grad(function, len(columns), 1, x, y)
    return x.grad.to_numpy()


def penalty(d, vn, k, c, s):
    return law(contact.penalty_normal, d, vn, k, c, s)


# ---- normal force ----------------------------------------------------------------------------------------------------

def test_penalty_normal_hard_is_clamped_spring_damper():
    """Hard law (s = 0): fn = max(0, k d - c vn) for d > 0 and exactly 0 for d <= 0."""
    rng = np.random.default_rng(0)
    d = np.concatenate([rng.uniform(-0.01, 0.01, 400), [0.0, 0.0, -1e-300, 1e-12]])
    vn = np.concatenate([rng.uniform(-3.0, 3.0, 400), [-1.0, 1.0, -5.0, -1.0]])
    k, c = 1e5, 80.0
    fn = penalty(d, vn, k, c, 0.0)
    expected = np.where(d > 0, np.maximum(0.0, k * d - c * vn), 0.0)
    np.testing.assert_allclose(fn, expected, rtol=1e-14, atol=0)
    assert np.all(fn[d <= 0] == 0.0)
    assert np.any((d > 0) & (vn > 0) & (fn == 0.0)), "the clamp (no adhesion) was never exercised"


def test_penalty_normal_soft_tends_to_hard():
    """Soft law: 0 <= soft - hard <= k s ln 2, and it equals the hard law away from d = 0 as s -> 0."""
    # softness s > 0: with vn = 0, 0 <= soft - hard <= k s ln 2 everywhere (equality at d = 0), and for |d| >= 1 mm the
    # soft law equals the hard one to 1e-12 relative once s <= 1e-5.
    k, c = 1e5, 50.0
    d = np.linspace(-0.01, 0.01, 2001)
    for s in (1e-3, 1e-4, 1e-5):
        excess = penalty(d, 0.0, k, c, s) - penalty(d, 0.0, k, c, 0.0)
        round_off = 1e-13 * k * np.abs(d).max()
        assert excess.min() >= -round_off and excess.max() <= k * s * math.log(2) + round_off
        assert excess[1000] == pytest.approx(k * s * math.log(2), rel=1e-12)
    far = np.abs(d) >= 1e-3
    vn = np.linspace(-2.0, 0.0, d.size)
    soft, hard = penalty(d, vn, k, c, 1e-5), penalty(d, vn, k, c, 0.0)
    np.testing.assert_allclose(soft[far], hard[far], rtol=1e-12, atol=1e-12)


def test_penalty_normal_soft_is_smooth_and_hard_is_not():
    """Soft fn is C^2 across contact (second differences scale as h^2); the hard one jumps."""
    # Across contact (d from -5 mm to 5 mm, approaching at 1 m/s), halving the grid spacing divides the largest second
    # difference of fn by ~4 for s = 1 mm (C^2) but leaves it ~unchanged for s = 0 (the gate jumps by c |vn| at d = 0).
    k, c = 1e5, 50.0

    def largest_second_difference(s, h):
        d = np.arange(-5e-3, 5e-3 + h / 2, h) + h / 3  # offset: no grid point falls exactly on d = 0
        return np.abs(np.diff(penalty(d, -1.0, k, c, s), 2)).max()

    soft = largest_second_difference(1e-3, 2e-5) / largest_second_difference(1e-3, 1e-5)
    hard = largest_second_difference(0.0, 2e-5) / largest_second_difference(0.0, 1e-5)
    assert 3.8 < soft < 4.2, soft
    assert 0.8 < hard < 1.25, hard


def test_penalty_normal_soft_gradient_is_finite_far_from_contact():
    """The soft law's reverse-mode gradient matches central differences and stays finite far away."""
    # Far away (d / s = -1e4) the sigmoid 1 / (1 + exp(-z)) once overflowed and its derivative became inf * 0 = NaN.
    k, c, s = 1e5, 50.0, 1e-3
    d, vn = np.array([-10.0, -1.0, -2e-3, 5e-4, 3e-3]), np.array([-1.0, 1.0, -0.5, -2.0, -1.0])
    grad = law_gradient(contact.penalty_normal, d, vn, k, c, s)
    assert np.all(np.isfinite(grad)), grad
    assert np.all(grad[:2] == 0.0)
    hd, hv = 1e-10, 1e-7
    by_d = (penalty(d + hd, vn, k, c, s) - penalty(d - hd, vn, k, c, s)) / (2 * hd)
    by_vn = (penalty(d, vn + hv, k, c, s) - penalty(d, vn - hv, k, c, s)) / (2 * hv)
    np.testing.assert_allclose(grad[:, 0], by_d, rtol=1e-6, atol=0)
    np.testing.assert_allclose(grad[:, 1], by_vn, rtol=1e-6, atol=0)


# ---- restitution -----------------------------------------------------------------------------------------------------

def test_restitution_damping_matches_python_twin():
    """restitution_damping in Taichi equals restitution_damping_value, including e = 0 and e = 1."""
    e = np.array([0.0, 1e-6, 0.1, 0.3, 0.5, 0.8, 0.95, 0.999, 1.0])
    k = np.array([1e3, 1e4, 1e5, 1e6, 1e5, 1e5, 3e4, 1e5, 1e5])
    m = np.array([1.0, 0.1, 2.0, 0.5, 1.0, 1.0, 7.0, 1.0, 1.0])
    got = law(contact.restitution_damping, e, k, m)
    expected = np.array([contact.restitution_damping_value(*row) for row in zip(e, k, m)])
    np.testing.assert_allclose(got, expected, rtol=1e-14, atol=1e-300)
    assert got[0] == pytest.approx(2 * math.sqrt(1e3), rel=1e-14) and got[-1] == 0.0


@ti.func
def isotropic_3d(vx, vy, vz, fn, mu, eps):
    return contact.friction_isotropic_tanh(ti.Vector([vx, vy, vz]), fn, mu, eps)


def test_the_python_twins_of_the_soft_law_and_the_isotropic_friction_are_the_taichi_laws():
    """penalty_normal_soft_compression_value and friction_isotropic_tanh_value (the numpy referees of the 3D
    articulation use them) equal the Taichi laws to a few ulp: soft and hard, apart, touching, compressing and
    separating; slip at rest, slow and fast."""
    rng = np.random.default_rng(0)
    d = np.r_[-0.01, -1e-4, 0.0, 1e-5, 1e-3, 0.02, rng.uniform(-0.01, 0.01, 20)]
    vn = np.r_[0.3, -0.2, 0.0, -1.0, 0.5, -0.01, rng.normal(0, 0.5, 20)]
    for s in (0.0, 1e-3):
        got = law(contact.penalty_normal_soft_compression, d, vn, 2e4, 50.0, s)
        expected = [contact.penalty_normal_soft_compression_value(*row, 2e4, 50.0, s) for row in zip(d, vn)]
        np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-12)
    vt = np.r_[np.zeros((1, 3)), [[1e-4, 0, 0], [0.003, -0.004, 0]], rng.normal(0, 0.05, (10, 3))]
    got = law(isotropic_3d, vt[:, 0], vt[:, 1], vt[:, 2], 7.0, 0.6, 0.01, outputs=3)
    expected = [contact.friction_isotropic_tanh_value(v, 7.0, 0.6, 0.01) for v in vt]
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-15)


def test_spring_damper_bounce_has_restitution_e():
    """The linear spring-damper with c = restitution_damping(e, k, m) rebounds with speed e v0."""
    # A free linear spring-damper contact (m x'' = -k x - c x', entering at x' = v0) with c = restitution_damping(e)
    # leaves at x = 0 with speed e v0 (RK4 in numpy at 4000 steps per period; agreement to 1e-6).
    e = np.array([0.1, 0.3, 0.5, 0.8, 0.95])
    k, m, v0 = 1e5, 1.0, 2.0
    c = np.array([contact.restitution_damping_value(ei, k, m) for ei in e])
    h = 2 * math.pi * math.sqrt(m / k) / 4000

    def rate(x, v):
        return v, -(k * x + c * v) / m

    x, v = np.zeros_like(e), np.full_like(e, v0)
    exit_speed = np.full_like(e, np.nan)
    for _ in range(3000):  # the contact lasts half a damped period: < 2001 steps here
        k1 = rate(x, v)
        k2 = rate(x + h / 2 * k1[0], v + h / 2 * k1[1])
        k3 = rate(x + h / 2 * k2[0], v + h / 2 * k2[1])
        k4 = rate(x + h * k3[0], v + h * k3[1])
        x_new = x + h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        v_new = v + h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        crossed = np.isnan(exit_speed) & (x_new < 0) & (x > 0)
        # the exit time from the cubic (Hermite) interpolant of x, then the speed there
        for i in np.flatnonzero(crossed):
            s = _hermite_root(x[i], x_new[i], v[i] * h, v_new[i] * h)
            exit_speed[i] = -_hermite_value(v[i], v_new[i], h * k1[1][i], h * rate(x_new[i], v_new[i])[1][i], s)
        x, v = x_new, v_new
    assert not np.any(np.isnan(exit_speed))
    np.testing.assert_allclose(exit_speed / v0, e, rtol=1e-6)


def _hermite_value(p0, p1, m0, m1, s):
    return ((2 * s**3 - 3 * s**2 + 1) * p0 + (s**3 - 2 * s**2 + s) * m0 + (-2 * s**3 + 3 * s**2) * p1
            + (s**3 - s**2) * m1)


def _hermite_root(p0, p1, m0, m1):
    lo, hi = 0.0, 1.0  # p0 > 0 > p1
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _hermite_value(p0, p1, m0, m1, mid) > 0 else (lo, mid)
    return (lo + hi) / 2


def test_restitution_toi_drop_is_exact():
    """A drop that hits the floor within the step ends where the analytic flight-impact-flight puts it."""
    # A ball dropped from h that hits y = 0 within the step ends it where the analytic flight-impact-flight puts it:
    # impact at t* = sqrt(2h/g), then y = e g t* s - g s^2 / 2, v = e g t* - g s with s = dt - t*.
    e = np.array([0.8, 0.5, 1.0, 0.9, 0.3])
    h = np.array([1e-3, 2e-4, 4.9e-5, 1e-2, 3e-4])
    dt = np.array([0.02, 0.01, 0.005, 0.05, 0.0085])
    hit = np.sqrt(2 * h / G)
    s = dt - hit
    assert np.all(s > 0) and np.all(2 * e * hit > s), "each case must bounce once and stay up"
    got = law(contact.restitution_toi, h, 0.0, -G, e, dt, outputs=2)
    np.testing.assert_allclose(got[:, 0], e * G * hit * s - G * s**2 / 2, rtol=1e-12)
    np.testing.assert_allclose(got[:, 1], e * G * hit - G * s, rtol=1e-12)


def test_restitution_toi_without_impact_is_ballistic():
    """A step that does not reach the floor is the exact constant-acceleration flight."""
    y, v, a, dt = np.array([1.0, 0.5, 0.01]), np.array([0.0, -2.0, 3.0]), np.array([-G, -G, -G]), 0.01
    got = law(contact.restitution_toi, y, v, a, 0.8, dt, outputs=2)
    np.testing.assert_allclose(got[:, 0], y + v * dt + a * dt**2 / 2, rtol=1e-15)
    np.testing.assert_allclose(got[:, 1], v + a * dt, rtol=1e-15)


def test_restitution_toi_rest_and_repeated_impact():
    """Resting, e = 0 and a rebound that lands again within the step all end at rest on the floor."""
    # On the floor at rest the body stays there; a rebound that would land again inside the step (including e = 0) ends
    # it at rest on the floor rather than below it.
    cases = np.array([  # y, v, a, e, dt
        [0.0, 0.0, -G, 0.8, 1e-3],    # resting
        [1e-7, -0.01, -G, 0.8, 1e-2],  # tiny bounce: the rebound (< 2 mm/s up) lands again within the step
        [0.01, -1.0, -G, 0.0, 0.05],   # perfectly inelastic
    ])
    got = law(contact.restitution_toi, *cases.T, outputs=2)
    np.testing.assert_array_equal(got, np.zeros((3, 2)))


# ---- friction --------------------------------------------------------------------------------------------------------

def test_tanh_of_positive_is_tanh_to_a_few_ulp_with_its_derivative():
    z = np.concatenate([[0.0], np.logspace(-12, 1.7, 2001)])  # across the series' cut at 0.02 and into saturation
    assert np.max(np.abs(law(contact.tanh_of_positive, z) - np.tanh(z)) / np.maximum(np.tanh(z), 1e-300)) < 1e-14
    slope = law_gradient(contact.tanh_of_positive, z)[:, 0]
    np.testing.assert_allclose(slope, 1.0 / np.cosh(z) ** 2, rtol=1e-13, atol=1e-300)


def test_regularized_coulomb_laws():
    """tanh and Huber friction follow their formulas, are odd in vt and bounded by mu fn."""
    # tanh: ft = -mu fn tanh(vt/eps); huber: ft = -mu fn clamp(vt/eps, -1, 1); both odd in vt and |ft| <= mu fn.
    rng = np.random.default_rng(1)
    vt = np.concatenate([rng.normal(0, 0.02, 300), rng.normal(0, 3, 100), [0.0, 1e-3, -1e-3, 0.01, -0.01, 50.0]])
    fn, mu, eps = rng.uniform(0.5, 20, vt.size), rng.uniform(0, 1.2, vt.size), rng.uniform(1e-3, 0.1, vt.size)
    tanh = law(contact.friction_coulomb_tanh, vt, fn, mu, eps)
    huber = law(contact.friction_coulomb_huber, vt, fn, mu, eps)
    np.testing.assert_allclose(tanh, -mu * fn * np.tanh(vt / eps), rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(huber, -mu * fn * np.clip(vt / eps, -1, 1), rtol=1e-14, atol=1e-300)
    for ft, flipped in ((tanh, law(contact.friction_coulomb_tanh, -vt, fn, mu, eps)),
                        (huber, law(contact.friction_coulomb_huber, -vt, fn, mu, eps))):
        np.testing.assert_array_equal(ft, -flipped)
        assert np.all(np.abs(ft) <= mu * fn * (1 + 1e-15))
    sliding = np.abs(vt) > 20 * eps
    np.testing.assert_allclose(tanh[sliding], -mu[sliding] * fn[sliding] * np.sign(vt[sliding]), rtol=1e-15)


def test_friction_clip_to_stop_never_reverses_the_velocity():
    """friction_clip_to_stop caps |ft| at m |vt| / dt, so a stiff law stops the body, never reverses it."""
    # friction_clip_to_stop keeps ft when |ft| <= m |vt| / dt and clips it to that bound otherwise, so one explicit step
    # v + dt ft / m lands between 0 and v: a stiff regularized law (here dt mu fn / (m eps) = 49) stops, never reverses.
    m, dt, fn, mu, eps = 1.0, 1e-3, 9.8, 0.5, 1e-4
    vt = np.array([-2.0, -0.01, -1e-4, -1e-7, 0.0, 1e-7, 1e-5, 1e-3, 0.5])
    ft = law(contact.friction_coulomb_tanh, vt, fn, mu, eps)
    clipped = law(contact.friction_clip_to_stop, ft, vt, m, dt)
    cap = m * np.abs(vt) / dt
    np.testing.assert_array_equal(clipped, np.clip(ft, -cap, cap))
    assert np.any(np.abs(ft) > cap) and np.any(np.abs(ft) < cap)
    after = vt + dt * clipped / m
    assert np.all(after * vt >= 0) and np.all(np.abs(after) <= np.abs(vt))
    assert np.any(after == 0.0) and np.any((vt + dt * ft / m) * vt < 0)


def test_friction_stick_slip_sticks_exactly_or_slips_at_kinetic():
    """friction_stick_slip stops the body exactly within mu_s fn and slips at -mu fn sign(v) beyond."""
    # Stick: when the force that stops the body this step, -m v_free / dt, is within mu_s fn it is returned and the body
    # ends the step at exactly v = 0. Slip: otherwise the force is kinetic, -mu fn sign(v_free).
    m, dt, fn, mu_s, mu = 2.0, 1e-3, 19.6, 0.5, 0.3  # static limit mu_s fn = 9.8 N <=> |v_free| <= 4.9e-3 m/s
    v_free = np.array([0.0, 1e-3, -4.8e-3, 4.9e-3 * (1 - 1e-12), 5e-3, -0.2, 3.0])
    f = law(contact.friction_stick_slip, v_free, fn, mu_s, mu, m, dt)
    stuck = np.abs(m * v_free / dt) <= mu_s * fn
    assert stuck.tolist() == [True, True, True, True, False, False, False]
    np.testing.assert_allclose(f[stuck], -m * v_free[stuck] / dt, rtol=1e-15, atol=0)
    np.testing.assert_array_equal(v_free[stuck] + dt * f[stuck] / m, 0.0)
    np.testing.assert_allclose(f[~stuck], -mu * fn * np.sign(v_free[~stuck]), rtol=1e-15)
