"""The mass-spring body in 3D: cloth and solids from the same code as 2D, static spheres and boxes, pinned particles,
isotropic friction. Each check is against a number computed apart from the code: a numpy implementation of the
step, the 2D body, a rotated copy, Coulomb's law on a slope."""
import dataclasses
import json

import numpy as np
import pytest

import tisim
from tisim.robots import Robot, cloth, from_cells
from tisim.systems.mass_spring import MassSpring, mean_x_weights

from itemwise_mass_spring import ItemwiseMassSpring


def numpy_rollout(sim, robot):
    """The rollout of the module docstring's equations in numpy, from the simulator's parameters, initial state and
    actions (batch element 0), written from the equations, not from the kernels."""
    p = {k: np.asarray(v)[0] for k, v in sim.params.items()}
    pos, vel = (sim.initial_state[k][0].copy() for k in ("pos", "vel"))
    actions = sim.actions[0]
    i, j = robot.springs.T
    owner = robot.actuator_of_spring()
    free = robot.free()[:, None]
    up = np.eye(robot.dim)[1]
    shapes = [("ground", None, None)]
    shapes += [("sphere", c, r) for c, r in zip(p.get("sphere_center", ()), p.get("sphere_radius", ()))]
    shapes += [("box", c, h) for c, h in zip(p.get("box_center", ()), p.get("box_half", ()))]
    out = [pos.copy()]
    for t in range(sim.T):
        d = pos[j] - pos[i]
        r = np.linalg.norm(d, axis=1)
        n = d / r[:, None]
        a = np.where(owner >= 0, actions[t][np.maximum(owner, 0)], 0.0)
        length = p["rest"] * (1 + a)
        fs = (p["k"] * (r - length) + p["damping"] * np.sum((vel[j] - vel[i]) * n, axis=1))[:, None] * n
        force = np.zeros_like(pos)
        np.add.at(force, i, fs)
        np.add.at(force, j, -fs)
        force -= p["m"] * p["g"] * up + p["drag"] * vel
        for kind, c, size in shapes:
            if kind == "ground":
                depth, normal = -pos[:, 1], np.broadcast_to(up, pos.shape)
            elif kind == "sphere":
                delta = pos - c
                distance = np.sqrt(np.sum(delta ** 2, axis=1) + 1e-30)
                depth, normal = size - distance, delta / distance[:, None]
            else:
                q = pos - c
                inside = size - np.abs(q)
                depth = inside.min(axis=1)
                axis = np.argmin(inside, axis=1)
                normal = np.zeros_like(pos)
                normal[np.arange(len(pos)), axis] = np.where(q[np.arange(len(pos)), axis] >= 0, 1.0, -1.0)
            vn = np.sum(vel * normal, axis=1)
            s = p["softness"]
            if s > 0:
                z = depth / s
                act = s * (np.maximum(z, 0) + np.log1p(np.exp(-np.abs(z))))
                gate = np.exp(np.minimum(z, 0)) / (1 + np.exp(-np.abs(z)))
                fn = p["kc"] * act - p["kd"] * np.minimum(vn, 0) * gate
            else:
                fn = np.where(depth > 0, p["kc"] * depth - p["kd"] * np.minimum(vn, 0), 0.0)
            vt = vel - vn[:, None] * normal
            slip = np.sqrt(np.sum(vt ** 2, axis=1) + 1e-30)
            force += fn[:, None] * normal - (p["mu"] * fn * np.tanh(slip / p["eps"]) / slip)[:, None] * vt
        vel_next = (vel + sim.dt * force / p["m"]) * free
        pos = pos + sim.dt * vel_next * free
        vel = vel_next
        out.append(pos.copy())
    return np.array(out)


def rotation_y(angle):
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


SPHERE = ((0.5, 0.1, 0.5), 0.06)
BOX = ((0.56, 0.05, 0.56), (0.05, 0.05, 0.05))


def draped_cloth():
    """A 6 x 6 cloth pinned at its four corners, dropped onto a sphere, a box and the floor."""
    return cloth(6, 6, spacing=0.03, origin=(0.42, 0.18, 0.42), pin="corners", flat=True)


def actuated_block(bottom=0.01):
    """Two cubic cells, each its own actuator, `bottom` [m] above the floor."""
    return from_cells([(0, 0, 0), (1, 0, 0)], {"left": [(0, 0, 0)], "right": [(1, 0, 0)]}, spacing=0.04,
                      bottom=bottom)


@pytest.mark.parametrize("system", [ItemwiseMassSpring, MassSpring], ids=["items", "phased"])
@pytest.mark.parametrize("softness", [0.0, 0.002])
def test_cloth_against_numpy(system, softness):
    """A cloth pinned at its corners falls onto a sphere, a box and the floor: every position of the rollout equals
    the numpy implementation to 1e-10 m, with hard and soft contact, phased and item-wise."""
    robot = draped_cloth()
    sim = system(horizon=300, robot=robot, spheres=[SPHERE], boxes=[BOX], softness=softness,
                     mu=0.4, eps=0.02)
    traj = sim.rollout()["pos"][0]
    reference = numpy_rollout(sim, robot)
    assert reference[:, :, 1].min() < SPHERE[0][1] + SPHERE[1]  # some particle went below the sphere's top
    assert np.abs(traj[:, robot.pinned] - robot.particles[robot.pinned]).max() == 0.0  # pinned exactly
    np.testing.assert_allclose(traj, reference, rtol=0, atol=1e-10)


def test_actuated_solid_against_numpy():
    """A 3D solid with two actuators slides on the floor under friction: the numpy implementation to 1e-10 m."""
    robot = actuated_block()
    sim = MassSpring(horizon=300, robot=robot, mu=0.5, eps=0.02)
    sim.set_initial_state(vel=np.tile([0.6, 0.0, 0.3], (len(robot.particles), 1)))
    t = np.arange(sim.T)[:, None] * sim.dt
    sim.set_actions(0.1 * np.sin(2 * np.pi * 5 * t + np.array([0.0, np.pi / 2])))
    traj = sim.rollout()["pos"][0]
    reference = numpy_rollout(sim, robot)
    assert np.ptp(reference[:, :, 2]) > 0.02  # it slid in z too
    np.testing.assert_allclose(traj, reference, rtol=0, atol=1e-10)


def test_a_planar_3d_body_moves_as_the_2d_one():
    """The worm robot in the plane z = 0 of 3D, against a sphere at z = 0, moves exactly as the 2D worm against
    a disc (to 1e-12 m), and never leaves the plane: one code for both dimensions, and the isotropic friction law
    along a line is the 2D one."""
    worm = Robot.load("worm")
    flat = dataclasses.replace(worm, particles=np.c_[worm.particles, np.zeros(len(worm.particles))])
    t = np.arange(400)[:, None] * 5e-4
    actions = 0.15 * np.sin(2 * np.pi * 4 * t + np.arange(len(worm.actuators)))
    disc = worm.particles[:, 0].max() + 0.05
    runs = {}
    for dim, robot, obstacle in ((2, worm, ((disc, 0.0), 0.04)), (3, flat, ((disc, 0.0, 0.0), 0.04))):
        sim = MassSpring(horizon=400, robot=robot, spheres=[obstacle])
        sim.set_initial_state(vel=np.tile([0.3, 0.0, 0.0][:dim], (len(robot.particles), 1)))
        sim.set_actions(actions)
        runs[dim] = sim.rollout()["pos"][0]
    assert runs[3][..., 2].max() == runs[3][..., 2].min() == 0.0
    assert runs[2][..., 0].max() > disc - 0.04 - 0.01  # it reached the disc
    np.testing.assert_allclose(runs[3][..., :2], runs[2], rtol=0, atol=1e-12)


def test_friction_is_the_same_in_every_direction():
    """A block slid across the floor in five directions: each path is the first one turned about the vertical, to
    1e-9 m, and it stops after v0^2 / (2 mu g) within 3% (Coulomb's law; the regularization adds a creep)."""
    block = actuated_block(bottom=0.0)  # on the floor: it slides from the start
    centre = block.particles.mean(axis=0) * [1, 0, 1]
    v0, mu, g = 0.8, 0.4, 9.8
    ends = []
    for angle in np.linspace(0.0, 2 * np.pi, 5, endpoint=False) + 0.3:
        turn = rotation_y(angle)
        robot = dataclasses.replace(block, particles=(block.particles - centre) @ turn.T + centre)
        sim = MassSpring(horizon=1200, robot=robot, mu=mu, eps=0.005, dt=2.5e-4)
        sim.set_initial_state(vel=np.tile(turn @ [v0, 0.0, 0.0], (len(robot.particles), 1)))
        traj = sim.rollout()["pos"][0]
        ends.append(((traj[-1] - centre) @ turn - (block.particles - centre)))  # turned back
        travelled = np.linalg.norm(traj[-1].mean(axis=0) - traj[0].mean(axis=0))
        assert abs(travelled / (v0 ** 2 / (2 * mu * g)) - 1) < 0.03, travelled
        assert np.linalg.norm(traj[-1].mean(axis=0) - traj[-40].mean(axis=0)) < 1e-4  # at rest by the end
    for end in ends[1:]:
        np.testing.assert_allclose(end, ends[0], rtol=0, atol=1e-9)


def on_a_slope(angle, mu, eps, T):
    """A 2 cm cube resting on a sphere of radius 100 m where its surface slopes by `angle`: the velocity of its
    centre of mass along the slope, downhill positive, per step."""
    R = 100.0
    centre = np.array([0.5, 0.0, 0.5])  # the floor far below the cube
    normal, downhill = np.array([np.sin(angle), np.cos(angle), 0.0]), np.array([np.cos(angle), -np.sin(angle), 0.0])
    cube = from_cells([(0, 0, 0)], {}, spacing=0.02, bottom=0.0)
    local = cube.particles - [0.01, 0.0, 0.01]  # bottom face centred on the contact point
    contact = centre + R * normal
    robot = dataclasses.replace(cube, particles=contact + np.outer(local[:, 0], downhill)
                                + np.outer(local[:, 1], normal) + np.outer(local[:, 2], [0, 0, 1]))
    sim = MassSpring(horizon=T, robot=robot, spheres=[(centre, R)], mu=mu, eps=eps, dt=2e-4, kc=2e4, kd=10.0)
    traj = sim.rollout()
    return (traj["vel"][0].mean(axis=1) @ downhill), sim.dt


def test_stick_below_and_slip_above_the_friction_angle():
    """On a slope with tan(angle) = mu / 2 the cube creeps at the regularized law's speed eps atanh(tan / mu)
    (within 15%: it sticks, up to the regularization); with tan(angle) = 2 mu it slides with the acceleration
    g (sin - mu cos) within 3%."""
    mu, eps, g = 0.5, 0.01, 9.8
    stick, dt = on_a_slope(np.arctan(mu / 2), mu, eps, 1500)
    creep = eps * np.arctanh(0.5)
    assert abs(stick[-500:].mean() / creep - 1) < 0.15, stick[-500:].mean()
    angle = np.arctan(2 * mu)
    slip, dt = on_a_slope(angle, mu, eps, 1500)
    acceleration = (slip[1400] - slip[400]) / (1000 * dt)
    assert abs(acceleration / (g * (np.sin(angle) - mu * np.cos(angle))) - 1) < 0.03, acceleration


@pytest.mark.parametrize("seed", [0, 1])
def test_cloth_draped_over_a_sphere_settles(seed):
    """A free 12 x 12 cloth dropped centred onto a sphere (its start moved by 1e-12 m at random: the draping
    breaks the symmetry by rounding) drapes over it and comes to rest there: in the last 0.1 s of 2.5 s no particle
    moves 0.1 mm; in the last second its centre drifts sideways by less than 0.5 mm, and it stays over the sphere's
    within 2 mm; no particle sinks into the sphere by more than 1 mm. With air drag, and a friction scale
    eps = 2 mm/s: the regularized law lets a cloth on a slope creep, slower than eps (measured over three seeds:
    moves of 0.06-0.08 mm, drifts of 0.16-0.2 mm, offsets of 0.75 mm at most)."""
    centre, radius = np.array([0.5, 0.15, 0.5]), 0.08
    robot = cloth(12, 12, spacing=0.02, origin=(0.39, 0.25, 0.39), pin="none", flat=True)
    sim = MassSpring(horizon=5000, robot=robot, spheres=[(centre, radius)], k=400.0, drag=0.05, eps=0.002)
    sim.set_initial_state(pos=robot.particles + 1e-12 * np.random.default_rng(seed).standard_normal((144, 3)))
    traj = sim.rollout()["pos"][0]
    assert np.abs(traj[-1] - traj[-200]).max() < 1e-4
    assert np.linalg.norm((traj[-1].mean(axis=0) - traj[-2000].mean(axis=0))[[0, 2]]) < 5e-4
    np.testing.assert_allclose(traj[-1].mean(axis=0)[[0, 2]], centre[[0, 2]], atol=2e-3)
    assert traj[-1][:, 1].max() > centre[1] + radius - 0.01  # on top of the sphere, not fallen through
    assert np.linalg.norm(traj[-1] - centre, axis=1).min() > radius - 1e-3


def thrown_block(**values):
    """A 3D actuated solid thrown onto a sphere and a box, with a loss on where it ends."""
    robot = actuated_block()
    robot = dataclasses.replace(robot, particles=robot.particles + [0.46, 0.05, 0.47])
    sim = MassSpring(horizon=120, robot=robot, spheres=[((0.5, 0.0, 0.5), 0.06)], boxes=[((0.6, 0.0, 0.5),
                     (0.03, 0.04, 0.05))], mu=0.4, eps=0.05, m=0.02, **values)
    t = np.arange(sim.T)[:, None] * sim.dt
    sim.set_actions(0.1 * np.sin(2 * np.pi * 5 * t + np.array([0.0, 1.0])))
    sim.set_initial_state(vel=np.tile([0.2, -0.4, 0.1], (len(robot.particles), 1)))
    loss = tisim.losses.TerminalSum(mean_x_weights(sim)) + tisim.losses.TerminalTarget(
        {"pos": robot.particles + [0.02, -0.03, 0.01]})
    return sim, loss


@pytest.mark.parametrize("group", ["params", "initial_state", "actions"])
def test_gradients_in_3d_with_smooth_contact(group):
    """Soft, undamped contact with a sphere and a box and tanh friction is smooth in every input: every gradient
    group matches float64 central differences to 1e-5, the 2D body's bound (the damping while compressing,
    min(vn, 0), is a kink that a bouncing body crosses). The contact's curvature, 1 / softness, makes the differences'
    truncation error large: measured worst 1.2e-5 at step 1e-4, 5e-6 at 3e-5."""
    sim, loss = thrown_block(softness=0.003, kd=0.0)
    report = tisim.gradcheck(sim, loss, groups=(group,), step=2e-5, max_entries=16, extrapolate=True)
    assert report.worst <= 1e-5, str(report)
    if group == "params":
        g = sim.gradient(loss).params
        for name in ("sphere_center", "sphere_radius", "box_center", "box_half", "softness"):
            assert np.abs(g[name]).max() > 0, name  # the obstacles were touched


@pytest.mark.parametrize("make", ["thrown block", "pinned cloth"])
def test_every_contact_and_drag_parameter_matches_central_differences(make):
    """Each entry of the contact, drag and obstacle parameters, one by one (gradcheck spaces its entries over the
    hundreds of springs), against a central difference, with smooth (soft, undamped) contact: a thrown solid
    against a sphere and a box, and a cloth pinned at its corners falling onto them."""
    smooth = dict(softness=0.003, kd=0.0, drag=0.02)
    if make == "thrown block":
        sim, loss = thrown_block(**smooth)
    else:
        robot = draped_cloth()
        sim = MassSpring(horizon=150, robot=robot, spheres=[SPHERE], boxes=[BOX], mu=0.4, eps=0.02, **smooth)
        loss = tisim.losses.TerminalSum(mean_x_weights(sim)) + tisim.losses.TerminalTarget(
            {"pos": robot.particles + [0.0, -0.05, 0.0]})
    g = sim.gradient(loss).params
    base = {name: np.array(v) for name, v in sim.params.items()}
    checked = 0
    for name in ("kc", "softness", "mu", "eps", "drag", "g", "m", "sphere_center", "sphere_radius", "box_center",
                 "box_half"):
        for index in np.ndindex(base[name].shape):
            h = 1e-6 * max(1.0, abs(base[name][index]))
            values = []
            for sign in (1, -1):
                moved = base[name].copy()
                moved[index] += sign * h
                sim.set_params(**{name: moved})
                values.append(float(np.sum(sim.evaluate(loss))))
            sim.set_params(**{name: base[name]})
            difference = (values[0] - values[1]) / (2 * h)
            floor = 1e-3 * abs(float(np.sum(sim.evaluate(loss))))  # entries far below the loss's scale
            assert abs(g[name][index] - difference) <= 1e-5 * max(abs(difference), floor), \
                (name, index, g[name][index], difference)
            checked += 1
    assert checked == 17  # 7 global entries, a sphere's centre and radius, a box's centre and half extents


def test_gradients_in_3d_through_hard_contact():
    """Hard, damped contact: every group matches central differences to the 1e-3 of the 2D body's contact test
    (a difference whose stencil straddles a contact switch measures a mixture of two pieces)."""
    sim, loss = thrown_block()
    report = tisim.gradcheck(sim, loss, step=1e-6, max_entries=10)
    assert report.worst <= 1e-3, str(report)


def test_cloth_builder():
    """A 32 x 32 cloth has 2 * 32 * 31 structural, 2 * 31^2 shear and 2 * 32 * 30 bending springs, rest lengths
    h, sqrt(2) h and 2 h; its pins are where asked."""
    sheet = cloth(32, 32, spacing=0.01, pin="top corners")
    lengths = sheet.rest_lengths()
    counts = [1984, 1922, 1920]
    assert len(sheet.springs) == sum(counts) and sheet.pinned == [0, 31] and sheet.dim == 3
    for (start, stop), length in zip(((0, 1984), (1984, 3906), (3906, 5826)), (0.01, 0.01 * np.sqrt(2), 0.02)):
        np.testing.assert_allclose(lengths[start:stop], length)
    assert cloth(3, 3, pin="corners").pinned == [0, 2, 6, 8]
    with pytest.raises(ValueError, match="cloth: pin must be one of"):
        cloth(3, 3, pin="middle")
    with pytest.raises(ValueError, match="cloth: nx and ny must be integers >= 2"):
        cloth(1, 3)


def test_cells_on_a_3d_lattice():
    """from_cells in 3D: a cube has every pair of its 8 corners as a spring (12 edges, 12 face and 4 body
    diagonals); two cubes sharing a face share its 4 corners and 6 springs."""
    one = from_cells([(0, 0, 0)], {}, spacing=0.1)
    two = from_cells([(0, 0, 0), (0, 0, 1)], {"front": [(0, 0, 1)]}, spacing=0.1)
    assert (len(one.particles), len(one.springs)) == (8, 28)
    assert (len(two.particles), len(two.springs)) == (12, 50)
    assert sorted(np.round(one.rest_lengths() / 0.1, 6).tolist()) == \
        [1.0] * 12 + [round(np.sqrt(2), 6)] * 12 + [round(np.sqrt(3), 6)] * 4
    assert len(two.actuators) == 1 and len(two.actuators[0]) == 28 - 6  # the shared face went to the first cell


def test_a_3d_robot_file_with_pins(tmp_path):
    """A 3D robot with pins and faces goes through JSON and back; bad pins, bad faces and mixed dimensions are
    refused by name."""
    sheet = cloth(3, 3, pin="top row")
    path = tmp_path / "sheet.json"
    path.write_text(sheet.to_json())
    back = Robot.load(path)
    assert back.pinned == [0, 1, 2] and back.dim == 3 and np.allclose(back.particles, sheet.particles)
    assert (back.faces == sheet.faces).all() and len(back.faces) == 8  # two triangles per square
    data = json.loads(sheet.to_json())
    for edit, message in [(dict(pinned=[0, 9]), r"pinned must list distinct particles in 0..8"),
                          (dict(pinned=[0, 0]), r"pinned must list distinct particles"),
                          (dict(pinned=list(range(9))), "pinned holds every particle"),
                          (dict(faces=[[0, 1, 9]]), r"faces must be triangles \[i, j, k\] of particles in 0..8"),
                          (dict(particles=[[0, 0, 0], [1, 0]] + data["particles"][2:]), "robot file")]:
        path.write_text(json.dumps({**data, **edit}))
        with pytest.raises(ValueError, match=message):
            Robot.load(path)


@pytest.mark.parametrize("keywords, message", [
    (dict(spheres=[((0.5, 0.5), 0.1)]), r"spheres\[0\] must be a centre of 3 coordinates and a radius > 0"),
    (dict(spheres=[((0.5, 0.5, 0.5), -0.1)]), r"spheres\[0\] must be a centre of 3 coordinates and a radius > 0"),
    (dict(boxes=[((0.5, 0.5, 0.5), 0.1)]), r"boxes\[0\] must be a centre of 3 coordinates and 3 half extents"),
    (dict(boxes=[0.5]), r"boxes\[0\] must be a pair \(centre, size\)"),
])
def test_malformed_obstacles_are_refused_by_name(keywords, message):
    with pytest.raises(ValueError, match=f"MassSpring: {message}"):
        MassSpring(horizon=3, robot=cloth(3, 3), **keywords)


def test_obstacle_parameters_follow_the_obstacles():
    """Without spheres, sphere_center is an empty table; with two, it has two rows, set from the constructor."""
    sim = MassSpring(horizon=3, robot=cloth(3, 3))
    assert sim.params["sphere_center"].shape == (1, 0, 3) and sim.params["box_half"].shape == (1, 0, 3)
    sim = MassSpring(horizon=3, robot=cloth(3, 3), spheres=[SPHERE, ((0.1, 0.2, 0.3), 0.5)])
    np.testing.assert_allclose(sim.params["sphere_center"], [[SPHERE[0], (0.1, 0.2, 0.3)]])
    np.testing.assert_allclose(sim.params["sphere_radius"], [[0.06, 0.5]])


class TaichiReverse(MassSpring):
    """MassSpring differentiated by Taichi's reverse mode of its branch-free phases, where MassSpring runs the
    phases' hand-written reverses (and a forward form that skips the contact laws where nothing is touched)."""
    REVERSES = {}
    FUSED = {}


def everything(cls, softness):
    """A cloth pinned at two corners, half of it over a sphere and a box, the other half over the floor, and an
    actuated solid landing beside them: every contact, drag, pinning and actuation, each particle moved off the
    lattice by a random 1e-3 m (a point exactly on a box's diagonal plane has no derivative to agree on)."""
    rng = np.random.default_rng(3)
    sheet, block = cloth(5, 5, spacing=0.05, origin=(0.3, 0.25, 0.35), pin="top corners"), actuated_block(0.03)
    particles = np.concatenate([sheet.particles, block.particles + [0.05, 0.0, 0.05]])
    springs = np.concatenate([sheet.springs, block.springs + len(sheet.particles)])
    actuators = [[s + len(sheet.springs) for s in group] for group in block.actuators]
    robot = Robot("everything", particles, springs, actuators, pinned=sheet.pinned)
    sim = cls(horizon=100, robot=robot, spheres=[((0.38, 0.1, 0.4), 0.08)], boxes=[((0.5, 0.05, 0.3),
              (0.06, 0.05, 0.06))], softness=softness, drag=0.02, mu=0.4, eps=0.05)
    n = len(particles)
    sim.set_initial_state(pos=particles + rng.normal(0.0, 1e-3, (n, 3)),
                          vel=rng.normal(0.0, 0.3, (n, 3)) + [0.0, -0.8, 0.0])
    sim.set_actions(rng.normal(0.0, 0.1, (100, 2)))
    w = rng.normal(size=(n, 3))
    return sim, tisim.losses.TerminalSum({"pos": w, "vel": 0.1 * w})


@pytest.mark.parametrize("softness", [0.0, 0.003])
def test_the_hand_written_reverses_are_taichis_reverse_mode(softness):
    """The backward pass runs the spring and particle phases' hand-written reverses, which skip the contact laws
    where a particle touches nothing; Taichi's reverse mode of the branch-free phases gives the same gradients in
    every group, to 1e-12 of each group's largest entry in float64, with hard and with soft contact."""
    ours, taichis = (cls_sim.gradient(loss) for cls_sim, loss in (everything(MassSpring, softness),
                                                                 everything(TaichiReverse, softness)))
    for group in ("params", "initial_state"):
        for name, value in getattr(taichis, group).items():
            if value.size == 0:  # no free balls here (tests/test_mass_spring_balls.py has them)
                continue
            scale = np.abs(value).max(initial=0.0)
            assert scale > 0 or name == "softness", name  # every parameter felt
            np.testing.assert_allclose(getattr(ours, group)[name], value, rtol=1e-12, atol=1e-12 * scale,
                                       err_msg=name)
    np.testing.assert_allclose(ours.actions, taichis.actions, rtol=1e-12, atol=1e-12 * np.abs(taichis.actions).max())


@pytest.mark.parametrize("softness", [0.0, 1e-4])
def test_the_fused_forward_takes_the_same_steps_to_the_last_bit(softness):
    """The fused forward pass skips the contact laws where a particle touches nothing (below ground or a shape, or
    within a soft contact's reach of 750 softness), the per-step schedule evaluates them everywhere: the same
    trajectory, bit for bit."""
    trajectories = []
    for per_step in (False, True):
        sim, _ = everything(MassSpring, softness)
        sim._per_step = per_step
        trajectories.append(sim.rollout())
    assert trajectories[0]["pos"][0, :, :, 1].min() < 0.0  # something touched the floor
    for name, fused in trajectories[0].items():
        assert np.array_equal(fused, trajectories[1][name]), name
