"""Time integrators as pure Taichi functions: (position, velocity, acceleration, dt) -> (position', velocity').

semi_implicit_euler   v' = v + dt a(q, v);  q' = q + dt v'    symplectic: energy error stays bounded
ballistic             q' = q + dt v + dt^2 a / 2;  v' = v + dt a   exact when a is constant (free flight)
advance_semi_implicit_euler(s, coordinate, rate, q, v, a)
                      the same step over s.dt, added into the next state of a scalar coordinate and its rate, by
                      name, through the step context s (tisim/core/access.py)
"""
import taichi as ti


@ti.func
def semi_implicit_euler(q, v, a, dt):
    v_next = v + dt * a
    return q + dt * v_next, v_next


@ti.func
def ballistic(q, v, a, dt):
    return q + dt * v + 0.5 * dt * dt * a, v + dt * a


@ti.func
def advance_semi_implicit_euler(s: ti.template(), coordinate: ti.template(), rate: ti.template(), q, v, a):
    q_next, v_next = semi_implicit_euler(q, v, a, s.dt)
    s.advance(coordinate, 0, q_next)
    s.advance(rate, 0, v_next)
