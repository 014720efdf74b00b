"""Quaternion rotations (tisim/physics/rotations.py) against closed forms computed here in numpy, and their
hand-written reverses against float64 central differences."""
import numpy as np
import pytest
import taichi as ti

from tisim.physics import rotations

RNG = np.random.default_rng(7)


@ti.kernel
def turn(w: ti.types.vector(3, ti.f64), h: ti.f64) -> ti.types.vector(4, ti.f64):
    return rotations.turn(w, h)


@ti.kernel
def turn_reverse(w: ti.types.vector(3, ti.f64), h: ti.f64,
                 bar: ti.types.vector(4, ti.f64)) -> ti.types.vector(3, ti.f64):
    return rotations.turn_reverse(w, h, bar)


@ti.kernel
def product(a: ti.types.vector(4, ti.f64), b: ti.types.vector(4, ti.f64)) -> ti.types.vector(4, ti.f64):
    return rotations.product(a, b)


@ti.kernel
def product_reverse(a: ti.types.vector(4, ti.f64), b: ti.types.vector(4, ti.f64),
                    bar: ti.types.vector(4, ti.f64)) -> ti.types.matrix(2, 4, ti.f64):
    a_bar, b_bar = rotations.product_reverse(a, b, bar)
    return ti.Matrix.rows([a_bar, b_bar])


@ti.kernel
def axes(q: ti.types.vector(4, ti.f64)) -> ti.types.matrix(3, 3, ti.f64):
    return rotations.axes(q)


@ti.kernel
def axes_reverse(q: ti.types.vector(4, ti.f64), bar: ti.types.matrix(3, 3, ti.f64)) -> ti.types.vector(4, ti.f64):
    return rotations.axes_reverse(q, bar)


def rodrigues(axis, angle):
    """The rotation by `angle` about the unit vector `axis`, from the cross-product matrix."""
    k = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
    return np.eye(3) + np.sin(angle) * k + (1.0 - np.cos(angle)) * k @ k


def central(f, x, bar, step=1e-6):
    """d(bar . f)/dx by central differences."""
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = step
        out[i] = np.sum(bar * (np.asarray(f(x + e)) - np.asarray(f(x - e)))) / (2 * step)
    return out


@pytest.mark.parametrize("size", [0.0, 1e-9, 3.0, 800.0])
def test_a_turn_is_the_axis_angle_quaternion_and_its_reverse_the_derivative(size):
    """The turn by h |w| about w (half-angle form); its reverse within 1e-8 of central differences, at w = 0, where
    the turn's series form applies (h |w| / 2 below 0.1) and where its closed form does (800 rad/s for 1 ms)."""
    h = 1e-3
    w = size * np.array([0.3, -0.8, 0.52]) / np.linalg.norm([0.3, -0.8, 0.52]) if size else np.zeros(3)
    angle = h * size
    axis = w / size if size else np.array([1.0, 0.0, 0.0])
    expected = np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * axis])
    assert np.abs(turn(w, h).to_numpy() - expected).max() <= 1e-15
    for _ in range(3):
        bar = RNG.normal(size=4)
        ours = turn_reverse(w, h, bar).to_numpy()
        reference = central(lambda x: turn(x, h).to_numpy(), w, bar, step=1e-3 if size < 1 else 1e-6 * size)
        assert np.abs(ours - reference).max() <= 1e-8 * max(1.0, np.abs(reference).max()), (ours, reference)


def test_axes_are_the_rotation_of_the_quaternion_of_any_length_and_compose_as_products():
    """axes(turn(w, h)) is Rodrigues' rotation by h |w| about w; scaling q by 2.5 changes nothing; the axes of a
    product are the product of the axes; each is orthonormal with determinant 1."""
    w, h = np.array([1.0, -2.0, 0.5]), 0.4
    q = turn(w, h).to_numpy()
    r = rodrigues(w / np.linalg.norm(w), h * np.linalg.norm(w))
    assert np.abs(axes(q).to_numpy() - r).max() <= 1e-15
    assert np.abs(axes(2.5 * q).to_numpy() - r).max() <= 1e-15
    p = turn(np.array([0.2, 0.9, -1.4]), 0.7).to_numpy()
    composed = axes(product(p, q).to_numpy()).to_numpy()
    assert np.abs(composed - axes(p).to_numpy() @ r).max() <= 1e-15
    assert np.abs(composed.T @ composed - np.eye(3)).max() <= 1e-15 and abs(np.linalg.det(composed) - 1) <= 1e-15


def test_the_products_and_the_axes_reverses_are_their_derivatives():
    a, b, q = RNG.normal(size=4), RNG.normal(size=4), RNG.normal(size=4)
    bar = RNG.normal(size=4)
    a_bar, b_bar = product_reverse(a, b, bar).to_numpy()
    assert np.abs(a_bar - central(lambda x: product(x, b).to_numpy(), a, bar)).max() <= 1e-9
    assert np.abs(b_bar - central(lambda x: product(a, x).to_numpy(), b, bar)).max() <= 1e-9
    bar3 = RNG.normal(size=(3, 3))
    ours = axes_reverse(q, bar3).to_numpy()
    assert np.abs(ours - central(lambda x: axes(x).to_numpy(), q, bar3)).max() <= 1e-8
    # the axes do not change along q: their derivative has no part along it
    assert abs(ours @ q) <= 1e-13
