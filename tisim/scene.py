"""3D pictures: Taichi's GGUI scene (Vulkan), lit spheres for points and triangles for the floor, rendered off
screen into uint8 images (H, W, 3) like the 2D drawings of tisim.viz, or shown in a window.

Off screen, no display is needed, only a Vulkan driver: on Debian, libvulkan1 and mesa-vulkan-drivers (lavapipe, a
software renderer; .ci/run installs them). Where there is none, ``Scene`` raises WindowUnavailable saying what to
install. A scene owns its GGUI window and the fields GGUI reads: close it (or use it as a context manager) when done.
Nothing outlives it: a window or a field held in a module until the interpreter exits crashed the exit (a segfault
after the test suite had passed, when Taichi's program was already gone).

    with Scene((480, 360)) as scene:
        scene.look(from_=(1.6, 1.0, 2.2), at=(0.5, 0.2, 0.5))
        picture = scene.render(points, colors, radius=0.005, floor=0.09)
"""
import numpy as np
import taichi as ti

from tisim import runtime
from tisim.gui import WindowUnavailable, window_problem


class Scene:
    """A camera and a light over the unit cube; ``render`` paints points (and a floor) and returns the picture."""

    def __init__(self, size=(480, 360), *, offscreen=True, title="tisim"):
        if len(size) != 2 or min(size) < 16:
            raise ValueError(f"Scene: size must be (width, height) of at least 16 pixels, got {size!r}")
        self.size, self.offscreen = tuple(int(s) for s in size), offscreen
        problem = window_problem(offscreen)
        if problem:
            raise WindowUnavailable(f"3D pictures need GGUI: {problem}")
        runtime.ensure_init()
        try:
            self.window = ti.ui.Window(title, self.size, vsync=False, show_window=not offscreen)
        except Exception as error:  # GGUI reports a missing Vulkan device as a generic error
            raise WindowUnavailable(f"3D pictures: GGUI could not start ({error}); install libvulkan1 and "
                                    "mesa-vulkan-drivers") from None
        self.camera = ti.ui.Camera()
        self._fields, self._trees = {}, []
        self.look()

    def close(self):
        """Destroy the window and the fields (idempotent)."""
        for tree in self._trees:
            tree.destroy()
        self._fields, self._trees = {}, []
        if self.window is not None:
            self.window.destroy()
            self.window = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _field(self, kind, values):
        """A float32 field of 3-vectors holding values (n, 3), one per (kind, n), kept for the next picture."""
        key = (kind, len(values))
        if key not in self._fields:
            builder = ti.FieldsBuilder()
            field = ti.Vector.field(3, ti.f32)
            builder.dense(ti.i, len(values)).place(field)
            self._trees.append(builder.finalize())
            self._fields[key] = field
        self._fields[key].from_numpy(np.ascontiguousarray(values, dtype=np.float32))
        return self._fields[key]

    def look(self, from_=(1.2, 0.75, 1.75), at=(0.5, 0.15, 0.5)):
        """Put the camera at from_, looking at at, y up (the default sees the unit square's floor from the front
        right)."""
        self.camera.position(*map(float, from_))
        self.camera.lookat(*map(float, at))
        self.camera.up(0.0, 1.0, 0.0)
        return self

    def render(self, points, colors=(0.78, 0.24, 0.2), radius=0.005, floor=None):
        """The picture, uint8 (H, W, 3), of spheres at points (n, 3) [m] with colors (n, 3) or one RGB in [0, 1],
        over the unit square's floor at height `floor` [m] (none if None)."""
        points = np.asarray(points, dtype=np.float64)
        if points.ndim != 2 or points.shape[1] != 3 or not len(points):
            raise ValueError(f"Scene.render: points must have shape (n, 3), got {points.shape}")
        colors = np.broadcast_to(np.asarray(colors, dtype=np.float64), points.shape)
        scene = self.window.get_scene()
        scene.set_camera(self.camera)
        scene.ambient_light((0.35, 0.35, 0.35))
        scene.point_light(pos=(1.5, 3.0, 2.5), color=(0.9, 0.9, 0.9))
        if floor is not None:
            corners = np.array([[0.0, floor, 0.0], [1.0, floor, 0.0], [1.0, floor, 1.0], [0.0, floor, 1.0]])
            up = np.tile([0.0, 1.0, 0.0], (6, 1))  # given, not left to GGUI's normals kernel (it warns on a cast)
            scene.mesh(self._field("floor", corners[[0, 1, 2, 0, 2, 3]]), normals=self._field("up", up),
                       color=(0.88, 0.85, 0.78), two_sided=True)
        scene.particles(self._field("points", points), radius=float(radius),
                        per_vertex_color=self._field("colors", colors))
        canvas = self.window.get_canvas()
        canvas.set_background_color((1.0, 1.0, 1.0))
        canvas.scene(scene)
        ti.set_logging_level(ti.WARN)  # GGUI logs every buffer it dumps at info level
        buffer = self.window.get_image_buffer_as_numpy()  # (W, H, 4), floats in [0, 1], y up
        if not self.offscreen:
            self.window.show()
        return (np.transpose(buffer[:, ::-1, :3], (1, 0, 2)) * 255).round().astype(np.uint8)
