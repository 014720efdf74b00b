"""Headless pictures of rollouts: one drawing per system on the rasterizer of tisim/viz/raster.py, and frames.

Nothing here simulates. A drawing reads one time step of a rollout, {state name: float}, and the system's parameters,
{name: float}, and paints it onto a ``Canvas`` in world coordinates [m] (x right, y up). ``frames`` turns a rollout
{state name: array (B, T+1)} into uint8 images (H, W, 3); ``save_gif`` writes them with a small shared palette
that keeps the subject's colours; ``caption`` writes a line of text into the pictures (matplotlib's FreeType
rasterizes it, no figure).
Plots of losses, trajectories and adjoints are in ``tisim.plots``.

    DRAW[class name](canvas, state, params)   paints one step
    VIEWS[class name](traj, params)           world bounds (xmin, xmax, ymin, ymax) [m] that hold the whole rollout
"""
import math

import numpy as np

from tisim import systems
from tisim.core.quantities import near_miss
from tisim.viz.bodies import posed_mesh, with_tools
from tisim.viz.raster import (
    BALL,
    BLOCK,
    BOB,
    BOB_LOWER,
    CART,
    GROUND,
    HINGE,
    INK,
    MARK,
    MARKER,
    POLE,
    ROD,
    Canvas,
    write,
)
from tisim.viz.raster import caption as _caption  # frames() takes a caption argument of the same name
from tisim.viz.scene import Scene, fit_camera

CART_WIDTH, CART_HEIGHT, HINGE_HEIGHT = 0.4, 0.2, 0.15  # [m]; the pole's hinge is HINGE_HEIGHT above the track
POLE_WIDTH = 0.05  # [m]
BLOCK_SIDE = 0.2  # [m]; SlidingBlock declares no size




# ---- one drawing per system: (canvas, state {name: float}, params {name: float}) ------------------------------------
def draw_cartpole(canvas, state, params):
    """Cart on a track at y = 0; pole of length 2 l from the hinge, theta from upright, positive leaning right."""
    x, theta, l = state["x"], state["theta"], params["l"]
    canvas.line((canvas.view[0], 0.0), (canvas.view[1], 0.0), 2.0, INK)  # the track, across the picture
    canvas.rectangle((x, 0.5 * CART_HEIGHT), (CART_WIDTH, CART_HEIGHT), 0.0, CART)
    hinge = (x, HINGE_HEIGHT)
    tip = (x + 2 * l * math.sin(theta), HINGE_HEIGHT + 2 * l * math.cos(theta))
    canvas.line(hinge, tip, max(POLE_WIDTH * canvas.scale, 3.0), POLE)
    canvas.circle(hinge, 0.3 * POLE_WIDTH + 1.0 / canvas.scale, HINGE)


def _pivot(canvas, reach):
    canvas.line((-0.15 * reach, 0.0), (0.15 * reach, 0.0), 3.0, INK)


def _rod_and_bob(canvas, start, end, radius, color):
    canvas.line(start, end, max(0.02 * canvas.scale, 2.0), ROD)
    canvas.circle(end, radius, color)


def draw_pendulum(canvas, state, params):
    """Pivot at the origin; bob at (l sin theta, -l cos theta), theta from the downward vertical."""
    theta, l = state["theta"], params["l"]
    _pivot(canvas, l)
    _rod_and_bob(canvas, (0.0, 0.0), (l * math.sin(theta), -l * math.cos(theta)), 0.08 * l, BOB)


def draw_double_pendulum(canvas, state, params):
    """Pivot at the origin; both rod angles from the downward vertical."""
    (q1, q2), (l1, l2) = (state["theta1"], state["theta2"]), (params["l1"], params["l2"])
    elbow = (l1 * math.sin(q1), -l1 * math.cos(q1))
    end = (elbow[0] + l2 * math.sin(q2), elbow[1] - l2 * math.cos(q2))
    radius = 0.05 * (l1 + l2)
    _pivot(canvas, l1 + l2)
    _rod_and_bob(canvas, (0.0, 0.0), elbow, radius, BOB)
    _rod_and_bob(canvas, elbow, end, radius, BOB_LOWER)


def draw_bouncing_ball(canvas, state, params):
    """Floor y = 0; a disc of radius r centred at (px, py)."""
    canvas.ground(0.0)
    canvas.circle((state["px"], state["py"]), params["r"], BALL)


def draw_sliding_block(canvas, state, params):
    """Floor y = 0; a square of side BLOCK_SIDE whose centre is at x."""
    canvas.ground(0.0)
    canvas.rectangle((state["x"], 0.5 * BLOCK_SIDE), (BLOCK_SIDE, BLOCK_SIDE), 0.0, BLOCK)


RIGID_COLORS = (BALL, BLOCK, POLE, HINGE, BOB, BOB_LOWER)  # Rigid2D bodies, in turn


def _rigid2d_bodies(state, params):
    """[(kind, centre, angle, size)] per body: ("disc", (px, py), angle, r) or ("box", ..., (width, height)).

    Which bodies are discs comes from the per-body sizes: r of shape (n_discs,), or hx and hy of shape (n_boxes,);
    with scalar sizes only (the declared defaults), every body is a disc."""
    n_bodies = len(np.atleast_1d(state["px"]))
    r, hx, hy = (np.asarray(params[k], np.float64) for k in ("r", "hx", "hy"))
    n_discs = r.size if r.ndim else n_bodies - hx.size if hx.ndim else n_bodies
    bodies = []
    for i, (px, py, angle) in enumerate(zip(*(np.atleast_1d(state[k]) for k in ("px", "py", "angle")))):
        if i < n_discs:
            bodies.append(("disc", (px, py), angle, float(r[i] if r.ndim else r)))
        else:
            j = i - n_discs
            bodies.append(("box", (px, py), angle, (2.0 * float(hx[j] if hx.ndim else hx),
                                                    2.0 * float(hy[j] if hy.ndim else hy))))
    return bodies


def _floor_drawn(params):
    ground = params.get("ground")
    if ground is None:
        return params.get("g", 9.8) > 0
    return ground == "on" if isinstance(ground, str) else bool(ground)


def draw_rigid2d(canvas, state, params):
    """Rigid2D: discs with a radius marking their angle and boxes turned by theirs, over the floor y = 0.

    state: {name: array (n_bodies,)}; params: one batch element's parameters with per-body arrays, e.g.
    {k: v[b] for k, v in sim.params.items()}. The floor is drawn when params["ground"] ("on" / "off", or 1 / 0)
    says so, by default when g > 0 (with g = 0 a picture is usually a top view, as of a billiard table).
    """
    if _floor_drawn(params):
        canvas.ground(0.0)
    for i, (kind, centre, angle, size) in enumerate(_rigid2d_bodies(state, params)):
        color = RIGID_COLORS[i % len(RIGID_COLORS)]
        if kind == "disc":
            canvas.circle(centre, size, color)
            rim = (centre[0] + 0.8 * size * math.cos(angle), centre[1] + 0.8 * size * math.sin(angle))
            canvas.line(centre, rim, 1.5, INK)
        else:
            canvas.rectangle(centre, size, angle, color)


def draw_mass_spring(canvas, state, params):
    """Floor y = 0; the obstacles (discs and boxes, when there are); springs as lines between the particles
    (params["springs"], pairs of particle indices, when the picture comes from a simulator) and the particles as
    dots."""
    canvas.ground(0.0)
    for centre, radius in obstacles(params, "sphere_center", "sphere_radius"):
        canvas.circle(centre, radius, GROUND)
    for centre, half in obstacles(params, "box_center", "box_half"):
        canvas.rectangle(centre, 2 * np.asarray(half), 0.0, GROUND)
    pos = np.asarray(state["pos"])
    for i, j in params.get("springs", ()):
        canvas.line(pos[i], pos[j], 1.2, ROD)
    for p in pos:
        canvas.circle(p, 2.0 / canvas.scale, BOB)
    for centre, radius in balls(state, params):
        canvas.circle(centre, radius, BLOCK)


def draw_mpm(canvas, state, params):
    """A 2D material-point body: the floor at the top of the grid's boundary band, the points as dots."""
    canvas.ground(3.0 / params.get("n_grid", 32))
    for p in np.asarray(state["pos"]):
        canvas.circle(p[:2], 1.5 / canvas.scale, BOB)


def draw_shaping(canvas, state, params):
    """MPM material shaped by tools: a target shape's points first, when params has one ("target", (N, 2)), as
    rings, then the material and its tools, rounded boxes."""
    for p in np.asarray(params.get("target", np.zeros((0, 2))), float):
        canvas.circle(p[:2], 2.0 / canvas.scale, MARK, filled=False, width_px=1.0)
    draw_mpm(canvas, state, params)
    draw_tools(canvas, state, params)


def draw_tools(canvas, state, params):
    """Tools (tisim.systems.mpm.Tool), rounded boxes at their angles (zero where the state has none): two crossed
    rectangles and a disc at each corner."""
    centres = np.asarray(state["tool_pos"], float).reshape(-1, 2)
    angles = np.ravel(state.get("tool_angle", np.zeros(len(centres))))
    halves = np.asarray(params["tool_half"], float).reshape(-1, 2)
    for centre, angle, half, radius in zip(centres, angles, halves, np.ravel(params["tool_radius"])):
        canvas.rectangle(centre, 2 * (half + [radius, 0.0]), angle, ROD)
        canvas.rectangle(centre, 2 * (half + [0.0, radius]), angle, ROD)
        turn = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
        for corner in ([-1, -1], [-1, 1], [1, -1], [1, 1]) if radius > 0 else ():
            canvas.circle(centre + turn @ (half * corner), radius, ROD)


def draw_manipulation(canvas, state, params):
    """A mass-spring body and the kinematic tools that handle it."""
    draw_mass_spring(canvas, state, params)
    draw_tools(canvas, state, params)


def balls(state, params):
    """[(centre, radius), ...] of a mass-spring simulator's free balls in one state (none if it has none)."""
    if "ball_pos" not in state or "ball_radius" not in params:
        return []
    return list(zip(np.asarray(state["ball_pos"], dtype=float).reshape(-1, np.shape(state["pos"])[-1]),
                    np.asarray(params["ball_radius"], dtype=float).ravel()))


def obstacles(params, centres, sizes):
    """[(centre, size), ...] of one kind of obstacle from one batch element's parameters (none if absent)."""
    return list(zip(np.asarray(params[centres], float), np.asarray(params[sizes], float))) if centres in params else []


def points_mass_spring(state, params):
    """A 3D mass-spring body: its surface where it has faces (a cloth), its springs as lines otherwise, its
    particles (pinned ones darker), the obstacles and the floor."""
    pos = np.asarray(state["pos"])
    faces = np.asarray(params.get("faces", np.zeros((0, 3), int)))
    springs = np.asarray(params.get("springs", np.zeros((0, 2), int)))
    pinned = np.zeros(len(pos), bool)
    pinned[list(params.get("pinned", []))] = True
    colors = np.where(pinned[:, None], np.array(ROD) / 255, np.array(BOB) / 255)
    picture = dict(points=pos, colors=colors, radius=0.004 if len(faces) else 0.006, floor=0.0,
                   floor_extent=(-4.0, 5.0, -4.0, 5.0),  # the plane y = 0, as far as a picture sees
                   spheres=obstacles(params, "sphere_center", "sphere_radius") + balls(state, params),
                   boxes=obstacles(params, "box_center", "box_half"))
    if len(faces):
        picture["mesh"] = (pos, faces)
    elif len(springs):
        picture["segments"] = pos[springs]
    if len(params.get("markers", ())):
        picture.update(markers=pos[np.asarray(params["markers"], int)], marker_radius=0.012 if len(faces) else 0.01)
    return picture


def points_mpm(state, params):
    """A 3D material-point body: its points (actuated ones darker) as spheres of half a point spacing, the floor."""
    n_grid = params.get("n_grid", 32)
    actuated = np.asarray(params.get("actuated", np.zeros(len(state["pos"]), bool)))[:, None]
    colors = np.where(actuated, np.array(BOB) / 255 * 0.7, np.array(BLOCK) / 255)
    picture = dict(points=state["pos"], colors=colors, radius=0.25 / n_grid, floor=3.0 / n_grid)
    if len(params.get("markers", ())):
        picture.update(markers=np.asarray(state["pos"])[np.asarray(params["markers"], int)])
    return picture


DRAW = {
    "Cartpole": draw_cartpole,
    "Pendulum": draw_pendulum,
    "DoublePendulum": draw_double_pendulum,
    "BouncingBall": draw_bouncing_ball,
    "SlidingBlock": draw_sliding_block,
    "Rigid2D": draw_rigid2d,
    "MassSpring": draw_mass_spring,
    "MPM": draw_mpm,
    "Shaping": draw_shaping,  # and Sculpting and Coupled, its kinds
    "Manipulation": draw_manipulation,
    "Handling": draw_mass_spring,  # 3D: pictured by points_handling
    "Kneading": draw_mpm,  # 3D: pictured by points_kneading
}
# 3D bodies: {state, params} -> what tisim.scene.Scene.render takes
def points_shaping(state, params):
    """A 3D material-point body and its tools: a tool without half extents as a sphere, any other as the box that
    bounds it."""
    return with_tools(points_mpm(state, params), state, params)


def points_manipulation(state, params):
    """A 3D mass-spring body and its tools, as points_shaping draws them."""
    return with_tools(points_mass_spring(state, params), state, params)


def with_tree(picture, state, params):
    """A 3D picture with an articulated tree's spheres, capsules and boxes added (drawn by name, without the
    simulator, the tree is unknown and only the body is drawn)."""
    if "tree" in params:
        picture["solid"] = posed_mesh(params["tree"], state["q"])
    return picture


def points_handling(state, params):
    """A 3D mass-spring body and the articulated tree that handles it."""
    return with_tree(points_mass_spring(state, params), state, params)


def points_kneading(state, params):
    """A 3D material-point body and the articulated tree that kneads it."""
    return with_tree(points_mpm(state, params), state, params)


DRAW3D = {"MPM": points_mpm, "MassSpring": points_mass_spring, "Shaping": points_shaping,
          "Manipulation": points_manipulation, "Handling": points_handling, "Kneading": points_kneading}


def rollout_box(traj, params=None, marks=()):
    """(low, high) [m] of the box holding every position of a 3D rollout, the obstacles, the marks [(centre,
    radius, label)] and an articulated tree's shapes (params["tree"], at 20 of the steps of traj["q"]); not the
    floor (a hanging cloth would shrink to make room for it)."""
    params = params or {}
    pos = np.asarray(traj["pos"]).reshape(-1, 3)
    if "tree" in params and "q" in traj:
        q = np.asarray(traj["q"]).reshape(-1, np.shape(traj["q"])[-1])
        pos = np.concatenate([pos] + [posed_mesh(params["tree"], q[t])[0]
                                      for t in np.linspace(0, len(q) - 1, 20).astype(int)])
    low, high = pos.min(axis=0), pos.max(axis=0)
    extents = [(np.asarray(c, float), np.full(3, float(r))) for c, r in obstacles(params, "sphere_center",
                                                                                    "sphere_radius")]
    extents += [(np.asarray(c, float), np.asarray(h, float)) for c, h in obstacles(params, "box_center", "box_half")]
    extents += [(np.asarray(c, float), np.array([r, 0.0, r], float)) for c, r, *_ in marks]
    centres = np.asarray(traj.get("ball_pos", np.zeros((0, 3))), float).reshape(-1, 3)
    if len(centres):  # the free balls, wherever they went
        radius = np.max(params.get("ball_radius", 0.0), initial=0.0)
        extents += [(centres.min(axis=0), np.full(3, radius)), (centres.max(axis=0), np.full(3, radius))]
    for centre, half in extents:
        low, high = np.minimum(low, centre - half), np.maximum(high, centre + half)
    return low, high


def look_at_rollout(traj, params=None, size=(320, 240), marks=(), direction=(0.5, 0.6, 1.3), band=0):
    """(camera position, target) that frames every position of a 3D rollout, its obstacles and marks (see
    rollout_box), seen from ``direction`` (front right and above by default), as close as the picture allows below
    a band of ``band`` pixels at the top (a caption's)."""
    return look_at_rollouts([traj], params, size, marks, direction, band)


def look_at_rollouts(trajs, params=None, size=(320, 240), marks=(), direction=(0.5, 0.6, 1.3), band=0):
    """One camera for several rollouts of one scene (look_at_rollout's, framing them all), so that pictures of
    them side by side, a first plan and an optimized one, compare."""
    boxes = [rollout_box(traj, params, marks) for traj in trajs]
    return fit_camera(np.min([low for low, _ in boxes], axis=0), np.max([high for _, high in boxes], axis=0), size,
                      direction, band=band)


CAPTION_BAND = 19  # [px] a caption's height, its box included (12 pixel text)


LOOKS3D = {"MassSpring": look_at_rollout, "MPM": look_at_rollout, "Shaping": look_at_rollout,
           "Manipulation": look_at_rollout, "Handling": look_at_rollout,
           "Kneading": look_at_rollout}

# ---- default views: (traj {name: array (T+1,)}, params {name: float}) -> (xmin, xmax, ymin, ymax) [m] -------------
def view_cartpole(traj, params):
    """The track travelled, widened by the pole's reach; the pole upright and hanging."""
    reach = 2 * params["l"] + 0.1
    side = max(reach, 0.5 * CART_WIDTH + 0.1)
    return (traj["x"].min() - side, traj["x"].max() + side, HINGE_HEIGHT - reach, HINGE_HEIGHT + reach)


def view_pendulum(traj, params):
    """The circle the bob can reach."""
    reach = 1.15 * params["l"]
    return (-reach, reach, -reach, reach)


def view_double_pendulum(traj, params):
    """The circle the lower bob can reach."""
    reach = 1.1 * (params["l1"] + params["l2"])
    return (-reach, reach, -reach, reach)


def view_bouncing_ball(traj, params):
    """The ball's path and a strip of floor."""
    r = params["r"]
    top = max(traj["py"].max() + r, 4 * r)
    margin = 0.1 * top + r
    return (traj["px"].min() - margin, traj["px"].max() + margin, -margin, top + margin)


def view_sliding_block(traj, params):
    """The stretch of floor the block covers, at least 1 m wide."""
    low, high = traj["x"].min() - BLOCK_SIDE, traj["x"].max() + BLOCK_SIDE
    pad = max(0.5 - 0.5 * (high - low), 0.1)
    return (low - pad, high + pad, -0.1, BLOCK_SIDE + 0.2)


def view_rigid2d(traj, params):
    """Every body's path (traj: {name: array (T+1, n_bodies)}), widened by the largest body, and the floor when it
    is drawn (see draw_rigid2d)."""
    bodies = _rigid2d_bodies({k: v[0] for k, v in traj.items()}, params)
    reach = max(size if kind == "disc" else 0.5 * math.hypot(*size) for kind, _, _, size in bodies)
    margin = reach + 0.1 * max(np.ptp(traj["px"]), np.ptp(traj["py"]), 4 * reach)
    low = traj["py"].min() - margin
    if _floor_drawn(params):
        low = min(low, -margin)
    return (traj["px"].min() - margin, traj["px"].max() + margin, low, traj["py"].max() + margin)


def view_mass_spring(traj, params):
    """Every particle's path, with the floor."""
    x, y = traj["pos"][..., 0], traj["pos"][..., 1]
    margin = 0.1 * max(np.ptp(x), np.ptp(y), 0.2)
    return (x.min() - margin, x.max() + margin, min(y.min(), 0.0) - margin, y.max() + margin)


def view_manipulation(traj, params):
    """Every particle's and tool's path, with the floor."""
    return view_mass_spring({"pos": np.concatenate([traj["pos"], traj["tool_pos"]], axis=-2)}, params)


VIEWS = {
    "Cartpole": view_cartpole,
    "Pendulum": view_pendulum,
    "DoublePendulum": view_double_pendulum,
    "BouncingBall": view_bouncing_ball,
    "SlidingBlock": view_sliding_block,
    "Rigid2D": view_rigid2d,
    "MassSpring": view_mass_spring,
    "Manipulation": view_manipulation,
    "MPM": lambda traj, params: (0.0, 1.0, 0.0, 1.0),  # the grid's unit square
    "Shaping": lambda traj, params: (0.0, 1.0, 0.0, 1.0),
}


# ---- animations ---------------------------------------------------------------------------------------------------
def _one_element(traj, params, name, b):
    """One batch element: ({state: array (T+1, ...)}, {param: float or per-entity array}); params missing from
    ``params`` take the defaults that system ``name`` declares. Arrays in ``params`` have the batch axis first, as
    ``sim.params`` gives them; strings (options) pass as they are."""
    states = {k: np.asarray(v, np.float64) for k, v in traj.items()}
    if not states or any(v.ndim < 2 for v in states.values()):
        raise ValueError("frames: traj must map state names to arrays (B, T+1, ...), as rollout() returns")
    batch = len(next(iter(states.values())))
    if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or not 0 <= b < batch:
        raise ValueError(f"frames: batch_index must be an integer in [0, {batch}), got {b!r}")
    chosen = {q.name: float(q.default) for q in getattr(getattr(systems, name, None), "PARAMS", ())}
    for key, value in (params or {}).items():
        if isinstance(value, str):
            chosen[key] = value
            continue
        value = np.asarray(value, np.float64)
        one = value if value.ndim == 0 else value[b] if len(value) > 1 else value[0]
        chosen[key] = float(one) if np.ndim(one) == 0 else one
    return {k: v[b] for k, v in states.items()}, chosen


def _looks(system, traj, params, name, batch_index):
    """One batch element's states and what its drawing needs: its parameters and, from a simulator, its structure
    (sizes, options, a robot's springs, faces and pins, a body's actuated points)."""
    one, theta = _one_element(traj, system.params if params is None and not isinstance(system, str) else params,
                              name, batch_index)
    if not isinstance(system, str):
        theta.update({**system.sizes, **system.options})
        if hasattr(system, "robot"):
            theta.update(springs=system.robot.springs, faces=system.robot.faces, pinned=system.robot.pinned)
        if hasattr(system, "body"):
            theta["actuated"] = system.body.actuators >= 0
        if hasattr(system, "tree"):
            theta["tree"] = system.tree
    return one, theta


def drawn_as(system):
    """The name of a simulator's drawing (system: a simulator or a system's name): its class's or, where that has
    none, its nearest ancestor's (Coupled is drawn as Shaping); for a closed loop (tisim.policy.closed_loop) its
    open-loop system's, whose body it is."""
    cls = getattr(systems, system, None) if isinstance(system, str) else type(system)
    cls = getattr(cls, "OPEN_LOOP", None) or cls
    return next((c.__name__ for c in cls.__mro__ if c.__name__ in DRAW), cls.__name__) if cls else system


def orbit(system, traj, scene, *, every=20, rounds=None, distance=None, height=None):
    """Replay batch element 0 of a 3D rollout in ``scene`` (a tisim.scene.Scene, a window where a display exists),
    the camera circling the body's centre at `distance` and `height` [m] above it, until the window is closed or
    `rounds` replays were shown. By default the distance is the one at which the whole rollout fills the picture
    (look_at_rollout) and the height 0.4 of it. Returns the number shown."""
    name = drawn_as(system)
    if name not in DRAW3D or system.sizes.get("dim") != 3:
        raise ValueError(f"orbit: needs a 3D simulator with a 3D drawing ({sorted(DRAW3D)}), got {name}")
    one, theta = _looks(system, traj, None, name, 0)
    if distance is None:
        eye, at = look_at_rollout(one, theta, scene.size)
        distance = float(np.linalg.norm(eye - at))
    height = 0.4 * distance if height is None else height
    shown, angle = 0, 0.0
    while scene.window is not None and scene.window.running and rounds != shown:
        for t in range(0, len(one["pos"]), every):
            if not scene.window.running:  # closed, or Esc
                break
            centre = one["pos"][t].mean(axis=0)
            angle += 0.01
            scene.look(from_=centre + [distance * np.sin(angle), height, distance * np.cos(angle)], at=centre)
            scene.render(**DRAW3D[name]({k: v[t] for k, v in one.items()}, theta))
        shown += 1
    return shown


def frames(system, traj, params=None, *, batch_index=0, every=1, size=(320, 240), bounds=None, caption=None,
           dt=None, marks=(), markers=None, direction=(0.5, 0.6, 1.3), camera=None):
    """Pictures of one batch element of a rollout: a list of uint8 arrays (height, width, 3), one per ``every`` steps.

    system: a simulator (its class name picks the drawing; its ``params`` are used unless params is given) or a class
    name in DRAW. traj: {state name: array (B, T+1)}, as ``rollout`` returns. params: {name: float or array (B,)};
    missing names take the system's declared defaults. bounds: (xmin, xmax, ymin, ymax) [m], default VIEWS[name].
    caption: words written at the top left of every picture, followed by "t = ... s" (the step times dt, default the
    simulator's). marks: [(centre [m], radius [m], label)], a target or goal drawn in green with its label (in 3D a
    disc lying at the centre's height). markers: indices of particles drawn as dark dots (tracked points).
    A 3D simulator (sizes["dim"] == 3) is pictured through GGUI's 3D scene (tisim.scene), bounds unused: the camera,
    looking from ``direction``, frames the whole rollout, its obstacles and marks (look_at_rollout), unless camera =
    (position, target) [m] is given (to show several rollouts alike).
    """
    name = drawn_as(system)
    if name not in DRAW:
        raise ValueError(f"frames: no drawing for {name!r}; DRAW has {sorted(DRAW)}." + near_miss(name, list(DRAW)))
    if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
        raise ValueError(f"frames: every must be an integer >= 1, got {every!r}")
    one, theta = _looks(system, traj, params, name, batch_index)
    if markers is not None:
        theta["markers"] = np.asarray(markers, int)
    steps = range(0, len(next(iter(one.values()))), every)
    if theta.get("dim") == 3:  # through GGUI's 3D scene (WindowUnavailable without Vulkan)
        discs = [(np.asarray(c, float), float(r)) for c, r, *_ in marks]
        with Scene(size) as view:
            if camera is not None:
                view.look(*camera)
            elif name in LOOKS3D:  # bodies that roam: a camera that sees the whole rollout
                view.look(*LOOKS3D[name](one, theta, size, marks, direction, CAPTION_BAND if caption else 0))
            pictures = [view.render(**DRAW3D[name]({k: v[t] for k, v in one.items()}, theta), discs=discs)
                        for t in steps]
            for (centre, radius, *label) in marks:  # the label just below the disc's near edge
                if label and label[0]:
                    column, row = view.project(np.asarray(centre, float) + [0.0, 0.0, radius])
                    for picture in pictures:
                        write(picture, label[0], (column, row + 3), MARK, anchor="centre")
    else:
        if bounds is None:
            bounds = VIEWS[name](one, theta) if name in VIEWS else (-1.0, 1.0, -1.0, 1.0)
        pictures = []
        for t in steps:
            canvas = Canvas(size[0], size[1], bounds=bounds)
            state = {k: float(v[t]) if v.ndim == 1 else v[t] for k, v in one.items()}
            DRAW[name](canvas, state, theta)
            for centre, radius, *label in marks:
                canvas.circle(centre, radius, MARK, filled=False, width_px=2.5)
                if label and label[0]:
                    canvas.text((centre[0], centre[1] - radius), label[0], MARK, anchor="centre")
            if markers is not None:
                for p in np.asarray(state["pos"])[theta["markers"]]:
                    canvas.circle(p[:2], 3.5 / canvas.scale, MARKER)
            pictures.append(canvas.image())
    if caption is not None:
        dt = dt if dt is not None else getattr(system, "dt", None)
        times = None if dt is None else [t * float(dt) for t in steps]
        pictures = _caption(pictures, caption, times=times)
    return pictures
