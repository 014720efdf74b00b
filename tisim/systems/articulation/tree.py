"""A kinematic tree of rigid bodies in generalized coordinates, as tables: what an Articulation simulates.

Conventions are MuJoCo's, so a tree read from a compiled MJCF model and one built in Python mean the same:
body 0 is the world; every other body has a parent (an earlier body), a frame placed in its parent's frame by pos
and quat (w, x, y, z), its centre of mass at ipos and its principal axes at iquat in its own frame, with the
principal moments `inertia`. A body moves relative to its parent through its joints, in the order given; a body
without joints is welded to its parent. A hinge turns about its axis (a unit vector in the body frame) through its
anchor `joint_pos` (in the body frame); a slide moves along its axis. Each joint is one degree of freedom: its
coordinate q (rad or m, zero at the reference pose qpos0 = 0 of the tables) and velocity qd.

A joint may have a spring (stiffness, toward springref), damping and armature (added to the mass matrix's diagonal);
a limited joint has a range. Actuators are motors: the force (or torque) on joint `actuator_joint` is gear x the
action, clamped first to ctrlrange where ctrllimited.
"""
from dataclasses import dataclass, field

import numpy as np

HINGE, SLIDE = "hinge", "slide"


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
    joint_type: tuple  # (njoint,) HINGE or SLIDE
    joint_body: np.ndarray  # (njoint,) int, in tree order: a body's joints consecutive, parents' first
    joint_axis: np.ndarray  # (njoint, 3) unit, body frame
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
    gravity: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))  # m/s^2
    timestep: float = 0.002  # s
    integrator: str = "euler"  # "euler" (MuJoCo's semi-implicit Euler, damping implicit) or "rk4"
    source: str = "<python>"  # the file it was read from, for messages
    body_names: tuple = ()  # (nbody,) str, "" where unnamed; body 0 is "world"; empty when not given
    joint_names: tuple = ()  # (njoint,) str, "" where unnamed; empty when not given
    actuator_names: tuple = ()  # (nactuator,) str, "" where unnamed; empty when not given
