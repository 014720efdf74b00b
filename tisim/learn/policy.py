"""Closed-loop policies inside the rollout: a network reads the observation each step and writes the action.

    Swing = tisim.closed_loop(tisim.systems.Cartpole, hidden=(32, 32), limit=10.0, angles=("theta",))
    sim = Swing(horizon=240, batch=64, seed=0)        # seed: the network's initial weights
    g = sim.gradient(loss)                            # g.params["w_policy"]: dL/dweights, one row per batch element

The closed-loop system is the open-loop one with its action replaced, in every step t, by

    a[t] = u[t] + pi(o[t]),     o[t] = (phi(x[t]) - obs_mean) / obs_scale,
    pi(o) = limit * tanh(N(o)), or N(o) itself when limit is None,

where phi lists the state's entries in the order the system declares them, each entry named in ``angles`` replaced by
its sine and cosine (an angle's observation is periodic), each entry of a table named in ``centred`` less the
table's mean over its items (a body's particles seen from their centroid, so the policy does not see where the body
stands), and, with ``clock=(f, H)``, sin(2 pi h f tau) and cos(2 pi h f tau), h = 1..H, of the closed loop's own
state ``clock`` tau, which counts the time (0 at the start by default; advanced by dt each step, so a rollout started
from another's last state reads the time on). N is a ``tisim.nn.MLP`` (tanh hidden layers, linear output, one output
per action entry). The open-loop actions u stay an input (zero by default): a feed-forward term whose gradient the
backward pass still gives. The built-in losses read u, not pi(o): ``Effort()`` charges the feed-forward term only.
The network's weights and the normalization are parameters of the closed-loop system:

    w_policy    (n_policy,)         the weights, in tisim.nn's layout
    obs_mean    (n_observations,)   subtracted from phi(x); 0 by default
    obs_scale   (n_observations,)   divides phi(x) - obs_mean; 1 by default (``normalization`` fits both to states)

so one backward pass differentiates the policy and the physics together (the discrete adjoint through the closed
loop), "unrolled" or "checkpointed". Forward mode is refused by Taichi 1.7, which cannot compile forward-mode
arithmetic on the network's vector locals (tisim.nn's networks are refused there too). The continuous adjoint is
refused too: its ODE would have to read the policy at every state the integrator visits, which the step's discrete
closed loop does not define.

A step made of phases (mass-spring bodies, MPM) reads its action once per item (a spring, a particle), where the
network would run once per item. Its closed loop runs the network once a step instead, in a first phase of one
item that writes pi(o[t]) into kept scratch (``policy_action``); the action accessor adds that to u[t], and a
hand-written reverse of the phase (the network's backpropagation) takes the derivative the later phases
leave there back to the weights, the normalization and x[t], so a body whose phases all have hand-written reverses
keeps its one-launch backward pass on a CPU (tisim/learn/phased.py).
"""
import functools
import operator

import numpy as np
import taichi as ti

from tisim.core.engine import System
from tisim.core.model import check_count, check_derived
from tisim.core.quantities import Layout, Quantity, Scratch
from tisim.learn.nn import MLP
from tisim.learn.phased import feedback, feedback_fused, feedback_reverse, units


@ti.data_oriented
class Policy:
    """The feedback law of one closed-loop structure: the observation's plan, the network, the limit.

    Hashable by value: simulators of equal policies share one model and its compiled kernels."""

    def __init__(self, shapes, angle_entries, hidden, n_actions, limit, centred=(), clock=None):
        self.shapes = tuple((name, tuple(shape)) for name, shape in shapes)  # the states, in packed order
        self.angle_entries = tuple(sorted(angle_entries))
        self.centred = tuple(centred)  # names of item tables observed relative to their centroid
        self.clock = clock  # (frequency, harmonics) or None; then the last state is the clock's time
        self.timed = clock is not None  # (Taichi's compiler does not take `is not` even in ti.static)
        offsets, n_state = {}, 0
        for name, shape in self.shapes:
            offsets[name] = n_state
            n_state += int(np.prod(shape, dtype=int))
        self.n_state = n_state
        # the centroids the observation subtracts, (offset, items, item width, coordinate) each
        self.centroids = tuple((offsets[name], shape[0], int(np.prod(shape[1:], dtype=int)), c)
                               for name, shape in self.shapes if name in self.centred and shape[0]
                               for c in range(int(np.prod(shape[1:], dtype=int))))
        centroid_of = {}
        for index, (offset, items, width, c) in enumerate(self.centroids):
            for j in range(items):
                centroid_of[offset + j * width + c] = index
        # phi(x, t) as (state entry, kind, extra) triples in order: kind 0 the entry, 1 and 2 an angle's sine and
        # cosine, 3 the entry less its centroid (extra: which), 4 and 5 the clock's sine and cosine (extra: the
        # harmonic), which come last
        plan, observed = [], n_state - (clock is not None)
        for k in range(observed):
            if k in self.angle_entries:
                plan += [(k, 1, 0), (k, 2, 0)]
            elif k in centroid_of:
                plan.append((k, 3, centroid_of[k]))
            else:
                plan.append((k, 0, 0))
        if clock is not None:
            plan += [(observed, kind, h) for h in range(1, clock[1] + 1) for kind in (4, 5)]
        self.plan = tuple(plan)
        self.n_observations = len(self.plan)
        self.network = MLP((self.n_observations, *hidden, n_actions))
        self.limit = limit
        self.squashed = limit is not None  # (Taichi's compiler does not take `is not` even in ti.static)

    def _key(self):
        return (self.shapes, self.angle_entries, self.centred, self.clock, self.network.sizes, self.limit)

    def __eq__(self, other):
        return isinstance(other, Policy) and other._key() == self._key()

    def __hash__(self):
        return hash(("Policy", self._key()))

    def __repr__(self):
        squash = "" if self.limit is None else f", limit {self.limit:g} tanh"
        return f"Policy({self.network!r}{squash})"

    # ---- the same law in numpy: for environments, evaluation and tests ----------------------------------------------
    def pack(self, states):
        """Named states {name: (..., *shape)}, as a rollout returns them, packed in the state's order -> (..., S)."""
        try:
            lead = np.shape(states[self.shapes[0][0]])[:np.ndim(states[self.shapes[0][0]]) - len(self.shapes[0][1])]
            return np.concatenate([np.reshape(np.asarray(states[name], dtype=np.float64), lead + (-1,))
                                   for name, _ in self.shapes], axis=-1)
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"policy: states must be {{name: array}} with every state {[n for n, _ in self.shapes]} "
                             f"of shape (..., *shape) ({error})") from None

    def features_numpy(self, states):
        """phi(x) of named states {name: (..., *shape)} -> (..., n_observations)."""
        packed = self.pack(states)
        centroids = [packed[..., offset + c:offset + items * width:width].mean(axis=-1)
                     for offset, items, width, c in self.centroids]
        columns = []
        for k, kind, extra in self.plan:
            value = packed[..., k]
            if kind == 1:
                value = np.sin(value)
            elif kind == 2:
                value = np.cos(value)
            elif kind == 3:
                value = value - centroids[extra]
            elif kind in (4, 5):
                angle = 2 * np.pi * extra * self.clock[0] * value
                value = np.sin(angle) if kind == 4 else np.cos(angle)
            columns.append(value)
        return np.stack(columns, axis=-1)

    def act_numpy(self, weights, mean, scale, states):
        """pi(o) of named states {name: (..., *shape)} with the given weights and normalization -> (..., n_actions)."""
        out = self.network.apply_numpy(weights, (self.features_numpy(states) - mean) / scale)
        return out if self.limit is None else self.limit * np.tanh(out)

    # ---- inside a step ---------------------------------------------------------------------------------------------
    @ti.func
    def observation(self, s: ti.template()):
        """o[t] of the step context's batch entry at its step, the normalized features."""
        b = s.b
        mean, scale = ti.static(s.model.P.obs_mean, s.model.P.obs_scale)
        centre = self.centres(s.x, b, s.t)
        phi = ti.Vector([self.feature(s, centre, k, kind, extra) for k, kind, extra in ti.static(self.plan)])
        return ti.Vector([(phi[k] - s.theta[b, mean + k]) / s.theta[b, scale + k]
                          for k in ti.static(range(self.n_observations))])

    @ti.func
    def feature(self, s: ti.template(), centre, k: ti.template(), kind: ti.template(), extra: ti.template()):
        # one entry of phi (the plan's kinds): the state entry itself, an angle's sine or cosine, the entry less its
        # centroid, or a harmonic of the clock
        value = s.x[s.b, s.t, k]
        if ti.static(kind == 1):
            value = ti.sin(value)
        elif ti.static(kind == 2):
            value = ti.cos(value)
        elif ti.static(kind == 3):
            value -= centre[extra]
        elif ti.static(kind == 4):
            value = ti.sin(ti.static(2 * np.pi * extra * self.clock[0]) * value)
        elif ti.static(kind == 5):
            value = ti.cos(ti.static(2 * np.pi * extra * self.clock[0]) * value)
        return value

    @ti.func
    def centres(self, x: ti.template(), b, t):
        # the centroids' coordinates (one dummy entry where there are none: Taichi has no empty vectors)
        return ti.Vector([centroid(x, b, t, offset, items, width, c)
                          for offset, items, width, c in ti.static(self.centroids or ((0, 1, 1, 0),))])

    @ti.func
    def act(self, s: ti.template()):
        """pi(o[t]) of the step context's batch entry at its step, as a ti.Vector of the packed action entries."""
        out = self.network.apply(s.theta, s.b, s.model.P.w_policy, self.observation(s))
        if ti.static(self.squashed):
            out = self.limit * ti.tanh(out)
        return out


@ti.func
def centroid(x: ti.template(), b, t, offset: ti.template(), items: ti.template(), width: ti.template(),
             c: ti.template()):
    total = x[b, t, offset + c]
    for j in ti.static(range(1, items)):
        total += x[b, t, offset + j * width + c]
    return total / items


@ti.func
def closed_loop_step(self, s: ti.template()):
    # the open-loop step, its actions read through a context that adds the policy's output (tisim/core/access.py)
    applied = self.policy.act(s)
    self.open_loop_step(ti.static(s._replace(applied=applied)))
    if ti.static(self.policy.timed):
        s.advance("clock", 0, s.state("clock") + s.dt)


@functools.lru_cache(maxsize=None)
def closed_loop_class(system, hidden, limit, angles, centred, clock):
    """The closed-loop class of an open-loop system class for one policy shape (cached: equal arguments give the same
    class, so their simulators share models)."""
    name = system.__name__
    state = {q.name: q for q in system.STATE}
    for angle in angles:
        if angle not in state:
            raise ValueError(f"closed_loop: angles names states of {name}; {angle!r} is not one of {list(state)}")
    for table in centred:
        if table not in state or not (state[table].shape and isinstance(state[table].shape[0], str)):
            tables = [q.name for q in system.STATE if q.shape and isinstance(q.shape[0], str)]
            raise ValueError(f"closed_loop: centred names tables of items among the states of {name} ({tables}); "
                             f"got {table!r}")
        if table in angles:
            raise ValueError(f"closed_loop: {table!r} is named both in angles and in centred")
    states = tuple(system.STATE) + ((Quantity("clock", 0.0, "s", "the time the policy's clock reads, advanced by "
                                              "dt each step"),) if clock is not None else ())
    shape = (states, system.ACTION, hidden, limit, angles, centred, clock)
    derived = ("n_policy", "n_observations") + (("n_networks", "n_applied", "n_units", "n_centres")
                                                if system.PHASES else ())

    def __init__(self, horizon, batch=1, dt=None, seed=0, **values):
        check_count(f"closed_loop({name})", "seed", seed, minimum=0)
        check_derived(f"closed_loop({name})", values, {key: "it follows from the policy's shape" for key in derived})
        system.__init__(self, horizon, batch, dt, **values)
        if system.PHASES and not self.phases:
            raise ValueError(f"closed_loop({name}): with {self.options} its step is not made of phases, and it reads "
                             f"its action in a loop whose reverse mode Taichi 1.7 gets wrong when the action comes "
                             f"from a network inside the step; close the loop with the options that make it phased "
                             f"(Rigid2D: contact='qp')")
        if "w_policy" not in values:
            self.set_params(w_policy=self.model.policy.network.initial_weights(seed))

    def derived_sizes(sizes):
        policy = _policy(sizes, *shape)
        extra = dict(n_networks=1, n_applied=policy.network.sizes[-1], n_units=units(policy)[2],
                     n_centres=len(policy.centroids)) if system.PHASES else {}
        return {"n_policy": policy.network.n_weights, "n_observations": policy.n_observations, **extra}

    def topology(self):
        return {**system.topology(self), "policy": _policy(self.sizes, *shape)}

    namespace = {
        "__init__": __init__,
        "__doc__": f"{name} acting through a policy network in every step (tisim.learn.policy): "
                   f"hidden={hidden}, limit={limit}, angles={angles}, centred={centred}, clock={clock}.",
        "__module__": __name__,
        "STATE": states,
        "PARAMS": system.PARAMS + (
            Quantity("w_policy", 0.0, "-", "weights of the policy network (layout in tisim.nn)", shape=("n_policy",)),
            Quantity("obs_mean", 0.0, "-", "subtracted from the policy's observation", shape=("n_observations",)),
            Quantity("obs_scale", 1.0, "-", "divides the policy's observation", shape=("n_observations",),
                     bounds="(0, inf)"),
        ),
        "STRUCTURE": tuple(system.STRUCTURE) + derived,
        "derived_sizes": staticmethod(derived_sizes),
        "topology": topology,
        "rates": None,
        "OPEN_LOOP": system,
    }
    if system.PHASES:
        # the policy acts once a step, in a first phase of one item, into kept scratch that the action accessor adds
        # to u (tisim/core/access.py), and its hand-written reverse keeps a backward pass of hand-written reverses
        # one launch on a CPU
        def closed(phases):
            # the phased step's declarations with the policy's phase first
            return dict(PHASES=(("feedback", "n_networks"),) + tuple(phases), APPLIED="policy_action",
                        REVERSES={**system.REVERSES, "feedback": ("feedback_reverse", "n_networks")},
                        FUSED={**system.FUSED, "feedback": ("feedback_fused", "n_networks")})

        if isinstance(system.PHASES, property):
            # phases for some options only (Rigid2D's: contact="qp"); with the others __init__ refuses
            opened, plain = system.PHASES.fget, dict(PHASES=(), APPLIED=None, REVERSES=system.REVERSES,
                                                     FUSED=system.FUSED)
            namespace.update({key: property(lambda self, key=key: (closed(opened(self)) if opened(self) else
                                                                    plain)[key]) for key in plain})
        else:
            namespace.update(closed(system.PHASES))
        namespace.update(
            SCRATCH=tuple(system.SCRATCH) + (
                Scratch("policy_action", "-", "the policy's output in the step, per packed action entry",
                        shape=("n_applied",), assigned=True),
                Scratch("policy_layers", "-", "the network's units: the normalized observation, each hidden layer, "
                        "the output before the limit", shape=("n_units",), assigned=True),
                Scratch("policy_centre", "-", "the centroid of each centred table's coordinates",
                        shape=("n_centres",), assigned=True)),
            feedback=feedback,
            feedback_fused=feedback_fused,
            feedback_reverse=feedback_reverse)
    else:
        namespace.update(step=closed_loop_step, open_loop_step=system.step)
    return type("ClosedLoop" + name, (system,), namespace)


def _policy(sizes, states, actions, hidden, limit, angles, centred, clock):
    # the Policy of one structure: the state's size and the angles' entries follow from the sizes
    state, action = Layout(states, sizes, "state"), Layout(actions, sizes, "action")
    entries = []
    for angle in angles:
        first = state.offsets[angle]
        entries += range(first, first + int(np.prod(state.shapes[angle], dtype=int)))
    return Policy(list(state.shapes.items()), entries, hidden, action.size, limit, centred, clock)


def closed_loop(system, *, hidden=(32,), limit=None, angles=(), centred=(), clock=None):
    """The class of ``system`` (an open-loop system class) acting through a policy network.

    hidden: the widths of the network's tanh layers, () for a linear policy. limit: bound of each action entry
    (limit * tanh of the output), or None for the network's output as it is. angles: names of states observed
    through their sine and cosine. centred: names of states that are tables of items (a body's particle
    positions) observed relative to their centroid, so the policy does not see where the body is. clock:
    (frequency [Hz], harmonics H) adds sin(2 pi h f t) and cos(2 pi h f t), h = 1..H, of the time since the
    rollout's start (DiffTaichi's walkers read such waves), or None. Returns a system class taking (horizon,
    batch=1, dt=None, seed=0, **values), seed drawing the initial weights (see the module docstring).
    """
    if not (isinstance(system, type) and issubclass(system, System)):
        raise TypeError(f"closed_loop: system must be a tisim system class (e.g. tisim.systems.Cartpole), got "
                        f"{system!r}")
    try:
        hidden = tuple(operator.index(n) for n in hidden)
    except TypeError:
        raise TypeError(f"closed_loop: hidden must be a sequence of layer widths, e.g. (32, 32), got {hidden!r}") \
            from None
    for width in hidden:
        check_count("closed_loop", "hidden", width)
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, (int, float, np.floating)) or \
                not (0 < limit < np.inf):
            raise ValueError(f"closed_loop: limit must be a finite number > 0 or None, got {limit!r}")
        limit = float(limit)
    if isinstance(angles, str):
        angles = (angles,)
    angles = tuple(angles)
    if isinstance(centred, str):
        centred = (centred,)
    centred = tuple(centred)
    if clock is not None:
        try:
            frequency, harmonics = clock
            ok = isinstance(frequency, (int, float, np.floating)) and not isinstance(frequency, bool) and \
                0 < frequency < np.inf and isinstance(harmonics, (int, np.integer)) and \
                not isinstance(harmonics, bool) and harmonics >= 1
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ValueError(f"closed_loop: clock must be (frequency > 0 [Hz], harmonics >= 1) or None, got "
                             f"{clock!r}")
        clock = (float(frequency), int(harmonics))
    if getattr(system, "OPEN_LOOP", None) is not None:
        raise TypeError(f"closed_loop: {system.__name__} is already closed-loop")
    return closed_loop_class(system, hidden, limit, angles, centred, clock)


def normalization(sim, states):
    """obs_mean and obs_scale that standardize the policy's observations of ``states`` ({name: (..., *shape)},
    e.g. what ``sim.rollout()`` returns): per observation entry, the mean and the standard deviation (1 where it
    is below 1e-8). Returns {"obs_mean": (n,), "obs_scale": (n,)}, for ``sim.set_params(**...)``."""
    phi = sim.model.policy.features_numpy(states).reshape(-1, sim.model.policy.n_observations)
    scale = phi.std(axis=0)
    return {"obs_mean": phi.mean(axis=0), "obs_scale": np.where(scale < 1e-8, 1.0, scale)}
