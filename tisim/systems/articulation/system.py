"""Articulation: a kinematic tree of 3D rigid bodies with hinge, slide, ball and free joints, stepped as MuJoCo
steps it.

The tree (tisim/systems/articulation/tree.py) comes from an MJCF file through MuJoCo's own compiler (mjcf.py), or
from the Python builder (builder.py). Its state is the joint coordinates q and velocities qd; its action drives the
motors. Each step computes the mass matrix by the composite-rigid-body algorithm and the bias forces by recursive
Newton-Euler (dynamics.py, unrolled over the tree at compile time), solves for the joint accelerations and
integrates with the tree's integrator: MuJoCo's semi-implicit Euler, whose damping is implicit, or RK4. Without
contacts and joint limits, a rollout is MuJoCo's mj_step to rounding (tests/test_articulation.py).

Contacts (a sphere, capsule or box on a plane, or on another body's sphere, capsule or box) and the limits of hinges
and slides act through tisim's own laws, not MuJoCo's soft constraints: a penalty normal force with damping while
compressing (tisim.physics.contact.penalty_normal_soft_compression) and isotropic regularized Coulomb friction
(friction_isotropic_tanh), whose stiffness, damping, softness, friction and slip scale are parameters; a limit is
the same normal law against each end of the joint's range. With them, a rollout is not MuJoCo's, and its step must
resolve the penalty's stiffness (a smaller dt than MuJoCo's may be needed).

The masses, inertias, centres of mass, body offsets, joint anchors, springs, damping, armature, motor gears and
gravity are parameters, so every one has a gradient; the orientations of bodies and joint axes are structure. A
ball or free joint's quaternion is normalized wherever it is read and after every step, as MuJoCo does, so a
rollout may start from one of any length.
"""
import os

import numpy as np
import taichi as ti

from tisim.core.engine import System
from tisim.core.losses import Custom
from tisim.core.model import check_derived, check_run
from tisim.core.quantities import Quantity
from tisim.physics import contact
from tisim.systems.articulation import dynamics
from tisim.systems.articulation.algebra import add, matvec
from tisim.systems.articulation.builder import Builder
from tisim.systems.articulation.mjcf import IGNORABLE, load_mjcf
from tisim.systems.articulation.tree import BALL, FREE, Tree, reference_coordinates

DERIVED = {name: "it follows from the tree (tree=)"
           for name in ("n_bodies", "n_joints", "n_coordinates", "n_dofs", "n_actuators", "n_geoms")}


@ti.func
def let(value):
    """value bound to a variable of its own (a function's result is)."""
    return value


@ti.func
def component(vector, k: ti.template()):
    """Entry k of a Taichi vector (the subscript has to be compiled inside a Taichi function)."""
    return vector[k]


def bind(value):
    return value if isinstance(value, (int, float)) else let(value)


def friction(vt, fn, mu, eps):
    force = contact.friction_isotropic_tanh(ti.Vector([vt[0], vt[1], vt[2]]), fn, mu, eps)
    return tuple(component(force, k) for k in range(3))


TAICHI = dynamics.Ops(ti.sin, ti.cos, ti.sqrt, bind, lambda x, low, high: ti.min(ti.max(x, low), high), ti.max,
                      ti.select, contact.penalty_normal_soft_compression, friction)


def double_pendulum():
    """The default tree: two 1 kg rods of 0.5 m hanging from hinges about y, a motor at each hinge, MuJoCo's Euler."""
    rod = dict(mass=1.0, ipos=(0.0, 0.0, -0.25), inertia=(0.25 / 12, 0.25 / 12, 1e-3))  # m L^2 / 12 across the rod
    b = Builder("double_pendulum", timestep=0.01, integrator="euler")
    upper = b.body(0, pos=(0.0, 0.0, 1.0), **rod)
    lower = b.body(upper, pos=(0.0, 0.0, -0.5), **rod)
    for link in (upper, lower):
        b.motor(b.hinge(link, axis=(0.0, 1.0, 0.0), damping=0.05), gear=1.0)
    return b.build()


def take_tree(owner, tree, ignore, default):
    """A system's tree from its keywords: a Tree, an MJCF file path (read with `ignore`) or None (default()); refused
    by name where it cannot be one, or has no joint."""
    if not isinstance(ignore, (tuple, list)) or not all(isinstance(item, str) for item in ignore):
        raise TypeError(f"{owner}: ignore must be a tuple of names among {IGNORABLE}, got {ignore!r}")
    if ignore and not isinstance(tree, (str, os.PathLike)):
        raise ValueError(f"{owner}: ignore={tuple(ignore)!r} applies to an MJCF file (tree=path) only")
    if tree is None:
        tree = default()
    elif isinstance(tree, (str, os.PathLike)):
        try:
            tree = load_mjcf(tree, ignore=tuple(ignore))
        except (ValueError, FileNotFoundError) as error:
            raise type(error)(f"{owner}: tree={os.fspath(tree)[:80]!r}: {error}") from None
    elif not isinstance(tree, Tree):
        raise TypeError(f"{owner}: tree must be a Tree or an MJCF file path, got {type(tree).__name__}")
    if len(tree.joint_type) == 0:
        raise ValueError(f"{owner}: the tree {tree.name!r} ({tree.source}) has no joint: nothing moves")
    return tree


def tree_defaults(tree):
    """{parameter: value} of an Articulation (and of any system with its parameters) for a tree."""
    return dict(body_mass=tree.mass[1:], body_com=tree.ipos[1:], body_inertia=tree.inertia[1:],
                body_offset=tree.pos[1:], joint_anchor=tree.joint_pos, joint_stiffness=tree.stiffness,
                joint_springref=tree.springref, joint_damping=tree.damping, joint_armature=tree.armature,
                gear=tree.gear if len(tree.gear) else [0.0], gravity=tree.gravity,
                geom_friction=tree.geom_friction if len(tree.geom_type) else [0.0], **dynamics.contact_defaults(tree))


def tree_params(s, n_bodies, n_joints, n_motors, n_geoms, gravity=None, eps=None):
    """An Articulation's parameters as dynamics.Params of Taichi expressions (at compile time: bodies and joints
    are unrolled), read through the step context s; index 0 of the body tables is the world, never read. gravity
    (3 scalars) and eps, where given, stand for the parameters of those names (a system that has its own)."""
    def vector(name, i):
        value = s.param(name, i)
        return tuple(component(value, k) for k in range(3))
    zero = (0.0, 0.0, 0.0)
    return dynamics.Params(
        mass=[0.0] + [s.param("body_mass", b) for b in range(n_bodies)],
        com=[zero] + [vector("body_com", b) for b in range(n_bodies)],
        inertia=[zero] + [vector("body_inertia", b) for b in range(n_bodies)],
        offset=[zero] + [vector("body_offset", b) for b in range(n_bodies)],
        anchor=[vector("joint_anchor", j) for j in range(n_joints)],
        stiffness=[s.param("joint_stiffness", j) for j in range(n_joints)],
        springref=[s.param("joint_springref", j) for j in range(n_joints)],
        damping=[s.param("joint_damping", j) for j in range(n_joints)],
        armature=[s.param("joint_armature", j) for j in range(n_joints)],
        gear=[s.param("gear", k) for k in range(n_motors)],
        gravity=vector("gravity", 0) if gravity is None else gravity,
        friction=[bind(s.param("geom_friction", g)) for g in range(n_geoms)],
        contact_stiffness=bind(s.param("contact_stiffness")), contact_damping=bind(s.param("contact_damping")),
        contact_softness=bind(s.param("contact_softness")),
        eps=bind(s.param("eps") if eps is None else eps),
        limit_stiffness=bind(s.param("limit_stiffness")), limit_damping=bind(s.param("limit_damping")),
        limit_softness=bind(s.param("limit_softness")))


class Articulation(System):
    """A tree of 3D rigid bodies with hinge, slide, ball and free joints and motors (constructor keyword tree: a
    Tree, or an MJCF file path; ignore= is passed to load_mjcf). The default is a double pendulum."""

    PARAMS = (
        Quantity("body_mass", 1.0, "kg", "mass of each body", shape=("n_bodies",), bounds="[0, inf)"),
        Quantity("body_com", 0.0, "m", "centre of mass of each body, in its own frame", shape=("n_bodies", 3)),
        Quantity("body_inertia", 0.0, "kg m^2", "principal moments of inertia of each body about its centre of mass",
                 shape=("n_bodies", 3), bounds="[0, inf)"),
        Quantity("body_offset", 0.0, "m", "origin of each body's frame in its parent's frame",
                 shape=("n_bodies", 3)),
        Quantity("joint_anchor", 0.0, "m", "point on each joint's axis (a ball joint's centre), in its body's frame",
                 shape=("n_joints", 3)),
        Quantity("joint_stiffness", 0.0, "N m/rad or N/m", "spring on each joint toward its joint_springref",
                 shape=("n_joints",), bounds="[0, inf)"),
        Quantity("joint_springref", 0.0, "rad or m", "where each joint's spring is at rest", shape=("n_joints",)),
        Quantity("joint_damping", 0.0, "N m s/rad or N s/m", "viscous damping of each joint, on each of its "
                 "degrees of freedom", shape=("n_joints",), bounds="[0, inf)"),
        Quantity("joint_armature", 0.0, "kg m^2 or kg", "inertia added to each of a joint's degrees of freedom (a "
                 "rotor's, reflected)", shape=("n_joints",), bounds="[0, inf)"),
        Quantity("gear", 1.0, "N m or N", "force of each motor per unit of its action", shape=("n_actuators",)),
        Quantity("gravity", 0.0, "m/s^2", "gravitational acceleration vector (z up: (0, 0, -9.81))", shape=(3,)),
        Quantity("geom_friction", 1.0, "-", "Coulomb coefficient of each geom (a contact takes the larger of its "
                 "two geoms')", shape=("n_geoms",), bounds="[0, inf)"),
        Quantity("contact_stiffness", 1.0, "N/m", "normal force per metre of a contact's depth (below a plane, or "
                 "of two shapes into each other)",
                 bounds="[0, inf)"),
        Quantity("contact_damping", 0.0, "N s/m", "normal force per metre per second of a contact point's "
                 "approach, while it approaches", bounds="[0, inf)"),
        Quantity("contact_softness", 0.0, "m", "softplus length of the contact activation; 0 = hard switch",
                 bounds="[0, inf)"),
        Quantity("eps", 0.01, "m/s", "velocity scale of the regularized friction law", bounds="(0, inf)"),
        Quantity("limit_stiffness", 1.0, "N m/rad or N/m", "force of a joint limit per unit past it",
                 bounds="[0, inf)"),
        Quantity("limit_damping", 0.0, "N m s/rad or N s/m", "force of a joint limit per unit of velocity further "
                 "past it", bounds="[0, inf)"),
        Quantity("limit_softness", 0.0, "rad or m", "softplus length of a joint limit's activation; 0 = hard "
                 "switch", bounds="[0, inf)"),
    )
    STATE = (
        Quantity("q", 0.0, "rad, m or -", "the joints' coordinates, joint after joint: a hinge's angle or a slide's "
                 "shift from the reference pose, a ball joint's quaternion (w, x, y, z), a free joint's position and "
                 "quaternion", shape=("n_coordinates",)),
        Quantity("qd", 0.0, "rad/s or m/s", "the joints' velocities, joint after joint: a hinge's or a slide's rate, "
                 "a ball joint's angular velocity in its body's frame, a free joint's linear velocity in the world "
                 "and angular velocity in its body's frame", shape=("n_dofs",)),
    )
    ACTION = (Quantity("ctrl", 0.0, "-", "each motor's action (its force is gear x ctrl, ctrl clamped to its range; "
                       "a tree without motors has one that drives nothing)", shape=("n_actuators",)),)
    STRUCTURE = ("n_bodies", "n_joints", "n_coordinates", "n_dofs", "n_actuators", "n_geoms")

    def __init__(self, horizon, batch=1, dt=None, tree=None, ignore=(), **values):
        check_run("Articulation", horizon, batch, dt)
        check_derived("Articulation", values, DERIVED)
        tree = take_tree("Articulation", tree, ignore, double_pendulum)
        self.tree = tree
        self.DT = tree.timestep
        # a tree without motors (a URDF file has none) gets one action that drives nothing, as the action needs an entry
        structure = dynamics.structure_of(tree)
        super().__init__(horizon, batch, dt, n_bodies=len(tree.parent) - 1, n_joints=len(tree.joint_type),
                         n_coordinates=structure.n_coordinates, n_dofs=structure.n_dofs,
                         n_actuators=max(len(tree.actuator_joint), 1), n_geoms=max(len(tree.geom_type), 1),
                         **values)
        defaults = tree_defaults(tree)
        self.set_params(**{name: value for name, value in defaults.items() if name not in values})
        if any(kind in (BALL, FREE) for kind in tree.joint_type):  # a quaternion of zeros is no orientation
            self.set_initial_state(q=reference_coordinates(tree))

    def topology(self):
        return dict(structure=dynamics.structure_of(self.tree))

    def parameters(self, s):
        """The tree's parameters as dynamics.Params of Taichi expressions, read through the step context s."""
        return tree_params(s, self.n_bodies, self.n_joints, self.n_actuators, self.n_geoms)

    def read_state(self, s):
        q = [bind(s.state("q", c)) for c in range(self.n_coordinates)]
        qd = [bind(s.state("qd", d)) for d in range(self.n_dofs)]
        ctrl = [bind(s.action("ctrl", k)) for k in range(self.n_actuators)]
        return q, qd, ctrl

    def advance_tree(self, s):
        """The step, built at compile time from the tree's structure (called in step through ti.static)."""
        q, qd, ctrl = self.read_state(s)
        q_next, qd_next = dynamics.step(self.structure, self.parameters(s), q, qd, ctrl, s.dt, TAICHI)
        for c in range(self.n_coordinates):
            s.advance("q", c, q_next[c])
        for d in range(self.n_dofs):
            s.advance("qd", d, qd_next[d])
        return None

    def tree_rates(self, s):
        """The ODE behind the step, (q', qd') = (rate of q for qd, qdd) with damping explicit (for the continuous
        adjoint)."""
        q, qd, ctrl = self.read_state(s)
        qdd = dynamics.acceleration(self.structure, self.parameters(s), q, qd, ctrl, TAICHI)
        q_rate = dynamics.coordinate_rates(self.structure, q, qd)
        for c in range(self.n_coordinates):
            s.add_rate("q", c, q_rate[c])
        for d in range(self.n_dofs):
            s.add_rate("qd", d, qdd[d])
        return None

    def body_index(self, body):
        """A body's index in the tree from its index or its name (the world is 0 and cannot be asked for)."""
        names = self.tree.body_names
        if isinstance(body, str):
            if body not in names or body == "world":
                raise ValueError(f"{type(self).__name__}: no body named {body!r} in the tree {self.tree.name!r}; its "
                                 f"bodies: {[n for n in names[1:] if n]}")
            return names.index(body)
        if isinstance(body, bool) or not isinstance(body, (int, np.integer)) or not 1 <= body <= self.n_bodies:
            raise ValueError(f"{type(self).__name__}: body must be a name or an index from 1 to {self.n_bodies}, "
                             f"got {body!r}")
        return int(body)

    def point_target(self, body, target, point=(0.0, 0.0, 0.0), steps=None, weight=1.0):
        """A loss: sum over `steps` (default: the final step) of weight |p_t - target|^2, p_t the position in the world
        of `point` (in the frame of `body`, a name or an index) at step t. The target is 3 numbers (a place in the
        world) or a body (a name or an index): the origin of its frame at step t, which moves with the state (a
        target on slides, as the reacher's, whose place each batch element may start elsewhere). A fingertip that
        should reach a target; several of them, summed, make a path through targets. The tree's frames are taken at
        their initial values (body offsets, joint anchors), so this loss has gradients for states and actions, not
        for those parameters."""
        index = self.body_index(body)
        moving = isinstance(target, (str, int, np.integer)) and not isinstance(target, bool)
        other = self.body_index(target) if moving else None
        try:
            point, weight = np.asarray(point, dtype=float), float(weight)
            target = np.zeros(3) if moving else np.asarray(target, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"{type(self).__name__}.point_target: target must be 3 numbers or a body, point 3 "
                             f"numbers and weight a number, got {target!r}, {point!r} and {weight!r}") from None
        if target.shape != (3,) or point.shape != (3,) or not (np.isfinite(target).all() and np.isfinite(point).all()):
            raise ValueError(f"{type(self).__name__}.point_target: target must be 3 finite numbers or a body and "
                             f"point 3 finite numbers, got {target.tolist()!r} and {point.tolist()!r}")
        if not (np.isfinite(weight) and weight >= 0):
            raise ValueError(f"{type(self).__name__}.point_target: weight must be >= 0, got {weight!r}")
        structure, frames = dynamics.structure_of(self.tree), dynamics.params_of(self.tree)
        offset, n = self.index("q"), self.n_coordinates
        local, goal = tuple(float(c) for c in point), tuple(float(c) for c in target)

        def squared_distance(coordinates):
            q = [bind(component(coordinates, c)) for c in range(n)]
            R, origin, _ = dynamics.kinematics(structure, frames, q, TAICHI)
            where = add(origin[index], matvec(R[index], local))
            aim = goal if other is None else origin[other]
            return (weight * sum((where[k] - aim[k]) ** 2 for k in range(3)),)

        @ti.func
        def loss(x: ti.template(), theta: ti.template(), u: ti.template(), b, t):
            coordinates = ti.Vector([x[b, t, offset + c] for c in ti.static(range(n))])
            return ti.static(squared_distance(coordinates))[0]

        return Custom(loss, steps=steps)

    @ti.func
    def step(self, s: ti.template()):
        ti.static(self.advance_tree(s))

    @ti.func
    def rates(self, s: ti.template()):
        ti.static(self.tree_rates(s))


__all__ = ["Articulation", "double_pendulum"]
