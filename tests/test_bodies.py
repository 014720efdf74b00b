"""Pictures of 3D articulated bodies: the shapes' meshes sit where the kinematics puts the bodies (a sphere's
vertices at its radius from its centre, a capsule's caps at its ends, a box's corners), turned into the scene's
y-up axes, and a rollout renders off screen to frames in which the body moves the way it moves."""
import numpy as np
import pytest

from tisim.gui import window_problem
from tisim.systems.articulation import Builder
from tisim.systems.articulation.kinematics import quat_from_axis_angle
from tisim.viz.bodies import TO_SCENE, articulation_frames, posed_mesh

VULKAN = window_problem(offscreen=True)


def three_shapes():
    b = Builder("shapes")
    body = b.body(0, pos=(0.2, -0.1, 0.5), mass=1.0, inertia=(0.1, 0.1, 0.1))
    b.free(body)
    b.sphere(body, 0.05, pos=(0.1, 0.0, 0.0))
    b.capsule(body, 0.02, 0.1, pos=(0.0, 0.0, 0.1), quat=quat_from_axis_angle((0, 1, 0), np.pi / 2))
    b.box(body, (0.03, 0.04, 0.05), pos=(-0.1, 0.0, 0.0))
    b.plane()
    return b.build()


def test_the_meshes_sit_where_the_kinematics_puts_the_shapes():
    """The body turned a quarter about z and lifted: the sphere's vertices lie at its radius from its centre, the
    capsule reaches half its length plus its radius along its axis (the body's x, now the world's y), the box's
    corners lie at its half-widths (turned), all in scene axes (x, z, -y)."""
    tree = three_shapes()
    turn = quat_from_axis_angle((0, 0, 1), np.pi / 2)
    q = np.r_[0.2, -0.1, 0.5, turn]
    vertices, triangles = posed_mesh(tree, q)
    assert triangles.max() < len(vertices) and triangles.min() >= 0
    world = vertices @ TO_SCENE  # back to the tree's axes (TO_SCENE is a rotation)
    sphere_centre = np.array([0.2, -0.1 + 0.1, 0.5])  # (0.1, 0, 0) turned a quarter about z
    distance = np.linalg.norm(world - sphere_centre, axis=1)
    assert np.sum(np.abs(distance - 0.05) < 1e-12) >= 50  # the sphere's vertices
    capsule = world[np.abs(world[:, 2] - 0.6) < 0.0200001]  # around the capsule's axis, 0.1 above the body
    assert capsule[:, 1].max() == pytest.approx(-0.1 + 0.12, abs=1e-12)
    assert capsule[:, 1].min() == pytest.approx(-0.1 - 0.12, abs=1e-12)
    assert np.abs(capsule[:, 0] - 0.2).max() <= 0.02 + 1e-12
    box = world[np.isclose(np.abs(world[:, 0] - 0.2), 0.04) & np.isclose(np.abs(world[:, 2] - 0.5), 0.05)]
    assert len(box) == 8 and np.allclose(np.abs(box[:, 1] - (-0.1 - 0.1)), 0.03)  # turned: x half-width along y


@pytest.mark.skipif(VULKAN is not None, reason=f"GGUI cannot render here: {VULKAN}")
def test_a_rollout_renders_to_frames_that_show_the_body_moving():
    """A body moved 0.5 m along x over the rollout: the frames are pictures, and the shapes' pixels (not white,
    not the floor's) move to the right."""
    tree = three_shapes()
    q = np.array([np.r_[0.2 + 0.05 * t, -0.1, 0.5, 1.0, 0, 0, 0] for t in range(11)])
    frames = articulation_frames(tree, q, every=10, size=(240, 160))
    assert len(frames) == 2 and frames[0].shape == (160, 240, 3) and frames[0].dtype == np.uint8

    def shape_columns(picture):
        r, g, b = (picture[..., k].astype(int) for k in range(3))
        return np.nonzero(b > r + 40)[1]  # the shapes are blue, the floor cream, the background white
    first, last = shape_columns(frames[0]), shape_columns(frames[1])
    assert len(first) > 100 and len(last) > 100 and last.mean() > first.mean() + 20
