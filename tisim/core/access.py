"""Typed access to the packed arrays from inside a step: quantities by name, items as scalars, vectors, matrices.

Every declared quantity is packed along one array axis (tisim/core/quantities.py). A quantity whose shape begins with a
structural size ("n_particles", 2) is a table of items; item i is the rest of the shape: a ti.Vector (a
particle's position: 2 or 3 entries, as the shape says), a ti.Matrix ("n_particles", 3, 3), or a scalar where
nothing remains. A quantity without an item axis is one item: i = 0, the default of the reads. So a system is
written once for every dimension its shapes allow, with no offset arithmetic.

A step reaches the arrays through its step context (``Step`` below; ``Rates`` for an ODE's right-hand side), which
holds them with the batch element and the step: ``s.state("pos", i)``, ``s.advance("vel", i, v)``.

Steps never store into the next state themselves: ``advance`` accumulates into it. The engine zeroes x[t+1] before
the step, and a plain store there would give the same rollout but erase the adjoint that the backward pass has left
in x.grad[t+1] (docs/taichi_pitfalls.md#plain-stores: a second write must be +=). Two stores are allowed where that
cannot happen: ``assign`` sets an entry of assigned scratch, written once a step by one item (Scratch(assigned=True);
nothing has reached it to erase when it is written), and ``set_next`` sets the next state from the FUSED form of the
last phase, which is never differentiated (tisim/core/phases.py).
"""
from typing import Any, NamedTuple

import numpy as np
import taichi as ti


def entry_shape(layout, name):
    """(offset, item width, item shape) of quantity `name` in `layout`, at compile time: the item shape is () for
    a scalar, (d,) for a vector, (d, d) for a matrix."""
    if name not in layout.offsets:
        raise KeyError(f"no {layout.group} named {name!r}; declared: {layout.names}")
    shape = layout.shapes[name]
    declared = layout.quantities[name].shape
    item = tuple(shape[1:] if declared and isinstance(declared[0], str) else shape)
    if len(item) > 2:
        raise ValueError(f"{layout.group} {name!r}: items of shape {item} have no Taichi type; at most a matrix")
    return layout.offsets[name], int(np.prod(item, dtype=int)), item


@ti.func
def read3(a: ti.template(), b, t, base, shape: ti.template()):
    # the item at a[b, t, base:], as a scalar, a ti.Vector or a ti.Matrix (row-major)
    if ti.static(len(shape) == 2):
        return ti.Matrix([[a[b, t, base + r * shape[1] + c] for c in ti.static(range(shape[1]))]
                          for r in ti.static(range(shape[0]))])
    elif ti.static(len(shape) == 1):
        return ti.Vector([a[b, t, base + k] for k in ti.static(range(shape[0]))])
    else:
        return a[b, t, base]


@ti.func
def add3(a: ti.template(), b, t, base, shape: ti.template(), value):
    if ti.static(len(shape) == 2):
        for r, c in ti.static(ti.ndrange(shape[0], shape[1])):
            a[b, t, base + r * shape[1] + c] += value[r, c]
    elif ti.static(len(shape) == 1):
        for k in ti.static(range(shape[0])):
            a[b, t, base + k] += value[k]
    else:
        a[b, t, base] += value


@ti.func
def set3(a: ti.template(), b, t, base, shape: ti.template(), value):
    if ti.static(len(shape) == 2):
        for r, c in ti.static(ti.ndrange(shape[0], shape[1])):
            a[b, t, base + r * shape[1] + c] = value[r, c]
    elif ti.static(len(shape) == 1):
        for k in ti.static(range(shape[0])):
            a[b, t, base + k] = value[k]
    else:
        a[b, t, base] = value


@ti.func
def entries(v: ti.template(), base, shape: ti.template()):
    # the item at v[base:] of a ti.Vector, shaped as read3 shapes it
    if ti.static(len(shape) == 2):
        return ti.Matrix([[v[base + r * shape[1] + c] for c in ti.static(range(shape[1]))]
                          for r in ti.static(range(shape[0]))])
    elif ti.static(len(shape) == 1):
        return ti.Vector([v[base + k] for k in ti.static(range(shape[0]))])
    else:
        return v[base]


@ti.func
def read2(a: ti.template(), b, base, shape: ti.template()):
    if ti.static(len(shape) == 2):
        return ti.Matrix([[a[b, base + r * shape[1] + c] for c in ti.static(range(shape[1]))]
                          for r in ti.static(range(shape[0]))])
    elif ti.static(len(shape) == 1):
        return ti.Vector([a[b, base + k] for k in ti.static(range(shape[0]))])
    else:
        return a[b, base]


@ti.func
def add2(a: ti.template(), b, base, shape: ti.template(), value):
    if ti.static(len(shape) == 2):
        for r, c in ti.static(ti.ndrange(shape[0], shape[1])):
            a[b, base + r * shape[1] + c] += value[r, c]
    elif ti.static(len(shape) == 1):
        for k in ti.static(range(shape[0])):
            a[b, base + k] += value[k]
    else:
        a[b, base] += value


@ti.func
def set2(a: ti.template(), b, base, shape: ti.template(), value):
    if ti.static(len(shape) == 2):
        for r, c in ti.static(ti.ndrange(shape[0], shape[1])):
            a[b, base + r * shape[1] + c] = value[r, c]
    elif ti.static(len(shape) == 1):
        for k in ti.static(range(shape[0])):
            a[b, base + k] = value[k]
    else:
        a[b, base] = value


def closed(applied):
    """Whether a step context carries a policy's output (Taichi's compiler does not take `is not` in a kernel)."""
    return applied is not None


def applied_scratch(model):
    """The scratch that holds a policy phase's output, which the actions of a phased closed loop add to u (tisim/
    learn/policy.py), or None."""
    return getattr(model, "APPLIED", None)


def assigned_entry(layout, name):
    """ScratchLayout.entry for Step.assign, refused for scratch not declared assigned=True."""
    if name in layout.names and name not in layout.assigned:
        raise ValueError(f"assign: scratch {name!r} is added into (accumulate); declare it Scratch(..., "
                         "assigned=True) to set each entry once a step")
    return layout.entry(name)


class Step(NamedTuple):
    """What one step of one batch entry reads and writes: the step context a system's functions receive as ``s``.

    The engine builds it inside its kernels, ``ti.static(Step(model, x, theta, u, w, dt, b, t))``, and passes it to
    ``step(self, s)``, to a phase ``name(self, s, i)``, or, over the derivative arrays (x.grad, theta.grad, u.grad,
    w.grad), as ``bar`` to a hand-written reverse ``name_reverse(self, s, bar, i)``. It lives only while Taichi
    compiles: its arrays are the kernel's arguments and b, t the kernel's loop indices, so reading through it costs
    nothing at run time. Quantities are read and written by name; i is the item (a particle, a spring), 0 for a
    quantity without an item axis.
    """

    model: Any
    x: Any  # (B, T+1, S) states
    theta: Any  # (B, P) parameters
    u: Any  # (B, T, A) actions
    w: Any  # (B, scratch) the step's scratch; None for a plain step
    dt: Any
    b: Any  # the batch entry
    t: Any  # the step: from x[t] to x[t+1]
    # a closed-loop policy's output during step t, a ti.Vector over the packed action entries that action() adds to
    # u[b, t] (tisim/learn/policy.py); None in an open loop
    applied: Any = None

    @ti.func
    def state(self, name: ti.template(), i=0):
        """Item i of state `name` at step t (a scalar, ti.Vector or ti.Matrix)."""
        offset, width, shape = ti.static(entry_shape(self.model.state_layout, name))
        return read3(self.x, self.b, self.t, offset + i * width, shape)

    @ti.func
    def next_state(self, name: ti.template(), i=0):
        """Item i of state `name` at step t + 1: in a reverse, the derivative of what the step wrote."""
        offset, width, shape = ti.static(entry_shape(self.model.state_layout, name))
        return read3(self.x, self.b, self.t + 1, offset + i * width, shape)

    @ti.func
    def advance(self, name: ti.template(), i, value):
        """Accumulate `value` into item i of state `name` at step t + 1 (the step's result)."""
        offset, width, shape = ti.static(entry_shape(self.model.state_layout, name))
        add3(self.x, self.b, self.t + 1, offset + i * width, shape, value)

    @ti.func
    def set_next(self, name: ti.template(), i, value):
        """Set item i of state `name` at step t + 1: only in the FUSED form of the last phase, which sets every
        entry of the next state once (the engine does not zero it for that form; see tisim/core/phases.py)."""
        offset, width, shape = ti.static(entry_shape(self.model.state_layout, name))
        set3(self.x, self.b, self.t + 1, offset + i * width, shape, value)

    @ti.func
    def add_state(self, name: ti.template(), i, value):
        """Add `value` into item i of state `name` at step t itself (a hand-written reverse's dL/dx[t])."""
        offset, width, shape = ti.static(entry_shape(self.model.state_layout, name))
        add3(self.x, self.b, self.t, offset + i * width, shape, value)

    @ti.func
    def param(self, name: ti.template(), i=0):
        """Item i of parameter `name` (i = 0 for a global parameter)."""
        offset, width, shape = ti.static(entry_shape(self.model.param_layout, name))
        return read2(self.theta, self.b, offset + i * width, shape)

    @ti.func
    def add_param(self, name: ti.template(), i, value):
        """Add `value` into item i of parameter `name` (a hand-written reverse's dL/dtheta)."""
        offset, width, shape = ti.static(entry_shape(self.model.param_layout, name))
        add2(self.theta, self.b, offset + i * width, shape, value)

    @ti.func
    def action(self, name: ti.template(), i=0):
        """Item i of action `name` during step t (in a closed loop: u[t] plus the policy's output)."""
        offset, width, shape = ti.static(entry_shape(self.model.action_layout, name))
        value = read3(self.u, self.b, self.t, offset + i * width, shape)
        if ti.static(closed(self.applied)):
            value += entries(self.applied, offset + i * width, shape)
        elif ti.static(closed(applied_scratch(self.model))):  # a phased closed loop: its policy phase's output
            base, step = ti.static(self.applied_entry())
            value += read2(self.w, self.b, base + self.t * step + offset + i * width, shape)
        return value

    @ti.func
    def add_action(self, name: ti.template(), i, value):
        """Add `value` into item i of action `name` during step t (a hand-written reverse's dL/du[t]; in a phased
        closed loop also the derivative of the policy phase's output)."""
        offset, width, shape = ti.static(entry_shape(self.model.action_layout, name))
        add3(self.u, self.b, self.t, offset + i * width, shape, value)
        if ti.static(closed(applied_scratch(self.model))):
            base, step = ti.static(self.applied_entry())
            add2(self.w, self.b, base + self.t * step + offset + i * width, shape, value)

    def applied_entry(self):
        # (offset at step 0, offset per step) of the policy phase's output in w, one entry per packed action entry
        name = applied_scratch(self.model)
        return self.model.scratch_layout.entry(name)[0], self.model.scratch_layout.step_width(name)

    @ti.func
    def scratch(self, name: ti.template(), i=0):
        """Item i of scratch `name` as computed during step t (by an earlier phase of the step)."""
        base, width, shape = ti.static(self.model.scratch_layout.entry(name))
        step = ti.static(self.model.scratch_layout.step_width(name))
        return read2(self.w, self.b, base + self.t * step + i * width, shape)

    @ti.func
    def accumulate(self, name: ti.template(), i, value):
        """Add `value` into item i of scratch `name` for step t (the engine zeroes scratch before each step)."""
        base, width, shape = ti.static(self.model.scratch_layout.entry(name))
        step = ti.static(self.model.scratch_layout.step_width(name))
        add2(self.w, self.b, base + self.t * step + i * width, shape, value)

    @ti.func
    def assign(self, name: ti.template(), i, value):
        """Set item i of assigned scratch `name` for step t: the one write of that entry in the step."""
        base, width, shape = ti.static(assigned_entry(self.model.scratch_layout, name))
        step = ti.static(self.model.scratch_layout.step_width(name))
        set2(self.w, self.b, base + self.t * step + i * width, shape, value)


class Rates(NamedTuple):
    """The context of ``rates(self, s)``, an ODE's right-hand side x' = F(x, a; theta) for the continuous adjoint:
    the states x (B, S) of one time, the parameters, the actions of step t, and f (B, S), into which the rates are
    added."""

    model: Any
    x: Any
    theta: Any
    u: Any
    f: Any
    b: Any
    t: Any

    @ti.func
    def state(self, name: ti.template(), i=0):
        """Item i of state `name` where the rates are evaluated."""
        offset, width, shape = ti.static(entry_shape(self.model.state_layout, name))
        return read2(self.x, self.b, offset + i * width, shape)

    @ti.func
    def param(self, name: ti.template(), i=0):
        offset, width, shape = ti.static(entry_shape(self.model.param_layout, name))
        return read2(self.theta, self.b, offset + i * width, shape)

    @ti.func
    def action(self, name: ti.template(), i=0):
        offset, width, shape = ti.static(entry_shape(self.model.action_layout, name))
        return read3(self.u, self.b, self.t, offset + i * width, shape)

    @ti.func
    def add_rate(self, name: ti.template(), i, value):
        """Accumulate `value` into the rate d(name)/dt of item i."""
        offset, width, shape = ti.static(entry_shape(self.model.state_layout, name))
        add2(self.f, self.b, offset + i * width, shape, value)
