"""Contacts and joint limits of an articulation: the points of its shapes that may touch a plane, the force a plane
exerts through one of them, the force between two bodies' spheres and capsules or a sphere and a box, and the
default laws for a tree
(MJCF's soft constraints have no penalty stiffness to read). The laws themselves are tisim.physics.contact's,
reached through the dynamics' ops (numpy's twins or Taichi's functions)."""
from typing import NamedTuple

import numpy as np

from tisim.systems.articulation.algebra import add, bind, cross, dot, matvec, quat_matrix, scale, sub
from tisim.systems.articulation.contact_geometry import (
    box_box_points,
    box_distance,
    box_in_world,
    capsule_box_points,
    closest_points,
    in_box,
)
from tisim.systems.articulation.tree import BOX, CAPSULE, PLANE, SPHERE


class Contact(NamedTuple):
    """A point of a shape that may touch a plane: a sphere's centre, a capsule's two end centres (with the radius), a
    box's eight corners (radius 0). It touches when its distance to the plane is below the radius."""

    body: int
    point: tuple  # in the body's frame
    radius: float
    normal: tuple  # the plane's, in the world
    offset: float  # the plane is {y : normal . y = offset}
    shape: int  # geom indices, for the friction
    plane: int


def contact_points(tree):
    """The Contact points of every pair in tree.contact_pairs that is a plane and a shape."""
    points = []
    for plane, shape in tree.contact_pairs:
        if tree.geom_type[plane] != PLANE:
            continue
        turn = np.array(quat_matrix(tree.geom_quat[plane]))
        normal = turn[:, 2]
        offset = float(normal @ tree.geom_pos[plane])
        body = int(tree.geom_body[shape])
        rotation = np.array(quat_matrix(tree.geom_quat[shape]))
        size, kind = tree.geom_size[shape], tree.geom_type[shape]
        if kind == SPHERE:
            local, radius = [np.zeros(3)], size[0]
        elif kind == CAPSULE:
            local, radius = [np.array([0, 0, size[1]]), np.array([0, 0, -size[1]])], size[0]
        else:
            local, radius = [size * (2 * np.array(c) - 1) for c in np.ndindex(2, 2, 2)], 0.0
        for corner in local:
            points.append(Contact(body, tuple(float(c) for c in tree.geom_pos[shape] + rotation @ corner),
                                  float(radius), tuple(float(c) for c in normal), offset, int(shape), int(plane)))
    return tuple(points)


class Touch(NamedTuple):
    """Two shapes of different bodies that may touch: spheres or capsules, each its core (a sphere's centre, a
    capsule's axis segment) widened by its radius. They touch where the cores come closer than the two radii."""

    body_a: int
    start_a: tuple  # the core's first end, in body_a's frame
    axis_a: tuple  # its second end minus its first, body frame; None for a sphere
    radius_a: float
    body_b: int
    start_b: tuple
    axis_b: tuple
    radius_b: float
    shape_a: int  # geom indices, for the friction
    shape_b: int


def touches(tree):
    """The Touch of every pair in tree.contact_pairs that is two spheres or capsules."""
    out = []
    for a, b in tree.contact_pairs:
        if PLANE in (tree.geom_type[a], tree.geom_type[b]) or BOX in (tree.geom_type[a], tree.geom_type[b]):
            continue
        if tree.geom_body[a] == 0:  # a shape of the world (which does not move) second
            a, b = b, a
        cores = []
        for g in (a, b):
            rotation = np.array(quat_matrix(tree.geom_quat[g]))
            radius, half = tree.geom_size[g][:2]
            if tree.geom_type[g] == CAPSULE:
                start = tree.geom_pos[g] - half * rotation[:, 2]
                axis = tuple(float(c) for c in 2.0 * half * rotation[:, 2])
            else:
                start, axis = tree.geom_pos[g], None
            cores.append((int(tree.geom_body[g]), tuple(float(c) for c in start), axis, float(radius)))
        out.append(Touch(*cores[0], *cores[1], int(a), int(b)))
    return tuple(out)


def touch_force(touch, p, R, x, velocity, ops):
    """The spatial force (y x f, f) body_b exerts on body_a where their shapes touch (body_a exerts its negative):
    the laws of contact_force along the line between the cores' nearest points, from body_b's towards body_a's,
    at y midway between the two surfaces, against the slip of body_a's material point there over body_b's."""
    ends = []
    for body, start, axis in ((touch.body_a, touch.start_a, touch.axis_a), (touch.body_b, touch.start_b, touch.axis_b)):
        ends += [add(x[body], matvec(R[body], start)), None if axis is None else matvec(R[body], axis)]
    lengths = tuple(0.0 if axis is None else float(np.dot(axis, axis)) for axis in (touch.axis_a, touch.axis_b))
    on_a, on_b = closest_points(*ends, lengths, ops)
    gap = sub(on_a, on_b)
    distance = ops.bind(ops.sqrt(ops.max(dot(gap, gap), 1e-30)))  # cores that cross exactly: kept finite
    n = bind(ops, scale(1.0 / distance, gap))
    depth = ops.bind(touch.radius_a + touch.radius_b - distance)
    y = bind(ops, scale(0.5, add(sub(on_a, scale(touch.radius_a, n)), add(on_b, scale(touch.radius_b, n)))))
    slip = relative_slip(velocity, touch.body_a, touch.body_b, y)
    return pushed(n, y, depth, slip, ops.max(p.friction[touch.shape_a], p.friction[touch.shape_b]), p, ops)


class BoxTouch(NamedTuple):
    """A sphere of one body that may touch a box of another: it touches where its centre is closer to the box than
    its radius, or inside it."""

    body: int
    point: tuple  # the sphere's centre, in its body's frame
    radius: float
    box_body: int
    box_pos: tuple  # the box's centre in its body's frame
    box_rotation: tuple  # the box's axes in its body's frame (columns)
    half_widths: tuple
    shape: int  # geom indices, for the friction
    box: int


def placed_box(tree, g):
    """(body, centre in the body's frame, axes in the body's frame as columns, half-widths) of box geom g."""
    return (int(tree.geom_body[g]), tuple(float(c) for c in tree.geom_pos[g]),
            tuple(tuple(float(c) for c in row) for row in quat_matrix(tree.geom_quat[g])),
            tuple(float(c) for c in tree.geom_size[g]))


def box_touches(tree):
    """The BoxTouch of every pair in tree.contact_pairs that is a sphere and a box."""
    out = []
    for a, b in tree.contact_pairs:
        if {tree.geom_type[a], tree.geom_type[b]} != {SPHERE, BOX}:
            continue
        sphere, box = (a, b) if tree.geom_type[a] == SPHERE else (b, a)
        out.append(BoxTouch(int(tree.geom_body[sphere]), tuple(float(c) for c in tree.geom_pos[sphere]),
                            float(tree.geom_size[sphere][0]), *placed_box(tree, box), int(sphere), int(box)))
    return tuple(out)


def box_touch_force(touch, p, R, x, velocity, ops):
    """The spatial force (y x f, f) the box's body exerts on the sphere's body (the box's body takes its negative):
    the laws of contact_force along the box's outward normal at the sphere's centre, at y midway between the two
    surfaces, against the slip of the sphere's body over the box's there."""
    b, box = touch.body, touch.box_body
    at = bind(ops, add(x[b], matvec(R[b], touch.point)))
    centre, axes, _ = box_in_world(box, touch.box_pos, touch.box_rotation, touch.half_widths, R, x, ops)
    local = in_box(at, centre, axes, ops)
    distance, normal = box_distance(local, touch.half_widths, ops)
    n = bind(ops, matvec(axes, normal))
    depth = ops.bind(touch.radius - distance)
    y = bind(ops, sub(at, scale(0.5 * (touch.radius + distance), n)))
    slip = relative_slip(velocity, b, box, y)
    return pushed(n, y, depth, slip, ops.max(p.friction[touch.shape], p.friction[touch.box]), p, ops)


class CapsuleBox(NamedTuple):
    """A capsule of one body that may touch a box of another: they touch where the capsule's axis comes closer to
    the box than its radius."""

    body: int
    start: tuple  # the axis' first end, in the capsule's body frame
    axis: tuple  # its second end minus its first, body frame
    radius: float
    box_body: int
    box_pos: tuple
    box_rotation: tuple
    half_widths: tuple
    shape: int  # geom indices, for the friction
    box: int


def capsule_boxes(tree):
    """The CapsuleBox of every pair in tree.contact_pairs that is a capsule and a box."""
    out = []
    for a, b in tree.contact_pairs:
        if {tree.geom_type[a], tree.geom_type[b]} != {CAPSULE, BOX}:
            continue
        capsule, box = (a, b) if tree.geom_type[a] == CAPSULE else (b, a)
        rotation = np.array(quat_matrix(tree.geom_quat[capsule]))
        radius, half = (float(c) for c in tree.geom_size[capsule][:2])
        out.append(CapsuleBox(int(tree.geom_body[capsule]),
                              tuple(float(c) for c in tree.geom_pos[capsule] - half * rotation[:, 2]),
                              tuple(float(c) for c in 2.0 * half * rotation[:, 2]), radius,
                              *placed_box(tree, box), int(capsule), int(box)))
    return tuple(out)


def capsule_box_force(touch, p, R, x, velocity, ops):
    """The spatial force (y x f, f) the box's body exerts on the capsule's body (the box's body takes its negative):
    the laws of contact_force at each point contact_geometry.capsule_box_points finds, summed, against the slip of
    the capsule's body over the box's there."""
    b = touch.body
    start = bind(ops, add(x[b], matvec(R[b], touch.start)))
    axis = bind(ops, matvec(R[b], touch.axis))
    box = box_in_world(touch.box_body, touch.box_pos, touch.box_rotation, touch.half_widths, R, x, ops)
    points = capsule_box_points(start, axis, float(np.dot(touch.axis, touch.axis)), touch.radius, box, ops)
    mu = ops.max(p.friction[touch.shape], p.friction[touch.box])
    return sum_pushes([pushed(n, y, depth, relative_slip(velocity, b, touch.box_body, y), mu, p, ops)
                       for n, y, depth in points])


class BoxBox(NamedTuple):
    """Two boxes of different bodies that may touch: each its body, its centre and axes (columns) in that body's
    frame, and its half-widths."""

    body_a: int
    pos_a: tuple
    rotation_a: tuple
    half_a: tuple
    body_b: int
    pos_b: tuple
    rotation_b: tuple
    half_b: tuple
    shape_a: int  # geom indices, for the friction
    shape_b: int


def box_pairs(tree):
    """The BoxBox of every pair in tree.contact_pairs that is two boxes (a box of the world, which does not move,
    second)."""
    out = []
    for a, b in tree.contact_pairs:
        if tree.geom_type[a] != BOX or tree.geom_type[b] != BOX:
            continue
        if tree.geom_body[a] == 0:
            a, b = b, a
        out.append(BoxBox(*placed_box(tree, a), *placed_box(tree, b), int(a), int(b)))
    return tuple(out)


def box_box_force(pair, p, R, x, velocity, ops):
    """The spatial force (y x f, f) the second box's body exerts on the first's (the second takes its negative):
    the laws of contact_force at each point contact_geometry.box_box_points finds, summed, against the slip of the
    first box's body over the second's there."""
    first = box_in_world(pair.body_a, pair.pos_a, pair.rotation_a, pair.half_a, R, x, ops)
    second = box_in_world(pair.body_b, pair.pos_b, pair.rotation_b, pair.half_b, R, x, ops)
    mu = ops.max(p.friction[pair.shape_a], p.friction[pair.shape_b])
    return sum_pushes([pushed(n, y, depth, relative_slip(velocity, pair.body_a, pair.body_b, y), mu, p, ops)
                       for n, y, depth in box_box_points(first, second, ops)])


def sum_pushes(pushes):
    """The sum of spatial forces (y x f, f)."""
    torque, force = pushes[0]
    for t, f in pushes[1:]:
        torque, force = add(torque, t), add(force, f)
    return torque, force


def contact_defaults(tree):
    """Contact and limit laws for the tree's weight and motors (they are not the tree's: MJCF's soft constraints
    have no penalty stiffness to read). A contact: the tree's whole weight on one point sinks 5 mm, critically
    damped for its whole mass, a hard switch (softness 0), friction regularized over 1 cm/s. A limit: the strongest
    motor at full action pushes a joint 0.1 rad (or m) past it, or the tree's weight on a 1 m lever 0.05 rad,
    whichever is stiffer; critically damped for the largest armature (or 0.01); a hard switch."""
    mass = max(float(np.sum(tree.mass[1:])), 1e-3)
    stiffness = mass * 9.81 / 0.005
    strongest = max([abs(g) * max(abs(r[0]), abs(r[1])) if c else abs(g)
                     for g, c, r in zip(tree.gear, tree.ctrllimited, tree.ctrlrange)], default=0.0)
    limit = max(10.0 * strongest, mass * 9.81 / 0.05)
    inertia = max(float(np.max(tree.armature, initial=0.0)), 0.01)
    return dict(contact_stiffness=stiffness, contact_damping=float(2.0 * np.sqrt(stiffness * mass)),
                contact_softness=0.0, eps=0.01, limit_stiffness=limit,
                limit_damping=float(2.0 * np.sqrt(limit * inertia)), limit_softness=0.0)


def contact_force(point, p, R, x, velocity, ops):
    """The spatial force (y x f, f) a plane exerts on a body through one contact point at y: the penalty normal
    force (tisim.physics.contact.penalty_normal_soft_compression) along the plane's normal and the isotropic
    regularized Coulomb friction (friction_isotropic_tanh) against the slip, from the point's depth below the
    plane and its velocity."""
    b, n = point.body, point.normal
    centre = add(x[b], matvec(R[b], point.point))
    y = bind(ops, sub(centre, scale(point.radius, n)))  # the point of the body's surface nearest the plane
    depth = ops.bind(point.radius + point.offset - dot(n, centre))
    w, v = velocity[b]
    slip = add(v, cross(w, y))
    return pushed(n, y, depth, slip, ops.max(p.friction[point.shape], p.friction[point.plane]), p, ops)


def relative_slip(velocity, a, b, y):
    """The velocity of body a's material point at y less body b's."""
    (w_a, v_a), (w_b, v_b) = velocity[a], velocity[b]
    return sub(add(v_a, cross(w_a, y)), add(v_b, cross(w_b, y)))


def pushed(n, y, depth, slip, mu, p, ops):
    """The spatial force (y x f, f) of the contact laws at y on the body that n points towards: the penalty normal
    force from the depth and the normal slip, regularized Coulomb friction (coefficient mu) against the rest."""
    vn = ops.bind(dot(n, slip))
    vt = sub(slip, scale(vn, n))
    fn = ops.bind(ops.normal_force(depth, vn, p.contact_stiffness, p.contact_damping, p.contact_softness))
    f = bind(ops, add(scale(fn, n), ops.friction(vt, fn, mu, p.eps)))
    return cross(y, f), f
