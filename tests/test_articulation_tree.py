"""Articulation tables: the MJCF loader against MuJoCo's kinematics, its refusals, the Python Builder."""
import dataclasses
import importlib.util
import os
import sys

import numpy as np
import pytest

from tisim.systems.articulation.builder import Builder
from tisim.systems.articulation.kinematics import (
    body_poses,
    com_positions,
    joint_frames,
    quat_from_axis_angle,
    quat_multiply,
    quat_rotate,
    quat_to_matrix,
)
from tisim.systems.articulation.mjcf import load_mjcf
from tisim.systems.articulation.tree import HINGE, SLIDE

try:
    import mujoco
except ImportError:  # the loader's extra (tisim[mjcf]); the Builder and the kinematics work without it
    mujoco = None
_GYM = importlib.util.find_spec("gymnasium")
ASSETS = os.path.join(_GYM.submodule_search_locations[0], "envs", "mujoco", "assets") if _GYM else None
needs_mujoco = pytest.mark.skipif(mujoco is None, reason="MuJoCo is not installed")
needs_gymnasium = pytest.mark.skipif(mujoco is None or ASSETS is None,
                                     reason="MuJoCo or gymnasium's MJCF robots are not installed")


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    """MuJoCo writes its warnings to MUJOCO_LOG.TXT in the working folder: keep that out of the repository."""
    monkeypatch.chdir(tmp_path)


def asset(name):
    return os.path.join(ASSETS, name)


def random_q(tree, rng):
    """Coordinates inside each joint's range, or within +-pi (hinge) / +-1 m (slide) where it has none."""
    q = np.empty(len(tree.joint_type))
    for j, kind in enumerate(tree.joint_type):
        lo, hi = tree.joint_range[j]
        if not lo < hi:
            lo, hi = (-np.pi, np.pi) if kind == HINGE else (-1.0, 1.0)
        q[j] = rng.uniform(lo, hi)
    return q


# --- (a) the loader and the numpy kinematics against MuJoCo's mj_kinematics ---------------------------------------

GYM_MODELS = [("reacher.xml", ("limits", "ref")), ("inverted_pendulum.xml", ("limits",)),
              ("inverted_double_pendulum.xml", ("limits",)), ("half_cheetah.xml", ("contacts", "limits"))]


@needs_gymnasium
@pytest.mark.parametrize("filename, ignore", GYM_MODELS)
def test_kinematics_match_mujoco(filename, ignore):
    tree = load_mjcf(asset(filename), ignore=ignore)
    model = mujoco.MjModel.from_xml_path(asset(filename))
    data = mujoco.MjData(model)
    assert len(tree.parent) == model.nbody and len(tree.joint_type) == model.njnt == model.nq
    qpos0 = model.qpos0.copy()  # nonzero only where a joint has a ref (reacher's target)
    rng = np.random.default_rng(7)
    for _ in range(5):
        q = random_q(tree, rng)
        data.qpos[:] = q + qpos0
        mujoco.mj_kinematics(model, data)
        xpos, xmat = body_poses(tree, q)
        anchor, axis = joint_frames(tree, q)
        np.testing.assert_allclose(xpos, data.xpos, rtol=0, atol=1e-12)
        np.testing.assert_allclose(xmat, data.xmat.reshape(-1, 3, 3), rtol=0, atol=1e-12)
        np.testing.assert_allclose(com_positions(tree, q), data.xipos, rtol=0, atol=1e-12)
        np.testing.assert_allclose(anchor, data.xanchor, rtol=0, atol=1e-12)
        np.testing.assert_allclose(axis, data.xaxis, rtol=0, atol=1e-12)


@needs_gymnasium
def test_half_cheetah_tables():
    tree = load_mjcf(asset("half_cheetah.xml"), ignore=("contacts", "limits"))
    assert tree.name == "cheetah" and tree.source == asset("half_cheetah.xml")
    assert tree.joint_type == (SLIDE, SLIDE) + (HINGE,) * 7
    assert tree.joint_names[:3] == ("rootx", "rootz", "rooty") and tree.body_names[:2] == ("world", "torso")
    assert tree.actuator_names == ("bthigh", "bshin", "bfoot", "fthigh", "fshin", "ffoot")
    np.testing.assert_array_equal(tree.parent, [-1, 0, 1, 2, 3, 1, 5, 6])
    np.testing.assert_array_equal(tree.joint_body, [1, 1, 1, 2, 3, 4, 5, 6, 7])
    np.testing.assert_array_equal(tree.actuator_joint, [3, 4, 5, 6, 7, 8])
    np.testing.assert_allclose(tree.gear, [120, 90, 60, 120, 60, 30])
    np.testing.assert_allclose(tree.stiffness, [0, 0, 0, 240, 180, 120, 180, 120, 60])
    np.testing.assert_allclose(tree.damping, [0, 0, 0, 6, 4.5, 3, 4.5, 3, 1.5])
    np.testing.assert_allclose(tree.armature, [0, 0, 0] + [0.1] * 6)
    assert tree.ctrllimited.all() and np.all(tree.ctrlrange == [-1, 1])
    assert not tree.limited.any()  # dropped knowingly; the ranges stay readable
    np.testing.assert_allclose(tree.joint_range[3], [-0.52, 1.05])
    assert np.isclose(tree.mass[1:].sum(), 14.0)  # settotalmass
    assert tree.integrator == "euler" and tree.timestep == 0.01
    np.testing.assert_allclose(tree.gravity, [0, 0, -9.81])


@needs_gymnasium
def test_reacher_ref_measures_q_from_the_initial_pose():
    tree = load_mjcf(asset("reacher.xml"), ignore=("limits", "ref"))
    assert tree.integrator == "rk4" and tree.joint_names[2:] == ("target_x", "target_y")
    np.testing.assert_allclose(tree.joint_range[2:], [[-0.37, 0.17], [-0.17, 0.37]], atol=1e-15)
    np.testing.assert_allclose(tree.springref[2:], [-0.1, 0.1], atol=1e-15)


# --- (b) refusals ---------------------------------------------------------------------------------------------------

@needs_gymnasium
@pytest.mark.parametrize("filename, words", [
    ("humanoid.xml", ("tendon 'left_hipknee'", "tendons are not simulated")),
    ("swimmer.xml", ("viscosity=0.1", "density=4000", "fluid forces")),
])
def test_gymnasium_refusals_name_the_element_and_the_file(filename, words):
    with pytest.raises(ValueError) as error:
        load_mjcf(asset(filename), ignore=("contacts", "limits"))
    message = str(error.value)
    assert asset(filename) in message
    for word in words:
        assert word in message


def mjcf(body, extra="", option=""):
    return (f'<mujoco model="small"><compiler angle="radian"/><option {option}/><worldbody>{body}</worldbody>'
            f"{extra}</mujoco>")


ARM = ('<body name="upper" pos="0 0 1"><joint name="shoulder" axis="0 1 0"/>'
       '<geom name="upper_geom" type="capsule" fromto="0 0 0 0 0 -0.5" size="0.05" contype="0" conaffinity="0"/>'
       '<body name="lower" pos="0 0 -0.5"><joint name="elbow" axis="0 1 0"/>'
       '<geom name="lower_geom" type="capsule" fromto="0 0 0 0 0 -0.5" size="0.05" contype="0" conaffinity="0"/>'
       "</body></body>")

SMALL_REFUSALS = {
    "tendon": (mjcf(ARM, '<tendon><fixed name="coupling"><joint joint="shoulder" coef="1"/>'
                         '<joint joint="elbow" coef="-1"/></fixed></tendon>'), ("tendon 'coupling'", "<tendon>")),
    "equality": (mjcf(ARM, '<equality><joint name="locked" joint1="shoulder" joint2="elbow"/></equality>'),
                 ("equality 'locked'", "<equality>")),
    "position actuator": (mjcf(ARM, '<actuator><position name="servo" joint="elbow" kp="10"/></actuator>'),
                          ("actuator 'servo'", "not a plain motor", "use <motor>")),
    "tendon actuator": (mjcf(ARM, '<tendon><fixed name="t"><joint joint="elbow" coef="1"/></fixed></tendon>'
                             '<actuator><motor name="pull" tendon="t"/></actuator>'), ("actuator 'pull'", "a tendon")),
    "limited ball joint": (mjcf(ARM.replace('<joint name="shoulder" axis="0 1 0"/>',
                                            '<joint name="shoulder" type="ball" range="0 1"/>')),
                           ("joint 'shoulder'", "is a limited ball joint", 'ignore=("limits",)')),
    "ball joint spring": (mjcf(ARM.replace('<joint name="shoulder" axis="0 1 0"/>',
                                           '<joint name="shoulder" type="ball" stiffness="1"/>')),
                          ("joint 'shoulder'", "ball or free joint with a spring")),
    "ref": (mjcf(ARM.replace('name="elbow"', 'name="elbow" ref="0.3"')), ("joint 'elbow'", "nonzero ref")),
    "frictionloss": (mjcf(ARM.replace('name="elbow"', 'name="elbow" frictionloss="0.1"')),
                     ("joint 'elbow'", "frictionloss")),
    "implicit": (mjcf(ARM, option='integrator="implicitfast"'), ("integrator=implicitfast", "RK4")),
    "gravcomp": (mjcf(ARM.replace('name="lower"', 'name="lower" gravcomp="1"')), ("body 'lower'", "gravcomp")),
    "force limit": (mjcf(ARM, '<actuator><motor name="m" joint="elbow" forcerange="-1 1"/></actuator>'),
                    ("actuator 'm'", "forcerange")),
}


@needs_mujoco
@pytest.mark.parametrize("case", sorted(SMALL_REFUSALS))
def test_small_refusals_name_the_element_and_the_file(case, tmp_path):
    xml, words = SMALL_REFUSALS[case]
    path = tmp_path / f"{case.replace(' ', '_')}.xml"
    path.write_text(xml)
    with pytest.raises(ValueError) as error:
        load_mjcf(str(path))
    message = str(error.value)
    assert str(path) in message
    for word in words:
        assert word in message
    with pytest.raises(ValueError, match="model 'small'"):  # an XML string is named by its model
        load_mjcf(xml)


@needs_mujoco
def test_limits_and_ref_are_accepted_when_ignored():
    limited = load_mjcf(mjcf(ARM.replace('name="elbow"', 'name="elbow" range="-1 1"')), ignore=("limits",))
    assert not limited.limited.any() and np.allclose(limited.joint_range[1], [-1, 1])
    shifted = load_mjcf(mjcf(ARM.replace('name="elbow"', 'name="elbow" ref="0.3" range="-1 1"')),
                        ignore=("limits", "ref"))
    np.testing.assert_allclose(shifted.joint_range[1], [-1.3, 0.7])


CONTACTS = ('<geom name="floor" type="plane" size="5 5 0.1"/>'
            '<body name="ball" pos="0 0 1"><joint name="drop" type="slide"/><geom name="bead" size="0.1"/></body>')


@needs_mujoco
def test_contacts_on_a_plane_load_and_others_are_refused_unless_ignored(tmp_path):
    path = tmp_path / "contacts.xml"
    path.write_text(mjcf(CONTACTS))
    tree = load_mjcf(str(path))
    assert [tree.geom_names[g] for g in tree.contact_pairs[0]] == ["floor", "bead"]
    two = CONTACTS.replace("</body>", '</body><body name="other" pos="0 0 2"><joint type="slide"/>'
                                      '<geom name="can" type="cylinder" size="0.1 0.1"/></body>')
    path.write_text(mjcf(two))
    with pytest.raises(ValueError) as error:
        load_mjcf(str(path))
    message = str(error.value)
    assert "geom 'bead' with geom 'can'" in message and str(path) in message
    assert 'ignore=("contacts",)' in message
    tree = load_mjcf(str(path), ignore=("contacts",))
    assert tree.joint_type == (SLIDE, SLIDE) and len(tree.contact_pairs) == 0
    # Masks that never meet, and a parent touching its child, are no contacts (MuJoCo filters both).
    load_mjcf(mjcf(two.replace('name="can"', 'name="can" contype="2" conaffinity="2"')))
    load_mjcf(mjcf('<body name="a"><joint/><geom size="1"/><body name="b"><joint/><geom size="1"/></body></body>'))
    with pytest.raises(ValueError, match="pair 'touch'"):
        load_mjcf(mjcf(ARM, '<contact><pair name="touch" geom1="upper_geom" geom2="lower_geom"/></contact>'))


@needs_mujoco
def test_bad_ignore_and_missing_file():
    with pytest.raises(ValueError, match="'springs' is not something load_mjcf can ignore"):
        load_mjcf(mjcf(ARM), ignore=("springs",))
    with pytest.raises(FileNotFoundError, match="no MJCF file"):
        load_mjcf("no_such_robot.xml")


def test_missing_mujoco_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco", None)
    with pytest.raises(ImportError, match="pip install mujoco"):
        load_mjcf(mjcf(ARM))


# --- (c) a Builder-made tree equals the tree loaded from the same MJCF ----------------------------------------------

CART_DOUBLE_PENDULUM = """
<mujoco model="cart_double_pendulum">
  <compiler angle="radian"/>
  <option gravity="0 0.5 -9.81" timestep="0.005" integrator="RK4"/>
  <worldbody>
    <body name="cart" pos="0.1 0 0.5" quat="1 0 0 0.2">
      <inertial pos="0 0 0" mass="2" diaginertia="0.02 0.03 0.04"/>
      <joint name="track" type="slide" axis="1 0.1 0" damping="0.5" armature="0.01"/>
      <body name="upper" pos="0 0.05 0" quat="0.9 0.1 0.2 0.3">
        <inertial pos="0.01 0 -0.3" quat="1 0.2 0 0" mass="0.7" diaginertia="0.011 0.012 0.002"/>
        <joint name="shoulder" type="hinge" axis="0 2 0.1" pos="0 0 0.02" damping="0.1" stiffness="3"
               springref="0.4"/>
        <body name="lower" pos="0 0 -0.6">
          <inertial pos="0 0.02 -0.25" mass="0.4" diaginertia="0.005 0.006 0.001"/>
          <joint name="elbow" type="hinge" axis="0.1 1 0" armature="0.002"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="push" joint="track" gear="25" ctrllimited="true" ctrlrange="-1 1"/>
    <motor name="twist" joint="elbow" gear="2"/>
  </actuator>
</mujoco>
"""


def build_cart_double_pendulum():
    b = Builder("cart_double_pendulum", gravity=(0, 0.5, -9.81), timestep=0.005, integrator="rk4")
    cart = b.body(0, pos=(0.1, 0, 0.5), quat=(1, 0, 0, 0.2), mass=2, inertia=(0.02, 0.03, 0.04), name="cart")
    track = b.slide(cart, axis=(1, 0.1, 0), damping=0.5, armature=0.01, name="track")
    upper = b.body(cart, pos=(0, 0.05, 0), quat=(0.9, 0.1, 0.2, 0.3), mass=0.7, ipos=(0.01, 0, -0.3),
                   iquat=(1, 0.2, 0, 0), inertia=(0.011, 0.012, 0.002), name="upper")
    b.hinge(upper, axis=(0, 2, 0.1), pos=(0, 0, 0.02), damping=0.1, stiffness=3, springref=0.4, name="shoulder")
    lower = b.body(upper, pos=(0, 0, -0.6), mass=0.4, ipos=(0, 0.02, -0.25), inertia=(0.005, 0.006, 0.001),
                   name="lower")
    elbow = b.hinge(lower, axis=(0.1, 1, 0), armature=0.002, name="elbow")
    b.motor(track, gear=25, ctrlrange=(-1, 1), name="push")
    b.motor(elbow, gear=2, name="twist")
    return b.build()


@needs_mujoco
def test_builder_equals_the_loaded_mjcf():
    built = build_cart_double_pendulum()
    loaded = load_mjcf(CART_DOUBLE_PENDULUM)
    for f in dataclasses.fields(built):
        mine, theirs = getattr(built, f.name), getattr(loaded, f.name)
        if f.name == "source":
            continue
        if isinstance(mine, np.ndarray):
            assert mine.shape == theirs.shape and mine.dtype.kind == theirs.dtype.kind, f.name
            np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-12, err_msg=f.name)
        else:
            assert mine == theirs, f.name
    # And the Builder's tree moves as MuJoCo moves the model.
    model = mujoco.MjModel.from_xml_string(CART_DOUBLE_PENDULUM)
    data = mujoco.MjData(model)
    data.qpos[:] = q = np.array([0.3, -1.2, 2.5])
    mujoco.mj_kinematics(model, data)
    np.testing.assert_allclose(body_poses(built, q)[0], data.xpos, rtol=0, atol=1e-12)
    np.testing.assert_allclose(com_positions(built, q), data.xipos, rtol=0, atol=1e-12)


def test_quaternion_helpers():
    a = quat_from_axis_angle((0, 0, 1), np.pi / 2)
    np.testing.assert_allclose(quat_rotate(a, (1, 0, 0)), (0, 1, 0), atol=1e-15)
    b = quat_from_axis_angle((1, 0, 0), 0.7)
    np.testing.assert_allclose(quat_to_matrix(quat_multiply(a, b)), quat_to_matrix(a) @ quat_to_matrix(b), atol=1e-15)
    with pytest.raises(ValueError, match="q has 2 entries but tree 'cart_double_pendulum' has 3 coordinates"):
        body_poses(build_cart_double_pendulum(), [0.0, 0.0])


# --- (d) the Builder refuses bad input by name ----------------------------------------------------------------------

def test_builder_refuses_bad_input():
    with pytest.raises(ValueError, match="integrator must be one of"):
        Builder("x", integrator="implicit")
    with pytest.raises(ValueError, match="timestep must be > 0"):
        Builder("x", timestep=0)
    b = Builder("arm")
    with pytest.raises(ValueError, match="body 1 'a': parent must be an earlier body"):
        b.body(parent=1, mass=1, name="a")
    with pytest.raises(ValueError, match="body 1 'a': mass must be >= 0"):
        b.body(mass=-1, name="a")
    with pytest.raises(ValueError, match=r"body 1 'a': inertia must be >= 0"):
        b.body(mass=1, inertia=(0.1, -0.1, 0.1), name="a")
    with pytest.raises(ValueError, match="body 1 'a': inertia .* is not a rigid body's"):
        b.body(mass=1, inertia=(0.1, 0.1, 0.5), name="a")
    with pytest.raises(ValueError, match="body 1 'a': quat must not be zero"):
        b.body(mass=1, quat=(0, 0, 0, 0), name="a")
    with pytest.raises(ValueError, match="body 1 'a': pos must be 3 numbers"):
        b.body(mass=1, pos=(0, 0), name="a")
    upper = b.body(mass=1, inertia=(0.1, 0.1, 0.1), name="upper")
    lower = b.body(upper, mass=1, inertia=(0.1, 0.1, 0.1), name="lower")
    with pytest.raises(ValueError, match="body 3: name 'upper' is already taken"):
        b.body(mass=1, name="upper")
    with pytest.raises(ValueError, match="hinge 0 'h': axis must not be zero"):
        b.hinge(upper, axis=(0, 0, 0), name="h")
    with pytest.raises(ValueError, match="hinge 0 'h': body must be a body added before"):
        b.hinge(0, name="h")
    with pytest.raises(ValueError, match="slide 0 's': damping must be >= 0"):
        b.slide(upper, damping=-1, name="s")
    with pytest.raises(ValueError, match="hinge 0 'h': range must be .* low < high"):
        b.hinge(upper, range=(1, -1), name="h")
    b.hinge(lower, name="elbow")
    with pytest.raises(ValueError, match="hinge 1 'shoulder': joints must be added in body order.*'lower'"):
        b.hinge(upper, name="shoulder")
    with pytest.raises(ValueError, match="motor 0 'm': joint must be a joint added before"):
        b.motor(3, name="m")
    with pytest.raises(ValueError, match="motor 0 'm': ctrlrange must be"):
        b.motor(0, ctrlrange=(2, 2), name="m")
    weightless = Builder("weightless")
    ghost = weightless.body(mass=0, name="ghost")
    weightless.hinge(ghost, name="spin")
    with pytest.raises(ValueError, match="joint 0 'spin' moves only massless bodies .*'ghost'"):
        weightless.build()
    shapes = Builder("shapes")
    one = shapes.body(mass=1, name="one")
    two = shapes.body(mass=1, name="two")
    ball, cube = shapes.sphere(one, 0.1), shapes.box(two, (0.1, 0.1, 0.1))
    rod, ghost = shapes.capsule(two, 0.05, 0.2), shapes.sphere(two, 0.1, contact=False)
    bead = shapes.sphere(two, 0.05)
    with pytest.raises(ValueError, match="pair: geom 3 is a sphere added with contact=False"):
        shapes.pair(ball, ghost)
    with pytest.raises(ValueError, match="pair: geoms 2 and 4 are on the same body .*'two'"):
        shapes.pair(rod, bead)
    with pytest.raises(ValueError, match=r"pair: a and b must be geoms added before \(0 to 4\), got 7"):
        shapes.pair(ball, 7)
    shapes.pair(ball, rod)
    shapes.pair(cube, ball)
    assert shapes.build().contact_pairs.tolist() == [[0, 2], [1, 0]]
