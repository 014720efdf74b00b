"""MPM's material laws (tisim/systems/mpm/system.py): the Kirchhoff stress tau(F) of each material for the shear modulus
G and the Lame parameter lambda, the projections of a fluid and of von Mises plasticity, and the hand-written reverse
of each, which the backward pass runs in place of Taichi's reverse mode of the stress phase.

A reverse takes the derivative of what its function returned (tau_bar, or F_bar for a projection) and returns the
derivatives of the function's inputs, as the chain rule of the code as written: the polar decomposition's reverse
goes back through the same Newton steps, not through the exact polar decomposition's derivative, so that the two
agree to rounding (tests/test_mpm.py compares them with Taichi's reverse mode to 1e-12).
"""
import taichi as ti

POLAR_ITERATIONS = 6  # scaled Newton steps of the polar decomposition (materials "corotated" and "von_mises")


@ti.func
def newton_step(R: ti.template()):
    """One step of Newton's iteration for the rotation of R's polar decomposition, with Frobenius-norm scaling
    (Higham): (g R + R^-T / g) / 2, g = sqrt(|R^-1| / |R|)."""
    inverse = R.inverse()
    g = ti.sqrt(inverse.norm() / R.norm())
    return 0.5 * (g * R + inverse.transpose() / g)


@ti.func
def newton_step_reverse(R: ti.template(), out_bar):
    """R_bar of newton_step(R), given the derivative out_bar of its result."""
    inverse = R.inverse()
    inverse_norm, norm = inverse.norm(), R.norm()
    g = ti.sqrt(inverse_norm / norm)
    inverse_bar = (0.5 / g) * out_bar.transpose()
    g_bar = 0.5 * ((out_bar * R).sum() - (out_bar * inverse.transpose()).sum() / (g * g))
    # g = sqrt(|R^-1| / |R|): dg = g / 2 (d|R^-1| / |R^-1| - d|R| / |R|)
    inverse_bar += (0.5 * g * g_bar / (inverse_norm * inverse_norm)) * inverse
    R_bar = 0.5 * g * out_bar - (0.5 * g * g_bar / (norm * norm)) * R
    # d(R^-1) = -R^-1 dR R^-1
    return R_bar - inverse.transpose() @ inverse_bar @ inverse.transpose()


@ti.func
def polar_rotation(F: ti.template()):
    """R of the polar decomposition F = R S, by POLAR_ITERATIONS Newton steps from R = F. The same code in 2D and 3D:
    a fixed count of steps, which brings principal stretches between 1/100 and 100 to rounding (measured in numpy
    against scipy.linalg.polar: 6 steps, 5e-13)."""
    R = F
    for _ in ti.static(range(POLAR_ITERATIONS)):
        R = newton_step(R)
    return R


@ti.func
def polar_rotation_reverse(F: ti.template(), R_bar, steps: ti.template() = POLAR_ITERATIONS):
    """F_bar of `steps` Newton steps from F (polar_rotation(F) for the default), given R_bar: the last steps'
    reverse first, unrolled at compile time, each step's start computed once on the way in."""
    result = R_bar
    if ti.static(steps > 0):
        result = newton_step_reverse(F, polar_rotation_reverse(newton_step(F), R_bar, steps - 1))
    return result


@ti.func
def left_stretch(F: ti.template()):
    """(R, the mean of V, the deviator of V, its length) for the polar decomposition F = V R; the 1e-30 keeps the
    length's derivative finite at V = I."""
    R = polar_rotation(F)
    V = F @ R.transpose()
    V = 0.5 * (V + V.transpose())
    mean = V.trace() / F.n
    deviator = V - mean * ti.Matrix.identity(float, F.n)
    return R, mean, deviator, ti.sqrt((deviator * deviator).sum() + 1e-30)


@ti.func
def von_mises_return(F: ti.template(), limit):
    """F with its left stretch V (F = V R) brought back onto the von Mises yield surface where it lies outside: the
    deviatoric part of V, the small-strain deviatoric strain, shrunk to the length `limit`, R and the mean stretch
    kept (radial return, perfectly plastic)."""
    R, mean, deviator, length = left_stretch(F)
    return (mean * ti.Matrix.identity(float, F.n) + ti.min(1.0, limit / length) * deviator) @ R


@ti.func
def von_mises_return_reverse(F: ti.template(), limit, out_bar):
    """(F_bar, limit_bar) of von_mises_return(F, limit), given out_bar."""
    R, mean, deviator, length = left_stretch(F)
    identity = ti.Matrix.identity(float, F.n)
    shrinks = ti.select(limit / length < 1.0, 1.0, 0.0)
    scale = ti.min(1.0, limit / length)
    kept_bar = out_bar @ R.transpose()  # of mean I + scale deviator
    R_bar = (mean * identity + scale * deviator).transpose() @ out_bar
    scale_bar = (kept_bar * deviator).sum()
    limit_bar = shrinks * scale_bar / length
    length_bar = -shrinks * scale_bar * limit / (length * length)
    deviator_bar = scale * kept_bar + (length_bar / length) * deviator
    mean_bar = kept_bar.trace() - deviator_bar.trace()
    V_bar = deviator_bar + (mean_bar / F.n) * identity
    V_bar = 0.5 * (V_bar + V_bar.transpose())  # of F R^T, before its symmetric part was taken
    R_bar += V_bar.transpose() @ F
    return V_bar @ R + polar_rotation_reverse(F, R_bar), limit_bar


@ti.func
def fluid_projection(F: ti.template()):
    """What a fluid keeps of F: its volume change, J^(1/d) I."""
    return ti.pow(F.determinant(), 1.0 / F.n) * ti.Matrix.identity(float, F.n)


@ti.func
def fluid_projection_reverse(F: ti.template(), out_bar):
    J = F.determinant()
    # d(J^(1/d)) = J^(1/d) / (d J) dJ, and dJ = J F^-T : dF
    return (out_bar.trace() * ti.pow(J, 1.0 / F.n) / F.n) * F.inverse().transpose()


# The laws. Each reverse returns (F_bar, G_bar, lambda_bar) for the derivative M = tau_bar of the stress.
@ti.func
def neo_hookean(F: ti.template(), G, la):
    identity = ti.Matrix.identity(float, F.n)
    return G * (F @ F.transpose() - identity) + la * ti.log(F.determinant()) * identity


@ti.func
def neo_hookean_reverse(F: ti.template(), G, la, M):
    identity = ti.Matrix.identity(float, F.n)
    F_bar = G * (M + M.transpose()) @ F + (la * M.trace()) * F.inverse().transpose()
    return F_bar, (M * (F @ F.transpose() - identity)).sum(), ti.log(F.determinant()) * M.trace()


@ti.func
def corotated(F: ti.template(), G, la):
    J = F.determinant()
    return 2.0 * G * (F - polar_rotation(F)) @ F.transpose() + la * J * (J - 1.0) * ti.Matrix.identity(float, F.n)


@ti.func
def corotated_reverse(F: ti.template(), G, la, M):
    J, R = F.determinant(), polar_rotation(F)
    F_bar = 2.0 * G * (M @ F + M.transpose() @ (F - R)) \
        + (la * M.trace() * (2.0 * J - 1.0) * J) * F.inverse().transpose() \
        + polar_rotation_reverse(F, -2.0 * G * M @ F)
    return F_bar, 2.0 * (M * ((F - R) @ F.transpose())).sum(), J * (J - 1.0) * M.trace()


@ti.func
def fluid(F: ti.template(), G, la):
    """No shear stress; the bulk modulus of the solid with the same E and nu, K = lambda + 2 G / d."""
    J = F.determinant()
    return (la + 2.0 * G / F.n) * J * (J - 1.0) * ti.Matrix.identity(float, F.n)


@ti.func
def fluid_reverse(F: ti.template(), G, la, M):
    J = F.determinant()
    K_bar = M.trace() * J * (J - 1.0)
    J_bar = M.trace() * (la + 2.0 * G / F.n) * (2.0 * J - 1.0)
    return (J_bar * J) * F.inverse().transpose(), K_bar * 2.0 / F.n, K_bar


MATERIALS = {"neo_hookean": (neo_hookean, neo_hookean_reverse), "corotated": (corotated, corotated_reverse),
             "fluid": (fluid, fluid_reverse), "von_mises": (corotated, corotated_reverse)}
