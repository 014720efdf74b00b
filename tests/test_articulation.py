"""Articulation against MuJoCo: the mass matrix, the bias forces, the accelerations and whole rollouts of Gymnasium's
robots (contacts and limits switched off in both), the Taichi step against the numpy one, gradients against central
differences, and physics by hand."""
import os

import numpy as np
import pytest

import tisim
from tisim.systems.articulation import Articulation, Builder, double_pendulum, load_mjcf
from tisim.systems.articulation import dynamics as dy

mujoco = pytest.importorskip("mujoco")
gymnasium = pytest.importorskip("gymnasium")
ASSETS = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")
ROBOTS = ["inverted_pendulum.xml", "inverted_double_pendulum.xml", "reacher.xml", "half_cheetah.xml", "hopper.xml"]
DROPPED = ("contacts", "limits", "ref")


def mujoco_without_contacts_and_limits(name, integrator=None):
    """MuJoCo's model of a Gymnasium robot with contacts and limits off, as the tree drops them; its tree."""
    model = mujoco.MjModel.from_xml_path(os.path.join(ASSETS, name))
    model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_LIMIT
    if integrator is not None:
        model.opt.integrator = {"euler": 0, "rk4": 1}[integrator]
    tree = load_mjcf(os.path.join(ASSETS, name), ignore=DROPPED)
    tree.integrator = integrator or tree.integrator
    return model, tree


@pytest.mark.parametrize("name", ROBOTS)
def test_mass_matrix_bias_and_accelerations_are_mujocos(name):
    """At random states and actions: M(q) (without armature, which MuJoCo adds into it), the bias forces c(q, qd)
    and qacc (springs, damping, armature and motors included) equal MuJoCo's mj_forward to 1e-12."""
    model, tree = mujoco_without_contacts_and_limits(name)
    data = mujoco.MjData(model)
    rng = np.random.default_rng(0)
    st, p = dy.structure_of(tree), dy.params_of(tree)
    for _ in range(3):
        q, qd, ctrl = rng.normal(0, 0.4, model.nq), rng.normal(0, 1.0, model.nv), rng.uniform(-1, 1, model.nu)
        data.qpos[:], data.qvel[:], data.ctrl[:] = q + model.qpos0, qd, ctrl
        mujoco.mj_forward(model, data)
        bias, M = dy.bias_and_mass(st, p, list(q), list(qd), dy.NUMPY)
        full = np.zeros((model.nv, model.nv))
        mujoco.mj_fullM(model, data, full)
        scale = np.abs(full).max()
        np.testing.assert_allclose(M, full - np.diag(model.dof_armature), rtol=0, atol=1e-12 * scale)
        np.testing.assert_allclose(bias, data.qfrc_bias, rtol=0, atol=1e-12 * max(1.0, np.abs(bias).max()))
        qacc = dy.numpy_acceleration(tree, q, qd, ctrl)
        np.testing.assert_allclose(qacc, data.qacc, rtol=0, atol=1e-11 * max(1.0, np.abs(qacc).max()))


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
@pytest.mark.parametrize("name", ROBOTS)
def test_a_rollout_is_mujocos_mj_step(name, integrator):
    """100 steps under random actions from a random state, MuJoCo's semi-implicit Euler (damping implicit) or RK4:
    the numpy step follows mj_step to 1e-10."""
    model, tree = mujoco_without_contacts_and_limits(name, integrator)
    data = mujoco.MjData(model)
    rng = np.random.default_rng(1)
    q, qd = rng.normal(0, 0.3, model.nq), rng.normal(0, 1.0, model.nv)
    data.qpos[:], data.qvel[:] = q + model.qpos0, qd
    for _ in range(100):
        data.ctrl[:] = rng.uniform(-1, 1, model.nu)
        q, qd = dy.numpy_step(tree, q, qd, data.ctrl.copy())
        mujoco.mj_step(model, data)
    np.testing.assert_allclose(q, data.qpos - model.qpos0, rtol=0, atol=1e-10)
    np.testing.assert_allclose(qd, data.qvel, rtol=0, atol=1e-10 * max(1.0, np.abs(qd).max()))


def test_the_taichi_step_is_the_numpy_step_and_mujocos():
    """The simulator's rollout of the inverted double pendulum (a slide and two hinges, Euler) equals the numpy step
    to rounding, batch element by batch element, and so MuJoCo's rollout."""
    model, tree = mujoco_without_contacts_and_limits("inverted_double_pendulum.xml")
    sim = Articulation(horizon=40, batch=2, tree=tree)
    rng = np.random.default_rng(2)
    q0, qd0, u = rng.normal(0, 0.3, (2, 3)), rng.normal(0, 1.0, (2, 3)), rng.uniform(-1, 1, (2, 40, 1))
    sim.set_initial_state(q=q0, qd=qd0)
    sim.set_actions(u)
    traj = sim.rollout()
    data = mujoco.MjData(model)
    for b in range(2):
        q, qd = q0[b], qd0[b]
        data.qpos[:], data.qvel[:] = q + model.qpos0, qd
        for t in range(40):
            q, qd = dy.numpy_step(tree, q, qd, u[b, t])
            data.ctrl[:] = u[b, t]
            mujoco.mj_step(model, data)
        np.testing.assert_allclose(traj["q"][b, -1], q, rtol=0, atol=1e-12)
        np.testing.assert_allclose(traj["qd"][b, -1], qd, rtol=0, atol=1e-12)
        np.testing.assert_allclose(traj["q"][b, -1], data.qpos - model.qpos0, rtol=0, atol=1e-10)


@pytest.mark.parametrize("make", ["slide and hinges", "rk4"])
def test_gradients_match_central_differences(make):
    """Every group against Richardson-extrapolated float64 central differences: the inverted double pendulum (a
    slide and two hinges, Euler, with damping, armature and a motor) and a pendulum stepped by RK4."""
    if make == "rk4":
        b = Builder("pendulum", timestep=0.01, integrator="rk4")
        rod = b.body(0, pos=(0, 0, 1.0), mass=1.0, ipos=(0, 0, -0.25), inertia=(0.02, 0.02, 0.001))
        b.motor(b.hinge(rod, axis=(0, 1, 0), damping=0.1, armature=0.01), gear=2.0)
        tree = b.build()
    else:
        tree = mujoco_without_contacts_and_limits("inverted_double_pendulum.xml")[1]
    sim = Articulation(horizon=15, batch=2, tree=tree)
    rng = np.random.default_rng(3)
    sim.set_initial_state(q=rng.normal(0, 0.3, (2, sim.n_joints)), qd=rng.normal(0, 1.0, (2, sim.n_joints)))
    sim.set_actions(rng.uniform(-1, 1, (2, 15, sim.n_actuators)))
    loss = tisim.losses.TerminalTarget({"q": np.full(sim.n_joints, 0.2), "qd": np.zeros(sim.n_joints)})
    report = tisim.gradcheck(sim, loss, step=1e-4, max_entries=12, extrapolate=True)
    assert report.worst <= 1e-6, str(report)


def test_a_pendulum_swings_at_its_small_angle_frequency():
    """A rod hung from a hinge (m = 1 kg, centre of mass d = 0.25 m below the hinge, I_c = 0.02 kg m^2) swings at
    omega = sqrt(m g d / (I_c + m d^2)) for small angles: the zero crossings of the numpy rollout, RK4 at 1 ms,
    give it to 1e-4."""
    b = Builder("pendulum", timestep=0.001, integrator="rk4")
    rod = b.body(0, pos=(0, 0, 1.0), mass=1.0, ipos=(0, 0, -0.25), inertia=(0.02, 0.02, 0.001))
    b.motor(b.hinge(rod, axis=(0, 1, 0)), gear=1.0)
    tree = b.build()
    omega = np.sqrt(1.0 * 9.81 * 0.25 / (0.02 + 0.25 ** 2))
    q, qd, angles = np.array([1e-3]), np.array([0.0]), []
    for _ in range(int(3 * 2 * np.pi / omega / 1e-3)):
        q, qd = dy.numpy_step(tree, q, qd, [0.0])
        angles.append(q[0])
    angles = np.array(angles)
    k = np.flatnonzero(np.sign(angles[:-1]) != np.sign(angles[1:]))
    crossings = (k + 1 - angles[k + 1] / (angles[k + 1] - angles[k])) * 1e-3
    period = 2 * np.diff(crossings).mean()
    assert period == pytest.approx(2 * np.pi / omega, rel=1e-4)


URDF = """<robot name="two_link">
  <link name="base"><inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/>
    </inertial></link>
  <link name="upper"><inertial><origin xyz="0 0 -0.25"/><mass value="1"/>
    <inertia ixx="0.021" ixy="0" ixz="0" iyy="0.021" iyz="0" izz="0.001"/></inertial></link>
  <link name="lower"><inertial><origin xyz="0.05 0 -0.25"/><mass value="0.5"/>
    <inertia ixx="0.011" ixy="0" ixz="0" iyy="0.011" iyz="0" izz="0.001"/></inertial></link>
  <joint name="shoulder" type="continuous"><parent link="base"/><child link="upper"/><origin xyz="0 0 1"/>
    <axis xyz="0 1 0"/><dynamics damping="0.05"/></joint>
  <joint name="elbow" type="continuous"><parent link="upper"/><child link="lower"/>
    <origin xyz="0 0 -0.5" rpy="0.3 0 0"/><axis xyz="0 1 0"/></joint>
</robot>"""


def test_a_urdf_robot_loads_through_mujoco_and_swings_as_mujoco_swings_it(tmp_path):
    """A two-link URDF arm (MuJoCo imports URDF; its fixed base joins the world): the tree has the links and joints,
    no motors (URDF has none: the simulator's one action drives nothing), and 200 Euler steps of the Taichi rollout
    equal mj_step to 1e-10."""
    path = tmp_path / "two_link.urdf"
    path.write_text(URDF)
    tree = load_mjcf(str(path))
    assert tree.joint_names == ("shoulder", "elbow") and len(tree.actuator_joint) == 0
    sim = Articulation(horizon=200, tree=tree)
    sim.set_initial_state(q=[0.7, -0.4], qd=[0.0, 1.0])
    traj = sim.rollout()
    model = mujoco.MjModel.from_xml_path(str(path))
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = [0.7, -0.4], [0.0, 1.0]
    for _ in range(200):
        mujoco.mj_step(model, data)
    np.testing.assert_allclose(traj["q"][0, -1], data.qpos, rtol=0, atol=1e-10)
    np.testing.assert_allclose(traj["qd"][0, -1], data.qvel, rtol=0, atol=1e-10)
    assert np.abs(sim.gradient(tisim.losses.TerminalSum({"q": [1.0, 0.0]})).actions).max() == 0.0


def test_bad_trees_are_refused_by_name():
    b = Builder("still")
    b.body(0, pos=(0, 0, 1.0), mass=1.0, inertia=(0.1, 0.1, 0.1))
    with pytest.raises(ValueError, match="Articulation: the tree 'still'.*has no joint"):
        Articulation(horizon=2, tree=b.build())
    with pytest.raises(TypeError, match="Articulation: tree must be a Tree or an MJCF file path, got int"):
        Articulation(horizon=2, tree=3)
    with pytest.raises(ValueError, match="n_joints is not a keyword"):
        Articulation(horizon=2, n_joints=3)
    with pytest.raises(FileNotFoundError, match="Articulation: tree='/no/such.xml'"):
        Articulation(horizon=2, tree="/no/such.xml")
    with pytest.raises(ValueError, match="Articulation: tree='<mujoco>'.*MuJoCo could not compile it"):
        Articulation(horizon=2, tree="<mujoco>")
    with pytest.raises(TypeError, match="Articulation: ignore must be a tuple of names among"):
        Articulation(horizon=2, tree=os.path.join(ASSETS, "reacher.xml"), ignore="contacts")
    with pytest.raises(ValueError, match="ignore=.*'nothing' is not something load_mjcf can ignore"):
        Articulation(horizon=2, tree=os.path.join(ASSETS, "reacher.xml"), ignore=("nothing",))
    with pytest.raises(ValueError, match=r"Articulation: ignore=\('contacts',\) applies to an MJCF file"):
        Articulation(horizon=2, ignore=("contacts",))
    assert Articulation(horizon=2).tree.name == double_pendulum().name


def test_a_point_target_is_the_distance_of_a_bodys_point_and_has_gradients():
    """point_target's value is weight |p_t - target|^2 summed over its steps, p_t the lower rod's tip by the numpy
    kinematics (and so MuJoCo's, tests/test_articulation_tree.py); its gradients match central differences; a body
    that is not there is refused by name."""
    from tisim.systems.articulation.kinematics import body_poses
    sim = Articulation(horizon=20, batch=2)
    rng = np.random.default_rng(0)
    sim.set_initial_state(q=rng.normal(0, 0.5, (2, 2)), qd=rng.normal(0, 1, (2, 2)))
    sim.set_actions(rng.uniform(-1, 1, (2, 20, 2)))
    target, tip = np.array([0.3, 0.0, 0.2]), np.array([0.0, 0.0, -0.5])
    loss = sim.point_target(2, target, point=tip, steps=[10, 20], weight=2.0)
    traj = sim.rollout()
    expected = 0.0
    for b in range(2):
        for t in (10, 20):
            xpos, xmat = body_poses(sim.tree, traj["q"][b, t])
            expected += 2.0 * np.sum((xpos[2] + xmat[2] @ tip - target) ** 2)
    assert sim.gradient(loss).value == pytest.approx(expected, rel=1e-13)
    report = tisim.gradcheck(sim, loss, step=1e-5, max_entries=10, extrapolate=True)
    assert report.worst <= 1e-5, str(report)
    # a body as the target: the tip's distance from the upper rod's frame origin (its hinge), which moves with q
    follow = sim.point_target(2, 1, point=tip, steps=[5, 20])
    expected = 0.0
    for b in range(2):
        for t in (5, 20):
            xpos, xmat = body_poses(sim.tree, traj["q"][b, t])
            expected += np.sum((xpos[2] + xmat[2] @ tip - xpos[1]) ** 2)
    assert sim.gradient(follow).value == pytest.approx(expected, rel=1e-13)
    report = tisim.gradcheck(sim, follow, step=1e-5, max_entries=10, extrapolate=True)
    assert report.worst <= 1e-5, str(report)
    with pytest.raises(ValueError, match="no body named 'hand'"):
        sim.point_target("hand", target)
    with pytest.raises(ValueError, match="body must be a name or an index from 1 to 2, got 0"):
        sim.point_target(0, target)
    with pytest.raises(ValueError, match=r"point_target: target must be 3 finite numbers or a body and point 3 "
                                         r"finite numbers, got \[0.3, 0.0\]"):
        sim.point_target(2, [0.3, 0.0])
    with pytest.raises(ValueError, match="point_target: weight must be >= 0, got -1.0"):
        sim.point_target(2, target, weight=-1.0)
    with pytest.raises(ValueError, match="point_target: target must be 3 numbers or a body, point 3 numbers and "
                                         "weight a number"):
        sim.point_target(2, [None, "a", 1])
    with pytest.raises(ValueError, match="no body named 'up'"):
        sim.point_target(2, "up")


@pytest.mark.parametrize("name", ["inverted_double_pendulum.xml", "reacher.xml"])
def test_one_step_jacobians_are_mujocos_finite_differences(name):
    """The Jacobians of one step with respect to the state and the actions (sim.jacobian, horizon 1, reverse mode)
    equal MuJoCo's mjd_transitionFD (centred differences, eps 1e-7) at a random state, to 1e-7 of their largest
    entry (measured: 2e-9, the differences' own accuracy): the inverted double pendulum and the reacher, by Euler
    (MuJoCo's differences do not take RK4), contacts and limits off in both."""
    model, tree = mujoco_without_contacts_and_limits(name, "euler")
    data = mujoco.MjData(model)
    rng = np.random.default_rng(6)
    q, qd, ctrl = rng.normal(0, 0.3, model.nq), rng.normal(0, 1.0, model.nv), rng.uniform(-0.5, 0.5, model.nu)
    data.qpos[:], data.qvel[:], data.ctrl[:] = q + model.qpos0, qd, ctrl
    n = 2 * model.nv
    A, B = np.zeros((n, n)), np.zeros((n, model.nu))
    mujoco.mjd_transitionFD(model, data, 1e-7, True, A, B, None, None)
    sim = Articulation(horizon=1, tree=tree)
    sim.set_initial_state(q=q, qd=qd)
    sim.set_actions(ctrl[None, :])
    state = sim.jacobian(wrt="initial_state", mode="reverse").matrix[0]
    actions = sim.jacobian(wrt="actions", mode="reverse").matrix[0]
    np.testing.assert_allclose(state, A, rtol=0, atol=1e-7 * np.abs(A).max())
    np.testing.assert_allclose(actions, B, rtol=0, atol=1e-7 * np.abs(B).max())
