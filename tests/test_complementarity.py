"""Contact as a convex problem (tisim.physics.complementarity, contact="qp" / friction="qp"): the impulses against an
independent numpy solution of their optimality conditions, the implicit-function-theorem derivative against the
formula and the unrolled one against central differences, and the physics of rigid contact: no penetration, rest
without drift, restitution, Coulomb stopping, stick and slip within one step."""
import numpy as np
import pytest
import taichi as ti

import tisim
from tisim.autodiff.gradient_check import relative_errors
from tisim.core import runtime
from tisim.physics.complementarity import NEWTON_STEPS, contact_impulse, friction_impulse, normal_impulse
from tisim.systems import BouncingBall, Rigid2D, SlidingBlock

G, R = 9.8, 0.1


def barrier_root(a, c, kappa):
    """The friction impulse on the central path, by bisection on the barrier's stationarity in w itself:
    a + w + kappa / (c - w) - kappa / (c + w) = 0 on (-c, c) (increasing in w)."""
    lo, hi = -c, c
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if a + mid + kappa / (c - mid) - kappa / (c + mid) > 0 else (mid, hi)
    return 0.5 * (lo + hi)


CASES = np.random.default_rng(0)
A = np.concatenate([CASES.uniform(-0.03, 0.03, 20), CASES.uniform(-0.3, 0.3, 12), [0.0, 1e-9, -2.0, 2.0]])
C = np.concatenate([CASES.uniform(0.002, 0.02, 32), [0.01, 0.01, 0.01, 0.01]])
KAPPA = np.concatenate([10.0 ** CASES.uniform(-9, -4, 32), [1e-6, 1e-6, 1e-8, 1e-3]])


SOLVERS = {}  # (runtime generation, n, steps, implicit): (fields, kernel), compiled once per test process


def impulses(a, c, kappa, steps=NEWTON_STEPS, implicit=True):
    """friction_impulse and normal_impulse (of z = a) on arrays, with their derivatives: (value, d/da, d/dc,
    d/dkappa) for the friction impulse and (value, d/dz, d/dkappa) for the normal one."""
    runtime.ensure_init()
    n = len(a)
    key = (runtime.generation(), n, steps, implicit)
    if key not in SOLVERS:
        fields = tuple(ti.field(ti.f64, n, needs_grad=True) for _ in range(5))
        a_, c_, k_, w, wn = fields

        @ti.kernel
        def solve():
            for i in range(n):
                w[i] = friction_impulse(a_[i], c_[i], k_[i], steps, implicit)
                wn[i] = normal_impulse(a_[i], k_[i])
        SOLVERS[key] = fields, solve
    (a_, c_, k_, w, wn), solve = SOLVERS[key]
    for field, values in ((a_, a), (c_, c), (k_, kappa)):
        field.from_numpy(np.asarray(values, dtype=np.float64))
    solve()
    friction = [w.to_numpy()]
    for f, seed in ((a_, 0.0), (c_, 0.0), (k_, 0.0), (w, 1.0), (wn, 0.0)):
        f.grad.fill(seed)
    solve.grad()
    friction += [f.grad.to_numpy() for f in (a_, c_, k_)]
    for f, seed in ((a_, 0.0), (c_, 0.0), (k_, 0.0), (w, 0.0), (wn, 1.0)):
        f.grad.fill(seed)
    solve.grad()
    return friction, [wn.to_numpy(), a_.grad.to_numpy(), k_.grad.to_numpy()]


def test_impulses_solve_their_optimality_conditions():
    """On the central path the friction impulse is the bisection root of the barrier's stationarity in w (to 1e-14
    of c), the normal impulse the positive root of w^2 + z w - kappa (to 1e-14); at kappa = 0 they are the exact
    clamp(-a, -c, c) and max(0, -z); and the derivatives, converged, are the implicit function theorem's at the
    exact root (to 1e-9), implicit and unrolled alike. (kappa >= 1e-9 here: a smaller one puts the root within 1e-16
    of the cone's edge, where numpy's w has too few digits left to check against.)"""
    exact = np.array([barrier_root(*p) for p in zip(A, C, KAPPA)])
    slope = 1 + KAPPA / (C - exact) ** 2 + KAPPA / (C + exact) ** 2  # d/dw of the stationarity
    derivatives = (-1 / slope, (KAPPA / (C - exact) ** 2 - KAPPA / (C + exact) ** 2) / slope,
                   -(1 / (C - exact) - 1 / (C + exact)) / slope)
    root = np.sqrt(A**2 + 4 * KAPPA)
    normal = np.where(A > 0, 2 * KAPPA / (A + root), (root - A) / 2)  # the root of w^2 + z w - kappa, w > 0
    for implicit in (True, False):
        friction, normal_out = impulses(A, C, KAPPA, implicit=implicit)
        np.testing.assert_allclose(friction[0], exact, rtol=0, atol=1e-14 * C.max())
        for got, want in zip(friction[1:], derivatives):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())
        np.testing.assert_allclose(normal_out[0], normal, rtol=1e-13, atol=1e-16)
        np.testing.assert_allclose(normal_out[1], -normal / np.sqrt(A**2 + 4 * KAPPA), rtol=1e-10)
        np.testing.assert_allclose(normal_out[2], 1 / np.sqrt(A**2 + 4 * KAPPA), rtol=1e-10)
    zero = np.zeros_like(A)
    friction, normal_out = impulses(A, C, zero)
    np.testing.assert_array_equal(friction[0], np.clip(-A, -C, C))
    np.testing.assert_array_equal(friction[1], np.where(np.abs(A) < C, -1.0, 0.0))
    np.testing.assert_array_equal(normal_out[0], np.maximum(-A, 0.0))
    for values in friction + normal_out:
        assert np.isfinite(values).all()  # the smooth form, computed and not taken, leaves no NaN in the gradient


def test_unconverged_the_implicit_derivative_is_the_formula_and_unrolled_is_the_iterations():
    """With 2 Newton steps the iterate is not converged. The implicit derivative is the implicit function theorem's
    formula at the iterate before the last step (computed here from the 1-step solve's result), to 1e-10, not the
    derivative of the iterations; the unrolled one is that derivative (central differences of the 2-step map, to
    1e-6), and the two differ."""
    a, c, kappa = A[:32], C[:32], KAPPA[:32]
    implicit, _ = impulses(a, c, kappa, steps=2, implicit=True)
    unrolled, _ = impulses(a, c, kappa, steps=2, implicit=False)
    u = np.arctanh(impulses(a, c, kappa, steps=1)[0][0] / c)  # the iterate the 2-step solve's last step starts at
    alpha, k = a / c, kappa / c**2
    g = alpha + np.tanh(u) + k * np.sinh(2 * u)
    slope = 1 / np.cosh(u) ** 2 + 2 * k * np.cosh(2 * u)
    y = np.tanh(u - g / slope)
    np.testing.assert_allclose(implicit[0], c * y, rtol=1e-12)
    dy_dalpha, dy_dk = -(1 - y**2) / slope, -(1 - y**2) * np.sinh(2 * u) / slope
    formula = (dy_dalpha, y + c * (dy_dalpha * -a / c**2 + dy_dk * -2 * kappa / c**3), dy_dk / c)
    for got, want in zip(implicit[1:], formula):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10 * np.abs(want).max())
    h = 1e-5  # relative; at 1e-7 round-off in w (~1e-18) over 2 h kappa (~1e-16) is already 1e-4 of dw/dkappa
    for k_arg in range(3):
        args = [a, c, kappa]
        up, down = ([x * (1 + s * h) if i == k_arg else x for i, x in enumerate(args)] for s in (1, -1))
        central = (impulses(*up, steps=2, implicit=False)[0][0] - impulses(*down, steps=2, implicit=False)[0][0]) \
            / (2 * h * args[k_arg])
        np.testing.assert_allclose(unrolled[1 + k_arg], central, rtol=1e-6, atol=1e-6 * np.abs(central).max())
    assert max(np.abs(i - u_).max() / np.abs(u_).max() for i, u_ in zip(implicit[1:], unrolled[1:])) > 1e-3


def drop(horizon, contact, **params):
    """A disc of radius R dropped from rest, its centre 1 m up."""
    return BouncingBall(horizon=horizon, contact=contact, r=R, py=1.0, **params).rollout()


def test_a_dropped_disc_never_enters_the_floor_and_then_rests_without_drift():
    """QP contact, e = 0.5: over 10 s the disc never goes below the floor (to 1e-12 m) and the disc
    ends at rest on it, exactly (|py - r|, |vy| <= 1e-12 over the last second); penalty contact (k = 1e5 N/m) sinks
    millimetres on the same drop (about v sqrt(m / k) = 13 mm)."""
    qp = drop(10000, "qp", e=0.5)
    gap, vy = qp["py"][0] - R, qp["vy"][0]
    assert gap.min() >= -1e-12
    assert np.abs(gap[-1000:]).max() <= 1e-12 and np.abs(vy[-1000:]).max() <= 1e-12
    penalty = drop(1000, "penalty", e=0.5)
    assert (R - penalty["py"][0]).max() > 5e-3


def test_bounces_follow_the_restitution_coefficient():
    """The apexes after the first three bounces are at e^(2n) times the drop height (0.9 m): within 2.5% at dt = 1 ms
    (measured -0.5%, -1.2%, -2.0%: semi-implicit Euler's flight, the bounce itself is at the exact time of impact),
    and the error halves with dt (first order)."""
    e, errors = 0.8, []
    for dt in (1e-3, 5e-4):
        traj = BouncingBall(horizon=int(3.0 / dt), dt=dt, contact="qp", e=e, r=R, py=1.0).rollout()
        py, vy = traj["py"][0], traj["vy"][0]
        apex = np.nonzero((vy[:-1] > 0) & (vy[1:] <= 0))[0]
        errors.append((py[apex[:3]] - R) / (0.9 * e ** (2 * np.arange(1, 4))) - 1)
    assert np.abs(errors[0]).max() < 2.5e-2
    np.testing.assert_allclose(errors[0] / errors[1], 2.0, rtol=0.1)


def test_kappa_floats_a_resting_disc_kappa_over_g():
    """kappa > 0: a disc resting on the floor settles kappa / g above it (the support impulse g dt times the slack
    gap / dt is kappa), to 1e-9."""
    for kappa in (1e-4, 1e-3):
        traj = BouncingBall(horizon=5000, contact="qp", r=R, py=R, kappa=kappa).rollout()
        assert traj["py"][0, -1] - R == pytest.approx(kappa / G, rel=1e-9)


def test_coulomb_friction_stops_a_sliding_disc():
    """A disc on the floor sliding at 2 m/s, mu = 0.5: it stops after v0^2 / (2 mu g) within 1% and then stays
    exactly at rest; its velocity never reverses."""
    v0, mu = 2.0, 0.5
    traj = BouncingBall(horizon=1000, contact="qp", r=R, py=R, vx=v0, mu=mu).rollout()
    px, vx = traj["px"][0], traj["vx"][0]
    assert px[-1] == pytest.approx(v0**2 / (2 * mu * G), rel=1e-2)
    assert vx.min() >= 0.0 and np.all(vx[int(1.1 * v0 / (mu * G) / 1e-3):] == 0.0)


def test_stick_below_and_slip_above_mu_within_one_step():
    """A block at rest pushed at 0.999 mu m g stays exactly at rest; at 1.001 mu m g it slides from the first step at
    exactly (F - mu m g) / m."""
    steps, mu, m = 200, 0.3, 2.0
    sim = SlidingBlock(horizon=steps, batch=2, friction="qp", mu=mu, m=m)
    push = np.array([0.999, 1.001]) * mu * m * G
    sim.set_actions(np.repeat(push[:, None], steps, axis=1))
    v = sim.rollout()["v"]
    assert np.all(v[0] == 0.0)
    np.testing.assert_allclose(v[1, 1:], np.arange(1, steps + 1) * 1e-3 * (push[1] - mu * m * G) / m, rtol=1e-9)


def thrown(solver_gradient, kappa, horizon=400):
    """A disc thrown down and sideways: it bounces (e = 0.5) and slides with friction (mu = 0.3) before the end."""
    sim = BouncingBall(horizon=horizon, batch=2, contact="qp", solver_gradient=solver_gradient, kappa=kappa, r=R,
                       e=0.5, mu=0.3, px=[0.0, 0.1], py=[0.3, 0.25], vx=[1.0, 0.6], vy=[-1.0, -0.5])
    sim.set_actions(np.random.default_rng(1).normal(size=(2, horizon, 2)))
    return sim, tisim.losses.TerminalTarget({"px": 0.5, "py": 0.3, "vx": 0.1}) + 0.01 * tisim.losses.Effort()


@pytest.mark.parametrize("solver_gradient", BouncingBall.OPTIONS["solver_gradient"])
@pytest.mark.parametrize("kappa", [0.0, 1e-4])
def test_qp_contact_gradients_match_central_differences(solver_gradient, kappa):
    """Through a bounce and a frictional slide, every group against Richardson-extrapolated float64 central
    differences, to 1e-5 (measured: 4e-7 at kappa = 0, 1.2e-6 at kappa = 1e-4); at kappa = 0 all parameters but
    kappa itself (dL/dkappa is one-sided and infinite there: the impulses grow as sqrt(kappa))."""
    sim, loss = thrown(solver_gradient, kappa)
    traj = sim.rollout()
    vy = traj["vy"]
    assert ((vy[:, :-1] < 0) & (vy[:, 1:] > 0)).sum(axis=1).min() >= 1  # each bounced,
    assert np.abs(traj["vx"][:, -1]).max() < 0.1  # and friction stopped its slide
    # step 2e-6: with kappa > 0 the loss curves on a scale of about 1e-4 in r (the differences at step 1e-5 are off
    # by 6e-6 there and converge onto the backward pass below 3e-6)
    report = tisim.gradcheck(sim, loss, step=2e-6, extrapolate=True, max_entries=12)
    assert report["initial_state"].worst <= 1e-5 and report["actions"].worst <= 1e-5, str(report)
    params = report["params"]
    assert params.checked == 2 * len(sim.param_layout.labels())  # every parameter, both batch elements
    keep = [i for i, label in enumerate(sim.param_layout.labels()) if kappa > 0 or label != "kappa"]
    errors = relative_errors(params.backward[:, keep], params.central[:, keep])
    assert errors.max() <= 1e-5, f"{errors}\n{report}"


def test_implicit_and_unrolled_gradients_agree_once_converged():
    """At the default Newton steps the friction solve has converged: the two rollout gradients agree to 1e-10."""
    grads = {}
    for name in BouncingBall.OPTIONS["solver_gradient"]:
        sim, loss = thrown(name, 1e-4)
        g = sim.gradient(loss)
        grads[name] = np.concatenate([np.ravel(v) for v in g.params.values()] + [np.ravel(g.actions)])
    np.testing.assert_allclose(grads["implicit"], grads["unrolled"], rtol=1e-10,
                               atol=1e-10 * np.abs(grads["unrolled"]).max())


def test_checkpointed_gradients_equal_unrolled():
    """Two checkpointed segments recompute the same steps: the same gradient as unrolled, to 1e-12, on both
    systems' QP contact with kappa > 0 (the Newton steps run) and at kappa = 0."""
    block = SlidingBlock(horizon=300, batch=2, friction="qp", kappa=[1e-6, 0.0], v=[0.5, -0.3])
    block.set_actions(np.random.default_rng(2).normal(size=(2, 300)))
    cases = [thrown("implicit", 1e-4), thrown("unrolled", 0.0),
             (block, tisim.losses.TerminalTarget({"x": 0.3}) + 0.01 * tisim.losses.Effort())]
    for sim, loss in cases:
        flat = [np.concatenate([np.ravel(v) for v in g.params.values()] + [np.ravel(g.actions)])
                for g in (sim.gradient(loss), sim.gradient(loss, method="checkpointed", segments=2))]
        np.testing.assert_allclose(flat[1], flat[0], rtol=1e-12, atol=1e-12 * np.abs(flat[0]).max())


# ---- Rigid2D contact="qp": each contact's two-body problem, with the Delassus matrix of turning bodies -------------
def test_a_frictionless_central_collision_conserves_momentum_and_restitutes_e():
    """Two discs (1 and 2 kg) collide head on, no gravity, no friction, e = 0.9: momentum is conserved to round-off
    at every step, the velocities after are the textbook (m1 - e m2) v / (m1 + m2) and (1 + e) m1 v / (m1 + m2)
    (to 1e-12), and the discs never overlap."""
    sim = Rigid2D(horizon=600, n_discs=2, ground="off", contact="qp", g=0.0, mu=0.0, e=0.9, px=[0.0, 0.3],
                  py=[0.0, 0.0], vx=[1.0, 0.0], m=[1.0, 2.0])
    traj = sim.rollout()
    momentum = traj["vx"][0] @ [1.0, 2.0]
    np.testing.assert_allclose(momentum, 1.0, rtol=0, atol=1e-14)
    np.testing.assert_allclose(traj["vx"][0, -1], [(1 - 0.9 * 2) / 3, (1 + 0.9) / 3], rtol=0, atol=1e-12)
    assert np.abs(traj["px"][0, :, 1] - traj["px"][0, :, 0]).min() >= 0.2 - 1e-12


def test_rigid_bodies_never_enter_the_floor_and_come_to_rest():
    """Dropped from 0.4 m (e = 0.3), a disc and a box (landing flat, on two corners) never go below the floor (to
    1e-12 m) and end at rest on it; penalty contact (k = 1e5 N/m) sinks the box 3 mm."""
    for bodies in (dict(n_discs=1, n_boxes=0), dict(n_discs=0, n_boxes=1)):
        traj = Rigid2D(horizon=3000, contact="qp", py=0.5, e=0.3, **bodies).rollout()
        assert (traj["py"][0, :, 0] - 0.1).min() >= -1e-12
        assert abs(traj["vy"][0, -1, 0]) < 1e-9 and (traj["py"][0, -1, 0] - 0.1) < 1e-5
    penalty = Rigid2D(horizon=3000, n_discs=0, n_boxes=1, py=0.5, e=0.3).rollout()
    assert (0.1 - penalty["py"][0, :, 0]).max() > 2e-3


def test_two_body_impulse_solves_the_coulomb_problem():
    """contact_impulse against an independent numpy solution of the one-contact Coulomb problem, found by trying
    every case (apart, sticking, slipping either way) and keeping the one whose conditions hold, on random
    Delassus matrices, free velocities and targets."""
    rng = np.random.default_rng(4)
    n = 200
    L = rng.normal(size=(n, 2, 2))
    W = L @ np.transpose(L, (0, 2, 1)) + 0.1 * np.eye(2)
    vn, vt, b, mu = rng.normal(size=n), rng.normal(size=n), rng.normal(size=n) * 0.5, rng.uniform(0.1, 1.0, n)
    W[:, 0, 1] = W[:, 1, 0] = np.clip(W[:, 0, 1], -0.5 * W[:, 0, 0] / mu, 0.5 * W[:, 0, 0] / mu)  # no Painleve
    expected = np.zeros((n, 2))
    for k in range(n):
        need = b[k] - vn[k]
        if need <= 0:
            continue
        stick = np.linalg.solve(W[k], [need, -vt[k]])
        if stick[0] >= 0 and abs(stick[1]) <= mu[k] * stick[0]:
            expected[k] = stick
            continue
        for side in (1.0, -1.0):  # friction p_t = side mu p_n: the slip velocity must oppose it
            pn = need / (W[k, 0, 0] + side * mu[k] * W[k, 0, 1])
            slip = vt[k] + W[k, 1, 0] * pn + W[k, 1, 1] * side * mu[k] * pn
            if pn >= 0 and slip * side <= 1e-12:
                expected[k] = pn, side * mu[k] * pn
    runtime.ensure_init()
    inputs = [ti.field(ti.f64, n) for _ in range(7)]
    out = ti.Vector.field(2, ti.f64, n)
    for field, values in zip(inputs, (W[:, 0, 0], W[:, 0, 1], W[:, 1, 1], vn, vt, b, mu)):
        field.from_numpy(values)

    @ti.kernel
    def solve():
        for k in range(n):
            pn, pt = contact_impulse(*[f[k] for f in ti.static(inputs)])
            out[k] = ti.Vector([pn, pt])
    solve()
    np.testing.assert_allclose(out.to_numpy(), expected, rtol=1e-10, atol=1e-12)
    assert (expected[:, 0] > 0).sum() > 50 and (np.abs(expected[:, 1]) < mu * expected[:, 0] - 1e-9).sum() > 10


def test_rigid_qp_gradients_match_central_differences():
    """Two spinning discs collide with friction (mu = 0.3) and one lands on the floor: every group against
    Richardson-extrapolated float64 central differences, to 1e-6."""
    sim = Rigid2D(horizon=300, batch=2, n_discs=2, contact="qp", mu=0.3, e=0.6, px=[[0.0, 0.25]] * 2,
                  py=[[0.3, 0.32], [0.3, 0.28]], vx=[[1.0, -0.5]] * 2, vy=[[-0.5, 0.0]] * 2, omega=[[3.0, 0.0]] * 2)
    sim.set_actions(0.1 * np.random.default_rng(5).normal(size=sim.actions.shape))
    loss = tisim.losses.TerminalTarget({"px": [0.1, 0.4], "py": [0.2, 0.3], "omega": [0.0, 1.0]}) \
        + 0.01 * tisim.losses.Effort()
    traj = sim.rollout()
    vy = traj["vy"][:, :, 0]
    assert ((vy[:, :-1] < 0) & (vy[:, 1:] > 0)).any(axis=1).all()  # disc 0 bounced off the floor in both
    report = tisim.gradcheck(sim, loss, groups=("params", "initial_state"), step=1e-6, extrapolate=True,
                             max_entries=12)
    # one action moves the end by only ~dt^2 / m per N: its differences take a larger step above round-off
    report.update(tisim.gradcheck(sim, loss, groups=("actions",), step=1e-4, extrapolate=True, max_entries=12))
    assert report.worst <= 1e-6, str(report)


@pytest.mark.parametrize("kappa", [0.0, 1e-5])
def test_qp_friction_gradients_match_central_differences(kappa):
    """The block's QP friction through sliding and a stop (exact at kappa = 0; the central path at 1e-5): every
    group against Richardson-extrapolated float64 central differences, to 1e-5 (measured: 3.3e-7 at kappa = 0,
    1.8e-6 at 1e-5, where the smoothed law curves on the scale of kappa); kappa itself only where kappa > 0."""
    sim = SlidingBlock(horizon=300, batch=2, friction="qp", kappa=kappa, v=[0.8, -0.3], mu=[0.3, 0.2])
    sim.set_actions(np.random.default_rng(6).uniform(-0.5, 0.5, size=(2, 300)))
    loss = tisim.losses.TerminalTarget({"x": 0.3, "v": 0.1}) + 0.01 * tisim.losses.Effort()
    report = tisim.gradcheck(sim, loss, groups=("initial_state",), step=1e-6, extrapolate=True)
    report.update(tisim.gradcheck(sim, loss, groups=("actions",), step=1e-4, extrapolate=True, max_entries=12))
    params = tisim.gradcheck(sim, loss, groups=("params",), step=1e-6, extrapolate=True)["params"]
    keep = [i for i, label in enumerate(sim.param_layout.labels()) if kappa > 0 or label != "kappa"]
    worst = max(report.worst, relative_errors(params.backward[:, keep], params.central[:, keep]).max())
    assert worst <= 1e-5, f"{report}\n{params}"


# ---- Rigid2D contact="qp" with several contacts on a body: the step's contacts solved together -------------------
def stack(horizon, sweeps=None, batch=1, offset=0.12, **keywords):
    """A 0.2 m box resting on a 0.4 m one on the floor, shifted right by `offset` so that it rests on its left
    corner and on the lower box's upper right corner (four contacts, coupled through both boxes)."""
    return Rigid2D(horizon=horizon, batch=batch, n_discs=0, n_boxes=2, contact="qp", sweeps=sweeps, hx=[0.2, 0.1],
                   hy=0.1, mu=0.5, px=[0.0, offset], py=[0.1, 0.3], **keywords)


def test_a_stack_of_two_boxes_rests_without_drift():
    """Over 10 s the stack stays where it was put, to 1e-7 m (measured with the default 64 sweeps: 8e-11 m
    sideways, 1e-14 m down); solving each contact alone (one sweep) it creeps by centimetres (measured 4.2 cm with
    the top box shifted 5 cm) or falls over (shifted 12 cm)."""
    traj = stack(10000).rollout()
    for name in ("px", "py", "angle"):
        assert np.abs(traj[name][0] - traj[name][0, 0]).max() < 1e-7, name
    alone = stack(10000, sweeps=1, offset=0.05).rollout()
    assert np.abs(alone["px"][0, -1] - alone["px"][0, 0]).max() > 0.01


def test_stick_below_and_slip_above_mu_on_an_incline_within_one_step():
    """A box on a slope (gravity tilted by alpha: g cos alpha into the floor, g sin alpha along it, as a force on
    the centre) with tan alpha = 0.999 mu stays put: its speed stays below 1% of what one step of sliding would
    give. At 1.001 mu it slides from the first step at g (sin alpha - mu cos alpha): its speed after each step is
    that times t to within 1% of one step's gain. Two boxes, a square and a flat one (which shares its weight
    between its corners differently as it is pushed)."""
    mu, horizon, dt = 0.5, 1000, Rigid2D.DT
    for ratio in (0.999, 1.001):
        alpha = np.arctan(ratio * mu)
        sim = Rigid2D(horizon=horizon, batch=2, n_discs=0, n_boxes=1, contact="qp", mu=mu, g=G * np.cos(alpha),
                      e=0.0, hx=[[0.1], [0.2]], hy=[[0.1], [0.05]], py=[[0.1], [0.05]])
        sim.set_actions(np.broadcast_to([G * np.sin(alpha), 0.0, 0.0], (2, horizon, 1, 3)).copy())
        vx = sim.rollout()["vx"][:, :, 0]
        gain = G * (np.sin(alpha) - mu * np.cos(alpha)) * dt  # the speed one step of sliding adds
        expected = max(gain, 0.0) * np.arange(horizon + 1)
        assert np.abs(vx - expected).max() < 0.01 * abs(gain), ratio


def test_stack_gradients_match_central_differences_and_every_schedule():
    """The upper box of an aligned stack pushed to slide over the lower one, which sticks to the floor: every
    group against Richardson-extrapolated float64 central differences, to 1e-4 relative, 1e-7 absolute (the
    sweeps leave round-off that does not vary smoothly: central differences of step 1e-6 scatter by ~4e-8 where
    the derivative is 0; a larger step crosses the switch where the boxes start to touch); checkpointed (two
    segments) and the per-step schedule (a GPU's) equal to the unrolled gradient to 1e-12; and 96 sweeps give the
    same gradient as the default 64, so it is the converged solution's."""
    horizon = 150
    sim = stack(horizon, batch=2, offset=0.0)
    rng = np.random.default_rng(7)
    actions = np.zeros((2, horizon, 2, 3))
    actions[:, :, 1, 0] = 8.0 + 0.3 * rng.normal(size=(2, horizon))  # [N] against mu m g = 4.9 N: it slides
    sim.set_actions(actions)
    loss = tisim.losses.TerminalTarget({"px": [0.0, 0.2], "angle": [0.0, 0.1]}) + 0.01 * tisim.losses.Effort()
    checks = {}
    for group, step in (("params", 1e-6), ("initial_state", 1e-6), ("actions", 1e-4)):
        checks[group] = tisim.gradcheck(sim, loss, groups=(group,), step=step, extrapolate=True, max_entries=30)[group]
        np.testing.assert_allclose(checks[group].backward, checks[group].central, rtol=1e-4, atol=1e-7,
                                   err_msg=group)
        assert np.abs(checks[group].central).max() > 0.01, group
    labels = sim.param_layout.labels()  # the friction between the boxes and their masses shape the slide
    assert min(abs(checks["params"].central[0, labels.index(name)]) for name in ("mu", "m[1]", "g")) > 1e-3

    def flat(g):
        return np.concatenate([np.ravel(v) for group in (g.params, g.initial_state) for v in group.values()]
                              + [np.ravel(g.actions)])
    reference = flat(sim.gradient(loss))
    other = stack(horizon, batch=2, offset=0.0)
    other.set_actions(actions)
    other._per_step = True
    for variant in (flat(sim.gradient(loss, method="checkpointed", segments=2)), flat(other.gradient(loss))):
        np.testing.assert_allclose(variant, reference, rtol=1e-12, atol=1e-12 * np.abs(reference).max())
    # The derivative of the sweeps converges with them, to the exact coupled solution's (measured against 96
    # sweeps: 3.9 at 16 sweeps, 0.023 at 32, 5.6e-7 at 64, relative to the largest entry)
    more = stack(horizon, batch=2, offset=0.0, sweeps=96)
    more.set_actions(actions)
    assert np.abs(flat(more.gradient(loss)) - reference).max() < 1e-5 * np.abs(reference).max()


def test_implicit_gradients_are_the_converged_solutions_and_need_no_converged_sweeps():
    """The implicit function theorem's gradient (Gauss-Seidel solve, the default) equals the unrolled one of 96
    Jacobi sweeps (the converged solution's, to 6e-7 of the largest entry at 64) once its solve has converged
    (measured 2e-11 on a box sliding on a box, 2e-9 on the stack resting 12 cm off centre), and after only 16
    sweeps it is still right to 6e-9 on the sliding pair, where 16 unrolled sweeps are 390% off (their derivative
    converges more slowly than their impulses)."""
    horizon = 150
    rng = np.random.default_rng(7)
    loss = tisim.losses.TerminalTarget({"px": [0.0, 0.2], "angle": [0.0, 0.1]}) + 0.01 * tisim.losses.Effort()

    def gradient(offset, push, **keywords):
        sim = stack(horizon, batch=2, offset=offset, **keywords)
        actions = np.zeros((2, horizon, 2, 3))
        actions[:, :, 1, 0] = push + 0.3 * rng.normal(size=(2, horizon))
        sim.set_actions(actions)
        g = sim.gradient(loss)
        return np.concatenate([np.ravel(v) for group in (g.params, g.initial_state) for v in group.values()]
                              + [np.ravel(g.actions)])

    for offset, push, bound in ((0.0, 8.0, 1e-9), (0.12, 0.0, 1e-7)):
        state = rng.bit_generator.state
        exact = gradient(offset, push, solver_gradient="unrolled", sweeps=96)
        scale = np.abs(exact).max()
        rng.bit_generator.state = state
        assert np.abs(gradient(offset, push) - exact).max() < bound * scale, offset
        if offset == 0.0:
            rng.bit_generator.state = state
            assert np.abs(gradient(offset, push, sweeps=16) - exact).max() < 1e-7 * scale
            rng.bit_generator.state = state
            assert np.abs(gradient(offset, push, solver_gradient="unrolled", sweeps=16) - exact).max() > 0.5 * scale
