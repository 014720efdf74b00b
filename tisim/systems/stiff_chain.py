"""A chain of point masses hanging on stiff hardening springs, stepped by implicit Euler with a Newton solve.

Mass i (i = 0..n-1) hangs from mass i-1 by spring i; spring 0 hangs from a fixed anchor. x_i is mass i's downward
displacement from where every spring is at its rest length (x_{-1} = 0 is the anchor; down is positive), so
    e_i = x_i - x_{i-1}                                        extension of spring i
    T_i = k_i (e_i + beta e_i^3) + damping (v_i - v_{i-1})     its tension (hardening for beta > 0); T_n = 0
    m v_i' = m g + force_i - T_i + T_{i+1}                      =: F_i(x, v)

integrator="implicit_euler" (default): w = v[t+1] solves
    r(w) = m (w - v) - dt F(x + dt w, w) = 0,        x[t+1] = x + dt w,
by `newton_steps` Newton steps from w = v. The Jacobian J = m I + dt^2 K + dt C (K: tangent stiffness at x + dt w,
C: damping) is tridiagonal and positive definite, solved by the Thomas algorithm. The potential is convex for
beta >= 0, so without external forces implicit Euler never raises the energy: it is stable at any dt.
integrator="semi_implicit_euler": v' = v + dt F(x, v) / m, x' = x + dt v'. Stable only while dt omega_max < 2; at the
defaults omega_max is about 570 rad/s, so DT = 0.01 s is about 3x past the limit and the chain blows up.

solver_gradient: how reverse mode gets through the Newton solve.
  "unrolled": through every Newton step, as computed: the exact derivative of the map the iterations compute.
  "implicit": by the implicit function theorem. The next velocity is defined by the equation r(w, p) = 0 (p: the
    state, the parameters and the force), not by the steps that happen to find it. Differentiating r(w(p), p) = 0
    gives dw/dp = -J^{-1} dr/dp, which needs nothing but the partial derivatives of the residual at the solution:
    it is the derivative of the exact solution, whatever the number of steps or the starting guess. Here every
    Newton step but the last runs with its result detached, and the last step w = w_K - J^{-1} r(w_K, p) is taken
    with J's entries detached too. Its value is one more Newton step; its derivative is -J^{-1} dr/dp evaluated at
    w_K, so it is exact up to the residual r(w_K) that the earlier steps leave. Once Newton has converged the two
    options agree to round-off; with too few steps they differ, and then "unrolled" is the one that matches finite
    differences of what was computed (tests/test_stiff_chain.py and demos/implicit_step.py measure both).
    In general the implicit route also frees the solver from being differentiable at all; here it does not. The
    iterations still sit in the kernel that Taichi differentiates, so they must stay free of while loops (Taichi's
    reverse mode refuses one even when its result is detached: measured), their reverse code is still compiled and
    run, and both options cost the same time. `detach` is tisim.autodiff.implicit's.
"""
import numpy as np
import taichi as ti

from tisim.autodiff.implicit import detach
from tisim.core.engine import System
from tisim.core.model import check_run
from tisim.core.quantities import Quantity, Size, sizes_of

# The step is unrolled over the masses and the Newton steps at compile time, and the backward pass's compile time
# grows faster than the chain (about fourfold from n = 3 to n = 6, and again to n = 12): hence the cap.
N_MAX = 8
NEWTON_STEPS = 6  # the default: converged to round-off on the default chain (tests/test_stiff_chain.py)


@ti.func
def let(value):
    """value bound to a variable of its own (a function's result is)."""
    return value


class StiffChain(System):
    """n masses on hardening springs below a fixed anchor (constructor keywords n and newton_steps); the action is a
    downward force on each mass."""

    PARAMS = (
        Quantity("g", 9.8, "m/s^2", "gravitational acceleration (downward, along +x)", bounds="[0, inf)"),
        Quantity("m", 1.0, "kg", "mass of each point mass", bounds="(0, inf)"),
        Quantity("k", 1e5, "N/m", "linear stiffness of each spring", shape=("n",), bounds="(0, inf)"),
        Quantity("beta", 1e3, "1/m^2", "hardening of every spring: tension k (e + beta e^3)", bounds="[0, inf)"),
        Quantity("damping", 10.0, "N s/m", "viscous damping along each spring", bounds="[0, inf)"),
    )
    STATE = (
        Quantity("x", 0.0, "m", "downward displacement of each mass from where every spring is at rest length",
                 shape=("n",)),
        Quantity("v", 0.0, "m/s", "downward velocity of each mass", shape=("n",)),
    )
    ACTION = (Quantity("force", 0.0, "N", "downward external force on each mass", shape=("n",)),)
    STRUCTURE = (Size("n", 3, minimum=1), Size("newton_steps", NEWTON_STEPS))
    OPTIONS = {"integrator": ("implicit_euler", "semi_implicit_euler"), "solver_gradient": ("implicit", "unrolled")}
    DT = 0.01

    def __init__(self, horizon, batch=1, dt=None, **values):
        check_run("StiffChain", horizon, batch, dt)
        n = values.get("n", sizes_of(StiffChain)["n"].default)
        if isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n > N_MAX:
            raise ValueError(f"StiffChain: n must be <= {N_MAX} (the step is unrolled over the masses at compile "
                             f"time), got {n}")
        super().__init__(horizon, batch, dt, **values)

    # The step is unrolled over the masses and the Newton steps with ti.static; there is no dynamic loop inside it.
    # Vectors are built from Python lists of per-mass expressions rather than written element by element: reverse mode
    # warned "Loading variable before anything is stored to it" on element stores into local vectors. An expression
    # used more than once is bound to its own variable first (`let`), or Taichi would rebuild it at every use.
    @ti.func
    def states(self, s: ti.template(), name: ti.template()):
        """State `name` of every mass at step t, as one vector."""
        return ti.Vector([s.state(name, i) for i in ti.static(range(self.n))])

    @ti.func
    def differences(self, y):
        """y_i - y_{i-1}, with y_{-1} = 0 (the anchor): spring extensions from displacements, rates from velocities."""
        d = [y[0]] * self.n
        for i in ti.static(range(1, self.n)):
            d[i] = y[i] - y[i - 1]
        return ti.Vector(d)

    @ti.func
    def with_next(self, own, y):
        """own_i + y_{i+1}, with y_n = 0: what spring i+1 adds to mass i."""
        out = [own[self.n - 1]] * self.n
        for i in ti.static(range(self.n - 1)):
            out[i] = own[i] + y[i + 1]
        return ti.Vector(out)

    @ti.func
    def force(self, x, v, f, m, g, k, beta, c):
        """F(x, v): the net downward force on each mass (spring i pulls mass i up, spring i+1 pulls it down)."""
        e = self.differences(x)
        tension = k * (e + beta * e * e * e) + c * self.differences(v)
        return self.with_next(f + m * g - tension, tension)

    @ti.func
    def residual(self, w, x, v, f, m, g, k, beta, c, dt):
        return m * (w - v) - dt * self.force(x + dt * w, w, f, m, g, k, beta, c)

    @ti.func
    def coupling(self, w, x, k, beta, c, dt):
        """Spring i's entry of J = dr/dw: J[i, i-1] = J[i-1, i] = -coupling_i; J[i, i] = m + coupling_i +
        coupling_{i+1}."""
        e = self.differences(x + dt * w)
        return dt * dt * k * (1.0 + 3.0 * beta * e * e) + dt * c

    @ti.func
    def solve(self, m, coupling, rhs):
        """J^{-1} rhs by the Thomas algorithm (J is symmetric positive definite: no pivoting needed)."""
        n = ti.static(self.n)
        diagonal = self.with_next(m + coupling, coupling)
        pivot, upper, y = [diagonal[0]] * n, [0.0] * n, [0.0] * n  # the eliminated diagonal, super-diagonal, rhs
        y[0] = let(rhs[0] / pivot[0])
        for i in ti.static(range(1, n)):
            upper[i - 1] = let(-coupling[i] / pivot[i - 1])
            pivot[i] = let(diagonal[i] + coupling[i] * upper[i - 1])
            y[i] = let((rhs[i] + coupling[i] * y[i - 1]) / pivot[i])
        for i in ti.static(range(n - 2, -1, -1)):
            y[i] = let(y[i] - upper[i] * y[i + 1])
        return ti.Vector(y)

    @ti.func
    def newton_step(self, w, q, v, f, m, g, k, beta, c, dt):
        return w - self.solve(m, self.coupling(w, q, k, beta, c, dt), self.residual(w, q, v, f, m, g, k, beta, c, dt))

    @ti.func
    def implicit_step(self, w, q, v, f, m, g, k, beta, c, dt):
        """The last Newton step from w, with w and J's entries constants: value w - J^{-1} r(w, p), derivative
        -J^{-1} dr/dp."""
        start = detach(w)
        coupling = detach(self.coupling(start, q, k, beta, c, dt))
        return start - self.solve(detach(m), coupling, self.residual(start, q, v, f, m, g, k, beta, c, dt))

    @ti.func
    def implicit_euler(self, q, v, f, m, g, k, beta, c, dt):
        iterates = [v] * self.newton_steps  # w_0 = v; each Newton step's result is bound by the function call
        for s in ti.static(range(self.newton_steps - 1)):
            iterates[s + 1] = self.newton_step(iterates[s], q, v, f, m, g, k, beta, c, dt)
        last_step = ti.static(self.implicit_step if self.solver_gradient == "implicit" else self.newton_step)
        return last_step(iterates[self.newton_steps - 1], q, v, f, m, g, k, beta, c, dt)

    @ti.func
    def semi_implicit_euler(self, q, v, f, m, g, k, beta, c, dt):
        return v + dt * self.force(q, v, f, m, g, k, beta, c) / m

    @ti.func
    def step(self, s: ti.template()):
        dt = s.dt
        m, g = s.param("m"), s.param("g")
        beta, c = s.param("beta"), s.param("damping")
        k = ti.Vector([s.param("k", i) for i in ti.static(range(self.n))])
        f = ti.Vector([s.action("force", i) for i in ti.static(range(self.n))])
        q, v = self.states(s, "x"), self.states(s, "v")
        w = ti.static(getattr(self, self.integrator))(q, v, f, m, g, k, beta, c, dt)  # the next velocity
        q_next = q + dt * w
        for i in ti.static(range(self.n)):
            s.advance("x", i, q_next[i])
            s.advance("v", i, w[i])


def energy(sim, traj):
    """Kinetic + spring + gravity potential energy [J], shape (B, T+1), of a rollout without external forces."""
    p = sim.params
    x, v = traj["x"], traj["v"]
    e = np.diff(x, axis=-1, prepend=0.0)
    k, beta, m, g = p["k"][:, None, :], p["beta"][:, None, None], p["m"][:, None, None], p["g"][:, None, None]
    springs = (k * (e**2 / 2 + beta * e**4 / 4)).sum(-1)
    return (0.5 * m * v**2).sum(-1) + springs - (m * g * x).sum(-1)
