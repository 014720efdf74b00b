"""What a simulator's arrays need, planned from its horizon, batch and layouts before any of them is allocated.

``plan_memory(sim)`` lists every array a simulator holds (shape, elements, bytes, on the device or the host, and
whether it is made at construction or by the first pass that keeps every step), and ``check_memory`` refuses by name
what cannot work:

  - an array of more than 2^31 - 1 elements: Taichi 1.7 indexes an ndarray's elements with 32-bit integers, so a
    larger array would be read and written at wrapped-around indices (a wrong result, not an error);
  - arrays that need more memory than the machine has available (on a CPU, the host memory the kernel reports as
    available: free memory and the caches it can drop; on a GPU the host copies are checked against it, the device
    arrays only against the index limit).

``System.memory_plan()`` returns the plan (a refusal carries it as ``error.plan``). The engine checks the arrays made
at construction before making any, and the per-step arrays (the states and the scratch of every step) before the
first pass that keeps every step makes them. Not in the plan: a loss's tables (their size follows from the loss) and
the buffers of the other gradient methods (tisim/autodiff/).
"""
import os
from typing import NamedTuple

import numpy as np

from tisim.core import runtime

INDEX_LIMIT = 2 ** 31 - 1  # the most elements Taichi 1.7's 32-bit indexing reaches in one ndarray
CONSTRUCTION, TRAJECTORY = "construction", "first unrolled pass"
GiB = 2 ** 30


class PlannedArray(NamedTuple):
    name: str  # the attribute, e.g. "u" or "u.grad"
    what: str  # in words
    shape: tuple
    itemsize: int  # bytes per element
    place: str  # "device" (a Taichi ndarray) or "host" (a numpy array)
    made: str  # CONSTRUCTION or TRAJECTORY

    @property
    def elements(self):
        return int(np.prod(self.shape, dtype=object))

    @property
    def bytes(self):
        return self.elements * self.itemsize


class MemoryPlan:
    """The arrays of one simulator: ``arrays`` (PlannedArray rows), ``bytes`` (their total), ``device_bytes`` and
    ``host_bytes``, ``largest`` (the array with the most elements); ``made(when)`` the rows made at construction or
    by the first unrolled pass. Printing it gives a table."""

    def __init__(self, owner, arrays):
        self.owner, self.arrays = owner, list(arrays)
        self.bytes = sum(a.bytes for a in self.arrays)
        self.device_bytes = sum(a.bytes for a in self.arrays if a.place == "device")
        self.host_bytes = self.bytes - self.device_bytes
        self.largest = max(self.arrays, key=lambda a: a.elements)

    def made(self, when):
        return [a for a in self.arrays if a.made == when]

    def __getitem__(self, name):
        for array in self.arrays:
            if array.name == name:
                return array
        raise KeyError(f"no planned array {name!r}; arrays: {[a.name for a in self.arrays]}")

    def __str__(self):
        rows = [f"{self.owner}: {size(self.bytes)} in {len(self.arrays)} arrays (largest: {self.largest.name}, "
                f"{self.largest.elements:,} elements of at most {INDEX_LIMIT:,})"]
        for a in self.arrays:
            rows.append(f"  {a.name:<22} {str(a.shape):<24} {a.elements:>16,} elements {size(a.bytes):>11}  "
                        f"{a.place}, made at {a.made}")
        return "\n".join(rows)

    __repr__ = __str__


def size(count):
    """Bytes in words: '36.4 TiB', '512 B'."""
    for unit, scale in (("TiB", 2 ** 40), ("GiB", GiB), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def plan_memory(sim, host_buffer_entries):
    """The MemoryPlan of a simulator whose horizon, batch and layouts are set (tisim.core.model.describe), made without
    allocating anything; host_buffer_entries: the largest action gradient the engine keeps a host copy of, off the
    CPU."""
    B, T = sim.B, sim.T
    S, P, A = sim.state_layout.size, sim.param_layout.size, sim.action_layout.size
    real = np.dtype(runtime.numpy_real()).itemsize
    arrays = []

    def add(name, what, shape, made=CONSTRUCTION, grad=False, place="device", itemsize=real):
        arrays.append(PlannedArray(name, what, tuple(int(n) for n in shape), itemsize, place, made))
        if grad:
            arrays.append(PlannedArray(name + ".grad", "its gradient", tuple(int(n) for n in shape), itemsize, place,
                                       made))

    add("theta", "parameters", (B, max(P, 1)), grad=True)
    add("u", "actions", (B, T, A), grad=True)
    add("x0", "initial states", (B, S))
    add("loss", "per-element losses", (B,), grad=True)
    add("_theta", "parameters, host copy", (B, P), place="host", itemsize=8)
    add("_x0", "initial states, host copy", (B, S), place="host", itemsize=8)
    add("_u", "actions, host copy", (B, T, A), place="host", itemsize=8)
    add("_status_host", "loss and first non-finite step", (B, 2), place="host")
    if B * T * A <= host_buffer_entries and runtime.settings()["arch"] != "cpu":
        add("_u_grad_host", "action gradient, host copy", (B, T, A), place="host")
    add("x", "states of every step", (B, T + 1, S), TRAJECTORY, grad=True)
    add("scratch", "per-step scratch", (B, max(sim.scratch_layout.width(T), 1)), TRAJECTORY, grad=True)
    return MemoryPlan(type(sim).__name__, arrays)


def physical_memory():
    """The machine's physical memory in bytes (None where the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def available_memory():
    """The memory that can be allocated now without swapping, in bytes: the kernel's MemAvailable (free memory and
    the caches it can drop); the physical memory where the system does not say."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return physical_memory()


ADVICE = {
    "theta": "a smaller batch or smaller sizes",
    "x0": "a smaller batch or smaller sizes",
    "u": "a shorter horizon or a smaller batch",
    "x": 'method="checkpointed", which keeps no per-step states, a shorter horizon or a smaller batch',
    "scratch": 'method="checkpointed", which keeps no per-step scratch, a shorter horizon or a smaller batch',
}


def check_memory(sim, memory_plan, when, available=None):
    """Refuse the arrays made at `when` (CONSTRUCTION or TRAJECTORY): any over the index limit, by name; and the
    whole plan up to them where it needs more than `available` bytes (default: available_memory())."""
    name = f"{type(sim).__name__}(horizon={sim.T}, batch={sim.B})"
    for array in memory_plan.made(when):
        if array.elements > INDEX_LIMIT:
            advice = ADVICE.get(array.name.split(".")[0].lstrip("_"), "a smaller batch")
            if sim.sizes:
                advice += " (sizes: " + ", ".join(f"{k}={v}" for k, v in sim.sizes.items()) + ")"
            error = ValueError(
                f"{name}: the array {array.name} ({array.what}) of shape {array.shape} would hold "
                f"{array.elements:,} elements, more than the {INDEX_LIMIT:,} (2^31 - 1) that Taichi's 32-bit indexing "
                f"reaches in one array; use {advice}")
            error.plan = memory_plan
            raise error
    held = [a for a in memory_plan.arrays if a.made == CONSTRUCTION or when == TRAJECTORY]
    on_cpu = runtime.settings()["arch"] == "cpu"
    counted = [a for a in held if on_cpu or a.place == "host"]
    need = sum(a.bytes for a in counted)
    physical = physical_memory()
    available = available_memory() if available is None else available
    if available is not None and need > available:
        biggest = sorted(counted, key=lambda a: -a.bytes)[:3]
        parts = ", ".join(f"{a.name} {a.shape} {size(a.bytes)}" for a in biggest)
        advice = ADVICE["x"] if when == TRAJECTORY else ADVICE["u"]
        error = MemoryError(
            f"{name}: its arrays would need {size(need)} ({parts}, ...), more than the {size(available)} of memory "
            f"available now (of this machine's {size(physical or available)}); use {advice} (this error's .plan lists "
            "every array)")
        error.plan = memory_plan
        raise error
