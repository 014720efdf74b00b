"""Build a `Tree` in Python, without MuJoCo, with the same conventions as a compiled MJCF model.

    b = Builder("pendulum", gravity=(0, 0, -9.81), timestep=0.01, integrator="euler")
    link = b.body(parent=0, pos=(0, 0, 0), mass=1.0, ipos=(0, 0, -0.5), inertia=(0.1, 0.1, 0.01))
    hinge = b.hinge(link, axis=(0, 1, 0), damping=0.1)
    b.motor(hinge, gear=1.0, ctrlrange=(-2, 2))
    tree = b.build()

Bodies are numbered as they are added, from 1 (0 is the world), each after its parent; joints are numbered as they
are added and must be added in body order (a body's joints together, bodies in order), which is how MuJoCo numbers
them. Quaternions (w, x, y, z) and joint axes are normalized, as MuJoCo's compiler does. Every bad input is refused
with a ValueError naming the body, joint or motor and the argument.
"""
import numpy as np

from tisim.systems.articulation.tree import BALL, BOX, CAPSULE, FREE, HINGE, PLANE, SLIDE, SPHERE, Tree

_INTEGRATORS = ("euler", "rk4")


def _vector(value, size, what):
    try:
        v = np.array(value, dtype=float).reshape(-1)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{what} must be {size} numbers, got {value!r}") from error
    if v.shape != (size,):
        raise ValueError(f"{what} must be {size} numbers, got {value!r}")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{what} must be finite, got {value!r}")
    return v


def _unit(value, size, what):
    v = _vector(value, size, what)
    norm = np.linalg.norm(v)
    if norm < 1e-12:
        raise ValueError(f"{what} must not be zero, got {value!r}")
    return v / norm


def _number(value, what, minimum=None):
    try:
        x = float(value)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{what} must be a number, got {value!r}") from error
    if not np.isfinite(x):
        raise ValueError(f"{what} must be finite, got {value!r}")
    if minimum is not None and x < minimum:
        raise ValueError(f"{what} must be >= {minimum:g}, got {value!r}")
    return x


def _interval(value, what):
    lo, hi = _vector(value, 2, what)
    if not lo < hi:
        raise ValueError(f"{what} must be (low, high) with low < high, got {value!r}")
    return np.array([lo, hi])


class Builder:
    """Collects bodies, joints and motors, then `build()` returns the Tree (see the module docstring)."""

    def __init__(self, name, gravity=(0.0, 0.0, -9.81), timestep=0.002, integrator="euler"):
        if not isinstance(name, str) or not name:
            raise ValueError(f"Builder: name must be a nonempty string, got {name!r}")
        self.name = name
        self.gravity = _vector(gravity, 3, f"Builder '{name}': gravity")
        self.timestep = _number(timestep, f"Builder '{name}': timestep")
        if self.timestep <= 0:
            raise ValueError(f"Builder '{name}': timestep must be > 0, got {timestep!r}")
        if integrator not in _INTEGRATORS:
            raise ValueError(f"Builder '{name}': integrator must be one of {_INTEGRATORS}, got {integrator!r}")
        self.integrator = integrator
        self._bodies = [dict(name="world", parent=-1, pos=np.zeros(3), quat=np.array([1.0, 0, 0, 0]), mass=0.0,
                             ipos=np.zeros(3), iquat=np.array([1.0, 0, 0, 0]), inertia=np.zeros(3))]
        self._joints = []
        self._motors = []
        self._geoms = []
        self._pairs = []

    def _body_label(self, b):
        name = self._bodies[b]["name"]
        return f"body {b} '{name}'" if name else f"body {b}"

    def _joint_label(self, j):
        name = self._joints[j]["name"]
        return f"joint {j} '{name}'" if name else f"joint {j}"

    @staticmethod
    def _check_name(name, taken, kind):
        if not isinstance(name, str):
            raise ValueError(f"{kind}: name must be a string, got {name!r}")
        if name and name in taken:
            raise ValueError(f"{kind}: name '{name}' is already taken")
        return name

    def body(self, parent=0, pos=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0), mass=0.0, ipos=(0.0, 0.0, 0.0),
             inertia=(0.0, 0.0, 0.0), iquat=(1.0, 0.0, 0.0, 0.0), name=""):
        """Add a body and return its index: its frame at pos, quat in its parent's; its centre of mass at ipos and
        principal axes at iquat in its own frame; mass (kg) and principal moments of inertia (kg m^2)."""
        index = len(self._bodies)
        name = self._check_name(name, {b["name"] for b in self._bodies}, f"body {index}")
        label = f"body {index} '{name}'" if name else f"body {index}"
        if isinstance(parent, bool) or not isinstance(parent, (int, np.integer)) or not 0 <= parent < index:
            raise ValueError(f"{label}: parent must be an earlier body (0 to {index - 1}, 0 is the world), "
                             f"got {parent!r}")
        mass = _number(mass, f"{label}: mass", minimum=0.0)
        inertia = _vector(inertia, 3, f"{label}: inertia")
        if np.any(inertia < 0):
            raise ValueError(f"{label}: inertia must be >= 0 (principal moments), got {tuple(inertia)}")
        a, b, c = np.sort(inertia)
        if a + b < c * (1 - 1e-9):
            raise ValueError(f"{label}: inertia {tuple(inertia)} is not a rigid body's: each principal moment must "
                             "be at most the sum of the other two")
        self._bodies.append(dict(name=name, parent=int(parent), pos=_vector(pos, 3, f"{label}: pos"),
                                 quat=_unit(quat, 4, f"{label}: quat"), mass=mass,
                                 ipos=_vector(ipos, 3, f"{label}: ipos"), iquat=_unit(iquat, 4, f"{label}: iquat"),
                                 inertia=inertia))
        return index

    def _joint(self, kind, body, axis, pos, damping, armature, stiffness, springref, range, name):
        index = len(self._joints)
        name = self._check_name(name, {j["name"] for j in self._joints}, f"joint {index}")
        label = f"{kind} {index} '{name}'" if name else f"{kind} {index}"
        if isinstance(body, bool) or not isinstance(body, (int, np.integer)) or not 1 <= body < len(self._bodies):
            raise ValueError(f"{label}: body must be a body added before (1 to {len(self._bodies) - 1}; the world "
                             f"cannot move), got {body!r}")
        if self._joints and self._joints[-1]["body"] > body:
            raise ValueError(f"{label}: joints must be added in body order (a body's joints together, bodies in "
                             f"order), but {self._joint_label(index - 1)} is on a later body, "
                             f"{self._body_label(self._joints[-1]['body'])}")
        if any(j["body"] == body and j["type"] == FREE for j in self._joints):
            raise ValueError(f"{label}: {self._body_label(body)} is free already: a free joint must be its body's "
                             "only joint")
        self._joints.append(dict(
            name=name, type=kind, body=int(body), axis=_unit(axis, 3, f"{label}: axis"),
            pos=_vector(pos, 3, f"{label}: pos"),
            damping=_number(damping, f"{label}: damping", minimum=0.0),
            armature=_number(armature, f"{label}: armature", minimum=0.0),
            stiffness=_number(stiffness, f"{label}: stiffness", minimum=0.0),
            springref=_number(springref, f"{label}: springref"),
            limited=range is not None,
            range=np.zeros(2) if range is None else _interval(range, f"{label}: range")))
        return index

    def hinge(self, body, axis=(0.0, 0.0, 1.0), pos=(0.0, 0.0, 0.0), damping=0.0, armature=0.0, stiffness=0.0,
              springref=0.0, range=None, name=""):
        """Add a hinge to `body` and return its joint index: a turn about axis (body frame) through pos; range in
        rad, None for an unlimited joint."""
        return self._joint(HINGE, body, axis, pos, damping, armature, stiffness, springref, range, name)

    def slide(self, body, axis=(0.0, 0.0, 1.0), pos=(0.0, 0.0, 0.0), damping=0.0, armature=0.0, stiffness=0.0,
              springref=0.0, range=None, name=""):
        """Add a slide to `body` and return its joint index: a shift along axis (body frame); range in m."""
        return self._joint(SLIDE, body, axis, pos, damping, armature, stiffness, springref, range, name)

    def ball(self, body, pos=(0.0, 0.0, 0.0), damping=0.0, armature=0.0, name=""):
        """Add a ball joint to `body` and return its joint index: the body turns freely about pos (body frame);
        its coordinates are a quaternion, its velocities the angular velocity in the body's frame."""
        return self._joint(BALL, body, (0.0, 0.0, 1.0), pos, damping, armature, 0.0, 0.0, None, name)

    def free(self, body, damping=0.0, armature=0.0, name=""):
        """Make `body` free and return its joint index: it must be a child of the world, and the joint its only
        one. Its coordinates are the position of its frame and its orientation (a quaternion), starting at the
        body's pos and quat; its velocities the linear velocity in the world and the angular one in its frame."""
        label = f"free joint {len(self._joints)}" + (f" '{name}'" if isinstance(name, str) and name else "")
        if isinstance(body, (int, np.integer)) and not isinstance(body, bool) and 1 <= body < len(self._bodies):
            if self._bodies[body]["parent"] != 0:
                raise ValueError(f"{label}: {self._body_label(body)} is not a child of the world (its parent is "
                                 f"{self._body_label(self._bodies[body]['parent'])}): only a body hanging from the "
                                 "world can be free")
            if any(j["body"] == body for j in self._joints):
                raise ValueError(f"{label}: {self._body_label(body)} has joints already: a free joint must be its "
                                 "body's only joint")
        return self._joint(FREE, body, (0.0, 0.0, 1.0), (0.0, 0.0, 0.0), damping, armature, 0.0, 0.0, None, name)

    def motor(self, joint, gear=1.0, ctrlrange=None, name=""):
        """Add a motor on `joint` and return its actuator index: force or torque gear x action, the action clamped
        to ctrlrange first (None: not clamped)."""
        index = len(self._motors)
        name = self._check_name(name, {a["name"] for a in self._motors}, f"motor {index}")
        label = f"motor {index} '{name}'" if name else f"motor {index}"
        if isinstance(joint, bool) or not isinstance(joint, (int, np.integer)) or not 0 <= joint < len(self._joints):
            raise ValueError(f"{label}: joint must be a joint added before (0 to {len(self._joints) - 1}), "
                             f"got {joint!r}")
        if self._joints[joint]["type"] not in (HINGE, SLIDE):
            raise ValueError(f"{label}: {self._joint_label(joint)} is a {self._joints[joint]['type']} joint: "
                             "motors drive hinges and slides only")
        self._motors.append(dict(name=name, joint=int(joint), gear=_number(gear, f"{label}: gear"),
                                 ctrllimited=ctrlrange is not None,
                                 ctrlrange=np.zeros(2) if ctrlrange is None else _interval(ctrlrange,
                                                                                           f"{label}: ctrlrange")))
        return index

    def _geom(self, kind, body, size, pos, quat, friction, contact, name):
        index = len(self._geoms)
        name = self._check_name(name, {g["name"] for g in self._geoms}, f"{kind} {index}")
        label = f"{kind} {index} '{name}'" if name else f"{kind} {index}"
        if isinstance(body, bool) or not isinstance(body, (int, np.integer)) or not 0 <= body < len(self._bodies):
            raise ValueError(f"{label}: body must be a body added before (0 to {len(self._bodies) - 1}), got {body!r}")
        if kind != PLANE and body == 0:
            raise ValueError(f"{label}: a {kind} belongs to a moving body (1 to {len(self._bodies) - 1}), not the "
                             "world")
        count = {PLANE: 0, SPHERE: 1, CAPSULE: 2, BOX: 3}[kind]
        what = ("its size", "radius", "radius and half_length", "half_widths")[count]
        size = _vector(size, count, f"{label}: {what}")
        if np.any(size <= 0):
            raise ValueError(f"{label}: its sizes must be > 0, got {tuple(size)}")
        size = np.concatenate([size, np.zeros(3 - count)])
        self._geoms.append(dict(name=name, type=kind, body=int(body), size=size, pos=_vector(pos, 3, f"{label}: pos"),
                                quat=_unit(quat, 4, f"{label}: quat"),
                                friction=_number(friction, f"{label}: friction", minimum=0.0), contact=bool(contact)))
        return index

    def plane(self, pos=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0), friction=1.0, name=""):
        """Add a plane to the world and return its geom index: the xy-plane of the frame (pos, quat), its z the
        normal; every sphere, capsule and box added with contact=True may touch it."""
        return self._geom(PLANE, 0, (), pos, quat, friction, True, name)

    def sphere(self, body, radius, pos=(0.0, 0.0, 0.0), friction=1.0, contact=True, name=""):
        """Add a sphere of `radius` centred at pos (body frame) to `body` and return its geom index."""
        return self._geom(SPHERE, body, (radius,), pos, (1.0, 0.0, 0.0, 0.0), friction, contact, name)

    def capsule(self, body, radius, half_length, pos=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0), friction=1.0,
                contact=True, name=""):
        """Add a capsule to `body` and return its geom index: a cylinder of `radius` along the z of the frame
        (pos, quat) from -half_length to half_length, capped by half-spheres."""
        return self._geom(CAPSULE, body, (radius, half_length), pos, quat, friction, contact, name)

    def box(self, body, half_widths, pos=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0), friction=1.0, contact=True,
            name=""):
        """Add a box of half_widths (x, y, z of the frame (pos, quat)) to `body` and return its geom index."""
        return self._geom(BOX, body, half_widths, pos, quat, friction, contact, name)

    def pair(self, a, b):
        """Let geoms a and b touch: two spheres, capsules or boxes added with contact=True, of different bodies.
        (Each sphere, capsule and box touches every plane by itself.)"""
        for g in (a, b):
            if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or not 0 <= g < len(self._geoms):
                raise ValueError(f"Builder '{self.name}': pair: a and b must be geoms added before (0 to "
                                 f"{len(self._geoms) - 1}), got {g!r}")
            if self._geoms[g]["type"] == PLANE or not self._geoms[g]["contact"]:
                raise ValueError(f"Builder '{self.name}': pair: geom {g} is a {self._geoms[g]['type']}"
                                 f"{'' if self._geoms[g]['contact'] else ' added with contact=False'}; only spheres, "
                                 "capsules and boxes that make contact touch each other")
        if self._geoms[a]["body"] == self._geoms[b]["body"]:
            raise ValueError(f"Builder '{self.name}': pair: geoms {a} and {b} are on the same body "
                             f"({self._body_label(self._geoms[a]['body'])}); they cannot touch")
        self._pairs.append((int(a), int(b)))

    def build(self):
        """The Tree. Refuses a joint that nothing it moves gives inertia to (a singular mass matrix)."""
        nbody = len(self._bodies)
        parent = np.array([b["parent"] for b in self._bodies], dtype=int)
        # Whether each body's subtree holds any mass or inertia.
        heavy = np.array([b["mass"] > 0 or np.any(b["inertia"] > 0) for b in self._bodies])
        for b in range(nbody - 1, 0, -1):
            heavy[parent[b]] |= heavy[b]
        for j, joint in enumerate(self._joints):
            if not heavy[joint["body"]] and joint["armature"] == 0:
                raise ValueError(f"Builder '{self.name}': {self._joint_label(j)} moves only massless bodies "
                                 f"({self._body_label(joint['body'])} and its descendants) and has no armature: "
                                 "its mass matrix would be singular; give a body mass or the joint armature")

        def rows(items, key, shape, dtype=float):
            return np.array([i[key] for i in items], dtype=dtype).reshape(shape)

        nj, na, ng = len(self._joints), len(self._motors), len(self._geoms)
        planes = [g for g, geom in enumerate(self._geoms) if geom["type"] == PLANE]
        shapes = [g for g, geom in enumerate(self._geoms) if geom["type"] != PLANE and geom["contact"]]
        pairs = [(p, g) for p in planes for g in shapes] + self._pairs
        return Tree(
            name=self.name,
            parent=parent,
            pos=rows(self._bodies, "pos", (nbody, 3)),
            quat=rows(self._bodies, "quat", (nbody, 4)),
            mass=rows(self._bodies, "mass", (nbody,)),
            ipos=rows(self._bodies, "ipos", (nbody, 3)),
            iquat=rows(self._bodies, "iquat", (nbody, 4)),
            inertia=rows(self._bodies, "inertia", (nbody, 3)),
            joint_type=tuple(j["type"] for j in self._joints),
            joint_body=rows(self._joints, "body", (nj,), int),
            joint_axis=rows(self._joints, "axis", (nj, 3)),
            joint_pos=rows(self._joints, "pos", (nj, 3)),
            limited=rows(self._joints, "limited", (nj,), bool),
            joint_range=rows(self._joints, "range", (nj, 2)),
            stiffness=rows(self._joints, "stiffness", (nj,)),
            springref=rows(self._joints, "springref", (nj,)),
            damping=rows(self._joints, "damping", (nj,)),
            armature=rows(self._joints, "armature", (nj,)),
            actuator_joint=rows(self._motors, "joint", (na,), int),
            gear=rows(self._motors, "gear", (na,)),
            ctrllimited=rows(self._motors, "ctrllimited", (na,), bool),
            ctrlrange=rows(self._motors, "ctrlrange", (na, 2)),
            geom_type=tuple(g["type"] for g in self._geoms),
            geom_body=rows(self._geoms, "body", (ng,), int),
            geom_pos=rows(self._geoms, "pos", (ng, 3)),
            geom_quat=rows(self._geoms, "quat", (ng, 4)),
            geom_size=rows(self._geoms, "size", (ng, 3)),
            geom_friction=rows(self._geoms, "friction", (ng,)),
            contact_pairs=np.array(pairs, dtype=int).reshape(-1, 2),
            gravity=self.gravity.copy(),
            timestep=self.timestep,
            integrator=self.integrator,
            source=f"<Builder '{self.name}'>",
            body_names=tuple(b["name"] for b in self._bodies),
            joint_names=tuple(j["name"] for j in self._joints),
            actuator_names=tuple(a["name"] for a in self._motors),
            geom_names=tuple(g["name"] for g in self._geoms),
        )
