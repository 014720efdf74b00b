"""Pendulums: a point mass on a massless rod, and two of them chained.

Pendulum (angle from the downward vertical, torque tau at the pivot):
    theta'' = -(g / l) sin(theta) - c theta' / (m l^2) + tau / (m l^2)
DoublePendulum (both angles from the downward vertical, point masses m1, m2 on rods l1, l2; joint torques tau):
    the Lagrangian equations of motion solved for (theta1'', theta2'') as a 2x2 linear system; see
    ``DoublePendulum.accelerations``. tau1 acts at the pivot (on the upper rod, against the ground); tau2 at the
    elbow acts on the lower rod and, in reaction, on the upper one: the generalized forces on the absolute angles are
    (tau1 - tau2, tau2), so the elbow torque alone leaves the total angular momentum about the pivot unchanged.
Both are stepped with semi-implicit Euler (symplectic: with c = 0 the energy error stays bounded); ``rates`` gives the
same equations in continuous time, for the continuous adjoint (tisim/autodiff/continuous_adjoint.py). The dynamics are
smooth; the double pendulum is chaotic, so its sensitivities grow exponentially with the horizon.
"""
import taichi as ti

from tisim.core.engine import System
from tisim.core.quantities import Quantity
from tisim.physics.integrators import advance_semi_implicit_euler


class Pendulum(System):
    """A damped pendulum driven by a pivot torque."""

    PARAMS = (
        Quantity("g", 9.8, "m/s^2", "gravitational acceleration", bounds="[0, inf)"),
        Quantity("l", 1.0, "m", "rod length, pivot to bob", bounds="(0, inf)"),
        Quantity("m", 1.0, "kg", "bob mass", bounds="(0, inf)"),
        Quantity("c", 0.0, "N m s", "viscous damping at the pivot", bounds="[0, inf)"),
    )
    STATE = (
        Quantity("theta", 0.0, "rad", "angle from the downward vertical"),
        Quantity("theta_dot", 0.0, "rad/s", "angular velocity"),
    )
    ACTION = (Quantity("tau", 0.0, "N m", "torque at the pivot"),)
    DT = 0.01

    @ti.func
    def angular_acceleration(self, s: ti.template()):
        """theta'' where the step (or the ODE's rates) reads the state: gravity, the torque and damping, plus the
        learned term."""
        q, w = s.state("theta"), s.state("theta_dot")
        l, m = s.param("l"), s.param("m")
        return -(s.param("g") / l) * ti.sin(q) + (s.action("tau") - s.param("c") * w) / (m * l * l) \
            + self.learned_acceleration(s, q, w)

    @ti.func
    def learned_acceleration(self, s: ti.template(), q, w):
        """A learned correction to theta'' (none here; ResidualPendulum adds a network)."""
        return 0.0

    @ti.func
    def step(self, s: ti.template()):
        advance_semi_implicit_euler(s, "theta", "theta_dot", s.state("theta"), s.state("theta_dot"),
                                    self.angular_acceleration(s))

    @ti.func
    def rates(self, s: ti.template()):
        s.add_rate("theta", 0, s.state("theta_dot"))
        s.add_rate("theta_dot", 0, self.angular_acceleration(s))


class DoublePendulum(System):
    """Two point masses on two rods, the second hung from the first; torques at both joints."""

    PARAMS = (
        Quantity("g", 9.8, "m/s^2", "gravitational acceleration", bounds="[0, inf)"),
        Quantity("l1", 1.0, "m", "upper rod length", bounds="(0, inf)"),
        Quantity("l2", 1.0, "m", "lower rod length", bounds="(0, inf)"),
        Quantity("m1", 1.0, "kg", "upper bob mass", bounds="(0, inf)"),
        Quantity("m2", 1.0, "kg", "lower bob mass", bounds="(0, inf)"),
    )
    STATE = (
        Quantity("theta1", 0.0, "rad", "upper rod angle from the downward vertical"),
        Quantity("theta2", 0.0, "rad", "lower rod angle from the downward vertical"),
        Quantity("theta1_dot", 0.0, "rad/s", "upper angular velocity"),
        Quantity("theta2_dot", 0.0, "rad/s", "lower angular velocity"),
    )
    ACTION = (Quantity("tau", 0.0, "N m", "joint torques (upper, lower)", shape=(2,)),)
    DT = 0.001

    @ti.func
    def accelerations(self, s: ti.template()):
        """(theta1'', theta2'') where the step (or the ODE's rates) reads the state. M(q) [q1'', q2''] = rhs, from
        the Lagrangian of two point masses, solved by Cramer's rule. The elbow torque tau2 turns the lower rod and
        reacts on the upper one, hence tau1 - tau2 in the first row."""
        q1, q2, w1, w2 = s.state("theta1"), s.state("theta2"), s.state("theta1_dot"), s.state("theta2_dot")
        g, l1, l2, m1, m2 = s.param("g"), s.param("l1"), s.param("l2"), s.param("m1"), s.param("m2")
        tau = s.action("tau")
        delta = q1 - q2
        m11, m12, m22 = (m1 + m2) * l1 * l1, m2 * l1 * l2 * ti.cos(delta), m2 * l2 * l2
        r1 = -m2 * l1 * l2 * w2 * w2 * ti.sin(delta) - (m1 + m2) * g * l1 * ti.sin(q1) + tau[0] - tau[1]
        r2 = m2 * l1 * l2 * w1 * w1 * ti.sin(delta) - m2 * g * l2 * ti.sin(q2) + tau[1]
        det = m11 * m22 - m12 * m12
        return (r1 * m22 - r2 * m12) / det, (m11 * r2 - m12 * r1) / det

    @ti.func
    def step(self, s: ti.template()):
        a1, a2 = self.accelerations(s)
        advance_semi_implicit_euler(s, "theta1", "theta1_dot", s.state("theta1"), s.state("theta1_dot"), a1)
        advance_semi_implicit_euler(s, "theta2", "theta2_dot", s.state("theta2"), s.state("theta2_dot"), a2)

    @ti.func
    def rates(self, s: ti.template()):
        a1, a2 = self.accelerations(s)
        s.add_rate("theta1", 0, s.state("theta1_dot"))
        s.add_rate("theta2", 0, s.state("theta2_dot"))
        s.add_rate("theta1_dot", 0, a1)
        s.add_rate("theta2_dot", 0, a2)
