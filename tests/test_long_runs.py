"""Long forward runs: rollout(final=True), rollout(every=k) and rollout(to=path) keep the states of the plain rollout
bit for bit, in memory that does not grow with the horizon, and stream to a file that stays readable."""
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import taichi as ti

import tisim
from tisim.core.derivatives import NonFiniteError
from tisim.core.protocol import Protocol
from tisim.core.segments import StateFile
from tisim.systems.mass_spring import MassSpring, reference_actions
from tisim.systems.mpm import MPM, Body

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pendulum(horizon=300, batch=3):
    sim = tisim.systems.Pendulum(horizon=horizon, batch=batch, theta=np.linspace(0.2, 2.5, batch))
    sim.set_actions(np.random.default_rng(1).normal(0.0, 0.3, size=(batch, horizon)))
    return sim


def mass_spring(horizon=60):
    sim = MassSpring(horizon=horizon, robot="worm")
    sim.set_actions(reference_actions(sim))
    return sim


def mpm(horizon=25, dim=2):
    body = Body.box([0.4] * dim, [0.6] * dim, 0.5 / 8)
    sim = MPM(horizon=horizon, body=body, n_grid=8)
    rng = np.random.default_rng(0)
    n = len(body.particles)
    sim.set_initial_state(vel=rng.normal(0.0, 0.3, (n, dim)), C=rng.normal(0.0, 1.0, (n, dim, dim)))
    return sim


CASES = {"pendulum": pendulum, "mass_spring": mass_spring, "mpm": mpm}
ALL_CASES = dict(CASES, mpm_3d=lambda: mpm(horizon=12, dim=3))


def assert_same(kept, full, steps):
    assert set(kept) == set(full)
    for name in full:
        np.testing.assert_array_equal(kept[name], full[name][:, steps], err_msg=name)


# the 3D MPM case compiles 3D kernels of its own for a minute: make stress runs it, make test the 2D one
@pytest.mark.parametrize("case,chunk", [(case, chunk) for case in sorted(CASES) for chunk in (None, 7)]
                         + [pytest.param("mpm_3d", 5, marks=pytest.mark.stress)])
def test_final_and_every_k_equal_the_full_rollout_bitwise(case, chunk):
    """The final state and every k-th state (k dividing T, and not) are the full rollout's, bit for bit, whatever
    the segment length."""
    sim = ALL_CASES[case]()
    full = sim.rollout()
    T = sim.T
    assert_same(sim.rollout(final=True, chunk=chunk), full, -1)
    for every in (1, 5, T // 2 + 1, T):
        kept = sim.rollout(every=every, chunk=chunk)
        assert next(iter(kept.values())).shape[1] == T // every + 1
        assert_same(kept, full, slice(None, None, every))
    assert_same(sim.rollout(progress=False, chunk=chunk), full, slice(None))


def test_final_state_continues_a_run():
    """Two runs of T steps chained through rollout(final=True) and set_initial_state end where one run of 2T does."""
    actions = np.random.default_rng(2).normal(0.0, 0.3, size=(2, 400))
    whole = tisim.systems.Pendulum(horizon=400, batch=2, theta=1.0)
    whole.set_actions(actions)
    half = tisim.systems.Pendulum(horizon=200, batch=2, theta=1.0)
    half.set_actions(actions[:, :200])
    middle = half.rollout(final=True)
    half.set_initial_state(**middle)
    half.set_actions(actions[:, 200:])
    assert_same(half.rollout(final=True), whole.rollout(), -1)


@pytest.mark.parametrize("case", sorted(CASES))
def test_streamed_file_equals_the_full_rollouts_every_k_states(case, tmp_path):
    """to=path writes x[0], x[k], ... to an .npy file whose fields are the full rollout's states at those steps; the
    run returns x[T]."""
    sim = CASES[case]()
    full = sim.rollout()
    path = tmp_path / "run.npy"
    final = sim.rollout(every=3, to=path, chunk=4)
    assert_same(final, full, -1)
    stored = np.load(path)
    assert stored.shape == (sim.B, sim.T // 3 + 1)
    assert_same({name: stored[name] for name in stored.dtype.names}, full, slice(None, None, 3))
    assert_same({name: np.load(path, mmap_mode="r")[name] for name in full}, full, slice(None, None, 3))


def arrays_held(sim):
    """{name: elements} of every Taichi array a simulator holds: its own and the buffers of its passes."""
    held = {}

    def add(name, array):
        if isinstance(array, ti.Ndarray) and id(array) not in {i for i, _ in held.values()}:
            held[name] = (id(array), int(np.prod(array.shape)) * (2 if array.grad is not None else 1))

    for name, value in vars(sim).items():
        add(name, value)
    for rows, array in sim._scratch.arrays.items():  # a phased step's scratch, one per number of rows
        add(f"scratch[{rows}]", array)
    protocol = Protocol.of(sim)
    for key in list(protocol._buffers):
        for i, array in enumerate(protocol.held(key).arrays()):
            add(f"{key}[{i}]", array)
    return {name: elements for name, (_, elements) in held.items()}


@pytest.mark.parametrize("case", ["pendulum", "mpm"])
def test_memory_does_not_grow_with_the_horizon(case):
    """A long run allocates no trajectory: apart from the actions (an input over the horizon, B T A), the
    simulator's arrays hold the same number of elements at every horizon."""
    horizons = (100, 1_000, 10_000) if case == "pendulum" else (20, 200, 2_000)
    counts = []
    for T in horizons:
        sim = pendulum(T, batch=2) if case == "pendulum" else mpm(T)
        sim.rollout(every=T // 10, chunk=20, progress=False)
        assert sim.x is None  # the (B, T+1, S) trajectory was never made
        held = arrays_held(sim)
        actions = 2 * sim.B * T * sim.action_layout.size  # u and its gradient
        assert held.pop("u") == actions
        counts.append(held)
    assert counts[0] == counts[1] == counts[2], counts
    assert counts[0]["('run', 20)[0]"] == 2 * 21 * counts[0]["x0"]  # the states of one segment, with gradients


def test_a_million_pendulum_steps_take_seconds_in_constant_memory():
    """1e6 steps of a small pendulum batch, keeping every 1000th state, run in seconds and hold what 1e5 steps do."""
    held = []
    for T in (100_000, 1_000_000):  # both longer than one default segment
        sim = tisim.systems.Pendulum(horizon=T, batch=2, theta=np.array([1.0, 2.0]))
        start = time.perf_counter()
        kept = sim.rollout(every=1000, progress=False)
        elapsed = time.perf_counter() - start
        assert kept["theta"].shape == (2, T // 1000 + 1) and np.isfinite(kept["theta"]).all()
        assert sim.x is None
        held.append({k: v for k, v in arrays_held(sim).items() if k != "u"})
    assert held[0] == held[1]
    assert elapsed < 20.0, elapsed
    # the pendulum without torque keeps its energy (semi-implicit Euler: bounded error), so the run stayed sane
    assert np.abs(kept["theta"]).max() <= 2.1


def test_nonfinite_state_names_its_step_and_the_file_keeps_the_states_before(tmp_path):
    """A run that turns non-finite raises the plain rollout's NonFiniteError (same step, same message); a streamed
    run leaves a file with the kept states before that step."""
    sim = tisim.systems.Pendulum(horizon=50, batch=2, theta=1.0, m=np.array([1.0, 1e-300]))
    actions = np.zeros((2, 50))
    actions[1, 23] = 1e10  # over a bob of 1e-300 kg: an infinite angular velocity after step 23
    sim.set_actions(actions)
    with pytest.raises(NonFiniteError) as plain:
        sim.rollout()
    assert plain.value.step == 24
    for chunk in (None, 5, 24):
        with pytest.raises(NonFiniteError) as long:
            sim.rollout(final=True, chunk=chunk)
        assert (long.value.step, long.value.batch, str(long.value)) == (24, 1, str(plain.value))
    path = tmp_path / "bad.npy"
    with pytest.raises(NonFiniteError, match="at step 24 of 50"):
        sim.rollout(every=2, to=path, chunk=10)
    stored = np.load(path)
    assert stored.shape == (2, 12)  # steps 0, 2, ..., 22
    finite = tisim.systems.Pendulum(horizon=22, batch=2, theta=1.0, m=np.array([1.0, 1e-300])).rollout()
    assert_same({n: stored[n] for n in stored.dtype.names}, finite, slice(None, None, 2))


def test_an_interrupted_stream_leaves_a_readable_file(tmp_path):
    """A run killed part way leaves an .npy file that reads as the whole segments written before the kill."""
    path = tmp_path / "run.npy"
    script = textwrap.dedent(f"""
        import os, signal
        import tisim
        from tisim.core import segments

        tisim.init(arch="cpu", precision="f64", deterministic=True)
        add = segments.StateFile.add
        def add_then_die(self, xs, chosen):
            add(self, xs, chosen)
            if self.rows >= 30:
                os.kill(os.getpid(), signal.SIGKILL)
        segments.StateFile.add = add_then_die
        tisim.systems.Pendulum(horizon=1000, theta=1.0).rollout(to={str(path)!r}, chunk=10, progress=False)
        """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == -9, done.stderr
    stored = np.load(path)
    assert stored.shape == (1, 31)  # x[0..10], x[11..20], x[21..30]
    full = tisim.systems.Pendulum(horizon=30, theta=1.0).rollout()
    assert_same({n: stored[n] for n in stored.dtype.names}, full, slice(None))


def test_the_file_header_keeps_its_length_as_rows_grow(tmp_path):
    """The header is rewritten in place: it has one length from 0 rows to the most, and np.load reads each."""
    sim = tisim.systems.Pendulum(horizon=5, batch=3)
    stream = StateFile(tmp_path / "s.npy", sim.state_layout, 3, 10 ** 7)
    try:
        assert np.load(tmp_path / "s.npy").shape == (3, 0)
        length = os.path.getsize(tmp_path / "s.npy")
        assert length % 64 == 0
        stream.rows = 10 ** 7
        stream._write_header()
        assert os.path.getsize(tmp_path / "s.npy") == length
    finally:
        stream.close()


def test_bad_options_are_refused(tmp_path):
    sim = pendulum(20)
    with pytest.raises(ValueError, match="every must be a positive integer"):
        sim.rollout(every=0)
    with pytest.raises(ValueError, match="give one of them"):
        sim.rollout(final=True, every=2)
    with pytest.raises(ValueError, match="chunk must be a positive integer"):
        sim.rollout(final=True, chunk=2.5)
    with pytest.raises(ValueError, match="an .npy file"):
        sim.rollout(to=tmp_path / "run.npz")
    with pytest.raises(ValueError, match="progress must be"):
        sim.rollout(final=True, progress="yes")
    with pytest.raises(TypeError):
        sim.rollout(True)  # the options are keyword-only


def test_the_gpu_schedule_and_read_back(monkeypatch):
    """On the per-step schedule a GPU runs, with the segments read back by a kernel (no host view of device memory),
    the kept states are still the full rollout's on that schedule."""
    from tisim.core import segments

    for make in (mass_spring, pendulum):
        sim = make()
        Protocol.of(sim).per_step = make is mass_spring  # a phased system's schedule; a pendulum's is one launch
        full = sim.rollout()
        monkeypatch.setattr(segments, "host_view", lambda array: None)
        assert_same(sim.rollout(every=4, chunk=9), full, slice(None, None, 4))
        monkeypatch.undo()


class RecordingBar:
    made = []

    def __init__(self, total):
        self.total, self.done, self.closed = total, [], False
        RecordingBar.made.append(self)

    def update(self, done):
        self.done.append(done)

    def close(self):
        self.closed = True


@pytest.mark.parametrize("progress", [None, True, False])
def test_progress_bar(monkeypatch, progress):
    """progress=True shows a bar from the start; None shows one once the run is expected to outlast
    PROGRESS_AFTER_S (here 0 s: after the first segment, whose time includes compiling); False never."""
    from tisim.core import segments

    monkeypatch.setattr(segments, "_Bar", RecordingBar)
    monkeypatch.setattr(segments, "PROGRESS_AFTER_S", 0.0)
    RecordingBar.made.clear()
    pendulum(100).rollout(final=True, chunk=10, progress=progress)
    if progress is False:
        assert RecordingBar.made == []
        return
    (bar,) = RecordingBar.made
    assert bar.total == 100 and bar.closed
    assert bar.done == list(range(10 if progress else 20, 101, 10))


def test_the_plain_rollout_is_unchanged():
    """Without options rollout keeps every step in sim.x, as before; the long-run options leave sim.x alone."""
    sim = pendulum(40)
    assert sim.x is None
    full = sim.rollout()
    assert sim.x.shape == (3, 41, 2)
    kept = sim.x.to_numpy()
    sim.set_initial_state(theta=0.0)
    sim.rollout(final=True)
    np.testing.assert_array_equal(sim.x.to_numpy(), kept)
    assert full["theta"].shape == (3, 41)
