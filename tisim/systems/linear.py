"""Linear systems: the smallest models on which the adjoint can be followed by hand.

ScalarLinear:  x[t+1] = a x[t] + theta + u[t]
Linear:        x[t+1] = A x[t] + B u[t] + theta,   x in R^n, u in R^m

Both are smooth everywhere. |dx_T/dtheta| saturates at 1/(1 - a) when |a| < 1 and grows like a^T when |a| > 1; for
Linear the spectral radius of A plays the part of |a|.
"""
import taichi as ti

from tisim.core.engine import System
from tisim.core.quantities import Quantity, Size


class ScalarLinear(System):
    """x[t+1] = a x[t] + theta + u[t], one scalar state, one scalar action."""

    PARAMS = (
        Quantity("a", 0.9, "-", "coefficient of x[t] (the system's one eigenvalue)"),
        Quantity("theta", 1.0, "-", "constant drive added every step"),
    )
    STATE = (Quantity("x", 0.0, "-", "the state"),)
    ACTION = (Quantity("u", 0.0, "-", "input added every step"),)
    DT = 1.0  # a map, not a discretized ODE: dt is not used

    @ti.func
    def step(self, s: ti.template()):
        s.advance("x", 0, s.param("a") * s.state("x") + s.param("theta") + s.action("u"))


class Linear(System):
    """x[t+1] = A x[t] + B u[t] + theta, with n states and m inputs (constructor keywords n and m)."""

    PARAMS = (
        Quantity("A", 0.0, "-", "state matrix, A[i, j] couples x_j into x_i", shape=("n", "n")),
        Quantity("B", 0.0, "-", "input matrix, B[i, k] couples u_k into x_i", shape=("n", "m")),
        Quantity("theta", 0.0, "-", "constant drive added every step", shape=("n",)),
    )
    STATE = (Quantity("x", 0.0, "-", "the state vector", shape=("n",)),)
    ACTION = (Quantity("u", 0.0, "-", "the input vector", shape=("m",)),)
    DT = 1.0
    STRUCTURE = (Size("n", 2), Size("m", 1))

    @ti.func
    def step(self, s: ti.template()):
        n, m = ti.static(self.n, self.m)
        for i in ti.static(range(n)):
            drive = s.param("theta", i)
            row_a, row_b = s.param("A", i), s.param("B", i)  # rows i of A and B
            for j in ti.static(range(n)):
                drive += row_a[j] * s.state("x", j)
            for k in ti.static(range(m)):
                drive += row_b[k] * s.action("u", k)
            s.advance("x", i, drive)
