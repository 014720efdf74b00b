"""Time integrators as pure Taichi functions: (position, velocity, acceleration, dt) -> (position', velocity').

semi_implicit_euler   v' = v + dt a(q, v);  q' = q + dt v'    symplectic: energy error stays bounded
ballistic             q' = q + dt v + dt^2 a / 2;  v' = v + dt a   exact when a is constant (free flight)
advance_semi_implicit_euler(system, x, coordinate, rate, b, t, q, v, a, dt)
                      the same step, added into the next state of a scalar coordinate and its rate, by name
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
def advance_semi_implicit_euler(system: ti.template(), x: ti.template(), coordinate: ti.template(),
                                rate: ti.template(), b, t, q, v, a, dt):
    q_next, v_next = semi_implicit_euler(q, v, a, dt)
    system.advance(x, coordinate, b, t, 0, q_next)
    system.advance(x, rate, b, t, 0, v_next)
