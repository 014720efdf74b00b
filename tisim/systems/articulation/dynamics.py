"""The dynamics of a kinematic tree, written once on scalars: run by numpy on floats and by Taichi on expressions.

Every function here takes scalars (Python floats, numpy floats, or Taichi expressions while a kernel compiles) and
combines them with + - * / and the functions of ``ops``; vectors are tuples of 3 scalars and matrices tuples of rows.
The tree's structure (which body is whose parent, the joint types, the constant orientations and axes) is Python
data, so every loop unrolls at compile time and the step is straight-line code, which Taichi's reverse mode
differentiates reliably (no loads of local arrays before stores, no dynamic loops). ``ops.bind`` gives a shared
intermediate a variable of its own in Taichi, where an expression used twice would otherwise be rebuilt at each use.

The algorithms, in world coordinates with spatial vectors taken about the world origin (angular part first):
- forward kinematics in MuJoCo's order (a body's frame from its parent's, then its joints in turn, each about its
  axis through its anchor), recording each degree of freedom's motion subspace S_d: (e, a x e) for a hinge with
  world axis e through anchor a, (0, e) for a slide; a ball joint's three are turns about the axes of the body's
  frame through its anchor, a free joint's the world's axes (moves) and then the body's axes through its origin
  (turns), all as MuJoCo orders them;
- the bias forces c(q, qd) = M qdd - tau at qdd = 0, gravity included, by the recursive Newton-Euler algorithm
  (RNEA): velocities and bias accelerations outward from the world (whose acceleration is -gravity), each body's
  force I a + v x* I v, then the forces summed inward and projected on the degrees of freedom. A joint's velocity
  v_J = sum_d qd_d S_d adds v x v_J to the bias acceleration, v the velocity before it (its axes move with the
  body it moves, and v_J x v_J = 0; a free joint's moves and turns count as two joints, the moves first);
- the mass matrix M(q) by the composite-rigid-body algorithm (CRBA): M_ij = S_i . (I^c S_j), I^c the inertia of
  the subtree beyond degree of freedom j, for i on the path from the world to j;
- joint forces: springs -k (q - q_ref), damping -d qd, motors gear x ctrl (clamped to ctrlrange where limited);
- qacc from (M + diag(armature) [+ dt diag(damping)]) qacc = forces - c by an unrolled LDL^T factorization: the
  dt term is MuJoCo's semi-implicit Euler, which treats damping implicitly;
- positions advance as MuJoCo's mj_integratePos does: q + h qd for hinges and slides, a quaternion q times the turn
  by h omega (omega in the body's frame), normalized, for ball and free joints.
"""
from typing import Any, NamedTuple

import numpy as np

from tisim.physics.contact import friction_isotropic_tanh_value, penalty_normal_soft_compression_value
from tisim.systems.articulation.algebra import (
    add,
    add_inertia,
    add_motion,
    apply_inertia,
    axis_rotation,
    bind,
    constant,
    cross,
    cross_force,
    cross_motion,
    dot,
    matmul,
    matvec,
    minus,
    mul,
    plus,
    power,
    quat_advance,
    quat_matrix,
    quat_normalized,
    quat_rate,
    quat_rotation,
    scale,
    scale_motion,
    sub,
    sub_motion,
    sum_motions,
    total,
)
from tisim.systems.articulation.contacts import (
    box_box_force,
    box_pairs,
    box_touch_force,
    box_touches,
    capsule_box_force,
    capsule_boxes,
    contact_defaults,
    contact_force,
    contact_points,
    touch_force,
    touches,
)
from tisim.systems.articulation.tree import BALL, COORDINATES, DOFS, FREE, HINGE, SLIDE


class Ops(NamedTuple):
    """The functions the dynamics needs beyond arithmetic: numpy's (NUMPY) or Taichi's (the system's)."""

    sin: Any
    cos: Any
    sqrt: Any
    bind: Any
    clamp: Any
    max: Any
    select: Any  # (condition, a, b) -> a where the condition holds, else b
    normal_force: Any  # (depth, normal velocity, stiffness, damping, softness) -> the contact's normal force
    friction: Any  # (tangential velocity 3-tuple, normal force, mu, eps) -> the friction force 3-tuple


def _numpy_friction(vt, fn, mu, eps):
    return tuple(friction_isotropic_tanh_value(np.array(vt, dtype=float), fn, mu, eps))


NUMPY = Ops(np.sin, np.cos, np.sqrt, lambda value: value, lambda x, low, high: min(max(x, low), high), max,
            lambda condition, a, b: a if condition else b, penalty_normal_soft_compression_value, _numpy_friction)


# ---- the tree's structure, as Python data (constants at compile time) ------------------------------------------------
class Structure(NamedTuple):
    """What the dynamics takes as compile-time constants: the tree without its parameters."""

    parent: tuple  # body -> parent body (body 0 the world)
    joints_of: tuple  # body -> its joints, in order
    joint_type: tuple
    joint_axis: tuple  # unit vectors, body frame
    joint_coordinates: tuple  # joint -> the indices of its coordinates in q
    joint_dofs: tuple  # joint -> the indices of its degrees of freedom in qd
    body_rotation: tuple  # body -> rotation matrix of its quat
    inertia_rotation: tuple  # body -> rotation matrix of its iquat
    actuator_joint: tuple
    ctrllimited: tuple
    ctrlrange: tuple
    integrator: str
    contacts: tuple = ()  # Contact points (below), constants of the tree's geoms
    touches: tuple = ()  # Touch pairs of two bodies' spheres and capsules
    box_touches: tuple = ()  # BoxTouch pairs of a sphere and another body's box
    capsule_boxes: tuple = ()  # CapsuleBox pairs of a capsule and another body's box
    box_pairs: tuple = ()  # BoxBox pairs of two bodies' boxes
    limits: tuple = ()  # (joint, low, high) of each limited hinge and slide

    @property
    def n_bodies(self):
        return len(self.parent)

    @property
    def n_joints(self):
        return len(self.joint_type)

    @property
    def n_dofs(self):
        return sum(len(dofs) for dofs in self.joint_dofs)

    @property
    def n_coordinates(self):
        return sum(len(coordinates) for coordinates in self.joint_coordinates)

    @property
    def dof_joint(self):
        return tuple(j for j, dofs in enumerate(self.joint_dofs) for _ in dofs)

    @property
    def dof_body(self):
        return tuple(b for b, joints in enumerate(self.joints_of) for j in joints for _ in self.joint_dofs[j])

    def ancestors(self, dof):
        """The degrees of freedom on the path from the world to `dof`, itself included, in order."""
        body = self.dof_body[dof]
        path = [d for j in self.joints_of[body] for d in self.joint_dofs[j] if d <= dof]
        body = self.parent[body]
        while body > 0:
            path = [d for j in self.joints_of[body] for d in self.joint_dofs[j]] + path
            body = self.parent[body]
        return path


def structure_of(tree):
    joints_of = tuple(tuple(int(j) for j in np.flatnonzero(tree.joint_body == b)) for b in range(len(tree.parent)))
    coordinates, dofs, nq, nv = [], [], 0, 0
    for kind in tree.joint_type:
        coordinates.append(tuple(range(nq, nq + COORDINATES[kind])))
        dofs.append(tuple(range(nv, nv + DOFS[kind])))
        nq, nv = nq + COORDINATES[kind], nv + DOFS[kind]
    return Structure(
        parent=tuple(int(p) for p in tree.parent), joints_of=joints_of, joint_type=tuple(tree.joint_type),
        joint_axis=tuple(tuple(float(c) for c in a / np.linalg.norm(a)) for a in tree.joint_axis),
        joint_coordinates=tuple(coordinates), joint_dofs=tuple(dofs),
        body_rotation=tuple(quat_matrix(q) for q in tree.quat),
        inertia_rotation=tuple(quat_matrix(q) for q in tree.iquat),
        actuator_joint=tuple(int(j) for j in tree.actuator_joint),
        ctrllimited=tuple(bool(x) for x in tree.ctrllimited),
        ctrlrange=tuple(tuple(float(c) for c in r) for r in tree.ctrlrange), integrator=tree.integrator,
        contacts=contact_points(tree), touches=touches(tree), box_touches=box_touches(tree),
        capsule_boxes=capsule_boxes(tree), box_pairs=box_pairs(tree),
        limits=tuple((j, float(tree.joint_range[j][0]), float(tree.joint_range[j][1]))
                     for j in np.flatnonzero(tree.limited)))


class Params(NamedTuple):
    """The tree's parameters, indexed as the tables (bodies from 0, the world; its entries are not read)."""

    mass: Any  # body -> scalar
    com: Any  # body -> 3-vector, body frame (MuJoCo's ipos)
    inertia: Any  # body -> 3 principal moments
    offset: Any  # body -> 3-vector, in the parent's frame (MuJoCo's pos)
    anchor: Any  # joint -> 3-vector, body frame (MuJoCo's jnt_pos)
    stiffness: Any
    springref: Any
    damping: Any
    armature: Any
    gear: Any  # actuator -> scalar
    gravity: Any  # 3-vector
    friction: Any = ()  # geom -> Coulomb coefficient
    contact_stiffness: Any = 0.0  # N/m
    contact_damping: Any = 0.0  # N s/m, while compressing
    contact_softness: Any = 0.0  # m
    eps: Any = 0.01  # m/s, the regularized friction's velocity scale
    limit_stiffness: Any = 0.0  # N m/rad or N/m
    limit_damping: Any = 0.0  # N m s/rad or N s/m
    limit_softness: Any = 0.0  # rad or m


def params_of(tree, **contact):
    """The tree's parameters; the contact law's (contact_stiffness, contact_damping, contact_softness, eps) are
    not the tree's: pass them, or take the Articulation's defaults (contact_defaults)."""
    values = dict(contact_defaults(tree), **contact)
    return Params(tree.mass, tree.ipos, tree.inertia, tree.pos, tree.joint_pos, tree.stiffness, tree.springref,
                  tree.damping, tree.armature, tree.gear, tree.gravity, tree.geom_friction, **values)


# ---- the algorithms ----------------------------------------------------------------------------------------------
def kinematics(st, p, q, ops):
    """(rotation R_b and origin x_b of every body frame in the world, motion subspace S_d of every degree of
    freedom)."""
    identity = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
    zero = (0.0, 0.0, 0.0)
    R, x, S = [identity], [zero], [None] * st.n_dofs
    for b in range(1, st.n_bodies):
        parent = st.parent[b]
        rotation = matmul(R[parent], st.body_rotation[b])
        origin = add(x[parent], matvec(R[parent], tuple(p.offset[b])))
        turning = []  # (dofs, anchor) of ball and free joints, whose axes are the body's final frame's
        for j in st.joints_of[b]:
            kind, dofs, coordinates = st.joint_type[j], st.joint_dofs[j], st.joint_coordinates[j]
            if kind == FREE:  # MuJoCo's free body: its frame is its coordinates, the body's pos and quat unread
                origin = tuple(q[c] for c in coordinates[:3])
                rotation = bind(ops, quat_rotation(quat_normalized([q[c] for c in coordinates[3:]], ops)))
                for k in range(3):
                    S[dofs[k]] = (zero, tuple(1.0 if i == k else 0.0 for i in range(3)))
                turning.append((dofs[3:], origin))
                continue
            anchor = add(origin, matvec(rotation, tuple(p.anchor[j])))
            if kind == BALL:
                turn = quat_rotation(quat_normalized([q[c] for c in coordinates], ops))
                rotation = bind(ops, matmul(rotation, turn))
                origin = sub(anchor, matvec(rotation, tuple(p.anchor[j])))
                turning.append((dofs, anchor))
                continue
            axis = matvec(rotation, st.joint_axis[j])
            angle = q[coordinates[0]]
            if kind == HINGE:
                turn = axis_rotation(axis, angle, ops)
                rotation = bind(ops, matmul(turn, rotation))
                origin = add(anchor, matvec(turn, sub(origin, anchor)))
                S[dofs[0]] = bind(ops, (axis, cross(anchor, axis)))
            else:
                origin = add(origin, scale(angle, axis))
                S[dofs[0]] = bind(ops, (zero, axis))
        for dofs, anchor in turning:  # as MuJoCo's comPos: turns about the body's axes, through the anchor
            for k, d in enumerate(dofs):
                axis = (rotation[0][k], rotation[1][k], rotation[2][k])
                S[d] = bind(ops, (axis, cross(anchor, axis)))
        R.append(bind(ops, rotation))
        x.append(bind(ops, origin))
    return R, x, S


def body_velocities(st, qd, S, ops):
    """Each body's spatial velocity (w, v) in the world, v the velocity of the body's point at the world origin (a
    point y of body b moves at v + w x y), from the motion subspaces S of kinematics."""
    zero = (0.0, 0.0, 0.0)
    velocity = [(zero, zero)]
    for b in range(1, st.n_bodies):
        moved = [scale_motion(qd[d], S[d]) for j in st.joints_of[b] for d in st.joint_dofs[j]]
        velocity.append(bind(ops, add_motion(velocity[st.parent[b]], sum_motions(moved))) if moved
                        else velocity[st.parent[b]])
    return velocity


def body_inertia(st, p, R, x, b, ops):
    """Body b's spatial inertia (A, h, m) about the world origin."""
    m = p.mass[b]
    c = add(x[b], matvec(R[b], tuple(p.com[b])))
    Ri = matmul(R[b], st.inertia_rotation[b])  # principal axes in the world
    Ic = tuple(tuple(total(mul(mul(Ri[k][n], Ri[l][n]), p.inertia[b][n]) for n in range(3)) for l in range(3))
               for k in range(3))
    cc = ops.bind(dot(c, c))
    A = tuple(tuple(plus(Ic[k][l], mul(m, minus(cc if k == l else 0.0, mul(c[k], c[l])))) for l in range(3))
              for k in range(3))
    return bind(ops, (A, scale(m, c), m))


def bias_and_mass(st, p, q, qd, ops, external=()):
    """(c(q, qd): the joint forces that hold the tree at qdd = 0 against gravity, the velocity terms and the
    `external` forces (RNEA), M(q) as rows (CRBA)). external: [(body, spatial force (y x f, f) about the world
    origin)], forces from outside the tree (a soft body's push)."""
    R, x, S = kinematics(st, p, q, ops)
    zero = (0.0, 0.0, 0.0)
    inertia = [None] + [body_inertia(st, p, R, x, b, ops) for b in range(1, st.n_bodies)]
    velocity = [(zero, zero)]
    accel = [(zero, scale(-1.0, tuple(p.gravity)))]  # the world accelerates up: gravity on every body
    force = [None]
    for b in range(1, st.n_bodies):
        v, a = velocity[st.parent[b]], accel[st.parent[b]]
        for j in st.joints_of[b]:
            dofs = st.joint_dofs[j]
            for group in ((dofs[:3], dofs[3:]) if st.joint_type[j] == FREE else (dofs,)):
                moved = sum_motions([scale_motion(qd[d], S[d]) for d in group])
                a = add_motion(a, cross_motion(v, moved))
                v = add_motion(v, moved)
        v, a = bind(ops, v), bind(ops, a)
        velocity.append(v)
        accel.append(a)
        momentum = apply_inertia(inertia[b], v)
        force.append(add_motion(apply_inertia(inertia[b], a), cross_force(v, momentum)))
    for body, push in external:  # as a contact: the joints need that much less to hold the body
        force[body] = sub_motion(force[body], push)
    for point in st.contacts:  # a contact pushes its body: the force the joints need to hold it is that much less
        force[point.body] = sub_motion(force[point.body], contact_force(point, p, R, x, velocity, ops))
    # two bodies touching push each other apart, equally and oppositely
    pushes = [(t.body_a, t.body_b, touch_force(t, p, R, x, velocity, ops)) for t in st.touches]
    pushes += [(t.body, t.box_body, box_touch_force(t, p, R, x, velocity, ops)) for t in st.box_touches]
    pushes += [(t.body, t.box_body, capsule_box_force(t, p, R, x, velocity, ops)) for t in st.capsule_boxes]
    pushes += [(t.body_a, t.body_b, box_box_force(t, p, R, x, velocity, ops)) for t in st.box_pairs]
    for a, b, push in pushes:  # the world (body 0) holds whatever pushes it
        if a > 0:
            force[a] = sub_motion(force[a], push)
        if b > 0:
            force[b] = add_motion(force[b], push)
    # inward: each body's force and composite inertia gather its subtree's
    subtree_force, composite = list(force), list(inertia)
    for b in range(st.n_bodies - 1, 0, -1):
        subtree_force[b], composite[b] = bind(ops, subtree_force[b]), bind(ops, composite[b])
        parent = st.parent[b]
        if parent > 0:
            subtree_force[parent] = add_motion(subtree_force[parent], subtree_force[b])
            composite[parent] = add_inertia(composite[parent], composite[b])
    body_of = st.dof_body
    bias = [ops.bind(power(S[d], subtree_force[body_of[d]])) for d in range(st.n_dofs)]
    n = st.n_dofs
    M = [[0.0] * n for _ in range(n)]
    for j in range(n):
        pushed = apply_inertia(composite[body_of[j]], S[j])
        for i in st.ancestors(j):
            M[i][j] = M[j][i] = ops.bind(power(S[i], pushed))
    return bias, M


def solve(M, rhs, ops):
    """x with M x = rhs for a symmetric positive-definite M, by an unrolled LDL^T factorization."""
    n = len(rhs)
    L = [[0.0] * n for _ in range(n)]
    D = [0.0] * n
    for j in range(n):
        D[j] = ops.bind(minus(M[j][j], total(mul(mul(L[j][k], L[j][k]), D[k]) for k in range(j))))
        for i in range(j + 1, n):
            below = minus(M[i][j], total(mul(mul(L[i][k], L[j][k]), D[k]) for k in range(j)))
            L[i][j] = 0.0 if constant(below) and below == 0 else ops.bind(below / D[j])
    y = [0.0] * n
    for i in range(n):
        y[i] = ops.bind(minus(rhs[i], total(mul(L[i][k], y[k]) for k in range(i))))
    out = [0.0] * n
    for i in range(n - 1, -1, -1):
        out[i] = ops.bind(minus(y[i] / D[i], total(mul(L[k][i], out[k]) for k in range(i + 1, n))))
    return out


def joint_forces(st, p, q, qd, ctrl, ops):
    """Springs, damping and motors on every degree of freedom (the passive and actuator forces)."""
    forces = [-p.damping[st.dof_joint[d]] * qd[d] for d in range(st.n_dofs)]
    for j, kind in enumerate(st.joint_type):
        if kind in (HINGE, SLIDE):
            d, c = st.joint_dofs[j][0], st.joint_coordinates[j][0]
            forces[d] = forces[d] - p.stiffness[j] * (q[c] - p.springref[j])
    for j, low, high in st.limits:  # the contact law against each end of the range
        d, c = st.joint_dofs[j][0], st.joint_coordinates[j][0]
        beyond = ops.normal_force(q[c] - high, -qd[d], p.limit_stiffness, p.limit_damping, p.limit_softness)
        below = ops.normal_force(low - q[c], qd[d], p.limit_stiffness, p.limit_damping, p.limit_softness)
        forces[d] = forces[d] - beyond + below
    for k, j in enumerate(st.actuator_joint):
        u = ops.clamp(ctrl[k], *st.ctrlrange[k]) if st.ctrllimited[k] else ctrl[k]
        d = st.joint_dofs[j][0]
        forces[d] = forces[d] + p.gear[k] * u
    return forces


def acceleration(st, p, q, qd, ctrl, ops, implicit_dt=0.0, external=()):
    """qdd at (q, qd) under the actions ctrl (and the external forces, as bias_and_mass takes them); with
    implicit_dt = dt, MuJoCo's Euler form: damping implicit."""
    bias, M = bias_and_mass(st, p, q, qd, ops, external)
    n = st.n_dofs
    joint = st.dof_joint
    matrix = [[M[i][k] + ((p.armature[joint[i]] + implicit_dt * p.damping[joint[i]]) if i == k else 0.0)
               for k in range(n)] for i in range(n)]
    forces = joint_forces(st, p, q, qd, ctrl, ops)
    return solve(matrix, [forces[i] - bias[i] for i in range(n)], ops)


def advance_positions(st, q, qd, h, ops):
    """MuJoCo's mj_integratePos: q moved by the velocities qd for a time h."""
    out = list(q)
    for kind, coordinates, dofs in zip(st.joint_type, st.joint_coordinates, st.joint_dofs):
        if kind == FREE:
            for k in range(3):
                out[coordinates[k]] = q[coordinates[k]] + h * qd[dofs[k]]
            quat = quat_advance([q[c] for c in coordinates[3:]], [qd[d] for d in dofs[3:]], h, ops)
            for c, value in zip(coordinates[3:], quat):
                out[c] = value
        elif kind == BALL:
            quat = quat_advance([q[c] for c in coordinates], [qd[d] for d in dofs], h, ops)
            for c, value in zip(coordinates, quat):
                out[c] = value
        else:
            out[coordinates[0]] = q[coordinates[0]] + h * qd[dofs[0]]
    return out


def coordinate_rates(st, q, qd):
    """dq/dt for the velocities qd: qd itself for hinges and slides, the quaternion's rate for ball and free joints."""
    out = [0.0] * st.n_coordinates
    for kind, coordinates, dofs in zip(st.joint_type, st.joint_coordinates, st.joint_dofs):
        turns = 3 if kind == FREE else 0
        for k in range(turns):
            out[coordinates[k]] = qd[dofs[k]]
        if kind in (BALL, FREE):
            rate = quat_rate([q[c] for c in coordinates[turns:]], [qd[d] for d in dofs[turns:]])
            for c, value in zip(coordinates[turns:], rate):
                out[c] = value
        else:
            out[coordinates[0]] = qd[dofs[0]]
    return out


def lie_tangent(st, qd, increment, h):
    """The velocities qd as a Runge-Kutta stage's slope in the coordinates of its increment h * increment: a ball
    or free joint's angular velocity omega becomes omega + theta x omega / 2 + theta x (theta x omega) / 12, theta
    the stage's turn (the inverse of exp's derivative to second order, Munthe-Kaas' Runge-Kutta on the rotation
    group, as MuJoCo 4 integrates quaternions by RK4); hinges' and slides' velocities are their own slopes."""
    out = list(qd)
    for kind, dofs in zip(st.joint_type, st.joint_dofs):
        if kind in (BALL, FREE):
            turn = dofs[-3:]
            theta = tuple(mul(h, increment[d]) for d in turn)
            omega = tuple(qd[d] for d in turn)
            once = cross(theta, omega)
            twice = cross(theta, once)
            for k, d in enumerate(turn):
                out[d] = plus(plus(omega[k], mul(0.5, once[k])), mul(1.0 / 12.0, twice[k]))
    return out


# Runge-Kutta's classic tableau: stage i starts from the state moved by h sum_j A[i][j] (slope, acceleration of
# stage j), the step moves it by h sum_j B[j] (...), as MuJoCo's mj_RungeKutta does.
RK4_A = ((0.5,), (0.0, 0.5), (0.0, 0.0, 1.0))
RK4_B = (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0)


def step(st, p, q, qd, ctrl, dt, ops, external=()):
    """One step of the tree's integrator: (q', qd'), the external forces (as bias_and_mass takes them) held over
    the step."""
    n = st.n_dofs
    if st.integrator == "rk4":
        slopes, accelerations = [list(qd)], [acceleration(st, p, q, qd, ctrl, ops, external=external)]

        def combine(weights, rows):
            return [total(mul(w, row[i]) for w, row in zip(weights, rows)) for i in range(n)]
        for weights in RK4_A:
            increment = [ops.bind(x) for x in combine(weights, slopes)]
            q_stage = bind(ops, tuple(advance_positions(st, q, increment, dt, ops)))
            a_stage = combine(weights, accelerations)
            qd_stage = [ops.bind(qd[i] + dt * a_stage[i]) for i in range(n)]
            accelerations.append(acceleration(st, p, list(q_stage), qd_stage, ctrl, ops, external=external))
            slopes.append(lie_tangent(st, qd_stage, increment, dt))
        a_step = combine(RK4_B, accelerations)
        return (advance_positions(st, q, combine(RK4_B, slopes), dt, ops),
                [qd[i] + dt * a_step[i] for i in range(n)])
    qdd = acceleration(st, p, q, qd, ctrl, ops, implicit_dt=dt, external=external)
    qd_next = [ops.bind(qd[i] + dt * qdd[i]) for i in range(n)]
    return advance_positions(st, q, qd_next, dt, ops), qd_next
# An Articulation's parameters as the fields of Params (the body tables there include the world, first)
_NAMES = dict(body_mass="mass", body_com="com", body_inertia="inertia", body_offset="offset", joint_anchor="anchor",
              joint_stiffness="stiffness", joint_springref="springref", joint_damping="damping",
              joint_armature="armature", gear="gear", gravity="gravity", geom_friction="friction")
_BODIES = ("body_mass", "body_com", "body_inertia", "body_offset")


def params_with(tree, values):
    """params_of(tree) with some replaced by an Articulation's parameter values ({name: value}, as `sim.params`
    gives them for one batch element)."""
    p = params_of(tree)._asdict()
    for name, value in (values or {}).items():
        value = np.asarray(value, dtype=float)
        if name in _BODIES:
            value = np.concatenate([np.zeros((1,) + value.shape[1:]), value])
        p[_NAMES.get(name, name)] = value if value.ndim else float(value)
    return Params(**p)


def numpy_step(tree, q, qd, ctrl, dt=None, params=None):
    """One step in numpy (a referee of the Taichi step and a quick look at a tree); `params` may replace some of the
    tree's parameters by name, as params_with does (the contact and limit laws take contact_defaults' values)."""
    st, p = structure_of(tree), params_with(tree, params)
    q_next, qd_next = step(st, p, list(map(float, q)), list(map(float, qd)), list(map(float, ctrl)),
                           tree.timestep if dt is None else dt, NUMPY)
    return np.array(q_next), np.array(qd_next)


def numpy_acceleration(tree, q, qd, ctrl):
    """qdd in numpy, damping explicit (what MuJoCo's mj_forward reports as qacc without constraints)."""
    return np.array(acceleration(structure_of(tree), params_of(tree), list(map(float, q)), list(map(float, qd)),
                                 list(map(float, ctrl)), NUMPY))


__all__ = ["Ops", "NUMPY", "Structure", "Params", "structure_of", "params_of", "step", "acceleration",
           "coordinate_rates", "numpy_step", "numpy_acceleration"]
