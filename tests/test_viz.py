"""Pictures: rasterizer pixels for known shapes and states, frames for every drawn system, GIF files and plots."""
import math

import imageio.v3 as iio
import numpy as np
import pytest

from tisim import plots, systems, viz

SIZE = (320, 240)
ROLLOUTS = {  # a short real rollout of every drawn system, from a start that moves
    "Cartpole": dict(theta=3.0),
    "Pendulum": dict(theta=1.0),
    "DoublePendulum": dict(theta1=1.0, theta2=0.5),
    "BouncingBall": dict(vx=1.0, py=0.5),
    "SlidingBlock": dict(v=1.0),
    "Rigid2D": dict(vx=[1.0], py=[0.5]),
    "MassSpring": dict(robot="worm"),
    "MPM": dict(),
}


def pixel(canvas, image, point):
    """The colour of the pixel that holds the world point [m]."""
    column, row = canvas.to_pixels(point).astype(int)
    return tuple(int(c) for c in image[row, column])


def cartpole_picture(x, theta, l=0.5):
    canvas = viz.Canvas(*SIZE, bounds=viz.view_cartpole({"x": np.array([x])}, {"l": l}))
    viz.draw_cartpole(canvas, {"x": x, "theta": theta}, {"l": l})
    return canvas, canvas.image()


def swing(horizon=100):
    """A cart-pole hanging near the bottom, pushed by a sinusoid of 8 N at 0.8 Hz."""
    sim = systems.Cartpole(horizon=horizon, theta=3.0)
    sim.set_actions(8.0 * np.sin(2 * np.pi * 0.8 * sim.dt * np.arange(horizon)))
    return sim, sim.rollout()


def test_canvas_upright_cartpole_pixels():
    """Upright at x = 0: the vertical line above the hinge is pole-coloured up to 2 l, the cart centre is cart-coloured,
    and pixels far left and above the tip are background."""
    canvas, image = cartpole_picture(0.0, 0.0)
    for height in np.linspace(0.05, 0.95, 10):
        assert pixel(canvas, image, (0.0, viz.HINGE_HEIGHT + height)) == viz.POLE
    assert pixel(canvas, image, (0.0, viz.HINGE_HEIGHT + 1.1)) == viz.BACKGROUND
    assert pixel(canvas, image, (0.15, 0.05)) == viz.CART
    assert tuple(image[int(canvas.to_pixels((0.0, 0.8))[1]), 2]) == viz.BACKGROUND
    assert image.dtype == np.uint8 and image.shape == (SIZE[1], SIZE[0], 3)


def test_cartpole_positive_theta_leans_right():
    """theta > 0 puts the pole's middle at (x + l sin theta, h + l cos theta), right of the cart; its mirror, empty."""
    x, theta, l = 0.3, 0.5, 0.5
    canvas, image = cartpole_picture(x, theta, l)
    assert pixel(canvas, image, (x + l * math.sin(theta), viz.HINGE_HEIGHT + l * math.cos(theta))) == viz.POLE
    assert pixel(canvas, image, (x - l * math.sin(theta), viz.HINGE_HEIGHT + l * math.cos(theta))) == viz.BACKGROUND


def test_circle_centre_and_just_outside():
    """A filled disc colours its centre pixel and not a pixel 2 px beyond its rim; an outline leaves the centre."""
    canvas = viz.Canvas(*SIZE, bounds=(-1, 1, -1, 1))
    canvas.circle((0.2, -0.3), 0.25, viz.BALL)
    canvas.circle((-0.5, 0.5), 0.2, viz.BLOCK, filled=False)
    image = canvas.image()
    assert pixel(canvas, image, (0.2, -0.3)) == viz.BALL
    assert pixel(canvas, image, (0.2 + 0.25 + 2 / canvas.scale, -0.3)) == viz.BACKGROUND
    assert pixel(canvas, image, (-0.5, 0.5)) == viz.BACKGROUND
    assert pixel(canvas, image, (-0.5, 0.7)) != viz.BACKGROUND


def test_polygon_and_rotated_rectangle():
    """A non-convex L fills its arms but not its notch; a square turned 45 degrees leaves its old corners empty."""
    canvas = viz.Canvas(*SIZE, bounds=(-1, 1, -1, 1))
    canvas.polygon([(-0.9, -0.9), (-0.1, -0.9), (-0.1, -0.7), (-0.7, -0.7), (-0.7, -0.1), (-0.9, -0.1)], viz.BLOCK)
    canvas.rectangle((0.5, 0.5), (0.6, 0.6), math.pi / 4, viz.CART)
    image = canvas.image()
    assert pixel(canvas, image, (-0.8, -0.3)) == viz.BLOCK
    assert pixel(canvas, image, (-0.3, -0.8)) == viz.BLOCK
    assert pixel(canvas, image, (-0.4, -0.4)) == viz.BACKGROUND
    assert pixel(canvas, image, (0.5, 0.5)) == viz.CART
    assert pixel(canvas, image, (0.5 + 0.38, 0.5)) == viz.CART  # a tip of the diamond, 0.3 sqrt(2) = 0.42 out
    assert pixel(canvas, image, (0.78, 0.78)) == viz.BACKGROUND  # the unturned square's corner


def test_pendulum_angle_from_downward_vertical():
    """theta = pi / 2 puts the bob at (l, 0); ground fills below y = 0 in the ball's picture."""
    canvas = viz.Canvas(*SIZE, bounds=viz.view_pendulum({}, {"l": 1.0}))
    viz.draw_pendulum(canvas, {"theta": math.pi / 2}, {"l": 1.0})
    image = canvas.image()
    assert pixel(canvas, image, (1.0, 0.0)) == viz.BOB
    assert pixel(canvas, image, (0.0, -1.0)) == viz.BACKGROUND
    canvas = viz.Canvas(*SIZE, bounds=(-1, 1, -0.5, 1.5))
    viz.draw_bouncing_ball(canvas, {"px": 0.0, "py": 1.0}, {"r": 0.1})
    image = canvas.image()
    assert pixel(canvas, image, (0.5, -0.2)) == viz.GROUND and pixel(canvas, image, (0.0, 1.0)) == viz.BALL


@pytest.mark.parametrize("name", sorted(viz.DRAW))
def test_frames_for_every_system(name):
    """frames() draws a 20-step rollout of each system: T / every + 1 non-blank frames, with the view of the rollout."""
    sim = getattr(systems, name)(horizon=20, **ROLLOUTS[name])
    traj = sim.rollout()
    pictures = viz.frames(sim, traj, every=5)
    assert len(pictures) == 5
    for picture in pictures:
        assert picture.shape == (240, 320, 3) and picture.dtype == np.uint8
        assert picture.std() > 5
    by_name = viz.frames(name, traj, sim.params, every=5, size=(160, 120))
    assert by_name[0].shape == (120, 160, 3) and by_name[-1].std() > 5
    if name != "MassSpring":  # by name, a mass-spring picture has no springs: they are structure, not parameters
        np.testing.assert_array_equal(viz.frames(name, traj, sim.params, every=5)[-1], pictures[-1])


def test_frames_by_name_fills_declared_defaults_and_rejects_unknown():
    """An explicit name with partial params uses the declared defaults for the rest; an unknown name lists DRAW."""
    traj = {"theta": np.zeros((1, 3)), "theta_dot": np.zeros((1, 3))}
    assert len(viz.frames("Pendulum", traj, {"l": 2.0})) == 3
    with pytest.raises(ValueError, match="Perhaps you meant 'Cartpole'"):
        viz.frames("CartPole", traj, {})
    with pytest.raises(ValueError, match="batch_index"):
        viz.frames("Pendulum", traj, {}, batch_index=1)


def test_save_gif_cartpole_swing(tmp_path):
    """A 101-frame cart-pole swing is written as a looping GIF under 300 kB that reads back frame for frame with at
    most 64 colours; max_frames keeps 30 evenly spaced frames."""
    sim, traj = swing()
    pictures = viz.frames(sim, traj)
    path = viz.save_gif(tmp_path / "new" / "swing.gif", pictures)
    back = iio.imread(path, index=None)
    assert back.shape[:3] == (101, 240, 320)
    assert all(frame.std() > 5 for frame in back)
    rgb = back[..., :3].astype(np.int32)
    assert len(np.unique((rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2])) <= 64
    assert path.stat().st_size < 300_000
    assert np.abs(back[..., :3].astype(int) - np.stack(pictures)).mean() < 1.0
    short = iio.imread(viz.save_gif(tmp_path / "short.gif", pictures, max_frames=30, colors=16), index=None)
    assert short.shape[0] == 30


def test_side_by_side_pads_the_shorter_sequence():
    """Pairs are (Ha, Wa + gap + Wb) wide; the shorter list repeats its last frame."""
    a = [np.full((10, 6, 3), k, np.uint8) for k in range(3)]
    b = [np.full((8, 5, 3), 100 + k, np.uint8) for k in range(5)]
    pairs = viz.side_by_side(a, b, gap=2)
    assert len(pairs) == 5 and pairs[0].shape == (10, 13, 3)
    assert pairs[4][0, 0, 0] == 2 and pairs[4][0, 12, 0] == 104 and tuple(pairs[4][9, 12]) == viz.BACKGROUND


def test_plots_write_png_files(tmp_path):
    """plot_history, plot_states and plot_adjoint each create their folder and write a non-empty PNG."""
    history = [{"loss": 10.0 * 0.8**k, "grad_norm": 3.0 * 0.9**k} for k in range(20)]
    traj = {"x": np.random.default_rng(0).normal(size=(2, 31)), "v": np.zeros((2, 31, 2))}
    paths = [plots.plot_history(history, tmp_path / "a" / "history.png", "descent"),
             plots.plot_states(traj, ["x", "v"], 0.01, tmp_path / "b" / "states.png", batch_index=1),
             plots.plot_adjoint({"x": np.exp(-np.linspace(0, 3, 31))[None], "v": np.ones((1, 31, 2))}, 0.01,
                              tmp_path / "c" / "adjoint.png")]
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_a_2d_body_is_drawn_with_its_obstacles():
    """A 2D mass-spring body's picture shows its disc and its box in the ground colour where they are, and the
    bare background between them."""
    from tisim.robots import grid
    from tisim.systems.mass_spring import MassSpring
    sim = MassSpring(horizon=2, robot=grid(3, 2), spheres=[((0.3, 0.3), 0.05)], boxes=[((-0.2, 0.3), (0.05, 0.05))])
    picture = viz.frames(sim, sim.rollout(), bounds=(-0.4, 0.5, -0.1, 0.6), size=(180, 140))[0]
    canvas = viz.Canvas(180, 140, bounds=(-0.4, 0.5, -0.1, 0.6))
    (disc_col, disc_row), (box_col, box_row), (gap_col, gap_row) = canvas.to_pixels(
        np.array([[0.3, 0.3], [-0.2, 0.3], [0.05, 0.5]])).astype(int)
    assert tuple(picture[disc_row, disc_col]) == viz.GROUND and tuple(picture[box_row, box_col]) == viz.GROUND
    assert tuple(picture[gap_row, gap_col]) == viz.BACKGROUND
