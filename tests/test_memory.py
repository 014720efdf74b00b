"""A simulator plans its arrays before allocating any (sim.memory_plan()), and refuses by name what cannot work: an
array beyond Taichi's 32-bit indexing, or more memory than the machine has."""
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tisim
from tisim.core import memory
from tisim.systems import MPM, Linear, MassSpring
from tisim.systems.mass_spring import mean_x_weights

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_an_action_array_beyond_32_bit_indexing_is_refused_before_anything_is_made():
    """The actions of 10^4 worms over 10^8 steps: 5 10^12 entries, refused at once, by name, with the way out."""
    with pytest.raises(ValueError) as refused:
        MassSpring(horizon=10 ** 8, batch=10 ** 4, robot="worm")
    message = str(refused.value)
    assert "the array u (actions) of shape (10000, 100000000, 5)" in message
    assert "5,000,000,000,000 elements, more than the 2,147,483,647 (2^31 - 1)" in message
    assert "a shorter horizon or a smaller batch" in message
    assert refused.value.plan["u"].elements == 5 * 10 ** 12  # the plan comes with the refusal


def test_the_states_of_every_step_are_refused_at_the_first_unrolled_pass(monkeypatch):
    """x (B, T+1, S) is made by the first pass that keeps every step: a simulator used only with
    method="checkpointed" never makes it, so it is refused there, pointing to that method."""
    monkeypatch.setattr(memory, "INDEX_LIMIT", 200)  # the limit scaled down to a small simulator
    sim = Linear(horizon=60, batch=2, n=2, m=1)  # u: 120 entries; x: 2 * 61 * 2 = 244
    assert sim.memory_plan()["x"].elements == 244
    g = sim.gradient(tisim.losses.TerminalSum({"x": np.ones(2)}), method="checkpointed")
    assert np.all(np.isfinite(g.params["A"]))
    with pytest.raises(ValueError, match=r"the array x \(states of every step\) of shape \(2, 61, 2\) would hold 244 "
                                         r"elements, more than the 200 .* use method=\"checkpointed\""):
        sim.rollout()
    with pytest.raises(ValueError, match=r"the array u \(actions\) of shape \(2, 120, 1\)"):
        Linear(horizon=120, batch=2, n=2, m=1)


def test_more_memory_than_the_machine_has_is_refused_with_the_figures(monkeypatch):
    """Arrays that need more than the available memory are refused before they are made, with what they need, what
    is available, the largest of them and the way out."""
    sim = MassSpring(horizon=1000, robot="worm")
    made = sum(a.bytes for a in sim.memory_plan().made(memory.CONSTRUCTION))
    monkeypatch.setattr(memory, "available_memory", lambda: made - 1)
    with pytest.raises(MemoryError) as refused:
        MassSpring(horizon=1000, robot="worm")
    message = str(refused.value)
    assert f"its arrays would need {memory.size(made)} (u (1, 1000, 5) 39.1 KiB" in message
    assert f"more than the {memory.size(made - 1)} of memory available now" in message
    assert f"of this machine's {memory.size(memory.physical_memory())}" in message
    assert "a shorter horizon or a smaller batch" in message
    # the per-step arrays count at the first pass that keeps every step
    monkeypatch.setattr(memory, "available_memory", lambda: made + 1)
    sim = MassSpring(horizon=1000, robot="worm")
    with pytest.raises(MemoryError, match='need .* more than .* use method="checkpointed"'):
        sim.rollout()
    # the machine's own figure: 400000 worms over 1000 steps hold 2 10^9 actions three times (48 GB), each array
    # within the index limit
    monkeypatch.undo()
    if memory.available_memory() < 45 * 2 ** 30:
        with pytest.raises(MemoryError, match="of memory available now"):
            MassSpring(horizon=1000, batch=400000, robot="worm")


def allocated(sim):
    """{name: (shape, bytes)} of the arrays the simulator really holds: Taichi ndarrays and numpy host arrays."""
    real = np.dtype(tisim.core.runtime.numpy_real()).itemsize
    found = {}
    for name in ("theta", "u", "x0", "loss", "x"):
        array = getattr(sim, name)
        found[name] = (tuple(array.shape), int(np.prod(array.shape)) * real)
        if name != "x0":
            found[name + ".grad"] = (tuple(array.grad.shape), int(np.prod(array.grad.shape)) * real)
    [scratch] = sim._scratch.arrays.values()
    found["scratch"] = found["scratch.grad"] = (tuple(scratch.shape), int(np.prod(scratch.shape)) * real)
    for name in ("_theta", "_x0", "_u", "_status_host", "_u_grad_host"):
        if getattr(sim, name) is not None:
            found[name] = (getattr(sim, name).shape, getattr(sim, name).nbytes)
    return found


@pytest.mark.parametrize("make", [lambda: MassSpring(horizon=40, batch=3, robot="worm"),
                                  lambda: MPM(horizon=5, batch=2)], ids=["mass_spring", "mpm"])
def test_the_plan_is_what_is_allocated(make):
    """After a gradient, the simulator holds exactly the arrays of its plan: the same names, shapes and bytes."""
    sim = make()
    plan = sim.memory_plan()
    loss = tisim.losses.TerminalSum({"pos": 1.0})
    sim.gradient(loss)
    real = allocated(sim)
    assert {a.name: (a.shape, a.bytes) for a in plan.arrays} == real
    assert plan.bytes == sum(b for _, b in real.values())
    assert plan.largest.name in ("scratch", "x", "scratch.grad", "x.grad")
    assert "made at first unrolled pass" in str(plan) and plan.owner in str(plan)


MEASURE = textwrap.dedent("""
    import numpy as np
    from tisim.systems import MassSpring

    def resident():
        return int(open("/proc/self/statm").read().split()[1]) * 4096

    MassSpring(horizon=3, robot="worm").rollout()  # kernels compiled (or loaded) before measuring
    before = resident()
    sim = MassSpring(horizon=20000, batch=4, robot="worm")
    trajectory = sim.rollout()
    grew = resident() - before - sum(a.nbytes for a in trajectory.values())
    print(grew, sim.memory_plan().bytes)
""")


@pytest.mark.skipif(not pathlib.Path("/proc/self/statm").exists(), reason="needs /proc/self/statm")
def test_the_plan_is_what_the_process_holds():
    """Resident memory grows by the plan's total, within 15%, on a worm of 4 x 20000 steps (about 475 MiB)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", MEASURE], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    grew, planned = map(int, done.stdout.split()[-2:])
    assert planned > 400 * 2 ** 20
    assert abs(grew - planned) < 0.15 * planned, (grew / 2 ** 20, planned / 2 ** 20)


def test_a_gradient_through_mean_x_weights_still_runs_after_the_checks():
    """The checks change nothing for a simulator that fits."""
    sim = MassSpring(horizon=20, robot="worm")
    g = sim.gradient(tisim.losses.TerminalSum(mean_x_weights(sim)))
    assert np.isfinite(g.value) and np.all(np.isfinite(g.params["k"]))
