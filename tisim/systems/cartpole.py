"""Cart-pole: a pole hinged on a cart that a horizontal force pushes along a track.

The classic equations (Barto, Sutton and Anderson 1983, as in Gymnasium's CartPole), with a continuous force F and an
optional Coulomb friction on the cart (regularized with tanh; mu_cart = 0 by default):
    M = m_cart + m_pole,  F' = F - mu_cart M g tanh(x_dot / eps)   (friction clipped to |.| <= M |x_dot| / dt)
    temp = (F' + m_pole l theta_dot^2 sin(theta)) / M
    theta'' = (g sin(theta) - cos(theta) temp) / (l (4/3 - m_pole cos^2(theta) / M))
    x'' = temp - m_pole l theta'' cos(theta) / M
theta is measured from upright (0 balanced, pi hanging); l is the distance from the hinge to the pole's centre of mass
(half the pole length). Semi-implicit Euler, velocities first, then positions (Gymnasium's 'semi-implicit euler').
With the defaults (dt = 0.02, eps = 0.01) the friction is stiff for mu_cart > ~0.1: unclipped, a cart at rest would
jitter with growing amplitude; clipped (friction_clip_to_stop), it stays at rest. The clip is a property of the
time step, so ``rates`` (the equations in continuous time, for the continuous adjoint) leaves it out.
"""
import taichi as ti

from tisim.core.engine import System
from tisim.core.quantities import Quantity
from tisim.physics.contact import friction_clip_to_stop, friction_coulomb_tanh
from tisim.physics.integrators import advance_semi_implicit_euler


class Cartpole(System):
    """A cart on a frictionless (or Coulomb) track carrying a hinged pole; the action is the force on the cart."""

    PARAMS = (
        Quantity("g", 9.8, "m/s^2", "gravitational acceleration", bounds="[0, inf)"),
        Quantity("m_cart", 1.0, "kg", "cart mass", bounds="(0, inf)"),
        Quantity("m_pole", 0.1, "kg", "pole mass", bounds="(0, inf)"),
        Quantity("l", 0.5, "m", "hinge to the pole's centre of mass (half the pole length)", bounds="(0, inf)"),
        Quantity("mu_cart", 0.0, "-", "Coulomb coefficient between cart and track", bounds="[0, inf)"),
        Quantity("eps", 0.01, "m/s", "velocity scale of the regularized friction law", bounds="(0, inf)"),
    )
    STATE = (
        Quantity("x", 0.0, "m", "cart position"),
        Quantity("x_dot", 0.0, "m/s", "cart velocity"),
        Quantity("theta", 0.0, "rad", "pole angle from upright (0 balanced, pi hanging)"),
        Quantity("theta_dot", 0.0, "rad/s", "pole angular velocity"),
    )
    ACTION = (Quantity("force", 0.0, "N", "horizontal force on the cart"),)
    DT = 0.02

    @staticmethod
    @ti.func
    def cartpole_accelerations(theta, theta_dot, push, g, m_cart, m_pole, l):
        # push: the net horizontal force on the cart, the action plus the track's friction
        total = m_cart + m_pole
        sin, cos = ti.sin(theta), ti.cos(theta)
        temp = (push + m_pole * l * theta_dot * theta_dot * sin) / total
        theta_acc = (g * sin - cos * temp) / (l * (4.0 / 3.0 - m_pole * cos * cos / total))
        return temp - m_pole * l * theta_acc * cos / total, theta_acc

    @ti.func
    def step(self, s: ti.template()):
        m_cart, m_pole, g = s.param("m_cart"), s.param("m_pole"), s.param("g")
        cart, cart_v = s.state("x"), s.state("x_dot")
        angle, angle_v = s.state("theta"), s.state("theta_dot")
        total = m_cart + m_pole
        friction = friction_coulomb_tanh(cart_v, total * g, s.param("mu_cart"), s.param("eps"))
        push = s.action("force") + friction_clip_to_stop(friction, cart_v, total, s.dt)
        x_acc, theta_acc = self.cartpole_accelerations(angle, angle_v, push, g, m_cart, m_pole, s.param("l"))
        advance_semi_implicit_euler(s, "x", "x_dot", cart, cart_v, x_acc)
        advance_semi_implicit_euler(s, "theta", "theta_dot", angle, angle_v, theta_acc)

    @ti.func
    def rates(self, s: ti.template()):
        m_cart, m_pole, g = s.param("m_cart"), s.param("m_pole"), s.param("g")
        cart_v, angle_v = s.state("x_dot"), s.state("theta_dot")
        total = m_cart + m_pole
        push = s.action("force") + friction_coulomb_tanh(cart_v, total * g, s.param("mu_cart"), s.param("eps"))
        x_acc, theta_acc = self.cartpole_accelerations(s.state("theta"), angle_v, push, g, m_cart, m_pole,
                                                       s.param("l"))
        s.add_rate("x", 0, cart_v)
        s.add_rate("x_dot", 0, x_acc)
        s.add_rate("theta", 0, angle_v)
        s.add_rate("theta_dot", 0, theta_acc)
