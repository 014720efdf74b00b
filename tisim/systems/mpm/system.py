"""A continuum by the material point method, in 2D or 3D from one code: MLS-MPM with APIC transfers.

Particles carry position x_p, velocity v_p, deformation gradient F_p and the APIC affine velocity C_p; a regular grid
of n_grid^d cells over the unit square (cube), spacing h = 1 / n_grid, carries mass and momentum within a step.
Each step is four phases (tisim/core/phases.py), with quadratic B-spline weights w_ip over the 3^d cells around x_p:

    stress (points)      F' = P((I + dt C_p) F_p), P the material's projection onto what it keeps (below);
                         A_p = m_p C_p - 4 dt V_p tau_p(F') / h^2 (tau: Kirchhoff stress)
    scatter (pairs)      m_i += w_ip m_p;  (m v)_i += w_ip (m_p v_p + A_p (x_i - x_p))
    grid (cells)         v_i = (m v)_i / m_i + dt g, then the walls: in the boundary band (the nodes up to 3 cells
                         from each side, so each wall lies 3 cells in: the floor at y = 3 h) a wall stops the
                         velocity into it, and acts on the tangential velocity v_t of a cell pressing into
                         it (normal speed v_n) by its law, the option floor for the floor and walls for the others
                         (the sides and the ceiling): "sticky" stops it, "slip" keeps it, "friction" slows it by
                         Coulomb's law, |v_t| -> max(0, |v_t| - mu |v_n|)
    gather (pairs)       v_p' = D sum_i w_ip v_i;  C_p' = 4 D / h^2 sum_i w_ip v_i (x_i - x_p)^T;  x_p' = x_p + dt v_p'
                         (D = e^(-drag dt): a linear drag on the points, none by default);
                         F_p' = F'
A pair is one point and one cell of its stencil: every phase is a single loop, without a loop over the stencil
inside it. The fused forward pass and the backward pass run scatter and gather per point instead, with the stencil
unrolled (tisim/systems/mpm/transfers.py: the same sums, regrouped, and hand-written reverses).

Materials (the option material), with J = det F, the shear modulus G = E / (2 (1 + nu)) and the Lame parameter
lambda = E nu / ((1 + nu)(1 - 2 nu)) of each particle group:
    "neo_hookean" (default)  tau = G (F F^T - I) + lambda ln(J) I
    "corotated"              tau = 2 G (F - R) F^T + lambda J (J - 1) I, R the rotation of F's polar decomposition
    "fluid"                  tau = K J (J - 1) I with K = lambda + 2 G / d, the bulk modulus of the solid with the
                             same E and nu; no shear stress, and P keeps only the volume change: P(F) = J^(1/d) I
    "von_mises"              corotated elasticity, perfectly plastic beyond the yield stress: P brings the left
                             stretch V of F = V R back onto the von Mises surface, |dev V| <= yield / (sqrt(6) G)
                             (|dev V| the small-strain deviatoric strain; sqrt(3/2) |s| <= yield, s = 2 G dev V)
The solids' P is the identity.
Actuated particles add an active stress along their fibre (the vertical axis, as DiffTaichi's soft robots):
tau += a s F e_y e_y^T F^T, for the action a of their actuator and the parameter s = "actuation". The laws and
their reverses are in tisim/systems/mpm/materials.py.

The grid is scratch recomputed in the backward pass (keep=False): memory per step is the particles' state only.
Every phase has a hand-written reverse (REVERSES: stress's and grid's below, the transfers' in their module), so
on a CPU the backward pass is one launch, each step's grid refilled and then reversed inside it
(tisim/core/phases.py); tests/test_mpm.py compares them with Taichi's reverse mode of the phases, every material and
wall law, to 1e-12 in float64.

Conservation, by construction of the transfers: without gravity and walls the total momentum sum_p m_p v_p is
conserved to rounding (tests/test_mpm.py checks it). Explicit MPM is stable for dt below about h / c with c the
speed of sound sqrt(E / rho); beyond it the rollout blows up, which the engine reports as a NonFiniteError naming
the step.
"""
import numpy as np
import taichi as ti

from tisim.core.engine import System
from tisim.core.memory import INDEX_LIMIT
from tisim.core.model import check_derived, check_run
from tisim.core.quantities import Quantity, Scratch
from tisim.systems.mpm import materials
from tisim.systems.mpm.body import Body
from tisim.systems.mpm.readouts import Readouts
from tisim.systems.mpm.transfers import Transfers

BAND = 3  # each wall's distance from its side of the grid, in cells: the walls act on the nodes up to it
# the structural sizes MPM computes from its body and grid, with where each comes from
DERIVED = {
    "dim": "2D or 3D follows from the body, points of shape (N, 2) or (N, 3): pass body=Body.box(lower, upper, "
           "spacing) with three coordinates, or Body.from_cells with [i, j, k] cells, for 3D (the default body is 2D)",
    "n_cells": "it is n_grid ** dim; pass n_grid",
    "n_particles": "it is the body's number of points; pass body=",
    "n_pairs": "it is the body's number of points times 3 ** dim; pass body=",
    "n_groups": "it follows from the body's groups; pass body=",
    "n_actuators": "it follows from the body's actuators; pass body=",
}


def largest_grid(dim):
    """The largest n_grid whose grid momentum (n_grid ** dim cells, dim entries each) Taichi's 32-bit indexing
    reaches."""
    n = int(round((INDEX_LIMIT // dim) ** (1 / dim)))
    while (n + 1) ** dim * dim <= INDEX_LIMIT:
        n += 1
    while n ** dim * dim > INDEX_LIMIT:
        n -= 1
    return n


class MPM(Transfers, Readouts, System):
    """A soft body of material points on an n_grid^dim grid over the unit square or cube (default: a 2D jelly block).

    Conventions (docs/concepts/conventions.md): SI units, y up, the grid over the unit square (cube), h = 1 / n_grid.
    2D is plane strain: a slice 1 m deep of a body that does not stretch along z (F_zz = 1: the 3D laws and Lame
    parameters), so rho is per metre of depth and so are masses, forces and momenta; stresses and E are in Pa.
    Each point's mass is m_p = rho_g V_p, its group's density times the body's volume per point (Body.volume), and
    its current volume V_p det F_p: point_masses(), point_volumes(traj). The total angular momentum, which the
    transfers conserve, includes the APIC part m_p h^2 / 4 (C_yx - C_xy) of each point (in 3D the axial vector of
    C_p - C_p^T times m_p h^2 / 4): angular_momentum(traj, about). The walls act on the grid nodes up to BAND = 3
    cells from each side (up to y = 3 h for the floor, from 1 - 3 h for the ceiling): wall_band(). A body resting
    on the floor settles as on a rigid floor at y = 3 h (its lowest row of points 0.003 cells below it)."""

    PARAMS = (
        Quantity("E", 3000.0, "Pa", "Young's modulus of each material group", shape=("n_groups",), bounds="(0, inf)"),
        Quantity("nu", 0.2, "-", "Poisson's ratio of each material group", shape=("n_groups",), bounds="[0, 0.5)"),
        Quantity("rho", 1000.0, "kg/m^3", "density of each material group (2D: kg/m^2)", shape=("n_groups",),
                 bounds="(0, inf)"),
        Quantity("yield_stress", 200.0, "Pa", "von Mises yield stress of each material group (material=\"von_mises\")",
                 shape=("n_groups",), bounds="(0, inf)"),
        Quantity("g", 9.8, "m/s^2", "gravitational acceleration", bounds="[0, inf)"),
        Quantity("mu", 0.5, "-", "Coulomb friction coefficient of the floor and walls (floor=\"friction\", "
                 "walls=\"friction\")", bounds="[0, inf)"),
        Quantity("actuation", 1000.0, "Pa", "active fibre stress per unit activation", bounds="[0, inf)"),
        Quantity("drag", 0.0, "1/s", "linear drag rate of the points' velocity and affine velocity (a damping that "
                 "leaves rest untouched)", bounds="[0, inf)"),
    )
    STATE = (
        Quantity("pos", 0.0, "m", "material point positions", shape=("n_particles", "dim")),
        Quantity("vel", 0.0, "m/s", "material point velocities", shape=("n_particles", "dim")),
        Quantity("F", 0.0, "-", "deformation gradient of each material point", shape=("n_particles", "dim", "dim")),
        Quantity("C", 0.0, "1/s", "APIC affine velocity (velocity gradient) of each material point",
                 shape=("n_particles", "dim", "dim")),
    )
    ACTION = (Quantity("activation", 0.0, "-", "activation of each actuator's fibres", shape=("n_actuators",)),)
    SCRATCH = (
        Scratch("affine", "kg/s", "affine momentum of each point: m C minus its stress term", shape=("n_particles",
                "dim", "dim"), keep=False, assigned=True),
        Scratch("deformation", "-", "each point's deformation gradient after the step: F' made admissible by the "
                "material", shape=("n_particles", "dim", "dim"), keep=False, assigned=True),
        Scratch("grid_mass", "kg", "mass of each grid cell", shape=("n_cells",), keep=False),
        Scratch("grid_momentum", "kg m/s", "momentum of each grid cell", shape=("n_cells", "dim"), keep=False),
        Scratch("grid_velocity", "m/s", "velocity of each grid cell after forces and walls", shape=("n_cells", "dim"),
                keep=False, assigned=True),
    )
    PHASES = (("stress", "n_particles"), ("scatter", "n_pairs"), ("grid", "n_cells"), ("gather", "n_pairs"))
    FUSED = dict(Transfers.FUSED, stress=("stress_fused", "n_particles"), grid=("grid_fused", "n_cells"))
    REVERSES = dict(Transfers.REVERSES, stress=("stress_reverse", "n_particles"), grid=("grid_reverse", "n_cells"))
    STRUCTURE = ("dim", "n_grid", "n_cells", "n_particles", "n_pairs", "n_groups", "n_actuators")
    OPTIONS = {"floor": ("sticky", "slip", "friction"), "walls": ("slip", "sticky", "friction"),
               "material": tuple(materials.MATERIALS)}
    DT = 2e-4
    BAND = BAND  # the walls' band in cells, for readouts.wall_band

    def __init__(self, horizon, batch=1, dt=None, body=None, n_grid=32, **values):
        check_run("MPM", horizon, batch, dt)
        if not (body is None or isinstance(body, Body)):
            raise TypeError(f"MPM: body must be a tisim.systems.mpm.Body, got {type(body).__name__}")
        dim = 2 if body is None else body.dim
        # a grid's cells (momentum: dim entries each) are counted by 32-bit integers in the kernels
        largest = largest_grid(dim)
        if isinstance(n_grid, bool) or not isinstance(n_grid, (int, np.integer)) or \
                not 2 * BAND + 2 <= n_grid <= largest:
            raise ValueError(f"MPM: n_grid must be an integer >= {2 * BAND + 2} (and <= {largest:,} in {dim}D), "
                             f"got {n_grid!r}")
        check_derived("MPM", values, DERIVED)
        if body is None:
            body = Body.box([0.4, BAND / n_grid], [0.6, BAND / n_grid + 0.2], 0.5 / n_grid)
        inner = (BAND - 0.5) / n_grid
        if np.any(body.particles < inner - 1e-12) or np.any(body.particles > 1 - inner + 1e-12):
            raise ValueError(f"MPM: body particles must lie in [{inner:g}, {1 - inner:g}] on every axis (inside the "
                             f"walls of a {n_grid}-cell grid)")
        self.body = body
        n = len(body.particles)
        sizes = dict(dim=body.dim, n_grid=int(n_grid), n_cells=int(n_grid) ** body.dim, n_particles=n,
                     n_pairs=n * 3 ** body.dim, n_groups=int(body.groups.max()) + 1,
                     n_actuators=max(int(body.actuators.max()) + 1, 1))
        super().__init__(horizon, batch, dt, **sizes, **values)
        start = {}
        if "pos" not in values:
            start["pos"] = body.particles
        if "F" not in values:
            start["F"] = np.broadcast_to(np.eye(body.dim), (len(body.particles), body.dim, body.dim))
        self.set_initial_state(**start)

    def topology(self):
        return dict(volume=float(self.body.volume), group_of=self.body.groups,
                    actuator_of=np.maximum(self.body.actuators, 0),  # passive points weigh actuator 0 by 0
                    actuated=(self.body.actuators >= 0).astype(float))

    # ---- pieces shared by the phases ----------------------------------------------------------------------------
    @ti.func
    def against(self, c, vk, k: ti.template(), high: ti.template()):
        """1 where cell c lies in the boundary band of axis k's low (high) wall and the velocity component vk points
        into that wall. The low band holds node BAND too, the high one node n_grid - BAND: each wall's surface lies
        BAND cells from its side, where a body resting on it settles as on a rigid wall (holding only the nodes
        below, the floor let a resting column sink a fifth of a cell into it: docs/concepts/conventions.md)."""
        index = (c // self.n_grid ** k) % self.n_grid
        inside = ti.select(index >= self.n_grid - BAND, 1.0, 0.0) if ti.static(high) else \
            ti.select(index <= BAND, 1.0, 0.0)
        return inside * (ti.select(vk > 0.0, 1.0, 0.0) if ti.static(high) else ti.select(vk < 0.0, 1.0, 0.0))

    def wall_law(self, k, high):
        """The law of axis k's low (high) wall: the option floor for the floor, walls for the others."""
        return self.floor if k == 1 and not high else self.walls

    def slowing_walls(self):
        """The walls that act on the tangential velocity of a cell pressing into them, in the grid's order: [(axis,
        high)] of those whose law is not "slip" (at compile time)."""
        return [(k, high) for k in range(self.dim) for high in (False, True) if self.wall_law(k, high) != "slip"]

    @ti.func
    def wall_factor(self, s: ti.template(), c, free, v, k: ti.template(), high: ti.template()):
        """What the wall (k, high) keeps of the velocity v of cell c, whose free velocity is `free`: all of it unless
        the cell presses into the wall, then none (sticky) or what Coulomb's law leaves, |v_t| -> max(0, |v_t| -
        mu |v_n|) (friction)."""
        pressing = self.against(c, free[k], k, high)
        kept = 0.0
        if ti.static(self.wall_law(k, high) == "friction"):
            speed = ti.sqrt(v.dot(v) + 1e-30)  # v's normal component is zero here; the 1e-30 guards 0 / 0
            kept = ti.max(0.0, 1.0 - s.param("mu") * ti.abs(free[k]) / speed)
        return 1.0 - pressing * (1.0 - kept)

    @ti.func
    def free_velocity(self, s: ti.template(), c):
        """Cell c's velocity before the walls: its momentum over its mass, plus gravity's increment."""
        m = s.scratch("grid_mass", c)
        # an empty cell has no velocity; the guard keeps its derivative finite (0 / 0 would poison the adjoint)
        return s.scratch("grid_momentum", c) / ti.max(m, 1e-30) * ti.select(m > 0.0, 1.0, 0.0) \
            - s.dt * s.param("g") * ti.Vector.unit(self.dim, 1, float)

    @ti.func
    def into_wall(self, c, vk, k: ti.template()):
        """1 where cell c lies in the boundary band of axis k and the velocity component vk points into the wall."""
        return ti.max(self.against(c, vk, k, False), self.against(c, vk, k, True))

    @ti.func
    def deformed(self, s: ti.template(), p):
        """F' = (I + dt C_p) F_p."""
        identity = ti.Matrix.identity(float, self.dim)
        return (identity + s.dt * s.state("C", p)) @ s.state("F", p)

    @ti.func
    def admissible(self, s: ti.template(), F, g):
        """What of F' the material keeps: all of it for a solid, the volume change for a fluid, the part inside the
        yield surface for von Mises plasticity (the rest is plastic flow, forgotten)."""
        if ti.static(self.material == "fluid"):
            return materials.fluid_projection(F)
        if ti.static(self.material == "von_mises"):
            return materials.von_mises_return(F, self.yield_limit(s, g))
        return F

    @ti.func
    def yield_limit(self, s: ti.template(), g):
        """Group g's bound on |dev V|: sqrt(3/2) |s| <= yield with s = 2 G dev(strain) gives |dev(strain)| <=
        yield / (sqrt(6) G)."""
        E, nu = s.param("E", g), s.param("nu", g)
        return s.param("yield_stress", g) * 2.0 * (1.0 + nu) / (ti.sqrt(6.0) * E)

    @ti.func
    def mass(self, s: ti.template(), p):
        return s.param("rho", self.group_of[p]) * self.volume

    # ---- the phases stress and grid (scatter and gather: tisim/systems/mpm/transfers.py) ---------------------
    # Taichi 1.7's warning "Loading variable ... before anything is stored to it" (taichi-dev/taichi#8454) is not
    # harmless: while the gather multiplied F' (a matrix product) into the next state per pair, the reverse kernel
    # warned so and its float32 dL/dF was wrong (98% of the largest dL/du at T = 256, found by benchmarks/peers.py),
    # while float64 was right. F' is now computed once per point, into scratch; tests/test_mpm.py compares float32
    # gradients with float64 ones.
    @ti.func
    def stress(self, s: ti.template(), p):
        self.stress_of(s, p, False)

    @ti.func
    def stress_fused(self, s: ti.template(), p):
        """Nothing: the fused forward pass computes each point's stress in its scatter (scatter_point), where the
        affine momentum is read back while it is in cache (the same trajectory to the last bit)."""
        pass

    @ti.func
    def stress_of(self, s: ti.template(), p, fused: ti.template()):
        """Point p's deformation gradient after the step, and its affine momentum m_p C_p - 4 dt V_p tau_p / h^2,
        with tau_p the Kirchhoff stress at F'. The phase adds them into zeroed scratch: with stores, Taichi's
        reverse mode of the corotated stress crashed (segmentation fault), and with the two returned from a
        function that the phase and its fused form shared, its float32 reverse was wrong (0.1% tolerance,
        tests/test_mpm.py). The fused forward's form (never differentiated) sets them, as it must set assigned
        scratch."""
        g = self.group_of[p]
        F = self.admissible(s, self.deformed(s, p), g)
        if ti.static(fused):
            s.assign("deformation", p, F)
        else:
            s.accumulate("deformation", p, F)
        fibre = F @ ti.Vector.unit(self.dim, 1, float)
        active = self.activation(s, p)
        E, nu = s.param("E", g), s.param("nu", g)
        G, la = E / (2.0 * (1.0 + nu)), E * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))
        tau = ti.static(materials.MATERIALS[self.material][0])(F, G, la) \
            + active * s.param("actuation") * fibre.outer_product(fibre)
        affine = self.mass(s, p) * s.state("C", p) - (4.0 * s.dt * self.volume * self.n_grid ** 2) * tau
        if ti.static(fused):
            s.assign("affine", p, affine)
        else:
            s.accumulate("affine", p, affine)

    @ti.func
    def activation(self, s: ti.template(), p):
        """The activation of point p's fibres during the step: its actuator's action, 0 for a passive point."""
        return self.actuated[p] * s.action("activation", self.actuator_of[p])

    @ti.func
    def add_activation(self, bar: ti.template(), p, value):
        """Add the derivative `value` with respect to point p's activation into its actuator's action."""
        bar.add_action("activation", self.actuator_of[p], self.actuated[p] * value)

    @ti.func
    def grid(self, s: ti.template(), c):
        s.assign("grid_velocity", c, self.walled(s, c))

    @ti.func
    def walled(self, s: ti.template(), c):
        """Cell c's velocity after gravity and the walls."""
        free = self.free_velocity(s, c)
        # each wall stops the velocity into it; written as new locals, not stores into one (reverse mode warned of
        # loads before stores in that form)
        v = ti.Vector([free[k] * (1.0 - self.into_wall(c, free[k], k)) for k in ti.static(range(self.dim))])
        walls = ti.static(len(self.slowing_walls()))
        return self.slowed(s, c, free, v, walls)

    @ti.func
    def grid_fused(self, s: ti.template(), c):
        """The grid phase of the fused forward pass and the backward pass's refill, which skip the empty cells, most
        of the grid (a body's points reach a few percent of it): an empty cell's velocity is set to zero, where
        the grid phase gives it gravity's increment.
        No point reads it with a nonzero weight: a point's every cell of nonzero weight holds that point's mass."""
        if s.scratch("grid_mass", c) > 0.0:
            self.grid(s, c)
        else:
            s.assign("grid_velocity", c, ti.Vector.zero(float, self.dim))

    @ti.func
    def slowed(self, s: ti.template(), c, free, v, walls: ti.template()):
        """What the first `walls` slowing walls keep of cell c's velocity v."""
        result = v
        for k, high in ti.static(self.slowing_walls()[:walls]):
            result = result * self.wall_factor(s, c, free, result, k, high)
        return result

    # ---- the hand-written reverses of stress and grid (tisim/core/phases.py, REVERSES) ------------------------------
    # With them every phase has one, so the backward pass is one launch on a CPU (phases.run_reverses), where it
    # was four a step, two of them Taichi's reverse mode. tests/test_mpm.py compares them with Taichi's.
    @ti.func
    def admissible_reverse(self, s: ti.template(), bar: ti.template(), F, F_bar, g):
        """The derivative of admissible(s, F, g) with respect to F, given F_bar, the derivative of what it returned;
        von Mises clay adds its yield limit's derivatives into bar."""
        result = F_bar
        if ti.static(self.material == "fluid"):
            result = materials.fluid_projection_reverse(F, F_bar)
        if ti.static(self.material == "von_mises"):
            limit = self.yield_limit(s, g)
            F_from, limit_bar = materials.von_mises_return_reverse(F, limit, F_bar)
            result = F_from
            strength = s.param("yield_stress", g)
            bar.add_param("yield_stress", g, limit_bar * limit / strength)
            bar.add_param("nu", g, limit_bar * limit / (1.0 + s.param("nu", g)))
            bar.add_param("E", g, -limit_bar * limit / s.param("E", g))
        return result

    @ti.func
    def stress_reverse(self, s: ti.template(), bar: ti.template(), p):
        dt = s.dt
        g, up = self.group_of[p], ti.Vector.unit(self.dim, 1, float)
        C, F_before = s.state("C", p), s.state("F", p)
        deformed = self.deformed(s, p)
        F = self.admissible(s, deformed, g)
        fibre = F @ up
        strength = s.param("actuation")
        active = self.activation(s, p)
        E, nu = s.param("E", g), s.param("nu", g)
        G, la = E / (2.0 * (1.0 + nu)), E * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))
        affine_bar = bar.scratch("affine", p)
        tau_bar = -(4.0 * dt * self.volume * self.n_grid ** 2) * affine_bar
        F_bar, G_bar, la_bar = ti.static(materials.MATERIALS[self.material][1])(F, G, la, tau_bar)
        pull = fibre.dot(tau_bar @ fibre)  # tau_bar : (F e_y)(F e_y)^T
        F_bar += bar.scratch("deformation", p) \
            + (active * strength * (tau_bar + tau_bar.transpose()) @ fibre).outer_product(up)
        deformed_bar = self.admissible_reverse(s, bar, deformed, F_bar, g)
        bar.add_state("C", p, self.mass(s, p) * affine_bar + dt * deformed_bar @ F_before.transpose())
        bar.add_state("F", p, (ti.Matrix.identity(float, self.dim) + dt * C).transpose() @ deformed_bar)
        bar.add_param("rho", g, self.volume * (affine_bar * C).sum())
        bar.add_param("actuation", 0, active * pull)
        self.add_activation(bar, p, strength * pull)
        # G = E / (2 (1 + nu)) and lambda = E nu / ((1 + nu)(1 - 2 nu)), whose nu-derivative is E (1 + 2 nu^2) /
        # ((1 + nu)(1 - 2 nu))^2
        soft = (1.0 + nu) * (1.0 - 2.0 * nu)
        bar.add_param("E", g, G_bar / (2.0 * (1.0 + nu)) + la_bar * nu / soft)
        bar.add_param("nu", g, -G_bar * G / (1.0 + nu) + la_bar * E * (1.0 + 2.0 * nu * nu) / (soft * soft))

    @ti.func
    def grid_reverse(self, s: ti.template(), bar: ti.template(), c):
        self.walled_reverse(s, bar, c, bar.scratch("grid_velocity", c))

    @ti.func
    def walled_reverse(self, s: ti.template(), bar: ti.template(), c, walled_bar):
        """The derivatives of walled(s, c) given walled_bar, the derivative of what it returned."""
        v_bar = walled_bar
        if ti.abs(v_bar).max() > 0.0:  # else it adds nothing: no point's stencil reaches the cell, or with weight 0
            free = self.free_velocity(s, c)
            keep = ti.Vector([1.0 - self.into_wall(c, free[k], k) for k in ti.static(range(self.dim))])
            walls = ti.static(self.slowing_walls())
            free_bar, mu_bar = ti.Vector.zero(float, self.dim), 0.0
            for j in ti.static(range(len(walls) - 1, -1, -1)):
                k, high = ti.static(walls[j])
                v = self.slowed(s, c, free, free * keep, j)  # before wall j, as the grid computes it
                factor_bar = v_bar.dot(v)
                v_bar = v_bar * self.wall_factor(s, c, free, v, k, high)
                if ti.static(self.wall_law(k, high) == "friction"):
                    # kept = max(0, 1 - mu |free_k| / |v|), and the factor 1 - pressing (1 - kept)
                    speed, mu, normal = ti.sqrt(v.dot(v) + 1e-30), s.param("mu"), ti.abs(free[k])
                    kept_bar = self.against(c, free[k], k, high) * factor_bar \
                        * ti.select(1.0 - mu * normal / speed > 0.0, 1.0, 0.0)
                    mu_bar -= kept_bar * normal / speed
                    free_bar[k] -= kept_bar * mu * ti.select(free[k] > 0.0, 1.0, -1.0) / speed
                    v_bar += (kept_bar * mu * normal / (speed * speed * speed)) * v
            free_bar += v_bar * keep
            m = s.scratch("grid_mass", c)
            per_mass = ti.select(m > 0.0, 1.0, 0.0) / ti.max(m, 1e-30)
            bar.accumulate("grid_momentum", c, per_mass * free_bar)
            bar.accumulate("grid_mass", c, -ti.select(m > 1e-30, per_mass, 0.0) / ti.max(m, 1e-30)
                           * free_bar.dot(s.scratch("grid_momentum", c)))
            bar.add_param("g", 0, -s.dt * free_bar[1])
            if ti.static("friction" in (self.floor, self.walls)):
                bar.add_param("mu", 0, mu_bar)
