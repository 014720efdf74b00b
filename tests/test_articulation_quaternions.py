"""Ball and free joints (quaternion coordinates) against MuJoCo and against the mechanics of a free rigid body: the
mass matrix, bias forces and accelerations, rollouts by Euler and by RK4 (MuJoCo 4 integrates quaternions by
Runge-Kutta on the rotation group), the Taichi step against the numpy one, gradients against central differences,
conservation of energy and angular momentum, and the stability of rotation about the principal axes."""
import os

import numpy as np
import pytest

import tisim
from tisim.systems.articulation import Articulation, Builder, load_mjcf
from tisim.systems.articulation import dynamics as dy
from tisim.systems.articulation.kinematics import body_poses, com_positions, joint_frames
from tisim.systems.articulation.tree import BALL, FREE, reference_coordinates

mujoco = pytest.importorskip("mujoco")

# A free base and six links: two ball joints, hinges, and a slide after a hinge in one body; frames turned off the
# axes, centres of mass off the joints, damping and armature, two motors.
CHAIN = """<mujoco model="chain">
  <option timestep="0.005" integrator="{integrator}" gravity="0 0 -9.81"/>
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <body name="base" pos="0.1 -0.2 1.3" quat="0.9 0.1 0.3 -0.2">
      <freejoint name="root"/>
      <geom type="box" size="0.2 0.1 0.05" mass="2"/>
      <body name="upper" pos="0.2 0 0">
        <joint name="shoulder" type="ball" pos="0.01 0.02 0" damping="0.1" armature="0.01"/>
        <geom type="capsule" fromto="0 0 0 0.3 0.1 0" size="0.03"/>
        <body name="fore" pos="0.3 0.1 0" quat="0.8 0 0.6 0">
          <joint name="elbow" type="hinge" axis="0 1 0.3" damping="0.2"/>
          <joint name="reach" type="slide" axis="1 0 0" damping="0.3"/>
          <geom type="capsule" fromto="0 0 0 0.2 0 -0.1" size="0.02"/>
          <body name="hand" pos="0.2 0 -0.1">
            <joint name="wrist" type="ball" damping="0.05"/>
            <geom type="sphere" size="0.05" pos="0.05 0 0"/>
            <body name="finger" pos="0.1 0 0" quat="0.7 0.7 0 0">
              <joint name="knuckle" type="hinge" axis="0 0 1" pos="0 0.01 0"/>
              <geom type="capsule" fromto="0 0 0 0.08 0 0" size="0.03"/>
              <body name="tip" pos="0.08 0 0">
                <joint name="nail" type="hinge" axis="1 0 0" damping="0.01"/>
                <geom type="capsule" fromto="0 0 0 0.06 0.01 0" size="0.025"/>
              </body>
            </body>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="elbow" gear="2"/><motor joint="reach" gear="1" ctrlrange="-0.5 0.5"/></actuator>
</mujoco>"""


def random_state(model, rng, spread=0.3):
    """qpos near the initial pose (quaternions of any length: both normalize them where they read them), qvel."""
    return model.qpos0 + rng.normal(0, spread, model.nq), rng.normal(0, 1.0, model.nv)


def follow_mujoco(model, tree, q, qd, rng, steps, tolerance):
    """The numpy step and mj_step side by side from (q, qd) (q is MuJoCo's qpos) under the same random actions:
    the final states agree to `tolerance` (the velocities relative to their size)."""
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = q, qd
    for _ in range(steps):
        data.ctrl[:] = rng.uniform(-1, 1, model.nu)
        q, qd = dy.numpy_step(tree, q, qd, data.ctrl.copy())
        mujoco.mj_step(model, data)
    np.testing.assert_allclose(q, data.qpos, rtol=0, atol=tolerance)
    np.testing.assert_allclose(qd, data.qvel, rtol=0, atol=tolerance * np.abs(qd).max())


def chain(integrator):
    xml = CHAIN.format(integrator=integrator)
    return mujoco.MjModel.from_xml_string(xml), load_mjcf(xml)


def test_the_chain_has_mujocos_coordinates():
    model, tree = chain("Euler")
    assert tree.joint_type == (FREE, BALL, "hinge", "slide", BALL, "hinge", "hinge")
    st = dy.structure_of(tree)
    assert (st.n_coordinates, st.n_dofs) == (model.nq, model.nv) == (19, 16)
    np.testing.assert_array_equal([c[0] for c in st.joint_coordinates], model.jnt_qposadr)
    np.testing.assert_array_equal([d[0] for d in st.joint_dofs], model.jnt_dofadr)
    np.testing.assert_allclose(reference_coordinates(tree), model.qpos0, rtol=0, atol=1e-15)


def test_the_numpy_kinematics_are_mujocos():
    """Body frames, centres of mass and joint anchors and axes at random coordinates (quaternions unnormalized)
    equal mj_kinematics' to 1e-14."""
    model, tree = chain("Euler")
    data = mujoco.MjData(model)
    rng = np.random.default_rng(5)
    for _ in range(3):
        data.qpos[:] = random_state(model, rng)[0]
        mujoco.mj_kinematics(model, data)
        xpos, xmat = body_poses(tree, data.qpos)
        anchor, axis = joint_frames(tree, data.qpos)
        np.testing.assert_allclose(xpos, data.xpos, rtol=0, atol=1e-14)
        np.testing.assert_allclose(xmat.reshape(-1, 9), data.xmat, rtol=0, atol=1e-14)
        np.testing.assert_allclose(anchor, data.xanchor, rtol=0, atol=1e-14)
        np.testing.assert_allclose(axis, data.xaxis, rtol=0, atol=1e-14)
        np.testing.assert_allclose(com_positions(tree, data.qpos), data.xipos, rtol=0, atol=1e-14)


def test_mass_matrix_bias_and_accelerations_are_mujocos():
    """At random states and actions: M(q) (armature apart), the bias forces c(q, qd) and qacc equal mj_forward's to
    1e-12 of their size, and qacc to 1e-10 (the light fingertip makes M ill-conditioned)."""
    model, tree = chain("Euler")
    data = mujoco.MjData(model)
    rng = np.random.default_rng(0)
    st, p = dy.structure_of(tree), dy.params_of(tree)
    for _ in range(4):
        qpos, qvel = random_state(model, rng)
        ctrl = rng.uniform(-1, 1, model.nu)
        data.qpos[:], data.qvel[:], data.ctrl[:] = qpos, qvel, ctrl
        mujoco.mj_forward(model, data)
        bias, M = dy.bias_and_mass(st, p, list(qpos), list(qvel), dy.NUMPY)
        full = np.zeros((model.nv, model.nv))
        mujoco.mj_fullM(model, data, full)
        np.testing.assert_allclose(M, full - np.diag(model.dof_armature), rtol=0, atol=1e-12 * np.abs(full).max())
        np.testing.assert_allclose(bias, data.qfrc_bias, rtol=0, atol=1e-12 * np.abs(bias).max())
        qacc = dy.numpy_acceleration(tree, qpos, qvel, ctrl)
        np.testing.assert_allclose(qacc, data.qacc, rtol=0, atol=1e-10 * np.abs(qacc).max())


@pytest.mark.parametrize("integrator", ["Euler", "RK4"])
def test_a_rollout_is_mujocos_mj_step(integrator):
    """200 steps under random actions from a random state: the numpy step follows mj_step to 1e-11, quaternions
    included (Euler: semi-implicit, damping implicit; RK4: MuJoCo 4's Runge-Kutta on the rotation group)."""
    model, tree = chain(integrator)
    rng = np.random.default_rng(1)
    q, qd = random_state(model, rng)
    follow_mujoco(model, tree, q, qd, rng, steps=200, tolerance=1e-11)


def small_tree(integrator):
    """Small trees for the Taichi step (its compile time grows fast with the degrees of freedom): for Euler, a free
    box with a link on a motored hinge; for RK4, a link on a ball joint (the rotation group's slopes)."""
    b = Builder(f"small_{integrator}", timestep=0.01, integrator=integrator)
    if integrator == "euler":
        box = b.body(0, pos=(0, 0, 1.0), quat=(0.9, 0.2, -0.3, 0.1), mass=2.0, ipos=(0.01, 0.02, -0.01),
                     inertia=(0.03, 0.02, 0.04))
        b.free(box, damping=0.01, armature=0.02)
        hand = b.body(box, pos=(0.2, 0, 0), mass=0.2, ipos=(0.05, 0, 0), inertia=(0.001, 0.002, 0.002))
        b.motor(b.hinge(hand, axis=(0, 0, 1), damping=0.02, armature=0.01), gear=0.5)
    else:
        arm = b.body(0, pos=(0, 0, 1.0), mass=0.5, ipos=(0.1, 0.02, -0.05), inertia=(0.002, 0.004, 0.005))
        b.ball(arm, pos=(0.01, 0, 0), damping=0.05, armature=0.01)
    return b.build()


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_the_taichi_step_is_the_numpy_step_and_its_gradients_are_right(integrator):
    """The simulator's rollouts from unnormalized quaternions (a batch of 2) equal the numpy step to rounding (with
    no initial state set, they start from the tree's reference pose); every gradient group (the parameters, the
    initial quaternions and velocities, the actions) matches Richardson-extrapolated float64 central
    differences."""
    tree = small_tree(integrator)
    sim = Articulation(horizon=12, batch=2, tree=tree)
    np.testing.assert_array_equal(sim.rollout()["q"][:, 0], np.tile(reference_coordinates(tree), (2, 1)))
    rng = np.random.default_rng(2)
    q0 = reference_coordinates(tree) + rng.normal(0, 0.2, (2, sim.n_coordinates))
    qd0, u = rng.normal(0, 1.0, (2, sim.n_dofs)), rng.uniform(-1, 1, (2, 12, sim.n_actuators))
    sim.set_initial_state(q=q0, qd=qd0)
    sim.set_actions(u)
    traj = sim.rollout()
    for b in range(2):
        q, qd = q0[b], qd0[b]
        for t in range(12):
            q, qd = dy.numpy_step(tree, q, qd, u[b, t])
        np.testing.assert_allclose(traj["q"][b, -1], q, rtol=0, atol=1e-12)
        np.testing.assert_allclose(traj["qd"][b, -1], qd, rtol=0, atol=1e-12)
    loss = tisim.losses.TerminalTarget({"q": reference_coordinates(tree) + 0.1, "qd": np.zeros(sim.n_dofs)})
    report = tisim.gradcheck(sim, loss, step=1e-4, max_entries=10, extrapolate=True)
    assert report.worst <= 1e-6, str(report)


# A box floating without gravity (principal moments 1, 2, 3 kg m^2, its centre of mass at its frame's origin),
# RK4 at 5 ms for 10 s: one tumbling at a generic angular velocity, then three spun at 5 rad/s about one principal
# axis each, nudged by 1e-3 rad/s about the others. One simulator, a batch of four.
MOMENTS = np.array([1.0, 2.0, 3.0])
SPINS = np.array([[1.0, 3.0, -2.0], [5.0, 1e-3, 1e-3], [1e-3, 5.0, 1e-3], [1e-3, 1e-3, 5.0]])


@pytest.fixture(scope="module")
def tumbling():
    b = Builder("tumbling", gravity=(0, 0, 0), timestep=0.005, integrator="rk4")
    b.free(b.body(0, mass=1.0, inertia=MOMENTS))
    sim = Articulation(horizon=2000, batch=4, tree=b.build())
    sim.set_initial_state(q=np.tile([0, 0, 0, 1.0, 0, 0, 0], (4, 1)),
                          qd=np.concatenate([np.tile([0.1, -0.2, 0.05], (4, 1)), SPINS], axis=1))
    return sim.rollout()


def rigid_body_invariants(q, qd, mass=1.0):
    """Kinetic energy and the angular momentum about the world's origin of the box, at every step."""
    w, x, y, z = np.moveaxis(q[..., 3:] / np.linalg.norm(q[..., 3:], axis=-1, keepdims=True), -1, 0)
    R = np.stack([np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
                  np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
                  np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], -2)
    v, omega = qd[..., :3], qd[..., 3:]
    energy = 0.5 * mass * (v * v).sum(-1) + 0.5 * (MOMENTS * omega * omega).sum(-1)
    momentum = np.einsum("...ij,...j->...i", R, MOMENTS * omega) + mass * np.cross(q[..., :3], v)
    return energy, momentum


def test_a_free_body_conserves_energy_and_angular_momentum(tumbling):
    """Tumbling for 10 s (RK4 at 5 ms, |omega| = 3.7 rad/s), the box's kinetic energy stays constant to 1e-9 of
    its size (1.1e-10 measured) and its angular momentum in the world to 1e-8 (1.1e-9), its quaternion of unit
    length to 1e-12, and its centre moves at its constant velocity."""
    energy, momentum = rigid_body_invariants(tumbling["q"][0], tumbling["qd"][0])
    assert np.abs(energy - energy[0]).max() <= 1e-9 * energy[0]
    assert np.abs(momentum - momentum[0]).max() <= 1e-8 * np.linalg.norm(momentum[0])
    assert np.abs(np.linalg.norm(tumbling["q"][0, :, 3:], axis=-1) - 1.0).max() <= 1e-12
    np.testing.assert_allclose(tumbling["q"][0, -1, :3], 10.0 * np.array([0.1, -0.2, 0.05]), rtol=0, atol=1e-12)


@pytest.mark.parametrize("axis, stable", [(0, True), (1, False), (2, True)])
def test_rotation_about_the_intermediate_axis_is_unstable(tumbling, axis, stable):
    """The tennis-racket theorem: the box keeps its spin on the axes of the least and the greatest moment and flips
    over on the intermediate one, where linear theory grows the nudge as e^(omega sqrt((I2 - I1)(I3 - I2) /
    (I1 I3)) t) = e^(2.9 t): the spin about that axis reverses within the 10 s."""
    spin = tumbling["qd"][1 + axis, :, 3 + axis]
    if stable:
        assert spin.min() > 4.99
    else:
        assert spin.min() < -4.0  # flipped over: the body spins the other way about its own axis


def test_a_free_body_falls_as_semi_implicit_euler_says():
    """From rest at its reference pose (no initial state set), a free body under gravity falls as the semi-implicit
    Euler recurrence says: z_n = z_0 - g dt^2 n (n + 1) / 2, its orientation unchanged."""
    b = Builder("drop", timestep=0.01, integrator="euler")
    b.free(b.body(0, pos=(0.3, 0.0, 2.0), quat=(0.0, 0.0, 0.0, 1.0), mass=1.0, inertia=(0.1, 0.1, 0.1)))
    b.motor(b.hinge(b.body(1, mass=0.1, inertia=(0.01, 0.01, 0.01)), axis=(1, 0, 0)))
    sim = Articulation(horizon=50, tree=b.build())
    traj = sim.rollout()
    n = np.arange(51)
    np.testing.assert_allclose(traj["q"][0, :, 2], 2.0 - 9.81 * 0.01 ** 2 * n * (n + 1) / 2, rtol=0, atol=1e-12)
    np.testing.assert_allclose(traj["q"][0, :, 3:7], np.tile([0, 0, 0, 1.0], (51, 1)), rtol=0, atol=1e-15)


def test_bad_free_and_ball_joints_are_refused_by_name():
    b = Builder("bad")
    root = b.body(0, mass=1.0, inertia=(0.1, 0.1, 0.1), name="root")
    child = b.body(root, mass=1.0, inertia=(0.1, 0.1, 0.1), name="child")
    with pytest.raises(ValueError, match="free joint 0 'float': body 2 'child' is not a child of the world"):
        b.free(child, name="float")
    b.hinge(root, axis=(0, 1, 0))
    with pytest.raises(ValueError, match="body 1 'root' has joints already: a free joint must be its body's only"):
        b.free(root)
    b = Builder("bad")
    root = b.body(0, mass=1.0, inertia=(0.1, 0.1, 0.1))
    b.free(root)
    with pytest.raises(ValueError, match="body 1 is free already"):
        b.hinge(root)
    shoulder = b.ball(b.body(root, mass=1.0, inertia=(0.1, 0.1, 0.1)), name="shoulder")
    with pytest.raises(ValueError, match="joint 1 'shoulder' is a ball joint: motors drive hinges and slides only"):
        b.motor(shoulder)


def test_bad_shapes_are_refused_by_name():
    b = Builder("shapes")
    body = b.body(0, mass=1.0, inertia=(0.1, 0.1, 0.1))
    with pytest.raises(ValueError, match="sphere 0 'ball': a sphere belongs to a moving body .*not the world"):
        b.sphere(0, 0.1, name="ball")
    with pytest.raises(ValueError, match="sphere 0: its sizes must be > 0, got"):
        b.sphere(body, -0.1)
    with pytest.raises(ValueError, match="capsule 0: radius and half_length must be 2 numbers"):
        b.capsule(body, (0.1, 0.2), 0.3)
    with pytest.raises(ValueError, match="box 0 'crate': half_widths must be 3 numbers"):
        b.box(body, (0.1, 0.2), name="crate")
    with pytest.raises(ValueError, match="box 0: body must be a body added before \\(0 to 1\\), got 5"):
        b.box(5, (0.1, 0.1, 0.1))
    with pytest.raises(ValueError, match="plane 0: friction must be >= 0"):
        b.plane(friction=-1.0)
    assert b.build().geom_type == ()  # nothing half-added


@pytest.mark.parametrize("xml, words", [
    ('<body><joint name="j" type="ball" stiffness="2"/><geom size="0.1"/></body>',
     ("joint 'j'", "ball or free joint with a spring")),
    ('<body><joint name="j" type="ball"/><geom size="0.1"/></body></worldbody>'
     '<actuator><motor name="m" joint="j" gear="1 0 0 0 0 0"/></actuator><worldbody>',
     ("actuator 'm'", "drives joint 'j', a ball or free joint")),
])
def test_mjcf_refuses_what_a_ball_joint_cannot_have(xml, words):
    with pytest.raises(ValueError) as error:
        load_mjcf(f'<mujoco model="m"><worldbody>{xml}</worldbody></mujoco>')
    for word in words:
        assert word in str(error.value)


def test_gymnasiums_ant_without_contacts_and_limits_is_mujocos():
    """Gymnasium's ant (a free torso, eight hinges, RK4) with its contacts and limits off in both: 100 steps of the
    numpy step follow mj_step to 1e-10."""
    gymnasium = pytest.importorskip("gymnasium")
    path = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", "ant.xml")
    model = mujoco.MjModel.from_xml_path(path)
    model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_LIMIT
    tree = load_mjcf(path, ignore=("contacts", "limits"))
    assert tree.joint_type[0] == FREE and tree.integrator == "rk4"
    rng = np.random.default_rng(4)
    q, qd = random_state(model, rng, spread=0.1)
    follow_mujoco(model, tree, q, qd, rng, steps=100, tolerance=1e-10)  # the ant's q is MuJoCo's qpos: no ref
