"""tisim.envs: Gymnasium environments over tisim simulators, single and batched."""
import warnings

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")

from gymnasium.utils.env_checker import check_env  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

from tisim.envs import CartpoleSwingUp, PendulumSwingUp, SimulatedVectorEnv  # noqa: E402

TASKS = [CartpoleSwingUp, PendulumSwingUp]
IDS = {CartpoleSwingUp: "tisim/CartpoleSwingUp-v0", PendulumSwingUp: "tisim/PendulumSwingUp-v0"}


def wrapped(angle):
    return (angle + np.pi) % (2 * np.pi) - np.pi


def expected_reward(task, before, after, action):
    """The documented rewards, recomputed from the observations around a step and the action."""
    if task is CartpoleSwingUp:
        x, x_dot, sin, cos, theta_dot = after
        return -(wrapped(np.arctan2(sin, cos)) ** 2 + 0.1 * theta_dot ** 2 + 0.05 * x ** 2 + 0.1 * x_dot ** 2)
    cos, sin, theta_dot = before  # Pendulum-v1's cost: the state before the step; upright is theta = pi
    tau = np.clip(action[0], -2.0, 2.0)
    return -(wrapped(np.arctan2(sin, cos) - np.pi) ** 2 + 0.1 * theta_dot ** 2 + 0.001 * tau ** 2)


def actions(task, steps, n=None, seed=0):
    """Random actions beyond the action space's bounds too (clipped by the environment)."""
    high = task(episode_steps=1).action_space.high[0]
    return np.random.default_rng(seed).uniform(-1.5 * high, 1.5 * high, size=(steps, 1) if n is None else (steps, n, 1))


@pytest.mark.parametrize("task", TASKS)
def test_gymnasium_env_checker_passes(task):
    """Gymnasium's own checks: spaces, reset/step/render signatures, seeding determinism, an (H, W, 3) uint8 picture."""
    env = gymnasium.make(IDS[task], render_mode="rgb_array")
    assert isinstance(env.unwrapped, task)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # unbounded velocities in the observation space
        check_env(env.unwrapped, skip_render_check=False)
    env.reset(seed=3)
    picture = env.render()
    assert picture.shape == (240, 320, 3) and picture.dtype == np.uint8 and len(np.unique(picture.reshape(-1, 3),
                                                                                          axis=0)) > 2
    assert gymnasium.make("tisim.envs:" + IDS[task]).unwrapped.episode_steps == task.EPISODE_STEPS


@pytest.mark.parametrize("task", TASKS)
def test_rewards_follow_the_formula_and_episodes_truncate(task):
    """The reward is the documented formula of the observations; episodes end by truncation at their length only;
    the observations come from the simulator's own rollout with a constant action over the substeps."""
    env = task()
    obs, info = env.reset(seed=7)
    assert env.observation_space.contains(obs) and info == {}
    if task is CartpoleSwingUp:
        assert abs(wrapped(np.arctan2(obs[2], obs[3]) - np.pi)) <= 0.1  # hanging, a little noise
    steps = task.EPISODE_STEPS
    for t, action in enumerate(actions(task, steps)):
        before_state = env.state
        new, reward, terminated, truncated, _ = env.step(action)
        assert reward == pytest.approx(expected_reward(task, obs, new, action), rel=1e-12, abs=1e-12)
        assert not terminated and truncated == (t == steps - 1)
        obs = new
    # the last step again, through a fresh simulator run for SUBSTEPS steps of DT / SUBSTEPS
    sim = task.SYSTEM(horizon=task.SUBSTEPS, dt=task.DT / task.SUBSTEPS)
    sim.set_initial_state(**before_state)
    force = np.clip(action[0], env.action_space.low[0], env.action_space.high[0])
    sim.set_actions(np.full(task.SUBSTEPS, force * getattr(env, "max_force", 1.0)))
    final = {k: v[0, -1] for k, v in sim.rollout().items()}
    assert final == pytest.approx(env.state, rel=1e-12, abs=1e-12)
    short = task(episode_steps=3)
    short.reset(seed=0)
    assert [short.step(short.action_space.sample())[3] for _ in range(3)] == [False, False, True]


def test_the_conventions_of_the_systems():
    """Upright scores best: the cart-pole's theta = 0, the pendulum's theta = pi (from the downward vertical)."""
    cart = CartpoleSwingUp()
    up, down = ({"x": [0.0], "x_dot": [0.0], "theta": [a], "theta_dot": [0.0]} for a in (0.0, np.pi))
    up, down = ({k: np.array(v) for k, v in s.items()} for s in (up, down))
    zero = np.zeros((1, 1))
    assert cart.reward(None, up, zero)[0] == 0.0 and cart.reward(None, down, zero)[0] == pytest.approx(-np.pi ** 2)
    pendulum = PendulumSwingUp()
    up, down = ({"theta": np.array([a]), "theta_dot": np.zeros(1)} for a in (np.pi, 0.0))
    assert pendulum.reward(up, None, zero)[0] == 0.0
    assert pendulum.reward(down, None, zero)[0] == pytest.approx(-np.pi ** 2)
    pendulum.reset(seed=0)
    pendulum._state = {k: np.array(v) for k, v in up.items()}  # balanced upright with no torque: it stays there
    obs = pendulum.step([0.0])[0]
    assert obs[0] == pytest.approx(-1.0) and abs(obs[2]) < 1e-9


@pytest.mark.parametrize("task", TASKS)
def test_the_vector_env_is_the_single_envs_stepped_together(task):
    """One batched simulator equals n single environments seeded s + i, stepped with the same actions, states and
    rewards to 1e-12, through an autoreset in next-step mode."""
    n, steps, seed = 3, 8, 11
    vector = SimulatedVectorEnv(task, n, episode_steps=5)
    singles = [task(episode_steps=5) for _ in range(n)]
    assert vector.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert vector.single_observation_space == singles[0].observation_space
    assert vector.observation_space.shape == (n,) + singles[0].observation_space.shape
    assert vector.action_space.shape == (n, 1)
    obs, _ = vector.reset(seed=seed)
    single_obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(singles)]
    np.testing.assert_array_equal(obs, np.stack(single_obs))
    done = [False] * n
    for t, batch in enumerate(actions(task, steps, n)):
        obs, rewards, terminated, truncated, _ = vector.step(batch)
        assert obs.shape == vector.observation_space.shape and vector.observation_space.contains(obs)
        for i, env in enumerate(singles):
            if done[i]:  # next-step autoreset: this step resets the environment instead
                expected, reward, trunc = env.reset()[0], 0.0, False
            else:
                expected, reward, _, trunc, _ = env.step(batch[i])
            np.testing.assert_allclose(obs[i], expected, rtol=1e-12, atol=1e-12)
            assert rewards[i] == pytest.approx(reward, rel=1e-12, abs=1e-12)
            assert truncated[i] == trunc and not terminated[i]
            assert vector.state["theta"][i] == pytest.approx(env.state["theta"], rel=1e-12, abs=1e-12)
            done[i] = trunc
        assert truncated.tolist() == [t == 4] * n
        # the step after the truncation returned the reset observations and reward 0, a reset state
        assert (rewards.tolist() == [0.0] * n) == (t == 5)
    make_vec = gymnasium.make_vec(IDS[task], num_envs=2)
    assert isinstance(make_vec, SimulatedVectorEnv) and make_vec.num_envs == 2


def test_reset_mask_resets_only_the_chosen_environments():
    vector = SimulatedVectorEnv(CartpoleSwingUp, 3)
    vector.reset(seed=0)
    vector.step(np.ones((3, 1)))
    moved = vector.state
    obs, _ = vector.reset(seed=[None, 5, None], options={"reset_mask": np.array([False, True, False])})
    np.testing.assert_array_equal(obs[1], CartpoleSwingUp().reset(seed=5)[0])
    assert vector.state["x"][[0, 2]].tolist() == moved["x"][[0, 2]].tolist()


@pytest.mark.parametrize("task", TASKS)
def test_a_seed_reproduces_an_episode(task):
    def run(seed):
        env = task(episode_steps=10)
        first = env.reset(seed=seed)[0]
        env.action_space.seed(seed)
        return np.concatenate([first] + [env.step(env.action_space.sample())[0] for _ in range(10)])

    np.testing.assert_array_equal(run(4), run(4))
    assert not np.array_equal(run(4), run(5))


def test_bad_arguments_are_refused_by_name():
    for make, words in [(lambda: CartpoleSwingUp(max_force=0.0), "max_force"),
                        (lambda: CartpoleSwingUp(max_force=float("nan")), "max_force"),
                        (lambda: PendulumSwingUp(max_torque=-2.0), "max_torque"),
                        (lambda: PendulumSwingUp(episode_steps=0), "episode_steps"),
                        (lambda: CartpoleSwingUp(episode_steps=2.5), "episode_steps"),
                        (lambda: CartpoleSwingUp(render_mode="human"), "render_mode"),
                        (lambda: SimulatedVectorEnv(CartpoleSwingUp, 0), "num_envs"),
                        (lambda: SimulatedVectorEnv(CartpoleSwingUp, 2, max_torque=1.0), "max_torque")]:
        with pytest.raises((ValueError, TypeError), match=words):
            make()
    with pytest.raises(TypeError, match="env_class"):
        SimulatedVectorEnv("CartpoleSwingUp", 2)
    env = PendulumSwingUp()
    with pytest.raises(gymnasium.error.ResetNeeded):
        env.step([0.0])
    env.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        env.step([0.0, 1.0])
    with pytest.raises(ValueError, match="finite"):
        env.step([np.nan])
    vector = SimulatedVectorEnv(PendulumSwingUp, 2)
    with pytest.raises(ValueError, match="seeds"):
        vector.reset(seed=[1, 2, 3])


@pytest.fixture(scope="module")
def reacher_v5():
    """Gymnasium's own Reacher-v5 (MuJoCo), the referee of tisim's Reacher."""
    pytest.importorskip("mujoco")
    return gymnasium.make("Reacher-v5").unwrapped


def test_the_reacher_passes_the_env_checker_and_draws_the_arena():
    pytest.importorskip("mujoco")
    from tisim.envs import Reacher
    env = gymnasium.make("tisim/Reacher-v0", render_mode="rgb_array")
    assert isinstance(env.unwrapped, Reacher)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # unbounded velocities in the observation space
        check_env(env.unwrapped, skip_render_check=False)
    env.reset(seed=3)
    picture = env.render()
    assert picture.shape == (240, 240, 3) and picture.dtype == np.uint8
    target = (np.abs(picture.astype(int) - [220, 60, 60]).sum(axis=2) < 30).sum()
    arm = (np.abs(picture.astype(int) - [0, 100, 150]).sum(axis=2) < 30).sum()
    assert target > 20 and arm > 100, (target, arm)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_reacher_steps_as_gymnasiums_reacher_v5(seed, reacher_v5):
    """From the state a reset drew, put into Gymnasium's Reacher-v5 as well, 50 steps of the same actions (small
    enough that the elbow stays inside its +-3 rad limit, whose law differs): the same coordinates, observations
    and rewards to 1e-12. MuJoCo leaves a step's body positions at its last RK4 stage, not at the state it returns,
    so Reacher-v5's fingertip is refreshed (mj_kinematics) before its observation and reward are read."""
    import mujoco

    from tisim.envs import Reacher
    env, ref = Reacher(), reacher_v5
    obs, _ = env.reset(seed=seed)
    state = env.state
    assert np.abs(state["q"][:2]).max() <= 0.1 and np.abs(state["qd"][:2]).max() <= 0.005
    assert np.linalg.norm(obs[4:6]) < 0.2 and np.all(state["qd"][2:] == 0)  # the target, within reach and at rest
    ref.set_state(state["q"] + ref.model.qpos0, state["qd"])
    np.testing.assert_allclose(obs, ref._get_obs(), rtol=0, atol=1e-14)
    rng = np.random.default_rng(seed)
    for _ in range(50):
        action = rng.uniform(-0.2, 0.2, 2)
        obs, reward, terminated, truncated, _ = env.step(action)
        ref.step(action)
        mujoco.mj_kinematics(ref.model, ref.data)
        np.testing.assert_allclose(env.state["q"], ref.data.qpos - ref.model.qpos0, rtol=0, atol=1e-12)
        np.testing.assert_allclose(obs, ref._get_obs(), rtol=0, atol=1e-12)
        assert reward == pytest.approx(ref._get_rew(action)[0], abs=1e-12)
        assert not terminated
    assert truncated  # 50 steps: the episode's end


def assert_vector_is_singles(task_id, single, num_envs, actions, seed):
    """make_vec's num_envs environments, seeded `seed`, follow single environments seeded seed, seed + 1, ...,
    step for step, under the same actions (steps, num_envs, A)."""
    vector = gymnasium.make_vec(task_id, num_envs=num_envs)
    assert isinstance(vector.unwrapped, SimulatedVectorEnv)  # one simulator of batch num_envs
    singles = [single() for _ in range(num_envs)]
    obs, _ = vector.reset(seed=seed)
    np.testing.assert_array_equal(obs, [env.reset(seed=seed + i)[0] for i, env in enumerate(singles)])
    for step in actions:
        obs, rewards, _, _, _ = vector.step(step)
        alone = [env.step(a) for env, a in zip(singles, step)]
        np.testing.assert_allclose(obs, [o for o, *_ in alone], rtol=0, atol=1e-13)
        np.testing.assert_allclose(rewards, [r for _, r, *_ in alone], rtol=0, atol=1e-13)


def test_the_reacher_vector_env_is_the_single_envs_stepped_together():
    """make_vec's three reachers, seeded s, follow three single reachers seeded s, s + 1, s + 2, step for step."""
    pytest.importorskip("mujoco")
    from tisim.envs import Reacher
    assert_vector_is_singles("tisim/Reacher-v0", Reacher, 3, np.random.default_rng(0).uniform(-1, 1, (4, 3, 2)), 5)


def test_the_ants_task_is_ant_v5s_without_contact_forces():
    """The ant's reset, observation, reward and termination as Ant-v5 defines them, checked on states written by
    hand (no step: compiling the ant's takes a minute, make stress steps it)."""
    pytest.importorskip("mujoco")
    from tisim.envs import Ant
    env = gymnasium.make("tisim/Ant-v0").unwrapped
    assert isinstance(env, Ant) and env.observation_space.shape == (27,) and env.action_space.shape == (8,)
    obs, _ = env.reset(seed=4)
    state = env.state
    np.testing.assert_array_equal(obs, np.r_[state["q"][2:], state["qd"]])
    pose = np.r_[0, 0, 0.75, 1, 0, 0, 0, np.zeros(8)]  # ant.xml's initial pose
    assert np.abs(state["q"] - pose).max() <= 0.1 and np.abs(state["qd"]).max() < 0.5
    assert np.array_equal(obs, env.reset(seed=4)[0]) and not np.array_equal(obs, env.reset(seed=5)[0])
    before = {"q": np.tile(pose, (4, 1)), "qd": np.zeros((4, 14))}
    after = {"q": before["q"] + [[0.1] + [0] * 14] * 4, "qd": np.zeros((4, 14))}
    after["q"][1, 2], after["q"][2, 2], after["q"][3, 5] = 1.05, 0.15, np.nan
    action = np.full((4, 8), 0.5)
    np.testing.assert_array_equal(env.terminated(after), [False, True, True, True])
    np.testing.assert_allclose(env.reward(before, after, action)[:3], [1 + 2.0 - 1.0, 2.0 - 1.0, 2.0 - 1.0])


@pytest.mark.stress
def test_the_ant_passes_the_env_checker_and_steps():
    """Gymnasium's checks on the ant (its step compiled), then an episode of random actions: finite, each reward the
    formula of the states around its step, ended by termination only where the torso left [0.2, 1] m."""
    pytest.importorskip("mujoco")
    env = gymnasium.make("tisim/Ant-v0", render_mode="rgb_array").unwrapped
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check_env(env, skip_render_check=False)
    env.reset(seed=2)
    rng = np.random.default_rng(2)
    for _ in range(200):
        before, action = env.state, rng.uniform(-1, 1, 8)
        obs, reward, terminated, truncated, _ = env.step(action)
        after = env.state
        assert np.isfinite(obs).all() and not truncated
        healthy = 0.2 <= after["q"][2] <= 1.0
        assert reward == pytest.approx(healthy + (after["q"][0] - before["q"][0]) / 0.05 - 0.5 * action @ action)
        assert terminated == (not healthy)
        if terminated:
            break


@pytest.mark.parametrize("task", ["Pinch", "RollingPin", "Move", "Chopsticks"])
def test_a_clay_task_reaches_its_target_by_its_hidden_plan_and_rewards_what_it_removes(task):
    """tisim/<task>-v0 passes Gymnasium's checks; the hidden plan, played through the env's steps, leaves the clay
    exactly where the one-rollout plan leaves it (the target, the same steps to 1e-12) and its return is 1e4 times
    the loss at the start; every reward is 1e4 times the loss the step removed; 25 steps truncate. (Chopsticks'
    sticks turn: their angles are observed after their centres, their angular velocities are actions.)"""
    from tisim.envs import shape
    kind = getattr(shape, task)
    env = gymnasium.make(f"tisim/{task}-v0", render_mode="rgb_array").unwrapped
    assert isinstance(env, kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check_env(env, skip_render_check=False)
    sim = kind.scene()
    plan = kind.hidden_plan(0)
    sim.set_actions(shape.plan_actions(plan))
    np.testing.assert_allclose(env.target, sim.rollout()["pos"][0, -1], rtol=0, atol=1e-12)
    obs, _ = env.reset(seed=1)
    start = env.loss({k: np.asarray(v)[None] for k, v in env.state.items()})[0]
    tools = len(kind.SCALE) * sim.n_tools  # observed per tool: its centre, and its angle where it turns
    assert start > 1e-5 and np.abs(obs[tools:]).max() > 0.005  # the target lies away from the start
    returns = 0.0
    for t in range(25):
        obs, reward, terminated, truncated, _ = env.step((plan[0, t // 5] / kind.SCALE).ravel())
        returns += reward
        assert not terminated and truncated == (t == 24)
    assert np.abs(obs[tools:]).max() < 1e-12 and returns == pytest.approx(shape.REWARD_SCALE * start, rel=1e-9)
    env.reset()
    before = {k: np.asarray(v)[None] for k, v in env.state.items()}
    _, reward, *_ = env.step(np.linspace(-0.8, 0.5, len(kind.SCALE) * sim.n_tools))
    after = {k: np.asarray(v)[None] for k, v in env.state.items()}
    assert reward == pytest.approx(shape.REWARD_SCALE * (env.loss(before) - env.loss(after))[0], rel=1e-12)
    assert env.render().shape == (180, 360, 3)
    with pytest.raises(ValueError, match=f"{task}: target must be an integer >= 0"):
        kind(target=-1)


def test_the_pinch_vector_env_is_the_single_envs_stepped_together():
    from tisim.envs import Pinch
    assert_vector_is_singles("tisim/Pinch-v0", Pinch, 2, np.random.default_rng(0).uniform(-1, 1, (3, 2, 4)), 0)


def test_the_soft_walker_passes_the_env_checker_and_draws_its_body():
    from tisim.envs import SoftWalker
    env = gymnasium.make("tisim/SoftWalker-v0", render_mode="rgb_array").unwrapped
    assert isinstance(env, SoftWalker) and env.observation_space.shape == (173,) and env.action_space.shape == (5,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check_env(env, skip_render_check=False)
    env.reset(seed=1)
    picture = env.render()
    assert picture.shape == (240, 320, 3) and picture.dtype == np.uint8
    assert (np.abs(picture.astype(int) - [200, 60, 50]).sum(axis=2) < 30).sum() > 43  # the particles' dots


def test_the_soft_walkers_task_on_written_states():
    """Reset, observation, reward and termination as documented, on states written by hand; robots without
    actuators are refused by name, and a 3D robot observes 6 N + 1 numbers."""
    from tisim.envs import SoftWalker
    from tisim.systems.mass_spring import Robot
    env = SoftWalker()
    particles = env.robot.particles
    obs, _ = env.reset(seed=4)
    np.testing.assert_array_equal(env.state["pos"], particles)
    assert 0 < np.abs(env.state["vel"]).max() <= 0.05
    centroid = particles.mean(axis=0)
    np.testing.assert_array_equal(obs[:86], (particles - centroid).ravel())
    np.testing.assert_array_equal(obs[86:172], env.state["vel"].ravel())
    assert obs[172] == centroid[1]
    before = {"pos": np.stack([particles] * 3), "vel": np.zeros((3,) + particles.shape)}
    after = {"pos": before["pos"] + [0.02, 0.01], "vel": np.zeros((3,) + particles.shape)}
    after["pos"][1] -= [0.05, 0.0]
    after["vel"][2, 7, 1] = np.inf
    action = np.full((3, 5), 0.5)
    np.testing.assert_allclose(env.reward(before, after, action), [2.0 - 0.0125, -3.0 - 0.0125, 2.0 - 0.0125],
                               rtol=1e-12)
    np.testing.assert_array_equal(env.terminated(after), [False, False, True])
    np.testing.assert_array_equal(env.effort(action), np.full((3, 5), 0.125))
    cloth = Robot(name="cloth", particles=particles, springs=env.robot.springs, actuators=[])
    with pytest.raises(ValueError, match="robot 'cloth' has no actuators"):
        SoftWalker(robot=cloth)
    with pytest.raises(TypeError, match="robot must be"):
        SoftWalker(robot=3)
    solid = gymnasium.make("tisim/SoftWalker-v0", robot="quadruped3d").unwrapped
    obs, _ = solid.reset(seed=0)
    assert obs.shape == solid.observation_space.shape == (6 * 66 + 1,)
    assert np.isfinite(solid.step(np.ones(5))[0]).all()


def test_a_soft_walker_step_is_its_simulators_rollout():
    """An env step runs MassSpring for 20 steps of 0.5 ms with the activation 0.25 a (a clipped to [-1, 1])."""
    from tisim.envs import SoftWalker
    from tisim.systems.mass_spring import MassSpring
    env = SoftWalker()
    env.reset(seed=2)
    action = np.array([1.7, -0.3, 0.9, -1.2, 0.0])
    before = env.state
    obs, reward, terminated, truncated, _ = env.step(action)
    sim = MassSpring(horizon=20, dt=5e-4, robot="quadruped", eps=0.1, **before)
    sim.set_actions(np.tile(0.25 * np.clip(action, -1, 1), (20, 1)))
    traj = sim.rollout()
    np.testing.assert_allclose(env.state["pos"], traj["pos"][0, -1], rtol=0, atol=1e-14)
    np.testing.assert_allclose(env.state["vel"], traj["vel"][0, -1], rtol=0, atol=1e-12)
    moved = traj["pos"][0, -1, :, 0].mean() - before["pos"][:, 0].mean()
    assert reward == pytest.approx(moved / 0.01 - 0.01 * np.sum(np.clip(action, -1, 1) ** 2), rel=1e-12)
    assert not terminated and not truncated


def test_the_soft_walker_vector_env_is_the_single_envs_stepped_together():
    from tisim.envs import SoftWalker
    assert_vector_is_singles("tisim/SoftWalker-v0", SoftWalker, 3,
                             np.random.default_rng(1).uniform(-1.2, 1.2, (6, 3, 5)), 8)
