"""MPM's bodies: material points in the unit square (cube), each with a volume, a material group and an actuator;
made as a box of points, as points filling lattice cells, or from a JSON file in assets/bodies/."""
from dataclasses import dataclass

import numpy as np

from tisim.core import assets


@dataclass
class Body:
    """Material points: positions (N, d) in the unit square or cube, each point's volume, group and actuator."""

    particles: np.ndarray
    volume: float
    groups: np.ndarray = None  # (N,) int: the material group of each point (default 0)
    actuators: np.ndarray = None  # (N,) int: the actuator driving each point, -1 for passive ones (default all -1)

    def __post_init__(self):
        self.particles = np.asarray(self.particles, dtype=np.float64)
        n = len(self.particles)
        self.groups = np.zeros(n, np.int32) if self.groups is None else np.asarray(self.groups, np.int32)
        self.actuators = np.full(n, -1, np.int32) if self.actuators is None else np.asarray(self.actuators, np.int32)
        if self.particles.ndim != 2 or self.particles.shape[1] not in (2, 3) or n < 1:
            raise ValueError(f"Body: particles must have shape (N, 2) or (N, 3), got {self.particles.shape}")
        if not np.all(np.isfinite(self.particles)):
            raise ValueError("Body: particles must be finite")
        if isinstance(self.volume, bool) or not isinstance(self.volume, (int, float, np.floating)) or \
                not (np.isfinite(self.volume) and self.volume > 0):
            raise ValueError(f"Body: volume must be a finite number > 0, got {self.volume!r}")
        for name in ("groups", "actuators"):
            if getattr(self, name).shape != (n,):
                raise ValueError(f"Body: {name} must have shape ({n},), got {getattr(self, name).shape}")
        if self.groups.min() < 0:
            raise ValueError("Body: groups must be >= 0")
        if self.actuators.min() < -1:
            raise ValueError("Body: actuators must be >= -1 (-1: passive)")

    @property
    def dim(self):
        return self.particles.shape[1]

    @classmethod
    def box(cls, lower, upper, spacing, group=0, actuator=-1):
        """Points on a regular lattice of the given spacing filling the box [lower, upper)."""
        lower, upper = np.asarray(lower, float), np.asarray(upper, float)
        if lower.shape != upper.shape or lower.shape not in ((2,), (3,)) or np.any(upper <= lower):
            raise ValueError(f"Body.box: lower and upper must be 2 or 3 coordinates with lower < upper, got "
                             f"{lower.tolist()} and {upper.tolist()}")
        if not spacing > 0:
            raise ValueError(f"Body.box: spacing must be > 0, got {spacing!r}")
        axes = [np.arange(lo + spacing / 2, hi, spacing) for lo, hi in zip(lower, upper)]
        points = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, len(lower))
        if not len(points):
            raise ValueError(f"Body.box: a spacing of {spacing!r} puts no point in the box")
        n = len(points)
        return cls(points, spacing ** len(lower), np.full(n, group), np.full(n, actuator))

    @classmethod
    def from_cells(cls, cells, cell, origin, points_per_cell=2, actuators=None, groups=None):
        """Points filling square (in 3D cubic) cells of side `cell` [m]: cells, (K, d) integer lattice coordinates
        of the lattice whose cell (0, ..) has its lower corner at `origin`; points_per_cell points per axis in each;
        actuators and groups, one per cell (default: passive, group 0)."""
        where = "Body.from_cells"
        cells = np.asarray(cells)
        if cells.ndim != 2 or cells.shape[1] not in (2, 3) or len(cells) < 1 or \
                not np.issubdtype(cells.dtype, np.integer):
            raise ValueError(f"{where}: cells must be a list of [i, j] or [i, j, k] integer lattice coordinates")
        if len(np.unique(cells, axis=0)) != len(cells):
            raise ValueError(f"{where}: cells must not repeat a cell")
        dim = cells.shape[1]
        if isinstance(cell, bool) or not isinstance(cell, (int, float)) or not (np.isfinite(cell) and cell > 0):
            raise ValueError(f"{where}: cell must be a number > 0 (the side of a cell in m), got {cell!r}")
        origin = np.asarray(origin, dtype=float) if np.ndim(origin) == 1 else None
        if origin is None or origin.shape != (dim,) or not np.all(np.isfinite(origin)):
            raise ValueError(f"{where}: origin must be {dim} finite coordinates, the lower corner of cell 0")
        if isinstance(points_per_cell, bool) or not isinstance(points_per_cell, int) or points_per_cell < 1:
            raise ValueError(f"{where}: points_per_cell must be an integer >= 1, got {points_per_cell!r}")
        per_cell = {}
        for name, default in (("actuators", -1), ("groups", 0)):
            values = np.full(len(cells), default) if locals()[name] is None else np.asarray(locals()[name])
            if values.shape != (len(cells),) or not np.issubdtype(values.dtype, np.integer):
                raise ValueError(f"{where}: {name} must list one integer per cell ({len(cells)} cells)")
            per_cell[name] = values
        spacing = cell / points_per_cell
        offsets = (np.stack(np.meshgrid(*[np.arange(points_per_cell)] * dim, indexing="ij"), -1).reshape(-1, dim)
                   + 0.5) * spacing
        points = (origin + cells[:, None, :] * cell + offsets[None]).reshape(-1, dim)
        repeat = len(offsets)
        return cls(points, spacing ** dim, np.repeat(per_cell["groups"], repeat),
                   np.repeat(per_cell["actuators"], repeat))

    @classmethod
    def load(cls, path, origin=None):
        """A body from a JSON file, or by name from assets/bodies/ ("walker" -> assets/bodies/walker.json). Fields:
        "cells", "cell" and "origin" (or the argument origin=, which overrides it), and optionally
        "points_per_cell", "actuators", "groups", "name" and "description", as Body.from_cells takes them."""
        path, data = assets.read(path, "body", "bodies", ("cells", "cell"),
                                 ("origin", "points_per_cell", "actuators", "groups", "name", "description"))
        if origin is None and "origin" not in data:
            raise ValueError(f"body file {str(path)!r}: missing field 'origin' (or pass origin=)")
        try:
            return cls.from_cells(data["cells"], data["cell"], data.get("origin") if origin is None else origin,
                                  data.get("points_per_cell", 2), data.get("actuators"), data.get("groups"))
        except (TypeError, ValueError) as error:
            message = str(error).replace("Body.from_cells: ", "").replace("Body: ", "")
            raise ValueError(f"body file {str(path)!r}: {message}") from None

    def __add__(self, other):
        if other.dim != self.dim or not np.isclose(other.volume, self.volume):
            raise ValueError("Body: only bodies of the same dimension and point volume can be joined")
        return Body(np.concatenate([self.particles, other.particles]), self.volume,
                    np.concatenate([self.groups, other.groups]), np.concatenate([self.actuators, other.actuators]))

    def key(self):
        """What the kernels are compiled for: each point's group and actuator."""
        return (self.groups.tobytes(), self.actuators.tobytes())
