"""Read a `Tree` from an MJCF model (or URDF, which MuJoCo imports), compiled by MuJoCo's own compiler
(``pip install mujoco``, or ``tisim[mjcf]``).

MuJoCo resolves defaults, units, inertia from geoms, `fromto` and the rest; this module only reads the compiled
model's arrays. Everything an Articulation will not simulate is refused, by name, before a Tree is returned, so a
loaded tree means the same dynamics as the file (up to what `ignore` names):

- contacts of a sphere, capsule or box with a plane on the world and with each other are simulated (tisim's penalty
  law, not MuJoCo's soft constraints: see the Articulation); any other pair of geoms that MuJoCo
  could collide is refused: `ignore=("body_contacts",)` drops the pairs that are not a shape on a plane (keeping
  the floor), and `ignore=("contacts",)` drops every pair (and every explicit <pair>);
- hinge and slide limits are simulated (tisim's penalty law, not MuJoCo's soft constraints); a limited ball joint is
  refused, and `ignore=("limits",)` drops every limit (the tree's joints come out unlimited; `joint_range` keeps
  the ranges);
- `ignore=("ref",)` accepts hinge and slide joints with a nonzero `ref`: the tree's q is then measured from the
  model's initial pose, q = qpos - qpos0 (ranges and spring references shift with it).

A joint's `margin` only changes when its limit engages, so it needs no refusal of its own.
"""
import os

import numpy as np

from tisim.systems.articulation.tree import BALL, BOX, CAPSULE, FREE, HINGE, PLANE, SLIDE, SPHERE, Tree

IGNORABLE = ("contacts", "body_contacts", "limits", "ref")

# MuJoCo's enums (mjtJoint, mjtIntegrator, mjtTrn, mjtDyn, mjtGain, mjtBias, mjtDisableBit), as plain numbers.
_FREE, _BALL, _SLIDE, _HINGE = 0, 1, 2, 3
_JOINTS = {_FREE: FREE, _BALL: BALL, _SLIDE: SLIDE, _HINGE: HINGE}
_GEOMS = {0: PLANE, 2: SPHERE, 3: CAPSULE, 6: BOX}  # mjtGeom: the shapes the contacts know
_INTEGRATORS = {0: "euler", 1: "rk4"}
_INTEGRATOR_NAMES = {2: "implicit", 3: "implicitfast", 4: "discrete"}
_TRN_JOINT, _TRN_JOINTINPARENT = 0, 1
_TRN_NAMES = {2: "a slider-crank", 3: "a tendon", 4: "a site", 5: "a body", 6: "a ball joint (so3)"}
_DSBL_CONSTRAINT, _DSBL_EQUALITY, _DSBL_FRICTIONLOSS, _DSBL_LIMIT, _DSBL_CONTACT = 1, 2, 4, 8, 16
_DSBL_SPRING, _DSBL_DAMPER, _DSBL_GRAVITY, _DSBL_CLAMPCTRL = 32, 64, 128, 256
_DSBL_FILTERPARENT, _DSBL_ACTUATION, _DSBL_EULERDAMP = 1024, 2048, 32768
_SHOWN = 4  # elements named per refusal before "and N more"


def load_mjcf(path_or_xml_string, ignore=()):
    """The Tree of an MJCF model: a file path, or the XML itself as a string (it starts with '<').

    Raises ValueError naming every element the articulation would not simulate (see the module docstring), with the
    file; `ignore` may name "contacts", "limits" and "ref" to accept those knowingly.
    """
    try:
        import mujoco
    except ImportError as error:
        raise ImportError("load_mjcf compiles MJCF with MuJoCo, which is not installed: pip install mujoco "
                          "(or pip install 'tisim[mjcf]')") from error
    ignore = _check_ignore(ignore)
    source = path_or_xml_string
    if isinstance(source, str) and source.lstrip().startswith("<"):
        try:
            model = mujoco.MjModel.from_xml_string(source)
        except ValueError as error:
            raise ValueError(f"MJCF string: MuJoCo could not compile it: {error}") from error
        where = f"MJCF string (model '{_model_name(model) or '?'}')"
    else:
        if not isinstance(source, (str, os.PathLike)):
            raise TypeError(f"load_mjcf takes a file path or an XML string, not {type(source).__name__}")
        where = os.fspath(source)
        if not os.path.isfile(where):
            raise FileNotFoundError(f"load_mjcf: no MJCF file at '{where}'")
        try:
            model = mujoco.MjModel.from_xml_path(where)
        except ValueError as error:
            raise ValueError(f"{where}: MuJoCo could not compile it: {error}") from error
    return tree_from_model(model, source=where, ignore=ignore)


def tree_from_model(model, source="<MjModel>", ignore=()):
    """The Tree of an already compiled `mujoco.MjModel`, with load_mjcf's refusals; `source` names it in messages."""
    ignore = _check_ignore(ignore)
    problems = _refusals(model, ignore)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise ValueError(f"{source}: this model has what an articulation does not simulate:\n{lines}")
    return _read(model, source, ignore)


def _check_ignore(ignore):
    if isinstance(ignore, str):
        ignore = (ignore,)
    ignore = tuple(ignore)
    for item in ignore:
        if item not in IGNORABLE:
            raise ValueError(f"ignore={ignore!r}: '{item}' is not something load_mjcf can ignore; "
                             f"choose among {IGNORABLE}")
    return ignore


def _model_name(model):
    names = bytes(model.names)
    return names[:names.index(b"\0")].decode() if b"\0" in names else ""


def _label(kind, name, i):
    return f"{kind} '{name}'" if name else f"{kind} {i} (unnamed)"


def _listed(labels):
    shown = ", ".join(labels[:_SHOWN])
    return shown + (f" and {len(labels) - _SHOWN} more" if len(labels) > _SHOWN else "")


def _refusals(model, ignore):
    """One line per feature the tree would drop: what, where (by MJCF name) and what to do."""
    m = model
    flags = int(m.opt.disableflags)
    constraints = not flags & _DSBL_CONSTRAINT
    joint = [_label("joint", m.joint(j).name, j) for j in range(m.njnt)]
    body = [_label("body", m.body(b).name, b) for b in range(m.nbody)]
    geom = [_label("geom", m.geom(g).name, g) for g in range(m.ngeom)]
    actuator = [_label("actuator", m.actuator(a).name, a) for a in range(m.nu)]
    dof = m.jnt_dofadr
    out = []

    def refuse(labels, what):
        if len(labels):
            out.append(f"{_listed(list(labels))}: {what}")

    jt = m.jnt_type
    hs = (jt == _HINGE) | (jt == _SLIDE)
    turning = ~hs  # ball and free joints
    refuse([joint[j] for j in np.flatnonzero(turning & (m.jnt_stiffness != 0))],
           "is a ball or free joint with a spring (stiffness): not simulated; set its stiffness to 0")
    per_joint = np.zeros(m.njnt, dtype=bool)  # whether any of a joint's degrees of freedom has frictionloss

    if m.ntendon:
        refuse([_label("tendon", m.tendon(t).name, t) for t in range(m.ntendon)],
               "tendons are not simulated; remove the <tendon> section")
    if m.neq and constraints and not flags & _DSBL_EQUALITY:
        refuse([_label("equality", m.equality(e).name, e) for e in range(m.neq)],
               "equality constraints are not simulated; remove the <equality> section")
    if m.nflex:
        refuse([_label("flex", m.flex(f).name, f) for f in range(m.nflex)], "flexes (deformables) are not simulated")
    if m.nplugin:
        refuse([f"plugin {p}" for p in range(m.nplugin)], "engine plugins are not simulated; remove them")

    for a in range(m.nu):
        kind = int(m.actuator_trntype[a])
        if kind not in (_TRN_JOINT, _TRN_JOINTINPARENT):
            refuse([actuator[a]], f"drives {_TRN_NAMES.get(kind, 'something other than a joint')}: only motors on "
                                  "a hinge or slide joint are simulated")
            continue
        if not hs[m.actuator_trnid[a, 0]]:
            refuse([actuator[a]], f"drives {joint[m.actuator_trnid[a, 0]]}, a ball or free joint: only motors on a "
                                  "hinge or slide joint are simulated")
            continue
        if m.actuator_dyntype[a] or m.actuator_gaintype[a] or m.actuator_biastype[a]:
            refuse([actuator[a]], "is not a plain motor (it has activation dynamics, a gain that is not fixed or a "
                                  "bias, as <position>, <velocity>, <intvelocity>, <damper>, <cylinder>, <muscle> "
                                  "and <general> with dyntype/gaintype/biastype do): use <motor>")
        elif m.actuator_gainprm[a, 0] != 1.0:
            refuse([actuator[a]], f"has gain {m.actuator_gainprm[a, 0]:g}: use gain 1 and put the factor into gear")
        if np.any(m.actuator_gear[a, 1:] != 0):
            refuse([actuator[a]], "has a gear beyond its first entry: a motor on a joint uses gear's first entry only")
        if m.actuator_forcelimited[a]:
            refuse([actuator[a]], "has forcelimited/forcerange: force clamping is not simulated; clamp the control "
                                  "with ctrlrange instead")
        if (m.actuator_damping[a] or m.actuator_armature[a] or np.any(m.actuator_dampingpoly[a])
                or m.actuator_delay[a] or np.any(m.actuator_history[a]) or m.actuator_plugin[a] >= 0):
            refuse([actuator[a]], "has damping, armature, delay, history or a plugin of its own: not simulated; "
                                  "put damping and armature on the joint")
    if m.nu and flags & _DSBL_ACTUATION:
        refuse(["option flag actuation"], "actuation is disabled: remove the actuators or enable actuation")
    if m.nu and m.opt.disableactuator:
        refuse(["option actuatorgroupdisable"], "disabled actuator groups are not simulated; enable all groups")

    if m.opt.viscosity or m.opt.density:
        refuse([f"option viscosity={m.opt.viscosity:g} density={m.opt.density:g}"],
               "fluid forces are not simulated; set viscosity and density to 0")
    refuse([geom[g] for g in np.flatnonzero(m.geom_fluid[:, 0])],
           "has fluidshape: fluid forces are not simulated; remove fluidshape")
    if constraints and not flags & _DSBL_FRICTIONLOSS:
        per_joint[m.dof_jntid[m.dof_frictionloss != 0]] = True
        refuse([joint[j] for j in np.flatnonzero(per_joint)],
               "has frictionloss: dry joint friction is not simulated; set frictionloss to 0")
    refuse([body[b] for b in np.flatnonzero(m.body_mocapid >= 0)], "is a mocap body: not simulated; remove mocap")
    refuse([body[b] for b in np.flatnonzero(m.body_gravcomp)],
           "has gravcomp: gravity compensation is not simulated; remove gravcomp")
    refuse([joint[j] for j in np.flatnonzero(np.any(m.jnt_stiffnesspoly != 0, axis=1))],
           "has a nonlinear spring: only linear stiffness is simulated")
    refuse([joint[j] for j in np.flatnonzero(np.any(m.dof_dampingpoly[dof] != 0, axis=1))],
           "has nonlinear damping: only linear damping is simulated")
    refuse([joint[j] for j in np.flatnonzero((m.jnt_plasticadr >= 0) | (m.jnt_springyield != 0))],
           "has a yielding (plastic) spring: not simulated")
    refuse([joint[j] for j in np.flatnonzero(m.jnt_actfrclimited)],
           "has actuatorfrcrange: clamping the actuator force on a joint is not simulated; clamp with ctrlrange")

    integrator = int(m.opt.integrator)
    if integrator not in _INTEGRATORS:
        refuse([f"option integrator={_INTEGRATOR_NAMES.get(integrator, integrator)}"],
               'only the Euler and RK4 integrators are simulated; use integrator="Euler" or "RK4"')
    elif (integrator == 0 and flags & _DSBL_EULERDAMP and not flags & _DSBL_DAMPER
          and np.any(m.dof_damping != 0)):
        refuse(["option flag eulerdamp"], "is disabled: the Euler integrator here treats damping implicitly, as "
                                          "MuJoCo does by default; enable eulerdamp")

    qpos0 = m.qpos0[m.jnt_qposadr]
    if "ref" not in ignore:
        refuse([joint[j] for j in np.flatnonzero(hs & (qpos0 != 0))],
               "has a nonzero ref: the tree's q is zero at the model's initial pose; set ref=0 (moving the body "
               "instead), or pass ignore=(\"ref\",) to measure q from the initial pose (q = qpos - qpos0)")
    if "limits" not in ignore and constraints and not flags & _DSBL_LIMIT:
        refuse([joint[j] for j in np.flatnonzero(m.jnt_limited & turning)],
               "is a limited ball joint: its cone of limits is not simulated; set limited=\"false\", or pass "
               "ignore=(\"limits\",) to drop every limit knowingly")
    if "contacts" not in ignore and constraints and not flags & _DSBL_CONTACT:
        refuse([_label("pair", m.pair(p).name, p) for p in range(m.npair)],
               "explicit contact pairs are not simulated; remove the <contact> pairs, or pass "
               "ignore=(\"contacts\",) to drop every contact knowingly")
        pairs = _colliding_geoms(m, flags)
        if "body_contacts" not in ignore:
            refuse([f"{geom[a]} with {geom[b]}" for a, b in pairs if _simulated(m, a, b) is None],
                   "could collide: only spheres, capsules and boxes touching each other or a plane of the world "
                   "are simulated; set "
                   "contype/conaffinity so that these cannot touch, or pass ignore=(\"body_contacts\",) to drop "
                   "them (keeping the contacts with planes) or ignore=(\"contacts\",) to drop every contact "
                   "knowingly")
        touching = sorted({g for pair in pairs if _simulated(m, *pair) for g in pair})
        refuse([geom[g] for g in touching if m.geom_condim[g] not in (1, 3)],
               "has condim 4 or 6: torsional and rolling friction are not simulated; use condim 3 (or 1)")
    return out


def _plane_and_shape(m, a, b):
    """(plane, shape) if geoms a and b are a plane of the world and a sphere, capsule or box, else None."""
    for plane, shape in ((a, b), (b, a)):
        if (_GEOMS.get(int(m.geom_type[plane])) == PLANE and m.geom_bodyid[plane] == 0
                and _GEOMS.get(int(m.geom_type[shape])) in (SPHERE, CAPSULE, BOX)):
            return int(plane), int(shape)
    return None


def _simulated(m, a, b):
    """The pair as the tree keeps it if geoms a and b touch in a way simulated (a plane and a shape; two spheres or
    capsules and boxes), else None."""
    kinds = {_GEOMS.get(int(m.geom_type[a])), _GEOMS.get(int(m.geom_type[b]))}
    if kinds <= {SPHERE, CAPSULE, BOX}:
        return int(a), int(b)
    return _plane_and_shape(m, a, b)


def _colliding_geoms(m, flags):
    """Pairs of geoms (g1 < g2) that MuJoCo's collision filter lets through: masks, welds, parent-child, excludes."""
    contype, conaffinity = m.geom_contype.astype(np.int64), m.geom_conaffinity.astype(np.int64)
    masks = ((contype[:, None] & conaffinity[None, :]) | (contype[None, :] & conaffinity[:, None])) != 0
    weld = m.body_weldid[m.geom_bodyid]
    weld_parent = m.body_weldid[m.body_parentid[weld]]
    ok = masks & (weld[:, None] != weld[None, :])
    if not flags & _DSBL_FILTERPARENT:
        family = (weld[:, None] == weld_parent[None, :]) | (weld_parent[:, None] == weld[None, :])
        ok &= ~(family & (weld[:, None] != 0) & (weld[None, :] != 0))
    excluded = {int(s) for s in m.exclude_signature} if m.nexclude else set()
    bodies = m.geom_bodyid
    pairs = []
    for a, b in zip(*np.nonzero(np.triu(ok, 1))):
        b1, b2 = sorted((int(bodies[a]), int(bodies[b])))
        if (b1 << 16) + b2 not in excluded:
            pairs.append((int(a), int(b)))
    return pairs


def _read(m, source, ignore):
    """The tables, read from the compiled model (which passed _refusals)."""
    flags = int(m.opt.disableflags)
    qadr, dadr = m.jnt_qposadr, m.jnt_dofadr
    hs = (m.jnt_type == _HINGE) | (m.jnt_type == _SLIDE)
    qpos0 = np.where(hs, m.qpos0[qadr], 0.0)  # the reference a hinge's or slide's q is measured from
    limited = np.array(m.jnt_limited, dtype=bool)
    if "limits" in ignore or flags & (_DSBL_LIMIT | _DSBL_CONSTRAINT):
        limited[:] = False
    parent = np.array(m.body_parentid, dtype=int)
    parent[0] = -1
    stiffness = np.array(m.jnt_stiffness, dtype=float)
    damping = np.array(m.dof_damping[dadr], dtype=float)
    gravity = np.array(m.opt.gravity, dtype=float)
    ctrllimited = np.array(m.actuator_ctrllimited, dtype=bool)
    if flags & _DSBL_SPRING:
        stiffness[:] = 0.0
    if flags & _DSBL_DAMPER:
        damping[:] = 0.0
    if flags & _DSBL_GRAVITY:
        gravity[:] = 0.0
    if flags & _DSBL_CLAMPCTRL:
        ctrllimited[:] = False
    contacting = ("contacts" not in ignore and not flags & (_DSBL_CONTACT | _DSBL_CONSTRAINT))
    pairs = [_simulated(m, a, b) for a, b in _colliding_geoms(m, flags)] if contacting else []
    if "body_contacts" in ignore:
        pairs = [pair for pair in pairs if pair is not None and _GEOMS.get(int(m.geom_type[pair[0]])) == PLANE]
    pairs = [pair for pair in pairs if pair is not None]  # the others were refused, or dropped (body_contacts)
    geoms = [g for g in range(m.ngeom) if int(m.geom_type[g]) in _GEOMS]  # the shapes a tree keeps
    index = {g: i for i, g in enumerate(geoms)}
    friction = np.array(m.geom_friction[geoms, 0], dtype=float)
    friction[m.geom_condim[geoms] == 1] = 0.0  # condim 1: frictionless
    return Tree(
        name=_model_name(m) or os.path.splitext(os.path.basename(source))[0],
        parent=parent,
        pos=np.array(m.body_pos, dtype=float),
        quat=np.array(m.body_quat, dtype=float),
        mass=np.array(m.body_mass, dtype=float),
        ipos=np.array(m.body_ipos, dtype=float),
        iquat=np.array(m.body_iquat, dtype=float),
        inertia=np.array(m.body_inertia, dtype=float),
        joint_type=tuple(_JOINTS[int(t)] for t in m.jnt_type),
        joint_body=np.array(m.jnt_bodyid, dtype=int),
        joint_axis=np.array(m.jnt_axis, dtype=float),
        joint_pos=np.array(m.jnt_pos, dtype=float),
        limited=limited,
        joint_range=np.array(m.jnt_range, dtype=float) - qpos0[:, None],
        stiffness=stiffness,
        springref=np.where(hs, m.qpos_spring[qadr] - qpos0, 0.0),
        damping=damping,
        armature=np.array(m.dof_armature[dadr], dtype=float),
        actuator_joint=np.array(m.actuator_trnid[:, 0], dtype=int),
        gear=np.array(m.actuator_gear[:, 0], dtype=float),
        ctrllimited=ctrllimited,
        ctrlrange=np.array(m.actuator_ctrlrange, dtype=float),
        geom_type=tuple(_GEOMS[int(m.geom_type[g])] for g in geoms),
        geom_body=np.array(m.geom_bodyid[geoms], dtype=int),
        geom_pos=np.array(m.geom_pos[geoms], dtype=float).reshape(-1, 3),
        geom_quat=np.array(m.geom_quat[geoms], dtype=float).reshape(-1, 4),
        geom_size=np.array(m.geom_size[geoms], dtype=float).reshape(-1, 3),
        geom_friction=friction,
        contact_pairs=np.array([(index[a], index[b]) for a, b in pairs], dtype=int).reshape(-1, 2),
        gravity=gravity,
        timestep=float(m.opt.timestep),
        integrator=_INTEGRATORS[int(m.opt.integrator)],
        source=source,
        body_names=tuple(m.body(b).name for b in range(m.nbody)),
        joint_names=tuple(m.joint(j).name for j in range(m.njnt)),
        actuator_names=tuple(m.actuator(a).name for a in range(m.nu)),
        geom_names=tuple(m.geom(g).name for g in geoms),
    )
