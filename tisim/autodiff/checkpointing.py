"""The checkpointed backward pass: keep every L-th state, recompute each segment during the backward sweep.

Unrolled reverse mode keeps all T+1 states: memory O(B T S). Here the forward sweep keeps only the states at the
segment starts t_k = k L (the checkpoints), and the backward sweep, segment by segment from the last, re-runs the
segment's L steps from its checkpoint into a small buffer and differentiates it, carrying the adjoint lambda_{t_k}
to the segment before. Memory O(B (T/L + L) S), smallest at L ~ sqrt(T): the default, unless that makes segments
too short to repay their kernel calls. Time: one more forward rollout (about 1.3-1.5x the unrolled gradient). In
deterministic mode the gradients equal the unrolled ones bitwise for the built-in losses (same operations in the
same order); custom losses that touch theta may differ in the last bits.

A loss term is evaluated on the segment that holds its step: the built-in losses and ``Custom`` functions that read
step t only. The per-step adjoint is not kept (that is the point), so ``Gradient.adjoint`` is unavailable.

The segments themselves (their buffers, running one from its kept state, the non-finite check) are
tisim/core/segments.py's, shared with the long forward runs of ``System.rollout``.
"""
import math

import numpy as np
import taichi as ti

from tisim.core.derivatives import Gradient, NonFiniteError
from tisim.core.engine import mechanism
from tisim.core.protocol import Protocol
from tisim.core.segments import Segments, check_finite, keep_initial, keep_state, run_segment
from tisim.core.trajectory import download

MIN_SEGMENT_WORK = 2_000  # state entries x steps a default segment holds at least


@ti.kernel
def _seed_end(xs_grad: ti.types.ndarray(ndim=3), n: ti.i32, lam: ti.types.ndarray(ndim=2), serial: ti.template()):
    ti.loop_config(serialize=serial)
    for b in range(xs_grad.shape[0]):
        for j in range(xs_grad.shape[2]):
            xs_grad[b, n, j] = lam[b, j]


@ti.kernel
def _carry_back(xs_grad: ti.types.ndarray(ndim=3), lam: ti.types.ndarray(ndim=2), us_grad: ti.types.ndarray(ndim=3),
                t0: ti.i32, n: ti.i32, u_grad: ti.types.ndarray(ndim=3), serial: ti.template()):
    # lambda at the segment start goes to the segment before; the segment's action gradients to their place
    ti.loop_config(serialize=serial)
    for b in range(xs_grad.shape[0]):
        for j in range(xs_grad.shape[2]):
            lam[b, j] = xs_grad[b, 0, j]
        for t in range(n):
            for a in range(us_grad.shape[2]):
                u_grad[b, t0 + t, a] = us_grad[b, t, a]


def segment_length(T, segments, state_entries=1):
    """Steps per segment for `segments` segments. By default about sqrt(T) segments, but none shorter than
    MIN_SEGMENT_WORK / state_entries steps (state_entries = B S): a segment costs about ten kernel calls, which a
    cheap system's short segment would not repay (measured, pendulum: 32 segments at T = 1,000 took 12x the
    unrolled time; segments of 1,000 steps take 2-2.7x at T = 1e3-1e5 and still keep 0.1-4.9 MB against 0.9-11)."""
    if segments is None:
        shortest = math.ceil(MIN_SEGMENT_WORK / max(state_entries, 1))
        return min(T, max(math.ceil(T / max(1, round(math.sqrt(T)))), shortest))
    if isinstance(segments, bool) or not isinstance(segments, (int, np.integer)) or not 1 <= segments <= T:
        raise ValueError(f"gradient: segments must be an integer in [1, {T}] (the horizon), got {segments!r}")
    return math.ceil(T / segments)


def segment_windows(sim, loss, buffers):
    """The loss restricted to each segment of `buffers` (kept on the bound loss, per segment length)."""
    bound = Protocol.of(sim).bound(loss)
    if buffers.length not in bound.windows:
        bound.windows[buffers.length] = [bound.window(*buffers.span(k, sim.T), k == buffers.count - 1)
                                         for k in range(buffers.count)]
    return bound.windows[buffers.length]


def forward_sweep(sim, loss, segments):
    """Run the rollout segment by segment, keeping the checkpoints and summing the loss.

    Returns (buffers, the loss restricted to each segment, the loss of each batch element (B,))."""
    length = segment_length(sim.T, segments, sim.B * sim.state_layout.size)
    p = Protocol.of(sim)
    buffers = p.buffers(("segments", length), lambda: Segments(sim, length))
    windows = segment_windows(sim, loss, buffers)
    p.begin_pass()
    b = buffers
    sim.loss.fill(0)
    p.launch(keep_initial, sim.x0, b.checkpoints, b.serial)
    for k in range(b.count):
        t0, n = b.span(k, sim.T)
        run_segment(sim, b, windows[k], k, t0, n)
        p.launch(keep_state, b.xs, n, b.checkpoints, k + 1, b.serial)
        per_batch = check_finite(sim, b, t0, n)
    if not np.all(np.isfinite(per_batch)):
        raise NonFiniteError(f"{type(sim).__name__}: the loss is non-finite: {per_batch}")
    return buffers, windows, per_batch


@mechanism("checkpointed")
def checkpointed_gradient(sim, loss, segments=None):
    """``sim.gradient(loss, method="checkpointed", segments=...)``; see the module docstring."""
    b, windows, per_batch = forward_sweep(sim, loss, segments)
    p = Protocol.of(sim)
    sim.loss.grad.fill(1)
    sim.theta.grad.fill(0)
    b.lam.fill(0)
    for k in reversed(range(b.count)):  # backward sweep: recompute the segment, differentiate it
        t0, n = b.span(k, sim.T)
        run_segment(sim, b, None, k, t0, n)
        p.launch(_seed_end, b.xs.grad, n, b.lam, b.serial)
        windows[k].backward(b.xs, sim.theta, b.us, sim.loss, b.serial, p.launch)
        p.steps(b.xs, b.us, 0, n, b.serial, grad=True)
        p.launch(_carry_back, b.xs.grad, b.lam, b.us.grad, t0, n, sim.u.grad, b.serial)
    return Gradient.computed(sim, per_batch, dict(
        actions=p.fetch("actions"), params=p.fetch("params"),
        initial_state=sim.state_layout.unpack(download(b.lam))), "the backward pass",
        "the per-step adjoint is not kept by method='checkpointed'; use method='unrolled'")

