"""docs/adding_a_system.md's template runs as written, in 3D and (with DIM = 2) in 2D: its physics against the laws
it must obey, its gradients against float64 central differences, its schedules against each other."""
import importlib.util
import pathlib
import re

import numpy as np
import pytest

import tisim

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "adding_a_system.md"


@pytest.fixture(scope="module", params=[3, 2], ids=["3D", "2D"])
def Chain(request, tmp_path_factory):
    code = "\n".join(re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S))
    assert "DIM = 3" in code
    # Taichi compiles kernels from source files, so the page's code becomes a module
    path = tmp_path_factory.mktemp("doc") / f"chain{request.param}d.py"
    path.write_text(code.replace("DIM = 3", f"DIM = {request.param}"))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Chain


def stretched(n, dim, seed=0):
    rng = np.random.default_rng(seed)
    return np.arange(n)[:, None] * np.eye(dim)[0] * 0.1 + rng.normal(0.0, 0.02, (n, dim))


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


@pytest.mark.parametrize("group", ["params", "initial_state", "actions"])
def test_gradients_match_central_differences(Chain, group):
    T = 30
    sim = Chain(horizon=T, n=4)
    sim.set_initial_state(pos=stretched(4, Chain.DIM), vel=np.random.default_rng(3).normal(0.0, 0.1,
                                                                                          (4, Chain.DIM)))
    sim.set_actions(np.random.default_rng(4).normal(0.0, 0.5, (T, Chain.DIM)))
    sim.set_params(k=np.linspace(80.0, 120.0, 3))
    loss = tisim.losses.TerminalTarget({"pos": np.zeros((4, Chain.DIM))}) + 1e-3 * tisim.losses.Effort()
    report = tisim.gradcheck(sim, loss, groups=(group,), step=1e-4, max_entries=12, extrapolate=True)
    assert report.worst <= 1e-6, str(report)


def test_the_schedules_agree(Chain):
    """The fused forward pass and the launch-per-step one (a GPU's) give the same loss and gradients (1e-12)."""
    results = []
    for per_step in (False, True):
        sim = Chain(horizon=25, n=5)
        sim._per_step = per_step
        sim.set_initial_state(pos=stretched(5, Chain.DIM))
        sim.set_actions(np.ones((25, Chain.DIM)))
        g = sim.gradient(tisim.losses.TerminalTarget({"vel": np.zeros((5, Chain.DIM))}))
        results.append((g.value, g.params["k"], g.actions, g.initial_state["pos"]))
    for a, b in zip(*results):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-15)
