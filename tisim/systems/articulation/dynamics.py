"""The dynamics of a kinematic tree, written once on scalars: run by numpy on floats and by Taichi on expressions.

Every function here takes scalars (Python floats, numpy floats, or Taichi expressions while a kernel compiles) and
combines them with + - * / and the functions of ``ops``; vectors are tuples of 3 scalars and matrices tuples of rows.
The tree's structure (which body is whose parent, the joint types, the constant orientations and axes) is Python
data, so every loop unrolls at compile time and the step is straight-line code, which Taichi's reverse mode
differentiates reliably (no loads of local arrays before stores, no dynamic loops). ``ops.bind`` gives a shared
intermediate a variable of its own in Taichi, where an expression used twice would otherwise be rebuilt at each use.

The algorithms, in world coordinates with spatial vectors taken about the world origin (angular part first):
- forward kinematics in MuJoCo's order (a body's frame from its parent's, then its joints in turn, each about its
  axis through its anchor), recording each degree of freedom's motion subspace S_j: (e, a x e) for a hinge with
  world axis e through anchor a, (0, e) for a slide;
- the bias forces c(q, qd) = M qdd - tau at qdd = 0, gravity included, by the recursive Newton-Euler algorithm
  (RNEA): velocities and bias accelerations outward from the world (whose acceleration is -gravity), each body's
  force I a + v x* I v, then the forces summed inward and projected on the joints;
- the mass matrix M(q) by the composite-rigid-body algorithm (CRBA): M_ij = S_i . (I^c S_j), I^c the inertia of
  the subtree beyond joint j, for joint i on the path from the world to joint j;
- joint forces: springs -k (q - q_ref), damping -d qd, motors gear x ctrl (clamped to ctrlrange where limited);
- qacc from (M + diag(armature) [+ dt diag(damping)]) qacc = forces - c by an unrolled LDL^T factorization: the
  dt term is MuJoCo's semi-implicit Euler, which treats damping implicitly.
"""
from typing import Any, NamedTuple

import numpy as np

from tisim.systems.articulation.tree import HINGE


class Ops(NamedTuple):
    """The functions the dynamics needs beyond arithmetic: numpy's (NUMPY) or Taichi's (taichi_ops)."""

    sin: Any
    cos: Any
    bind: Any
    clamp: Any


NUMPY = Ops(np.sin, np.cos, lambda value: value, lambda x, low, high: min(max(x, low), high))


# ---- scalar arithmetic that folds the constants a tree's structure brings (axis-aligned frames: zeros and ones), so
# that Taichi compiles only the arithmetic that remains (its compile time grows faster than the code) ----------------
def constant(x):
    return isinstance(x, (int, float))


def mul(a, b):
    if constant(a) and constant(b):
        return a * b
    if constant(a):
        return 0.0 if a == 0 else b if a == 1 else -b if a == -1 else a * b
    if constant(b):
        return 0.0 if b == 0 else a if b == 1 else -a if b == -1 else a * b
    return a * b


def plus(a, b):
    if constant(a) and a == 0:
        return b
    if constant(b) and b == 0:
        return a
    return a + b


def minus(a, b):
    if constant(b) and b == 0:
        return a
    if constant(a) and a == 0:
        return b if constant(b) and b == 0 else -b
    return a - b


def total(terms):
    out = 0.0
    for term in terms:
        out = plus(out, term)
    return out


# ---- small vector algebra on tuples of scalars ---------------------------------------------------------------------
def add(a, b):
    return tuple(plus(x, y) for x, y in zip(a, b))


def sub(a, b):
    return tuple(minus(x, y) for x, y in zip(a, b))


def scale(s, a):
    return tuple(mul(s, x) for x in a)


def dot(a, b):
    return total(mul(x, y) for x, y in zip(a, b))


def cross(a, b):
    return (minus(mul(a[1], b[2]), mul(a[2], b[1])), minus(mul(a[2], b[0]), mul(a[0], b[2])),
            minus(mul(a[0], b[1]), mul(a[1], b[0])))


def matvec(m, v):
    return tuple(dot(row, v) for row in m)


def matmul(a, b):
    return tuple(tuple(total(mul(a[i][k], b[k][j]) for k in range(3)) for j in range(3)) for i in range(3))


def transpose(m):
    return tuple(tuple(m[j][i] for j in range(3)) for i in range(3))


def quat_matrix(quat):
    """The rotation matrix of a unit quaternion (w, x, y, z), as floats (orientations are constants)."""
    w, x, y, z = (float(c) for c in np.asarray(quat, dtype=float) / np.linalg.norm(quat))
    return ((1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)),
            (2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)),
            (2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)))


def axis_rotation(e, angle, ops):
    """Rodrigues: the rotation by `angle` about the unit axis e, I + sin [e]x + (1 - cos) [e]x^2."""
    s, c = ops.sin(angle), ops.cos(angle)
    k = ops.bind(1.0 - c)

    def entry(i, j, sign, axis):  # delta_ij c + k e_i e_j + sign s e_axis
        value = mul(k, mul(e[i], e[j]))
        value = plus(value, c) if i == j else value
        return value if axis is None else plus(value, mul(sign, mul(s, e[axis])))
    return ((entry(0, 0, 0, None), entry(0, 1, -1.0, 2), entry(0, 2, 1.0, 1)),
            (entry(1, 0, 1.0, 2), entry(1, 1, 0, None), entry(1, 2, -1.0, 0)),
            (entry(2, 0, -1.0, 1), entry(2, 1, 1.0, 0), entry(2, 2, 0, None)))


def bind(ops, value):
    """Each scalar of a scalar, vector or matrix given a variable of its own."""
    if isinstance(value, tuple):
        return tuple(bind(ops, part) for part in value)
    return ops.bind(value)


# ---- spatial algebra: motion (w, v) and force (n, f) about the world origin ------------------------------------------
def cross_motion(a, b):
    """a x b for motions a = (w, v), b = (w2, v2): (w x w2, w x v2 + v x w2)."""
    return cross(a[0], b[0]), add(cross(a[0], b[1]), cross(a[1], b[0]))


def cross_force(a, f):
    """a x* f for a motion a = (w, v) and a force f = (n, f): (w x n + v x f, w x f)."""
    return add(cross(a[0], f[0]), cross(a[1], f[1])), cross(a[0], f[1])


def apply_inertia(inertia, motion):
    """The momentum of a spatial inertia (A, h, m) moving at (w, v): (A w + h x v, m v - h x w), where h = m c
    (c the centre of mass) and A = I_c + m ((c . c) 1 - c c^T), the rotational inertia about the origin."""
    A, h, m = inertia
    w, v = motion
    return add(matvec(A, w), cross(h, v)), sub(scale(m, v), cross(h, w))


def add_inertia(a, b):
    return (tuple(add(ra, rb) for ra, rb in zip(a[0], b[0])), add(a[1], b[1]), a[2] + b[2])


def power(motion, force):
    return dot(motion[0], force[0]) + dot(motion[1], force[1])


# ---- the tree's structure, as Python data (constants at compile time) ------------------------------------------------
class Structure(NamedTuple):
    """What the dynamics takes as compile-time constants: the tree without its parameters."""

    parent: tuple  # body -> parent body (body 0 the world)
    joints_of: tuple  # body -> its joints, in order
    joint_type: tuple
    joint_axis: tuple  # unit vectors, body frame
    body_rotation: tuple  # body -> rotation matrix of its quat
    inertia_rotation: tuple  # body -> rotation matrix of its iquat
    actuator_joint: tuple
    ctrllimited: tuple
    ctrlrange: tuple
    integrator: str

    @property
    def n_bodies(self):
        return len(self.parent)

    @property
    def n_joints(self):
        return len(self.joint_type)

    def ancestors(self, joint):
        """The joints on the path from the world to `joint`, itself included, in order."""
        body = next(b for b, joints in enumerate(self.joints_of) if joint in joints)
        path = [j for j in self.joints_of[body] if j <= joint]
        body = self.parent[body]
        while body > 0:
            path = list(self.joints_of[body]) + path
            body = self.parent[body]
        return path


def structure_of(tree):
    joints_of = tuple(tuple(int(j) for j in np.flatnonzero(tree.joint_body == b)) for b in range(len(tree.parent)))
    return Structure(
        parent=tuple(int(p) for p in tree.parent), joints_of=joints_of, joint_type=tuple(tree.joint_type),
        joint_axis=tuple(tuple(float(c) for c in a / np.linalg.norm(a)) for a in tree.joint_axis),
        body_rotation=tuple(quat_matrix(q) for q in tree.quat),
        inertia_rotation=tuple(quat_matrix(q) for q in tree.iquat),
        actuator_joint=tuple(int(j) for j in tree.actuator_joint),
        ctrllimited=tuple(bool(x) for x in tree.ctrllimited),
        ctrlrange=tuple(tuple(float(c) for c in r) for r in tree.ctrlrange), integrator=tree.integrator)


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


def params_of(tree):
    return Params(tree.mass, tree.ipos, tree.inertia, tree.pos, tree.joint_pos, tree.stiffness, tree.springref,
                  tree.damping, tree.armature, tree.gear, tree.gravity)


# ---- the algorithms ----------------------------------------------------------------------------------------------
def kinematics(st, p, q, ops):
    """(rotation R_b and origin x_b of every body frame in the world, motion subspace S_j of every joint)."""
    identity = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
    R, x, S = [identity], [(0.0, 0.0, 0.0)], [None] * st.n_joints
    for b in range(1, st.n_bodies):
        parent = st.parent[b]
        rotation = matmul(R[parent], st.body_rotation[b])
        origin = add(x[parent], matvec(R[parent], tuple(p.offset[b])))
        for j in st.joints_of[b]:
            anchor = add(origin, matvec(rotation, tuple(p.anchor[j])))
            axis = matvec(rotation, st.joint_axis[j])
            if st.joint_type[j] == HINGE:
                turn = axis_rotation(axis, q[j], ops)
                rotation = bind(ops, matmul(turn, rotation))
                origin = add(anchor, matvec(turn, sub(origin, anchor)))
                S[j] = (axis, cross(anchor, axis))
            else:
                origin = add(origin, scale(q[j], axis))
                S[j] = ((0.0, 0.0, 0.0), axis)
            S[j] = bind(ops, S[j])
        R.append(bind(ops, rotation))
        x.append(bind(ops, origin))
    return R, x, S


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


def bias_and_mass(st, p, q, qd, ops):
    """(c(q, qd): the joint forces that hold the tree at qdd = 0 against gravity and the velocity terms (RNEA),
    M(q) as rows (CRBA))."""
    R, x, S = kinematics(st, p, q, ops)
    zero = (0.0, 0.0, 0.0)
    inertia = [None] + [body_inertia(st, p, R, x, b, ops) for b in range(1, st.n_bodies)]
    velocity = [(zero, zero)]
    accel = [(zero, scale(-1.0, tuple(p.gravity)))]  # the world accelerates up: gravity on every body
    force = [None]
    for b in range(1, st.n_bodies):
        v, a = velocity[st.parent[b]], accel[st.parent[b]]
        for j in st.joints_of[b]:
            a = add_motion(a, scale_motion(qd[j], cross_motion(v, S[j])))
            v = add_motion(v, scale_motion(qd[j], S[j]))
        v, a = bind(ops, v), bind(ops, a)
        velocity.append(v)
        accel.append(a)
        momentum = apply_inertia(inertia[b], v)
        force.append(add_motion(apply_inertia(inertia[b], a), cross_force(v, momentum)))
    # inward: each body's force and composite inertia gather its subtree's
    subtree_force, composite = list(force), list(inertia)
    for b in range(st.n_bodies - 1, 0, -1):
        subtree_force[b], composite[b] = bind(ops, subtree_force[b]), bind(ops, composite[b])
        parent = st.parent[b]
        if parent > 0:
            subtree_force[parent] = add_motion(subtree_force[parent], subtree_force[b])
            composite[parent] = add_inertia(composite[parent], composite[b])
    body_of = {j: b for b in range(st.n_bodies) for j in st.joints_of[b]}
    bias = [ops.bind(power(S[j], subtree_force[body_of[j]])) for j in range(st.n_joints)]
    n = st.n_joints
    M = [[0.0] * n for _ in range(n)]
    for j in range(n):
        pushed = apply_inertia(composite[body_of[j]], S[j])
        for i in st.ancestors(j):
            M[i][j] = M[j][i] = ops.bind(power(S[i], pushed))
    return bias, M


def add_motion(a, b):
    return add(a[0], b[0]), add(a[1], b[1])


def scale_motion(s, a):
    return scale(s, a[0]), scale(s, a[1])


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
    """Springs, damping and motors on every joint (the passive and actuator forces)."""
    forces = [-p.stiffness[j] * (q[j] - p.springref[j]) - p.damping[j] * qd[j] for j in range(st.n_joints)]
    for k, j in enumerate(st.actuator_joint):
        u = ops.clamp(ctrl[k], *st.ctrlrange[k]) if st.ctrllimited[k] else ctrl[k]
        forces[j] = forces[j] + p.gear[k] * u
    return forces


def acceleration(st, p, q, qd, ctrl, ops, implicit_dt=0.0):
    """qdd at (q, qd) under the actions ctrl; with implicit_dt = dt, MuJoCo's Euler form: damping implicit."""
    bias, M = bias_and_mass(st, p, q, qd, ops)
    n = st.n_joints
    matrix = [[M[i][k] + ((p.armature[i] + implicit_dt * p.damping[i]) if i == k else 0.0) for k in range(n)]
              for i in range(n)]
    forces = joint_forces(st, p, q, qd, ctrl, ops)
    return solve(matrix, [forces[i] - bias[i] for i in range(n)], ops)


def step(st, p, q, qd, ctrl, dt, ops):
    """One step of the tree's integrator: (q', qd')."""
    n = st.n_joints
    if st.integrator == "rk4":
        def rate(q_, qd_):
            return list(qd_), acceleration(st, p, q_, qd_, ctrl, ops)
        k1 = rate(q, qd)
        k2 = rate([q[i] + 0.5 * dt * k1[0][i] for i in range(n)], [qd[i] + 0.5 * dt * k1[1][i] for i in range(n)])
        k3 = rate([q[i] + 0.5 * dt * k2[0][i] for i in range(n)], [qd[i] + 0.5 * dt * k2[1][i] for i in range(n)])
        k4 = rate([q[i] + dt * k3[0][i] for i in range(n)], [qd[i] + dt * k3[1][i] for i in range(n)])
        return ([q[i] + dt / 6.0 * (k1[0][i] + 2.0 * k2[0][i] + 2.0 * k3[0][i] + k4[0][i]) for i in range(n)],
                [qd[i] + dt / 6.0 * (k1[1][i] + 2.0 * k2[1][i] + 2.0 * k3[1][i] + k4[1][i]) for i in range(n)])
    qdd = acceleration(st, p, q, qd, ctrl, ops, implicit_dt=dt)
    qd_next = [qd[i] + dt * qdd[i] for i in range(n)]
    return [q[i] + dt * qd_next[i] for i in range(n)], qd_next


def numpy_step(tree, q, qd, ctrl, dt=None):
    """One step in numpy (a referee of the Taichi step and a quick look at a tree)."""
    st, p = structure_of(tree), params_of(tree)
    q_next, qd_next = step(st, p, list(map(float, q)), list(map(float, qd)), list(map(float, ctrl)),
                           tree.timestep if dt is None else dt, NUMPY)
    return np.array(q_next), np.array(qd_next)


def numpy_acceleration(tree, q, qd, ctrl):
    """qdd in numpy, damping explicit (what MuJoCo's mj_forward reports as qacc without constraints)."""
    return np.array(acceleration(structure_of(tree), params_of(tree), list(map(float, q)), list(map(float, qd)),
                                 list(map(float, ctrl)), NUMPY))


__all__ = ["Ops", "NUMPY", "Structure", "Params", "structure_of", "params_of", "step", "acceleration",
           "numpy_step", "numpy_acceleration"]
