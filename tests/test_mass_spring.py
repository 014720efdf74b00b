"""The mass-spring body: robot files, the reference workload, physics and gradients."""
import dataclasses
import json

import numpy as np
import pytest
import taichi as ti

import tisim
from tisim.core.quantities import Scratch
from tisim.robots import Robot, grid
from tisim.systems.mass_spring import MassSpring, mean_x_weights, reference_actions

from itemwise_mass_spring import ItemwiseMassSpring


def test_reference_grid_sizes():
    """The reference grids have the particle and spring counts of the reference workload (benchmarks/README.md):
    256 / 906 and 2048 / 7906."""
    for (nx, ny), (n, s) in {(32, 8): (256, 906), (32, 64): (2048, 7906)}.items():
        robot = grid(nx, ny)
        assert (len(robot.particles), len(robot.springs)) == (n, s)
        np.testing.assert_allclose(robot.particles[0], [0.0, 0.002])
        assert len(robot.actuators) == s


@pytest.mark.parametrize("name", ["biped", "quadruped", "worm", "quadruped3d"])
def test_robot_files_load(name):
    """Each robot in assets/robots loads, has actuators, and every particle has a spring."""
    robot = Robot.load(name)
    assert robot.name == name and robot.actuators and robot.incidence()[0].shape[0] == len(robot.particles)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.pop("springs"), "missing field 'springs'"),
    (lambda d: d.update(springs=[[0, 99]]), r"springs\[0\] = \[0, 99\] must join two different particles"),
    (lambda d: d.update(particles=[[0, 0], [0, "a"]]), "robot file"),
    (lambda d: d.update(actuators=[[0], [0]]), r"spring 0 is in actuators\[0\] and actuators\[1\]"),
    (lambda d: d.update(actuators=[[500]]), r"actuators\[0\] names spring 500"),
    (lambda d: d.update(legs=[]), r"unknown fields \['legs'\]"),
])
def test_malformed_robot_file_names_the_field(tmp_path, edit, message):
    """A malformed robot file fails with an error naming the field at fault."""
    data = json.loads(Robot.load("worm").to_json())
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message):
        Robot.load(path)
    with pytest.raises(FileNotFoundError, match="robot files in assets/robots"):
        Robot.load("no_such_robot")
    with pytest.raises(ValueError, match="cannot be read"):
        Robot.load(tmp_path)  # a folder
    with pytest.raises(TypeError, match="MassSpring: robot must be a Robot, a robot name or a JSON file path"):
        MassSpring(horizon=2, robot=1.5)


def numpy_reference(robot, T, dt, actions, k=1000.0, c=2.0, kc=5000.0, kd=20.0, mu=0.6, eps=0.05, m=0.01, g=9.8):
    """The reference mass-spring workload (benchmarks/README.md), written apart from the code with numpy loops over
    springs."""
    x, v = robot.particles.copy(), np.zeros_like(robot.particles)
    rest, owner = robot.rest_lengths(), robot.actuator_of_spring()
    for t in range(T):
        f = np.zeros_like(x)
        f[:, 1] -= m * g
        for s, (i, j) in enumerate(robot.springs):
            d = x[j] - x[i]
            r = np.linalg.norm(d)
            n = d / r
            L = rest[s] * (1 + (actions[t, owner[s]] if owner[s] >= 0 else 0.0))
            fs = (k * (r - L) + c * (v[j] - v[i]) @ n) * n
            f[i] += fs
            f[j] -= fs
        p = np.maximum(0.0, -x[:, 1])
        fn = np.where(p > 0, kc * p - kd * np.minimum(v[:, 1], 0.0), 0.0)
        f[:, 0] += -mu * fn * np.tanh(v[:, 0] / eps)
        f[:, 1] += fn
        v = v + dt * f / m
        x = x + dt * v
    return x


def test_matches_an_independent_reference():
    """A small robot walks the same path as a numpy loop over springs of the reference equations (1e-10)."""
    robot = Robot.load("worm")
    sim = MassSpring(horizon=300, robot=robot)
    actions = reference_actions(sim)
    sim.set_actions(actions)
    final = sim.rollout()["pos"][0, -1]
    np.testing.assert_allclose(final, numpy_reference(robot, 300, sim.dt, actions), rtol=0, atol=1e-10)


def test_free_body_conserves_momentum_and_rests_on_the_ground():
    """Without gravity and ground the springs conserve linear momentum; with them a body comes to rest on the floor."""
    free = MassSpring(horizon=400, robot=grid(4, 3), g=0.0, kc=0.0, kd=0.0, mu=0.0)
    free.set_initial_state(vel=np.random.default_rng(0).normal(scale=0.1, size=(12, 2)))
    free.set_actions(reference_actions(free))
    vel = free.rollout()["vel"][0]
    momentum = vel.sum(axis=1)
    np.testing.assert_allclose(momentum, np.broadcast_to(momentum[0], momentum.shape), atol=1e-12)
    resting = MassSpring(horizon=4000, robot=grid(4, 3))
    traj = resting.rollout()
    assert np.abs(traj["vel"][0, -1]).max() < 1e-3
    depth = -traj["pos"][0, -1000:, :, 1].min()
    weight_per_contact = 12 * 0.01 * 9.8 / 4  # four bottom particles carry the body
    assert 0 < depth < 3 * weight_per_contact / 5000  # penetration of the order of the static spring deflection


@pytest.mark.parametrize("system", [ItemwiseMassSpring, MassSpring], ids=["items", "phased"])
@pytest.mark.parametrize("group", ["params", "initial_state", "actions"])
def test_gradients_without_contact(group, system):
    """Off the ground (no contact switch), every gradient group matches float64 central differences to 1e-5.

    Measured worst: 1e-9 (initial state), 4e-6 (k, whose entries are 1e-7 of the loss), 3e-6 (an action entry of
    1e-6); Richardson-extrapolated differences at two steps agree with the backward pass to 1e-9 on the large
    entries, so the rest is the differences' own noise on small entries."""
    sim = system(horizon=40, robot=grid(3, 2))
    sim.set_initial_state(pos=grid(3, 2).particles * 1.05 + [0.0, 0.5])  # half a metre up: no contact in 20 ms
    sim.set_actions(reference_actions(sim))
    loss = tisim.losses.TerminalSum(mean_x_weights(sim)) + tisim.losses.TerminalTarget({"pos": grid(3, 2).particles})
    # stiff springs: Richardson-extrapolated differences (one plain h is either truncation- or round-off-limited)
    report = tisim.gradcheck(sim, loss, groups=(group,), step=1e-4, max_entries=12, extrapolate=True)
    assert report.worst <= 1e-5, str(report)


@pytest.mark.parametrize("system", [ItemwiseMassSpring, MassSpring], ids=["items", "phased"])
def test_gradients_through_ground_contact(system):
    """Through ground contact the backward pass matches central differences to a documented 1e-3 (piecewise law:
    a difference whose stencil straddles a contact switch measures a mixture of two pieces)."""
    sim = system(horizon=60, robot=Robot.load("worm"))
    sim.set_actions(reference_actions(sim))
    report = tisim.gradcheck(sim, tisim.losses.TerminalSum(mean_x_weights(sim)), step=1e-6, max_entries=8)
    assert report.worst <= 1e-3, str(report)


class RecomputedSprings(MassSpring):
    """MassSpring with its spring forces recomputed in the backward pass instead of kept per step."""

    SCRATCH = tuple(dataclasses.replace(q, keep=False) for q in MassSpring.SCRATCH)


class MixedScratch(MassSpring):
    """MassSpring with a recomputed scratch beside its kept spring forces, and a kept scratch added into, declared
    first, that the layout puts before the assigned spring forces (nothing writes either): the one-launch backward
    pass then zeroes and refills each step's scratch, kept row included, before the reverses run."""

    SCRATCH = ((Scratch("tally", "-", "unused", shape=("n_particles",)),) + MassSpring.SCRATCH
               + (Scratch("spare", "-", "unused", shape=("n_particles",), keep=False),))


class UnassignedSpring(MassSpring):
    """The fused forward pass with the particles gathering the spring forces, and spring 0's force never assigned:
    its entry keeps whatever it held."""

    @ti.func
    def springs_fused(self, s: ti.template(), spring):
        if spring > 0:
            i, j = self.end[spring, 0], self.end[spring, 1]
            s.assign("spring_force", spring, self.spring_force(s, spring, i, j))

    @ti.func
    def particles_fused(self, s: ti.template(), i):
        self.move(s, i, self.load(s, i), True)


class UnsetParticle(MassSpring):
    """The fused particle phase never sets particle 3's next state."""

    @ti.func
    def particles_fused(self, s: ti.template(), i):
        if i != 3:
            self.move(s, i, self.load(s, i), True)


class AssignsAddedScratch(MassSpring):
    SCRATCH = tuple(dataclasses.replace(q, assigned=False) for q in MassSpring.SCRATCH)


def schedule_results(make, per_step):
    """Loss, trajectory and gradients (every group, unrolled and checkpointed, with a Custom term) of one schedule."""
    robot = Robot.load("worm")
    target = robot.particles + [0.1, 0.0]
    y0 = MassSpring(horizon=1, robot=robot).index("pos") + 1  # the first particle's height

    @ti.func
    def height(x: ti.template(), theta: ti.template(), u: ti.template(), b, t):
        return x[b, t, y0] ** 2

    sim = make(horizon=60, robot=robot)
    sim._per_step = per_step  # the GPU's schedule, on the CPU
    sim.set_actions(reference_actions(sim))
    loss = (tisim.losses.TerminalSum(mean_x_weights(sim)) + tisim.losses.TerminalTarget({"pos": target})
            + tisim.losses.Custom(height, steps=[30, 60]))
    plain = tisim.losses.TerminalSum(mean_x_weights(sim))
    g = sim.gradient(loss)
    c = sim.gradient(plain, method="checkpointed", segments=4)
    e = sim.evaluate(plain)  # the one-kernel forward pass (fused phases on the phased schedule)
    after = sim.gradient(plain)
    return dict(value=g.value, evaluate=e, traj=sim.rollout()["pos"], adjoint=g.adjoint["vel"],
                **{f"g.{k}": v for k, v in g.params.items()}, actions=g.actions, x0=g.initial_state["pos"],
                c_actions=c.actions, c_k=c.params["k"], after_evaluate=after.actions)


@pytest.mark.parametrize("make, per_step", [
    (MassSpring, False),
    (MassSpring, True),
    (RecomputedSprings, False),
    (RecomputedSprings, True),
    (MixedScratch, False),
], ids=["phased", "phased-per-step", "phased-recomputed", "phased-recomputed-per-step",
        "phased-kept-and-recomputed"])
def test_every_schedule_gives_the_same_gradients(make, per_step):
    """Every schedule gives the item-wise referee's (tests/itemwise_mass_spring.py) loss, trajectory and gradients in
    every group, unrolled and checkpointed, with a Custom loss term too, to 1e-12: the phased step (each spring once,
    into scratch) with its forward and backward passes fused or a launch per
    step (a GPU's), and the phased step with its scratch recomputed in the backward pass instead of kept. The item-wise
    gradients are Taichi's reverse mode, the phased ones the hand-written reverses; the backward passes may sum in
    other orders."""
    reference = schedule_results(ItemwiseMassSpring, False)
    results = schedule_results(make, per_step)
    for key in reference:
        np.testing.assert_allclose(results[key], reference[key], rtol=1e-12,
                                   atol=1e-12 * np.abs(reference[key]).max(initial=0.0), err_msg=key)
    assert np.abs(reference["actions"]).max() > 0 and np.abs(reference["c_k"]).max() > 0


def test_the_one_launch_backward_pass_leaves_kept_scratch_as_the_forward_pass_wrote_it():
    """Refilling a step's recomputed scratch reruns the phases that also write its kept row: that row is zeroed
    first, so a reverse that reads it reads the forward pass's values, not twice them."""
    sim = MixedScratch(horizon=20, robot="worm")
    sim.set_actions(reference_actions(sim))
    loss = tisim.losses.TerminalSum(mean_x_weights(sim))
    sim.evaluate(loss)
    forward = sim._scratch(sim.T).to_numpy()
    sim.gradient(loss)
    after = sim._scratch(sim.T).to_numpy()
    kept = slice(sim.scratch_layout.recomputed.size, None)
    assert np.abs(forward[:, kept]).max() > 0
    np.testing.assert_array_equal(after[:, kept], forward[:, kept])


def test_the_kept_scratch_layout_puts_assigned_entries_after_those_added_into():
    layout = MixedScratch(horizon=2, robot="worm").scratch_layout
    sizes = MassSpring(horizon=1, robot="worm").sizes
    n = sizes["n_particles"]
    assert layout.kept.offsets == {"tally": 0, "spring_load": n, "ball_load": 3 * n, "spring_force": 3 * n}  # no balls
    assert layout.zeroed == (n, 3 * n) and layout.assigned == {"spring_force"}  # spare; tally and spring_load
    assert layout.kept.size == 3 * n + 2 * sizes["n_springs"]


@pytest.mark.parametrize("cls", [UnassignedSpring, UnsetParticle])
def test_debug_mode_finds_an_entry_the_fused_forward_pass_leaves_unwritten(cls):
    """The fused forward pass does not zero assigned scratch or the next state that the last phase's fused form
    sets, so an entry a phase forgets would keep a stale value. In debug mode they are filled with NaN first: the
    rollout stops at the first step, named."""
    tisim.init(precision="f64", deterministic=True, debug=True)  # the next test's fixture restores the runtime
    good = MassSpring(horizon=5, robot="worm")
    good.evaluate(tisim.losses.TerminalSum(mean_x_weights(good)))
    sim = cls(horizon=5, robot="worm")
    with pytest.raises(tisim.NonFiniteError, match="non-finite at step 1 of 5"):
        sim.evaluate(tisim.losses.TerminalSum(mean_x_weights(sim)))


def test_assign_is_refused_for_scratch_that_is_added_into():
    sim = AssignsAddedScratch(horizon=3, robot="worm")
    with pytest.raises(Exception, match="assign: scratch 'spring_force' is added into"):
        sim.evaluate(tisim.losses.TerminalSum(mean_x_weights(sim)))


def test_recomputed_scratch_does_not_grow_with_the_horizon():
    """Kept scratch holds a row per step; recomputed scratch one step's worth, whatever the horizon."""
    widths = {}
    for cls in (MassSpring, RecomputedSprings):
        for T in (10, 40):
            sim = cls(horizon=T, robot="worm")
            sim.gradient(tisim.losses.TerminalSum(mean_x_weights(sim)))
            widths[cls.__name__, T] = sim._scratch(T).shape[1]
    sizes = MassSpring(horizon=1, robot="worm").sizes
    step = 2 * sizes["n_springs"] + 2 * sizes["n_particles"]  # spring forces and spring loads
    assert widths["MassSpring", 10] == 10 * step and widths["MassSpring", 40] == 40 * step
    assert widths["RecomputedSprings", 10] == widths["RecomputedSprings", 40] == step


def test_the_step_is_three_phases_with_hand_written_reverses():
    """MassSpring's step is its springs, its particles, then its free balls (none here), each with a hand-written
    reverse, so that on a CPU the backward pass is one launch; a keyword for another form of the step is refused
    by name."""
    sim = MassSpring(horizon=2, robot="worm")
    assert [(p.name, p.kind, p.size) for p in sim.model.phases] == [
        ("springs", "reverse", sim.sizes["n_springs"]), ("particles", "reverse", sim.sizes["n_particles"]),
        ("balls", "reverse", 0)]
    assert sim.model.fused_reverse
    with pytest.raises(ValueError, match="unknown keyword 'schedule'"):
        MassSpring(horizon=2, robot="worm", schedule="items")


class EarlierReverseNames(MassSpring):
    REVERSES = {}
    ADJOINTS = MassSpring.REVERSES


def test_reverses_declared_under_their_earlier_name_warn_and_still_run():
    """ADJOINTS, the earlier name of REVERSES, warns and still gives the phases their hand-written reverses."""
    with pytest.warns(DeprecationWarning, match="ADJOINTS is now REVERSES"):
        sim = EarlierReverseNames(horizon=2, robot="worm")
    assert [p.kind for p in sim.model.phases] == ["reverse"] * 3 and sim.model.fused_reverse


@pytest.mark.parametrize("ratio, expected", [(0.5, 0.5), (1.0, 0.0), (2.0, -1.0)])
def test_ground_damping_step_limit(ratio, expected):
    """A particle pressing into the ground (no gravity, no contact spring) keeps (1 - dt kd / m) of its normal
    velocity per step: stopped at dt kd / m = 1, reversed at 2, the limit mass_spring.py's docstring names."""
    robot = Robot("pair", [[0.0, -1e-3], [0.05, -1e-3]], [[0, 1]])
    sim = MassSpring(horizon=1, dt=1e-3, robot=robot, g=0.0, kc=0.0, kd=ratio * 0.01 / 1e-3, m=0.01, mu=0.0,
                     vel=np.array([[0.0, -0.2], [0.0, -0.2]]))
    vy = sim.rollout()["vel"][0, 1, :, 1]
    np.testing.assert_allclose(vy, expected * -0.2, rtol=1e-12, atol=1e-15)
