"""MPM material and an articulated robot that push each other: two-way coupling through the grid, in 3D.

The robot is an Articulation's tree (from MJCF or the Builder), its frames and gravity hosted as
tisim/systems/articulation/hosted.py says (the tree's (x, y, z) is the material's (x, z, -y)); the material is
MPM's, without actuators. Every sphere, capsule and box of the tree's moving bodies acts on the grid as Coupled's
free tools do (a box by its signed distance in its own frame, turned with its body; tisim/systems/mpm/tools.py's
push: a cell moving into the shape loses its normal velocity relative to the shape and keeps what Coulomb's law
leaves of the tangential one, the shape's reach fading over shape_softness outside its surface), with the geom's
geom_friction, at the velocity of the shape's material point at the cell's node (v + w x node). The momentum each
cell gains, m_i (v' - v), is taken from the shape's body, at the node:

    links    the tree's step without the material (its motors, weight and own contacts) gives (q*, qd*); the shapes'
             axes and their bodies' velocities there go to scratch: the material meets the tree where that step
             puts it, at the velocity it gives (as Coupled's tools, X + dt u at u)
    stress, scatter    MPM's
    grid     the walls, then each shape's push; the shape's reaction J = -sum_i m_i (v' - v), and its moment
             about the origin, summed per shape
    arm      the tree's step again, the reactions held over it as external forces J / dt: qd' = qd* + M^-1 S^T J
    gather   MPM's

so a free sphere, or a box that does not turn, steps exactly as Coupled's free tool of its shape
(tests/test_mpm_kneading.py holds them together). The
material's momentum changes by what the tree loses. The grid's reverse is written by hand (the shapes' pushes and
reactions); links and arm are Taichi's reverse mode, so the backward pass launches per step.

Limits: as Coupled's (the coupling is staggered; a resting contact settles where the reach fades over about a cell,
the default shape_softness).
"""
import numpy as np
import taichi as ti

from tisim.core.model import check_derived, check_run
from tisim.core.quantities import Quantity
from tisim.physics.contact import point_capsule, point_capsule_reverse
from tisim.systems.articulation import hosted
from tisim.systems.articulation.builder import Builder
from tisim.systems.mpm import tools as laws
from tisim.systems.mpm.body import Body
from tisim.systems.mpm.shaping import Shaping
from tisim.systems.mpm.system import BAND, DERIVED, MPM


def dropped_ball():
    """The default tree: a free steel ball of 4 cm (2.1 kg), friction 0.5, 1 cm above the default jelly block's
    middle. (A ball much lighter than the material a cell holds, 0.25 kg here, would meet the staggered coupling's
    limit: it can gain more than a collision gives, and a 0.2 kg ball thrown in bounces out faster than it came.)"""
    b = Builder("ball")
    ball = b.body(0, pos=(0.5, -0.5, BAND / 16 + 0.1 + 0.05), mass=2.1, inertia=(1.34e-3,) * 3)
    b.free(ball)
    b.sphere(ball, 0.04, friction=0.5)
    return b.build()


class Kneading(hosted.HostedTree, MPM):
    """A 3D body of MPM material without actuators (body=: default a jelly block 0.2 x 0.1 x 0.2 m on the floor of
    a 16-cell grid) and an articulated tree (tree=: a Tree or an MJCF file path, ignore= as Articulation's; default
    a free steel ball dropped onto the block) whose spheres, capsules and boxes push the material and are pushed back.
    The state is the material's and the tree's (q, qd); the actions drive the tree's motors (ctrl, shape (T,
    n_motors)); the parameters are the material's and the tree's (but one gravity, g). The module's docstring
    gives the step."""

    PARAMS = MPM.PARAMS + hosted.tree_quantities(MPM) + (
        Quantity("shape_softness", 0.002, "m", "length over which a shape's reach fades outside its surface (default "
                 "one grid cell)", bounds="(0, inf)"),)
    STATE = MPM.STATE + hosted.STATE
    ACTION = hosted.ACTION
    STRUCTURE = MPM.STRUCTURE + hosted.SIZES
    SCRATCH = MPM.SCRATCH + hosted.SCRATCH + hosted.AHEAD
    PHASES = (("links", "n_trees"),) + MPM.PHASES[:3] + (("arm", "n_trees"),) + MPM.PHASES[3:]
    FUSED = dict(MPM.FUSED, arm=("arm_fused", "n_trees"))

    def __init__(self, horizon, batch=1, dt=None, body=None, n_grid=16, tree=None, ignore=(), **values):
        check_run("Kneading", horizon, batch, dt)
        check_derived("Kneading", values, {**DERIVED, **hosted.DERIVED})
        if body is None and isinstance(n_grid, (int, np.integer)) and n_grid > 0:
            # MPM checks n_grid itself, with its allowed range
            base = BAND / n_grid
            body = Body.box([0.4, base, 0.4], [0.6, base + 0.1, 0.6], 0.5 / n_grid)
            values.setdefault("material", "neo_hookean")
            values.setdefault("E", 3e3)
        if isinstance(body, Body):  # else MPM names what body must be
            if body.dim != 3:
                raise ValueError(f"Kneading: the body must be 3D (the tree is), got points of {body.dim} coordinates")
            if np.any(body.actuators >= 0):
                raise ValueError("Kneading: the body must have no actuators (the actions drive the tree's motors)")
        if isinstance(n_grid, (int, np.integer)) and not isinstance(n_grid, bool) and n_grid > 0:
            values.setdefault("shape_softness", 1.0 / n_grid)  # as Coupled's tools: a resting contact settles
        sizes = self.take_tree_of("Kneading", tree, ignore, dropped_ball)
        super().__init__(horizon, batch, dt, body, n_grid, **sizes, **values)
        self.set_tree_defaults(values, MPM)

    def topology(self):
        return dict(MPM.topology(self), **self.tree_topology())

    @ti.func
    def links(self, s: ti.template(), i):
        ti.static(self.place_shapes(s, ahead=True))

    @ti.func
    def reaction(self, s: ti.template(), k):
        # the pushes met the body where its free step put it: each acts on the body at the point that was there at
        # the start of the step, so that a push through the body's centre turns it not
        force = s.scratch("shape_force", k)
        moment = s.scratch("shape_turn", k) @ s.scratch("shape_moment", k)
        return s.scratch("shape_origin", k).cross(force) + moment, force

    # ---- the material's points take no activation (Shaping's) -----------------------------------------------------
    activation = Shaping.activation
    add_activation = Shaping.add_activation
    node = Shaping.node

    # ---- the grid: the walls, then each shape, whose body takes the momentum the cells gain ------------------------
    @ti.func
    def shape_at(self, s: ti.template(), c, k: ti.template()):
        """(phi, n, u) of shape k at cell c's node: its signed distance, outward normal and material velocity."""
        radius, box = ti.static(self.shapes[k][3], self.shapes[k][5])
        x = self.node(c)
        phi, n = 0.0, ti.Vector.zero(float, 3)
        if ti.static(self.is_box[k]):
            phi, n = laws.turned_box(x - s.scratch("shape_start", k), s.scratch("shape_axes", k), ti.Vector(box[0]))
        else:
            depth, normal = point_capsule(x, s.scratch("shape_start", k), s.scratch("shape_end", k), radius)
            phi, n = -depth, normal
        return phi, n, s.scratch("shape_drift", k) + s.scratch("shape_spin", k).cross(x)

    @ti.func
    def pushed(self, s: ti.template(), c, v, shapes: ti.template()):
        """Cell c's velocity v after the first `shapes` shapes' pushes, in order."""
        result = v
        for k in ti.static(range(shapes)):
            result = self.pushed_from(s, c, result, k)
        return result

    @ti.func
    def grid(self, s: ti.template(), c):
        v, m, x = self.walled(s, c), s.scratch("grid_mass", c), self.node(c)
        for k in ti.static(range(self.n_shapes)):
            after = self.pushed_from(s, c, v, k)
            impulse = m * (v - after) / s.dt  # held over the step as a force
            s.accumulate("shape_force", k, impulse)
            s.accumulate("shape_moment", k, (x - s.scratch("shape_pivot", k)).cross(impulse))
            v = after
        s.assign("grid_velocity", c, v)

    @ti.func
    def pushed_from(self, s: ti.template(), c, v, k: ti.template()):
        """Cell c's velocity v after shape k's push alone."""
        phi, n, u = self.shape_at(s, c, k)
        return laws.push(v, u, phi, n, s.param("geom_friction", ti.static(self.shapes[k][4])),
                         s.param("shape_softness"))

    @ti.func
    def grid_reverse(self, s: ti.template(), bar: ti.template(), c):
        v_bar = bar.scratch("grid_velocity", c)
        m = s.scratch("grid_mass", c)
        if ti.abs(v_bar).max() > 0.0 or m > 0.0:  # every cell with mass sends the shapes its impulse
            walled, m_bar, x = self.walled(s, c), 0.0, self.node(c)
            softness = s.param("shape_softness")
            for j in ti.static(range(self.n_shapes - 1, -1, -1)):
                v = self.pushed(s, c, walled, j)  # before shape j, as the grid computes it
                geom, box = ti.static(self.shapes[j][4], self.shapes[j][5])
                a, b = s.scratch("shape_start", j), s.scratch("shape_end", j)
                phi, n, u = self.shape_at(s, c, j)
                mu = s.param("geom_friction", geom)
                # the impulse m (v - after) / dt enters the shape's force, and (x - pivot) cross it its moment
                arm, moment_bar = x - s.scratch("shape_pivot", j), bar.scratch("shape_moment", j)
                impulse_bar = (bar.scratch("shape_force", j) + moment_bar.cross(arm)) / s.dt
                change = v - laws.push(v, u, phi, n, mu, softness)
                m_bar += impulse_bar.dot(change)
                bar.accumulate("shape_pivot", j, -m * change.cross(moment_bar) / s.dt)
                v_bar_in, u_bar, phi_bar, n_bar, mu_bar, softness_bar = laws.push_reverse(
                    v, u, phi, n, mu, softness, v_bar - m * impulse_bar)
                v_bar = v_bar_in + m * impulse_bar
                if ti.static(self.is_box[j]):
                    offset_bar, axes_bar, _ = laws.turned_box_reverse(x - a, s.scratch("shape_axes", j),
                                                                      ti.Vector(box[0]), phi_bar, n_bar)
                    bar.accumulate("shape_start", j, -offset_bar)
                    bar.accumulate("shape_axes", j, axes_bar)
                else:
                    _, a_bar, b_bar = point_capsule_reverse(x, a, b, -phi_bar, n_bar)
                    bar.accumulate("shape_start", j, a_bar)
                    bar.accumulate("shape_end", j, b_bar)
                bar.accumulate("shape_drift", j, u_bar)
                bar.accumulate("shape_spin", j, x.cross(u_bar))
                bar.add_param("geom_friction", geom, mu_bar)
                bar.add_param("shape_softness", 0, softness_bar)
            self.walled_reverse(s, bar, c, v_bar)
            bar.accumulate("grid_mass", c, m_bar)


__all__ = ["Kneading", "dropped_ball"]
