"""A disc bouncing on a floor (the line y = 0), in 2D.

contact="penalty" (default): a spring-damper normal force on the penetration d = r - y, with the damping derived from
    the coefficient of restitution, plus regularized Coulomb friction; semi-implicit Euler.
        fn = penalty_normal(d, vy, k, c(e, k, m), softness),   ft = -mu fn tanh(vx / eps)
        (ft clipped to |ft| <= m |vx| / dt, friction_clip_to_stop: the contact force makes the friction stiff)
        m vx' = ft,   m vy' = fn - m g
    The penetration stays below about v_impact sqrt(m / k) (the undamped spring's amplitude). The bounce's
    restitution is slightly above e, since the contact never pulls (0.808 for e = 0.8; see tisim.physics.contact).
contact="impact": rigid contact; exact ballistic flight and, within the step, the time of impact and the impact map
    vy+ = -e vy- (restitution_toi). Friction is not modelled in this mode.
contact="qp": rigid contact as a convex problem at the velocity level (tisim.physics.complementarity): from the
contact-free
    velocities v* = v + dt a, each step solves for the normal and friction impulses per unit mass
        w_n >= 0,  vy* + w_n >= b,  complementary (or w_n s = kappa),   |w_t| <= mu w_n, maximal dissipation,
        b = -gap / dt (gap = py - r: the disc ends the step at or above the floor), or, for an impact (the free
        flight touches the floor within the step, at time tau, at a speed above |ay| dt / e), b = the velocity at the
        step's end of the rebound -e v(tau) from the floor (the exact time of impact, as contact="impact"). Slower
        impacts are inelastic, so that a disc settles on the floor instead of hopping on it forever;
    then v = v* + w, and p = p + dt v, or after a bounce the rebound's flight from the floor: a bounce lands where
    the exact rebound would, whichever step it falls in, and the gradient sees the time of impact, not the step's
    quantization. The disc never enters the floor, rests on it without sag or drift (a resting disc floats
    kappa / g above it when kappa > 0), stops sliding exactly (Coulomb stick) and bounces with e. The
    friction impulse is found by Newton steps and differentiated through its optimality condition
    (solver_gradient="implicit", the default) or through the steps (solver_gradient="unrolled").
Non-smooth parts: the contact switch (softened by softness > 0 in penalty mode, by kappa > 0 in qp mode) and the
impact time (in qp mode also the stick-slip switch at kappa = 0, and the speed below which an impact is inelastic).
"""
import numpy as np
import taichi as ti

from tisim.core.engine import System
from tisim.core.quantities import Quantity
from tisim.physics.complementarity import NEWTON_STEPS, friction_impulse, normal_impulse
from tisim.physics.contact import (
    friction_clip_to_stop,
    friction_coulomb_tanh,
    penalty_normal,
    restitution_damping,
    restitution_toi,
)
from tisim.physics.integrators import semi_implicit_euler


class BouncingBall(System):
    """A disc of radius r over the floor y = 0, under gravity; the action is a force on the disc."""

    PARAMS = (
        Quantity("g", 9.8, "m/s^2", "gravitational acceleration", bounds="[0, inf)"),
        Quantity("m", 1.0, "kg", "disc mass", bounds="(0, inf)"),
        Quantity("r", 0.1, "m", "disc radius", bounds="[0, inf)"),
        Quantity("e", 0.8, "-", "coefficient of restitution", bounds="[0, 1]"),
        Quantity("k", 1e5, "N/m", "contact stiffness (penalty mode)", bounds="(0, inf)"),
        Quantity("softness", 0.0, "m", "softplus length of the contact activation; 0 = hard switch", bounds="[0, inf)"),
        Quantity("mu", 0.5, "-", "Coulomb coefficient with the floor (penalty mode)", bounds="[0, inf)"),
        Quantity("eps", 0.01, "m/s", "velocity scale of the regularized friction law", bounds="(0, inf)"),
        Quantity("kappa", 0.0, "m^2/s^2", "central-path parameter of qp contact: impulse x slack per unit mass; 0 = "
                 "exact complementarity", bounds="[0, inf)"),
    )
    STATE = (
        Quantity("px", 0.0, "m", "horizontal position of the centre"),
        Quantity("py", 1.0, "m", "height of the centre above the floor"),
        Quantity("vx", 0.0, "m/s", "horizontal velocity"),
        Quantity("vy", 0.0, "m/s", "vertical velocity"),
    )
    ACTION = (Quantity("force", 0.0, "N", "external force on the disc (x, y)", shape=(2,)),)
    OPTIONS = {"contact": ("penalty", "impact", "qp"), "solver_gradient": ("implicit", "unrolled")}
    DT = 1e-3

    @ti.func
    def step(self, s: ti.template()):
        dt = s.dt
        m, g, r = s.param("m"), s.param("g"), s.param("r")
        px, py = s.state("px"), s.state("py")
        vx, vy = s.state("vx"), s.state("vy")
        force = s.action("force")
        ax, ay = force[0] / m, force[1] / m - g
        px_next, py_next, vx_next, vy_next = 0.0, 0.0, 0.0, 0.0
        if ti.static(self.contact == "penalty"):
            k, e = s.param("k"), s.param("e")
            fn = penalty_normal(r - py, vy, k, restitution_damping(e, k, m), s.param("softness"))
            ft = friction_clip_to_stop(friction_coulomb_tanh(vx, fn, s.param("mu"), s.param("eps")), vx, m, dt)
            px_next, vx_next = semi_implicit_euler(px, vx, ax + ft / m, dt)
            py_next, vy_next = semi_implicit_euler(py, vy, ay + fn / m, dt)
        elif ti.static(self.contact == "qp"):
            vx_free, vy_free, gap = vx + dt * ax, vy + dt * ay, py - r
            e, kappa = s.param("e"), s.param("kappa")
            # the free flight's first touch at time tau in the step (the stable root of gap + vy tau + ay tau^2 / 2)
            q = vy * vy - 2.0 * ay * gap
            den = -vy + ti.sqrt(ti.max(q, 0.0))
            tau = ti.min(2.0 * gap / ti.max(den, 1e-30), dt)
            impact = gap >= 0.0 and q >= 0.0 and den > 0.0 and 2.0 * gap < dt * den and e * -vy > ti.abs(ay) * dt
            v_hit = vy + ay * tau
            rebound = -e * v_hit + ay * (dt - tau)  # the normal velocity at the step's end after a bounce at tau
            target = ti.select(impact, rebound, -gap / dt)
            wn = normal_impulse(vy_free - target, kappa)
            wt = friction_impulse(vx_free, s.param("mu") * wn, kappa, NEWTON_STEPS,
                                  ti.static(self.solver_gradient == "implicit"))
            vx_next, vy_next = vx_free + wt, vy_free + wn
            px_next = px + dt * vx_next
            # after a bounce, the rebound's own flight from the floor (plus what kappa adds to the velocity)
            flight = r - e * v_hit * (dt - tau) + 0.5 * ay * (dt - tau) ** 2 + dt * (vy_next - target)
            py_next = ti.select(impact, flight, py + dt * vy_next)
        else:
            px_next, vx_next = px + dt * vx + 0.5 * dt * dt * ax, vx + dt * ax
            bottom, vy_next = restitution_toi(py - r, vy, ay, s.param("e"), dt)
            py_next = bottom + r
        s.advance("px", 0, px_next)
        s.advance("py", 0, py_next)
        s.advance("vx", 0, vx_next)
        s.advance("vy", 0, vy_next)

    def events(self, traj):
        """"contact": the disc touches or penetrates the floor (py <= r); in qp mode, within the step's reach of it
        (py - r <= |vy| dt, where a bounce is resolved)."""
        reach = np.abs(traj["vy"]) * self.dt if self.contact == "qp" else 0.0
        return {"contact": traj["py"] - self.params["r"][:, None] <= reach}
