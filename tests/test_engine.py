"""The rollout engine: the worked example, batches, Jacobians and what bad input gets."""
import numpy as np
import pytest
import taichi as ti

import tisim
from tisim.systems import Linear, ScalarLinear

from conftest import TEST_SETTINGS

TARGET = tisim.losses.TerminalTarget({"x": 2.0})


def worked_example():
    return ScalarLinear(horizon=3, a=0.9, theta=1.0, x=0.0)


def test_worked_example_forward_and_adjoint():
    """a=0.9, T=3, theta=1, target 2: the rollout, L, every lambda_t and dL/dtheta to 1e-12."""
    sim = worked_example()
    np.testing.assert_allclose(sim.rollout()["x"][0], [0.0, 1.0, 1.9, 2.71], rtol=0, atol=1e-12)
    g = sim.gradient(TARGET)
    assert abs(g.value - 0.5041) < 1e-12
    np.testing.assert_allclose(g.adjoint["x"][0], [1.03518, 1.1502, 1.278, 1.42], rtol=0, atol=1e-12)
    assert abs(g.initial_state["x"][0] - 1.03518) < 1e-12
    assert abs(g.params["theta"][0] - 3.8482) < 1e-12
    assert abs(g.params["theta"][0] - g.adjoint["x"][0, 1:].sum()) < 1e-12
    assert abs(g.params["theta"][0] - 2 * (2.71 - 2) * (1 + 0.9 + 0.81)) < 1e-12
    np.testing.assert_allclose(g.actions[0], [1.1502, 1.278, 1.42], rtol=0, atol=1e-12)


def test_a_simulator_has_a_model_and_is_not_one():
    """The simulator is a plain object holding a shared model: the model's class is the engine's Model with the
    system's declarations and step, not a subclass of the system, and every simulator of a structure shares it."""
    from tisim.core.model import Model

    sim, other = ScalarLinear(horizon=3), ScalarLinear(horizon=5, batch=2)
    assert not isinstance(sim, Model) and isinstance(sim.model, Model)
    assert not isinstance(sim.model, tisim.System) and sim.model is other.model
    assert sim.model.step is not None and sim.model.PARAMS == ScalarLinear.PARAMS
    assert repr(sim.model) == "<model of ScalarLinear {}>"


def test_worked_example_agrees_with_central_differences():
    """The worked example's backward pass matches central differences in every group."""
    report = tisim.gradcheck(worked_example(), TARGET)
    assert set(report) == {"params", "initial_state", "actions"}
    assert report.worst < 1e-8, str(report)


def test_gradient_is_repeatable_and_does_not_accumulate():
    """Two gradient calls in a row give identical results: gradients are zeroed, not accumulated."""
    sim = worked_example()
    first, second = sim.gradient(TARGET), sim.gradient(TARGET)
    assert first.params["theta"][0] == second.params["theta"][0]
    np.testing.assert_array_equal(first.adjoint["x"], second.adjoint["x"])


def test_batch_elements_are_independent():
    """B=4 with different parameters gives the four single-element results."""
    a = np.array([0.5, 0.9, 1.0, 1.2])
    theta = np.array([1.0, -1.0, 0.3, 2.0])
    x0 = np.array([0.0, 1.0, -2.0, 0.5])
    u = np.random.default_rng(0).normal(size=(4, 6))
    batched = ScalarLinear(horizon=6, batch=4, a=a, theta=theta, x=x0)
    batched.set_actions(u)
    g = batched.gradient(TARGET)
    for b in range(4):
        single = ScalarLinear(horizon=6, a=a[b], theta=theta[b], x=x0[b])
        single.set_actions(u[b])
        gb = single.gradient(TARGET)
        assert g.per_batch[b] == pytest.approx(gb.value, rel=1e-14)
        np.testing.assert_allclose(g.adjoint["x"][b], gb.adjoint["x"][0], rtol=1e-14)
        np.testing.assert_allclose(g.actions[b], gb.actions[0], rtol=1e-14)
        assert g.params["a"][b] == pytest.approx(gb.params["a"][0], rel=1e-14)
    assert g.value == pytest.approx(g.per_batch.sum(), rel=1e-14)


@pytest.mark.parametrize("wrt", ["params", "initial_state", "actions"])
def test_jacobian_matches_central_differences(wrt):
    """jacobian(wrt=...) of a 3-state Linear system equals central differences of x_T."""
    rng = np.random.default_rng(1)
    sim = Linear(horizon=4, batch=2, n=3, m=2, A=rng.normal(size=(3, 3)) * 0.5, B=rng.normal(size=(3, 2)),
                 theta=rng.normal(size=3), x=rng.normal(size=3))
    sim.set_actions(rng.normal(size=(2, 4, 2)))
    J = sim.jacobian(wrt=wrt)
    arrays = {"params": sim._theta, "initial_state": sim._x0, "actions": sim._u.reshape(2, -1)}
    values = arrays[wrt]
    assert J.matrix.shape == (2, 3, values.shape[1]) and len(J.cols) == values.shape[1] and len(J.rows) == 3
    h = 1e-6
    for e in range(values.shape[1]):
        original = values[:, e].copy()
        values[:, e] = original + h
        sim._invalidate()
        up = sim.rollout()["x"][:, -1]
        values[:, e] = original - h
        sim._invalidate()
        down = sim.rollout()["x"][:, -1]
        values[:, e] = original
        sim._invalidate()
        np.testing.assert_allclose(J.matrix[:, :, e], (up - down) / (2 * h), rtol=1e-7, atol=1e-8)


def test_params_and_initial_state_round_trip():
    """set_params / set_initial_state broadcast scalars and keep per-element values, batch axis first."""
    sim = Linear(horizon=2, batch=3, n=2, m=1, A=np.eye(2), theta=[[1, 2], [3, 4], [5, 6]], x=[0.5, -0.5])
    assert sim.params["A"].shape == (3, 2, 2) and np.all(sim.params["A"] == np.eye(2))
    np.testing.assert_array_equal(sim.params["theta"], [[1, 2], [3, 4], [5, 6]])
    np.testing.assert_array_equal(sim.initial_state["x"], [[0.5, -0.5]] * 3)
    assert sim.actions.shape == (3, 2, 1)
    traj = sim.rollout()
    assert traj["x"].shape == (3, 3, 2)
    np.testing.assert_allclose(traj["x"][:, 2], np.array([[0.5, -0.5]] * 3) + 2 * np.array([[1, 2], [3, 4], [5, 6]]))


BAD_CONSTRUCTION = [
    (dict(horizon=0), "horizon must be an integer >= 1"),
    (dict(horizon=2.5), "horizon must be an integer >= 1"),
    (dict(horizon=True), "horizon must be an integer >= 1"),
    (dict(horizon=3, batch=0), "batch must be an integer >= 1"),
    (dict(horizon=3, dt=0.0), "dt must be a finite number > 0"),
    (dict(horizon=3, dt=-1e-3), "dt must be a finite number > 0"),
    (dict(horizon=3, dt=float("nan")), "dt must be a finite number > 0"),
    (dict(horizon=3, thetta=1.0), "Perhaps you meant 'theta'"),
    (dict(horizon=3, theta=float("nan")), "theta contains NaN"),
    (dict(horizon=3, a=float("inf")), "a contains NaN or infinite"),
    (dict(horizon=3, x=[1.0, 2.0]), "x must have shape"),
]


@pytest.mark.parametrize("kwargs, message", BAD_CONSTRUCTION)
def test_bad_construction_names_the_argument(kwargs, message):
    """Bad constructor arguments raise an error naming the argument and what is allowed."""
    with pytest.raises((ValueError, TypeError), match=message):
        ScalarLinear(**kwargs)


def test_bad_inputs_after_construction_change_nothing():
    """Bad set_params / set_initial_state / set_actions raise clear errors and leave the simulator as it was."""
    sim = ScalarLinear(horizon=3, batch=2)
    before = sim.rollout()["x"].copy()
    cases = [
        (lambda: sim.set_params(theta=[1.0, 2.0, 3.0]), "theta must have shape a scalar or shape \\(2,\\)"),
        (lambda: sim.set_params(a=1.0, theta=np.nan), "theta contains NaN"),
        (lambda: sim.set_params(b=1.0), "unknown parameter name 'b'"),
        (lambda: sim.set_initial_state(y=0.0), "unknown state name 'y'"),
        (lambda: sim.set_initial_state(x="zero"), "x must be numeric"),
        (lambda: sim.set_actions(np.zeros(4)), "actions \\(u\\) must have shape \\(3,\\) or \\(2, 3\\)"),
        (lambda: sim.set_actions([0.0, np.inf, 0.0]), "NaN or infinite"),
        (lambda: sim.gradient(TARGET, method="checkpointd"), "method must be one of"),
        (lambda: sim.jacobian(wrt="param"), "Perhaps you meant 'params'"),
        (lambda: sim.index("v"), "unknown state name 'v'"),
    ]
    for call, message in cases:
        with pytest.raises((ValueError, TypeError), match=message):
            call()
    assert sim.params["a"].tolist() == [0.9, 0.9]
    np.testing.assert_array_equal(sim.rollout()["x"], before)


def test_bounds_are_enforced():
    """A declared bound rejects values outside it with the interval in the message."""
    quantity = tisim.Quantity("m", 1.0, "kg", "mass", bounds="(0, inf)")
    assert quantity.interval.contains([1e-9, 5.0]).all() and not quantity.interval.contains(0.0)
    assert str(tisim.Quantity("e", 0.5, "-", "restitution", bounds="[0, 1]").interval) == "[0, 1]"
    with pytest.raises(ValueError, match="bounds must look like"):
        tisim.Quantity("e", 0.5, "-", "restitution", bounds="0..1")


def test_nonfinite_rollout_names_state_and_step():
    """A rollout that overflows raises NonFiniteError with the system, the state and the first bad step."""
    sim = ScalarLinear(horizon=40, a=1e20, theta=1.0)
    message = r"ScalarLinear: the rollout turned non-finite at step (\d+)"
    with pytest.raises(tisim.NonFiniteError, match=message) as info:
        sim.rollout()
    step = int(info.value.args[0].split("at step ")[1].split()[0])
    with np.errstate(over="ignore"):
        x = np.zeros(41)
        for t in range(40):
            x[t + 1] = 1e20 * x[t] + 1.0
    assert step == int(np.argmax(~np.isfinite(x)))
    assert "state x = inf" in str(info.value)


@ti.func
def root_at_two(x: ti.template(), theta: ti.template(), u: ti.template(), b, t):
    return ti.sqrt(x[b, t, 0])  # finite at x = 0; its derivative is not


@pytest.mark.parametrize("method", ["unrolled", "checkpointed", "forward_mode", "continuous_adjoint"])
def test_nonfinite_backward_pass_of_a_finite_rollout_is_named(method):
    """A derivative that overflows while the rollout stays finite raises NonFiniteError when the gradient is read,
    never a NaN gradient: at the step where the adjoint went bad (sqrt at x_2 = 0), or naming the derivatives (dL/dm
    of a pendulum of mass 1e-300); a snapshot of such a gradient raises too; Jacobians likewise."""
    if method in ("unrolled", "checkpointed"):
        sim = ScalarLinear(horizon=5, a=0.5, theta=0.0, x=0.0)
        sim.set_actions([0.0, 0.0, 0.0, 1.0, 0.0])
        with pytest.raises(tisim.NonFiniteError, match="backward pass turned non-finite at step 2 of 5") as info:
            _ = sim.gradient(tisim.losses.Custom(root_at_two, steps=[2]), method=method).actions
        assert (info.value.step, info.value.batch) == (2, 0)
    pendulum = tisim.systems.Pendulum(horizon=6, m=1e-300, theta=0.5)
    assert np.all(np.isfinite(pendulum.rollout()["theta"]))
    loss = tisim.losses.TerminalTarget({"theta": 0.0})
    with pytest.raises(tisim.NonFiniteError, match=r"non-finite in dL/d[\w, /]*dL/dm\b.*\(batch element 0\)"):
        _ = pendulum.gradient(loss, method=method).params
    if method == "unrolled":
        g = pendulum.gradient(loss)
        pendulum.rollout()  # the next pass snapshots g: its error is kept, not raised here
        with pytest.raises(tisim.NonFiniteError, match="dL/dm"):
            _ = g.params
    with pytest.raises(tisim.NonFiniteError, match="non-finite in the jacobian"):
        pendulum.jacobian(wrt="params", mode="forward" if method == "forward" else "reverse")


def test_nonfinite_step_found_in_large_states_and_later_batch_elements():
    """A state longer than the unrolled rows (20 entries) takes the general check: a batch element that overflows at a
    known step is reported with that step and its index, while the other element stays finite."""
    n = 20
    sim = Linear(horizon=30, batch=2, n=n, m=1)
    sim.set_params(A=np.stack([0.5 * np.eye(n), 1e30 * np.eye(n)]), theta=np.eye(n)[7])
    with pytest.raises(tisim.NonFiniteError) as info:
        sim.rollout()
    x = np.zeros(31)
    with np.errstate(over="ignore"):
        for t in range(30):
            x[t + 1] = 1e30 * x[t] + 1.0
    assert (info.value.step, info.value.batch) == (int(np.argmax(~np.isfinite(x))), 1)
    assert "x[7]" in str(info.value)


def test_gpu_code_paths_agree_with_the_cpu_ones():
    """arch="cuda" takes the GPU code paths: a launch context filled per call, numpy arrays through Taichi's own
    calls, and one launch per step parallel over particles for MassSpring. Without a GPU, Taichi runs them on its CPU
    fallback, so every machine checks that they give the CPU paths' loss and gradients (1e-12)."""
    from tisim.robots import Robot
    from tisim.systems.mass_spring import MassSpring, mean_x_weights, reference_actions

    def run():
        sim = MassSpring(horizon=30, robot=Robot.load("worm"))
        sim.set_actions(reference_actions(sim))
        loss = tisim.losses.TerminalSum(mean_x_weights(sim)) + 0.1 * tisim.losses.Effort()
        g = sim.gradient(loss)
        return sim, [g.value, g.params["k"], g.actions, g.initial_state["vel"], sim.evaluate(loss)]

    tisim.init(**{**TEST_SETTINGS, "arch": "cpu"})
    cpu_sim, expected = run()
    assert not cpu_sim._per_step and cpu_sim._launch._cpu and cpu_sim._views["u"] is not None
    tisim.init(**{**TEST_SETTINGS, "arch": "cuda"})
    gpu_sim, results = run()
    assert gpu_sim._per_step and not gpu_sim._launch._cpu and gpu_sim._views["u"] is None
    for got, want in zip(results, expected):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize("arch", ["cpu", "cuda"])
def test_inputs_reach_the_arrays_rounded_as_numpy_rounds_them(arch):
    """In float32 the float64 inputs are rounded on upload, by numpy through a view of the arrays' memory on a CPU
    and by a kernel elsewhere (here Taichi's CPU fallback of arch="cuda"): to the nearest float32 either way."""
    tisim.init(**{**TEST_SETTINGS, "arch": arch, "precision": "f32"})
    rng = np.random.default_rng(3)
    sim = tisim.systems.Linear(horizon=7, batch=2, n=2, m=2)
    values = dict(actions=rng.normal(size=(2, 7, 2)), A=rng.normal(size=(2, 2, 2)), x=rng.normal(size=(2, 2)))
    sim.set_actions(values["actions"])
    sim.set_params(A=values["A"])
    sim.set_initial_state(x=values["x"])
    sim.rollout()
    np.testing.assert_array_equal(sim.u.to_numpy(), values["actions"].astype(np.float32).reshape(sim.u.shape))
    np.testing.assert_array_equal(sim.param_layout.unpack(sim.theta.to_numpy())["A"], values["A"].astype(np.float32))
    np.testing.assert_array_equal(sim.state_layout.unpack(sim.x0.to_numpy())["x"], values["x"].astype(np.float32))
    assert np.abs(values["actions"].astype(np.float32) - values["actions"]).max() > 0  # rounding was needed


def test_a_long_list_of_bad_entries_is_cut_short():
    """A NonFiniteError names at most 8 entries and counts the rest (an MPM blow-up listed hundreds)."""
    from tisim.core.derivatives import named
    assert named([f"pos[{i}]" for i in range(20)]) == ", ".join(f"pos[{i}]" for i in range(8)) + " and 12 more"
    assert named(["x", "v"]) == "x, v"


def test_a_step_splits_into_launches_around_its_repeated_phases():
    """Plain phases share one launch; a repeated phase gets its own, run once per repetition; a repeated last phase
    (the one that writes the next state) is refused, naming the class."""
    from tisim.core.phases import LaunchUnit, Phase, launch_units, phase_list
    plain, sweep = Phase("plain", None, 4, 0), Phase("sweep", None, 4, 16)
    assert launch_units([plain, plain, sweep, plain]) == [(0, 2, False, 0), (2, 3, False, 16), (3, 4, False, 0)]
    assert launch_units([sweep, sweep, plain]) == [(0, 1, False, 16), (1, 2, False, 16), (2, 3, False, 0)]
    assert launch_units([plain]) == [LaunchUnit(first=0, last=1, fused=False, kind=0)]
    assert launch_units([plain], fused=True) == [(0, 1, True, 0)]

    class Looping:
        PHASES = (("touch", "n"), ("sweep", "n", 8))
    with pytest.raises(ValueError, match="Looping: the last phase writes the next state and cannot repeat"):
        phase_list(Looping())


def test_an_implicit_phase_is_one_launch_unit_with_its_residual_phases_and_needs_its_solve_and_adjoint():
    """An implicit phase and the residual phases after it form one unit (solve, then the residual; backwards the
    adjoint, then the residual's gradient); a residual phase anywhere else, an implicit phase without its solve or
    adjoint, and a repeat count that is not a positive integer are refused by name."""
    from tisim.core.phases import IMPLICIT, RESIDUAL, Phase, launch_units, phase_list
    plain, residual = Phase("plain", None, 4, 0), Phase("residual", None, 4, RESIDUAL)
    solve = Phase("solve", None, 4, IMPLICIT, solve=None, reverse=None)
    assert launch_units([plain, solve, residual, plain, plain]) == \
        [(0, 1, False, 0), (1, 3, False, IMPLICIT), (3, 5, False, 0)]
    assert launch_units([solve, plain]) == [(0, 1, False, IMPLICIT), (1, 2, False, 0)]

    class Host:
        sizes = {"n": 4}

        def __init__(self, phases):
            self.PHASES = phases

        def touch(self):
            pass

        def move(self):
            pass

    with pytest.raises(ValueError, match=r"Host: the implicit phase 'touch' needs \['touch_solve', 'touch_reverse'\]"):
        phase_list(Host((("touch", "n", IMPLICIT), ("move", "n"))))
    with pytest.raises(ValueError, match="Host: the residual phase 'touch' must follow an implicit phase"):
        phase_list(Host((("touch", "n", RESIDUAL), ("move", "n"))))
    for bad in (0, -1, 2.5, True, "often"):
        with pytest.raises(ValueError, match="Host: phase 'touch' repeats an integer >= 1 times"):
            phase_list(Host((("touch", "n", bad), ("move", "n"))))
    Host.touch_solve = Host.touch_reverse = Host.touch
    phases = phase_list(Host((("touch", "n", IMPLICIT), ("move", "n"))))
    assert [(p.name, p.kind, p.size) for p in phases] == [("touch", IMPLICIT, 4), ("move", 0, 4)]
    assert phases[0].solve.__func__ is phases[0].reverse.__func__ is Host.touch  # bound to the host
