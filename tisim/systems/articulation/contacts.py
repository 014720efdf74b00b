"""Contacts and joint limits of an articulation: the points of its shapes that may touch a plane, the force a plane
exerts through one of them, and the default laws for a tree (MJCF's soft constraints have no penalty stiffness to
read). The laws themselves are tisim.physics.contact's, reached through the dynamics' ops (numpy's twins or Taichi's
functions)."""
from typing import NamedTuple

import numpy as np

from tisim.systems.articulation.algebra import add, bind, cross, dot, matvec, quat_matrix, scale, sub
from tisim.systems.articulation.tree import CAPSULE, SPHERE


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
    """The Contact points of every pair in tree.contact_pairs (a plane, then a shape)."""
    points = []
    for plane, shape in tree.contact_pairs:
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
    vn = ops.bind(dot(n, slip))
    vt = sub(slip, scale(vn, n))
    fn = ops.bind(ops.normal_force(depth, vn, p.contact_stiffness, p.contact_damping, p.contact_softness))
    mu = ops.max(p.friction[point.shape], p.friction[point.plane])
    f = add(scale(fn, n), ops.friction(vt, fn, mu, p.eps))
    f = bind(ops, f)
    return cross(y, f), f
