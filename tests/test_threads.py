"""Two threads, the default users get, against one thread: the same rollouts and gradients to round-off.

The rest of the suite runs on one thread (bitwise reproducible; TISIM_TEST_THREADS=2 runs any test file on two). The
cases cover every kind of step whose backward pass adds into shared entries from many items: a plain step (the
cart-pole, by every mechanism; two discs colliding), the phased soft body fused and on the per-step schedule, a 3D
cloth by hand-written reverses and by Taichi's reverse mode, and Rigid2D's contacts solved as one convex problem and
differentiated implicitly. On two threads a batch runs in parallel only where the engine does not serialize it
(tisim.core.trajectory.is_small) and where Taichi splits it: its CPU range loop hands out blocks of max(512, n /
threads) iterations (docs/taichi_pitfalls.md#cpu-loop-blocks), so batches of up to 512 still run on one thread. The
batches here are larger.
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


def soft_body_per_step_case(method):
    """The phased soft body on the per-step schedule (a GPU's: each phase parallel over batch and items)."""
    sim = MassSpring(horizon=SOFT_BODY_HORIZON, batch=4, robot=tisim.robots.grid(4, 3))
    sim._per_step = True
    rng = np.random.default_rng(6)
    sim.set_actions(0.1 * rng.standard_normal((4, SOFT_BODY_HORIZON, sim.action_layout.size)))
    g = sim.gradient(tisim.losses.TerminalSum(mean_x_weights(sim)), method=method)
    return {"per_batch": g.per_batch, "params.k": g.params["k"], "initial_state.pos": g.initial_state["pos"],
            "actions": g.actions}


def cloth_case(method):
    """A 3D cloth (4 x 4, pinned at two corners) falling onto a sphere: the 3D phases, their hand-written reverses
    and smooth contact, every spring's force added into both its ends."""
    sim = MassSpring(horizon=SOFT_BODY_HORIZON, batch=4, robot=tisim.robots.cloth(4, 4, spacing=0.05),
                     spheres=[((0.075, 0.9, -0.075), 0.05)], softness=0.01)
    rng = np.random.default_rng(7)
    sim.set_params(k=rng.uniform(800.0, 1200.0, (4, sim.n_springs)))
    g = sim.gradient(tisim.losses.TerminalSum({"pos": np.full((sim.n_particles, 3), 1.0 / sim.n_particles)}),
                     method=method)
    return {"per_batch": g.per_batch, "params.k": g.params["k"], "params.sphere_center": g.params["sphere_center"],
            "initial_state.pos": g.initial_state["pos"]}


class TaichiReversedMassSpring(MassSpring):
    """MassSpring with its phases differentiated by Taichi's reverse mode instead of the hand-written reverses."""

    FUSED = {}
    REVERSES = {}


def cloth_taichi_reverse_case(method):
    sim = TaichiReversedMassSpring(horizon=SOFT_BODY_HORIZON, batch=4, robot=tisim.robots.cloth(4, 4, spacing=0.05))
    g = sim.gradient(tisim.losses.TerminalSum({"pos": np.full((sim.n_particles, 3), 1.0 / sim.n_particles)}),
                     method=method)
    return {"per_batch": g.per_batch, "params.k": g.params["k"], "initial_state.pos": g.initial_state["pos"]}


def stack_case(method):
    """Two boxes stacked on the floor, the upper one pushed to slide (Rigid2D's contacts as one convex problem a
    step, differentiated implicitly: its first backward pass once went wrong on several threads only)."""
    B, T = 16, 120  # 16 x 121 x 12 element-steps: parallel on two threads
    sim = tisim.systems.Rigid2D(horizon=T, batch=B, n_discs=0, n_boxes=2, contact="qp", hx=[0.2, 0.1], hy=0.1,
                                mu=0.5, px=[0.0, 0.0], py=[0.1, 0.3])
    rng = np.random.default_rng(8)
    actions = np.zeros((B, T, 2, 3))
    actions[:, :, 1, 0] = 8.0 + 0.3 * rng.normal(size=(B, T))
    sim.set_actions(actions)
    g = sim.gradient(tisim.losses.TerminalTarget({"px": [0.0, 0.2], "angle": [0.0, 0.1]}), method=method)
    return {"per_batch": g.per_batch, "params.mu": g.params["mu"], "params.m": g.params["m"],
            "initial_state.px": g.initial_state["px"], "actions": g.actions}


def discs_case(method):
    """Two discs colliding with penalty contact and friction, batch parallel."""
    B = 200
    rng = np.random.default_rng(9)
    sim = tisim.systems.Rigid2D(horizon=100, batch=B, n_discs=2, n_boxes=0, px=[-0.3, 0.3], py=[0.5, 0.52],
                                vx=np.stack([rng.uniform(1.0, 2.0, B), -rng.uniform(1.0, 2.0, B)], axis=1), g=0.0)
    g = sim.gradient(tisim.losses.TerminalTarget({"px": [-0.5, 0.5]}), method=method)
    return {"per_batch": g.per_batch, "params.k": g.params["k"], "initial_state.vx": g.initial_state["vx"]}


CASES = {f"cartpole-{m}": (cartpole_case, m)
         for m in ("unrolled", "checkpointed", "forward_mode", "continuous_adjoint")}
CASES.update({f"soft-body-{m}": (soft_body_case, m) for m in ("unrolled", "checkpointed")})
CASES.update({"soft-body-per-step": (soft_body_per_step_case, "unrolled"), "cloth-3d": (cloth_case, "unrolled"),
              "cloth-3d-taichi-reverse": (cloth_taichi_reverse_case, "unrolled"),
              "box-stack-implicit": (stack_case, "unrolled"), "discs-penalty": (discs_case, "unrolled")})


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
    """Every case's batch loops are parallel on two threads (else this file would compare a path with itself)."""
    tisim.init(**TWO_THREADS)
    try:
        assert not tisim.core.trajectory.is_small(CARTPOLE_BATCH * 41 * 4, CARTPOLE_BATCH)
        assert not tisim.core.trajectory.is_small(4 * (SOFT_BODY_HORIZON + 1) * 48, 4)
        assert not tisim.core.trajectory.is_small(4 * (SOFT_BODY_HORIZON + 1) * 96, 4)  # the cloth
        assert not tisim.core.trajectory.is_small(16 * 121 * 12, 16)  # the stack
        assert not tisim.core.trajectory.is_small(200 * 101 * 12, 200)  # the discs
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
