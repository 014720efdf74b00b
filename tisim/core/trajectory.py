"""The per-step arrays' housekeeping: the kernels that prepare a pass (initial state in, rows and gradients zeroed),
check it (the first non-finite step), and copy arrays between the device and numpy.

Elementwise kernels loop `for b: for t: for k` rather than over ti.ndrange: the flat index's divisions cost more than
the work (benchmarks/engine_overhead.py measures it). Only the outer loop can run in parallel, and only when `serial`
is False: handing a loop to the CPU thread pool costs of the order of 100 us per launch, more than a small system's
whole rollout, so small work, and a batch of one, run serialized (is_small, System._serial).
"""
import ctypes

import numpy as np
import taichi as ti
from taichi.lang import impl

from tisim.core import runtime

SERIAL_WORK = 20_000  # element-steps below which a kernel's batch loop is serialized


@ti.func
def prepare_grads(x_grad: ti.template(), theta_grad: ti.template(), u_grad: ti.template(), loss: ti.template(),
                  loss_grad: ti.template(), b, grads):
    # The engine zeroes its own gradients only (not every field in the program, as Tape would), and only before a
    # pass that will go backward: on a large body they are as big as the trajectory. grads is a runtime flag, not a
    # template: the forward kernel that calls this holds the whole step, and a template would compile it twice.
    if grads:
        for t in range(x_grad.shape[1]):
            for k in range(x_grad.shape[2]):
                x_grad[b, t, k] = 0.0
        for k in range(theta_grad.shape[1]):
            theta_grad[b, k] = 0.0
        for t in range(u_grad.shape[1]):
            for j in range(u_grad.shape[2]):
                u_grad[b, t, j] = 0.0
    loss[b] = 0.0
    loss_grad[b] = 1.0


@ti.func
def clear_row(x: ti.template(), b, t, unrolled: ti.template(), value: ti.template()):
    # steps accumulate into x[t+1] with +=, so each starts from zero (value: NaN where it must be set instead)
    if ti.static(unrolled):
        for k in ti.static(range(unrolled)):
            x[b, t, k] = value
    else:
        for k in range(x.shape[2]):
            x[b, t, k] = value


@ti.func
def nonfinite_row(x: ti.template(), b, t, unrolled: ti.template()):
    # x * 0 is 0 for finite x and NaN otherwise, so one test per row finds a bad step (fast_math is off)
    bad = 0.0
    if ti.static(unrolled):
        for k in ti.static(range(unrolled)):
            bad += x[b, t, k] * 0.0
    else:
        # four sums, not one: a single chain of dependent adds cost 5% of a large body's forward pass
        quarter = x.shape[2] // 4
        bad1, bad2, bad3 = 0.0, 0.0, 0.0
        for k in range(quarter):
            bad += x[b, t, 4 * k] * 0.0
            bad1 += x[b, t, 4 * k + 1] * 0.0
            bad2 += x[b, t, 4 * k + 2] * 0.0
            bad3 += x[b, t, 4 * k + 3] * 0.0
        for k in range(4 * quarter, x.shape[2]):
            bad += x[b, t, k] * 0.0
        bad += bad1 + bad2 + bad3
    return ti.math.isnan(bad)


@ti.func
def prepare(x: ti.template(), x0: ti.template(), loss: ti.template(), x_grad: ti.template(),
            theta_grad: ti.template(), u_grad: ti.template(), loss_grad: ti.template(), b, grads):
    for k in range(x.shape[2]):
        x[b, 0, k] = x0[b, k]
    for t in range(1, x.shape[1]):
        clear_row(x, b, t, 0, 0.0)
    prepare_grads(x_grad, theta_grad, u_grad, loss, loss_grad, b, grads)


@ti.func
def record_status(x: ti.template(), loss: ti.template(), status: ti.template(), b):
    # status[b] = (loss, first step with a non-finite state or T+1), into a host array: one read-back per pass
    first = x.shape[1]
    for t in range(x.shape[1]):
        if nonfinite_row(x, b, t, 0) and t < first:
            first = t
    status[b, 0] = loss[b]
    status[b, 1] = first


@ti.kernel
def begin(x: ti.types.ndarray(ndim=3), x0: ti.types.ndarray(ndim=2), loss: ti.types.ndarray(ndim=1),
          x_grad: ti.types.ndarray(ndim=3), theta_grad: ti.types.ndarray(ndim=2), u_grad: ti.types.ndarray(ndim=3),
          loss_grad: ti.types.ndarray(ndim=1), serial: ti.template(), grads: ti.i32):
    ti.loop_config(serialize=serial)
    for b in range(x.shape[0]):
        prepare(x, x0, loss, x_grad, theta_grad, u_grad, loss_grad, b, grads)


@ti.kernel
def finish(x: ti.types.ndarray(ndim=3), loss: ti.types.ndarray(ndim=1), status: ti.types.ndarray(ndim=2),
           serial: ti.template()):
    ti.loop_config(serialize=serial)
    for b in range(x.shape[0]):
        record_status(x, loss, status, b)


@ti.kernel
def copy2(source: ti.types.ndarray(ndim=2), target: ti.types.ndarray(ndim=2), serial: ti.template()):
    ti.loop_config(serialize=serial)
    for b in range(source.shape[0]):
        for k in range(source.shape[1]):
            target[b, k] = ti.cast(source[b, k], ti.lang.impl.get_runtime().default_fp)  # float64 in: no warning


@ti.kernel
def copy3(source: ti.types.ndarray(ndim=3), target: ti.types.ndarray(ndim=3), serial: ti.template()):
    ti.loop_config(serialize=serial)
    for b in range(source.shape[0]):
        for t in range(source.shape[1]):
            for k in range(source.shape[2]):
                target[b, t, k] = ti.cast(source[b, t, k], ti.lang.impl.get_runtime().default_fp)


@ti.kernel
def copy_step(source: ti.types.ndarray(ndim=3), t: ti.i32, target: ti.types.ndarray(ndim=2)):
    for b in range(source.shape[0]):
        for k in range(source.shape[2]):
            target[b, k] = source[b, t, k]


def copy(source, target):
    serial = is_small(int(np.prod(source.shape)), source.shape[0])
    (copy2 if len(source.shape) == 2 else copy3)(source, target, serial)


def host_view(array):
    """A numpy array over a CPU ndarray's own memory, no copy (None on a GPU): numpy writes it at memory speed,
    where a copying kernel is scalar code. Valid while the ndarray lives; Taichi's CPU kernels have returned when their
    launch does."""
    if runtime.settings()["arch"] != "cpu":
        return None
    dtype = runtime.numpy_real()
    size = int(np.prod(array.shape))
    pointer = impl.get_runtime().prog.get_ndarray_data_ptr_as_int(array.arr)
    memory = (ctypes.c_char * (size * np.dtype(dtype).itemsize)).from_address(pointer)
    return np.frombuffer(memory, dtype=dtype, count=size).reshape(array.shape)


def download(array):
    """An ndarray into a new float64 numpy array: by numpy on a CPU (host_view), else by one kernel
    (ndarray.to_numpy is several times slower)."""
    view = host_view(array)
    if view is not None:
        return view.astype(np.float64)
    out = np.empty(array.shape, dtype=runtime.numpy_real())
    copy(array, out)
    return out.astype(np.float64, copy=False)


def is_small(work, batch):
    """Whether a kernel's batch loop over this many element-steps runs faster serialized than on the thread pool.
    Every kernel's parallel loop is the batch loop, so a batch of one loses nothing serialized (and its atomic
    adds, in the backward pass, become plain ones, a tenth of a MassSpring gradient's time)."""
    return batch == 1 or work < SERIAL_WORK or runtime.settings()["threads"] == 1


@ti.kernel
def seed_final_state(g: ti.types.ndarray(ndim=3), k: ti.i32, serial: ti.template()):
    ti.loop_config(serialize=serial)
    for b in range(g.shape[0]):
        for t in range(g.shape[1]):
            for j in range(g.shape[2]):
                g[b, t, j] = 1.0 if (t == g.shape[1] - 1 and j == k) else 0.0
