"""Numbers a user of MPM needs that the state does not hold: each point's mass and volume, the angular momentum with
its APIC part, where the walls' band lies, and the cells a body fills (to score a shape against a target). Plain
numpy, read from a simulator's parameters and body and from a trajectory as `sim.rollout()` returns it.

Units and conventions (the same as tisim/systems/mpm/system.py's):

- 2D is plane strain: a 2D body is a slice of unit depth (1 m) of a body that extends without end along z and does
  not stretch along it. Its density rho is then read per unit depth (the parameter's unit, kg/m^2, is kg/m^3 times
  the 1 m of depth), so its masses are kg per metre of depth, its volumes m^2 (areas, per metre of depth: m^3/m),
  its forces N per metre and its angular momentum kg m^2/s per metre. Stresses and E are in Pa in 2D and 3D alike.
- A point's mass is m_p = rho_g V_p, with rho_g the density of its material group and V_p the body's volume per
  point (`Body.volume`: spacing^d for `Body.box`); every point of `Body.box` and `Body.from_cells` gets the same
  V_p, so the body's volume is divided evenly among its points.
- The grid covers the unit square (cube), cell size h = 1 / n_grid, y up.
"""
import itertools

import numpy as np


def occupancy(points, cells, threshold=0.5):
    """The nodes of a grid over the unit square (cube), node i at i / cells along each axis, that material points
    fill: each point's unit of mass spread over its 3^d nearest nodes by MPM's quadratic B-spline (as MPM's grid
    takes a point's mass), a node filled where it holds more than `threshold` points' worth. points: (N, d). With
    the nodes as far apart as the body's points (cells = 1 / spacing), material at rest gives each node inside it
    one point's worth. Returns a boolean array (cells,) * d."""
    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] not in (2, 3):
        raise ValueError(f"occupancy: points must have shape (N, 2) or (N, 3), got {points.shape}")
    if isinstance(cells, bool) or not isinstance(cells, (int, np.integer)) or cells < 1:
        raise ValueError(f"occupancy: cells must be an integer >= 1, got {cells!r}")
    q = points * cells
    base = np.floor(q - 0.5).astype(int)
    f = q - base
    weights = (0.5 * (1.5 - f) ** 2, 0.75 - (f - 1.0) ** 2, 0.5 * (f - 0.5) ** 2)
    mass = np.zeros((cells,) * points.shape[1])
    for digits in itertools.product(range(3), repeat=points.shape[1]):
        index = tuple(np.clip(base[:, k] + d, 0, cells - 1) for k, d in enumerate(digits))
        np.add.at(mass, index, np.prod([weights[d][:, k] for k, d in enumerate(digits)], axis=0))
    return mass > threshold


def iou(points, target, cells, threshold=0.5):
    """The intersection over union of the grid nodes that two sets of material points fill (see occupancy): 1 for
    the same shape, 0 for shapes that share no node."""
    a, b = occupancy(points, cells, threshold), occupancy(target, cells, threshold)
    union = (a | b).sum()
    return float((a & b).sum() / union) if union else 1.0


def _batch_by_points(sim, values):
    """(B, n_particles) from one value per material group: each point's group's entry."""
    return values[:, sim.body.groups]


def point_masses(sim):
    """Each point's mass m_p = rho V_p, shape (B, n_particles): kg in 3D, kg per metre of depth in 2D (plane
    strain). rho is each point's material group's density as the simulator's parameters hold it now (set_params);
    V_p is `sim.body.volume`. Their sum over the points is rho times the body's volume (area in 2D)."""
    return _batch_by_points(sim, sim.params["rho"]) * float(sim.body.volume)


def point_volumes(sim, traj=None):
    """Each point's volume. Without traj: the reference volume V_p that the stress and the mass use, shape
    (B, n_particles), m^3 (2D: m^2, per metre of depth). With traj (a dict holding "F", as sim.rollout() returns
    it): the current volume V_p det F_p of every row, shape (B, rows, n_particles)."""
    reference = np.full((sim.B, sim.sizes["n_particles"]), float(sim.body.volume))
    if traj is None:
        return reference
    F = np.asarray(traj["F"])
    return reference.reshape(reference.shape[:1] + (1,) * (F.ndim - 4) + reference.shape[1:]) * np.linalg.det(F)


def affine_inertia(sim):
    """D = sum_i w_ip (x_i - x_p)(x_i - x_p)^T of a point's quadratic B-spline stencil, the same for every point
    away from the grid's edge: (h^2 / 4) I, in m^2 (h = 1 / n_grid)."""
    return 0.25 / sim.sizes["n_grid"] ** 2


def _cross(a, b):
    """a x b over the last axis: a scalar in 2D (the z component), a vector in 3D."""
    if a.shape[-1] == 2:
        return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    return np.cross(a, b)


def affine_axial(C):
    """Twice the rotation rate of the affine velocities C: the axial vector w of (C - C^T) / 2 (the spin, W r =
    w x r), times 2. In 2D the scalar C_yx - C_xy, in 3D (C_zy - C_yz, C_xz - C_zx, C_yx - C_xy) [1/s]; shape
    C.shape[:-2] (+ (3,) in 3D)."""
    if C.shape[-1] == 2:
        return C[..., 1, 0] - C[..., 0, 1]
    return np.stack([C[..., 2, 1] - C[..., 1, 2], C[..., 0, 2] - C[..., 2, 0], C[..., 1, 0] - C[..., 0, 1]], -1)


def angular_momentum(sim, traj, about=None, affine=True):
    """The total angular momentum of the points about the point `about` (default the origin), for every row of traj
    (a dict holding "pos", "vel" and "C" of shape (B, rows, n_particles, ...), as sim.rollout() returns them, or
    (B, n_particles, ...) as rollout(final=True) does): shape (B, rows) in 2D (the z component), (B, rows, 3) in 3D;
    kg m^2/s (2D: per metre of depth).

        L = sum_p m_p (x_p - about) x v_p  +  sum_p m_p (h^2 / 4) axial(C_p)

    The second sum is the APIC part (affine=False leaves it out): a point carries the velocity field
    v_p + C_p (x - x_p) over its stencil, and the angular momentum of that field about x_p, summed over the cells
    with the B-spline weights (sum_i w_ip (x_i - x_p)(x_i - x_p)^T = h^2 / 4 I), is m_p h^2 / 4 times the axial
    vector of C_p's antisymmetric part: in 2D m_p h^2 / 4 (C_yx - C_xy). The transfers conserve this total, not the
    first sum alone: without gravity, walls or a torque from outside it stays constant to rounding, while the points'
    x x m v alone drifts as angular momentum moves between the points' motion and their affine velocities."""
    x, v, C = (np.asarray(traj[name], dtype=float) for name in ("pos", "vel", "C"))
    dim = sim.sizes["dim"]
    origin = np.zeros(dim) if about is None else np.asarray(about, dtype=float)
    if origin.shape != (dim,):
        raise ValueError(f"angular_momentum: about must be {dim} coordinates, got {origin.tolist()}")
    m = point_masses(sim)
    m = m.reshape(m.shape[:1] + (1,) * (x.ndim - 3) + m.shape[1:])  # (B, [rows,] n)
    if dim == 3:
        m = m[..., None]
    total = (m * _cross(x - origin, v)).sum(axis=x.ndim - 2)
    if affine:
        total = total + (m * affine_inertia(sim) * affine_axial(C)).sum(axis=x.ndim - 2)
    return total


def wall_band(sim):
    """Where the walls act: {"cells": BAND, "width": BAND h [m], "low": BAND h, "high": 1 - BAND h [m]}. On each
    axis the grid nodes (at i h, i = 0 .. n_grid - 1) of index i <= BAND (at or below "low") and i >= n_grid - BAND
    (at or above "high") are the band: there a wall stops the velocity that points into it and applies its law
    (floor= for the floor, walls= for the sides and the ceiling) to the rest. "low" on the y axis is the floor's
    level, where the default body and the bodies of the tutorials stand and where a resting body settles as on a
    rigid floor (docs/concepts/conventions.md measures it)."""
    BAND = type(sim).BAND  # the system's module imports this one, so the constant comes through the class
    h = 1.0 / sim.sizes["n_grid"]
    return {"cells": BAND, "width": BAND * h, "low": BAND * h, "high": 1.0 - BAND * h}


class Readouts:
    """Mixin of the system: the functions above as its methods."""

    def point_masses(self):
        """Each point's mass rho V_p, shape (B, n_particles), kg (2D: kg per metre of depth); see
        tisim.systems.mpm.readouts.point_masses."""
        return point_masses(self)

    def point_volumes(self, traj=None):
        """Each point's reference volume V_p, (B, n_particles), or with traj its current volume V_p det F_p of every
        row; see tisim.systems.mpm.readouts.point_volumes."""
        return point_volumes(self, traj)

    def angular_momentum(self, traj, about=None, affine=True):
        """The total angular momentum about `about` (default the origin) of every row of traj, with the APIC part
        m_p h^2 / 4 axial(C_p) (affine=False leaves it out); see tisim.systems.mpm.readouts.angular_momentum."""
        return angular_momentum(self, traj, about, affine)

    def wall_band(self):
        """Where the walls act: {"cells", "width", "low", "high"}; see tisim.systems.mpm.readouts.wall_band."""
        return wall_band(self)
