"""Two threads, the default users get, against one thread: the same rollouts and gradients to round-off.

The rest of the suite runs on one thread (bitwise reproducible); `make test` runs the engine, gradient and mechanism
tests a second time on two (TISIM_TEST_THREADS=2). On two threads a batch runs in parallel only where the engine
does not serialize it (tisim.core.trajectory.is_small) and where Taichi splits it: its CPU range loop hands out
blocks of max(512, n / threads) iterations (docs/taichi_pitfalls.md#cpu-loop-blocks), so batches of up to 512 still run
on one thread. The batches here are larger.
"""
import numpy as np
import pytest

import tisim
from tisim.systems.mass_spring import MassSpring, mean_x_weights

from conftest import TEST_SETTINGS

CARTPOLE_BATCH = 1100  # two blocks of 550 on two threads: both threads work
SOFT_BODY_HORIZON = 120  # 4 x 121 steps x 48 entries: above the engine's serialization threshold
TWO_THREADS = dict(TEST_SETTINGS, deterministic=False, threads=2)


def cartpole_case(method):
    rng = np.random.default_rng(4)
    B = CARTPOLE_BATCH
    sim = tisim.systems.Cartpole(horizon=40, batch=B, theta=np.pi + rng.normal(0, 0.3, B),
                                 theta_dot=rng.normal(0, 0.3, B), l=rng.uniform(0.4, 0.6, B))
    sim.set_actions(rng.normal(0, 3.0, (B, 40)))
    loss = tisim.losses.TerminalTarget({"theta": 0.0, "x": 0.0}) + 1e-3 * tisim.losses.Effort()
    g = sim.gradient(loss, method=method)
    groups = {"per_batch": g.per_batch, **{f"params.{k}": v for k, v in g.params.items()},
              **{f"initial_state.{k}": v for k, v in g.initial_state.items()}}
    if method != "forward_mode":  # forward mode gives no action gradients
        groups["actions"] = g.actions
    groups["rollout"] = sim.rollout()["theta"]
    return groups


def soft_body_case(method):
    sim = MassSpring(horizon=SOFT_BODY_HORIZON, batch=4, robot=tisim.robots.grid(4, 3))
    rng = np.random.default_rng(5)
    sim.set_actions(0.1 * rng.standard_normal((4, SOFT_BODY_HORIZON, sim.action_layout.size)))
    g = sim.gradient(tisim.losses.TerminalSum(mean_x_weights(sim)) + 0.1 * tisim.losses.Effort(), method=method)
    return {"per_batch": g.per_batch, "params.k": g.params["k"], "params.mu": g.params["mu"],
            "initial_state.pos": g.initial_state["pos"], "actions": g.actions}


CASES = {f"cartpole-{m}": (cartpole_case, m)
         for m in ("unrolled", "checkpointed", "forward_mode", "continuous_adjoint")}
CASES.update({f"soft-body-{m}": (soft_body_case, m) for m in ("unrolled", "checkpointed")})


@pytest.fixture(scope="module")
def results():
    """Every case on one thread, then on two (one restart each way)."""
    out = {}
    for settings, label in ((TEST_SETTINGS, "one"), (TWO_THREADS, "two")):
        tisim.init(**settings)
        out[label] = {name: make(method) for name, (make, method) in CASES.items()}
    tisim.init(**TEST_SETTINGS)
    return out


def test_the_parallel_path_runs():
    """Both cases' batch loops are parallel on two threads (else this file would compare a path with itself)."""
    tisim.init(**TWO_THREADS)
    try:
        assert not tisim.core.trajectory.is_small(CARTPOLE_BATCH * 41 * 4, CARTPOLE_BATCH)
        assert not tisim.core.trajectory.is_small(4 * (SOFT_BODY_HORIZON + 1) * 48, 4)
    finally:
        tisim.init(**TEST_SETTINGS)


@pytest.mark.parametrize("case", list(CASES))
def test_two_threads_agree_with_one(results, case):
    """Losses, every gradient group and the rollout agree between one and two threads to 1e-12 (relative to each
    array's largest entry): atomic additions may land in another order, nothing else may differ."""
    one, two = results["one"][case], results["two"][case]
    assert one.keys() == two.keys()
    for name in one:
        scale = max(np.max(np.abs(one[name])), 1e-300)
        np.testing.assert_allclose(two[name], one[name], rtol=0, atol=1e-12 * scale, err_msg=f"{case}: {name}")
