"""A rollout run in segments of L steps through a small buffer, and the long runs built on it.

Both the checkpointed gradient (tisim/autodiff/checkpointing.py) and a long forward run (``System.rollout`` with
``final``, ``every`` or ``to``) step a simulator segment by segment: each segment starts from a kept state, runs its
steps into a buffer of L+1 states and is checked for non-finite values. The gradient keeps every segment's start
(its checkpoints); a long run keeps only the state it carries to the next segment, so its memory does not depend on
the horizon. In deterministic mode the states equal those of the one-launch rollout bit for bit: the steps run the
same operations in the same order.
"""
import math
import os
import time

import numpy as np
import taichi as ti

from tisim.core import runtime
from tisim.core.derivatives import NonFiniteError, nonfinite_rollout
from tisim.core.protocol import Protocol
from tisim.core.trajectory import download, finish, host_view, is_small

RUN_BUFFER_ENTRIES = 1 << 20  # state entries (B (L+1) S) a long run's default segment buffer holds at most
RUN_STEPS = 10_000  # steps of a long run's default segment at most: a progress update and a file write each
PROGRESS_AFTER_S = 3.0  # a long run shows a progress bar (progress=None) when it is expected to take longer


@ti.kernel
def load_segment(checkpoints: ti.types.ndarray(ndim=3), k: ti.i32, xs: ti.types.ndarray(ndim=3),
                  xs_grad: ti.types.ndarray(ndim=3), u: ti.types.ndarray(ndim=3), t0: ti.i32, n: ti.i32,
                  us: ti.types.ndarray(ndim=3), us_grad: ti.types.ndarray(ndim=3), serial: ti.template()):
    # the segment starts from its checkpoint; later steps start from zero (steps accumulate with +=)
    ti.loop_config(serialize=serial)
    for b in range(xs.shape[0]):
        for j in range(xs.shape[2]):
            xs[b, 0, j] = checkpoints[b, k, j]
            xs_grad[b, 0, j] = 0.0
        for t in range(1, xs.shape[1]):
            for j in range(xs.shape[2]):
                xs[b, t, j] = 0.0
                xs_grad[b, t, j] = 0.0
        for t in range(us.shape[1]):
            for a in range(us.shape[2]):
                us[b, t, a] = u[b, t0 + t, a] if t < n else 0.0
                us_grad[b, t, a] = 0.0


@ti.kernel
def keep_state(xs: ti.types.ndarray(ndim=3), n: ti.i32, checkpoints: ti.types.ndarray(ndim=3), k: ti.i32,
                serial: ti.template()):
    ti.loop_config(serialize=serial)
    for b in range(xs.shape[0]):
        for j in range(xs.shape[2]):
            checkpoints[b, k, j] = xs[b, n, j]


@ti.kernel
def keep_initial(x0: ti.types.ndarray(ndim=2), checkpoints: ti.types.ndarray(ndim=3), serial: ti.template()):
    ti.loop_config(serialize=serial)
    for b in range(x0.shape[0]):
        for j in range(x0.shape[1]):
            checkpoints[b, 0, j] = x0[b, j]


class Segments:
    """Buffers for one segment length L: a segment's states and actions (with gradients) and the kept states.

    kept: how many states to keep (default: every segment's start and the final state, the checkpoints of a
    gradient); a long run keeps one, the state carried from segment to segment."""

    def __init__(self, sim, length, kept=None):
        real, B, S = runtime.real(), sim.B, sim.state_layout.size
        self.length = length
        self.count = math.ceil(sim.T / length)
        self.xs = ti.ndarray(real, (B, length + 1, S), needs_grad=True)
        self.us = ti.ndarray(real, (B, length, sim.action_layout.size), needs_grad=True)
        self.checkpoints = ti.ndarray(real, (B, self.count + 1 if kept is None else kept, S))
        self.lam = ti.ndarray(real, (B, S))
        self.serial = is_small(B * (length + 1) * S, B)

    def span(self, k, T):
        """(t0, number of steps) of segment k."""
        return k * self.length, min(self.length, T - k * self.length)

    def arrays(self):
        """The device arrays held (for memory accounting)."""
        return [self.xs, self.us, self.checkpoints, self.lam]


def run_segment(sim, b, window, k, t0, n, kept=None):
    """Steps t0..t0+n-1 into b.xs from the kept state `kept` (default k), and the loss window's terms if given."""
    p = Protocol.of(sim)
    p.launch(load_segment, b.checkpoints, k if kept is None else kept, b.xs, b.xs.grad, sim.u, t0, n, b.us,
             b.us.grad, b.serial)
    p.steps(b.xs, b.us, 0, n, b.serial)
    if window is not None:
        window.forward(b.xs, sim.theta, b.us, sim.loss, b.serial, p.launch)


def check_finite(sim, b, t0, n):
    """Raises NonFiniteError at the first bad step of segment [t0, t0 + n]; returns the loss summed so far (B,)."""
    p = Protocol.of(sim)
    p.launch(finish, b.xs, sim.loss, p.status, b.serial)
    status = p.status.astype(np.float64)
    first = status[:, 1]
    if np.any(first <= n):
        batch = int(np.argmin(first))
        raise nonfinite_rollout(sim, t0 + int(first[batch]), batch, download(b.xs)[batch, int(first[batch])])
    return status[:, 0]


# ---- long runs ---------------------------------------------------------------------------------------------------
def run_length(sim, chunk):
    """Steps per segment of a long run: `chunk`, or as many as fit RUN_BUFFER_ENTRIES states, RUN_STEPS at most."""
    if chunk is None:
        return max(1, min(sim.T, RUN_STEPS, RUN_BUFFER_ENTRIES // max(sim.B * sim.state_layout.size, 1) - 1))
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise ValueError(f"rollout: chunk must be a positive integer (steps per segment), got {chunk!r}")
    return int(min(chunk, sim.T))


def long_run(sim, *, every=None, final=False, to=None, chunk=None, progress=None):
    """``sim.rollout(final=..., every=..., to=..., chunk=..., progress=...)``; see System.rollout."""
    if every is not None and (isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1):
        raise ValueError(f"rollout: every must be a positive integer (keep x[0], x[every], ...), got {every!r}")
    if final and every is not None:
        raise ValueError("rollout: final=True keeps only x[T]; every=k keeps x[0], x[k], ...: give one of them")
    if final and to is not None:
        raise ValueError("rollout: to= writes x[0], x[every], ... to a file; final=True keeps x[T] only")
    if progress not in (None, True, False):
        raise ValueError(f"rollout: progress must be True, False or None (automatic), got {progress!r}")
    every = 1 if every is None else int(every)
    length = run_length(sim, chunk)
    p = Protocol.of(sim)
    b = p.buffers(("run", length), lambda: Segments(sim, length, kept=1))
    T, B, layout = sim.T, sim.B, sim.state_layout
    rows = T // every + 1  # x[0], x[every], ..., the last multiple of every up to T
    keep = None if final else StateFile(to, layout, B, rows) if to is not None else KeptStates(layout.size, B, rows)
    bar = _Bar(T) if progress else None
    try:
        p.begin_pass()
        p.launch(keep_initial, sim.x0, b.checkpoints, b.serial)
        start = time.perf_counter()
        for k in range(b.count):
            t0, n = b.span(k, T)
            run_segment(sim, b, None, k, t0, n, kept=0)
            try:
                check_finite(sim, b, t0, n)
            except NonFiniteError as error:  # the states before the bad step still reach the file
                if isinstance(keep, StateFile) and error.step is not None:
                    keep.add(b.xs, _chosen(t0, min(error.step - 1, t0 + n), every, k == 0))
                raise
            p.launch(keep_state, b.xs, n, b.checkpoints, 0, b.serial)
            if keep is not None:
                keep.add(b.xs, _chosen(t0, t0 + n, every, k == 0))
            done, now = t0 + n, time.perf_counter()
            if k == 0:  # the first segment's time includes compiling the kernels: the rate is taken after it
                first = (now, done)
            elif bar is None and progress is None and done < T:
                remaining = (now - first[0]) / (done - first[1]) * (T - done)
                if max(now - start, remaining) > PROGRESS_AFTER_S:
                    bar = _Bar(T)
            if bar is not None:
                bar.update(done)
    finally:
        if bar is not None:
            bar.close()
        if isinstance(keep, StateFile):
            keep.close()
    last = download(b.checkpoints)[:, 0]
    if isinstance(keep, KeptStates):
        return layout.unpack(keep.states)
    return layout.unpack(last)


def _chosen(t0, t1, every, first):
    """The rows of a segment starting at step t0 (its row 0) that hold the kept steps in (t0, t1], and t0 itself
    in the first segment."""
    start = t0 if first else t0 + 1
    lowest = -(-start // every) * every
    return np.arange(lowest, t1 + 1, every) - t0


def _rows(xs, chosen):
    """The rows `chosen` of a segment buffer, as float64 (B, len(chosen), S)."""
    view = host_view(xs)
    if view is not None:
        return view[:, chosen].astype(np.float64)
    return download(xs)[:, chosen]


class KeptStates:
    """The kept states of a long run, in memory: (B, rows, S)."""

    def __init__(self, size, batch, rows):
        self.states = np.empty((batch, rows, size))
        self.filled = 0

    def add(self, xs, chosen):
        if len(chosen):
            self.states[:, self.filled:self.filled + len(chosen)] = _rows(xs, chosen)
            self.filled += len(chosen)


class StateFile:
    """The kept states of a long run, appended to an .npy file as the run goes.

    The file holds one record per (batch element, kept step) with a float64 field per state name, in Fortran order:
    ``np.load(path)`` is an array of shape (B, rows), and ``np.load(path)["theta"]`` has the shape (B, rows, *shape)
    of the state ``theta`` in a full rollout, at steps 0, every, 2 every, ... Each segment's states are written
    after the data before them, and then the header is rewritten (in place, its length fixed) to count them: a run
    that stops part way, interrupted or killed, leaves a file that np.load reads as the states of the segments
    completed, and of a segment that turned non-finite the states before its bad step."""

    def __init__(self, path, layout, batch, rows):
        path = os.fspath(path)
        if not path.endswith(".npy"):
            raise ValueError(f"rollout: to= must name an .npy file (a file that grows as the run goes), got {path!r}")
        self.path, self.batch, self.rows = path, batch, 0
        self.dtype = np.dtype({"names": layout.names,
                               "formats": [(np.float64, layout.shapes[n]) if layout.shapes[n] else np.float64
                                           for n in layout.names],
                               "offsets": [8 * layout.offsets[n] for n in layout.names], "itemsize": 8 * layout.size})
        self.descr = np.lib.format.dtype_to_descr(self.dtype)
        longest = len(self._header(rows)) + 1
        self.version = (1, 0) if longest + 10 < 1 << 16 else (2, 0)
        prefix = 10 if self.version == (1, 0) else 12
        self.header_length = -(-(prefix + longest) // 64) * 64 - prefix  # the whole header a multiple of 64 bytes
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.file = open(path, "wb")
        self._write_header()

    def _header(self, rows):
        return f"{{'descr': {self.descr!r}, 'fortran_order': True, 'shape': ({self.batch}, {rows}), }}"

    def _write_header(self):
        text = self._header(self.rows).ljust(self.header_length - 1) + "\n"
        size = len(text).to_bytes(2 if self.version == (1, 0) else 4, "little")
        self.file.seek(0)
        self.file.write(b"\x93NUMPY" + bytes(self.version) + size + text.encode("latin1"))
        self.file.flush()

    def add(self, xs, chosen):
        if not len(chosen):
            return
        rows = _rows(xs, chosen)  # (B, n, S): the file's order is step-major, batch element within a step
        self.file.seek(0, os.SEEK_END)
        self.file.write(np.ascontiguousarray(rows.transpose(1, 0, 2)).tobytes())
        self.file.flush()
        self.rows += len(chosen)
        self._write_header()

    def close(self):
        self.file.close()


class _Bar:
    """A rich progress bar over the steps of a run."""

    def __init__(self, total):
        from rich import progress as rich

        self.progress = rich.Progress(rich.TextColumn("rollout"), rich.BarColumn(), rich.MofNCompleteColumn(),
                                      rich.TextColumn("steps"), rich.TimeElapsedColumn(), rich.TimeRemainingColumn())
        self.task = self.progress.add_task("rollout", total=total)
        self.progress.start()

    def update(self, done):
        self.progress.update(self.task, completed=done)

    def close(self):
        self.progress.stop()
