"""A tisim rollout recorded on a Taichi ti.ad.Tape (tisim/autodiff/tape.py): the user's kernels read the trajectory,
and tisim's backward pass, seeded by their gradients at every step, gives exactly what sim.gradient gives."""
import numpy as np
import pytest
import taichi as ti

import tisim
from tisim.autodiff.tape import record
from tisim.core.losses import Effort, TerminalSum, TerminalTarget, Tracking
from tisim.core.protocol import Protocol
from tisim.systems.mass_spring import MassSpring, mean_x_weights, reference_actions
from tisim.systems.mass_spring.robots import grid

T, B = 60, 2


def pendulum():
    sim = tisim.systems.Pendulum(horizon=T, batch=B, theta=np.array([0.4, -0.7]), theta_dot=np.array([0.3, 0.1]),
                                 l=np.array([1.1, 0.8]), c=0.05)
    sim.set_actions(np.random.default_rng(0).normal(size=(B, T)))
    return sim


def scalar_loss():
    return ti.field(ti.f64, shape=(), needs_grad=True)


def terminal_kernel(loss):
    """(theta_T - 1)^2 + 0.5 (theta_dot_T + 0.2)^2 per batch element, by hand: TerminalTarget's terms."""

    @ti.kernel
    def terminal(x: ti.types.ndarray(), q: ti.i32, w: ti.i32):
        for b in range(x.shape[0]):
            last = x.shape[1] - 1
            loss[None] += (x[b, last, q] - 1.0) ** 2 + 0.5 * (x[b, last, w] + 0.2) ** 2

    return terminal


TERMINAL = TerminalTarget({"theta": 1.0, "theta_dot": -0.2}, weights={"theta": 1.0, "theta_dot": 0.5})


def taped(sim, loss, kernel, **options):
    """The Tape path: record the rollout, run the user's kernel on it; the Recording after the Tape closed."""
    with ti.ad.Tape(loss=loss):
        run = record(sim, **options)
        kernel(run.x, run.index("theta"), run.index("theta_dot"))
    return run


def assert_same_gradient(got, want, adjoint=True):
    for name in want.params:
        np.testing.assert_allclose(got.params[name], want.params[name], rtol=1e-12, atol=1e-15)
    for name in want.initial_state:
        np.testing.assert_allclose(got.initial_state[name], want.initial_state[name], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got.actions, want.actions, rtol=1e-12, atol=1e-15)
    if adjoint:
        for name in want.adjoint:
            np.testing.assert_allclose(got.adjoint[name], want.adjoint[name], rtol=1e-12, atol=1e-15)


def test_terminal_loss_equals_sim_gradient():
    """A terminal loss written by hand in a user kernel gives sim.gradient's TerminalTarget gradients, every group."""
    sim, loss = pendulum(), scalar_loss()
    run = taped(sim, loss, terminal_kernel(loss), adjoint=True)
    want = sim.gradient(TERMINAL)
    assert run.gradient.value == pytest.approx(want.value, rel=1e-13)
    assert run.gradient.per_batch is None
    assert np.abs(want.params["l"]).min() > 1e-3  # the comparison below is not of zeros
    assert_same_gradient(run.gradient, want)


def test_matches_central_differences():
    """The Tape path's dL/dl, dL/dx_0 and dL/da against float64 central differences of the user's own loss."""
    sim, loss = pendulum(), scalar_loss()
    kernel = terminal_kernel(loss)
    g = taped(sim, loss, kernel).gradient

    def value():
        sim.rollout()  # fills sim.x; the user's kernel alone, outside any Tape, gives the loss
        loss[None] = 0.0
        kernel(sim.x, sim.index("theta"), sim.index("theta_dot"))
        return loss[None]

    h = 1e-6
    for b in range(B):
        l0 = sim.params["l"].copy()
        up, down = l0.copy(), l0.copy()
        up[b] += h
        down[b] -= h
        sim.set_params(l=up)
        plus = value()
        sim.set_params(l=down)
        minus = value()
        sim.set_params(l=l0)
        assert g.params["l"][b] == pytest.approx((plus - minus) / (2 * h), rel=1e-6)

        q0 = sim.initial_state["theta"].copy()
        up, down = q0.copy(), q0.copy()
        up[b] += h
        down[b] -= h
        sim.set_initial_state(theta=up)
        plus = value()
        sim.set_initial_state(theta=down)
        minus = value()
        sim.set_initial_state(theta=q0)
        assert g.initial_state["theta"][b] == pytest.approx((plus - minus) / (2 * h), rel=1e-6)

        a0 = sim.actions
        for t in (0, T // 2, T - 1):
            up, down = a0.copy(), a0.copy()
            up[b, t] += h
            down[b, t] -= h
            sim.set_actions(up)
            plus = value()
            sim.set_actions(down)
            minus = value()
            assert g.actions[b, t] == pytest.approx((plus - minus) / (2 * h), rel=1e-6, abs=1e-10)
        sim.set_actions(a0)


def test_loss_on_every_step_and_on_the_inputs():
    """A loss on intermediate steps (every third state, from step 0) plus terms read straight from the actions and
    the parameters: the seed is the loss's partial derivative at every step, and the user's partials in u.grad and
    theta.grad are kept. It equals sim.gradient of Tracking + Effort, plus the parameter term's own derivative."""
    sim, loss = pendulum(), scalar_loss()
    rng = np.random.default_rng(1)
    data = np.full((B, T + 1), np.nan)
    data[:, ::3] = rng.normal(size=(B, len(range(0, T + 1, 3))))
    target = ti.ndarray(ti.f64, (B, T + 1))
    target.from_numpy(np.nan_to_num(data))
    l_offset = sim.param_layout.offsets["l"]

    @ti.kernel
    def every_third(x: ti.types.ndarray(), u: ti.types.ndarray(), theta: ti.types.ndarray(),
                    d: ti.types.ndarray(), q: ti.i32, lo: ti.i32):
        for b, t in ti.ndrange(x.shape[0], x.shape[1]):
            if t % 3 == 0:
                loss[None] += 2.0 * (x[b, t, q] - d[b, t]) ** 2
            if t < u.shape[1]:
                loss[None] += 0.01 * u[b, t, 0] ** 2
        for b in range(theta.shape[0]):
            loss[None] += 0.3 * theta[b, lo] ** 2

    with ti.ad.Tape(loss=loss):
        run = record(sim, adjoint=True)
        every_third(run.x, run.u, run.theta, target, run.index("theta"), l_offset)
    want = sim.gradient(Tracking({"theta": data}, weights=2.0) + 0.01 * Effort())
    got = run.gradient
    assert got.value == pytest.approx(want.value + 0.3 * np.sum(sim.params["l"] ** 2), rel=1e-13)
    np.testing.assert_allclose(got.params["l"], want.params["l"] + 0.6 * sim.params["l"], rtol=1e-12)
    for name in ("g", "m", "c"):
        np.testing.assert_allclose(got.params[name], want.params[name], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got.actions, want.actions, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got.adjoint["theta"], want.adjoint["theta"], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got.initial_state["theta"], want.initial_state["theta"], rtol=1e-12)
    # the seed at step 30 (a tracked step) is in lambda_30: without it the adjoint there would differ
    assert np.abs(got.adjoint["theta"][:, 30] - got.adjoint["theta"][:, 31]).min() > 0


def test_repeated_tapes_do_not_accumulate():
    """Each Tape starts from zeroed gradients: the same Tape twice gives the same numbers (not twice them), and a Tape
    after a different loss gives that Tape's loss alone; sim.gradient in between changes nothing."""
    sim, loss = pendulum(), scalar_loss()
    kernel = terminal_kernel(loss)
    first = taped(sim, loss, kernel).gradient
    second = taped(sim, loss, kernel).gradient
    for name in first.params:
        np.testing.assert_array_equal(second.params[name], first.params[name])
    np.testing.assert_array_equal(second.actions, first.actions)

    @ti.kernel
    def middle(x: ti.types.ndarray(), q: ti.i32, w: ti.i32):
        for b in range(x.shape[0]):
            loss[None] += x[b, 20, w]

    sim.gradient(TerminalSum({"theta": 1.0}))  # another pass between Tapes
    other = taped(sim, loss, middle, adjoint=True).gradient
    want = sim.gradient(TerminalSum({"theta_dot": 1.0}, steps=[20]))
    assert_same_gradient(other, want)
    assert np.all(other.adjoint["theta"][:, 21:] == 0)  # nothing of the earlier terminal loss is left
    np.testing.assert_array_equal(taped(sim, loss, kernel).gradient.actions, first.actions)


def test_copy_state_into_fields():
    """copy_state fills a field (batch axis, or one batch element) with a state of every step, and its gradient
    reaches tisim's backward pass: the same gradients as reading the packed array."""
    sim, loss = pendulum(), scalar_loss()
    angles = ti.field(ti.f64, shape=(B, T + 1), needs_grad=True)
    one = ti.field(ti.f64, shape=(T + 1,), needs_grad=True)

    @ti.kernel
    def from_fields():
        for b in range(B):
            loss[None] += (angles[b, T] - 1.0) ** 2
            if b == 1:  # batch element 1's angular velocity only
                loss[None] += 0.5 * (one[T] + 0.2) ** 2

    with ti.ad.Tape(loss=loss):
        run = record(sim)
        run.copy_state("theta", angles)
        run.copy_state("theta_dot", one, batch=1)
        from_fields()
    traj = sim.rollout()
    np.testing.assert_array_equal(angles.to_numpy(), traj["theta"])
    np.testing.assert_array_equal(one.to_numpy(), traj["theta_dot"][1])
    velocity = np.full((B, T + 1), np.nan)  # Tracking's unobserved entries: element 1's final velocity alone
    velocity[1, T] = -0.2
    want = sim.gradient(TerminalTarget({"theta": 1.0}) + Tracking({"theta_dot": velocity}, weights=0.5))
    assert run.gradient.value == pytest.approx(want.value, rel=1e-13)
    assert_same_gradient(run.gradient, want, adjoint=False)

    single = tisim.systems.Pendulum(horizon=T, theta=0.3)  # B = 1: a field with or without the batch axis
    with_axis = ti.field(ti.f64, shape=(1, T + 1), needs_grad=True)
    without = ti.field(ti.f64, shape=(T + 1,), needs_grad=True)

    @ti.kernel
    def both():
        for _ in range(1):
            loss[None] += with_axis[0, T] ** 2 + without[T] ** 2

    with ti.ad.Tape(loss=loss):
        run = record(single)
        run.copy_state("theta", with_axis)
        run.copy_state("theta", without)
        both()
    want = single.gradient(TerminalTarget({"theta": 0.0}, weights=2.0))
    assert_same_gradient(run.gradient, want, adjoint=False)


def test_vector_and_matrix_fields_on_a_soft_body():
    """MassSpring's positions (n, 2) copied into a vector field (T+1, n) and into a matrix field (T+1,) of n x 2:
    minus the mean final x by hand equals TerminalSum(mean_x_weights) through sim.gradient, bit for bit."""
    sim = MassSpring(horizon=40, robot=grid(4, 2))
    sim.set_actions(reference_actions(sim))
    n, loss = sim.sizes["n_particles"], scalar_loss()
    want = sim.gradient(TerminalSum(mean_x_weights(sim)))
    vectors = ti.Vector.field(2, ti.f64, shape=(sim.T + 1, n), needs_grad=True)
    matrices = ti.Matrix.field(n, 2, ti.f64, shape=(sim.T + 1,), needs_grad=True)

    @ti.kernel
    def from_vectors():
        for i in range(n):
            loss[None] += -vectors[sim.T, i][0] / n

    @ti.kernel
    def from_matrices():
        for i in ti.static(range(n)):
            loss[None] += -matrices[sim.T][i, 0] / n

    for field, kernel in ((vectors, from_vectors), (matrices, from_matrices)):
        with ti.ad.Tape(loss=loss):
            run = record(sim)
            run.copy_state("pos", field)
            kernel()
        assert run.gradient.value == pytest.approx(want.value, rel=1e-13)
        for name in want.params:
            np.testing.assert_allclose(run.gradient.params[name], want.params[name], rtol=1e-12, atol=1e-18)
        np.testing.assert_allclose(run.gradient.actions, want.actions, rtol=1e-12, atol=1e-18)
    positions = sim.rollout()["pos"][0]
    np.testing.assert_array_equal(vectors.to_numpy(), positions)
    np.testing.assert_array_equal(matrices.to_numpy(), positions)


def test_misuse_is_refused():
    """Outside a Tape, twice on one Tape, a field of the wrong horizon or batch, a field without gradients, the
    gradient read inside the Tape, something not a simulator: each a clear error."""
    sim, loss = pendulum(), scalar_loss()
    with pytest.raises(RuntimeError, match=r"inside `with ti.ad.Tape"):
        record(sim)
    with pytest.raises(TypeError, match="must be a tisim simulator"):
        with ti.ad.Tape(loss=loss):
            record(np.zeros(3))
    with ti.ad.Tape(loss=loss):
        run = record(sim)
        with pytest.raises(RuntimeError, match="already recorded on this Tape"):
            record(sim)
        with pytest.raises(RuntimeError, match="after the block"):
            _ = run.gradient
        short = ti.field(ti.f64, shape=(B, T), needs_grad=True)
        with pytest.raises(ValueError, match=r"horizon T = 60 has T \+ 1 = 61 states"):
            run.copy_state("theta", short)
        with pytest.raises(ValueError, match="pass batch= to copy one batch element"):
            run.copy_state("theta", ti.field(ti.f64, shape=(T + 1,), needs_grad=True))
        with pytest.raises(ValueError, match=r"batch must be an integer in \[0, 1\]"):
            run.copy_state("theta", ti.field(ti.f64, shape=(T + 1,), needs_grad=True), batch=2)
        with pytest.raises(ValueError, match="needs_grad=True"):
            run.copy_state("theta", ti.field(ti.f64, shape=(B, T + 1)))
        with pytest.raises(ValueError, match="unknown state name 'angle'"):
            run.copy_state("angle", short)
    assert run.gradient.params["l"].shape == (B,)
    with pytest.raises(RuntimeError, match="inside the ti.ad.Tape that recorded"):
        run.copy_state("theta", ti.field(ti.f64, shape=(B, T + 1), needs_grad=True))
    with pytest.raises(ValueError, match="record\\(sim, adjoint=True\\)"):
        _ = run.gradient.adjoint


def test_a_failing_rollout_keeps_its_error():
    """A rollout that turns non-finite raises NonFiniteError out of the Tape (the Tape's backward pass on exit adds
    no error of its own); the simulator records again once its inputs are finite."""
    sim, loss = pendulum(), scalar_loss()
    kernel = terminal_kernel(loss)
    actions = sim.actions
    sim.set_params(m=1e-300)
    sim.set_actions(np.full((B, T), 1e300))
    with pytest.raises(tisim.NonFiniteError, match="turned non-finite at step"):
        with ti.ad.Tape(loss=loss):
            record(sim)
            kernel(sim.x, 0, 1)
    sim.set_params(m=1.0)
    sim.set_actions(actions)
    assert_same_gradient(taped(sim, loss, kernel).gradient, sim.gradient(TERMINAL), adjoint=False)


@pytest.mark.skipif(not hasattr(Protocol, "passes"), reason="the engine does not count passes")
def test_another_pass_inside_the_tape_is_refused():
    """A pass on the recorded simulator between record and the Tape's end overwrites its trajectory: the backward
    pass refuses to run rather than hand out gradients of the wrong rollout."""
    sim, loss = pendulum(), scalar_loss()
    with pytest.raises(RuntimeError, match="ran another pass after this rollout was recorded"):
        with ti.ad.Tape(loss=loss):
            record(sim)
            sim.evaluate(TERMINAL)
