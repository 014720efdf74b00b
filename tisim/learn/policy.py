"""Closed-loop policies inside the rollout: a network reads the observation each step and writes the action.

    Swing = tisim.closed_loop(tisim.systems.Cartpole, hidden=(32, 32), limit=10.0, angles=("theta",))
    sim = Swing(horizon=240, batch=64, seed=0)        # seed: the network's initial weights
    g = sim.gradient(loss)                            # g.params["w_policy"]: dL/dweights, one row per batch element

The closed-loop system is the open-loop one with its action replaced, in every step t, by

    a[t] = u[t] + pi(o[t]),     o[t] = (phi(x[t]) - obs_mean) / obs_scale,
    pi(o) = limit * tanh(N(o)), or N(o) itself when limit is None,

where phi lists the state's entries in the order the system declares them, each entry named in ``angles`` replaced by
its sine and cosine (an angle's observation is periodic), and N is a ``tisim.nn.MLP`` (tanh hidden layers, linear
output, one output per action entry). The open-loop actions u stay an input (zero by default): a feed-forward term
whose gradient the backward pass still gives. The built-in losses read u, not pi(o): ``Effort()`` charges the
feed-forward term only. The network's weights and the normalization are parameters of the
closed-loop system:

    w_policy    (n_policy,)         the weights, in tisim.nn's layout
    obs_mean    (n_observations,)   subtracted from phi(x); 0 by default
    obs_scale   (n_observations,)   divides phi(x) - obs_mean; 1 by default (``normalization`` fits both to states)

so one backward pass differentiates the policy and the physics together (the discrete adjoint through the closed
loop), "unrolled" or "checkpointed". Forward mode is refused by Taichi 1.7, which cannot compile forward-mode
arithmetic on the network's vector locals (tisim.nn's networks are refused there too). A step made of phases
(mass-spring bodies, MPM) is refused: it reads its action once per item (a spring, a particle), and evaluating the
network there would repeat it per item. The continuous adjoint is refused too: its ODE would have to read the policy
at every state the integrator visits, which the step's discrete closed loop does not define.
"""
import functools
import operator

import numpy as np
import taichi as ti

from tisim.core.engine import System
from tisim.core.model import check_count, check_derived
from tisim.core.quantities import Layout, Quantity
from tisim.learn.nn import MLP


@ti.data_oriented
class Policy:
    """The feedback law of one closed-loop structure: which state entries are angles, the network, the limit.

    Hashable by value: simulators of equal policies share one model and its compiled kernels."""

    def __init__(self, shapes, angle_entries, hidden, n_actions, limit):
        self.shapes = tuple((name, tuple(shape)) for name, shape in shapes)  # the states, in packed order
        self.angle_entries = tuple(sorted(angle_entries))
        n_state = sum(int(np.prod(shape, dtype=int)) for _, shape in self.shapes)
        self.n_state = n_state
        self.n_observations = n_state + len(self.angle_entries)
        self.network = MLP((self.n_observations, *hidden, n_actions))
        self.limit = limit
        self.squashed = limit is not None  # (Taichi's compiler does not take `is not` even in ti.static)
        # phi(x) as (state entry, kind) pairs, in order (see feature)
        self.plan = tuple(pair for k in range(n_state)
                          for pair in (((k, 1), (k, 2)) if k in self.angle_entries else ((k, 0),)))

    def _key(self):
        return (self.shapes, self.angle_entries, self.network.sizes, self.limit)

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
        columns = []
        for k, kind in self.plan:
            value = packed[..., k]
            columns.append(np.sin(value) if kind == 1 else np.cos(value) if kind == 2 else value)
        return np.stack(columns, axis=-1)

    def act_numpy(self, weights, mean, scale, states):
        """pi(o) of named states {name: (..., *shape)} with the given weights and normalization -> (..., n_actions)."""
        out = self.network.apply_numpy(weights, (self.features_numpy(states) - mean) / scale)
        return out if self.limit is None else self.limit * np.tanh(out)

    # ---- inside a step ---------------------------------------------------------------------------------------------
    @ti.func
    def act(self, model: ti.template(), x: ti.template(), theta: ti.template(), b, t):
        """pi(o[t]) of batch entry b, as a ti.Vector of the packed action entries."""
        mean, scale = ti.static(model.P.obs_mean, model.P.obs_scale)
        phi = ti.Vector([feature(x[b, t, k], kind) for k, kind in ti.static(self.plan)])
        z = ti.Vector([(phi[k] - theta[b, mean + k]) / theta[b, scale + k]
                       for k in ti.static(range(self.n_observations))])
        out = self.network.apply(theta, b, model.P.w_policy, z)
        if ti.static(self.squashed):
            out = self.limit * ti.tanh(out)
        return out


@ti.func
def feature(value, kind: ti.template()):
    # one entry of phi: the state entry itself (kind 0), or an angle's sine (1) or cosine (2)
    if ti.static(kind == 1):
        value = ti.sin(value)
    elif ti.static(kind == 2):
        value = ti.cos(value)
    return value


@ti.func
def closed_loop_step(self, s: ti.template()):
    # the open-loop step, its actions read through a context that adds the policy's output (tisim/core/access.py)
    applied = self.policy.act(self, s.x, s.theta, s.b, s.t)
    self.open_loop_step(ti.static(s._replace(applied=applied)))


@functools.lru_cache(maxsize=None)
def closed_loop_class(system, hidden, limit, angles):
    """The closed-loop class of an open-loop system class for one policy shape (cached: equal arguments give the same
    class, so their simulators share models)."""
    name = system.__name__
    if system.PHASES:
        raise TypeError(f"closed_loop: {name} steps in phases, reading its action once per item; a policy inside a "
                        "phased step is not supported (a plain step(self, s) is)")
    known = [q.name for q in system.STATE]
    for angle in angles:
        if angle not in known:
            raise ValueError(f"closed_loop: angles names states of {name}; {angle!r} is not one of {known}")

    def __init__(self, horizon, batch=1, dt=None, seed=0, **values):
        check_count(f"closed_loop({name})", "seed", seed, minimum=0)
        check_derived(f"closed_loop({name})", values, {key: "it follows from the policy's shape"
                                                       for key in ("n_policy", "n_observations")})
        system.__init__(self, horizon, batch, dt, **values)
        if "w_policy" not in values:
            self.set_params(w_policy=self.model.policy.network.initial_weights(seed))

    def derived_sizes(sizes):
        policy = _policy(system, sizes, hidden, limit, angles)
        return {"n_policy": policy.network.n_weights, "n_observations": policy.n_observations}

    def topology(self):
        return {**system.topology(self), "policy": _policy(system, self.sizes, hidden, limit, angles)}

    namespace = {
        "__init__": __init__,
        "__doc__": f"{name} acting through a policy network in every step (tisim.learn.policy): "
                   f"hidden={hidden}, limit={limit}, angles={angles}.",
        "__module__": __name__,
        "PARAMS": system.PARAMS + (
            Quantity("w_policy", 0.0, "-", "weights of the policy network (layout in tisim.nn)", shape=("n_policy",)),
            Quantity("obs_mean", 0.0, "-", "subtracted from the policy's observation", shape=("n_observations",)),
            Quantity("obs_scale", 1.0, "-", "divides the policy's observation", shape=("n_observations",),
                     bounds="(0, inf)"),
        ),
        "STRUCTURE": tuple(system.STRUCTURE) + ("n_policy", "n_observations"),
        "derived_sizes": staticmethod(derived_sizes),
        "topology": topology,
        "step": closed_loop_step,
        "open_loop_step": system.step,
        "rates": None,
        "OPEN_LOOP": system,
    }
    return type("ClosedLoop" + name, (system,), namespace)


def _policy(system, sizes, hidden, limit, angles):
    # the Policy of one structure: the state's size and the angles' entries follow from the sizes
    state, action = Layout(system.STATE, sizes, "state"), Layout(system.ACTION, sizes, "action")
    entries = []
    for angle in angles:
        first = state.offsets[angle]
        entries += range(first, first + int(np.prod(state.shapes[angle], dtype=int)))
    return Policy(list(state.shapes.items()), entries, hidden, action.size, limit)


def closed_loop(system, *, hidden=(32,), limit=None, angles=()):
    """The class of ``system`` (an open-loop system class with a plain step) acting through a policy network.

    hidden: the widths of the network's tanh layers, () for a linear policy. limit: bound of each action entry
    (limit * tanh of the output), or None for the network's output as it is. angles: names of states observed
    through their sine and cosine. Returns a system class taking (horizon, batch=1, dt=None, seed=0, **values),
    seed drawing the initial weights (see the module docstring).
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
    if getattr(system, "OPEN_LOOP", None) is not None:
        raise TypeError(f"closed_loop: {system.__name__} is already closed-loop")
    return closed_loop_class(system, hidden, limit, angles)


def normalization(sim, states):
    """obs_mean and obs_scale that standardize the policy's observations of ``states`` ({name: (..., *shape)},
    e.g. what ``sim.rollout()`` returns): per observation entry, the mean and the standard deviation (1 where it
    is below 1e-8). Returns {"obs_mean": (n,), "obs_scale": (n,)}, for ``sim.set_params(**...)``."""
    phi = sim.model.policy.features_numpy(states).reshape(-1, sim.model.policy.n_observations)
    scale = phi.std(axis=0)
    return {"obs_mean": phi.mean(axis=0), "obs_scale": np.where(scale < 1e-8, 1.0, scale)}
