"""Rotations in 3D as quaternions, for bodies that turn: pure Taichi functions, each with its hand-written reverse.

A body's orientation is a quaternion q = (w, x, y, z); the rotation it stands for turns the body's frame into the
world's. Any nonzero q stands for a rotation (axes divides by |q|^2), so the rounding a long run accumulates in |q|
never skews the body.

    turn(omega, h)          the quaternion of a turn by the angle h |omega| about omega, (cos a, sin(a) omega / |omega|)
                            with a = h |omega| / 2: exact for an angular velocity omega held for a time h
    product(a, b)           the Hamilton product a b: first the turn b, then a
    axes(q)                 the rotation matrix of q, its columns the body's axes in the world

A body turning at the world-frame angular velocity omega for a step dt goes from q to turn(omega, dt) q. The
reverses take the derivative of what a function returned and give those of what it took.
"""
import taichi as ti

TINY = 1e-30  # under the square root of |omega|^2: the turn's derivative stays finite at omega = 0


@ti.func
def turn(omega, h):
    size = ti.sqrt(omega.dot(omega) + TINY)
    half = 0.5 * h * size
    along = ti.sin(half) / size
    return ti.Vector([ti.cos(half), along * omega[0], along * omega[1], along * omega[2]])


@ti.func
def turn_reverse(omega, h, q_bar):
    """omega_bar of turn(omega, h) given q_bar. With a = h S / 2 (S = |omega|) and sin(a) / S = (h / 2) sinc(a), the
    derivative of sinc(a) / S along omega is (h / 2)^3 g(a) omega with g(a) = (a cos a - sin a) / a^3, taken from
    its series where the closed form would cancel."""
    size = ti.sqrt(omega.dot(omega) + TINY)
    half = 0.5 * h * size
    along = ti.sin(half) / size
    a2 = half * half
    g = -1.0 / 3.0 + a2 * (1.0 / 30.0 + a2 * (-1.0 / 840.0 + a2 / 45360.0))
    if half >= 0.1:  # the series' next term is below 3e-15 of g under 0.1; above, the closed form keeps 1e-13
        g = (half * ti.cos(half) - ti.sin(half)) / (a2 * half)
    v_bar = ti.Vector([q_bar[1], q_bar[2], q_bar[3]])
    h2 = 0.5 * h
    return along * v_bar + (h2 * h2 * h2 * g * v_bar.dot(omega) - h2 * along * q_bar[0]) * omega


@ti.func
def product(a, b):
    return ti.Vector([a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
                      a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
                      a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
                      a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0]])


@ti.func
def conjugate(q):
    return ti.Vector([q[0], -q[1], -q[2], -q[3]])


@ti.func
def product_reverse(a, b, bar):
    """(a_bar, b_bar) of product(a, b) given bar: the product is linear in each factor, and its matrices' transposes
    are the conjugates' products."""
    return product(bar, conjugate(b)), product(conjugate(a), bar)


@ti.func
def axes(q):
    w, x, y, z = q[0], q[1], q[2], q[3]
    scale = 1.0 / q.dot(q)
    return scale * ti.Matrix([[w * w + x * x - y * y - z * z, 2.0 * (x * y - w * z), 2.0 * (x * z + w * y)],
                              [2.0 * (x * y + w * z), w * w - x * x + y * y - z * z, 2.0 * (y * z - w * x)],
                              [2.0 * (x * z - w * y), 2.0 * (y * z + w * x), w * w - x * x - y * y + z * z]])


@ti.func
def axes_reverse(q, bar):
    """q_bar of axes(q) given bar (3 x 3). Each entry of axes is q^T M_ij q / |q|^2 for a constant symmetric M_ij,
    so q_bar = 2 (K q - (bar : axes) q) / |q|^2 with K = sum_ij bar_ij M_ij, written out below."""
    b = bar
    k = ti.Matrix([[b[0, 0] + b[1, 1] + b[2, 2], b[2, 1] - b[1, 2], b[0, 2] - b[2, 0], b[1, 0] - b[0, 1]],
                   [b[2, 1] - b[1, 2], b[0, 0] - b[1, 1] - b[2, 2], b[0, 1] + b[1, 0], b[0, 2] + b[2, 0]],
                   [b[0, 2] - b[2, 0], b[0, 1] + b[1, 0], b[1, 1] - b[0, 0] - b[2, 2], b[1, 2] + b[2, 1]],
                   [b[1, 0] - b[0, 1], b[0, 2] + b[2, 0], b[1, 2] + b[2, 1], b[2, 2] - b[0, 0] - b[1, 1]]])
    a = axes(q)
    contracted = 0.0
    for i in ti.static(range(3)):
        for j in ti.static(range(3)):
            contracted += b[i, j] * a[i, j]
    return 2.0 / q.dot(q) * (k @ q - contracted * q)
