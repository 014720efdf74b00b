"""The runtime: initialization, simulator lifetime and reproducibility."""
import os
import sys
import types

import numpy as np
import pytest
import taichi as ti
from taichi.lang import impl

import tisim
from tisim.core import runtime
from tisim.core.launch import _BoundCall
from tisim.robots import Robot
from tisim.systems import Linear, MassSpring, ScalarLinear

from conftest import TEST_SETTINGS


def test_init_is_idempotent():
    """Calling init again with the same settings keeps the runtime (and its simulators) alive."""
    generation = runtime.generation()
    sim = ScalarLinear(horizon=2)
    tisim.init(**TEST_SETTINGS)
    assert runtime.generation() == generation
    assert sim.rollout()["x"].shape == (1, 3)


def test_the_offline_cache_keeps_a_gibibyte():
    """tisim.init raises Taichi's cache limit (100 MB, past which Taichi deletes a quarter of the cache) unless the
    user's TI_OFFLINE_CACHE_MAX_SIZE_OF_FILES says otherwise."""
    limit = int(os.environ.get("TI_OFFLINE_CACHE_MAX_SIZE_OF_FILES", runtime.CACHE_BYTES))
    assert runtime.CACHE_BYTES == 2 ** 30
    assert impl.current_cfg().offline_cache_max_size_of_files == limit


def test_two_thousand_simulators_in_one_process():
    """Creating, using and discarding 2,000 small simulators works (no SNode trees, no per-simulator compiles)."""
    loss = tisim.losses.TerminalTarget({"x": 2.0})
    hosts_before = set(runtime._hosts)
    for i in range(2000):
        sim = (ScalarLinear if i % 2 else Linear)(horizon=3 + i % 5, batch=1 + i % 3)
        if i % 100 == 0:
            g = sim.gradient(loss if i % 2 else tisim.losses.TerminalTarget({"x": [1.0, 1.0]}))
            assert np.isfinite(g.value)
        del sim
    assert len(set(runtime._hosts) - hosts_before) <= 2  # kernels compile once per class, not per simulator


def test_simulators_share_their_model_by_structure_and_topology():
    """A model is made once per class, structure and topology tables; equal robots share it, a different one
    (or different sizes) gets its own, and each model's tables hold what the system's topology() returned."""
    from tisim.robots import grid
    a, b = MassSpring(horizon=2, robot=grid(4, 2)), MassSpring(horizon=7, batch=2, robot=grid(4, 2))
    assert a.model is b.model and a.model is not a
    c = MassSpring(horizon=2, robot=grid(5, 2))
    assert c.model is not a.model
    assert ScalarLinear(horizon=2).model is ScalarLinear(horizon=3).model
    assert Linear(horizon=2, n=2).model is not Linear(horizon=2, n=3).model
    tables = c.topology()
    for name in ("spring_of", "other_of", "present", "sign", "end"):
        np.testing.assert_array_equal(getattr(c.model, name).to_numpy(), tables[name])
    assert c.model.has_actuators == tables["has_actuators"]


class _Tabled(ScalarLinear):
    table = np.zeros(3)

    def topology(self):
        return dict(table=self.table)


def test_topology_tables_are_checked_before_any_kernel():
    """A topology entry that is neither a numeric array nor hashable is refused by name."""
    with pytest.raises(TypeError, match="'table' must be a numpy array or hashable"):
        type("Listed", (_Tabled,), {"table": [1, 2]})(horizon=2)
    with pytest.raises(TypeError, match="'table' must be a non-empty integer or float array"):
        type("Texts", (_Tabled,), {"table": np.array(["a", "b"])})(horizon=2)
    sim = _Tabled(horizon=2)
    np.testing.assert_array_equal(sim.model.table.to_numpy(), np.zeros(3))


def test_deterministic_runs_are_bitwise_equal():
    """With deterministic=True, two runs of a batched gradient are bitwise identical."""
    rng = np.random.default_rng(3)
    results = []
    for _ in range(2):
        sim = Linear(horizon=50, batch=8, n=4, m=2, A=rng.normal(size=(4, 4)) * 0.3, B=rng.normal(size=(4, 2)))
        sim.set_actions(np.ones((50, 2)))
        g = sim.gradient(tisim.losses.TerminalTarget({"x": np.zeros(4)}) + 0.1 * tisim.losses.Effort())
        results.append((g.value, g.params["A"], g.actions))
        rng = np.random.default_rng(3)
    assert results[0][0] == results[1][0]
    np.testing.assert_array_equal(results[0][1], results[1][1])
    np.testing.assert_array_equal(results[0][2], results[1][2])


def test_restart_invalidates_old_simulators():
    """Changing settings restarts Taichi; a simulator from before says so instead of crashing."""
    sim = ScalarLinear(horizon=2)
    tisim.init(arch="cpu", precision="f32")
    try:
        with pytest.raises(RuntimeError, match="create it again"):
            sim.rollout()
        fresh = ScalarLinear(horizon=3)
        np.testing.assert_allclose(fresh.rollout()["x"][0], [0, 1, 1.9, 2.71], rtol=1e-6)
        with pytest.raises(RuntimeError, match="needs tisim.init\\(precision='f64'\\)"):
            tisim.gradcheck(fresh, tisim.losses.TerminalTarget({"x": 2.0}))
    finally:
        tisim.init(**TEST_SETTINGS)


def test_a_gradient_unread_at_a_restart_says_so_when_read():
    """A Gradient copies its groups when first read, from arrays a restart frees (on a CPU through views of their
    memory): read after it, it raises instead of reading freed memory."""
    sim = ScalarLinear(horizon=3)
    g = sim.gradient(tisim.losses.TerminalTarget({"x": 2.0}))
    tisim.init(arch="cpu", precision="f32")
    try:
        with pytest.raises(RuntimeError, match="create it again"):
            _ = g.actions
    finally:
        tisim.init(**TEST_SETTINGS)


def test_restart_retires_the_old_runtimes_arrays(monkeypatch):
    """Taichi frees an array by its address in the live program, so an array of an older program freed after a
    restart could free a new array that reuses its address (CI failed that way: "argument not found"). After a
    restart, freeing an old array must not reach the program; freeing a new one still must."""
    sim = ScalarLinear(horizon=2)
    sim.rollout()
    old = [sim.theta, sim.theta.grad, sim.loss, sim.x]
    tisim.init(arch="cpu", precision="f32")
    try:
        new = ti.ndarray(ti.f32, (3,))
        freed = []
        monkeypatch.setattr(impl, "get_runtime", lambda: types.SimpleNamespace(
            prog=types.SimpleNamespace(delete_ndarray=freed.append)))
        for array in old + [new]:
            array.__del__()
        monkeypatch.undo()
        assert len(freed) == 1 and freed[0] is new.arr
    finally:
        tisim.init(**TEST_SETTINGS)


def test_restart_lets_the_old_program_go():
    """No simulator keeps the old Taichi program reachable past a restart. A kept field tree did (MassSpring's
    topology, forward mode's fields), and when the simulator was collected later the old program's destructor freed
    memory the new program was using (a segfault in CI, in a later test)."""
    body = MassSpring(horizon=3, robot=Robot.load("worm"))
    body.rollout()
    pendulum = Linear(horizon=3, n=2, m=1)
    pendulum.gradient(tisim.losses.TerminalTarget({"x": [1.0, 0.0]}), method="forward_mode")
    stray = [call for call in body._launch._bound.values() if isinstance(call, _BoundCall)]
    assert stray  # bound calls held elsewhere too, as a kept traceback would hold one
    old = impl.get_runtime().prog
    tisim.init(arch="cpu", precision="f32")
    try:
        assert sys.getrefcount(old) == 2  # the name `old` and getrefcount's argument
    finally:
        tisim.init(**TEST_SETTINGS)


@pytest.mark.parametrize("kwargs, message", [
    (dict(arch="tpu"), "arch must be one of"),
    (dict(precision="f16"), "precision must be one of"),
    (dict(threads=0), "threads must be a positive int"),
    (dict(deterministic=True, threads=2), "deterministic=True runs on one thread"),
])
def test_bad_init_arguments(kwargs, message):
    """tisim.init rejects unknown settings before touching the runtime."""
    generation = runtime.generation()
    with pytest.raises(ValueError, match=message):
        tisim.init(**kwargs)
    assert runtime.generation() == generation
