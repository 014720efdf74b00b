"""MPM's gradients: against central differences, float32 against float64, every schedule against the others,
the hand-written reverses against Taichi's reverse mode, the fused forward pass against the per-pair one."""
import numpy as np
import pytest

import tisim
from tisim.systems.mpm import BAND, MPM, Body

from test_mpm import GRID, block, full_loss, spinning


@pytest.mark.parametrize("dim", [2, 3])
def test_gradients_match_central_differences(dim):
    """Every group against Richardson-extrapolated float64 central differences, on an actuated block. On 8 cells
    the block's stencils reach the walls' bands, whose laws switch where a node's velocity turns into a wall: in 3D
    one such switch lies within 1e-4 of an initial position, so the differences step 1e-5 (measured: dL/dpos[0, 0]
    17.7926408 by reverse mode and by differences of 1e-5 to 1e-7, 13.4 across the switch at 1e-4)."""
    n_grid = GRID
    body = Body.box([0.4] * dim, [0.6] * dim, 0.5 / n_grid)
    body.actuators[: len(body.particles) // 2] = 0
    sim = MPM(horizon=10, body=body, n_grid=n_grid, actuation=2000.0)
    spinning(sim, body)
    sim.set_actions(np.random.default_rng(1).normal(0.0, 0.5, (10, 1)))
    report = tisim.gradcheck(sim, full_loss(sim, body), step=1e-5, max_entries=10, extrapolate=True)
    assert report.worst <= 1e-6, str(report)


@pytest.mark.parametrize("options", [dict(material="corotated"), dict(material="fluid"), dict(floor="friction"),
                                     dict(walls="friction"), dict(material="von_mises", yield_stress=0.05)],
                         ids=["corotated", "fluid", "friction", "walls", "von_mises"])
def test_gradients_of_every_material_and_floor(options):
    """The other materials, the friction floor and Coulomb side walls against central differences, in 2D, on an
    actuated block that lands on the floor while sliding (so the floor acts, and friction has a gradient) and reaches
    the right wall's band; the von Mises block yields everywhere from the first step (a 0.05 Pa yield stress), so the
    return mapping's derivative is the one checked."""
    body = Body.box([0.4, BAND / GRID], [0.6, BAND / GRID + 0.2], 0.5 / GRID)
    body.actuators[: len(body.particles) // 2] = 0
    sim = MPM(horizon=10, body=body, n_grid=GRID, actuation=2000.0, mu=0.3, **options)
    spinning(sim, body)
    sim.set_initial_state(vel=sim.initial_state["vel"][0] + [0.5, -0.5])
    sim.set_actions(np.random.default_rng(1).normal(0.0, 0.5, (10, 1)))
    loss = full_loss(sim, body)
    plastic = options.get("material") == "von_mises"
    # the plastic block's loss carries round-off of about 1e-14 of itself (moving when the order of a sum moves), and
    # the yield stress moves it little: a relative step of 1e-4 gave differences noisy at 1e-6, 1e-3 at 2e-7
    report = tisim.gradcheck(sim, loss, step=1e-3 if plastic else 1e-4, max_entries=10, extrapolate=True,
                             groups=("params",) if plastic else ("params", "initial_state", "actions"))
    assert report.worst <= 1e-6, str(report)
    if plastic:
        # the return mapping scales dev V by limit / |dev V|, with |dev V| ~ 1e-4 here and curved on that scale: the
        # states and actions take a smaller step (too small for the yield stress, whose differences round off)
        report = tisim.gradcheck(sim, loss, step=1e-6, max_entries=10, extrapolate=True,
                                 groups=("initial_state", "actions"))
        assert report.worst <= 1e-6, str(report)
    if "floor" in options or "walls" in options:  # the friction acts (with sticky floor, mu is the walls' alone)
        assert abs(sim.gradient(loss).params["mu"][0]) > 1e-6


@pytest.mark.parametrize("material", ["neo_hookean", pytest.param("corotated", marks=pytest.mark.stress)])
def test_float32_gradients_match_float64(material):
    """The same gradient in float32 as in float64, to float32's rounding grown over 10 steps: Taichi's float32
    reverse kernels are compiled apart and were once wrong where float64 was right (mpm.py's note on warnings).
    The wrong one was in the gather, which every material shares; von Mises clay (corotated elasticity and a return
    onto its yield surface) is left out for its 50 s of float32 compilation."""
    def gradient():
        body = Body.box([0.4, 0.4], [0.6, 0.6], 0.5 / GRID, actuator=0)
        sim = MPM(horizon=10, body=body, n_grid=GRID, material=material, yield_stress=50.0, actuation=2000.0)
        spinning(sim, body)
        sim.set_actions(np.random.default_rng(1).normal(0.0, 0.5, (10, 1)))
        return flat(sim.gradient(full_loss(sim, body)))
    exact = gradient()
    tisim.init(precision="f32", deterministic=True)  # the next test's fixture restores the runtime
    rounded = gradient()
    assert np.abs(rounded - exact).max() <= 1e-3 * np.abs(exact).max()


@pytest.mark.parametrize("dim", [2, 3])
def test_float32_positions_keep_a_slow_motion(dim):
    """A block gliding at 1 mm/s without gravity, in float32: each point moves as float32's own x + dt v would move
    it with the velocities the simulation gives (a few units in the last place at most over 200 steps). Adding x_p
    before the 3^d increments of dt v (each ~1e-8, against x_p's last place of 6e-8) lost 200 (2D) and 400 (3D)
    units in the last place, 15% of the motion in 3D."""
    tisim.init(precision="f32", deterministic=True)  # the next test's fixture restores the runtime
    body = Body.box([0.4] * dim, [0.6] * dim, 0.5 / 32)
    sim = MPM(horizon=200, body=body, n_grid=32, g=0.0)
    vel = np.zeros((len(body.particles), dim))
    vel[:, 0] = 1e-3
    sim.set_initial_state(vel=vel)
    traj = sim.rollout()
    x, v, dt = traj["pos"][0].astype(np.float32), traj["vel"][0].astype(np.float32), np.float32(sim.dt)
    assert np.abs(v[:, :, 0] - 1e-3).max() < 1e-7  # the glide stays a glide
    reference = x[0]
    for t in range(sim.T):
        reference = reference + dt * v[t]  # float32 arithmetic throughout
    assert reference.dtype == np.float32
    assert np.abs(x[-1] - reference).max() <= 4 * np.spacing(np.float32(0.5))


def flat(g):
    return np.concatenate([np.ravel(v) for v in g.params.values()] + [np.ravel(v) for v in g.initial_state.values()]
                          + [g.actions.ravel()])


def test_every_schedule_gives_the_same_gradients():
    """Fused forward pass, a launch per step, and checkpointed: the same gradients to 1e-12."""
    results = []
    for per_step, method in ((False, "unrolled"), (True, "unrolled"), (False, "checkpointed")):
        sim, body = block(2)
        sim._per_step = per_step
        spinning(sim, body)
        g = sim.gradient(full_loss(sim, body), method=method)
        results.append(np.concatenate([np.ravel(v) for v in g.params.values()]
                                      + [np.ravel(v) for v in g.initial_state.values()] + [g.actions.ravel()]))
    for other in results[1:]:
        np.testing.assert_allclose(other, results[0], rtol=1e-12, atol=1e-12 * np.abs(results[0]).max())


class TaichiReverse(MPM):
    """MPM with Taichi's reverse mode of its four phases (scatter and gather per pair) in place of the hand-written
    reverses."""
    REVERSES = {}


# Taichi's reverse of the 3D and von Mises phases takes minutes to compile, and each other law's seconds; every
# law's hand-written reverse is checked against central differences in every make test (above), and against Taichi's
# reverse mode by make stress, but for the plain 2D body's, which make test compares too
@pytest.mark.parametrize("dim, options", [
    (2, {}), pytest.param(3, {}, marks=pytest.mark.stress),
    pytest.param(2, dict(floor="friction", walls="friction"), marks=pytest.mark.stress),
    pytest.param(2, dict(material="fluid"), marks=pytest.mark.stress),
    pytest.param(2, dict(material="von_mises", yield_stress=0.05), marks=pytest.mark.stress)],
    ids=["2d", "3d", "friction", "fluid", "von_mises"])
def test_the_hand_written_reverses_are_taichis_reverse_mode(dim, options):
    """The backward pass runs every phase's hand-written reverse (scatter's and gather's with a point's cells
    unrolled, the materials' through the same Newton steps of the polar decomposition); Taichi's reverse mode of the
    phases gives the same gradients, in every group, to 1e-12 in float64: on a spinning, actuated, damped block that
    slides onto the floor and into the side wall's band, with a target on every state. The von Mises block, which
    yields everywhere from the first step, has corotated elasticity, so it checks that law's reverse too; the
    sticky floor of the first two is the law of sticky walls on another axis (each case compiles Taichi's reverse
    of the phases afresh, 15-65 s)."""
    gradients = []
    for cls in (MPM, TaichiReverse):
        body = Body.box([0.35] + [BAND / GRID] * (dim - 1), [0.65] + [BAND / GRID + 0.3] * (dim - 1), 0.5 / GRID)
        body.actuators[: len(body.particles) // 2] = 0
        sim = cls(horizon=10, body=body, n_grid=GRID, actuation=2000.0, drag=0.5, mu=0.3, **options)
        spinning(sim, body)
        sim.set_initial_state(vel=sim.initial_state["vel"][0] + np.array([0.5, -0.5, 0.0])[:dim])
        sim.set_actions(np.random.default_rng(1).normal(0.0, 0.5, (10, 1)))
        gradients.append(sim.gradient(full_loss(sim, body)))
    ours, taichis = gradients
    # the parameters as relative sensitivities theta dL/dtheta, on one scale: dL/drho sums terms that cancel to 1e-3
    # of themselves, and the two orders of summation leave 1e-12 of it in 3D
    values = sim.params
    sensitivity = {name: values[name] * g for name, g in taichis.params.items()}
    scale = max(np.abs(v).max() for v in sensitivity.values())
    unused = (set() if options.get("material") == "von_mises" else {"yield_stress"}) \
        | (set() if "friction" in options.values() else {"mu"})  # parameters the block's motion cannot depend on
    for name, g in ours.params.items():
        assert np.abs(sensitivity[name]).max() > 0 or name in unused, name
        np.testing.assert_allclose(values[name] * g, sensitivity[name], rtol=1e-12, atol=1e-12 * scale, err_msg=name)
    for name, value in taichis.initial_state.items():
        np.testing.assert_allclose(ours.initial_state[name], value, rtol=1e-12, atol=1e-12 * np.abs(value).max(),
                                   err_msg=name)
    np.testing.assert_allclose(ours.actions, taichis.actions, rtol=1e-12, atol=1e-12 * np.abs(taichis.actions).max())
    assert abs(taichis.params["drag"][0]) > 0


@pytest.mark.parametrize("dim", [2, 3])
def test_the_stencil_contraction_is_the_sum_over_cells(dim):
    """The reverses' axis-by-axis contraction, on plain numbers, against the sums over the cells written out: each
    cell's value times its weight (the product of one factor an axis) and times its derivative along each axis
    (that axis's factor replaced by its slope)."""
    from tisim.systems.mpm.transfers import stencil_contraction
    rng = np.random.default_rng(dim)
    values, weights, slopes = rng.normal(size=3 ** dim), rng.normal(size=(dim, 3)), rng.normal(size=(dim, 3))
    total, gradient = stencil_contraction(list(values), weights.tolist(), slopes.tolist())
    digits = [[(o // 3 ** j) % 3 for j in range(dim)] for o in range(3 ** dim)]
    def summed(k):  # k: the axis whose slope replaces its weight, None for the weight itself
        return sum(v * np.prod([(slopes if j == k else weights)[j][d[j]] for j in range(dim)])
                   for v, d in zip(values, digits))
    assert total == pytest.approx(summed(None), rel=1e-12, abs=1e-14)
    assert gradient == pytest.approx([summed(k) for k in range(dim)], rel=1e-12, abs=1e-14)


@pytest.mark.parametrize("dim", [2, 3])
def test_the_fused_forward_takes_the_same_steps_to_rounding(dim):
    """The fused forward pass scatters and gathers per point with its 3^d cells unrolled and its sums regrouped,
    and skips the empty cells of the grid; the per-step schedule (a GPU's) goes per (point, cell) pair and every
    cell: the same trajectory to rounding (float64)."""
    trajectories = []
    for per_step in (False, True):
        sim, body = block(dim, horizon=20)
        sim._per_step = per_step
        spinning(sim, body)
        trajectories.append(sim.rollout())
    for name, fused in trajectories[0].items():
        assert np.abs(fused[:, -1] - fused[:, 0]).max() > 1e-4, name  # every state moved
        per_pair = trajectories[1][name]
        np.testing.assert_allclose(fused, per_pair, rtol=1e-12, atol=1e-12 * np.abs(per_pair).max(), err_msg=name)
