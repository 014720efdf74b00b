"""3D pictures through GGUI's scene, off screen: known scenes checked by their pixels, rollouts as frames, a clean
exit, and a clear message where there is no Vulkan."""
import subprocess
import sys

import numpy as np
import pytest

from tisim import scene, viz
from tisim.gui import WindowUnavailable, window_problem
from tisim.systems.mpm import MPM, Body

VULKAN = window_problem(offscreen=True)
needs_vulkan = pytest.mark.skipif(VULKAN is not None, reason=f"GGUI cannot render here: {VULKAN}")
RED = (0.9, 0.1, 0.1)


def red_pixels(picture):
    """(rows, cols) of the pixels where red clearly dominates."""
    r, g, b = (picture[..., k].astype(int) for k in range(3))
    return np.nonzero((r > g + 60) & (r > b + 60))


@needs_vulkan
def test_a_sphere_appears_where_the_camera_projects_it():
    """Seen from +z, looking at the cube's centre with y up: a red sphere at the centre covers the middle of the
    picture and leaves the corners white; moved left (-x) or up (+y) in the world, it moves left or up on the
    picture."""
    with scene.Scene((160, 120)) as view:
        view.look(from_=(0.5, 0.5, 2.0), at=(0.5, 0.5, 0.5))
        centred = view.render([[0.5, 0.5, 0.5]], RED, radius=0.1)
        left = view.render([[0.3, 0.5, 0.5]], RED, radius=0.1)
        up = view.render([[0.5, 0.7, 0.5]], RED, radius=0.1)
    assert view.window is None  # closed
    assert centred.shape == (120, 160, 3) and centred.dtype == np.uint8
    rows, cols = red_pixels(centred)
    assert len(rows) > 100 and abs(rows.mean() - 60) < 3 and abs(cols.mean() - 80) < 3
    assert (centred[0, 0] == 255).all() and (centred[-1, -1] == 255).all()
    rows, cols = red_pixels(left)
    assert cols.mean() < 70 and abs(rows.mean() - 60) < 3
    rows, cols = red_pixels(up)
    assert rows.mean() < 50 and abs(cols.mean() - 80) < 3


@needs_vulkan
def test_the_floor_fills_the_lower_picture():
    """The unit square's floor seen from above it: the bottom of the picture takes the floor's colour, its top (rays
    passing beyond the square) stays white."""
    with scene.Scene((160, 120)) as view:
        view.look(from_=(0.5, 0.6, 0.9), at=(0.5, 0.1, 0.3))
        picture = view.render([[0.5, 5.0, 0.5]], RED, radius=0.01, floor=0.1)  # the sphere far out of sight
    assert (picture[0, 80] == 255).all() and not (picture[-1, 80] == 255).all()
    assert not len(red_pixels(picture)[0])


@needs_vulkan
def test_the_floor_survives_a_nan_left_in_ggui_instance_memory():
    """GGUI 1.7.4 draws a plain mesh with the model matrix I (1 - 0) + M 0, M read from an instance buffer it never
    fills: after a drawing that left NaN there, a plain mesh vanished (the floor missing from CI's pictures). A frame
    drawn straight through GGUI with a NaN instance transform puts the NaN there; the scene's next picture still
    shows its floor, and so does the one after."""
    import taichi as ti
    with scene.Scene((160, 120)) as view:
        view.look(from_=(0.5, 0.6, 0.9), at=(0.5, 0.1, 0.3))
        nan = ti.Matrix.field(4, 4, ti.f32, 1)
        corners, point = ti.Vector.field(3, ti.f32, 6), ti.Vector.field(3, ti.f32, 1)
        nan.from_numpy(np.full((1, 4, 4), np.nan, np.float32))
        corners.from_numpy(np.array([[0, 0.1, 0], [1, 0.1, 0], [1, 0.1, 1]] * 2, np.float32))
        point.from_numpy(np.array([[0.5, 5.0, 0.5]], np.float32))
        poisoned = view.window.get_scene()  # laid out as the scene lays out a picture: a mesh, then its points
        poisoned.set_camera(view.camera)
        poisoned.point_light(pos=(1.5, 3.0, 2.5), color=(0.9, 0.9, 0.9))
        poisoned.mesh_instance(corners, normals=corners, transforms=nan)
        poisoned.particles(point, radius=0.01)
        view.window.get_canvas().scene(poisoned)
        view.window.get_image_buffer_as_numpy()
        pictures = [view.render([[0.5, 5.0, 0.5]], RED, radius=0.01, floor=0.1) for _ in range(2)]
    for picture in pictures:
        assert (picture[0, 80] == 255).all() and not (picture[-1, 80] == 255).all()


@needs_vulkan
def test_a_3d_rollout_becomes_frames_for_a_gif(tmp_path):
    """viz.frames pictures a 3D MPM body through the scene: one frame per `every` steps, and the falling body
    changes the picture; save_gif takes them as it takes 2D frames."""
    body = Body.box([0.4, 0.4, 0.4], [0.6, 0.6, 0.6], 1 / 16)
    sim = MPM(horizon=60, body=body, n_grid=16, dt=1e-3)
    frames = viz.frames(sim, sim.rollout(), every=30, size=(96, 72))
    assert len(frames) == 3 and frames[0].shape == (72, 96, 3)
    assert np.abs(frames[0].astype(int) - frames[-1].astype(int)).sum() > 1000
    path = viz.save_gif(tmp_path / "fall.gif", frames, fps=10)
    assert path.stat().st_size > 500


def seen_from_the_front(**things):
    """A picture of `things` (Scene.render's keywords) seen from +z, the scene's points out of sight. One scene per
    picture: GGUI reuses its drawings by call order, and after a picture with spheres and boxes, one with only a
    mesh came out blank (Taichi 1.7.4)."""
    with scene.Scene((160, 120)) as view:
        view.look(from_=(0.5, 0.5, 2.0), at=(0.5, 0.5, 0.5))
        return view.render([[0.5, 5.0, 0.5]], RED, **things).astype(int)


@needs_vulkan
def test_obstacles_a_mesh_and_lines_appear_where_they_are():
    """Seen from +z: an obstacle sphere on the left and a box on the right darken the picture there, level with
    the middle, and leave the middle white; a triangle (a cloth) above the middle takes a blue tint there; a
    spring line below the middle darkens a long horizontal run of pixels."""
    obstacles = seen_from_the_front(spheres=[((0.25, 0.5, 0.5), 0.1)], boxes=[((0.75, 0.5, 0.5), (0.08,) * 3)])
    rows, cols = np.nonzero(obstacles.sum(axis=-1) < 700)
    left, right = cols < 80, cols >= 80
    assert left.sum() > 100 and right.sum() > 100
    assert cols[left].mean() < 65 and cols[right].mean() > 95
    assert abs(rows[left].mean() - 60) < 3 and abs(rows[right].mean() - 60) < 3
    assert (obstacles[60, 80] == 255).all() and (obstacles[5, 5] == 255).all()
    cloth = seen_from_the_front(mesh=([[0.3, 0.7, 0.5], [0.7, 0.7, 0.5], [0.5, 0.9, 0.5]], [[0, 1, 2]]))
    # the blue tint holds lit or not: on one CI machine the point light added nothing to the mesh (ambient only,
    # (31, 49, 71) against (83, 131, 191) here), for a reason inside GGUI or the driver that was not found
    rows, cols = np.nonzero(cloth[..., 2] > cloth[..., 0] + 25)
    assert len(rows) > 100 and rows.mean() < 50 and abs(cols.mean() - 80) < 3, f"triangle centre: {cloth[35, 80]}"
    lines = seen_from_the_front(segments=[[[0.2, 0.3, 0.5], [0.8, 0.3, 0.5]]])
    rows, cols = np.nonzero(lines.sum(axis=-1) < 600)
    assert len(rows) > 40 and rows.mean() > 65 and np.ptp(rows) <= 2 and np.ptp(cols) > 40


@needs_vulkan
def test_a_3d_cloth_becomes_frames():
    """viz.frames pictures a 3D mass-spring cloth with an obstacle through the scene, and the falling cloth
    changes the picture."""
    from tisim.robots import cloth
    from tisim.systems.mass_spring import MassSpring
    sim = MassSpring(horizon=200, robot=cloth(6, 6, spacing=0.04, origin=(0.4, 0.5, 0.4), flat=True, pin="none"),
                     spheres=[((0.5, 0.2, 0.5), 0.1)])
    frames = viz.frames(sim, sim.rollout(), every=100, size=(96, 72))
    assert len(frames) == 3 and frames[0].shape == (72, 96, 3)
    assert np.abs(frames[0].astype(int) - frames[-1].astype(int)).sum() > 1000


@needs_vulkan
def test_one_scene_at_a_time():
    """A second scene while one is open is refused with the reason (closing the second aborted the process when
    the first drew again); once the first is closed, another opens."""
    with scene.Scene((64, 48)):
        with pytest.raises(RuntimeError, match="another scene is open; close it first"):
            scene.Scene((64, 48))
    with scene.Scene((64, 48)) as again:
        assert again.render([[0.5, 0.5, 0.5]]).shape == (48, 64, 3)


def test_without_vulkan_the_scene_says_what_to_install(monkeypatch):
    monkeypatch.setattr(scene, "window_problem", lambda offscreen: "no Vulkan loader: install libvulkan1")
    with pytest.raises(WindowUnavailable, match="3D pictures need GGUI: no Vulkan loader: install libvulkan1"):
        scene.Scene((64, 48))


@pytest.mark.parametrize("make, message", [
    (lambda: scene.Scene((8, 48)), r"size must be \(width, height\) of at least 16 pixels"),
])
def test_bad_scene_input(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@needs_vulkan
def test_bad_points_are_refused_by_shape():
    with scene.Scene((64, 48)) as view, pytest.raises(ValueError, match=r"points must have shape \(n, 3\)"):
        view.render(np.zeros((3, 2)))



@needs_vulkan
def test_the_process_exits_cleanly_after_scenes_and_a_restart(tmp_path):
    """Scenes made before and after a runtime restart, then the interpreter exits with status 0. A GGUI window
    or field kept in a module until the exit made it crash there (status 139 after every test had passed)."""
    script = tmp_path / "scenes.py"
    script.write_text("import numpy as np, tisim\nfrom tisim.scene import Scene\n"
                      "for precision in ('f64', 'f32'):\n"
                      "    tisim.init(precision=precision)\n"
                      "    with Scene((64, 48)) as view:\n"
                      "        view.render(np.full((3, 3), 0.5))\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]


def test_project_agrees_with_gguis_camera_matrices():
    """scene.project puts a world point where GGUI's own view and projection matrices put it (its camera: 45 degree
    vertical field of view, y up), for a camera off every axis; no Vulkan needed."""
    import taichi as ti

    eye, at, size = np.array([1.3, 0.8, 1.9]), np.array([0.4, 0.1, 0.45]), (320, 200)
    camera = ti.ui.Camera()
    camera.position(*eye)
    camera.lookat(*at)
    camera.up(0.0, 1.0, 0.0)
    view, projection = np.array(camera.get_view_matrix()), np.array(camera.get_projection_matrix(320 / 200))
    points = np.array([[0.4, 0.1, 0.45], [0.0, 0.0, 0.0], [0.9, 0.5, 0.2], [0.2, 0.6, 0.8]])
    clip = np.c_[points, np.ones(len(points))] @ view @ projection  # row vectors, as GGUI stores them
    ndc = clip[:, :2] / clip[:, 3:]
    expected = np.c_[(ndc[:, 0] + 1) * 0.5 * size[0], (1 - ndc[:, 1]) * 0.5 * size[1]]
    pixels, depth = scene.project(points, eye, at, size)
    np.testing.assert_allclose(pixels, expected, atol=0.05)
    assert (depth > 0).all()


def test_fit_camera_frames_the_box_tightly():
    """fit_camera keeps the eight corners of a long low box inside the picture, and close: the box spans at least
    80% of the picture along its tighter axis and its height at least a quarter of the picture's."""
    low, high, size = np.array([0.1, 0.0, 0.45]), np.array([0.6, 0.1, 0.55]), (400, 150)
    eye, at = scene.fit_camera(low, high, size, (0.35, 0.5, 1.0))
    corners = np.array([[(low, high)[(k >> i) & 1][i] for i in range(3)] for k in range(8)])
    pixels, depth = scene.project(corners, eye, at, size)
    assert (depth > 0).all()
    assert (pixels >= 0).all() and (pixels[:, 0] <= size[0]).all() and (pixels[:, 1] <= size[1]).all()
    spread = np.ptp(pixels, axis=0) / size
    assert spread.max() > 0.8, spread
    assert spread[1] > 0.25, spread


@needs_vulkan
def test_a_disc_and_markers_appear_where_the_camera_projects_them():
    """A green disc lying on the floor and a dark marker land on the picture where scene.project says, within two
    pixels, seen from above and to the side."""
    with scene.Scene((200, 150)) as view:
        view.look(from_=(1.1, 0.9, 1.6), at=(0.5, 0.0, 0.5))
        picture = view.render([[0.5, 5.0, 0.5]], RED, floor=0.0, discs=[((0.3, 0.0, 0.6), 0.06)],
                              markers=[[0.7, 0.2, 0.4]], marker_radius=0.03).astype(int)
        disc, marker = view.project([[0.3, 0.0, 0.6], [0.7, 0.2, 0.4]])
    r, g, b = picture[..., 0], picture[..., 1], picture[..., 2]
    rows, cols = np.nonzero((g > r + 40) & (g > b + 40))
    assert len(rows) > 30 and abs(cols.mean() - disc[0]) < 2 and abs(rows.mean() - disc[1]) < 2
    rows, cols = np.nonzero(picture.sum(axis=-1) < 150)
    assert len(rows) > 20 and abs(cols.mean() - marker[0]) < 2 and abs(rows.mean() - marker[1]) < 2


@needs_vulkan
def test_a_3d_rollout_is_framed_and_captioned_with_its_target():
    """frames of a 3D body frame it (its points span more than a quarter of the picture's height), write the
    caption at the top left and draw a mark's disc where the camera projects it."""
    body = Body.box([0.4, 0.4, 0.4], [0.6, 0.6, 0.6], 1 / 16)  # the body and grid above: kernels compiled once
    sim = MPM(horizon=60, body=body, n_grid=16, dt=1e-3)
    traj = sim.rollout()
    marks = [((0.75, 3.0 / 16, 0.5), 0.05, "")]
    pictures = viz.frames(sim, traj, every=30, size=(160, 120), caption="jelly", marks=marks)
    eye, at = viz.look_at_rollout({k: v[0] for k, v in traj.items()}, {"n_grid": 16}, (160, 120), marks,
                                  band=viz.CAPTION_BAND)
    blue = (pictures[0][..., 2].astype(int) > pictures[0][..., 0].astype(int) + 40)
    rows = np.nonzero(blue.any(axis=1))[0]
    assert np.ptp(rows) > 120 / 4, np.ptp(rows)
    assert (pictures[0][3:15, 4:40].sum(axis=-1) < 300).sum() > 15  # dark caption pixels in the corner
    picture = pictures[-1].astype(int)
    r, g, b = picture[..., 0], picture[..., 1], picture[..., 2]
    rows, cols = np.nonzero((g > r + 40) & (g > b + 40))
    (column, row), _ = scene.project(marks[0][0], eye, at, (160, 120))
    assert len(rows) > 10 and abs(cols.mean() - column) < 2 and abs(rows.mean() - row) < 2
