"""A kinematic tree of rigid bodies in generalized coordinates, as tables: what an Articulation simulates.

Conventions are MuJoCo's, so a tree read from a compiled MJCF model and one built in Python mean the same:
body 0 is the world; every other body has a parent (an earlier body), a frame placed in its parent's frame by pos
and quat (w, x, y, z), its centre of mass at ipos and its principal axes at iquat in its own frame, with the
principal moments `inertia`. A body moves relative to its parent through its joints, in the order given; a body
without joints is welded to its parent. A hinge turns about its axis (a unit vector in the body frame) through its
anchor `joint_pos` (in the body frame); a slide moves along its axis. Each is one degree of freedom: its coordinate
q (rad or m, zero at the reference pose of the tables) and velocity qd. A ball joint turns the body freely about its
anchor: its coordinates are a unit quaternion (w, x, y, z) from the frame before it to the body's, its three
velocities the angular velocity in the body's frame. A free joint (only on a child of the world, and its body's only
joint) places the body anywhere: its coordinates are the position of the body's frame in the world and its
orientation as a quaternion (7 numbers), its velocities the linear velocity of the frame's origin in the world and
the angular velocity in the body's frame (6 numbers). A free body's pos and quat are its initial pose. These are
MuJoCo's coordinates (qpos, qvel), so a state reads the same in both.

A joint may have damping and armature (added to the mass matrix's diagonal), the same on each of its degrees of
freedom; a hinge or slide may have a spring (stiffness, toward springref) and a range, if it is limited.
Actuators are motors on hinges and slides: the force (or torque) on joint `actuator_joint` is gear x the action,
clamped first to ctrlrange where ctrllimited.

Geoms give bodies shapes that touch: a sphere (size[0] its radius), a capsule (size[0] its radius, size[1] half
the length of its axis, the geom frame's z), a box (size its half-widths), each placed on its body by pos and quat
in the body frame; and planes on the world (the geom frame's xy-plane, its z the normal pointing out). Each pair
in `contact_pairs` may touch, with Coulomb friction max(friction of the two geoms): a plane, then a shape on a
moving body; or two spheres, capsules or boxes of different bodies.
"""
from dataclasses import dataclass, field

import numpy as np

HINGE, SLIDE, BALL, FREE = "hinge", "slide", "ball", "free"
PLANE, SPHERE, CAPSULE, BOX = "plane", "sphere", "capsule", "box"
DOFS = {HINGE: 1, SLIDE: 1, BALL: 3, FREE: 6}  # velocities of each kind of joint
COORDINATES = {HINGE: 1, SLIDE: 1, BALL: 4, FREE: 7}  # its coordinates (a quaternion has 4 numbers for 3 turns)


@dataclass
class Tree:
    """The tables of a kinematic tree (see the module docstring); arrays over bodies include the world (index 0)."""

    name: str
    parent: np.ndarray  # (nbody,) int, parent[0] = -1
    pos: np.ndarray  # (nbody, 3) m
    quat: np.ndarray  # (nbody, 4) w, x, y, z
    mass: np.ndarray  # (nbody,) kg
    ipos: np.ndarray  # (nbody, 3) m
    iquat: np.ndarray  # (nbody, 4)
    inertia: np.ndarray  # (nbody, 3) kg m^2, principal moments
    joint_type: tuple  # (njoint,) HINGE, SLIDE, BALL or FREE
    joint_body: np.ndarray  # (njoint,) int, in tree order: a body's joints consecutive, parents' first
    joint_axis: np.ndarray  # (njoint, 3) unit, body frame (not read for ball and free joints)
    joint_pos: np.ndarray  # (njoint, 3) m, body frame
    limited: np.ndarray  # (njoint,) bool
    joint_range: np.ndarray  # (njoint, 2)
    stiffness: np.ndarray  # (njoint,) N m / rad or N / m
    springref: np.ndarray  # (njoint,)
    damping: np.ndarray  # (njoint,) N m s / rad or N s / m
    armature: np.ndarray  # (njoint,) kg m^2 or kg
    actuator_joint: np.ndarray  # (nactuator,) int
    gear: np.ndarray  # (nactuator,)
    ctrllimited: np.ndarray  # (nactuator,) bool
    ctrlrange: np.ndarray  # (nactuator, 2)
    geom_type: tuple = ()  # (ngeom,) PLANE, SPHERE, CAPSULE or BOX
    geom_body: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))  # (ngeom,)
    geom_pos: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))  # (ngeom, 3) m, body frame
    geom_quat: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))  # (ngeom, 4)
    geom_size: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))  # (ngeom, 3) m
    geom_friction: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (ngeom,) Coulomb coefficient
    contact_pairs: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=int))  # (npair, 2) geoms
    gravity: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))  # m/s^2
    timestep: float = 0.002  # s
    integrator: str = "euler"  # "euler" (MuJoCo's semi-implicit Euler, damping implicit) or "rk4"
    source: str = "<python>"  # the file it was read from, for messages
    body_names: tuple = ()  # (nbody,) str, "" where unnamed; body 0 is "world"; empty when not given
    joint_names: tuple = ()  # (njoint,) str, "" where unnamed; empty when not given
    actuator_names: tuple = ()  # (nactuator,) str, "" where unnamed; empty when not given
    geom_names: tuple = ()  # (ngeom,) str, "" where unnamed; empty when not given


def reference_coordinates(tree):
    """q at the tree's reference pose: 0 for hinges and slides, the unit quaternion (1, 0, 0, 0) for a ball joint,
    the body's pos and quat for a free joint."""
    q = []
    for kind, body in zip(tree.joint_type, tree.joint_body):
        if kind == FREE:
            q += list(tree.pos[body]) + list(tree.quat[body] / np.linalg.norm(tree.quat[body]))
        elif kind == BALL:
            q += [1.0, 0.0, 0.0, 0.0]
        else:
            q.append(0.0)
    return np.array(q, dtype=float)
