"""Declared quantities: the rows of a system's parameter, state and action tables, and how they pack into arrays.

A system declares theta, x and a as three tables of ``Quantity`` rows. The engine packs each table into one array
axis: parameters into (B, P), states into (B, T+1, S), actions into (B, T, A). ``Layout`` turns names into offsets,
validates values at the Python boundary and unpacks arrays back into named pieces.
"""
import collections
import difflib
import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Interval:
    """A real interval written as in mathematics: "(0, inf)", "[0, 1]", "[-1, 1)"."""

    low: float
    high: float
    low_closed: bool
    high_closed: bool

    @classmethod
    def parse(cls, text):
        text = text.strip()
        if text[0] not in "([" or text[-1] not in ")]" or text.count(",") != 1:
            raise ValueError(f"bounds must look like '(0, inf)' or '[0, 1]', got {text!r}")
        low, high = (float(part) for part in text[1:-1].split(","))
        return cls(low, high, text[0] == "[", text[-1] == "]")

    def contains(self, values):
        values = np.asarray(values)
        above = values >= self.low if self.low_closed else values > self.low
        below = values <= self.high if self.high_closed else values < self.high
        return above & below

    def __str__(self):
        def number(v):
            return "inf" if v == math.inf else "-inf" if v == -math.inf else f"{v:g}"
        opening, closing = "[" if self.low_closed else "(", "]" if self.high_closed else ")"
        return f"{opening}{number(self.low)}, {number(self.high)}{closing}"


@dataclass(frozen=True)
class Size:
    """A structural size: an integer constructor keyword compiled into the kernels (a count of bodies, a dimension,
    a number of Newton steps), named in the shapes of quantities. A system's STRUCTURE lists its sizes; a plain
    name there is Size(name): default 1, at least 1."""

    name: str
    default: int = 1
    minimum: int = 1

    def __post_init__(self):
        for field, value in (("default", self.default), ("minimum", self.minimum)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"Size {self.name!r}: {field} must be an int, got {value!r}")
        if self.default < self.minimum:
            raise ValueError(f"Size {self.name!r}: default {self.default} is below its minimum {self.minimum}")


def sizes_of(cls):
    """{name: Size} of a system class's STRUCTURE, in order."""
    return {entry if isinstance(entry, str) else entry.name: Size(entry) if isinstance(entry, str) else entry
            for entry in cls.STRUCTURE}


@dataclass(frozen=True)
class Quantity:
    """One named physical quantity: a parameter, a state or an action.

    shape entries are ints or the names of structural sizes of the system (for example "n" for Linear's dimension).
    bounds is an interval in mathematical notation; values outside it are rejected before any kernel runs.
    """

    name: str
    default: float
    unit: str
    meaning: str
    shape: tuple = ()
    bounds: str = "(-inf, inf)"

    def __post_init__(self):
        # a malformed bounds string fails where the quantity is declared; parsed once (set_actions reads it per call)
        object.__setattr__(self, "_interval", Interval.parse(self.bounds))

    @property
    def interval(self):
        return self._interval


def near_miss(name, candidates):
    """" Perhaps you meant 'x'?" for the closest candidate, or "" when none is close."""
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f" Perhaps you meant {close[0]!r}?" if close else ""


class Layout:
    """Offsets of one table's quantities along one packed array axis, for given structural sizes."""

    def __init__(self, quantities, sizes, group):
        self.group = group  # "params", "state" or "action", used in messages
        self.quantities = {q.name: q for q in quantities}
        self.shapes, self.offsets = {}, {}
        offset = 0
        for q in quantities:
            shape = tuple(sizes[d] if isinstance(d, str) else int(d) for d in q.shape)
            self.shapes[q.name], self.offsets[q.name] = shape, offset
            offset += int(np.prod(shape, dtype=int))
        self.size = offset
        # compile-time offsets for kernels (a named tuple, so ti.static accepts it): theta[b, P.m_cart]
        self.index = collections.namedtuple(group.capitalize() + "Offsets", list(self.offsets))(**self.offsets)

    @property
    def names(self):
        return list(self.quantities)

    def labels(self):
        """One label per packed entry: "m_cart", "A[0,1]", ... in packed order."""
        out = []
        for name, shape in self.shapes.items():
            out += [name] if shape == () else [f"{name}[{','.join(map(str, i))}]" for i in np.ndindex(*shape)]
        return out

    def check_name(self, name, argument):
        if name not in self.quantities:
            raise ValueError(f"{argument}: unknown {self.group} name {name!r}; allowed: {self.names}."
                             + near_miss(name, self.names))

    def validated(self, name, value, batch, argument, bounded=True):
        """``value`` broadcast to (batch, *shape) as float64, after checking shape, finiteness and (when bounded) the
        quantity's bounds; a direction or a perturbation is not bounded.

        Accepted: a scalar (every entry, every batch element), the declared shape (every batch element), or
        (batch, *shape)."""
        self.check_name(name, argument)
        shape = self.shapes[name]
        try:
            array = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{argument}: {name} must be numeric, got {type(value).__name__}") from None
        if array.shape not in ((), shape, (batch,) + shape) and not (shape == () and array.shape == (1,)):
            allowed = f"a scalar, {shape} or {(batch,) + shape}" if shape else f"a scalar or shape ({batch},)"
            raise ValueError(f"{argument}: {name} must have shape {allowed}, got {array.shape}")
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{argument}: {name} contains NaN or infinite values")
        interval = self.quantities[name].interval
        inside = interval.contains(array) if bounded else True
        if not np.all(inside):
            bad = array[~inside].flat[0]
            raise ValueError(f"{argument}: {name} must be in {interval}, got {bad:g}")
        if array.ndim and array.ndim <= len(shape):
            array = array.reshape(shape)
        return np.broadcast_to(array, (batch,) + shape)

    def write(self, packed, name, value):
        """Write (B, *shape) ``value`` into the packed (B, size) array."""
        offset, count = self.offsets[name], int(np.prod(self.shapes[name], dtype=int))
        packed[:, offset:offset + count] = np.reshape(value, (packed.shape[0], count))

    def defaults(self, batch):
        packed = np.zeros((batch, self.size))
        for name, q in self.quantities.items():
            self.write(packed, name, np.full((batch,) + self.shapes[name], q.default, dtype=np.float64))
        return packed

    def unpack(self, packed):
        """Split the last axis of ``packed`` into {name: array (..., *shape)}."""
        lead = packed.shape[:-1]
        out = {}
        for name, shape in self.shapes.items():
            offset, count = self.offsets[name], int(np.prod(shape, dtype=int))
            out[name] = packed[..., offset:offset + count].reshape(lead + shape)
        return out


@dataclass(frozen=True)
class Scratch:
    """A per-step intermediate of a phased step (tisim/core/phases.py): spring forces, an MPM grid.

    shape is like a Quantity's. keep=True stores it for every step, so the backward pass reads it; keep=False holds
    one step's worth, which the backward pass recomputes from the step's input state: memory independent of the
    horizon, for one more run of the step's earlier phases. assigned=True: every entry is set once a step, by one
    item, with s.assign (a spring's force, a point's new deformation), so the one-launch forward pass does not
    zero it first; scratch that items add into (an MPM grid) is zeroed before each step."""

    name: str
    unit: str
    meaning: str
    shape: tuple = ()
    keep: bool = True
    assigned: bool = False
