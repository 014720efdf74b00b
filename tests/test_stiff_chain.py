"""StiffChain: implicit Euler by Newton against numpy, its physics, and its gradients, implicit and unrolled."""
import numpy as np
import pytest

import tisim
from tisim.systems import StiffChain
from tisim.systems.stiff_chain import NEWTON_STEPS, energy

from conftest import load_demo

N = 3
STRETCH = [0.0, 0.0, 0.02]  # the last mass pulled 2 cm down: spring 2 starts 2 cm long, deep in its hardening range
DEFAULTS = {q.name: q.default for q in StiffChain.PARAMS}


# ---- an independent numpy implicit Euler step ------------------------------------------------------------------------
def residual(w, x, v, f, g, m, k, beta, c, dt):
    """r(w) = m (w - v) - dt F(x + dt w, w); works on complex arguments (complex-step derivatives)."""
    xn = x + dt * w
    e = np.diff(xn, prepend=0.0)
    tension = k * (e + beta * e**3) + c * np.diff(w, prepend=0.0)
    force = f + m * g - tension
    force[:-1] += tension[1:]
    return m * (w - v) - dt * force


def jacobian(w, x, m, k, beta, c, dt):
    """dr/dw as a dense matrix."""
    e = np.diff(x + dt * w, prepend=0.0)
    s = dt * dt * k * (1 + 3 * beta * e**2) + dt * c
    J = np.diag(m + s + np.append(s[1:], 0.0))
    for i in range(1, len(x)):
        J[i, i - 1] = J[i - 1, i] = -s[i]
    return J


def numpy_step(x, v, f, p, dt, newton_steps):
    """(x', w, w_K): Newton from w = v; w_K is the iterate before the last step."""
    w = v.copy()
    for _ in range(newton_steps - 1):
        w = w - np.linalg.solve(jacobian(w, x, p["m"], p["k"], p["beta"], p["damping"], dt),
                                residual(w, x, v, f, p["g"], p["m"], p["k"], p["beta"], p["damping"], dt))
    w_k = w
    w = w - np.linalg.solve(jacobian(w, x, p["m"], p["k"], p["beta"], p["damping"], dt),
                            residual(w, x, v, f, p["g"], p["m"], p["k"], p["beta"], p["damping"], dt))
    return x + dt * w, w, w_k


def numpy_rollout(x0, v0, forces, p, dt, newton_steps):
    xs, vs, iterates = [np.asarray(x0, float)], [np.asarray(v0, float)], []
    for f in forces:
        x, w, w_k = numpy_step(xs[-1], vs[-1], f, p, dt, newton_steps)
        xs.append(x)
        vs.append(w)
        iterates.append(w_k)
    return np.array(xs), np.array(vs), iterates


def implicit_gradient_reference(x0, v0, forces, p, dt, newton_steps, target):
    """d/d(params, x0, v0) of sum (x_T - target)^2 by the implicit function theorem, in numpy, in forward mode:
    each step's dw = -J(w_K)^{-1} dr/dz(w_K) dz, with dr/dz by complex steps (r is a polynomial: exact to round-off).
    Parameters are packed as StiffChain packs them: g, m, k[0..n-1], beta, damping."""
    n = len(x0)
    xs, vs, iterates = numpy_rollout(x0, v0, forces, p, dt, newton_steps)
    P = 4 + n
    # sensitivities of (x, v) with respect to (params, x0, v0)
    Sx = np.hstack([np.zeros((n, P)), np.eye(n), np.zeros((n, n))])
    Sv = np.hstack([np.zeros((n, P)), np.zeros((n, n)), np.eye(n)])
    for t, f in enumerate(forces):
        x, v, w_k = xs[t], vs[t], iterates[t]
        z = np.concatenate([[p["g"], p["m"]], p["k"], [p["beta"], p["damping"]], x, v])

        def r_of(z, w_k=w_k, f=f):
            g, m, k, beta, c = z[0], z[1], z[2:2 + n], z[2 + n], z[3 + n]
            return residual(w_k.astype(complex), z[P:P + n], z[P + n:], f, g, m, k, beta, c, dt)

        h = 1e-30
        dr_dz = np.stack([np.imag(r_of(z + 1j * h * np.eye(len(z))[j])) / h for j in range(len(z))], axis=1)
        dr = dr_dz[:, :P] @ np.hstack([np.eye(P), np.zeros((P, 2 * n))]) + dr_dz[:, P:P + n] @ Sx \
            + dr_dz[:, P + n:] @ Sv
        dw = -np.linalg.solve(jacobian(w_k, x, p["m"], p["k"], p["beta"], p["damping"], dt), dr)
        Sx, Sv = Sx + dt * dw, dw
    grad = 2 * (xs[-1] - target) @ Sx
    return grad[:P], grad[P:P + n], grad[P + n:]


def chain(horizon, **values):
    return StiffChain(horizon=horizon, **values)


# ---- the solver ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("newton_steps", [2, 6])
def test_step_matches_numpy_newton(newton_steps):
    """The Taichi rollout equals the numpy implicit Euler with the same Newton steps to 1e-12 (relative)."""
    T, rng = 30, np.random.default_rng(3)
    forces = 50 * rng.normal(size=(T, N))
    p = {**DEFAULTS, "k": np.array([1e5, 2e5, 5e4])}
    sim = chain(T, newton_steps=newton_steps, x=STRETCH, v=[0.1, 0.0, -0.3], k=p["k"])
    sim.set_actions(forces)
    traj = sim.rollout()
    xs, vs, _ = numpy_rollout(STRETCH, [0.1, 0.0, -0.3], forces, p, sim.dt, newton_steps)
    np.testing.assert_allclose(traj["x"][0], xs, rtol=0, atol=1e-12 * np.abs(xs).max())
    np.testing.assert_allclose(traj["v"][0], vs, rtol=0, atol=1e-12 * np.abs(vs).max())


def test_newton_converges_at_the_defaults():
    """With the default 6 Newton steps every step's residual r(v[t+1]) is at round-off, even from a 2 cm stretch,
    and the result equals a 30-step numpy solve; 2 Newton steps leave a residual over 1e-3 N s on the first step."""
    T = 40
    p = DEFAULTS | {"k": np.full(N, DEFAULTS["k"])}
    worst = {}
    for steps in (2, 6):
        traj = chain(T, newton_steps=steps, x=STRETCH).rollout()
        x, v = traj["x"][0], traj["v"][0]
        worst[steps] = max(np.abs(residual(v[t + 1], x[t], v[t], np.zeros(N), p["g"], p["m"], p["k"], p["beta"],
                                           p["damping"], 0.01)).max() for t in range(T))
    assert worst[6] < 1e-11, worst
    assert worst[2] > 1e-3, worst  # so the comparisons below run where Newton has, and has not, converged
    x1, v1, _ = numpy_step(np.array(STRETCH), np.zeros(N), np.zeros(N), p, 0.01, 30)
    traj = chain(1, x=STRETCH).rollout()
    np.testing.assert_allclose(traj["x"][0, 1], x1, rtol=1e-13, atol=1e-16)
    np.testing.assert_allclose(traj["v"][0, 1], v1, rtol=1e-12, atol=1e-14)


def test_chain_size_is_limited():
    """n beyond N_MAX is refused with a message that says why; n = 1 (one mass on one spring) works."""
    with pytest.raises(ValueError, match="unrolled over the masses"):
        StiffChain(horizon=2, n=9)
    traj = StiffChain(horizon=200, n=1, k=100.0, beta=0.0, damping=20.0).rollout()
    assert traj["x"][0, -1, 0] == pytest.approx(9.8 / 100.0, rel=1e-6)  # m g / k


# ---- physics ---------------------------------------------------------------------------------------------------------
def test_static_equilibrium_solves_the_cubic():
    """Damped out under gravity and constant forces, each spring's extension solves k_i (e + beta e^3) = the weight
    and forces below it (a cubic per spring, solved by numpy.roots), to 1e-10."""
    k, beta, m, forces = np.array([100.0, 150.0, 200.0]), 1000.0, 1.0, np.array([5.0, -3.0, 10.0])
    sim = chain(1500, k=k, beta=beta, damping=100.0)
    sim.set_actions(np.broadcast_to(forces, (1500, N)))
    traj = sim.rollout()
    load = np.cumsum((m * 9.8 + forces)[::-1])[::-1]  # tension of spring i: everything hanging below it
    extension = []
    for i in range(N):
        roots = np.roots([k[i] * beta, 0.0, k[i], -load[i]])
        extension.append(roots[np.abs(roots.imag) < 1e-9].real.max())
    extension = np.array(extension)
    assert np.all(beta * extension**2 > 1)  # the cubic term matters: this is not Hooke's law
    np.testing.assert_allclose(np.diff(traj["x"][0, -1], prepend=0.0), extension, rtol=1e-10)
    assert np.abs(traj["v"][0, -1]).max() < 1e-10


def test_energy_never_grows():
    """Implicit Euler never raises the energy (the spring potential is convex), with damping and without; with
    damping it falls to near its minimum, without it it still falls (implicit Euler's numerical damping)."""
    T = 300
    sim = chain(T, batch=2, x=STRETCH, v=[0.5, -0.2, 0.0], damping=[10.0, 0.0])
    e = energy(sim, sim.rollout())
    assert np.all(np.diff(e, axis=1) <= 1e-9 * np.abs(e).max()), np.diff(e, axis=1).max()
    assert np.all(e[:, -1] < e[:, 0] - 10.0), e[:, [0, -1]]  # it starts near 40 J


def test_explicit_diverges_where_implicit_is_stable():
    """At the default dt semi-implicit Euler overflows within 30 steps (NonFiniteError names the step), while
    implicit Euler stays within the initial stretch. Below 2 / omega_max both are stable, and the gap between them
    shrinks as dt does (over 0.1 s: at dt = 5e-5 less than 2/3 of that at 2e-4)."""
    with pytest.raises(tisim.NonFiniteError, match="non-finite at step") as info:
        chain(100, integrator="semi_implicit_euler", x=STRETCH).rollout()
    assert 0 < info.value.step <= 30
    traj = chain(100, x=STRETCH).rollout()
    assert np.all(np.isfinite(traj["x"])) and np.abs(traj["x"]).max() <= 0.02
    gap = {}
    for dt in (2e-4, 5e-5):
        x = {name: chain(int(round(0.1 / dt)), dt=dt, integrator=name, x=STRETCH).rollout()["x"][0]
             for name in StiffChain.OPTIONS["integrator"]}
        assert np.abs(x["semi_implicit_euler"]).max() <= 0.02 + 1e-12
        gap[dt] = np.abs(x["implicit_euler"] - x["semi_implicit_euler"]).max()
    assert gap[5e-5] < 2 / 3 * gap[2e-4], gap


# ---- gradients -------------------------------------------------------------------------------------------------------
def gradient_problem(solver_gradient, newton_steps=None, T=40):
    """Two chains (different stiffnesses and starts) under random forces, tracked against a reference motion."""
    rng = np.random.default_rng(0)
    extra = {} if newton_steps is None else {"newton_steps": newton_steps}
    sim = StiffChain(horizon=T, batch=2, solver_gradient=solver_gradient, x=[STRETCH, [0.01, -0.005, 0.0]],
                     v=[[0.0, 0.0, 0.0], [0.3, 0.0, -0.2]], k=[[1e5, 2e5, 5e4], [1e5, 1e5, 1e5]], **extra)
    sim.set_actions(20 * rng.normal(size=(2, T, N)))
    reference = 1e-3 * np.sin(np.arange(T + 1)[:, None] * 0.3 + np.arange(N))
    loss = tisim.losses.Tracking({"x": reference, "v": np.zeros((T + 1, N))}, weights={"x": 1e4, "v": 1.0}) \
        + 1e-6 * tisim.losses.Effort()
    return sim, loss


@pytest.mark.parametrize("solver_gradient", StiffChain.OPTIONS["solver_gradient"])
def test_gradcheck(solver_gradient):
    """Both gradients match float64 central differences to 1e-6 in every group (measured: 2e-7 at worst)."""
    # Richardson-extrapolated differences at step 1e-3: the loss is about 12 while one action moves it by about
    # 1e-5 per N, so at step 1e-4 round-off alone reaches 7e-7 of the smallest entries.
    sim, loss = gradient_problem(solver_gradient)
    report = tisim.gradcheck(sim, loss, step=1e-3, extrapolate=True, max_entries=30)
    assert set(report) == {"params", "initial_state", "actions"}
    assert report.worst <= 1e-6, str(report)


def flat(gradient):
    return {"params": np.concatenate([v.reshape(2, -1) for v in gradient.params.values()], axis=1),
            "initial_state": np.concatenate([v.reshape(2, -1) for v in gradient.initial_state.values()], axis=1),
            "actions": gradient.actions.reshape(2, -1)}


def relative_difference(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


def test_implicit_and_unrolled_agree_when_newton_has_converged():
    """At the default Newton steps the two gradients agree to 1e-8 (relative, per group); at 2 steps, where the
    iterate before the last step is not converged, they differ by more than 1e-4: the implicit one does not follow
    the iterations (if the detach let derivatives through, the two would coincide)."""
    worst = {}
    for steps in (NEWTON_STEPS, 2):
        grads = {}
        for name in StiffChain.OPTIONS["solver_gradient"]:
            sim, loss = gradient_problem(name, steps)
            grads[name] = flat(sim.gradient(loss))
        worst[steps] = {group: relative_difference(grads["implicit"][group], grads["unrolled"][group])
                        for group in grads["implicit"]}
    assert max(worst[NEWTON_STEPS].values()) < 1e-8, worst
    assert max(worst[2].values()) > 1e-4, worst


@pytest.mark.parametrize("newton_steps", [2, 6])
def test_implicit_gradient_is_the_implicit_function_theorem(newton_steps):
    """The implicit gradient equals a numpy forward-mode sensitivity that applies dw = -J^{-1} dr/dz at each step's
    last iterate w_K (complex-step partial derivatives), to 1e-9, whether or not Newton has converged: it is the
    IFT formula, not the derivative of the iterations. At 6 steps it also equals the reference for a 30-step solve
    (the derivative of the exact solution). At 2 steps central differences (the derivative of the map the iterations
    compute) disagree with it and agree with the unrolled gradient instead."""
    T, target = 8, np.array([1e-3, 2e-3, 3e-3])
    v0 = np.array([0.3, 0.0, -0.2])
    k = np.array([1e5, 2e5, 5e4])
    p = {**DEFAULTS, "k": k}
    loss = tisim.losses.TerminalTarget({"x": target})
    reference = implicit_gradient_reference(np.array(STRETCH), v0, np.zeros((T, N)), p, 0.01, newton_steps, target)
    sims = {s: chain(T, newton_steps=newton_steps, solver_gradient=s, x=STRETCH, v=v0, k=k)
            for s in StiffChain.OPTIONS["solver_gradient"]}
    g = sims["implicit"].gradient(loss)
    params = np.concatenate([v.reshape(-1) for v in g.params.values()])
    np.testing.assert_allclose(params, reference[0], rtol=1e-9, atol=1e-9 * np.abs(reference[0]).max())
    np.testing.assert_allclose(g.initial_state["x"][0], reference[1], rtol=1e-9, atol=1e-9 * np.abs(reference[1]).max())
    np.testing.assert_allclose(g.initial_state["v"][0], reference[2], rtol=1e-9, atol=1e-9 * np.abs(reference[2]).max())
    if newton_steps == NEWTON_STEPS:  # converged: also the derivative of the exact solution
        exact = implicit_gradient_reference(np.array(STRETCH), v0, np.zeros((T, N)), p, 0.01, 30, target)
        np.testing.assert_allclose(params, exact[0], rtol=1e-9, atol=1e-9 * np.abs(exact[0]).max())
    if newton_steps == 2:
        unrolled = tisim.gradcheck(sims["unrolled"], loss, groups=("params", "initial_state"), step=1e-4,
                                   extrapolate=True)
        implicit = tisim.gradcheck(sims["implicit"], loss, groups=("params", "initial_state"), step=1e-4,
                                   extrapolate=True)
        assert unrolled.worst < 1e-6, str(unrolled)
        assert implicit.worst > 1e-4, str(implicit)


# ---- the demo --------------------------------------------------------------------------------------------------------
def test_demo_runs_and_its_numbers_agree(tmp_path):
    """demos/implicit_step.py at a short horizon: explicit overflows, implicit stays bounded, and the sensitivities
    of the final position to k by the implicit gradient, the unrolled gradient and central differences agree to 1e-6
    at the default Newton steps; at 2 steps the unrolled one still does and the implicit one does not."""
    demo = load_demo("implicit_step")
    r = demo.main(["--horizon", "60", "--repeats", "2", "--out", str(tmp_path)])
    assert 0 < r["explicit_step"] < 60
    assert np.isfinite(r["implicit_max"]) and r["implicit_max"] <= 0.02
    for steps, rows in r["sensitivity"].items():
        cd = rows["central differences"]
        assert np.abs(cd).max() > 0
        error = {name: np.abs(rows[name] - cd).max() / np.abs(cd).max() for name in ("implicit", "unrolled")}
        assert error["unrolled"] < 1e-6, (steps, error)
        assert (error["implicit"] < 1e-6) == (steps == NEWTON_STEPS), (steps, error)
    assert (tmp_path / "implicit_step.png").stat().st_size > 10_000
