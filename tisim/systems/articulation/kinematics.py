"""Forward kinematics of a `Tree` in numpy, and quaternion helpers (w, x, y, z).

The order of operations is MuJoCo's, so the poses agree with its kinematics to round-off: a body's frame is its
parent's frame composed with (pos, quat); then each of the body's joints, in order, moves the frame: a hinge turns it
by q about the joint's axis through the joint's anchor, a slide shifts it by q along the axis, a ball joint turns it
by its quaternion about the anchor; a free joint's coordinates are the frame itself. A joint's anchor and axis in
the world are taken from the frame as it stands just before that joint moves it.
"""
import numpy as np

from tisim.systems.articulation.tree import BALL, COORDINATES, FREE, HINGE


def quat_normalize(q):
    """q / |q|."""
    q = np.asarray(q, dtype=float)
    return q / np.linalg.norm(q)


def quat_multiply(a, b):
    """The Hamilton product a b: first turn by b, then by a."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array([aw * bw - ax * bx - ay * by - az * bz,
                     aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw])


def quat_from_axis_angle(axis, angle):
    """The turn by `angle` (rad) about the unit vector `axis`."""
    half = 0.5 * angle
    return np.concatenate([[np.cos(half)], np.sin(half) * np.asarray(axis, dtype=float)])


def quat_to_matrix(q):
    """The rotation matrix of the unit quaternion q (columns: the turned frame's axes)."""
    w, x, y, z = q
    return np.array([[w * w + x * x - y * y - z * z, 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), w * w - x * x + y * y - z * z, 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), w * w - x * x - y * y + z * z]])


def quat_rotate(q, v):
    """The vector v turned by the unit quaternion q."""
    return quat_to_matrix(q) @ np.asarray(v, dtype=float)


def _check_q(tree, q):
    q = np.asarray(q, dtype=float).reshape(-1)
    n = sum(COORDINATES[kind] for kind in tree.joint_type)
    if q.shape[0] != n:
        raise ValueError(f"q has {q.shape[0]} entries but tree '{tree.name}' has {n} coordinates")
    return q


def _walk(tree, q):
    """Frames of all bodies (xpos, xquat) and the world anchor and axis of every joint."""
    q = _check_q(tree, q)
    nbody, njoint = len(tree.parent), len(tree.joint_type)
    xpos = np.zeros((nbody, 3))
    xquat = np.zeros((nbody, 4))
    xquat[0] = (1.0, 0.0, 0.0, 0.0)
    anchor = np.zeros((njoint, 3))
    axis = np.zeros((njoint, 3))
    joints_of = [[] for _ in range(nbody)]
    for j, b in enumerate(tree.joint_body):
        joints_of[int(b)].append(j)
    first = np.cumsum([0] + [COORDINATES[kind] for kind in tree.joint_type])  # each joint's first coordinate
    for b in range(1, nbody):
        p = int(tree.parent[b])
        pos = xpos[p] + quat_to_matrix(xquat[p]) @ tree.pos[b]
        quat = quat_multiply(xquat[p], tree.quat[b])
        for j in joints_of[b]:
            kind, c = tree.joint_type[j], first[j]
            if kind == FREE:
                pos, quat = q[c:c + 3].copy(), quat_normalize(q[c + 3:c + 7])
                anchor[j], axis[j] = pos, tree.joint_axis[j]
                continue
            rot = quat_to_matrix(quat)
            axis[j] = rot @ tree.joint_axis[j]
            anchor[j] = rot @ tree.joint_pos[j] + pos
            if kind in (HINGE, BALL):
                turn = quat_from_axis_angle(tree.joint_axis[j], q[c]) if kind == HINGE else quat_normalize(q[c:c + 4])
                quat = quat_multiply(quat, turn)
                pos = anchor[j] - quat_to_matrix(quat) @ tree.joint_pos[j]
            else:
                pos = pos + axis[j] * q[c]
        xpos[b] = pos
        xquat[b] = quat_normalize(quat)
    return xpos, xquat, anchor, axis


def body_poses(tree, q):
    """Every body's frame in the world at coordinates q: xpos (nbody, 3) and xmat (nbody, 3, 3), world first."""
    xpos, xquat, _, _ = _walk(tree, q)
    return xpos, np.stack([quat_to_matrix(x) for x in xquat])


def com_positions(tree, q):
    """Every body's centre of mass in the world at coordinates q, (nbody, 3); the world's is its ipos, 0."""
    xpos, xquat, _, _ = _walk(tree, q)
    return np.stack([xpos[b] + quat_to_matrix(xquat[b]) @ tree.ipos[b] for b in range(len(xpos))])


def joint_frames(tree, q):
    """Every joint's anchor (njoint, 3) and unit axis (njoint, 3) in the world at coordinates q."""
    _, _, anchor, axis = _walk(tree, q)
    return anchor, axis
