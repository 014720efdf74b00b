"""Training a closed-loop policy through the simulator (tisim.tasks.train_policy) on the cart-pole swing-up of
demos/policy_swingup.py: the outcome over seeds and under last-bit perturbations, and the loop's refusals."""
import numpy as np
import pytest

import tisim
from tisim.optim.policy_training import train_policy_and_model
from tisim.tasks import train_policy

from conftest import load_demo

demo = load_demo("policy_swingup")
SEEDS, ITERATIONS = (0, 1, 2), 800


@pytest.fixture(scope="module")
def untrained():
    evaluation = demo.Evaluation()
    return [evaluation(demo.Swing(horizon=1, seed=seed).params["w_policy"][0]) for seed in SEEDS]


@pytest.mark.perturbed
def test_the_swing_up_is_learned_over_seeds_and_holds_a_heavier_pushed_pole(untrained, last_bits):
    # measured: every seed balances at least 94% of the 32 evaluation episodes after 800 iterations (1M environment
    # steps), return about -900 from -2000 to -3500 untrained, and keeps a 20% heavier pole up through the push where
    # its own forces replayed open-loop let it fall; the assertions leave room for a seed to fail
    evaluation = demo.Evaluation()
    weights = [demo.train(seed, "apg", ITERATIONS, evaluation, every=ITERATIONS)[0] for seed in SEEDS]
    finals = [evaluation(w) for w in weights]
    shares = np.array([share for _, share, _ in finals])
    returns = np.array([value for value, _, _ in finals])
    assert np.sum(shares >= 0.8) >= 2, shares
    assert np.median(returns) > -1100, returns
    assert np.all(returns > np.array([value for value, _, _ in untrained])), returns
    held = []
    for w in weights:
        pushed = demo.robustness(w, demo.open_loop_plan(w))["heavier_pushed"]
        held.append(pushed["policy_balanced"] >= 0.8 and not pushed["plan_balanced"])
    assert sum(held) >= 2, held


def test_the_policys_forces_replayed_open_loop_give_its_motion():
    # the comparison's premise: on the nominal pole the replay is the closed loop's motion, to rounding
    weights = demo.Swing(horizon=1, seed=3).params["w_policy"][0]
    forces = demo.open_loop_plan(weights)
    loop = demo.Swing(horizon=demo.EPISODE, dt=demo.DT, theta=np.pi, w_policy=weights)
    loop.set_params(obs_scale=demo.SCALE)
    np.testing.assert_allclose(demo.replay_open_loop(forces)["theta"], loop.rollout()["theta"], rtol=0, atol=1e-9)


@pytest.mark.stress
@pytest.mark.perturbed
def test_shac_learns_the_swing_up_with_half_the_window(last_bits):
    # measured (exact inputs): seeds 0, 1 and 3 balance every evaluation episode after 1000 iterations of windows of
    # 40 steps, returns -701, -596 and -699; seed 2 does not (-1486). Analytic policy gradients without the critic
    # did not learn with windows of 40 (seed 0, 2000 iterations)
    evaluation = demo.Evaluation()
    finals = [evaluation(demo.train(seed, "shac", None, evaluation, every=1000)[0]) for seed in range(4)]
    shares = np.array([share for _, share, _ in finals])
    assert np.sum(shares >= 0.8) >= 2, shares


# measured (exact inputs, seeds 0 to 4): SHAC's returns -629, -819, -1140, -721, -742 become
#   refined: -561, -551, -555, -554, -554, every episode balanced, after 1500 iterations of whole episodes in 8
#            environments (2,880,000 environment steps);
#   lbfgs:   -562, -819, -651, -548, -547 after 40 iterations on 16 fixed episodes (about 360,000 steps); under the
#            two perturbations SHAC's returns move by up to 150 and the refined medians are -560 and -557. Seed 1
#            exact fails: its 16 episodes' cost fell by 120 while its evaluation return did not move.
# The assertions leave room for a seed to fail: (seeds, at least this many gain 20, at least this many end with 90%
# of the evaluation episodes balanced)
SECOND_STAGES = {"refined": (3, 2, 2), "lbfgs": (5, 4, 3)}


@pytest.mark.stress
@pytest.mark.perturbed
@pytest.mark.parametrize("method", list(SECOND_STAGES))
def test_a_second_stage_refines_shacs_policies(method, last_bits):
    seeds, gaining, balancing = SECOND_STAGES[method]
    evaluation = demo.Evaluation()
    runs = [demo.train(seed, method, None, evaluation, every=1000)[1] for seed in range(seeds)]
    before = np.array([run["return"][run["refined_from"]] for run in runs])
    after = np.array([run["return"][-1] for run in runs])
    assert np.sum(after > before + 20) >= gaining, (before, after)
    assert np.median(after) > -580, after
    assert np.sum(np.array([run["balanced"][-1] for run in runs]) >= 0.9) >= balancing, runs
    if method == "lbfgs":  # every rollout of the 16 fixed episodes counted, about 2.3 an iteration
        spent = np.array([run["steps"][-1] - run["steps"][run["refined_from"]] for run in runs])
        assert np.all(spent % (16 * demo.EPISODE) == 0) and np.all(spent <= 4 * 41 * 16 * demo.EPISODE), spent


def joint_fit(seed, iterations):
    """The policy trained on a model (pole 0.1 kg, cart friction 0.01) whose pole mass and friction are fitted, in the
    same loop, to windows recorded on a plant with a 0.13 kg pole and friction 0.05."""
    model = demo.Swing(horizon=80, batch=16, dt=demo.DT, seed=seed, m_pole=0.1, mu_cart=0.01)
    plant = demo.Swing(horizon=80, batch=16, dt=demo.DT, m_pole=0.13, mu_cart=0.05)
    for sim in (model, plant):
        sim.set_params(obs_scale=demo.SCALE)
    return train_policy_and_model(model, plant, demo.running_cost(model, 80), demo.reset, ["m_pole", "mu_cart"],
                                  episode_steps=240, iterations=iterations, optimizer=tisim.optim.Adam(lr=1e-2),
                                  seed=seed)


@pytest.mark.perturbed
def test_the_model_is_identified_while_the_policy_learns(last_bits):
    # measured (exact inputs, seed 0): the pole mass within 0.2% and the friction within 0.5% from iteration 300 on
    # (10% off at iteration 100); after 1500 iterations the policy balances every evaluation episode on the plant in
    # seeds 0 and 1 (make stress)
    for seed in (0, 1):
        result = joint_fit(seed, 300)
        assert result.values["m_pole"] == pytest.approx(0.13, rel=0.01), result.values["m_pole"]
        assert result.values["mu_cart"] == pytest.approx(0.05, rel=0.02), result.values["mu_cart"]


@pytest.mark.stress
def test_the_jointly_trained_policy_balances_the_plant():
    evaluation = demo.Evaluation(m_pole=0.13)
    evaluation.sim.set_params(mu_cart=0.05)
    shares = [evaluation(joint_fit(seed, 1500).values["w_policy"])[1] for seed in (0, 1)]
    assert min(shares) >= 0.8, shares


def test_refusals():
    plain = tisim.systems.Cartpole(horizon=4)
    loss = tisim.losses.TerminalTarget({"x": 0.0})
    with pytest.raises(TypeError, match="closed-loop simulator"):
        train_policy(plain, loss, demo.reset, episode_steps=8)
    sim = demo.Swing(horizon=4)
    with pytest.raises(ValueError, match="multiple of the window.*4.*got 6"):
        train_policy(sim, loss, demo.reset, episode_steps=6)
    with pytest.raises(TypeError, match="reset must be a function"):
        train_policy(sim, loss, None, episode_steps=8)
    with pytest.raises(TypeError, match="one class, horizon and batch"):
        train_policy_and_model(sim, demo.Swing(horizon=5), loss, demo.reset, ["m_pole"], episode_steps=8)
    with pytest.raises(TypeError, match="train_policy_and_model: reset must be a function"):
        train_policy_and_model(sim, demo.Swing(horizon=4), loss, "reset", ["m_pole"], episode_steps=8)
    with pytest.raises(ValueError, match="physical parameters.*'w_policy'"):
        train_policy_and_model(sim, demo.Swing(horizon=4), loss, demo.reset, ["w_policy"], episode_steps=8)


def test_the_demo_writes_its_curves_gif_and_figures(tmp_path):
    from tisim import plots

    report = demo.main(["--methods", "apg,refined,lbfgs", "--seeds", "2", "--iterations", "100", "--out",
                        str(tmp_path)])
    assert len(report["curves"]["apg"]) == 2 and all(curve["steps"][-1] == 100 * 80 * 16
                                                     for curve in report["curves"]["apg"])
    refined = report["curves"]["refined"]
    assert len(refined) == 2 and refined[0]["steps"][refined[0]["refined_from"]] == 100 * 40 * 16
    assert refined[0]["steps"][-1] == 100 * 40 * 16 + 100 * demo.EPISODE * 8
    for curve in report["curves"]["lbfgs"]:  # L-BFGS's rollouts, each of the 16 fixed episodes
        first = curve["steps"][curve["refined_from"]]
        assert first == 100 * 40 * 16 and curve["steps"][-1] > first
        assert (curve["steps"][-1] - first) % (16 * demo.EPISODE) == 0
    assert set(report["robustness"]) == {"nominal", "heavier", "heavier_pushed"}
    assert (tmp_path / "policy_swingup.gif").stat().st_size > 10_000
    assert (tmp_path / "policy_swingup.png").stat().st_size > 10_000
    figure = plots.learning_curves_figure({demo.LABELS[m]: runs for m, runs in report["curves"].items()}, "a title")
    assert plots.text_outside(figure) == []
    assert all(axes.get_xlabel() and axes.get_ylabel() and axes.get_title() for axes in figure.axes)
