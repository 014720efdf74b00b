"""Losses on a rollout. Each gives one scalar L_b per batch element; gradients are of the sum over the batch.

    TerminalTarget   sum_k w_k (x_k[T] - x*_k)^2                 over the named states at the final step
    Tracking         sum_t sum_k w_k (x_k[t] - d_k[t])^2          over recorded data; NaN marks "not observed"
    TerminalSum      sum_k w_k x_k[T]                             a linear functional, e.g. minus the mean position;
                     with steps=: summed over those steps instead
    Effort           w sum_t |a[t]|^2
    w1 * L1 + L2     weighted sums of the above (and of custom losses)
    Custom(f, steps) sum over t in steps of f(x, theta, u, b, t), a Taichi function; steps default: the final step

The built-in losses reduce to one list of entries (time, state offset, weight, target, linear weight), evaluated by
one kernel that compiles once however many losses are summed.

A custom loss reads the packed arrays directly; ``sim.index(name)`` gives a state's offset, and Python ints captured by
the function are compile-time constants:

    import taichi as ti
    k = sim.index("theta")

    @ti.func
    def upright(x: ti.template(), theta: ti.template(), u: ti.template(), b, t):
        return 1.0 - ti.cos(x[b, t, k])

    loss = tisim.losses.Custom(upright, steps=range(50, 101)) + 0.01 * tisim.losses.Effort()

The kernel runs f in parallel over (batch element, step), so f itself needs no loop over time. Keep loops with a
mutable local accumulator out of f: Taichi 1.7's reverse mode crashes on them
(docs/taichi_pitfalls.md#locals-across-a-dynamic-loop).
"""
import numpy as np
import taichi as ti

from tisim.core import runtime


class Loss:
    """A loss is a weighted sum of terms; ``bind(sim)`` allocates what evaluating it on that simulator needs."""

    def terms(self):
        """[(weight, primitive loss)]: how this loss decomposes into the primitives below."""
        return [(1.0, self)]

    def __add__(self, other):
        if not isinstance(other, Loss):
            return NotImplemented
        return Sum(self.terms() + other.terms())

    def __mul__(self, weight):
        if isinstance(weight, bool) or not isinstance(weight, (int, float, np.floating)) or not np.isfinite(weight):
            return NotImplemented
        return Sum([(weight * w, term) for w, term in self.terms()])

    __rmul__ = __mul__

    def bind(self, sim):
        return _Bound.of(sim, self.terms())


class Sum(Loss):
    def __init__(self, terms):
        self._terms = list(terms)

    def terms(self):
        return list(self._terms)

    def __repr__(self):
        return " + ".join(f"{w:g} * {term!r}" for w, term in self._terms)


def _weights(name, weights, names):
    """Per-state weights from a scalar (all named states) or a dict."""
    if isinstance(weights, dict):
        unknown = set(weights) - set(names)
        if unknown:
            raise ValueError(f"{name}: weights name states {sorted(unknown)} that the loss does not use "
                             f"{sorted(names)}")
        return {k: _number(name, weights.get(k, 1.0)) for k in names}
    return {k: _number(name, weights) for k in names}


def _array(owner, what, value):
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{owner}: {what} must be numbers (an array), got {type(value).__name__}") from None


def _number(owner, w):
    if isinstance(w, bool) or not isinstance(w, (int, float, np.integer, np.floating)):
        raise TypeError(f"{owner}: weights must be numbers >= 0 (one for all states, or a dict by state), got "
                        f"{type(w).__name__} {w!r}")
    return float(w)


def _check_weight(owner, w):
    if not np.all(np.isfinite(w)) or np.any(np.asarray(w) < 0):
        raise ValueError(f"{owner}: weights must be finite and >= 0, got {w}")


class TerminalTarget(Loss):
    """sum_k w_k (x_k[T] - target_k)^2 over the named states. target: {state: value or (B, *shape)}."""

    def __init__(self, target, weights=1.0):
        if not isinstance(target, dict) or not target:
            raise TypeError("TerminalTarget: target must be a non-empty dict {state name: value}")
        self.target = dict(target)
        self.weights = _weights("TerminalTarget", weights, list(target))
        for w in self.weights.values():
            _check_weight("TerminalTarget", w)

    def entries(self, sim):
        layout = sim.state_layout
        rows = []
        for name, value in self.target.items():
            goal = layout.validated(name, value, sim.B, "TerminalTarget.target").reshape(sim.B, -1)
            for j in range(goal.shape[1]):
                rows.append((sim.T, layout.offsets[name] + j, np.full(sim.B, self.weights[name]), goal[:, j]))
        return rows

    def __repr__(self):
        return f"TerminalTarget({self.target})"


class Tracking(Loss):
    """sum_t sum_k w_k (x_k[t] - data_k[t])^2 over recorded data.

    data: {state: array (T+1, *shape) or (B, T+1, *shape)}; NaN entries are not observed and cost nothing.
    """

    def __init__(self, data, weights=1.0):
        if not isinstance(data, dict) or not data:
            raise TypeError("Tracking: data must be a non-empty dict {state name: array}")
        self.data = {k: _array("Tracking", f"data[{k!r}]", v) for k, v in data.items()}
        self.weights = _weights("Tracking", weights, list(data))
        for w in self.weights.values():
            _check_weight("Tracking", w)

    def entries(self, sim):
        layout, B, T = sim.state_layout, sim.B, sim.T
        rows = []
        for name, d in self.data.items():
            layout.check_name(name, "Tracking.data")
            shape = layout.shapes[name]
            if d.shape not in ((T + 1,) + shape, (B, T + 1) + shape):
                raise ValueError(f"Tracking: data[{name!r}] must have shape {(T + 1,) + shape} or "
                                 f"{(B, T + 1) + shape}, got {d.shape}")
            if np.any(np.isinf(d)):
                raise ValueError(f"Tracking: data[{name!r}] contains infinite values (use NaN for unobserved)")
            d = np.broadcast_to(d, (B, T + 1) + shape).reshape(B, T + 1, -1)
            seen = np.isfinite(d)
            for t, j in np.argwhere(seen.any(axis=0)):  # in order of t, then j; only observed entries visited
                rows.append((int(t), layout.offsets[name] + int(j), np.where(seen[:, t, j], self.weights[name], 0.0),
                             np.where(seen[:, t, j], d[:, t, j], 0.0)))
        if not rows:
            raise ValueError("Tracking: the data has no observed (finite) entry")
        return rows

    def __repr__(self):
        return f"Tracking({sorted(self.data)})"


class TerminalSum(Loss):
    """sum_k w_k x_k[T]: weights {state: scalar or array of the state's shape}, e.g. the mean x of N particles is
    TerminalSum({"pos": w}) with w[:, 0] = 1/N, w[:, 1] = 0 (minus that, to move right).

    steps: step indices in [0, T] to sum over instead of the final step alone (as for Custom); with w scaled by
    1 / len(steps) it is an average over time, such as the mean position over a gait's last cycle."""

    def __init__(self, weights, steps=None):
        if not isinstance(weights, dict) or not weights:
            raise TypeError("TerminalSum: weights must be a non-empty dict {state name: weights}")
        self.weights = {k: _array("TerminalSum", f"weights[{k!r}]", v) for k, v in weights.items()}
        for name, w in self.weights.items():
            if not np.all(np.isfinite(w)):
                raise ValueError(f"TerminalSum: weights[{name!r}] must be finite")
        self.steps = _steps("TerminalSum", steps)

    def linear_entries(self, sim):
        layout, rows = sim.state_layout, []
        steps = _steps_within("TerminalSum", self.steps, sim.T)
        for name, w in self.weights.items():
            layout.check_name(name, "TerminalSum.weights")
            shape = layout.shapes[name]
            if w.shape not in ((), shape):
                raise ValueError(f"TerminalSum: weights[{name!r}] must be a scalar or shape {shape}, got {w.shape}")
            for j, value in enumerate(np.broadcast_to(w, shape).reshape(-1)):
                if value != 0.0:  # a zero weight adds nothing but an entry per step
                    rows += [(int(t), layout.offsets[name] + j, float(value)) for t in steps]
        return rows

    def __repr__(self):
        return f"TerminalSum({sorted(self.weights)})"


class Effort(Loss):
    """w sum_t |a[t]|^2: the action effort (w = 1 by default; scale with ``0.01 * Effort()``). a is the actions the
    simulator is given (``set_actions``): on a closed-loop simulator (tisim.policy) the feed-forward input u, not the
    policy's output, which no loss reads."""

    def __repr__(self):
        return "Effort()"


class Custom(Loss):
    """sum over t in steps of ``f(x, theta, u, b, t)``, a Taichi function (see the module docstring).

    steps: step indices in [0, T] (a range, list or array); None means the final step T alone.
    """

    def __init__(self, function, steps=None):
        if not callable(function):
            raise TypeError(f"Custom: function must be a @ti.func, got {type(function).__name__}")
        self.kernels = _CustomKernels(function)
        self.steps = _steps("Custom", steps)

    def step_indices(self, sim):
        return _steps_within("Custom", self.steps, sim.T)

    def __repr__(self):
        return "Custom()"


@ti.data_oriented
class _CustomKernels:
    def __init__(self, function):
        self.function = function

    @ti.kernel
    def accumulate(self, x: ti.types.ndarray(ndim=3), theta: ti.types.ndarray(ndim=2),
                   u: ti.types.ndarray(ndim=3), L: ti.types.ndarray(ndim=1), steps: ti.types.ndarray(ndim=1),
                   w: float, serial: ti.template()):
        ti.loop_config(serialize=serial)
        for b in range(x.shape[0]):
            for i in range(steps.shape[0]):
                L[b] += w * self.function(x, theta, u, b, steps[i])


@ti.func
def quadratic(x: ti.template(), u: ti.template(), L: ti.template(), b, time: ti.template(), offset: ti.template(),
              w: ti.template(), target: ti.template(), linear: ti.template(), w_effort):
    """Adds batch element b's built-in loss terms to L[b] (the engine's one-launch forward pass calls it too)."""
    for e in range(time.shape[0]):
        value = x[b, time[e], offset[e]]
        L[b] += w[b, e] * (value - target[b, e]) ** 2 + linear[e] * value
    if w_effort != 0.0:  # a body's actions can outnumber its states: skip T x A zero terms and their adjoints
        for t in range(u.shape[1]):
            for j in range(u.shape[2]):
                L[b] += w_effort * u[b, t, j] ** 2


@ti.kernel
def _quadratic(x: ti.types.ndarray(ndim=3), u: ti.types.ndarray(ndim=3), L: ti.types.ndarray(ndim=1),
               time: ti.types.ndarray(ndim=1), offset: ti.types.ndarray(ndim=1), w: ti.types.ndarray(ndim=2),
               target: ti.types.ndarray(ndim=2), linear: ti.types.ndarray(ndim=1), w_effort: float,
               serial: ti.template()):
    ti.loop_config(serialize=serial)
    for b in range(x.shape[0]):
        quadratic(x, u, L, b, time, offset, w, target, linear, w_effort)


def _plain(kernel, *args, grad=False):
    """Taichi's own call (the engine passes its bound calls instead; tisim/core/launch.py)."""
    return (kernel.grad if grad else kernel)(*args)


class _Bound:
    """A loss bound to one simulator: every built-in term as entries (time, state offset, weight (B,), target (B,),
    linear weight) in one set of arrays, custom terms with their step arrays, the effort weight.

    ``window(t0, n, last)`` gives the same loss restricted to steps [t0, t0 + n) (to t0 + n inclusive when last),
    with times shifted to start at 0: what a checkpointed backward pass evaluates on one segment."""

    def __init__(self, batch, rows, customs, w_effort):
        self.batch, self.rows, self.w_effort = batch, rows, w_effort
        self._empty = None  # the window of a segment without terms (see window)
        self.windows = {}  # segment length -> [this loss on each segment], for the checkpointed backward pass
        self.custom_steps = customs  # [(weight, kernels, steps as numpy)]
        self.customs = [(w, kernels, _int_array(steps)) for w, kernels, steps in customs if len(steps)]
        real, dtype = runtime.real(), runtime.numpy_real()
        count = max(len(rows), 1)  # a zero-length ndarray is not allowed; a zero-weight entry stands in
        self.time, self.offset = ti.ndarray(ti.i32, (count,)), ti.ndarray(ti.i32, (count,))
        self.w, self.target = ti.ndarray(real, (batch, count)), ti.ndarray(real, (batch, count))
        self.linear = ti.ndarray(real, (count,))
        if rows:
            self.time.from_numpy(np.array([r[0] for r in rows], dtype=np.int32))
            self.offset.from_numpy(np.array([r[1] for r in rows], dtype=np.int32))
            self.w.from_numpy(np.stack([r[2] for r in rows], axis=1).astype(dtype))
            self.target.from_numpy(np.stack([r[3] for r in rows], axis=1).astype(dtype))
            self.linear.from_numpy(np.array([r[4] for r in rows], dtype=dtype))
        else:
            for array in (self.time, self.offset, self.w, self.target, self.linear):
                array.fill(0)

    @classmethod
    def of(cls, sim, terms):
        rows, customs, w_effort = [], [], 0.0
        for weight, term in terms:
            if isinstance(term, Effort):
                w_effort += weight
            elif isinstance(term, Custom):
                customs.append((weight, term.kernels, term.step_indices(sim)))
            elif isinstance(term, (TerminalTarget, Tracking)):
                rows += [(t, k, weight * w, goal, 0.0) for t, k, w, goal in term.entries(sim)]
            elif isinstance(term, TerminalSum):
                zeros = np.zeros(sim.B)
                rows += [(t, k, zeros, zeros, weight * w) for t, k, w in term.linear_entries(sim)]
            else:
                raise TypeError(f"loss term {term!r} is not a tisim loss")
        return cls(sim.B, rows, customs, w_effort)

    def window(self, t0, n, last):
        def inside(t):
            return t0 <= t < t0 + n or (last and t == t0 + n)

        rows = [(row[0] - t0,) + row[1:] for row in self.rows if inside(row[0])]
        customs = [(w, kernels, np.array([t - t0 for t in steps if inside(t)], dtype=np.int64))
                   for w, kernels, steps in self.custom_steps]
        if not rows and not any(len(steps) for _, _, steps in customs):
            # most segments of a terminal loss hold no term: they share one set of (tiny) tables, since every Taichi
            # array costs memory of its own (measured: 316 segments of a pendulum took 12 MB of them)
            if self._empty is None:
                self._empty = _Bound(self.batch, [], [], self.w_effort)
            return self._empty
        return _Bound(self.batch, rows, customs, self.w_effort)

    def forward(self, x, theta, u, L, serial, launch=_plain):
        launch(_quadratic, x, u, L, self.time, self.offset, self.w, self.target, self.linear, self.w_effort, serial)
        for weight, kernels, steps in self.customs:
            launch(kernels.accumulate, x, theta, u, L, steps, weight, serial)

    def backward(self, x, theta, u, L, serial, launch=_plain):
        for weight, kernels, steps in reversed(self.customs):
            launch(kernels.accumulate, x, theta, u, L, steps, weight, serial, grad=True)
        launch(_quadratic, x, u, L, self.time, self.offset, self.w, self.target, self.linear, self.w_effort, serial,
               grad=True)


def _steps(owner, steps):
    """Step indices as a 1-D integer array, or None (the final step)."""
    if steps is None:
        return None
    array = np.asarray(list(steps) if isinstance(steps, range) else steps)
    if array.ndim != 1 or array.size == 0 or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{owner}: steps must be a non-empty 1-D sequence of step indices, got {steps!r}")
    return array


def _steps_within(owner, steps, T):
    steps = np.array([T]) if steps is None else steps
    if steps.min() < 0 or steps.max() > T:
        raise ValueError(f"{owner}: steps must lie in [0, {T}], got {steps.min()}..{steps.max()}")
    return steps


def _int_array(values):
    array = ti.ndarray(ti.i32, (len(values),))
    array.from_numpy(np.asarray(values, dtype=np.int32))
    return array
