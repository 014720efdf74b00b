"""A mass-spring body in 2D or 3D from one code: particles joined by damped springs, some of them actuated, on a
ground with friction, against static spheres and boxes; some particles may be pinned (a cloth's corners).

For a spring s = (i, j) with rest length rest_s and actuator activation a (0 for passive springs):
    d = x_j - x_i,  r = |d|,  n = d / r,  L = rest_s (1 + a)
    f_s = (k_s (r - L) + c (v_j - v_i) . n) n        added to particle i, subtracted from particle j
    (c is the parameter "damping": in tisim "c" names rotational damping at a pivot, in N m s)
Contact (tisim.physics.contact's point_contact) with the ground y = 0 (y is up), each sphere (sphere_center,
sphere_radius) and each axis-aligned box (box_center, box_half): at depth p > 0 along the shape's normal n,
    fn = kc act(p) - kd min(v . n, 0) gate(p)   (softness s = 0: act(p) = p, gate = 1: penalty_normal_compression)
    ft = -mu fn tanh(|v_t| / eps) v_t / |v_t|   (isotropic; in 2D on the ground, friction_coulomb_tanh of v_x)
Free rigid balls (ball_pos, ball_vel, ball_radius, ball_mass) touch the particles and the ground by the same law,
without friction (a ball here does not spin), on the velocity relative to the ball: each push on a particle acts
back on its ball, M V' = M V + dt (sum of the reactions + the ground's push - M g e_y), so the body and the balls
exchange momentum and conserve its total without gravity and ground. The balls move in a third phase, after the
particles, from the reactions the particle phase summed.
Each particle: m v' = sum of spring forces + contact forces - drag v - m g e_y; semi-implicit Euler. A pinned
particle stays where it is (its velocity zero). In 2D without obstacles this is the reference mass-spring workload
(benchmarks/README.md) exactly. Non-smooth: the contact switches.

Explicit steps of the dissipative laws have limits of their own, beside the springs' stability limit: a particle
pressing into the ground loses dt kd / m of its normal velocity per step, so at dt kd / m = 2 (dt = 1 ms with the
defaults) the step reverses it instead of stopping it, and the friction law overshoots zero slip once
dt mu fn / (m eps) > 1. Neither blows up, but rollouts near those limits chatter at contact and turn chaotic, and so
do their gradients: a soft walker at dt = 1 ms gave adjoints that a 1e-9 change of the initial state turned around
(demos/soft_walker.py runs at the default dt = 0.5 ms, with eps = 0.1 m/s).

Layout: pos and vel are (n_particles, dim), dim = 2 or 3 as the robot's particles; k and rest are per spring; the
obstacles' centres and sizes are per obstacle; damping, m, kc, kd, softness, mu, eps, g are global. The topology
(which particles each spring joins, which actuator drives it, which particles are pinned) and the number of obstacles
are structure: topology lives in Taichi fields on the kernel host, one set per distinct robot. The step has three
phases: each spring's force once into scratch, then each particle sums its springs' forces from a padded incidence
table, then each free ball (if any) moves under the reactions the particles summed for it. Its fused forward pass
adds each spring's force into its two ends' loads instead, in spring order (the order of the table, so the same
sums), and skips the contact laws where a particle touches nothing: the same trajectory
bit for bit. Its backward pass runs the phases' hand-written reverses, on a CPU as one kernel. The tests hold a
plain item-wise form of the same step, differentiated by Taichi's reverse mode, as the referee: the two agree to
rounding (tests/test_mass_spring.py), and the reverses equal Taichi's reverse mode of the phases to 1e-12
(tests/test_mass_spring_3d.py).
"""
import os

import numpy as np
import taichi as ti

from tisim.core.engine import System
from tisim.core.model import check_derived, check_run
from tisim.core.quantities import Quantity, Scratch, Size
from tisim.physics.contact import (
    point_box,
    point_box_reverse,
    point_contact,
    point_contact_reverse,
    point_ground,
    point_sphere,
    point_sphere_reverse,
    touching,
)
from tisim.physics.integrators import semi_implicit_euler
from tisim.systems.mass_spring.readouts import Readouts
from tisim.systems.mass_spring.robots import Robot, grid

# the structural sizes MassSpring computes from its robot and obstacles, with where each comes from
DERIVED = {
    "dim": "2D or 3D follows from the robot, particles of shape (N, 2) or (N, 3): pass robot= (a robot with 3D "
           "particles, such as \"quadruped3d\", for 3D)",
    **{key: "it follows from the robot; pass robot=" for key in ("n_particles", "n_springs", "n_actuators", "degree")},
    "n_spheres": "it is the number of spheres; pass spheres=",
    "n_boxes": "it is the number of boxes; pass boxes=",
    "n_balls": "it is the number of balls; pass balls=",
}


class MassSpring(Readouts, System):
    """A mass-spring robot from a ``Robot`` (or a robot name / JSON path); default: the 32 x 8 reference grid.

    spheres: [(centre, radius), ...] and boxes: [(centre, half extents), ...], static obstacles of the robot's
    dimension (their number is structure; their centres and sizes are the parameters sphere_center, sphere_radius,
    box_center and box_half). balls: [(centre, radius), ...], free rigid balls that the body and the ground push
    and that push back (two-way: the ball_* states and parameters, below).

    Conventions (docs/concepts/conventions.md): every particle has the mass m (point_masses()). A spring's tension
    k (r - L) + damping (v_j - v_i) . n, L = rest (1 + a), pulls its ends together when positive; the force on its
    first end i is tension n, n the unit vector from i to j (spring_forces(traj)). A pinned particle is held at rest
    by whatever force that takes, R = -m v / dt - f with f its springs', weight, contact and drag forces
    (pin_reactions(traj); particle_forces(traj) gives f for every particle). Contact with softness s: act(d) = d and
    gate(d) = 1 while d > 0 at s = 0; act(d) = s ln(1 + e^(d / s)) and gate(d) = 1 / (1 + e^(-d / s)) for s > 0."""

    PARAMS = (
        Quantity("g", 9.8, "m/s^2", "gravitational acceleration", bounds="[0, inf)"),
        Quantity("m", 0.01, "kg", "mass of each particle", bounds="(0, inf)"),
        Quantity("k", 1000.0, "N/m", "stiffness of each spring", shape=("n_springs",), bounds="[0, inf)"),
        Quantity("rest", 0.05, "m", "rest length of each spring (default: as built)", shape=("n_springs",),
                 bounds="(0, inf)"),
        Quantity("damping", 2.0, "N s/m", "viscous damping along each spring (c in the spring law)", bounds="[0, inf)"),
        Quantity("drag", 0.0, "N s/m", "viscous drag on each particle moving through still air", bounds="[0, inf)"),
        Quantity("kc", 5000.0, "N/m", "ground contact stiffness", bounds="[0, inf)"),
        Quantity("kd", 20.0, "N s/m", "ground contact damping while compressing", bounds="[0, inf)"),
        Quantity("softness", 0.0, "m", "contact softness (0: hard penalty contact)", bounds="[0, inf)"),
        Quantity("mu", 0.6, "-", "Coulomb coefficient with the ground", bounds="[0, inf)"),
        Quantity("eps", 0.05, "m/s", "velocity scale of the regularized friction law", bounds="(0, inf)"),
        Quantity("sphere_center", 0.0, "m", "centre of each static sphere", shape=("n_spheres", "dim")),
        Quantity("sphere_radius", 0.1, "m", "radius of each static sphere", shape=("n_spheres",), bounds="(0, inf)"),
        Quantity("box_center", 0.0, "m", "centre of each static axis-aligned box", shape=("n_boxes", "dim")),
        Quantity("box_half", 0.1, "m", "half extents of each static box", shape=("n_boxes", "dim"), bounds="(0, inf)"),
        Quantity("ball_radius", 0.05, "m", "radius of each free ball", shape=("n_balls",), bounds="(0, inf)"),
        Quantity("ball_mass", 0.1, "kg", "mass of each free ball", shape=("n_balls",), bounds="(0, inf)"),
    )
    STATE = (
        Quantity("pos", 0.0, "m", "particle positions (x, y) or (x, y, z), y up", shape=("n_particles", "dim")),
        Quantity("vel", 0.0, "m/s", "particle velocities", shape=("n_particles", "dim")),
        Quantity("ball_pos", 0.0, "m", "centre of each free ball", shape=("n_balls", "dim")),
        Quantity("ball_vel", 0.0, "m/s", "velocity of each free ball's centre", shape=("n_balls", "dim")),
    )
    ACTION = (Quantity("activation", 0.0, "-", "fractional change of the rest length of each actuator's springs",
                       shape=("n_actuators",), bounds="(-1, inf)"),)
    STRUCTURE = ("dim", "n_particles", "n_springs", "n_actuators", "degree", Size("n_spheres", 0, minimum=0),
                 Size("n_boxes", 0, minimum=0), Size("n_balls", 0, minimum=0))
    SCRATCH = (Scratch("spring_force", "N", "force of each spring on its first particle", shape=("n_springs", "dim"),
                       assigned=True),
               # kept, though no reverse reads it: recomputed scratch would make the backward pass rerun the
               # springs each step to refill it, which costs more than the memory saves
               Scratch("spring_load", "N", "sum of the spring forces on each particle (the fused forward pass's)",
                       shape=("n_particles", "dim")),
               Scratch("ball_load", "N", "sum of the particles' contact forces on each ball",
                       shape=("n_balls", "dim")))
    PHASES = (("springs", "n_springs"), ("particles", "n_particles"), ("balls", "n_balls"))
    FUSED = {"springs": ("springs_fused", "n_springs"), "particles": ("particles_fused", "n_particles"),
             "balls": ("balls_fused", "n_balls")}
    REVERSES = {"springs": ("springs_reverse", "n_springs"), "particles": ("particles_reverse", "n_particles"),
                "balls": ("balls_reverse", "n_balls")}
    DT = 5e-4

    def __init__(self, horizon, batch=1, dt=None, robot=None, spheres=(), boxes=(), balls=(), **values):
        check_run("MassSpring", horizon, batch, dt)
        check_derived("MassSpring", values, DERIVED)
        if not (robot is None or isinstance(robot, (Robot, str, os.PathLike))):
            raise TypeError(f"MassSpring: robot must be a Robot, a robot name or a JSON file path, got "
                            f"{type(robot).__name__}")
        self.robot = grid(32, 8) if robot is None else robot if isinstance(robot, Robot) else Robot.load(robot)
        dim = self.robot.dim
        obstacles = {name: obstacle_table(name, given, dim, size)
                     for name, given, size in (("spheres", spheres, ()), ("boxes", boxes, (dim,)),
                                               ("balls", balls, ()))}
        spring_of = self.robot.incidence()[0]
        sizes = dict(dim=dim, n_particles=len(self.robot.particles), n_springs=len(self.robot.springs),
                     n_actuators=max(len(self.robot.actuators), 1), degree=spring_of.shape[1],
                     n_spheres=len(obstacles["spheres"][0]), n_boxes=len(obstacles["boxes"][0]),
                     n_balls=len(obstacles["balls"][0]))
        super().__init__(horizon, batch, dt, **sizes, **values)
        if "pos" not in values:
            self.set_initial_state(pos=self.robot.particles)
        if "rest" not in values:
            self.set_params(rest=self.robot.rest_lengths())
        for (centre, size), names in ((obstacles["spheres"], ("sphere_center", "sphere_radius")),
                                      (obstacles["boxes"], ("box_center", "box_half"))):
            if len(centre):
                self.set_params(**{n: v for n, v in zip(names, (centre, size)) if n not in values})
        centre, radius = obstacles["balls"]
        if len(centre):
            if "ball_radius" not in values:
                self.set_params(ball_radius=radius)
            if "ball_pos" not in values:
                self.set_initial_state(ball_pos=centre)

    def topology(self):
        spring_of, other_of, present = self.robot.incidence()
        first = self.robot.springs[spring_of, 0] == np.arange(len(spring_of))[:, None]
        owner = self.robot.actuator_of_spring()
        return dict(
            spring_of=spring_of, other_of=other_of, present=present,
            # the spring's force on this particle: +1 at its first end, -1 at its second, 0 on padding entries
            sign=np.where(first, 1.0, -1.0) * present,
            end=self.robot.springs,
            actuator_of=np.maximum(owner, 0),  # passive springs read actuator 0 and weigh it by 0
            actuated=(owner >= 0).astype(float),
            free=self.robot.free().astype(float),
            has_actuators=len(self.robot.actuators) > 0)

    @ti.func
    def spring_force(self, s: ti.template(), spring, i, j):
        """The force of a spring on its end i from its other end j."""
        dv, r, n, stretch = self.spring_terms(s, spring, i, j)
        L = s.param("rest", spring) * stretch
        return (s.param("k", spring) * (r - L) + s.param("damping") * dv.dot(n)) * n

    @ti.func
    def spring_terms(self, s: ti.template(), spring, i, j):
        """(dv, r, n, stretch) of a spring from its end i to its end j: d = x_j - x_i = r n, dv = v_j - v_i, and
        its rest length's factor 1 + a (1 for a passive spring)."""
        d = s.state("pos", j) - s.state("pos", i)
        dv = s.state("vel", j) - s.state("vel", i)
        r = d.norm()
        stretch = 1.0
        if ti.static(self.has_actuators):  # a passive body (a cloth) skips three loads a spring end
            stretch += self.actuated[spring] * s.action("activation", self.actuator_of[spring])
        return dv, r, d / r, stretch

    @ti.func
    def weight(self, s: ti.template()):
        w = -s.param("m") * s.param("g")
        return ti.Vector([w if k == 1 else 0.0 for k in ti.static(range(self.dim))])

    @ti.func
    def contact(self, s: ti.template(), p, v, branch: ti.template()):
        """The force of the ground and the obstacles on a particle at p moving at v. branch: skip the laws where
        the particle touches nothing (the same force; for forms that are never differentiated)."""
        kc, kd, soft = s.param("kc"), s.param("kd"), s.param("softness")
        mu, eps = s.param("mu"), s.param("eps")
        f = ti.Vector.zero(float, self.dim)
        for q in ti.static(range(1 + self.n_spheres + self.n_boxes)):
            d, n = self.shape(s, p, q)
            if ti.static(not branch):
                f += point_contact(d, n, v, kc, kd, soft, mu, eps)
            elif touching(d, soft):
                f += point_contact(d, n, v, kc, kd, soft, mu, eps)
        return f

    @ti.func
    def shape(self, s: ti.template(), p, q: ti.template()):
        """(depth, normal) of p against shape q: 0 the ground, then the spheres, then the boxes."""
        if ti.static(q == 0):
            return point_ground(p)
        elif ti.static(q <= self.n_spheres):
            return point_sphere(p, s.param("sphere_center", q - 1), s.param("sphere_radius", q - 1))
        else:
            r = ti.static(q - 1 - self.n_spheres)
            return point_box(p, s.param("box_center", r), s.param("box_half", r))

    @ti.func
    def ball_push(self, s: ti.template(), p, v, q: ti.template(), branch: ti.template()):
        """The force of ball q on a particle at p moving at v: the contact law on the velocity relative to the
        ball's, without friction (a ball here does not spin, so a frictional force, which would spin it, is left
        out rather than half applied). branch: as in contact."""
        d, n = point_sphere(p, s.state("ball_pos", q), s.param("ball_radius", q))
        kc, kd, soft, eps = s.param("kc"), s.param("kd"), s.param("softness"), s.param("eps")
        f = ti.Vector.zero(float, self.dim)
        if ti.static(not branch):
            f = point_contact(d, n, v - s.state("ball_vel", q), kc, kd, soft, 0.0, eps)
        elif touching(d, soft):
            f = point_contact(d, n, v - s.state("ball_vel", q), kc, kd, soft, 0.0, eps)
        return f

    @ti.func
    def move(self, s: ti.template(), i, f, fused: ti.template()):
        """Particle i under the force f (weight and springs) and contact: one semi-implicit Euler step, or none
        for a pinned particle. fused: the forward-only form, which skips the contact laws where nothing touches
        and sets the next state rather than adding into it."""
        p, v = s.state("pos", i), s.state("vel", i)
        f += self.contact(s, p, v, fused) - s.param("drag") * v
        f += self.pushes(s, p, v, fused, True)
        p_next, v_next = semi_implicit_euler(p, v, f / s.param("m"), s.dt)
        p_next, v_next = p + self.free[i] * (p_next - p), self.free[i] * v_next
        self.write_next(s, "pos", "vel", i, p_next, v_next, fused)

    @ti.func
    def pushes(self, s: ti.template(), p, v, branch: ti.template(), react: ti.template()):
        """The pushes on a particle at p moving at v of the bodies that it pushes back (the free balls). react: add
        each push's reaction into its body's load (the step; not where a reverse recomputes the force). branch: as
        in contact."""
        f = ti.Vector.zero(float, self.dim)
        for q in ti.static(range(self.n_balls)):
            push = self.ball_push(s, p, v, q, branch)
            f += push
            if ti.static(react):
                s.accumulate("ball_load", q, -push)
        return f

    @ti.func
    def write_next(self, s: ti.template(), position: ti.template(), velocity: ti.template(), i, x, v,
                   fused: ti.template()):
        """Item i's next position and velocity: set by the fused forward form, added into the zeroed next state
        otherwise."""
        if ti.static(fused):
            s.set_next(position, i, x)
            s.set_next(velocity, i, v)
        else:
            s.advance(position, i, x)
            s.advance(velocity, i, v)

    # The phased step. No branches in either loop (reverse mode crashed on them here): padding entries of the
    # incidence table are weighed out by a sign of 0.
    @ti.func
    def springs(self, s: ti.template(), spring):
        i, j = self.end[spring, 0], self.end[spring, 1]
        s.assign("spring_force", spring, self.spring_force(s, spring, i, j))

    @ti.func
    def particles(self, s: ti.template(), i):
        self.move(s, i, self.load(s, i), False)

    @ti.func
    def load(self, s: ti.template(), i):
        """Weight and spring forces on particle i. The springs are summed from zero in the order of their indices
        (the incidence table's), as the fused form adds them, and the weight added last: the same bits."""
        f = ti.Vector.zero(float, self.dim)
        for q in ti.static(range(self.degree)):
            f += self.sign[i, q] * s.scratch("spring_force", self.spring_of[i, q])
        return self.weight(s) + f

    # The fused forward pass's form of the particle phase and the phases' reverses (tisim/core/phases.py: FUSED and
    # REVERSES), never differentiated: they skip the contact laws where a particle touches nothing (most particles
    # of a cloth or a walker, most of the time), a branch Taichi's reverse mode could not take here, and the fused
    # form sets the next state, which the engine then need not zero.
    @ti.func
    def springs_fused(self, s: ti.template(), spring):
        # each spring adds its force into both ends' loads, in spring order, where the phase's particles gather
        # them: on a large cloth the gather's index loads cost more than the adds
        i, j = self.end[spring, 0], self.end[spring, 1]
        f = self.spring_force(s, spring, i, j)
        s.assign("spring_force", spring, f)
        s.accumulate("spring_load", i, f)
        s.accumulate("spring_load", j, -f)

    @ti.func
    def particles_fused(self, s: ti.template(), i):
        self.move(s, i, self.weight(s) + s.scratch("spring_load", i), True)

    # The balls: each moves under its weight, the ground's frictionless push and the particles' pushes, which the
    # particle phase summed into ball_load as the reactions of the forces it applied (momentum is exchanged, not
    # made: tests/test_mass_spring_3d.py).
    @ti.func
    def balls(self, s: ti.template(), q):
        self.move_ball(s, q, False)

    @ti.func
    def balls_fused(self, s: ti.template(), q):
        self.move_ball(s, q, True)

    @ti.func
    def ball_ground(self, s: ti.template(), q, branch: ti.template()):
        """The ground's push on ball q (frictionless, as the particles')."""
        c, u = s.state("ball_pos", q), s.state("ball_vel", q)
        d, n = s.param("ball_radius", q) - c[1], ti.Vector.unit(self.dim, 1, float)
        kc, kd, soft, eps = s.param("kc"), s.param("kd"), s.param("softness"), s.param("eps")
        f = ti.Vector.zero(float, self.dim)
        if ti.static(not branch):
            f = point_contact(d, n, u, kc, kd, soft, 0.0, eps)
        elif touching(d, soft):
            f = point_contact(d, n, u, kc, kd, soft, 0.0, eps)
        return f

    @ti.func
    def move_ball(self, s: ti.template(), q, fused: ti.template()):
        c, u = s.state("ball_pos", q), s.state("ball_vel", q)
        a = (s.scratch("ball_load", q) + self.ball_ground(s, q, fused)) / s.param("ball_mass", q) \
            - s.param("g") * ti.Vector.unit(self.dim, 1, float)
        c_next, u_next = semi_implicit_euler(c, u, a, s.dt)
        self.write_next(s, "ball_pos", "ball_vel", q, c_next, u_next, fused)

    @ti.func
    def balls_reverse(self, s: ti.template(), bar: ti.template(), q):
        # c' = c + dt u', u' = u + dt a, a = (load + ground) / M - g e_y
        dt, M = s.dt, s.param("ball_mass", q)
        c, u = s.state("ball_pos", q), s.state("ball_vel", q)
        up = ti.Vector.unit(self.dim, 1, float)
        u_next_bar = bar.next_state("ball_vel", q) + dt * bar.next_state("ball_pos", q)
        a_bar = dt * u_next_bar
        f_bar = a_bar / M
        ground = self.ball_ground(s, q, True)
        bar.accumulate("ball_load", q, f_bar)
        bar.add_param("ball_mass", q, -f_bar.dot(s.scratch("ball_load", q) + ground) / M)
        bar.add_param("g", 0, -a_bar[1])
        c_bar, u_bar = bar.next_state("ball_pos", q), u_next_bar
        d = s.param("ball_radius", q) - c[1]
        kc, kd, soft, eps = s.param("kc"), s.param("kd"), s.param("softness"), s.param("eps")
        if touching(d, soft):
            d_bar, _, vb, lb = point_contact_reverse(d, up, u, kc, kd, soft, 0.0, eps, f_bar)
            c_bar -= d_bar * up
            u_bar += vb
            bar.add_param("ball_radius", q, d_bar)
            self.add_law_bar(bar, lb)
        bar.add_state("ball_pos", q, c_bar)
        bar.add_state("ball_vel", q, u_bar)

    @ti.func
    def add_law_bar(self, bar: ti.template(), lb):
        """A frictionless contact's derivatives by (kc, kd, softness, mu, eps): mu's is not a derivative (mu is 0
        there, not the parameter)."""
        for k, name in ti.static(((0, "kc"), (1, "kd"), (2, "softness"), (4, "eps"))):
            bar.add_param(name, 0, lb[k])

    @ti.func
    def springs_reverse(self, s: ti.template(), bar: ti.template(), spring):
        # f = phi n, phi = k (r - L) + c dv . n, n = d / r: dn/dd = (1 - n n^T) / r, dr/dd = n
        i, j = self.end[spring, 0], self.end[spring, 1]
        dv, r, n, stretch = self.spring_terms(s, spring, i, j)
        rest, k, c = s.param("rest", spring), s.param("k", spring), s.param("damping")
        phi = k * (r - rest * stretch) + c * dv.dot(n)
        f_bar = bar.scratch("spring_force", spring)
        phi_bar = f_bar.dot(n)
        n_bar = phi * f_bar + phi_bar * c * dv
        d_bar = (n_bar - n_bar.dot(n) * n) / r + phi_bar * k * n
        bar.add_state("pos", j, d_bar)
        bar.add_state("pos", i, -d_bar)
        bar.add_state("vel", j, phi_bar * c * n)
        bar.add_state("vel", i, -phi_bar * c * n)
        bar.add_param("k", spring, phi_bar * (r - rest * stretch))
        bar.add_param("rest", spring, -phi_bar * k * stretch)
        bar.add_param("damping", 0, phi_bar * dv.dot(n))
        # the mass's share through this spring's force: a = f / m gives dL/dm = -f_bar . f / m, summed over the
        # particles; a spring's force enters it as f . (f_bar at one end - at the other) = phi phi_bar
        bar.add_param("m", 0, -phi * phi_bar / s.param("m"))
        if ti.static(self.has_actuators):
            bar.add_action("activation", self.actuator_of[spring], -phi_bar * k * rest * self.actuated[spring])

    @ti.func
    def particles_reverse(self, s: ti.template(), bar: ti.template(), i):
        # x' = x + free (x + dt v' - x), v' = free (v + dt f / m), f = load + contact - drag v
        dt = s.dt
        p, v = s.state("pos", i), s.state("vel", i)
        m, drag = s.param("m"), s.param("drag")
        # f without the springs' forces (springs_reverse adds their share of dL/dm)
        own = self.weight(s) + self.contact(s, p, v, True) - drag * v
        own += self.pushes(s, p, v, True, False)
        free = self.free[i]
        pos_bar, vel_bar = bar.next_state("pos", i), bar.next_state("vel", i)
        v_next_bar = free * (vel_bar + dt * pos_bar)
        f_bar = dt * v_next_bar / m
        p_bar, v_bar = self.contact_reverse(s, bar, p, v, f_bar)
        pushed_p, pushed_v = self.pushes_reverse(s, bar, p, v, f_bar)
        p_bar += pushed_p
        v_bar += pushed_v
        bar.add_state("pos", i, pos_bar + p_bar)
        bar.add_state("vel", i, v_next_bar - drag * f_bar + v_bar)
        for q in ti.static(range(self.degree)):
            bar.accumulate("spring_force", self.spring_of[i, q], self.sign[i, q] * f_bar)
        bar.add_param("m", 0, -f_bar.dot(own) / m - s.param("g") * f_bar[1])
        bar.add_param("g", 0, -m * f_bar[1])
        bar.add_param("drag", 0, -f_bar.dot(v))

    @ti.func
    def pushes_reverse(self, s: ti.template(), bar: ti.template(), p, v, f_bar):
        """The reverse of pushes, reactions included: (dL/dp, dL/dv) from dL/df of the particle's force and the
        loads' derivatives; the bodies' derivatives are added into bar."""
        p_bar, v_bar = ti.Vector.zero(float, self.dim), ti.Vector.zero(float, self.dim)
        for q in ti.static(range(self.n_balls)):
            # the push enters the particle's force and, negated, the ball's load
            push_bar = f_bar - bar.scratch("ball_load", q)
            c, r = s.state("ball_pos", q), s.param("ball_radius", q)
            d, n = point_sphere(p, c, r)
            if touching(d, s.param("softness")):
                d_bar, n_bar, vb, lb = point_contact_reverse(d, n, v - s.state("ball_vel", q), s.param("kc"),
                                                             s.param("kd"), s.param("softness"), 0.0,
                                                             s.param("eps"), push_bar)
                delta_bar = point_sphere_reverse(p, c, d_bar, n_bar)
                p_bar += delta_bar
                v_bar += vb
                bar.add_state("ball_pos", q, -delta_bar)
                bar.add_state("ball_vel", q, -vb)
                bar.add_param("ball_radius", q, d_bar)
                self.add_law_bar(bar, lb)
        return p_bar, v_bar

    @ti.func
    def contact_reverse(self, s: ti.template(), bar: ti.template(), p, v, f_bar):
        """The reverse of contact: (dL/dp, dL/dv) from dL/df; the laws' and obstacles' parameter derivatives are
        added into bar."""
        kc, kd, soft = s.param("kc"), s.param("kd"), s.param("softness")
        mu, eps = s.param("mu"), s.param("eps")
        p_bar, v_bar = ti.Vector.zero(float, self.dim), ti.Vector.zero(float, self.dim)
        law_bar = ti.Vector.zero(float, 5)
        for q in ti.static(range(1 + self.n_spheres + self.n_boxes)):
            d, n = self.shape(s, p, q)
            if touching(d, soft):
                d_bar, n_bar, vb, lb = point_contact_reverse(d, n, v, kc, kd, soft, mu, eps, f_bar)
                v_bar += vb
                law_bar += lb
                if ti.static(q == 0):  # the ground: d = -p . n, n fixed
                    p_bar -= d_bar * n
                elif ti.static(q <= self.n_spheres):
                    c = s.param("sphere_center", q - 1)
                    delta_bar = point_sphere_reverse(p, c, d_bar, n_bar)
                    p_bar += delta_bar
                    bar.add_param("sphere_center", q - 1, -delta_bar)
                    bar.add_param("sphere_radius", q - 1, d_bar)
                else:
                    r = ti.static(q - 1 - self.n_spheres)
                    q_bar, h_bar = point_box_reverse(p, s.param("box_center", r), s.param("box_half", r), d_bar)
                    p_bar += q_bar
                    bar.add_param("box_center", r, -q_bar)
                    bar.add_param("box_half", r, h_bar)
        for k, name in ti.static(enumerate(("kc", "kd", "softness", "mu", "eps"))):
            bar.add_param(name, 0, law_bar[k])
        return p_bar, v_bar

    def events(self, traj):
        """"ground contact": some particle is below the ground (y < 0)."""
        return {"ground contact": (traj["pos"][..., 1] < 0).any(axis=2)}


def obstacle_table(name, given, dim, size_shape):
    """(centres (n, dim), sizes (n, *size_shape)) from [(centre, size), ...], refused by name where malformed."""
    if isinstance(given, (str, bytes, dict)) or not isinstance(given, (list, tuple, np.ndarray)):
        raise ValueError(f"MassSpring: {name} must be a list of (centre, size) pairs, got {given!r}")
    centres, sizes = [], []
    for q, entry in enumerate(given):
        try:
            centre, size = entry
            centre, size = np.asarray(centre, dtype=float), np.asarray(size, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"MassSpring: {name}[{q}] must be a pair (centre, size), got {entry!r}") from None
        if centre.shape != (dim,) or size.shape != size_shape or not np.all(np.isfinite(centre)) or \
                not np.all(np.isfinite(size) & (size > 0)):
            what = "a radius" if size_shape == () else f"{dim} half extents"
            raise ValueError(f"MassSpring: {name}[{q}] must be a centre of {dim} coordinates and {what} > 0, got "
                             f"{entry!r}")
        centres.append(centre)
        sizes.append(size)
    return np.reshape(centres, (-1, dim)), np.reshape(sizes, (-1,) + size_shape)
