"""Scalar, vector, quaternion and spatial algebra on scalars that are Python floats, numpy floats or Taichi
expressions alike (the articulation's dynamics is written once on them): vectors are tuples of 3 scalars, matrices
tuples of rows, spatial motions (w, v) and forces (n, f) pairs of vectors about the world origin. Products with the
constants a tree's structure brings (axis-aligned frames: zeros and ones) are folded away, so that Taichi compiles
only the arithmetic that remains (its compile time grows faster than the code)."""
import numpy as np


# ---- scalars ------------------------------------------------------------------------------------------------------
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


# ---- quaternions (w, x, y, z) of expressions: ball and free joints ----------------------------------------------
def quat_normalized(quat, ops):
    norm = ops.bind(ops.sqrt(total(mul(c, c) for c in quat)))
    return tuple(ops.bind(c / norm) for c in quat)


def quat_product(a, b):
    """The Hamilton product a b (first turn by b, then by a)."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (total((mul(aw, bw), -mul(ax, bx), -mul(ay, by), -mul(az, bz))),
            total((mul(aw, bx), mul(ax, bw), mul(ay, bz), -mul(az, by))),
            total((mul(aw, by), -mul(ax, bz), mul(ay, bw), mul(az, bx))),
            total((mul(aw, bz), mul(ax, by), -mul(ay, bx), mul(az, bw))))


def quat_rotation(quat):
    """The rotation matrix of a unit quaternion of expressions."""
    w, x, y, z = quat

    def twice(a, b, c, d):  # 2 (a b + c d)
        return 2.0 * (mul(a, b) + mul(c, d))
    return ((1.0 - twice(y, y, z, z), twice(x, y, -w, z), twice(x, z, w, y)),
            (twice(x, y, w, z), 1.0 - twice(x, x, z, z), twice(y, z, -w, x)),
            (twice(x, z, -w, y), twice(y, z, w, x), 1.0 - twice(x, x, y, y)))


def quat_advance(quat, omega, h, ops):
    """MuJoCo's mju_quatIntegrate: the normalized quat turned by the angle h |omega| about omega (body frame).
    A tiny term under the root keeps the turn's derivative finite at omega = 0 (it shifts |omega| by < 1e-15)."""
    size = ops.bind(ops.sqrt(total(mul(c, c) for c in omega) + 1e-30))
    half = ops.bind(0.5 * h * size)
    along = ops.bind(ops.sin(half) / size)
    turn = (ops.cos(half),) + tuple(mul(along, c) for c in omega)
    return tuple(ops.bind(c) for c in quat_product(quat_normalized(quat, ops), turn))


def quat_rate(quat, omega):
    """dq/dt = q (0, omega) / 2 for an angular velocity omega in the body's frame."""
    return tuple(mul(0.5, c) for c in quat_product(quat, (0.0,) + tuple(omega)))


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


# ---- motions -------------------------------------------------------------------------------------------------------
def add_motion(a, b):
    return add(a[0], b[0]), add(a[1], b[1])


def scale_motion(s, a):
    return scale(s, a[0]), scale(s, a[1])


def sub_motion(a, b):
    return sub(a[0], b[0]), sub(a[1], b[1])


def sum_motions(motions):
    out = motions[0]
    for motion in motions[1:]:
        out = add_motion(out, motion)
    return out
