"""3D pictures of rigid bodies: an Articulation's shapes (spheres, capsules, boxes) as lit triangle meshes in Taichi's
GGUI scene (tisim.viz.scene), posed by the numpy kinematics at each step of a rollout; tools in clay, turned where
they turn.

The scene's y is up, the articulation's (MuJoCo's) z: a point (x, y, z) of the tree is drawn at (x, z, -y), a turn
of the axes (no mirror), so a robot walking along +x walks to the right of a camera looking along -z.

    frames = articulation_frames(tree, traj["q"][0], every=10)   # [uint8 (H, W, 3)], the floor and a camera
"""
import numpy as np

from tisim.systems.articulation.kinematics import body_poses, quat_to_matrix
from tisim.systems.articulation.tree import BOX, CAPSULE, SPHERE
from tisim.viz.scene import Scene, fit_camera

TO_SCENE = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])  # z up -> y up, a proper rotation


def rounded_mesh(radius, half_length, rings=6, segments=14):
    """A capsule along z (a sphere where half_length = 0) as (vertices (n, 3), triangles (k, 3)): two hemispheres
    of `radius` whose centres lie at -+half_length, joined by the cylinder between their rims."""
    rows = [(phi, -half_length) for phi in np.linspace(-np.pi / 2, 0.0, rings + 1)]
    rows += [(phi, half_length) for phi in np.linspace(0.0, np.pi / 2, rings + 1)]
    around = np.linspace(0.0, 2 * np.pi, segments, endpoint=False)
    vertices = np.array([(radius * np.cos(phi) * np.cos(a), radius * np.cos(phi) * np.sin(a),
                          radius * np.sin(phi) + shift) for phi, shift in rows for a in around])
    triangles = []
    for r in range(len(rows) - 1):
        for s in range(segments):
            a, b = r * segments + s, r * segments + (s + 1) % segments
            c, d = a + segments, b + segments
            triangles += [(a, b, d), (a, d, c)]
    return vertices, np.array(triangles)


def box_mesh(half_widths):
    """A box of half_widths centred at the origin: its 8 corners and 12 triangles, facing out."""
    corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float) * half_widths
    faces = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    return corners, np.array([t for a, b, c, d in faces for t in ((a, b, c), (a, c, d))])


def turned_boxes(centres, halves, orientations):
    """One mesh of boxes: half extents `halves` [m], turned by the quaternions (w, x, y, z) `orientations` (any
    nonzero length) and moved to `centres`."""
    vertices, triangles = [], []
    for c, h, q in zip(centres, halves, np.asarray(orientations, float)):
        corners, faces = box_mesh(h)
        triangles.append(faces + 8 * len(vertices))
        vertices.append(corners @ quat_to_matrix(q / np.linalg.norm(q)).T + c)
    return np.concatenate(vertices), np.concatenate(triangles)


def with_tools(picture, state, params):
    """A 3D picture with the tools added: a tool without half extents as a sphere, any other as the box that bounds
    it, turned as the tool is where it turns (a solid)."""
    centres, halves = (np.asarray(v, float).reshape(-1, 3) for v in (state["tool_pos"], params["tool_half"]))
    radii, boxed = np.ravel(params["tool_radius"]), np.any(halves > 0, axis=1)
    picture["spheres"] = list(picture.get("spheres", [])) + [(c, r) for c, r in zip(centres[~boxed], radii[~boxed])]
    bounds = halves[boxed] + radii[boxed, None]
    if "tool_orientation" in state and boxed.any():
        turns = np.asarray(state["tool_orientation"], float).reshape(-1, 4)[boxed]
        picture["solid"] = turned_boxes(centres[boxed], bounds, turns)
    else:
        picture["boxes"] = list(picture.get("boxes", [])) + list(zip(centres[boxed], bounds))
    return picture


def shape_meshes(tree):
    """Each drawable geom of the tree: (body, vertices in the body's frame, triangles). Planes are not drawn."""
    out = []
    for g, kind in enumerate(tree.geom_type):
        size = tree.geom_size[g]
        if kind == SPHERE:
            vertices, triangles = rounded_mesh(size[0], 0.0)
        elif kind == CAPSULE:
            vertices, triangles = rounded_mesh(size[0], size[1])
        elif kind == BOX:
            vertices, triangles = box_mesh(size)
        else:
            continue
        placed = vertices @ quat_to_matrix(tree.geom_quat[g]).T + tree.geom_pos[g]
        out.append((int(tree.geom_body[g]), placed, triangles))
    return out


def posed_mesh(tree, q, shapes=None):
    """All shapes at coordinates q, as one mesh in the scene's coordinates: (vertices (n, 3), triangles (k, 3))."""
    shapes = shape_meshes(tree) if shapes is None else shapes
    if not shapes:
        raise ValueError(f"the tree {tree.name!r} has no sphere, capsule or box to draw")
    xpos, xmat = body_poses(tree, q)
    vertices, triangles, count = [], [], 0
    for body, local, faces in shapes:
        vertices.append((local @ xmat[body].T + xpos[body]) @ TO_SCENE.T)
        triangles.append(faces + count)
        count += len(local)
    return np.concatenate(vertices), np.concatenate(triangles)


def articulation_frames(tree, q, *, every=1, size=(480, 320), direction=(0.3, 0.45, 1.0), margin=0.4):
    """Pictures of the rollout q (T + 1, n_coordinates) of one batch element, every `every` steps: the shapes lit
    over the floor (z = 0), from a fixed camera that frames the whole path (plus `margin` metres), looking from
    `direction` (scene axes: y up). Needs a Vulkan driver (tisim.viz.scene)."""
    q = np.asarray(q, dtype=float)
    shapes = shape_meshes(tree)
    steps = range(0, len(q), every)
    meshes = [posed_mesh(tree, q[t], shapes) for t in steps]
    everything = np.concatenate([v for v, _ in meshes])
    low, high = everything.min(axis=0) - margin, everything.max(axis=0) + margin
    low[1] = 0.0
    eye, at = fit_camera(low, high, size, direction)
    extent = (low[0] - 1.0, high[0] + 1.0, low[2] - 1.0, high[2] + 1.0)
    pictures = []
    with Scene(size) as scene:
        scene.look(from_=eye, at=at)
        for vertices, triangles in meshes:
            pictures.append(scene.render(vertices[:1], radius=1e-4, floor=0.0, mesh=(vertices, triangles),
                                         floor_extent=extent))
    return pictures


__all__ = ["articulation_frames", "posed_mesh", "shape_meshes", "rounded_mesh", "box_mesh", "turned_boxes",
           "with_tools"]
