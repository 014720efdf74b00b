"""Pictures: rasterizer pixels for known shapes and states, frames for every drawn system, GIF files and plots."""
import math

import imageio.v3 as iio
import numpy as np
import pytest

from tisim import plots, systems, viz
from tisim.systems.mass_spring import grid
from tisim.systems.mpm import Tool
from tisim.viz.raster import MARK, ROD

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
    "Shaping": dict(tools=[Tool.sphere([0.3, 0.2], 0.05)]),
    "Sculpting": dict(tools=[Tool.capsule([0.3, 0.25], 0.05, 0.02, axis=1)], tool_angle=[0.5]),
    "Coupled": dict(tools=[Tool.sphere([0.5, 0.3], 0.05)]),
    "Tumbling": dict(tools=[Tool.box([0.5, 0.3], [0.05, 0.02])], tool_angle=[0.3], tool_spin=[2.0]),
    "Manipulation": dict(robot=grid(4, 2, actuate_every_spring=False), tools=[Tool.sphere([0.08, 0.1], 0.03)]),
    "Handling": dict(),
    "Kneading": dict(),
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


@pytest.mark.parametrize("name", sorted(ROLLOUTS))
def test_frames_for_every_system(name):
    """frames() draws a 20-step rollout of each system: T / every + 1 non-blank frames, with the view of the rollout
    (Coupled, Sculpting and Tumbling drawn as Shaping, their ancestor)."""
    assert set(viz.DRAW) <= set(ROLLOUTS)
    sim = getattr(systems, name)(horizon=20, **ROLLOUTS[name])
    traj = sim.rollout()
    pictures = viz.frames(sim, traj, every=5)
    assert len(pictures) == 5
    for picture in pictures:
        assert picture.shape == (240, 320, 3) and picture.dtype == np.uint8
        assert picture.std() > 5
    by_name = viz.frames(name, traj, sim.params, every=5, size=(160, 120))
    assert by_name[0].shape == (120, 160, 3) and by_name[-1].std() > 5
    if name not in ("MassSpring", "Manipulation", "Handling", "Kneading"):  # by name: no springs, no tree
        np.testing.assert_array_equal(viz.frames(name, traj, sim.params, every=5)[-1], pictures[-1])


def test_a_tool_and_a_target_are_drawn():
    """A shaping tool is drawn where it is, a rounded box (a capsule here: its end caps too); a target's points as
    rings around empty centres, in the target's colour."""
    sim = systems.Shaping(horizon=2, tools=[Tool.capsule([0.3, 0.5], 0.05, 0.02, axis=1)])
    traj = sim.rollout()
    state = {k: v[0, -1] for k, v in traj.items()}
    params = {**{k: v[0] for k, v in sim.params.items()}, **sim.sizes}
    images = []
    for target in (np.zeros((0, 2)), np.array([[0.7, 0.6]])):
        canvas = viz.Canvas(*SIZE, bounds=(0.0, 1.0, 0.0, 1.0))
        viz.drawings.draw_shaping(canvas, state, {**params, "target": target})
        images.append(canvas.image().astype(int))
    for point in ([0.3, 0.5], [0.3, 0.565], [0.3, 0.435]):  # the centre and the two caps
        assert pixel(canvas, images[1], point) == ROD, point
    assert pixel(canvas, images[1], [0.3, 0.6]) != ROD  # beyond the cap
    column, row = canvas.to_pixels([0.7, 0.6]).astype(int)
    changed = np.abs(images[1] - images[0]).sum(axis=-1) > 0
    assert changed[row - 3:row + 4, column - 3:column + 4].any() and not changed[row, column]
    assert changed.sum() == changed[row - 4:row + 5, column - 4:column + 5].sum()  # nothing else
    ring = images[1][changed]
    assert np.all(ring[:, 1] > ring[:, 0]) and MARK[1] > MARK[0]  # green over red, as the target's colour


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


def shaded_floor_with_a_ball(count=12, size=(200, 120)):
    """Frames of a small red ball rolling over a floor shaded in 60 levels of beige (most of the picture), as a lit
    3D floor comes out: the ball covers under 2% of each frame."""
    width, height = size
    shade = np.linspace(0.75, 1.0, 60)[np.minimum((np.arange(height) * 60) // height, 59)]
    floor = (np.array(viz.GROUND, float)[None, None, :] * shade[:, None, None]).round().astype(np.uint8)
    pictures = []
    for k in range(count):
        picture = np.broadcast_to(floor, (height, width, 3)).copy()
        rows, cols = np.ogrid[:height, :width]
        picture[(rows - 60) ** 2 + (cols - 20 - 12 * k) ** 2 < 36] = viz.BOB
        pictures.append(picture)
    return pictures


def test_a_small_subject_keeps_its_colour_in_a_16_colour_gif(tmp_path):
    """With 16 colours for a ball over a floor of 60 shades, the GIF keeps the ball red (each of its pixels within
    30 of its colour) where the most frequent colours would all be the floor's, and the frames still differ where it
    rolls: above 0.5% of the pixels change from frame to frame."""
    pictures = shaded_floor_with_a_ball()
    back = iio.imread(viz.save_gif(tmp_path / "ball.gif", pictures, colors=16), index=None)[..., :3].astype(int)
    assert len(back) == len(pictures)  # Pillow merges identical frames: a ball lost to the floor leaves one frame
    ball = np.all(np.stack(pictures) == viz.BOB, axis=-1)
    assert np.abs(back[ball] - viz.BOB).max() <= 30
    changed = np.mean([np.any(back[k] != back[k + 1], axis=-1).mean() for k in range(len(back) - 1)])
    assert changed > 0.005, changed
    floor_error = np.abs(back[~ball] - np.stack(pictures)[~ball]).max()
    assert floor_error < 40, floor_error  # and the floor stays a floor


def test_quantize_reserves_the_colours_it_is_told_to_keep():
    """keep: colours that are in the palette however rare, exactly."""
    pictures = shaded_floor_with_a_ball(count=2)
    pictures[0][0, 0] = (10, 200, 30)  # one pixel
    indices, palette = viz.quantize(pictures, 4, keep=[(10, 200, 30)])
    assert len(palette) <= 4 and tuple(palette[indices[0, 0, 0]]) == (10, 200, 30)


def test_caption_writes_legible_text_in_the_corner_only():
    """caption writes dark text over a pale box at the top left of each picture, the time of each frame after the
    words, and leaves the rest of the picture alone; the input pictures are not changed."""
    pictures = [np.full((60, 240, 3), viz.GROUND, np.uint8) for _ in range(2)]
    out = viz.caption(pictures, "first attempt", times=[0.0, 0.5])
    assert (pictures[0] == viz.GROUND).all()
    corner = out[0][:20, :150].astype(int)
    assert (corner.sum(axis=-1) < 300).sum() > 40  # ink
    assert (out[0][30:] == viz.GROUND).all() and (out[0][:, 200:] == viz.GROUND).all()
    assert (out[0] != out[1]).any()  # "t = 0.00 s" against "t = 0.50 s"
    assert viz.text_mask("t = 0.50 s").shape[0] <= 14


def test_a_mark_is_drawn_where_the_world_puts_it_with_its_label():
    """frames draw a mark (a goal) as a green ring about its centre, its label under it, and dark dots on the
    tracked particles."""
    from tisim.robots import grid
    from tisim.systems.mass_spring import MassSpring
    sim = MassSpring(horizon=2, robot=grid(3, 2))
    bounds, size = (-0.4, 0.6, -0.1, 0.6), (200, 140)
    picture = viz.frames(sim, sim.rollout(), bounds=bounds, size=size, marks=[((0.4, 0.35), 0.06, "goal")],
                         markers=[0])[0].astype(int)
    canvas = viz.Canvas(*size, bounds=bounds)
    r, g, b = picture[..., 0], picture[..., 1], picture[..., 2]
    rows, cols = np.nonzero((g > r + 60) & (g > b + 40))
    column, row = canvas.to_pixels((0.4, 0.35))
    ring = np.hypot(cols + 0.5 - column, rows + 0.5 - row)
    assert (ring < 0.06 * canvas.scale + 2).mean() > 0.6  # most green pixels on the ring ...
    assert ((ring > 0.06 * canvas.scale - 3) & (ring < 0.06 * canvas.scale + 3)).sum() > 20
    assert (rows > row + 0.06 * canvas.scale).sum() > 5  # ... and the label's under it
    dot_col, dot_row = canvas.to_pixels(sim.robot.particles[0, :2]).astype(int)
    assert picture[dot_row, dot_col].sum() < 3 * 60


def test_plots_have_labelled_axes_and_no_text_outside_the_figure(tmp_path):
    """Every panel of plot_history (with a stage marked), plot_states and plot_adjoint has x and y labels, and no
    title, label, tick label or legend reaches outside the figure (matplotlib's own extents of the drawn texts)."""
    from matplotlib.figure import Figure

    figures = []
    real_save = plots._save

    def keep(figure, path, **kwargs):
        figures.append(figure)
        return real_save(figure, path, **kwargs)

    plots._save = keep
    try:
        history = [{"loss": 10.0 * 0.8**k, "grad_norm": 3.0 * 0.9**k} for k in range(20)]
        plots.plot_history(history, tmp_path / "h.png", "a long title for a two-stage optimization of the forces",
                           stages=[(12, "stage 2")])
        traj = {"x": np.random.default_rng(0).normal(size=(2, 31)), "v": np.zeros((2, 31, 2))}
        plots.plot_states(traj, ["x", "v"], 0.01, tmp_path / "s.png", units={"x": "m", "v": "m/s"})
        plots.plot_adjoint({"a rather long state name": np.exp(-np.linspace(0, 3, 31))[None],
                            "v": np.ones((1, 31, 2))}, 0.01, tmp_path / "a.png")
    finally:
        plots._save = real_save
    assert len(figures) == 3
    for figure in figures:
        for axes in figure.axes:
            assert axes.get_xlabel() and axes.get_ylabel(), (axes.get_title(), axes.get_xlabel(), axes.get_ylabel())
        assert plots.text_outside(figure) == []
    texts = [t.get_text() for t in figures[0].axes[0].texts]
    assert "stage 2" in texts
    crowded = Figure(figsize=(2, 1.5))  # the check can fail: a title wider than its figure
    crowded.add_subplot(1, 1, 1).set_title("a title far too long for a figure two inches wide")
    assert plots.text_outside(crowded)


def test_learning_curves_of_five_methods_keep_their_legend_inside():
    """Five methods with names as long as the swing-up benchmark's fit in the legend below the panels."""
    run = {"steps": [0, 1000, 2000], "seconds": [0.0, 1.0, 2.0], "return": [-900.0, -700.0, -600.0]}
    names = ["SHAC, then whole episodes", "SHAC, then L-BFGS on 16 fixed episodes", "SHAC (through the simulator)",
             "PPO (stable-baselines3)", "CEM (weights)"]
    figure = plots.learning_curves_figure({name: [run, run] for name in names}, "a title")
    assert plots.text_outside(figure) == []
    assert [t.get_text() for t in figure.legends[0].get_texts()] == names
    assert plots.text_outside(plots.learning_curves_figure({}, "no methods yet")) == []  # an empty figure, no error
