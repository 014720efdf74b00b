"""Mass-spring robot descriptions: particles, springs and actuator groups, as data.

A robot file (JSON, see assets/robots/) holds
    "name":        a short name
    "particles":   [[x, y], ...] or [[x, y, z], ...]   initial positions [m], y up; all 2D or all 3D
    "springs":     [[i, j], ...]            particle index pairs; rest length = initial distance
    "actuators":   [[s, s, ...], ...]       spring indices driven together by one action; other springs are passive
    "pinned":      [i, ...]                 particles held where they start (a cloth's corners)
    "faces":       [[i, j, k], ...]         triangles of particles, for pictures (a cloth's surface)
and an optional "description". ``Robot.load`` checks every field and names the one that is wrong.

Builders: ``grid`` (the 2D reference body), ``from_cells`` (squares or cubes on a lattice, 2D or 3D) and ``cloth``
(a sheet of particles with structural, shear and bending springs, in 3D).
"""
import hashlib
import itertools
import json
from dataclasses import dataclass, field

import numpy as np

from tisim.core import assets


@dataclass
class Robot:
    name: str
    particles: np.ndarray  # (N, 2) or (N, 3) [m]
    springs: np.ndarray  # (S, 2) int
    actuators: list = field(default_factory=list)  # [[spring index, ...], ...]
    description: str = ""
    pinned: list = field(default_factory=list)  # [particle index, ...]: held in place
    faces: np.ndarray = None  # (F, 3) int: triangles of particles, drawn as a surface

    def __post_init__(self):
        self.particles = np.asarray(self.particles, dtype=np.float64)
        self.springs = np.asarray(self.springs, dtype=np.int64).reshape(-1, 2)
        self.actuators = [list(map(int, group)) for group in self.actuators]
        self.pinned = sorted(map(int, self.pinned))
        self.faces = np.zeros((0, 3), np.int64) if self.faces is None else \
            np.asarray(self.faces, dtype=np.int64).reshape(-1, 3)
        self.check(f"robot {self.name!r}")

    @property
    def dim(self):
        return self.particles.shape[1]

    def check(self, where):
        n = len(self.particles)
        if self.particles.ndim != 2 or self.particles.shape[1] not in (2, 3) or n < 2:
            raise ValueError(f"{where}: particles must be a list of at least two [x, y] pairs or [x, y, z] "
                             "triples")
        if not np.all(np.isfinite(self.particles)):
            raise ValueError(f"{where}: particles must be finite numbers")
        if len(self.springs) == 0:
            raise ValueError(f"{where}: springs must list at least one [i, j] pair")
        for s, (i, j) in enumerate(self.springs):
            if not (0 <= i < n and 0 <= j < n) or i == j:
                raise ValueError(f"{where}: springs[{s}] = [{i}, {j}] must join two different particles in "
                                 f"0..{n - 1}")
        if np.any(self.rest_lengths() <= 0):
            s = int(np.argmin(self.rest_lengths()))
            raise ValueError(f"{where}: springs[{s}] joins two particles at the same place (rest length 0)")
        seen = {}
        for a, group in enumerate(self.actuators):
            if not group:
                raise ValueError(f"{where}: actuators[{a}] is empty")
            for s in group:
                if not 0 <= s < len(self.springs):
                    raise ValueError(f"{where}: actuators[{a}] names spring {s}; springs are "
                                     f"0..{len(self.springs) - 1}")
                if s in seen:
                    raise ValueError(f"{where}: spring {s} is in actuators[{seen[s]}] and actuators[{a}]")
                seen[s] = a
        if any(not 0 <= i < n for i in self.pinned) or len(set(self.pinned)) != len(self.pinned):
            raise ValueError(f"{where}: pinned must list distinct particles in 0..{n - 1}, got {self.pinned}")
        if len(self.pinned) == n:
            raise ValueError(f"{where}: pinned holds every particle; nothing could move")
        if len(self.faces) and not (np.all((self.faces >= 0) & (self.faces < n))):
            raise ValueError(f"{where}: faces must be triangles [i, j, k] of particles in 0..{n - 1}")

    def free(self):
        """(N,) 1.0 for particles that move, 0.0 for pinned ones."""
        mask = np.ones(len(self.particles))
        mask[self.pinned] = 0.0
        return mask

    def rest_lengths(self):
        return np.linalg.norm(self.particles[self.springs[:, 1]] - self.particles[self.springs[:, 0]], axis=1)

    def actuator_of_spring(self):
        """(S,) actuator index of each spring, -1 for passive springs."""
        owner = np.full(len(self.springs), -1, dtype=np.int32)
        for a, group in enumerate(self.actuators):
            owner[group] = a
        return owner

    def incidence(self):
        """Per particle, the springs that touch it and the particle at their other end, padded to the largest degree
        D: (spring_of (N, D), other_of (N, D), present (N, D) 1.0 or 0.0). A padding entry repeats the particle's
        first spring with present = 0, so kernels can read it safely and weigh it out without a branch."""
        n, count = len(self.particles), len(self.springs)
        # both ends of every spring, grouped by particle in spring order (a stable sort)
        end = np.concatenate([self.springs[:, 0], self.springs[:, 1]]).astype(np.int64)
        other = np.concatenate([self.springs[:, 1], self.springs[:, 0]])
        spring = np.concatenate([np.arange(count), np.arange(count)])
        order = np.lexsort((spring, end))
        end, other, spring = end[order], other[order], spring[order]
        degrees = np.bincount(end, minlength=n)
        if np.any(degrees == 0):
            raise ValueError(f"robot {self.name!r}: particle {int(np.argmin(degrees))} has no spring")
        degree = int(degrees.max())
        start = np.concatenate([[0], np.cumsum(degrees)[:-1]])
        slot = np.arange(len(end)) - start[end]
        # padding entries repeat the particle's first spring
        spring_of = np.repeat(spring[start][:, None], degree, axis=1).astype(np.int32)
        other_of = np.repeat(other[start][:, None], degree, axis=1).astype(np.int32)
        present = np.zeros((n, degree), np.float64)
        spring_of[end, slot], other_of[end, slot], present[end, slot] = spring, other, 1.0
        return spring_of, other_of, present

    def key(self):
        """A hash of the connectivity (what the kernels are compiled for)."""
        digest = hashlib.sha1(self.springs.astype(np.int64).tobytes())
        digest.update(self.actuator_of_spring().tobytes())
        digest.update(str((len(self.particles), self.dim, self.pinned)).encode())
        return digest.hexdigest()

    def to_json(self):
        return json.dumps({"name": self.name, "description": self.description,
                           "particles": np.round(self.particles, 6).tolist(), "springs": self.springs.tolist(),
                           "actuators": self.actuators, "pinned": self.pinned, "faces": self.faces.tolist()},
                          indent=1)

    @classmethod
    def load(cls, path):
        """A robot from a JSON file, or by name from assets/robots/ ("quadruped" -> assets/robots/quadruped.json)."""
        path, data = assets.read(path, "robot", "robots", ("particles", "springs"),
                                 ("name", "description", "actuators", "pinned", "faces"))
        try:
            return cls(name=str(data.get("name", path.stem)), particles=data["particles"], springs=data["springs"],
                       actuators=data.get("actuators", []), description=str(data.get("description", "")),
                       pinned=data.get("pinned", []), faces=data.get("faces"))
        except (TypeError, ValueError) as error:
            raise ValueError(f"robot file {str(path)!r}: {error}".replace(f"robot {data.get('name', path.stem)!r}: ",
                                                                        "")) from None


def lattice_pairs(nx, ny, offsets):
    """Springs between the particles of an nx-by-ny lattice (index j nx + i): for each lattice point (i, j), row by
    row, and each pair of offsets ((a, b), (c, d)) in order, the particles at (i + a, j + b) and (i + c, j + d)
    where both exist."""
    pairs = []
    for j in range(ny):
        for i in range(nx):
            for (a, b), (c, d) in offsets:
                if max(i + a, i + c) < nx and max(j + b, j + d) < ny:
                    pairs.append(((j + b) * nx + i + a, (j + d) * nx + i + c))
    return pairs


def grid(nx, ny, spacing=0.05, bottom=0.002, name=None, actuate_every_spring=True):
    """An nx-by-ny grid of particles with springs to the right, up and along both diagonals (the body of the
    reference mass-spring workload, benchmarks/README.md); by default every spring is its own actuator."""
    if nx < 2 or ny < 1 or (nx - 1) * ny + nx * (ny - 1) == 0:
        raise ValueError(f"grid: need nx >= 2 and ny >= 1, got {nx} x {ny}")
    particles = [(spacing * i, bottom + spacing * j) for j in range(ny) for i in range(nx)]
    springs = lattice_pairs(nx, ny, [((0, 0), (1, 0)), ((0, 0), (0, 1)), ((0, 0), (1, 1)), ((1, 0), (0, 1))])
    actuators = [[s] for s in range(len(springs))] if actuate_every_spring else []
    return Robot(name or f"grid_{nx}x{ny}", particles, springs, actuators, "springs right, up and diagonal")


def from_cells(cells, groups, spacing=0.05, bottom=0.002, name="robot", description=""):
    """A robot made of square (2D) or cubic (3D) cells on a lattice, (col, row) or (col, row, layer), with a spring
    between every two corners of each cell (a square's edges and diagonals; a cube's edges, face and body diagonals),
    shared springs merged. Row is the height: the lowest corners sit at y = bottom.

    groups: {actuator name: [cell, ...]}: the springs of those cells that no earlier group claimed become one actuator.
    """
    cells = [tuple(map(int, cell)) for cell in cells]
    if not cells or len({len(cell) for cell in cells}) != 1 or len(cells[0]) not in (2, 3):
        raise ValueError("from_cells: cells must be a non-empty list of [col, row] or [col, row, layer] cells")
    dim = len(cells[0])
    corners, springs, spring_cell = {}, {}, {}
    for cell in cells:
        ends = [corners.setdefault(tuple(np.add(cell, step)), len(corners))
                for step in itertools.product((0, 1), repeat=dim)]
        for i, j in itertools.combinations(ends, 2):
            key = (min(i, j), max(i, j))
            if key not in springs:
                springs[key] = len(springs)
                spring_cell[key] = cell
    lift = np.eye(dim)[1] * bottom
    particles = [spacing * np.asarray(corner, float) + lift
                 for corner, _ in sorted(corners.items(), key=lambda kv: kv[1])]
    claimed, actuators = set(), []
    for cells_of_group in groups.values():
        chosen = set(map(tuple, cells_of_group))
        group = [s for key, s in springs.items() if spring_cell[key] in chosen and s not in claimed]
        claimed.update(group)
        actuators.append(sorted(group))
    return Robot(name, particles, list(springs), actuators, description)


def cloth(nx, ny, spacing=0.02, origin=(0.0, 1.0, 0.0), pin="top corners", flat=False, name=None):
    """An nx-by-ny sheet of particles in 3D, row 0 at origin: hanging down from it in the x-y plane, or (flat=True)
    lying level in the x-z plane, rows along +z.

    Springs: structural (to the next particle along a row and a column), shear (both diagonals of each square) and
    bending (to the particle two away along a row and a column), in that order. pin: "top corners" (the two ends
    of row 0), "top row" (all of row 0), "corners" (all four) or "none"."""
    if isinstance(nx, bool) or isinstance(ny, bool) or not (isinstance(nx, int) and isinstance(ny, int)) or \
            nx < 2 or ny < 2:
        raise ValueError(f"cloth: nx and ny must be integers >= 2 (particles per row and column), got {nx!r} x {ny!r}")
    pins = {"top corners": [0, nx - 1], "top row": list(range(nx)), "corners": [0, nx - 1, nx * (ny - 1), nx * ny - 1],
            "none": []}
    if pin not in pins:
        raise ValueError(f"cloth: pin must be one of {sorted(pins)}, got {pin!r}")
    index = np.arange(nx * ny).reshape(ny, nx)
    origin = np.asarray(origin, dtype=float)
    down = np.array([0.0, 0.0, 1.0]) if flat else np.array([0.0, -1.0, 0.0])
    particles = [origin + spacing * (i * np.array([1.0, 0.0, 0.0]) + j * down) for j in range(ny) for i in range(nx)]
    structural = lattice_pairs(nx, ny, [((0, 0), (1, 0)), ((0, 0), (0, 1))])
    shear = lattice_pairs(nx, ny, [((0, 0), (1, 1)), ((1, 0), (0, 1))])
    bending = lattice_pairs(nx, ny, [((0, 0), (2, 0)), ((0, 0), (0, 2))])
    faces = [tri for j in range(ny - 1) for i in range(nx - 1)
             for tri in ((index[j, i], index[j, i + 1], index[j + 1, i + 1]),
                         (index[j, i], index[j + 1, i + 1], index[j + 1, i]))]
    return Robot(name or f"cloth_{nx}x{ny}", particles, structural + shear + bending, [],
                 f"a sheet: {len(structural)} structural, {len(shear)} shear, {len(bending)} bending springs",
                 pinned=pins[pin], faces=faces)
