"""A mass-spring body (a cloth, a soft block) and an articulated robot that touch each other, both ways.

The robot is an Articulation's tree (tisim/systems/articulation: from MJCF or the Builder), stepped by the same
dynamics; the body is MassSpring's, without actuators. Every sphere, capsule and box of the robot's moving bodies
touches the particles by the body's own contact law (tisim/physics/contact.py's point_contact: the penalty kc with its
softness, the damping kd while compressing, regularized Coulomb friction over eps with the geom's geom_friction),
at the particle's depth in the shape (a box's: below its nearest face, point_turned_box), on its velocity relative
to the shape's material point where it is. The force on a particle at y acts back on the shape's body as -f at y,
so the pair conserves momentum and angular momentum. A step has five phases:

    links       the shapes' axes (capsule ends a, b; a sphere's or a box's centre twice, a box's axes too) and
                their bodies' spatial velocities
                (w, v: a point y of the body moves at v + w x y) in the world, from q and qd by forward kinematics
    springs, particles, balls    MassSpring's; the particle phase adds each shape's push and sums its reaction,
                the force and its moment about the origin, per shape
    arm         the tree's step (CRBA, RNEA, its integrator) with the reactions as external forces held over it

so the particles feel the robot where it is at the start of the step, and the robot feels the particles' push of
that step: explicit both ways, as MassSpring's balls. MassSpring's phases keep their hand-written reverses; links
and arm are differentiated by Taichi's reverse mode (the tree's step is straight-line code), so the backward pass
launches per step.

Frames and gravity are tisim/systems/articulation/hosted.py's: the tree's (x, y, z) is the body's (x, z, -y), and
g pulls both down the body's y. The step is the body's (dt, default 0.5 ms; the MJCF timestep is not read): it must
resolve the stiffest of the springs, the contact penalty and the tree.

Limits: a particle touches a box by the depth below the box's nearest face, exact inside and beside a face, less
than the distance near an edge or a corner outside (a soft contact's reach there is shorter); the tree's contacts
with its own planes and between its shapes work as an Articulation's, with its contact_* parameters.
"""
import os

import numpy as np
import taichi as ti

from tisim.core.model import check_derived, check_run
from tisim.physics.contact import (
    point_capsule,
    point_capsule_reverse,
    point_contact,
    point_contact_reverse,
    point_turned_box,
    point_turned_box_reverse,
    touching,
)
from tisim.systems.articulation import hosted
from tisim.systems.articulation.builder import Builder
from tisim.systems.mass_spring.robots import Robot, cloth
from tisim.systems.mass_spring.system import DERIVED as BODY_DERIVED
from tisim.systems.mass_spring.system import MassSpring

DERIVED = {**BODY_DERIVED, **hosted.DERIVED}


def finger():
    """The default tree: a 12 cm rod of 50 g (a capsule of radius 2 cm) hinged at one end, level, 3 cm above the
    default cloth, free to fall onto it; a motor at the hinge (0.1 N m per unit of action)."""
    b = Builder("finger", integrator="euler")
    rod = b.body(0, pos=(0.38, -0.5, 0.35), mass=0.05, ipos=(0.06, 0.0, 0.0),
                 inertia=(1e-6, 0.05 * 0.12 ** 2 / 12, 0.05 * 0.12 ** 2 / 12))
    b.motor(b.hinge(rod, axis=(0.0, 1.0, 0.0), damping=1e-3), gear=0.1)
    half_turn = np.sqrt(0.5)  # the capsule's axis, z, turned onto x
    b.capsule(rod, 0.02, 0.06, pos=(0.06, 0.0, 0.0), quat=(half_turn, 0.0, half_turn, 0.0))
    return b.build()


class Handling(hosted.HostedTree, MassSpring):
    """A mass-spring body without actuators (robot=: default a 10 x 10 cloth, 3 cm apart, pinned at its corners
    0.3 m up) and an articulated tree (tree=: a Tree or an MJCF file path, ignore= as Articulation's; default a rod
    hinged above the cloth, falling onto it) whose spheres, capsules and boxes touch the body both ways. The state is
    the body's and the tree's (q, qd); the actions drive the tree's motors (ctrl, shape (T, n_motors)); the
    parameters are the body's and the tree's (but one gravity g). The module's docstring gives the step and its
    frames."""

    PARAMS = MassSpring.PARAMS + hosted.tree_quantities(MassSpring)
    STATE = MassSpring.STATE + hosted.STATE
    ACTION = hosted.ACTION
    STRUCTURE = MassSpring.STRUCTURE + hosted.SIZES
    SCRATCH = MassSpring.SCRATCH + hosted.SCRATCH
    PHASES = (("links", "n_trees"),) + MassSpring.PHASES + (("arm", "n_trees"),)
    FUSED = dict(MassSpring.FUSED, arm=("arm_fused", "n_trees"))

    def __init__(self, horizon, batch=1, dt=None, robot=None, tree=None, ignore=(), **values):
        check_run("Handling", horizon, batch, dt)
        check_derived("Handling", values, DERIVED)
        if robot is None:
            robot = cloth(10, 10, spacing=0.03, origin=(0.365, 0.3, 0.365), pin="corners", flat=True)
        elif isinstance(robot, (str, os.PathLike)):
            robot = Robot.load(robot)
        if isinstance(robot, Robot):  # else MassSpring names what robot must be
            if robot.dim != 3:
                raise ValueError(f"Handling: the robot must be 3D (the tree is), got particles of {robot.dim} "
                                 "coordinates")
            if robot.actuators:
                raise ValueError("Handling: the robot must have no actuators (the actions drive the tree's motors)")
        sizes = self.take_tree_of("Handling", tree, ignore, finger)
        super().__init__(horizon, batch, dt, robot, **sizes, **values)
        self.set_tree_defaults(values, MassSpring)

    def topology(self):
        return dict(MassSpring.topology(self), **self.tree_topology())

    @ti.func
    def links(self, s: ti.template(), i):
        ti.static(self.place_shapes(s, ahead=False))  # the particles meet the tree where it is

    # ---- the shapes' pushes on the particles, and back -------------------------------------------------------------
    @ti.func
    def shape_depth(self, s: ti.template(), p, k: ti.template()):
        """(depth, normal) of a particle at p against shape k: a sphere or capsule, or a box."""
        radius, box, capsule = ti.static(self.shapes[k][3], self.shapes[k][5], not self.is_box[k])
        d, n = 0.0, ti.Vector.zero(float, 3)
        if ti.static(capsule):
            d, n = point_capsule(p, s.scratch("shape_start", k), s.scratch("shape_end", k), radius)
        else:
            d, n = point_turned_box(p, s.scratch("shape_start", k), s.scratch("shape_axes", k), ti.Vector(box[0]))
        return d, n

    @ti.func
    def shape_push(self, s: ti.template(), p, v, k: ti.template(), branch: ti.template()):
        """The push of shape k on a particle at p moving at v (branch: as MassSpring.contact)."""
        geom = ti.static(self.shapes[k][4])
        d, n = self.shape_depth(s, p, k)
        slip = v - s.scratch("shape_drift", k) - s.scratch("shape_spin", k).cross(p)
        kc, kd, soft, eps = s.param("kc"), s.param("kd"), s.param("softness"), s.param("eps")
        f = ti.Vector.zero(float, 3)
        if ti.static(not branch):
            f = point_contact(d, n, slip, kc, kd, soft, s.param("geom_friction", geom), eps)
        elif touching(d, soft):
            f = point_contact(d, n, slip, kc, kd, soft, s.param("geom_friction", geom), eps)
        return f

    @ti.func
    def pushes(self, s: ti.template(), p, v, branch: ti.template(), react: ti.template()):
        f = MassSpring.pushes(self, s, p, v, branch, react)
        for k in ti.static(range(self.n_shapes)):
            push = self.shape_push(s, p, v, k, branch)
            f += push
            if ti.static(react):
                s.accumulate("shape_force", k, -push)
                s.accumulate("shape_moment", k, -p.cross(push))
        return f

    @ti.func
    def pushes_reverse(self, s: ti.template(), bar: ti.template(), p, v, f_bar):
        p_bar, v_bar = MassSpring.pushes_reverse(self, s, bar, p, v, f_bar)
        kc, kd, soft, eps = s.param("kc"), s.param("kd"), s.param("softness"), s.param("eps")
        for k in ti.static(range(self.n_shapes)):
            geom, box, capsule = ti.static(self.shapes[k][4], self.shapes[k][5], not self.is_box[k])
            a, b = s.scratch("shape_start", k), s.scratch("shape_end", k)
            d, n = self.shape_depth(s, p, k)
            if touching(d, soft):
                spin = s.scratch("shape_spin", k)
                slip = v - s.scratch("shape_drift", k) - spin.cross(p)
                mu = s.param("geom_friction", geom)
                push = point_contact(d, n, slip, kc, kd, soft, mu, eps)
                # the push enters the particle's force and, as -push at p, the shape's force and moment
                moment_bar = bar.scratch("shape_moment", k)
                push_bar = f_bar - bar.scratch("shape_force", k) - moment_bar.cross(p)
                d_bar, n_bar, slip_bar, law_bar = point_contact_reverse(d, n, slip, kc, kd, soft, mu, eps, push_bar)
                dp = ti.Vector.zero(float, 3)
                if ti.static(capsule):
                    dp, da, db = point_capsule_reverse(p, a, b, d_bar, n_bar)
                    bar.accumulate("shape_start", k, da)
                    bar.accumulate("shape_end", k, db)
                else:
                    dp, axes_bar = point_turned_box_reverse(p, a, s.scratch("shape_axes", k), ti.Vector(box[0]),
                                                            d_bar, n_bar)
                    bar.accumulate("shape_start", k, -dp)
                    bar.accumulate("shape_axes", k, axes_bar)
                p_bar += dp - push.cross(moment_bar) + spin.cross(slip_bar)
                v_bar += slip_bar
                bar.accumulate("shape_drift", k, -slip_bar)
                bar.accumulate("shape_spin", k, -p.cross(slip_bar))
                bar.add_param("geom_friction", geom, law_bar[3])
                for j, name in ti.static(((0, "kc"), (1, "kd"), (2, "softness"), (4, "eps"))):
                    bar.add_param(name, 0, law_bar[j])
        return p_bar, v_bar


__all__ = ["Handling", "finger"]
