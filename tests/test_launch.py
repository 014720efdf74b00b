"""Bound kernel calls (tisim/core/launch.py) do exactly what Taichi's own calls do."""
import gc

import numpy as np
import taichi as ti

import tisim
from tisim.core.launch import Launches

from conftest import TEST_SETTINGS


@ti.kernel
def _scaled_sum(x: ti.types.ndarray(ndim=2), w: float, n: ti.i32, out: ti.types.ndarray(ndim=1),
                serial: ti.template()):
    ti.loop_config(serialize=serial)
    for b in range(x.shape[0]):
        for k in range(n):
            out[b] += w * x[b, k] ** 2


def arrays():
    x = ti.ndarray(ti.f64, (3, 5), needs_grad=True)
    out = ti.ndarray(ti.f64, (3,), needs_grad=True)
    x.from_numpy(np.arange(15.0).reshape(3, 5))
    return x, out


def test_bound_calls_equal_plain_calls_with_changing_scalars_and_contents():
    """Values and reverse-mode gradients agree bitwise with Taichi's calls; scalars given per call take effect, and
    new contents of a bound array are seen (it is bound by address, not by value)."""
    launch = Launches()
    x, out = arrays()
    x2, out2 = arrays()
    for w, n in ((1.5, 5), (-0.25, 3), (2.0, 1)):
        for target in (out, out2):
            target.fill(0)
        launch(_scaled_sum, x, w, n, out, True)
        _scaled_sum(x2, w, n, out2, True)
        np.testing.assert_array_equal(out.to_numpy(), out2.to_numpy())
        for a, o in ((x, out), (x2, out2)):
            a.grad.fill(0)
            o.grad.fill(1)
        launch(_scaled_sum, x, w, n, out, True, grad=True)
        _scaled_sum.grad(x2, w, n, out2, True)
        np.testing.assert_array_equal(x.grad.to_numpy(), x2.grad.to_numpy())
        assert np.any(x.grad.to_numpy() != 0)
    x.from_numpy(np.ones((3, 5)))
    out.fill(0)
    launch(_scaled_sum, x, 1.0, 5, out, True)
    np.testing.assert_array_equal(out.to_numpy(), [5.0, 5.0, 5.0])


def test_a_kept_launch_context_is_relaunched_hundreds_of_times():
    """On a CPU one launch context serves every call of a binding (a GPU fills a fresh one each time). Relaunched
    300 times with changing scalars it accumulates exactly what 300 plain calls do, in the values and in the gradient
    arrays (an ndarray given to a kept context the way Taichi's call path gives it was corrupted at the second
    launch)."""
    launch = Launches()
    x, out = arrays()
    x2, out2 = arrays()
    for a, o in ((x, out), (x2, out2)):
        o.fill(0)
        a.grad.fill(0)
        o.grad.fill(1)
    for i in range(300):
        w = 0.5 + i / 300
        launch(_scaled_sum, x, w, 5, out, True)
        launch(_scaled_sum, x, w, 5, out, True, grad=True)
        _scaled_sum(x2, w, 5, out2, True)
        _scaled_sum.grad(x2, w, 5, out2, True)
    assert all((bound.context is not None) == launch._cpu for bound in launch._bound.values())  # kept on a CPU
    assert len(launch._bound) == 2
    np.testing.assert_array_equal(out.to_numpy(), out2.to_numpy())
    np.testing.assert_array_equal(x.grad.to_numpy(), x2.grad.to_numpy())
    expected = sum(0.5 + i / 300 for i in range(300)) * 2 * np.arange(15.0).reshape(3, 5)
    np.testing.assert_allclose(x.grad.to_numpy(), expected, rtol=1e-12)


def test_numpy_arguments_are_written_back_and_templates_key_the_binding():
    """A numpy output array is filled in place; serial=True and serial=False are two bindings, same result."""
    launch = Launches()
    x, _ = arrays()
    host = np.zeros(3)
    for serial in (True, False):
        host[:] = 0
        launch(_scaled_sum, x, 1.0, 5, host, serial)
        np.testing.assert_allclose(host, (np.arange(15.0).reshape(3, 5) ** 2).sum(axis=1))
    assert len(launch._bound) == 2


def test_a_restart_drops_every_binding():
    """tisim.init with new settings restarts Taichi; bindings hold handles into the old program (and keep it
    alive), so they are dropped first, and new simulators bind afresh."""
    old = tisim.systems.Pendulum(horizon=20, theta=0.5)
    loss = tisim.losses.TerminalTarget({"theta": 0.0})
    expected = old.gradient(loss).params["l"]
    assert len(old._launch._bound) > 0
    tisim.init(arch="cpu", precision="f32")
    tisim.init(**TEST_SETTINGS)
    assert len(old._launch._bound) == 0
    del old
    gc.collect()
    fresh = tisim.systems.Pendulum(horizon=20, theta=0.5)
    for _ in range(3):
        np.testing.assert_array_equal(fresh.gradient(loss).params["l"], expected)
