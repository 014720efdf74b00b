"""3D pictures: Taichi's GGUI scene (Vulkan): lit spheres for points and obstacles, lines for springs, lit
triangles for a cloth, boxes and the floor, rendered off screen into uint8 images (H, W, 3) like the 2D drawings of
tisim.viz, or shown in a window.

Off screen, no display is needed, only a Vulkan driver: on Debian, libvulkan1 and mesa-vulkan-drivers (lavapipe, a
software renderer; .ci/run installs them). Where there is none, ``Scene`` raises WindowUnavailable saying what to
install. A scene owns its GGUI window and the fields GGUI reads: close it (or use it as a context manager) when done.
Nothing outlives it: a window or a field held in a module until the interpreter exits crashed the exit (a segfault
after the test suite had passed, when Taichi's program was already gone).

    with Scene((480, 360)) as scene:
        scene.look(from_=(1.6, 1.0, 2.2), at=(0.5, 0.2, 0.5))
        picture = scene.render(points, colors, radius=0.005, floor=0.09)
"""
import math
import weakref

import numpy as np
import taichi as ti

from tisim.core import runtime
from tisim.viz.gui import WindowUnavailable, window_problem

FOV = 45.0  # GGUI's camera: vertical field of view [deg], perspective, near plane 0.1 m
NEAR = 0.1  # [m]
FLOOR_COLOR = (0.88, 0.85, 0.78)
MARK_COLOR = (0.16, 0.59, 0.27)  # targets on the floor
MARKER_COLOR = (0.08, 0.08, 0.08)  # tracked points


def _basis(eye, at):
    """The camera's unit right, up and forward vectors (y up), as GGUI's view matrix has them."""
    forward = np.asarray(at, float) - np.asarray(eye, float)
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, (0.0, 1.0, 0.0))
    right /= np.linalg.norm(right)
    return right, np.cross(right, forward), forward


def project(points, eye, at, size, fov=FOV):
    """Where world points (..., 3) [m] land in a picture of size (width, height) seen from eye looking at at, as
    Scene.render draws them: (pixel (..., 2) as (column, row), depth along the view (...,) [m])."""
    right, up, forward = _basis(eye, at)
    d = np.asarray(points, float) - np.asarray(eye, float)
    x, y, depth = d @ right, d @ up, d @ forward
    focal = 1.0 / math.tan(math.radians(0.5 * fov))
    width, height = size
    safe = np.where(np.abs(depth) > 1e-12, depth, 1e-12)
    column = 0.5 * width * (1.0 + focal * x / (safe * width / height))
    row = 0.5 * height * (1.0 - focal * y / safe)
    return np.stack([column, row], axis=-1), depth


def fit_camera(low, high, size, direction=(0.5, 0.6, 1.3), *, fill=0.85, fov=FOV, band=0):
    """(eye, at) of a camera looking at the box low..high [m] from ``direction`` (from the target towards the eye),
    as close as it can be with all eight corners inside the middle ``fill`` of the picture (size = (width, height))
    below a band of ``band`` pixels at the top (kept for a caption), in both axes: the box fills the picture along
    its tighter axis, centred in it."""
    low, high = np.asarray(low, float), np.asarray(high, float)
    at = 0.5 * (low + high)
    direction = np.asarray(direction, float) / np.linalg.norm(direction)
    corners = np.array([[(low, high)[(k >> i) & 1][i] for i in range(3)] for k in range(8)])
    width, height = size

    middle = np.array([0.5 * width, 0.5 * (height + band)])  # [px] the middle of the picture below the band
    reach = np.array([0.5 * width, 0.5 * (height - band)])

    def inside(distance):
        pixels, depth = project(corners, at + distance * direction, at, size, fov)
        spread = np.abs(pixels - middle) / reach
        return depth.min() > 1.2 * NEAR and spread.max() <= fill

    def closest():  # bisection on the distance: too close where any corner leaves the picture
        near, far = 1e-3, 1e3
        for _ in range(60):
            middle = math.sqrt(near * far)
            near, far = (near, middle) if inside(middle) else (middle, far)
        return far

    half = math.tan(math.radians(0.5 * fov))
    for _ in range(4):  # the target moved to the middle of the box as pictured, then the distance fitted again
        distance = closest()
        pixels, _ = project(corners, at + distance * direction, at, size, fov)
        offset = 0.5 * (pixels.min(axis=0) + pixels.max(axis=0)) - [0.5 * width, 0.5 * height]  # [px]
        offset[1] -= 0.5 * band  # the box's middle goes to the middle below the band, not the picture's
        right, up, _ = _basis(at + distance * direction, at)
        at = at + 2 * distance * half / height * (offset[0] * right - offset[1] * up)  # [m per px] at the target
    return at + closest() * direction, at


class Scene:
    """A camera and a light over the unit cube; ``render`` paints points (and a floor) and returns the picture.
    One at a time."""

    _open = weakref.WeakSet()  # scenes open in this process (one dropped unclosed stops counting once collected)

    def __init__(self, size=(480, 360), *, offscreen=True, title="tisim"):
        if len(size) != 2 or min(size) < 16:
            raise ValueError(f"Scene: size must be (width, height) of at least 16 pixels, got {size!r}")
        self.size, self.offscreen = tuple(int(s) for s in size), offscreen
        problem = window_problem(offscreen)
        if problem:
            raise WindowUnavailable(f"3D pictures need GGUI: {problem}")
        if any(scene.window is not None for scene in Scene._open):
            raise RuntimeError("Scene: another scene is open; close it first (with Taichi 1.7.4's GGUI, closing a "
                               "second window aborted the process when the first drew again)")
        runtime.ensure_init()
        try:
            self.window = ti.ui.Window(title, self.size, vsync=False, show_window=not offscreen)
        except Exception as error:  # GGUI reports a missing Vulkan device as a generic error
            raise WindowUnavailable(f"3D pictures: GGUI could not start ({error}); install libvulkan1 and "
                                    "mesa-vulkan-drivers") from None
        self.camera = ti.ui.Camera()
        self._fields, self._trees = {}, []
        Scene._open.add(self)
        self.look()

    def close(self):
        """Destroy the window and the fields (idempotent)."""
        for tree in self._trees:
            tree.destroy()
        self._fields, self._trees = {}, []
        if self.window is not None:
            self.window.destroy()
            self.window = None
        Scene._open.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _field(self, kind, values):
        """A field holding values, (n, k) as k-vectors or (n,) as scalars, one per (kind, shape), kept for the next
        picture."""
        values = np.ascontiguousarray(values, dtype=np.float32)
        key = (kind, values.shape)
        if key not in self._fields:
            builder = ti.FieldsBuilder()
            field = ti.Vector.field(values.shape[1], ti.f32) if values.ndim == 2 else ti.field(ti.f32)
            builder.dense(ti.i, len(values)).place(field)
            self._trees.append(builder.finalize())
            self._fields[key] = field
        self._fields[key].from_numpy(values)
        return self._fields[key]

    def _mesh(self, scene, kind, vertices, normals, color):
        """Triangles (3 k, 3) with their normals, lit from both sides, drawn as one instance of an identity
        transform. GGUI 1.7.4's mesh shader computes its model matrix as I (1 - h) + M h, with h = 0 and M read
        from an instance buffer it allocates but never fills for a plain mesh: where that memory held a NaN (left
        by an earlier drawing), NaN * 0 put every vertex at NaN and the mesh vanished from the picture (the floor
        missing from some frames, on some machines; tests/test_scene.py reproduces it). Given the transform, h = 1
        and M is ours."""
        if "identity" not in self._fields:
            builder = ti.FieldsBuilder()
            identity = ti.Matrix.field(4, 4, ti.f32)
            builder.dense(ti.i, 1).place(identity)
            self._trees.append(builder.finalize())
            identity.from_numpy(np.eye(4, dtype=np.float32)[None])
            self._fields["identity"] = identity
        scene.mesh_instance(self._field(kind, vertices), normals=self._field(kind + " normals", normals),
                            color=color, two_sided=True, transforms=self._fields["identity"])

    def look(self, from_=(1.2, 0.75, 1.75), at=(0.5, 0.15, 0.5)):
        """Put the camera at from_, looking at at, y up (the default sees the unit square's floor from the front
        right)."""
        self.camera.position(*map(float, from_))
        self.camera.lookat(*map(float, at))
        self.camera.up(0.0, 1.0, 0.0)
        self.eye, self.at = np.array(from_, float), np.array(at, float)
        return self

    def project(self, points):
        """Pixel (column, row) of world points (..., 3) [m] in this scene's pictures, from the current camera."""
        return project(points, self.eye, self.at, self.size)[0]

    def render(self, points, colors=(0.78, 0.24, 0.2), radius=0.005, floor=None, *, segments=None, mesh=None,
               spheres=(), boxes=(), discs=(), markers=None, marker_radius=None, floor_extent=(0.0, 1.0, 0.0, 1.0),
               solid=None):
        """The picture, uint8 (H, W, 3), of spheres at points (n, 3) [m] with colors (n, 3) or one RGB in [0, 1],
        over the unit square's floor at height `floor` [m] (none if None). segments: (m, 2, 3) line ends (springs);
        mesh: (vertices (n, 3), triangles (k, 3) vertex indices), lit from both sides (a cloth); spheres:
        [(centre, radius), ...] and boxes: [(centre, half extents), ...], axis-aligned (obstacles); discs: [(centre,
        radius), ...] flat green discs lying at their centre's height (targets on the floor); markers: (m, 3) points
        drawn dark, of radius marker_radius (default twice radius) (tracked points); floor_extent: (xmin, xmax,
        zmin, zmax) [m] of the floor (default the unit square); solid: (vertices, triangles) of rigid shapes (an
        articulated robot's), drawn in the obstacles' grey."""
        points = np.asarray(points, dtype=np.float64)
        if points.ndim != 2 or points.shape[1] != 3 or not len(points):
            raise ValueError(f"Scene.render: points must have shape (n, 3), got {points.shape}")
        colors = np.broadcast_to(np.asarray(colors, dtype=np.float64), points.shape)
        scene = self.window.get_scene()
        scene.set_camera(self.camera)
        scene.ambient_light((0.35, 0.35, 0.35))
        scene.point_light(pos=(1.5, 3.0, 2.5), color=(0.9, 0.9, 0.9))
        if floor is not None:
            x0, x1, z0, z1 = (float(v) for v in floor_extent)
            corners = np.array([[x0, floor, z0], [x1, floor, z0], [x1, floor, z1], [x0, floor, z1]])
            up = np.tile([0.0, 1.0, 0.0], (6, 1))  # given, not left to GGUI's normals kernel (it warns on a cast)
            self._mesh(scene, "floor", corners[[0, 1, 2, 0, 2, 3]], up, FLOOR_COLOR)
        for k, (centre, disc_radius) in enumerate(discs):  # a fan of 32 triangles, 1 mm above its height
            angles = np.linspace(0.0, 2 * np.pi, 33)
            rim = np.asarray(centre, float) + 1e-3 * np.array([0.0, 1.0, 0.0]) + float(disc_radius) * np.stack(
                [np.cos(angles), np.zeros(33), np.sin(angles)], axis=1)
            middle = np.asarray(centre, float) + [0.0, 1e-3, 0.0]
            fan = np.stack([np.broadcast_to(middle, (32, 3)), rim[:-1], rim[1:]], axis=1).reshape(-1, 3)
            self._mesh(scene, f"disc {k}", fan, np.tile([0.0, 1.0, 0.0], (96, 1)), MARK_COLOR)
        if len(boxes):
            vertices, normals = box_triangles(boxes)
            self._mesh(scene, "boxes", vertices, normals, (0.55, 0.6, 0.7))
        if len(spheres):
            centres = np.array([c for c, _ in spheres], dtype=float).reshape(-1, 3)
            scene.particles(self._field("spheres", centres), radius=0.0, color=(0.55, 0.6, 0.7),
                            per_vertex_radius=self._field("sphere radii", [float(r) for _, r in spheres]))
        if mesh is not None:  # each triangle's own three vertices
            vertices, triangles = np.asarray(mesh[0], dtype=float), np.asarray(mesh[1], dtype=int)
            normals = vertex_normals(vertices, triangles)
            self._mesh(scene, "mesh", vertices[triangles].reshape(-1, 3), normals[triangles].reshape(-1, 3),
                       (0.35, 0.55, 0.8))
        if solid is not None:
            vertices, triangles = np.asarray(solid[0], dtype=float), np.asarray(solid[1], dtype=int)
            normals = vertex_normals(vertices, triangles)
            self._mesh(scene, "solid", vertices[triangles].reshape(-1, 3), normals[triangles].reshape(-1, 3),
                       (0.55, 0.6, 0.7))
        if segments is not None and len(segments):
            scene.lines(self._field("segments", np.asarray(segments, dtype=float).reshape(-1, 3)), width=1.0,
                        color=(0.3, 0.3, 0.3))
        # colours as RGBA: for RGB, GGUI's copy kernel writes an alpha literal of the default float type into its f32
        # buffer, and under tisim's f64 default Taichi warned "Assign may lose precision: f32 <- f64" at each compile
        rgba = np.concatenate([colors, np.ones((len(colors), 1))], axis=1)
        scene.particles(self._field("points", points), radius=float(radius),
                        per_vertex_color=self._field("colors", rgba))
        if markers is not None and len(markers):
            scene.particles(self._field("markers", np.asarray(markers, dtype=float).reshape(-1, 3)),
                            radius=float(marker_radius or 2 * radius), color=MARKER_COLOR)
        canvas = self.window.get_canvas()
        canvas.set_background_color((1.0, 1.0, 1.0))
        canvas.scene(scene)
        ti.set_logging_level(ti.WARN)  # GGUI logs every buffer it dumps at info level
        buffer = self.window.get_image_buffer_as_numpy()  # (W, H, 4), floats in [0, 1], y up
        if not self.offscreen:
            self.window.show()
            while self.window.get_event(ti.ui.PRESS):  # Esc closes the window, as tisim.gui's do
                if self.window.event.key == ti.ui.ESCAPE:
                    self.window.running = False
        return (np.transpose(buffer[:, ::-1, :3], (1, 0, 2)) * 255).round().astype(np.uint8)


def vertex_normals(vertices, triangles):
    """Unit normals (n, 3) at the vertices: the sum of the adjoining triangles' area-weighted normals."""
    a, b, c = (vertices[triangles[:, k]] for k in range(3))
    face = np.cross(b - a, c - a)
    normals = np.zeros_like(vertices)
    for k in range(3):
        np.add.at(normals, triangles[:, k], face)
    length = np.linalg.norm(normals, axis=1, keepdims=True)
    return normals / np.where(length > 0, length, 1.0)


def box_triangles(boxes):
    """The 12 triangles of each axis-aligned box [(centre, half extents), ...], as (36 m, 3) vertices with the
    flat outward normal of their face at each."""
    vertices, normals = [], []
    for centre, half in boxes:
        centre, half = np.asarray(centre, dtype=float), np.asarray(half, dtype=float)
        for axis in range(3):
            for side in (-1.0, 1.0):
                u, v = np.eye(3)[(axis + 1) % 3], np.eye(3)[(axis + 2) % 3]
                face = centre + side * half[axis] * np.eye(3)[axis]
                corners = [face + (su * u + sv * v) * half for su, sv in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
                vertices += [corners[0], corners[1], corners[2], corners[0], corners[2], corners[3]]
                normals += [side * np.eye(3)[axis]] * 6
    return np.array(vertices), np.array(normals)
