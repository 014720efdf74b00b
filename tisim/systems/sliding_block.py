"""A block sliding on a floor, pushed by a horizontal force, with one of three friction laws.

    m v' = F + f_friction,   normal force m g
friction="tanh" (default):  f = -mu m g tanh(v / eps)
friction="huber":           f = -mu m g clamp(v / eps, -1, 1)
friction="stick_slip":      static coefficient mu_s and kinetic mu (mu <= mu_s): the block stays exactly at rest while
                            |F| <= mu_s m g, and slides against -mu m g sign(v) otherwise (friction_stick_slip).
friction="qp":              Coulomb friction as the convex problem of tisim.physics.complementarity: the friction
impulse per
                            unit mass w minimizes (v* + w)^2 / 2 over |w| <= mu g dt (v* = v + dt F / m), exactly
                            (kappa = 0: stick while |F| <= mu m g, else slide against mu m g) or on the interior-point
                            central path (kappa > 0: smooth); differentiated through its optimality condition
                            (solver_gradient="implicit", default) or through the Newton steps ("unrolled").
Semi-implicit Euler; the regularized laws are clipped so that friction at most stops the block within a step
(friction_clip_to_stop; it binds only when dt mu g / eps > 1). The regularized laws creep (v ~ eps F / (mu m g)) under
a sub-threshold push; stick-slip does not, and its gradient is piecewise: zero with respect to the push while stuck.
"""
import numpy as np
import taichi as ti

from tisim.core.engine import System
from tisim.core.quantities import Quantity
from tisim.physics.complementarity import NEWTON_STEPS, friction_impulse
from tisim.physics.contact import (
    friction_clip_to_stop,
    friction_coulomb_huber,
    friction_coulomb_tanh,
    friction_stick_slip,
)
from tisim.physics.integrators import semi_implicit_euler

REGULARIZED = {"tanh": friction_coulomb_tanh, "huber": friction_coulomb_huber}


class SlidingBlock(System):
    """A block of mass m on a floor; the action is the horizontal push."""

    PARAMS = (
        Quantity("g", 9.8, "m/s^2", "gravitational acceleration", bounds="[0, inf)"),
        Quantity("m", 1.0, "kg", "block mass", bounds="(0, inf)"),
        Quantity("mu", 0.3, "-", "kinetic Coulomb coefficient", bounds="[0, inf)"),
        Quantity("mu_s", 0.5, "-", "static Coulomb coefficient (stick_slip only; keep mu <= mu_s)", bounds="[0, inf)"),
        Quantity("eps", 0.01, "m/s", "velocity scale of the regularized friction laws", bounds="(0, inf)"),
        Quantity("kappa", 0.0, "m^2/s^2", "central-path parameter of qp friction: impulse x slack per unit mass; 0 = "
                 "exact Coulomb", bounds="[0, inf)"),
    )
    STATE = (
        Quantity("x", 0.0, "m", "position along the floor"),
        Quantity("v", 0.0, "m/s", "velocity"),
    )
    ACTION = (Quantity("force", 0.0, "N", "horizontal push"),)
    OPTIONS = {"friction": ("tanh", "huber", "stick_slip", "qp"), "solver_gradient": ("implicit", "unrolled")}
    DT = 1e-3

    @ti.func
    def step(self, s: ti.template()):
        dt = s.dt
        m, g, mu = s.param("m"), s.param("g"), s.param("mu")
        pos, v = s.state("x"), s.state("v")
        fn = m * g
        f = s.action("force")
        if ti.static(self.friction == "qp"):
            v_free = v + dt * f / m
            w = friction_impulse(v_free, mu * g * dt, s.param("kappa"), NEWTON_STEPS,
                                 ti.static(self.solver_gradient == "implicit"))
            f += m * w / dt  # the impulse as the force that delivers it over the step
        elif ti.static(self.friction == "stick_slip"):
            f += friction_stick_slip(v + dt * f / m, fn, s.param("mu_s"), mu, m, dt)
        else:
            law = ti.static(REGULARIZED[self.friction])
            f += friction_clip_to_stop(law(v, fn, mu, s.param("eps")), v, m, dt)
        pos_next, v_next = semi_implicit_euler(pos, v, f / m, dt)
        s.advance("x", 0, pos_next)
        s.advance("v", 0, v_next)

    def events(self, traj):
        """"sliding": |v| > 0 (stick_slip, qp: exactly at rest otherwise) or |v| > eps (the regularized laws' band)."""
        band = 0.0 if self.friction in ("stick_slip", "qp") else self.params["eps"][:, None]
        return {"sliding": np.abs(traj["v"]) > band}
