"""Typed access to the packed arrays from inside a step: quantities by name, entries as ti.Vector.

Every declared quantity is packed along one array axis (tisim/quantities.py). A quantity whose shape begins with a
structural size ("n_particles", 2) is a table of items; item i is the vector of its remaining entries (a particle's
position: a ti.Vector of 2 or 3 entries, as the shape says), or a scalar where nothing remains. A quantity without
an item axis is one item: pass i = 0. So a system is written once for every dimension its shapes allow, with no
offset arithmetic.

Steps never store into the next state themselves: ``advance`` accumulates into it. The engine zeroes x[t+1] before
the step, and a plain store there would give the same rollout but erase the adjoint that the backward pass has left
in x.grad[t+1] (taichi-facts.md: a second write must be +=).
"""
import numpy as np
import taichi as ti


def entry_shape(layout, name):
    """(offset, item width, vector width or 0 for a scalar) of quantity `name` in `layout`, at compile time."""
    if name not in layout.offsets:
        raise KeyError(f"no {layout.group} named {name!r}; declared: {layout.names}")
    shape = layout.shapes[name]
    declared = layout.quantities[name].shape
    trailing = shape[1:] if declared and isinstance(declared[0], str) else shape
    width = int(np.prod(trailing, dtype=int))
    return layout.offsets[name], width, (width if trailing else 0)


class Accessors:
    """Mixin of System: the @ti.func accessors a step uses (the kernels inline them; nothing runs in Python)."""

    @ti.func
    def state(self, x: ti.template(), name: ti.template(), b, t, i):
        """Item i of state `name` at step t (a ti.Vector, or a scalar)."""
        offset, width, vector = ti.static(entry_shape(self.state_layout, name))
        if ti.static(vector):
            return ti.Vector([x[b, t, offset + i * width + k] for k in ti.static(range(width))])
        else:
            return x[b, t, offset + i * width]

    @ti.func
    def advance(self, x: ti.template(), name: ti.template(), b, t, i, value):
        """Accumulate `value` into item i of state `name` at step t + 1 (the step's result)."""
        offset, width, vector = ti.static(entry_shape(self.state_layout, name))
        if ti.static(vector):
            for k in ti.static(range(width)):
                x[b, t + 1, offset + i * width + k] += value[k]
        else:
            x[b, t + 1, offset + i * width] += value

    @ti.func
    def param(self, theta: ti.template(), name: ti.template(), b, i):
        """Item i of parameter `name` (i = 0 for a global parameter)."""
        offset, width, vector = ti.static(entry_shape(self.param_layout, name))
        if ti.static(vector):
            return ti.Vector([theta[b, offset + i * width + k] for k in ti.static(range(width))])
        else:
            return theta[b, offset + i * width]

    @ti.func
    def action(self, u: ti.template(), name: ti.template(), b, t, i):
        """Item i of action `name` during step t."""
        offset, width, vector = ti.static(entry_shape(self.action_layout, name))
        if ti.static(vector):
            return ti.Vector([u[b, t, offset + i * width + k] for k in ti.static(range(width))])
        else:
            return u[b, t, offset + i * width]

    @ti.func
    def scratch(self, w: ti.template(), name: ti.template(), b, t, i):
        """Item i of scratch `name` as computed during step t (by an earlier phase of the step)."""
        base, width, vector = ti.static(self.scratch_layout.entry(name))
        step = ti.static(self.scratch_layout.step_width(name))
        if ti.static(vector):
            return ti.Vector([w[b, base + t * step + i * width + k] for k in ti.static(range(width))])
        else:
            return w[b, base + t * step + i * width]

    @ti.func
    def accumulate(self, w: ti.template(), name: ti.template(), b, t, i, value):
        """Add `value` into item i of scratch `name` for step t (the engine zeroes scratch before each step)."""
        base, width, vector = ti.static(self.scratch_layout.entry(name))
        step = ti.static(self.scratch_layout.step_width(name))
        if ti.static(vector):
            for k in ti.static(range(width)):
                w[b, base + t * step + i * width + k] += value[k]
        else:
            w[b, base + t * step + i * width] += value
