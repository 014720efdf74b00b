"""An articulated tree inside another system (a soft body's): what Handling (cloth, mass-spring bodies) and Kneading
(MPM material) share.

The host's world has y up; the tree's, z up (MuJoCo's): a point (x, y, z) of the tree is at (x, z, -y) in the host's
world, a turn of the axes (no mirror; tisim.viz.bodies draws trees the same way), so an MJCF file needs no change.
One gravity acts on both: the host's g, down its y, which is the tree's -z. The tree's spheres, capsules and boxes
are what touches the host's body: a sphere or capsule as a segment a..b (a sphere's a = b) widened by a radius, a
box as its centre and its axes. A phase `links` writes, per shape, its axis's ends (a box's axes too) and its
body's spatial velocity (w, v: a point y of the body moves at v + w x y) in the host's
world into scratch; the host's phases read them and sum each shape's reaction, the force and its moment about the
origin; a phase `arm` steps the tree with the reactions as external forces held over the step. Both are
differentiated by Taichi's reverse mode (the tree's step is straight-line code).
"""
from dataclasses import replace

import numpy as np
import taichi as ti

from tisim.core.quantities import Scratch
from tisim.systems.articulation import dynamics
from tisim.systems.articulation.algebra import add, matmul, matvec, quat_matrix, transpose
from tisim.systems.articulation.system import (
    TAICHI,
    Articulation,
    bind,
    component,
    take_tree,
    tree_defaults,
    tree_params,
)
from tisim.systems.articulation.tree import BALL, BOX, CAPSULE, FREE, SPHERE, reference_coordinates

SIZES = ("n_bodies", "n_joints", "n_coordinates", "n_dofs", "n_motors", "n_geoms", "n_shapes", "n_trees")
DERIVED = {name: "it follows from the tree (tree=)" for name in SIZES}
STATE = Articulation.STATE
ACTION = (replace(Articulation.ACTION[0], shape=("n_motors",)),)
SCRATCH = tuple(Scratch(name, unit, meaning, shape=("n_shapes", "dim"), keep=keep) for name, unit, meaning, keep in (
    ("shape_start", "m", "the first end of each shape's axis (a sphere's centre)", True),
    ("shape_end", "m", "the second end of each shape's axis (a sphere's centre)", True),
    ("shape_spin", "rad/s", "angular velocity of each shape's body", True),
    ("shape_drift", "m/s", "velocity of each shape's body's point at the origin", True),
    ("shape_force", "N", "sum of the body's pushes on each shape", True),
    ("shape_moment", "N m", "their moment about the origin (about each shape's body's origin where the tree is met "
     "ahead: Kneading)", True))) + (
    Scratch("shape_axes", "-", "each box's axes, as columns, in the host's world (boxes only)",
            shape=("n_shapes", "dim", "dim"), keep=True),)
# where the tree is met after its free step (Kneading): where each shape's body is then and now, and its turn since
AHEAD = (Scratch("shape_pivot", "m", "origin of each shape's body after the tree's free step",
                 shape=("n_shapes", "dim")),
         Scratch("shape_origin", "m", "origin of each shape's body at the start of the step",
                 shape=("n_shapes", "dim")),
         Scratch("shape_turn", "-", "the turn of each shape's body from after the free step back to the start",
                 shape=("n_shapes", "dim", "dim")))


def shared_with(host):
    """The names of an Articulation's parameters that the host system class has its own of, which the tree reads
    in place of its own: gravity always (the host's g), and any the host also declares (a mass-spring body's eps)."""
    return ("gravity",) + tuple(q.name for q in Articulation.PARAMS if q.name in {p.name for p in host.PARAMS})


def tree_quantities(host):
    """An Articulation's parameters, its motors counted by n_motors (apart from the host's actuators), without those
    shared with the host system class (shared_with)."""
    return tuple(replace(q, shape=("n_motors",)) if q.shape == ("n_actuators",) else q
                 for q in Articulation.PARAMS if q.name not in shared_with(host))


def shapes_of(tree):
    """((body, a, b, radius, geom, box), ...): each sphere and capsule of a moving body as a segment a..b (body
    frame; a = b for a sphere) widened by a radius, box None; each box as its centre (a = b, radius 0) and box =
    (half extents, its axes in the body's frame as rows of a rotation)."""
    out = []
    for g, kind in enumerate(tree.geom_type):
        body = int(tree.geom_body[g])
        if kind not in (SPHERE, CAPSULE, BOX) or body == 0:
            continue
        size, centre = tree.geom_size[g], np.asarray(tree.geom_pos[g], float)
        turn = np.array(quat_matrix(tree.geom_quat[g]))
        if kind == BOX:
            box = (tuple(map(float, size[:3])), tuple(tuple(map(float, row)) for row in turn))
            out.append((body, tuple(map(float, centre)), tuple(map(float, centre)), 0.0, g, box))
            continue
        half = turn[:, 2] * (size[1] if kind == CAPSULE else 0.0)
        out.append((body, tuple(map(float, centre - half)), tuple(map(float, centre + half)), float(size[0]), g,
                    None))
    return tuple(out)


def to_host(v):
    """A vector of the tree's world (z up) in the host's (y up)."""
    return ti.Vector([v[0], v[2], -v[1]])


def matrix_to_host(m):
    """A matrix of the tree's world (rows of scalars) in the host's: Q m Q^T, Q the turn of to_host."""
    axes, signs = (0, 2, 1), (1.0, 1.0, -1.0)
    return ti.Matrix([[signs[i] * signs[j] * m[axes[i]][axes[j]] for j in range(3)] for i in range(3)])


def to_tree(v):
    """A vector of the host's world in the tree's, as 3 scalars."""
    return component(v, 0), -component(v, 2), component(v, 1)


class HostedTree:
    """Mixin of a system that hosts a tree (the module's docstring). The host calls take_tree_of before its own
    __init__ (its sizes go to the engine) and set_tree_defaults after; its parameter g is the gravity."""

    def take_tree_of(self, owner, tree, ignore, default):
        """The tree's structural sizes, the tree kept as self.tree and its touching shapes as self.shapes."""
        self.tree = tree = take_tree(owner, tree, ignore, default)
        self.shapes = shapes_of(tree)
        if not self.shapes:
            raise ValueError(f"{owner}: the tree {tree.name!r} has no sphere, capsule or box on a moving body to "
                             "touch the body with")
        structure = dynamics.structure_of(tree)
        return dict(n_bodies=len(tree.parent) - 1, n_joints=len(tree.joint_type),
                    n_coordinates=structure.n_coordinates, n_dofs=structure.n_dofs,
                    n_motors=max(len(tree.actuator_joint), 1), n_geoms=max(len(tree.geom_type), 1),
                    n_shapes=len(self.shapes), n_trees=1)

    def set_tree_defaults(self, values, host):
        """The tree's parameters from its model, but those named in values and those shared with host."""
        defaults = tree_defaults(self.tree)
        for name in shared_with(host):
            defaults.pop(name)
        self.set_params(**{name: value for name, value in defaults.items() if name not in values})
        if "q" not in values and any(kind in (BALL, FREE) for kind in self.tree.joint_type):
            self.set_initial_state(q=reference_coordinates(self.tree))

    def tree_topology(self):
        return dict(structure=dynamics.structure_of(self.tree), shapes=self.shapes,
                    is_box=tuple(shape[5] is not None for shape in self.shapes))

    def tree_state(self, s):
        """(q, qd, ctrl, parameters) at step t, as scalars for the dynamics (called at compile time)."""
        q = [bind(s.state("q", c)) for c in range(self.n_coordinates)]
        qd = [bind(s.state("qd", d)) for d in range(self.n_dofs)]
        ctrl = [bind(s.action("ctrl", k)) for k in range(self.n_motors)]
        p = tree_params(s, self.n_bodies, self.n_joints, self.n_motors, self.n_geoms,
                        gravity=(0.0, 0.0, -s.param("g")), eps=s.param("eps"))
        return q, qd, ctrl, p

    def place_shapes(self, s, ahead):
        """Write the shapes' axes and their bodies' velocities into the step's scratch: at the start of the step, or
        (ahead) after the step the tree would take without the body's pushes (its motors, weight and own contacts).
        """
        q, qd, ctrl, p = self.tree_state(s)
        if ahead:
            R_now, x_now, _ = dynamics.kinematics(self.structure, p, q, TAICHI)
            q, qd = dynamics.step(self.structure, p, q, qd, ctrl, s.dt, TAICHI)
            q, qd = [bind(value) for value in q], [bind(value) for value in qd]
        R, x, S = dynamics.kinematics(self.structure, p, q, TAICHI)
        velocity = dynamics.body_velocities(self.structure, qd, S, TAICHI)
        for k, (body, start, end, _, _, box) in enumerate(self.shapes):
            spin, drift = velocity[body]
            s.accumulate("shape_start", k, to_host(add(x[body], matvec(R[body], start))))
            s.accumulate("shape_end", k, to_host(add(x[body], matvec(R[body], end))))
            if box is not None:  # the box's axes in the tree's world, then each column turned into the host's
                axes = matmul(R[body], box[1])
                s.accumulate("shape_axes", k, ti.Matrix([list(axes[0]), list(axes[2]), [-a for a in axes[1]]]))
            s.accumulate("shape_spin", k, to_host(spin))
            s.accumulate("shape_drift", k, to_host(drift))
            if ahead:
                s.accumulate("shape_pivot", k, to_host(x[body]))
                s.accumulate("shape_origin", k, to_host(x_now[body]))
                s.accumulate("shape_turn", k, matrix_to_host(matmul(R_now[body], transpose(R[body]))))
        return None

    @ti.func
    def reaction(self, s: ti.template(), k):
        """(moment about the origin, force) of the body's pushes on shape k, in the host's world, as the tree's step
        takes them (at the start of the step)."""
        return s.scratch("shape_moment", k), s.scratch("shape_force", k)

    def step_tree(self, s, fused):
        """The tree's step with the shapes' reactions as external forces: into the next state (fused: set)."""
        q, qd, ctrl, p = self.tree_state(s)
        external = []
        for k, (body, *_) in enumerate(self.shapes):
            moment, force = self.reaction(s, k)
            external.append((body, (to_tree(moment), to_tree(force))))
        q_next, qd_next = dynamics.step(self.structure, p, q, qd, ctrl, s.dt, TAICHI, external)
        write = s.set_next if fused else s.advance
        for c in range(self.n_coordinates):
            write("q", c, q_next[c])
        for d in range(self.n_dofs):
            write("qd", d, qd_next[d])
        return None

    @ti.func
    def arm(self, s: ti.template(), i):
        ti.static(self.step_tree(s, False))

    @ti.func
    def arm_fused(self, s: ti.template(), i):
        ti.static(self.step_tree(s, True))


__all__ = ["HostedTree", "shapes_of", "shared_with", "tree_quantities", "to_host", "to_tree"]
