"""The implicit function theorem inside a Taichi step: a solution's derivative from the equation it solves, not from
the iterations that found it.

A step that solves r(w, p) = 0 for w (a Newton solve, a contact problem) has dw/dp = -(dr/dw)^{-1} dr/dp at the
solution, whatever the number of iterations or the starting guess. In a kernel that Taichi differentiates, this is
one last Newton step w_K - J^{-1} r(w_K, p) taken with w_K and J detached: its value is one more Newton step, its
derivative -J^{-1} dr/dp evaluated at w_K, exact up to the residual the earlier iterations leave.

Taichi 1.7 has no stop-gradient for a local (ti.stop_grad marks a field's SNode), and its compiler folds a bit_cast
round trip away, gradient included. `detach` rounds down to a multiple of 2^-80 instead: floor is piecewise
constant, so reverse mode gives it a zero derivative, and a float64 of magnitude >= 2^-28 is already such a multiple,
so the value comes back unchanged (smaller ones move by less than 1e-24; in float32, values in [2^-57, 2^48) are
unchanged).
"""
import taichi as ti


@ti.func
def detach(value):
    """value with no derivative (see the module docstring)."""
    scale = ti.static(2.0**80)
    return ti.floor(value * scale) / scale
