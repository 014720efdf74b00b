"""Observables: functions of one state that a policy may read beside the state itself.

A robot's policy often needs a quantity the state holds only implicitly: where the fingertip is, given the joint
angles. A system declares such functions in ``OBSERVABLES`` (Quantity rows: name, unit, meaning, shape) and returns
each from ``observable(name)`` as an ``Observable``: one law written once over an operations table, evaluated by
numpy (for environments, evaluation and normalization) and inside a step by Taichi (for the closed loop, whose
reverse mode differentiates it), so the two cannot drift apart. Its derivative for numpy users (a critic's value
gradient) comes by the complex step, exact to rounding for a law made of arithmetic, sines, cosines and square roots.
"""
import numpy as np


class Observable:
    """y = law(x_state): ``size`` numbers computed from the entries of the state ``state``.

    law(entries, ops) takes the state's entries as a list (numbers, numpy arrays or Taichi expressions) and an
    operations table (``numpy_ops`` or ``taichi_ops``, each with sin, cos, sqrt and bind) and returns a list of
    ``size`` values. ``key`` identifies the law by value (it is part of the compiled model's key: equal keys must
    mean equal laws)."""

    def __init__(self, state, size, law, numpy_ops, taichi_ops, key):
        self.state, self.size, self.law = state, int(size), law
        self.numpy_ops, self.taichi_ops, self.key = numpy_ops, taichi_ops, key

    def __eq__(self, other):
        return isinstance(other, Observable) and (other.state, other.size, other.key) == (self.state, self.size,
                                                                                            self.key)

    def __hash__(self):
        return hash(("Observable", self.state, self.size, self.key))

    def numpy(self, entries):
        """The values at the state entries (..., n) -> (..., size)."""
        entries = np.asarray(entries)
        values = self.law([entries[..., c] for c in range(entries.shape[-1])], self.numpy_ops)
        return np.stack([np.broadcast_to(value, entries.shape[:-1]) for value in values], axis=-1)

    def jacobian(self, entries, h=1e-30):
        """d values / d entries at the state entries (..., n) -> (..., size, n), by the complex step."""
        entries = np.asarray(entries, dtype=np.float64)
        n = entries.shape[-1]
        columns = []
        for c in range(n):
            shifted = entries.astype(np.complex128)
            shifted[..., c] += 1j * h
            columns.append(np.imag(self.numpy(shifted)) / h)
        return np.stack(columns, axis=-1)

    def taichi(self, entries):
        """The values as Taichi expressions of the state's entries (a list of expressions), inside a step."""
        return self.law(list(entries), self.taichi_ops)

    def __repr__(self):
        return f"Observable({self.state!r}, {self.size})"
