"""A policy inside a phased step (tisim.learn.policy on MassSpring): the policy acts once a step in a first phase,
the actions read its output from scratch, and a hand-written reverse carries the derivatives back through the
network, the normalization and the observation (centroids and clock included). Checked against the numpy law,
Taichi's reverse mode of every phase, float64 central differences, and the checkpointed mechanism."""
import numpy as np
import pytest
import taichi as ti

import tisim
from tisim.autodiff.gradient_check import gradcheck
from tisim.core.protocol import Protocol
from tisim.learn.policy import closed_loop, normalization
from tisim.systems.mass_spring import MassSpring
from tisim.systems.mass_spring.robots import grid
from tisim.systems.mpm import BAND, MPM, Body

T = 60
SHAPE = dict(hidden=(4,), limit=0.2, centred=("pos",), clock=(4.0, 1))


class TaichiReverse(MassSpring):
    """MassSpring's phases differentiated by Taichi's reverse mode (no hand-written reverses, no fused forms)."""
    REVERSES = {}
    FUSED = {}


Walker = closed_loop(MassSpring, **SHAPE)


class WalkerByTaichi(closed_loop(TaichiReverse, **SHAPE)):
    """The same closed loop computed another way: its policy phase evaluates the network as a plain step's closed
    loop does (unrolled, tisim.learn.policy's Policy.act), not by the phased form's loops over arrays, and Taichi's
    reverse mode differentiates it, where the phased form has a hand-written reverse."""
    REVERSES = {}
    FUSED = {}

    @ti.func
    def feedback(self, s: ti.template(), i):
        out = self.policy.act(s)
        for k in ti.static(range(self.n_applied)):
            s.assign("policy_action", k, out[k])
        s.advance("clock", 0, s.state("clock") + s.dt)


def walker(cls, batch=2, softness=0.003, seed=0):
    """A 3 x 2 grid body (every spring its own actuator) dropping onto the ground, its state randomized, the policy's
    normalization set off its defaults: every feature and every parameter group is felt."""
    rng = np.random.default_rng(seed)
    robot = grid(3, 2)
    sim = cls(horizon=T, batch=batch, robot=robot, seed=seed, softness=softness, kd=0.0, damping=0.5)
    n = len(robot.particles)
    sim.set_initial_state(pos=robot.particles + [0.0, 0.01] + rng.normal(0.0, 1e-3, (batch, n, 2)),
                          vel=rng.normal(0.0, 0.2, (batch, n, 2)))
    sim.set_params(obs_mean=rng.normal(0.0, 0.05, (batch, sim.sizes["n_observations"])),
                   obs_scale=rng.uniform(0.5, 2.0, (batch, sim.sizes["n_observations"])),
                   w_policy=sim.model.policy.network.initial_weights(seed, scale=2.0))
    sim.set_actions(rng.normal(0.0, 0.02, (batch, T, sim.action_layout.size)))
    w = rng.normal(size=(n, 2))
    return sim, tisim.losses.TerminalSum({"pos": w, "vel": 0.01 * w})


def test_the_loop_applies_the_numpy_law():
    """The closed-loop rollout, replayed open-loop with u plus the numpy law's actions for the states it visited,
    is the same trajectory: the policy phase computes the documented features (centroid, clock) and law."""
    sim, _ = walker(Walker)
    traj, p, policy = sim.rollout(), sim.params, sim.model.policy
    assert policy.n_observations == 4 * len(sim.robot.particles) + 2
    np.testing.assert_allclose(traj["clock"], np.broadcast_to(np.arange(T + 1) * sim.dt, (2, T + 1)), atol=1e-15)
    feedback = np.stack([policy.act_numpy(p["w_policy"][b], p["obs_mean"][b], p["obs_scale"][b],
                                          {k: v[b, :-1] for k, v in traj.items()}) for b in range(2)])
    assert np.abs(feedback).max() <= 0.2 and np.ptp(feedback) > 0.05  # the policy acts
    plain = MassSpring(horizon=T, batch=2, robot=sim.robot, softness=0.003, kd=0.0, damping=0.5,
                       pos=sim.initial_state["pos"], vel=sim.initial_state["vel"])
    plain.set_actions(sim.actions + feedback)
    replay = plain.rollout()
    for name in ("pos", "vel"):
        np.testing.assert_allclose(replay[name], traj[name], rtol=0, atol=1e-12)
    # a shifted body is observed the same (the centred positions)
    shifted = {k: v + (0.3 if k == "pos" else 0.0) for k, v in traj.items()}
    np.testing.assert_allclose(policy.features_numpy(shifted), policy.features_numpy(traj), atol=1e-12)


@pytest.mark.parametrize("softness", [0.0, 0.003])
def test_the_hand_written_reverse_is_taichis_reverse_mode(softness):
    """Every group's gradient through the hand-written reverses (the backward pass one launch) equals Taichi's
    reverse mode of every phase and of the unrolled network, to 1e-12 of the group's largest entry; and the two
    forward passes agree."""
    (ours, loss), (taichis, _) = walker(Walker, softness=softness), walker(WalkerByTaichi, softness=softness)
    a, b = ours.gradient(loss), taichis.gradient(loss)
    np.testing.assert_allclose(ours.rollout()["pos"], taichis.rollout()["pos"], rtol=0, atol=1e-13)
    for group in ("params", "initial_state"):
        for name, value in getattr(b, group).items():
            if value.size == 0:
                continue
            scale = np.abs(value).max(initial=0.0)
            np.testing.assert_allclose(getattr(a, group)[name], value, rtol=1e-12, atol=1e-12 * scale, err_msg=name)
    for name in ("w_policy", "obs_mean", "obs_scale"):
        assert np.abs(b.params[name]).max() > 1e-6, name  # the policy's parameters are felt
    np.testing.assert_allclose(a.actions, b.actions, rtol=1e-12, atol=1e-12 * np.abs(b.actions).max())


def test_gradients_against_central_differences():
    # h = 1e-6: the random policy makes the loss curve sharply (a central difference over 1e-3 m of one particle's
    # height gives -3 where the derivative is -88); Richardson's h and h/2 then agree with the backward pass
    sim, loss = walker(Walker, batch=1)
    report = gradcheck(sim, loss, step=1e-6, extrapolate=True, max_entries=30, groups=("params", "initial_state"))
    assert report.worst < 1e-5, str(report)


def test_checkpointed_equals_unrolled():
    sim, loss = walker(Walker)
    reference, other = sim.gradient(loss), sim.gradient(loss, method="checkpointed", segments=4)
    for name in ("w_policy", "obs_scale", "k", "rest"):
        scale = np.abs(reference.params[name]).max()
        np.testing.assert_allclose(other.params[name], reference.params[name], rtol=1e-10, atol=1e-12 * scale)
    np.testing.assert_allclose(other.actions, reference.actions, rtol=1e-10,
                               atol=1e-12 * np.abs(reference.actions).max())


def test_the_clock_is_a_state_that_windows_continue():
    """The clock is the state "clock", so a rollout started where another ended reads the time on: two windows of
    T / 2 steps, the second from the first's last state, are the rollout of T steps."""
    sim, _ = walker(Walker)
    whole = sim.rollout()
    half = Walker(horizon=T // 2, batch=2, robot=sim.robot, softness=0.003, kd=0.0, damping=0.5)
    half.set_params(**{k: sim.params[k] for k in ("w_policy", "obs_mean", "obs_scale")})
    half.set_initial_state(**sim.initial_state)
    half.set_actions(sim.actions[:, :T // 2])
    first = half.rollout()
    half.set_initial_state(**{k: v[:, -1] for k, v in first.items()})
    half.set_actions(sim.actions[:, T // 2:])
    second = half.rollout()
    for name in ("pos", "vel", "clock"):
        np.testing.assert_array_equal(second[name], whole[name][:, T // 2:])
    fitted = normalization(sim, whole)
    assert fitted["obs_mean"].shape == (sim.sizes["n_observations"],)


@pytest.mark.parametrize("keywords, message", [
    (dict(centred=("activation",)), "centred names tables of items"),
    (dict(centred=("pos",), angles=("pos",)), "both in angles and in centred"),
    (dict(clock=(0.0, 2)), "clock must be"),
    (dict(clock=(2.0, 0)), "clock must be"),
    (dict(clock=2.0), "clock must be"),
])
def test_bad_policy_shapes_are_refused(keywords, message):
    with pytest.raises(ValueError, match=message):
        closed_loop(MassSpring, **keywords)


def test_derived_sizes_are_not_keywords():
    with pytest.raises(ValueError, match="n_applied is not a keyword"):
        Walker(horizon=3, robot=grid(3, 2), n_applied=4)


def test_a_launch_per_step_equals_one_launch():
    """The schedule a GPU runs (a launch per phase and step, the policy's reverse launched on its own) gives the CPU's
    one-launch rollout and gradient."""
    (fused, loss), (stepped, _) = walker(Walker), walker(Walker)
    Protocol.of(stepped).per_step = True
    np.testing.assert_allclose(stepped.rollout()["pos"], fused.rollout()["pos"], rtol=0, atol=1e-13)
    a, b = fused.gradient(loss), stepped.gradient(loss)
    for name in ("w_policy", "obs_mean", "obs_scale", "k", "rest"):
        scale = np.abs(a.params[name]).max()
        np.testing.assert_allclose(b.params[name], a.params[name], rtol=1e-12, atol=1e-12 * scale, err_msg=name)
    np.testing.assert_allclose(b.initial_state["clock"], a.initial_state["clock"], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(b.actions, a.actions, rtol=1e-12, atol=1e-12 * np.abs(a.actions).max())


def test_an_mpm_body_closes_the_loop_too():
    """The same path on MPM (every phase with a hand-written reverse, recomputed scratch refilled in the backward
    pass): the closed-loop rollout is MPM's open-loop rollout of the numpy law's actions, and the largest entries of
    dL/dweights, dL/dE and dL/dclock[0] agree with Richardson central differences."""
    body = Body.load("walker", origin=[0.1, BAND / 24])
    Soft = closed_loop(MPM, hidden=(3,), limit=0.3, centred=("pos",), clock=(5.0, 1))
    sim = Soft(horizon=30, batch=2, body=body, n_grid=24, seed=1)
    sim.set_params(w_policy=sim.model.policy.network.initial_weights(1, scale=3.0))
    traj, p = sim.rollout(), sim.params
    actions = np.stack([sim.model.policy.act_numpy(p["w_policy"][b], p["obs_mean"][b], p["obs_scale"][b],
                                                   {k: v[b, :-1] for k, v in traj.items()}) for b in range(2)])
    assert np.ptp(actions) > 0.1
    plain = MPM(horizon=30, batch=2, body=body, n_grid=24)
    plain.set_actions(actions)
    replay = plain.rollout()
    for name in ("pos", "vel", "F", "C"):
        np.testing.assert_allclose(replay[name], traj[name], rtol=0, atol=1e-12, err_msg=name)

    loss = tisim.losses.TerminalSum({"pos": np.ones(traj["pos"].shape[2:])})
    g = sim.gradient(loss)

    def central(set_value, h):
        def at(delta):
            set_value(delta)
            return sim.evaluate(loss)
        d1, d2 = (at(h) - at(-h)) / (2 * h), (at(h / 2) - at(-h / 2)) / h
        set_value(0.0)
        return (4 * d2 - d1) / 3  # Richardson

    weights = sim.params["w_policy"].copy()
    for k in np.argsort(-np.abs(g.params["w_policy"][0]))[:4]:
        def shift(delta, k=k):
            w = weights.copy()
            w[:, k] += delta
            sim.set_params(w_policy=w)
        np.testing.assert_allclose(g.params["w_policy"][:, k], central(shift, 1e-4), rtol=1e-5, err_msg=f"w[{k}]")
    E = sim.params["E"].copy()
    np.testing.assert_allclose(g.params["E"].reshape(2),
                               central(lambda delta: sim.set_params(E=E + delta), 1e-3 * float(E.flat[0])), rtol=1e-5)
    clock = sim.initial_state["clock"].copy()
    assert np.abs(g.initial_state["clock"]).min() > 1e-6 and np.abs(g.params["E"]).min() > 0  # both felt
    np.testing.assert_allclose(g.initial_state["clock"].reshape(2),
                               central(lambda delta: sim.set_initial_state(clock=clock + delta), 1e-5), rtol=1e-5)


def test_a_rigid_body_closes_the_loop_with_qp_contact():
    """Rigid2D's step is phased with contact="qp" (the policy's phase comes first): two spinning discs, pushed and
    turned by a network, collide with friction and land. The closed-loop rollout is Rigid2D's open-loop rollout of
    the numpy law's actions, and the gradient agrees with Richardson float64 central differences (measured 1.9e-6).
    With penalty contact the step is plain and reads its action in a loop over the bodies, whose gradient Taichi
    gets wrong with the action from a network inside the step (errors of order 1 here): refused."""
    from tisim.systems import Rigid2D

    start = dict(horizon=150, batch=2, n_discs=2, contact="qp", mu=0.3, e=0.6, px=[[0.0, 0.25]] * 2,
                 py=[[0.3, 0.32], [0.3, 0.28]], vx=[[1.0, -0.5]] * 2, vy=[[-0.5, 0.0]] * 2, omega=[[3.0, 0.0]] * 2)
    Pushed = closed_loop(Rigid2D, hidden=(3,), limit=2.0)
    with pytest.raises(ValueError, match="closed_loop.Rigid2D.: with .*'contact': 'penalty'.* contact='qp'"):
        Pushed(**dict(start, contact="penalty"))
    sim = Pushed(seed=2, **start)
    sim.set_params(w_policy=sim.model.policy.network.initial_weights(2, scale=2.0))
    traj, p = sim.rollout(), sim.params
    actions = np.stack([sim.model.policy.act_numpy(p["w_policy"][b], p["obs_mean"][b], p["obs_scale"][b],
                                                   {k: v[b, :-1] for k, v in traj.items()}) for b in range(2)])
    assert np.ptp(actions) > 0.5
    plain = Rigid2D(**start)
    plain.set_actions(actions.reshape(plain.actions.shape))
    replay = plain.rollout()
    for name in traj:
        np.testing.assert_allclose(replay[name], traj[name], rtol=0, atol=1e-12, err_msg=name)
    distance = np.hypot(*(traj[q][..., 0] - traj[q][..., 1] for q in ("px", "py")))
    assert np.all(distance.min(axis=1) < 0.2 + 2e-3)  # they touched
    loss = tisim.losses.TerminalTarget({"px": [0.1, 0.4], "py": [0.2, 0.3], "omega": [0.0, 1.0]})
    report = gradcheck(sim, loss, groups=("params", "initial_state"), step=1e-6, extrapolate=True, max_entries=12)
    assert report.worst < 1e-5, str(report)
    assert np.abs(sim.gradient(loss).params["w_policy"]).max() > 1e-3
