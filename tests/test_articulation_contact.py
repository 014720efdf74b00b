"""Contacts and joint limits of an Articulation, against statics and kinematics worked out by hand: a sphere and a
box resting on a plane sink to where the penalty law carries their weight, a box sliding on a plane decelerates at
mu g, a pendulum held past its limit rests where the limit's torque balances gravity; the numpy step against the
Taichi one, gradients through contact, friction and a limit against central differences, and MJCF's contacts."""
import numpy as np
import pytest

import tisim
from tisim.systems.articulation import Articulation, Builder, load_mjcf
from tisim.systems.articulation import dynamics as dy
from tisim.systems.articulation.algebra import quat_matrix
from tisim.systems.articulation.contact_geometry import box_box_points, capsule_box_points
from tisim.systems.articulation.kinematics import body_poses
from tisim.systems.articulation.tree import reference_coordinates

G = 9.81


def root(f, low, high):
    """The root of f in [low, high] by bisection (f changes sign there), to rounding."""
    for _ in range(200):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if np.sign(f(middle)) == np.sign(f(low)) else (low, middle)
    return 0.5 * (low + high)


def resting(shape, mass=2.0, dt=0.001):
    """A free sphere (radius 0.1) or box (half-widths 0.2, 0.1, 0.05) of `mass`, its centre 1 cm above where it
    touches a plane of friction 0.5, Euler at 1 ms."""
    b = Builder(shape, timestep=dt, integrator="euler")
    body = b.body(0, pos=(0, 0, 0.11 if shape == "sphere" else 0.06), mass=mass, inertia=(0.01, 0.02, 0.025))
    b.free(body)
    if shape == "sphere":
        b.sphere(body, 0.1, friction=0.5)
    else:
        b.box(body, (0.2, 0.1, 0.05), friction=0.5)
    b.plane(friction=0.2)
    return b.build()


@pytest.mark.parametrize("shape, points, half_height", [("sphere", 1, 0.1), ("box", 4, 0.05)])
def test_a_body_rests_where_the_penalty_carries_its_weight(shape, points, half_height):
    """Dropped from 1 cm, a sphere (one contact point) and a box (four corners down) come to rest level, sunk by
    m g / (n k) (the penalty law's static balance, n points sharing the weight), in numpy and in Taichi alike."""
    tree = resting(shape)
    sim = Articulation(horizon=3000, tree=tree)
    k = sim.params["contact_stiffness"][0]
    traj = sim.rollout()
    z = traj["q"][0, -1, 2]
    assert z == pytest.approx(half_height - 2.0 * G / (points * k), abs=1e-9)
    np.testing.assert_allclose(traj["q"][0, -1, 3:], [1, 0, 0, 0], atol=1e-9)  # level, not turned
    assert np.abs(traj["qd"][0, -1]).max() < 1e-6
    q, qd = reference_coordinates(tree), np.zeros(6)
    for _ in range(300):
        q, qd = dy.numpy_step(tree, q, qd, [], params={k: v[0] for k, v in sim.params.items()})
    np.testing.assert_allclose(q, traj["q"][0, 300], rtol=0, atol=1e-12)


def test_a_sliding_box_decelerates_at_mu_g():
    """A box resting on its four corners, pushed to 1 m/s along x, slides with Coulomb friction max(0.5, 0.2) =
    0.5: once it has rocked onto its front corners and back (the first 30 ms), its speed falls at mu g (the
    fitted slope to 0.5%) and stays within 2 mm/s of 1 - mu g t."""
    tree = resting("box")
    sim = Articulation(horizon=150, tree=tree)
    k = sim.params["contact_stiffness"][0]
    q0 = reference_coordinates(tree)
    q0[2] = 0.05 - 2.0 * G / (4 * k)  # at rest on the plane
    sim.set_initial_state(q=q0, qd=[1.0, 0, 0, 0, 0, 0])
    v = sim.rollout()["qd"][0, :, 0]
    t = 0.001 * np.arange(151)
    np.testing.assert_allclose(v[30:], 1.0 - 0.5 * G * t[30:], rtol=0, atol=2e-3)
    assert np.polyfit(t[30:], v[30:], 1)[0] == pytest.approx(-0.5 * G, rel=5e-3)


def limited_pendulum(softness=0.0):
    """A rod (1 kg, centre 0.25 m below a hinge about y) limited to [-0.5, 0.3] rad, Euler at 1 ms."""
    b = Builder("limited", timestep=0.001, integrator="euler")
    rod = b.body(0, pos=(0, 0, 1.0), mass=1.0, ipos=(0, 0, -0.25), inertia=(0.02, 0.02, 0.001))
    b.motor(b.hinge(rod, axis=(0, 1, 0), range=(-0.5, 0.3), damping=0.05), gear=1.0)
    return b.build()


def test_a_pendulum_rests_where_its_limit_balances_gravity():
    """Released at the upper limit 0.3 rad with a steady torque of 2 N m pushing it further, the rod comes to rest
    past the limit where k (theta - 0.3) = 2 - m g d sin(theta) (solved by bisection)."""
    sim = Articulation(horizon=4000, tree=limited_pendulum())
    k = sim.params["limit_stiffness"][0]
    sim.set_initial_state(q=[0.3])
    sim.set_actions(np.full((4000, 1), 2.0))
    traj = sim.rollout()
    rest = root(lambda th: k * (th - 0.3) - (2.0 - 1.0 * G * 0.25 * np.sin(th)), 0.3, 1.0)
    assert traj["q"][0, -1, 0] == pytest.approx(rest, abs=1e-9)
    assert abs(traj["qd"][0, -1, 0]) < 1e-7


def contact_and_limit_tree():
    """A sphere sliding on a plane, with a rod on a limited, motored hinge: contact, friction and a limit at once."""
    b = Builder("slider", timestep=0.002, integrator="euler")
    ball = b.body(0, pos=(0, 0, 0.1), mass=1.0, inertia=(0.004, 0.004, 0.004))
    b.free(ball)
    b.sphere(ball, 0.1, friction=0.8)
    rod = b.body(ball, pos=(0, 0, 0.2), mass=0.3, ipos=(0, 0, 0.1), inertia=(0.002, 0.002, 0.0005))
    b.motor(b.hinge(rod, axis=(0, 1, 0), range=(-0.2, 0.2), damping=0.01, armature=0.01), gear=0.5)
    b.plane(friction=0.3)
    return b.build()


def test_the_taichi_step_is_the_numpy_step_and_its_gradients_are_right():
    """With the sphere pressed into the plane and sliding, and the rod pushed onto its limit (the sphere's rocking
    lifts it off now and then), the Taichi rollout equals the numpy step to rounding, and every gradient group (the
    contact and limit laws' parameters among them) matches Richardson-extrapolated float64 central differences."""
    tree = contact_and_limit_tree()
    sim = Articulation(horizon=20, batch=2, tree=tree)
    sim.set_params(contact_softness=0.002, limit_softness=0.002)  # the laws smooth in the depth, as a test needs
    q0 = np.tile(np.r_[reference_coordinates(tree)[:7], 0.202], (2, 1))
    q0[:, 2] = 0.099
    q0[1, 7] = -0.202
    # no velocity exactly 0 where a law damps (its damping switches on there: no derivative at that point)
    qd0 = np.array([[0.5, 0.2, -0.05, 0, 0, 1.0, 0.03], [-0.3, 0.1, -0.02, 0.5, 0, 0, -0.02]])
    # the motor pushes the rod past its limit (and gravity, the rod standing up): the limit holds it there
    u = np.random.default_rng(1).uniform(0.5, 1.0, (2, 20, 1)) * np.array([1.0, -1.0])[:, None, None]
    sim.set_initial_state(q=q0, qd=qd0)
    sim.set_actions(u)
    traj = sim.rollout()
    rod = np.abs(traj["q"][:, :, 7])
    assert (rod > 0.2).any() and (rod < 0.2).any()  # the rod presses on its limit and leaves it
    assert np.all(traj["q"][:, :, 2] < 0.1)  # the sphere touches in every step
    params = sim.params
    for b in range(2):
        q, qd = q0[b], qd0[b]
        for t in range(20):
            q, qd = dy.numpy_step(tree, q, qd, u[b, t], params={k: v[b] for k, v in params.items()})
        np.testing.assert_allclose(traj["q"][b, -1], q, rtol=0, atol=1e-12)
        np.testing.assert_allclose(traj["qd"][b, -1], qd, rtol=0, atol=1e-11)
    loss = tisim.losses.TerminalTarget({"q": np.r_[0.1, 0.1, 0.1, 1, 0, 0, 0, 0.1], "qd": np.zeros(7)})
    # 1e-5: the stiff laws amplify the differences' rounding (measured: at most 9e-7 over the sampled entries)
    report = tisim.gradcheck(sim, loss, step=1e-6, max_entries=12, extrapolate=True)
    assert report.worst <= 1e-5, str(report)


def bar_and_ball(shape):
    """A fixed capsule (radius 0.05, along x, its axis 1 m up) and a free sphere (radius 0.1) or capsule (radius
    0.04, along y: crossing the bar) of 2 kg, 1 cm above touching it, Euler at 1 ms. Friction 0.3: rolling along
    the bar is neutral, and the regularized friction law's explicit step would amplify the round-off that starts
    it at 1 (dt mu g (1 + m r^2 / I) / eps > 2 for a 1 cm/s eps)."""
    b = Builder(shape, timestep=0.001, integrator="euler")
    bar = b.body(0, pos=(0, 0, 1.0))  # no joint: welded to the world
    rod = b.capsule(bar, 0.05, 0.5, quat=(np.sqrt(0.5), 0, np.sqrt(0.5), 0), friction=0.3)
    reach = 0.15 if shape == "sphere" else 0.09
    body = b.body(0, pos=(0.1, 0, 1.0 + reach + 0.01), mass=2.0, inertia=(0.01, 0.01, 0.01))
    b.free(body)
    if shape == "sphere":
        other = b.sphere(body, 0.1, friction=0.3)
    else:
        other = b.capsule(body, 0.04, 0.3, quat=(np.sqrt(0.5), np.sqrt(0.5), 0, 0), friction=0.3)
    b.pair(rod, other)
    return b.build(), reach


@pytest.mark.parametrize("shape", ["sphere", "capsule"])
def test_a_body_rests_on_a_bar_where_the_penalty_carries_its_weight(shape):
    """Dropped onto a fixed horizontal capsule, a sphere and a capsule laid across it come to rest above its axis at
    the sum of the radii less m g / k (one contact carrying the weight), not turned and not slid."""
    tree, reach = bar_and_ball(shape)
    sim = Articulation(horizon=3000, tree=tree)
    k = sim.params["contact_stiffness"][0]
    traj = sim.rollout()
    np.testing.assert_allclose(traj["q"][0, -1, :3], [0.1, 0.0, 1.0 + reach - 2.0 * G / k], rtol=0, atol=1e-9)
    np.testing.assert_allclose(traj["q"][0, -1, 3:], [1, 0, 0, 0], atol=1e-9)
    assert np.abs(traj["qd"][0, -1]).max() < 1e-6


def test_a_sphere_rests_on_a_box_where_the_penalty_carries_its_weight():
    """Dropped onto a fixed box (a slab 0.6 m square, its top 0.6 m up), off its centre, a free sphere of 2 kg comes
    to rest on the top face, its centre a radius less m g / k above it, neither turned nor slid."""
    b = Builder("on_a_box", timestep=0.001, integrator="euler")
    slab = b.box(b.body(0, pos=(0, 0, 0.5)), (0.3, 0.3, 0.1), friction=0.3)
    ball = b.body(0, pos=(0.05, -0.02, 0.705), mass=2.0, inertia=(0.01, 0.01, 0.01))
    b.free(ball)
    b.pair(b.sphere(ball, 0.1, friction=0.3), slab)
    sim = Articulation(horizon=1500, tree=b.build())
    k = sim.params["contact_stiffness"][0]
    traj = sim.rollout()
    np.testing.assert_allclose(traj["q"][0, -1, :3], [0.05, -0.02, 0.7 - 2.0 * G / k], rtol=0, atol=1e-9)
    np.testing.assert_allclose(traj["q"][0, -1, 3:], [1, 0, 0, 0], atol=1e-9)
    assert np.abs(traj["qd"][0, -1]).max() < 1e-6


def point_box_distance(local, half_widths):
    return float(np.linalg.norm(np.maximum(np.abs(local) - half_widths, 0.0)))


def segment_box_distance(a, b, half_widths):
    """The distance of the segment from a to b (box coordinates) from a box, by an independent search: the point
    distance is convex along the segment, so the best of a fine sampling, refined by ternary search."""
    s = np.linspace(0.0, 1.0, 4001)
    d = np.linalg.norm(np.maximum(np.abs(a + s[:, None] * (b - a)) - half_widths, 0.0), axis=1)
    i = int(np.argmin(d))
    low, high = s[max(i - 1, 0)], s[min(i + 1, len(s) - 1)]
    for _ in range(100):
        m1, m2 = low + (high - low) / 3, high - (high - low) / 3
        if point_box_distance(a + m1 * (b - a), half_widths) <= point_box_distance(a + m2 * (b - a), half_widths):
            high = m2
        else:
            low = m1
    return min(point_box_distance(a + low * (b - a), half_widths), float(d[i]))


def test_a_capsule_presses_into_a_box_as_deep_as_its_axis_comes_near():
    """At 2,000 random poses of a capsule near a turned box (its axis outside the box), the deepest of the contact
    points is the radius less the axis' distance from the box, found by an independent search, to 1e-12 m; the
    normal there points from the box to the axis. A capsule lying on a face touches at its two ends; one lying
    across the box, level, at the two points above the edges it crosses; one hanging over an edge, at its end on
    the face and above the edge; tilted by 1 mrad either way across the box, the two points' forces change by
    that much and no more (no point comes or goes)."""
    identity = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))

    def points(start, end, radius, half_widths, rotation=identity, centre=(0.0, 0.0, 0.0)):
        axis = tuple(np.subtract(end, start))
        found = capsule_box_points(tuple(start), axis, float(np.dot(axis, axis)), radius,
                                   (tuple(centre), rotation, tuple(half_widths)), dy.NUMPY)
        return [(np.array(n, dtype=float), np.array(y, dtype=float), float(d)) for n, y, d in found]

    rng = np.random.default_rng(0)
    checked = 0
    while checked < 2000:
        h, radius = rng.uniform(0.05, 0.4, 3), rng.uniform(0.02, 0.2)
        quat = rng.normal(size=4)
        turn = np.array(quat_matrix(quat))
        a = rng.uniform(-0.8, 0.8, 3)
        b = a + 0.4 * rng.normal(size=3)
        distance = segment_box_distance(a, b, h)
        if distance < 1e-6:
            continue
        centre = 0.1 * rng.normal(size=3)
        found = points(turn @ a + centre, turn @ b + centre, radius, h, tuple(map(tuple, turn)), centre)
        n, y, depth = max(found, key=lambda point: point[2])
        assert depth == pytest.approx(radius - distance, abs=1e-12)
        near = turn.T @ (y - centre) + (radius - depth / 2) * (turn.T @ n)  # back on the axis
        assert point_box_distance(near, h) == pytest.approx(distance, abs=1e-9)
        checked += 1

    h, r, sink = np.array([0.1, 0.3, 0.2]), 0.05, 0.001
    top = 0.2 + r - sink

    def touching(centre, half_length, tilt=0.0):
        d = np.array([np.cos(tilt), 0.0, np.sin(tilt)])
        return [(n, y, depth) for n, y, depth in points(centre - half_length * d, centre + half_length * d, r, h)
                if depth > 0]

    on_face = touching(np.array([0.0, 0.1, top]), 0.05)
    np.testing.assert_allclose(sorted(y[0] for _, y, _ in on_face), [-0.05, 0.05], atol=1e-15)
    across = touching(np.array([0.02, 0.1, top]), 0.4)
    np.testing.assert_allclose(sorted(y[0] for _, y, _ in across), [-0.1, 0.1], atol=1e-15)
    over = touching(np.array([0.12, 0.1, top]), 0.05)
    np.testing.assert_allclose(sorted(y[0] for _, y, _ in over), [0.07, 0.1], atol=1e-15)
    for found in (on_face, across, over):
        for n, y, depth in found:
            np.testing.assert_allclose(n, [0, 0, 1], atol=1e-15)
            assert depth == pytest.approx(sink, abs=1e-14) and y[2] == pytest.approx(0.2 - sink / 2, abs=1e-14)
    for tilt in (-1e-3, 1e-3):  # the lower crossing tips over its edge: its depth is the distance to the edge's
        tilted = sorted(touching(np.array([0.02, 0.1, top]), 0.4, tilt), key=lambda point: point[1][0])
        assert len(tilted) == 2
        for (_, _, depth), side in zip(tilted, (-0.1, 0.1)):
            height = top - 0.2 + (side - 0.02) * np.tan(tilt)  # of the axis above the edge
            lower = (side - 0.02) * tilt < 0
            assert depth == pytest.approx(r - height * (np.cos(tilt) if lower else 1.0), abs=1e-14)


def test_two_boxes_touch_at_the_points_mujoco_finds():
    """At 300 poses of two boxes of random sizes pressed 2 mm into each other along a random direction (100 turned
    at random, 100 within 0.05 rad of each other's axes, 100 on each other's axes), the points where they touch are
    those of MuJoCo's own box-box collision (an independent implementation): as many (one to four), at the same
    places to 1e-9 m (the faces are clipped with a 1e-12 m margin), as deep to 1e-12 m, along the same normal to
    1e-14."""
    mujoco = pytest.importorskip("mujoco")
    xml = ('<mujoco><worldbody><body><freejoint/><geom type="box" size="{}"/></body>'
           '<body><freejoint/><geom type="box" size="{}"/></body></worldbody></mujoco>')
    identity = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
    rng = np.random.default_rng(0)
    counts = set()
    for trial in range(300):
        h_a, h_b = rng.uniform(0.05, 0.3, 3), rng.uniform(0.05, 0.3, 3)
        m = mujoco.MjModel.from_xml_string(xml.format(" ".join(map(str, h_a)), " ".join(map(str, h_b))))
        d = mujoco.MjData(m)
        axis, direction = rng.normal(size=3), rng.normal(size=3)
        angle = rng.uniform(0.0, (np.pi, 0.05, 0.0)[trial // 100])
        quat = np.r_[np.cos(angle / 2), np.sin(angle / 2) * axis / np.linalg.norm(axis)]
        direction /= np.linalg.norm(direction)

        def mujocos(distance):
            d.qpos[:] = np.r_[distance * direction, quat, 0, 0, 0, 1, 0, 0, 0]
            mujoco.mj_forward(m, d)
            return [(d.contact.pos[i].copy(), -d.contact.dist[i], -d.contact.frame[i][:3]) for i in range(d.ncon)]
        low, high = 0.0, 1.5  # where MuJoCo's deepest point is 2 mm deep
        for _ in range(60):
            middle = 0.5 * (low + high)
            deep = max([depth for _, depth, _ in mujocos(middle)], default=-1.0) > 0.002
            low, high = (middle, high) if deep else (low, middle)
        theirs = mujocos(low)
        first = (tuple(low * direction), tuple(map(tuple, quat_matrix(quat))), tuple(h_a))
        ours = [(np.array(n, dtype=float), np.array(y, dtype=float), float(depth))
                for n, y, depth in box_box_points(first, ((0.0, 0.0, 0.0), identity, tuple(h_b)), dy.NUMPY)
                if depth > 0]
        assert len(ours) == len(theirs), trial
        counts.add(len(ours))
        for n, y, depth in ours:
            at, their_depth, normal = min(theirs, key=lambda contact: np.linalg.norm(contact[0] - y))
            np.testing.assert_allclose(y, at, rtol=0, atol=1e-9)
            assert depth == pytest.approx(their_depth, abs=1e-12)
            np.testing.assert_allclose(n, normal, rtol=0, atol=1e-14)
    assert counts == {1, 2, 3, 4}


def test_a_capsule_and_a_box_rest_across_a_narrow_box_where_the_penalty_carries_their_weight():
    """A free capsule and a free box of 2 kg, dropped from 1 cm across a narrow box each (their ends overhanging),
    come to rest level, neither turned nor slid, sunk by m g / (n k): the capsule on the two points where it
    crosses the edges, the box on the four corners of the overlap. (Resting on a face, on its ends or corners, is
    the geometry the tests above check.)"""
    b = Builder("across_boxes", timestep=0.001, integrator="euler")
    rests = []
    for x, shape in enumerate(("capsule", "box")):
        support = b.box(b.body(0, pos=(x, 0.0, 0.5)), (0.05, 0.3, 0.1), friction=0.3)
        # inertias that the explicit friction step keeps stable: dt mu g (1 + m r^2 / I) / eps below 2
        body = b.body(0, pos=(x, -0.02, 0.66), mass=2.0, inertia=(0.05, 0.05, 0.05))
        b.free(body)
        if shape == "capsule":
            b.pair(b.capsule(body, 0.05, 0.3, quat=(np.sqrt(0.5), 0, np.sqrt(0.5), 0), friction=0.3), support)
        else:
            b.pair(b.box(body, (0.3, 0.1, 0.05), friction=0.3), support)
        rests.append((x, 2 if shape == "capsule" else 4))
    sim = Articulation(horizon=1500, tree=b.build())
    k = sim.params["contact_stiffness"][0]
    traj = sim.rollout()
    for body, (x, points) in enumerate(rests):  # the capsule's radius and the box's half-height: 0.05
        q = traj["q"][0, -1, 7 * body:7 * body + 7]
        np.testing.assert_allclose(q[:3], [x, -0.02, 0.65 - 2.0 * G / (points * k)], rtol=0, atol=1e-9)
        np.testing.assert_allclose(q[3:], [1, 0, 0, 0], atol=1e-9)
    assert np.abs(traj["qd"][0, -1]).max() < 1e-6


def colliding(friction, shapes="sphere-capsule"):
    """A free sphere or capsule and a free capsule or box (each frame at its body's centre of mass), turned off the
    axes, thrown at each other off centre and spinning, with no gravity. The first's friction is 3/4 of the
    second's: the pair takes the larger, which has a derivative only where the two differ."""
    b = Builder("colliding", gravity=(0, 0, 0), timestep=0.0005, integrator="rk4")
    a = b.body(0, pos=(-0.3, 0, 0), mass=1.0, inertia=(0.004, 0.005, 0.006))
    b.free(a)
    c = b.body(0, pos=(0.3, 0.05, 0.02), mass=2.0, inertia=(0.01, 0.02, 0.03))
    b.free(c)
    turned = (0.9, 0.3, 0.2, 0.1)
    first, second = shapes.split("-")
    other = b.capsule(c, 0.05, 0.2, quat=turned, friction=friction) if second == "capsule" else \
        b.box(c, (0.05, 0.2, 0.04), quat=turned, friction=friction)
    if first == "sphere":
        one = b.sphere(a, 0.1, friction=0.75 * friction)
    elif first == "capsule":
        one = b.capsule(a, 0.08, 0.1, quat=(0.8, 0.0, 0.6, 0.0), friction=0.75 * friction)
    else:
        one = b.box(a, (0.08, 0.06, 0.1), quat=(0.8, 0.0, 0.6, 0.0), friction=0.75 * friction)
    b.pair(one, other)
    return b.build()


def momenta(tree, q, qd):
    """Linear and angular momentum (about the world origin) and kinetic energy of free bodies, from their
    coordinates and velocities (each body's frame velocity in the world, angular velocity in its frame)."""
    xpos, xmat = body_poses(tree, q)
    linear, angular, energy = np.zeros(3), np.zeros(3), 0.0
    for j, body in enumerate(tree.joint_body):
        v, w = qd[6 * j:6 * j + 3], xmat[body] @ qd[6 * j + 3:6 * j + 6]
        c = xpos[body] + xmat[body] @ tree.ipos[body]
        vc = v + np.cross(w, c - xpos[body])
        inertia = xmat[body] @ np.diag(tree.inertia[body]) @ xmat[body].T  # iquat is the identity here
        m = tree.mass[body]
        linear += m * vc
        angular += inertia @ w + m * np.cross(c, vc)
        energy += 0.5 * m * vc @ vc + 0.5 * w @ inertia @ w
    return linear, angular, energy


@pytest.mark.parametrize("friction", [0.0, 0.8])
@pytest.mark.parametrize("shapes", ["sphere-capsule", "sphere-box", "capsule-box", "box-box"])
def test_two_bodies_in_contact_keep_their_momentum(shapes, friction):
    """A sphere strikes a capsule or a box, a capsule a box, a box a box, off centre (semi-implicit Euler, 0.6 s).
    The contact forces are equal and opposite at each point: the linear momentum, linear in the velocities (each
    frame at its body's centre of mass), stays what it was to round-off; the angular momentum about the origin
    drifts only by the step's first-order error, halving when the step halves (measured: 2.5e-4 to 1.6e-3 of itself
    at 0.5 ms, ratio 2.00; two boxes, whose points come and go as faces and edges take over, 2.08 and 2.18).
    Frictionless and undamped, the kinetic energy after the impact is what it was before to the step's error
    (measured: 4e-4 and 8e-5 at 0.5 ms, 3.5 to 5 times less at 0.25 ms; a capsule's points over a box's face slide
    along it as it turns, and its error falls more slowly: 2.3e-4, 1.5e-4, 9e-5 at 0.5, 0.25, 0.125 ms). Two boxes
    do not keep it: this impact sinks them 18 mm into each other, where the direction they overlap least along
    passes from an edge's to a face's and from one face to another, and the points change at depth as it does
    (7.8% of the energy gained at 0.5 ms, 6.7% at 0.125 ms; blending the edge's point with the face's over a band
    still left 6%). A force applied off the line, or not equal and opposite, would leave a drift that no step
    removes."""
    tree = colliding(friction, shapes)
    tree.integrator = "euler"  # the gradient test's step: one compile for both
    q0 = reference_coordinates(tree)
    qd0 = np.r_[2.0, 0.1, 0.0, 0.0, 0.0, 3.0, -0.5, 0.0, 0.0, 1.0, -2.0, 0.5]
    linear0, angular0, energy0 = momenta(tree, q0, qd0)
    drift, heat = [], []
    for dt in (0.0005, 0.00025):
        sim = Articulation(horizon=int(round(0.6 / dt)), dt=dt, tree=tree)
        if friction == 0.0:
            sim.set_params(contact_damping=0.0)
        sim.set_initial_state(q=q0, qd=qd0)
        traj = sim.rollout()
        linear, angular, energy = momenta(tree, traj["q"][0, -1], traj["qd"][0, -1])
        np.testing.assert_allclose(linear, linear0, rtol=0, atol=1e-14 * np.abs(linear0).max())
        drift.append(np.abs(angular - angular0).max() / np.abs(angular0).max())
        heat.append(abs(energy / energy0 - 1))
        gap = np.linalg.norm(traj["q"][0, :, :3] - traj["q"][0, :, 7:10], axis=1)
        assert np.abs(traj["qd"][0, -1, :3] - qd0[:3]).max() > 1.0  # the sphere was struck
        assert gap[-1] > gap[-100] + 0.005  # and the two part
    assert drift[0] < 2e-3, drift
    if shapes == "box-box":
        assert 1.9 < drift[0] / drift[1] < 2.3, drift
    else:
        assert drift[0] / drift[1] == pytest.approx(2.0, rel=0.02), drift
    if friction == 0.0 and shapes == "capsule-box":  # its points over a face slide along it: slower, still down
        assert heat[0] < 1e-3 and heat[0] / heat[1] > 1.3, heat
    elif friction == 0.0 and shapes != "box-box":
        assert heat[0] < 1e-3 and heat[0] / heat[1] > 3.0, heat
    elif friction > 0.0:
        assert energy < 0.5 * energy0


@pytest.mark.parametrize("shapes", ["sphere-capsule", "sphere-box", "capsule-box", "box-box"])
def test_touching_bodies_step_as_numpy_does_and_their_gradients_are_right(shapes):
    """Two colliding bodies with friction and a soft law: the Taichi rollout equals the numpy step, and every
    gradient group matches Richardson-extrapolated float64 central differences."""
    tree = colliding(0.8, shapes)
    tree.integrator = "euler"
    sim = Articulation(horizon=40, tree=tree)
    sim.set_params(contact_softness=0.002)
    q0 = reference_coordinates(tree)
    q0[0] = q0[7] - {"capsule-box": 0.22, "box-box": 0.17}.get(shapes, 0.26)  # pressed together from the start
    qd0 = np.r_[0.5, 0.1, 0.05, 0.1, -0.2, 3.0, -0.5, 0.02, 0.01, 1.0, -2.0, 0.5]
    sim.set_initial_state(q=q0, qd=qd0)
    traj = sim.rollout()
    q, qd = q0, qd0
    for _ in range(40):
        q, qd = dy.numpy_step(tree, q, qd, [], params={k: v[0] for k, v in sim.params.items()})
    np.testing.assert_allclose(traj["q"][0, -1], q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(traj["qd"][0, -1], qd, rtol=0, atol=1e-11)
    loss = tisim.losses.TerminalTarget({"q": np.r_[0.0, 0.0, 0.0, 1, 0, 0, 0, 0.5, 0.0, 0.0, 1, 0, 0, 0]})
    report = tisim.gradcheck(sim, loss, step=1e-6, max_entries=12, extrapolate=True)
    assert report.worst <= 1e-5, str(report)


@pytest.fixture(scope="module")
def gymnasium_assets():
    gymnasium = pytest.importorskip("gymnasium")
    pytest.importorskip("mujoco")
    import os
    return os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")


def test_the_ants_contacts_and_limits_load(gymnasium_assets):
    """Gymnasium's ant: its floor touches the torso's sphere and the legs' twelve capsules (MuJoCo's filter: the
    legs never touch each other), its hips and ankles are limited."""
    tree = load_mjcf(f"{gymnasium_assets}/ant.xml")
    names = tree.geom_names
    assert [names[p] for p, _ in tree.contact_pairs] == ["floor"] * 13
    assert names[tree.contact_pairs[0][1]] == "torso_geom" and tree.limited.sum() == 8
    assert len(dy.structure_of(tree).contacts) == 1 + 12 * 2  # a sphere, and two ends per capsule


def test_the_hoppers_own_capsules_touch(gymnasium_assets):
    """Gymnasium's hopper: MuJoCo's filter lets its torso touch its leg and foot and its thigh its foot (not
    parent and child); these load as touching pairs beside the floor's four."""
    tree = load_mjcf(f"{gymnasium_assets}/hopper.xml", ignore=("ref",))
    names = tree.geom_names
    shapes = sorted(tuple(sorted((names[a], names[b]))) for a, b in tree.contact_pairs if names[a] != "floor")
    assert shapes == [("foot_geom", "thigh_geom"), ("foot_geom", "torso_geom"), ("leg_geom", "torso_geom")]
    assert len(dy.structure_of(tree).touches) == 3


def test_contacts_other_than_those_simulated_are_refused_by_name():
    xml = ('<mujoco model="m"><worldbody><geom name="floor" type="plane" size="1 1 0.1"/>'
           '<body name="a" pos="0 0 1"><freejoint/><geom name="ga" type="{first}" size="0.1 0.1 0.1"/></body>'
           '<body name="b" pos="0 0 2"><freejoint/><geom name="gb" type="{kind}" size="0.1 0.1 0.1"/></body>'
           '</worldbody></mujoco>')
    for first, kind in (("cylinder", "box"), ("box", "ellipsoid")):
        with pytest.raises(ValueError, match="geom 'ga' with geom 'gb': could collide: only spheres, capsules and "
                                             "boxes touching each other or a plane of the world are simulated"):
            load_mjcf(xml.format(first=first, kind=kind))
    for first, kind in (("sphere", "capsule"), ("sphere", "box"), ("capsule", "box"), ("box", "box")):
        tree = load_mjcf(xml.format(first=first, kind=kind))
        assert [[tree.geom_names[g] for g in pair] for pair in tree.contact_pairs] == [
            ["floor", "ga"], ["floor", "gb"], ["ga", "gb"]]
    with pytest.raises(ValueError, match="geom 'floor' with geom 'gb'"):
        load_mjcf(xml.format(first="sphere", kind="cylinder"))
    tree = load_mjcf(xml.format(first="box", kind="box"), ignore=("contacts",))
    assert len(tree.contact_pairs) == 0
    tree = load_mjcf(xml.format(first="box", kind="box"), ignore=("body_contacts",))
    assert [[tree.geom_names[g] for g in pair] for pair in tree.contact_pairs] == [["floor", "ga"], ["floor", "gb"]]


GYMNASIUM_ROBOTS = {"ant.xml": (), "half_cheetah.xml": (), "hopper.xml": ("ref",),
                    "walker2d.xml": ("ref",), "inverted_double_pendulum.xml": (), "reacher.xml": ("ref",),
                    "point.xml": (), "pusher.xml": ("body_contacts",)}


@pytest.mark.stress
@pytest.mark.parametrize("name", sorted(GYMNASIUM_ROBOTS))
def test_gymnasiums_robots_run_ten_seconds_of_random_actions(name, gymnasium_assets):
    """Each Gymnasium robot that loads, with its contacts and limits (but the pusher's between its own bodies: a
    cylinder), stepped by Euler at 2 ms, runs 10 s of random actions (redrawn every 50 ms) and stays finite, its
    shapes never more than 5 cm into the floor."""
    tree = load_mjcf(f"{gymnasium_assets}/{name}", ignore=GYMNASIUM_ROBOTS[name])
    tree.integrator, tree.timestep = "euler", 0.002
    sim = Articulation(horizon=5000, tree=tree)
    rng = np.random.default_rng(0)
    sim.set_actions(np.repeat(rng.uniform(-1, 1, (200, sim.n_actuators)), 25, axis=0))
    traj = sim.rollout()
    assert np.isfinite(traj["q"]).all() and np.isfinite(traj["qd"]).all()
    points = dy.structure_of(tree).contacts
    for t in range(0, 5001, 250):
        xpos, xmat = body_poses(tree, traj["q"][0, t])
        gaps = [np.dot(p.normal, xpos[p.body] + xmat[p.body] @ p.point) - p.offset - p.radius for p in points]
        assert min(gaps, default=0.0) > -0.05, (t, min(gaps))
