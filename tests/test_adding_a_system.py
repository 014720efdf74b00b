"""docs/adding_a_system.md's code as the page runs it: its projectile keeps the contract (tisim.testing.check_system,
which the page calls) and flies as its equations say, against numbers computed without it; its chain, in 3D and with
DIM = 2 in 2D, conserves momentum, oscillates at the discrete frequency and keeps the contract too."""
import importlib.util
import math
import pathlib
import re

import numpy as np
import pytest

import tisim
from tisim.physics.contact import restitution_damping_value
from tisim.testing import check_system

from conftest import TEST_SETTINGS

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "adding_a_system.md"
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks():
    """The page's runnable Python blocks, in order: every ```python block not marked <!-- not run: ... -->."""
    text = PAGE.read_text()
    return [m.group(1) for m in FENCE.finditer(text)
            if not text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1].strip().startswith("<!-- not run")]


def load(code, path):
    """Code as a module from a file (Taichi reads the source of the kernels it compiles)."""
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def page(tmp_path_factory, monkeypatch_module):
    """The page's blocks in order in one namespace, from the repository root: its check_system calls raise if a
    system fails."""
    tisim.init(**TEST_SETTINGS)
    monkeypatch_module.chdir(ROOT)
    return load("\n".join(blocks()), tmp_path_factory.mktemp("page") / "adding_a_system_page.py")


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.fixture(scope="module", params=[3, 2], ids=["3D", "2D"])
def Chain(request, page, tmp_path_factory):
    if request.param == 3:
        return page.Chain
    # the page's imports (its first block, before the projectile) and its chain class, with DIM = 2
    code = blocks()
    imports = code[0][:code[0].index("class Projectile")]
    chain = next(block for block in code if "class Chain" in block)
    chain = chain[:chain.index("\nchain = Chain(")].replace("DIM = 3", "DIM = 2")
    assert "DIM = 2" in chain
    module = load(imports + chain, tmp_path_factory.mktemp("page2d") / "adding_a_system_chain2d.py")
    check_system(module.Chain, keywords={"n": 3}, debug=False)
    return module.Chain


# ---- the projectile ------------------------------------------------------------------------------------------------
def test_the_page_checks_its_projectile(page):
    report = page.report  # check_system(Projectile), as the page ran it
    assert report.passed and report.system == "Projectile"
    names = {check.name for check in report.checks}
    assert {"gradient/params", "gradient/initial_state", "gradient/actions", "adjoint", "debug", "accumulation",
            "units", "batch_independence"} <= names
    assert len(page.Projectile.__doc__) > 0 and page.Projectile.DT == 1e-3


def flight(page, horizon, batch=1, **values):
    sim = page.Projectile(horizon=horizon, batch=batch, **values)
    return sim, sim.rollout()


def test_without_drag_and_ground_the_flight_is_the_parabola(page):
    """quadratic_drag = 0 and a flight that stays above the ground: x(t) = x0 + vx0 t + (F/m) t^2 / 2 and
    y(t) = y0 + vy0 t - g' t^2 / 2 (g' = g - Fy/m), except for semi-implicit Euler's exact offset -a dt t / 2 (it
    updates the velocity first): to 1e-12 of the height, in two batch elements with their own g, m and thrust."""
    T = 400
    sim, traj = flight(page, T, batch=2, quadratic_drag=0.0, g=[9.8, 3.7], m=[1.0, 2.5], pos=[0.5, 3.0],
                       vel=[2.0, 6.0])
    thrust = np.array([[1.5, 0.4], [-0.8, 2.0]])
    sim.set_actions(np.broadcast_to(thrust[:, None, :], (2, T, 2)))
    traj = sim.rollout()
    t = np.arange(T + 1) * sim.dt
    g, m = np.array([9.8, 3.7]), np.array([1.0, 2.5])
    a = thrust / m[:, None] - np.stack([np.zeros(2), g], axis=1)  # (B, 2)
    expected = (np.array([0.5, 3.0]) + np.array([2.0, 6.0]) * t[:, None, None]
                + a * (t[:, None, None] ** 2 / 2 + sim.dt * t[:, None, None] / 2))  # (T+1, B, 2)
    pos = traj["pos"].transpose(1, 0, 2)
    assert pos[..., 1].min() > 0.5  # never near the ground
    np.testing.assert_allclose(pos, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
    np.testing.assert_allclose(traj["vel"].transpose(1, 0, 2), np.array([2.0, 6.0]) + a * t[:, None, None],
                               rtol=0, atol=1e-12 * 10)


def numpy_projectile(p, v, thrust, g, m, c, k, e, dt):
    """The page's equations in numpy, the same semi-implicit Euler step: drag -c |v| v, the ground's penalty force
    max(k d - c_e vy [d > 0], 0) at penetration d = -y with the damping c_e for restitution e."""
    damping = restitution_damping_value(e, k, m)
    out = [np.array(p, float)]
    p, v = np.array(p, float), np.array(v, float)
    for f in thrust:
        speed = math.sqrt(v @ v + 1e-30)
        d = -p[1]
        normal = max(k * max(d, 0.0) - damping * v[1] * (1.0 if d > 0 else 0.0), 0.0)
        a = (f - c * speed * v + np.array([0.0, normal])) / m - np.array([0.0, g])
        v = v + dt * a
        p = p + dt * v
        out.append(p)
    return np.array(out)


def test_drag_thrust_and_bounces_follow_the_equations(page):
    """Two seconds with drag, a random thrust and bounces: the rollout is the numpy step of the same equations to
    1e-12 m."""
    T = 2000
    thrust = np.random.default_rng(5).normal(0.0, 1.0, (T, 2))
    params = dict(g=9.8, m=0.7, quadratic_drag=0.08, k=2e4, e=0.6)
    sim, _ = flight(page, T, pos=[0.0, 0.8], vel=[3.0, 2.0], **params)
    sim.set_actions(thrust)
    pos = sim.rollout()["pos"][0]
    expected = numpy_projectile([0.0, 0.8], [3.0, 2.0], thrust, dt=sim.dt, c=params["quadratic_drag"],
                                **{k: v for k, v in params.items() if k != "quadratic_drag"})
    assert (expected[:, 1] < 0).sum() > 50  # it did touch the ground
    np.testing.assert_allclose(pos, expected, rtol=0, atol=1e-12)


def test_a_vertical_fall_with_drag_reaches_the_terminal_speed(page):
    """From rest, with quadratic drag c: vy(t) = -v_inf tanh(g t / v_inf), v_inf = sqrt(m g / c). Semi-implicit
    Euler is first order, so the error is O(dt) and halves with dt."""
    m, g, c, seconds = 1.3, 9.8, 0.4, 2.0
    v_inf = math.sqrt(m * g / c)
    errors = []
    for dt in (2e-3, 1e-3):
        T = round(seconds / dt)
        _, traj = flight(page, T, dt=dt, m=m, g=g, quadratic_drag=c, pos=[0.0, 100.0], vel=[0.0, 0.0])
        t = np.arange(T + 1) * dt
        vy = traj["vel"][0, :, 1]
        assert np.all(traj["vel"][0, :, 0] == 0.0)
        errors.append(np.abs(vy + v_inf * np.tanh(g * t / v_inf)).max())
        assert abs(vy[-1] + v_inf) < 0.01 * v_inf  # near terminal speed after 2 s
    assert errors[1] < 0.01 * v_inf
    assert errors[0] / errors[1] == pytest.approx(2.0, rel=0.05)


def test_set_down_on_the_ground_it_settles_at_mg_over_k(page):
    """Released at rest at y = 0, the mass sinks into the ground's spring-damper as a damped oscillator's step
    response: the deepest point is (1 + exp(-pi zeta / sqrt(1 - zeta^2))) m g / k, zeta = c / (2 sqrt(k m)) the
    damping ratio of the contact's damping c (to 2%: the step's error at omega dt = 0.16), and it settles at m g / k."""
    m, g, k, e = 2.0, 9.8, 5e4, 0.3
    _, traj = flight(page, 1500, m=m, g=g, k=k, e=e, pos=[0.0, 0.0], vel=[0.0, 0.0])
    y = traj["pos"][0, :, 1]
    zeta = restitution_damping_value(e, k, m) / (2 * math.sqrt(k * m))
    assert y.min() == pytest.approx(-(1 + math.exp(-math.pi * zeta / math.sqrt(1 - zeta ** 2))) * m * g / k, rel=0.02)
    assert y[-1] == pytest.approx(-m * g / k, rel=1e-6)


def test_gradients_through_a_bounce(page):
    """The contract's problem never reaches the ground; here every group is checked through a bounce, with the
    contact on for most of the horizon, against central differences."""
    T = 60
    sim = page.Projectile(horizon=T, batch=2, pos=[[0.0, 0.02], [0.1, 0.015]], vel=[[1.0, -1.0], [0.5, -0.8]],
                          quadratic_drag=0.1)
    sim.set_actions(np.random.default_rng(2).normal(0.0, 0.5, (2, T, 2)))
    loss = tisim.losses.TerminalTarget({"pos": [0.2, 0.05], "vel": [0.0, 0.0]}) + 1e-3 * tisim.losses.Effort()
    assert (sim.rollout()["pos"][:, :, 1] < 0).sum() > T  # in contact for more than half the steps, in both
    report = tisim.gradcheck(sim, loss, step=1e-6, max_entries=8, extrapolate=True)
    assert report.worst <= 1e-5, str(report)
    assert np.abs(report["params"].backward).max() > 0


# ---- the chain -----------------------------------------------------------------------------------------------------
def stretched(n, dim, seed=0):
    rng = np.random.default_rng(seed)
    return np.arange(n)[:, None] * np.eye(dim)[0] * 0.1 + rng.normal(0.0, 0.02, (n, dim))


def test_the_chain_keeps_the_contract_in_2d(Chain):
    """The 2D chain is checked when made (the fixture); the page checks the 3D one."""
    assert Chain.DIM in (2, 3)


def test_momentum_changes_by_the_pull_alone(Chain):
    """The springs' forces cancel in pairs, so the total momentum changes by the pull's impulse, dt sum_t pull_t,
    exactly (up to rounding), whatever the springs do."""
    n, T = 6, 300
    sim = Chain(horizon=T, n=n, m=0.1)
    dim = Chain.DIM
    v0 = np.random.default_rng(1).normal(0.0, 0.1, (n, dim))
    sim.set_initial_state(pos=stretched(n, dim), vel=v0)
    pull = np.random.default_rng(2).normal(0.0, 0.5, (T, dim))
    sim.set_actions(pull)
    vel = sim.rollout()["vel"][0]
    momentum = 0.1 * vel.sum(axis=1)
    expected = 0.1 * v0.sum(axis=0) + sim.dt * np.concatenate([np.zeros((1, dim)), np.cumsum(pull, axis=0)])
    np.testing.assert_allclose(momentum, expected, rtol=0, atol=1e-12)
    assert np.abs(vel - vel[0]).max() > 1e-2  # the springs did act


def test_two_particles_oscillate_at_the_discrete_frequency(Chain):
    """Two particles on one zero-length spring: their separation d obeys d'' = -(2k/m) d, which semi-implicit
    Euler turns into the recursion w += -h (2k/m) d, d += h w; computed here in numpy, it is the chain's d to 1e-12,
    and its period is 2 pi sqrt(m / 2k) to O(h^2)."""
    k, m, T = 100.0, 0.1, 400
    sim = Chain(horizon=T, n=2, k=k, m=m)
    start = np.zeros((2, Chain.DIM))
    start[1, 0] = 0.05
    sim.set_initial_state(pos=start)
    pos = sim.rollout()["pos"][0]
    d_sim = pos[:, 1, 0] - pos[:, 0, 0]
    d, w, ds = 0.05, 0.0, [0.05]
    for _ in range(T):
        w -= sim.dt * 2 * k / m * d
        d += sim.dt * w
        ds.append(d)
    np.testing.assert_allclose(d_sim, ds, rtol=0, atol=1e-12)
    crossings = np.flatnonzero(np.diff(np.sign(d_sim)) > 0)  # upward zero crossings, one period apart
    period = (crossings[1] - crossings[0]) * sim.dt
    assert period == pytest.approx(2 * np.pi * np.sqrt(m / (2 * k)), abs=2 * sim.dt)
