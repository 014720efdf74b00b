"""What a pass through a simulator returns: its derivatives, and the error for a pass that turned non-finite.

A ``Gradient`` holds the loss and reads each gradient group from the simulator when it is first asked for; a
mechanism that computes its groups itself (checkpointed, forward mode, the continuous adjoint) hands them over
whole (``Gradient.computed``). Every group, however obtained, passes ``check_derivatives`` once.
"""
from dataclasses import dataclass

import numpy as np

from tisim.core.protocol import Protocol


class NonFiniteError(FloatingPointError):
    """A rollout produced NaN or infinity; the message names the system, the state and the first bad step.

    step and batch are the first bad step and its batch element (None when the loss alone is non-finite); values, for
    a gradient group that turned non-finite, what was computed (for a diagnosis, as tisim.diagnostics.health does)."""

    def __init__(self, message, step=None, batch=None, values=None):
        super().__init__(message)
        self.step, self.batch, self.values = step, batch, values


def nonfinite_rollout(sim, step, batch, state=None):
    """The NonFiniteError for a rollout whose state first turned non-finite at ``step`` in element ``batch``; with
    that step's ``state`` row at hand, it names the entries that went bad."""
    where = f"{type(sim).__name__}: the rollout turned non-finite at step {step} of {sim.T} (batch element {batch})"
    if state is not None:
        bad = [label for label, entry in zip(sim.state_layout.labels(), state) if not np.isfinite(entry)]
        where += f": state {named(bad)} = {state[~np.isfinite(state)][0]}"
    return NonFiniteError(where, step, batch)


def named(labels, most=8):
    """The first few labels, and how many more: a body of thousands of points must not give a message as long."""
    more = f" and {len(labels) - most} more" if len(labels) > most else ""
    return ", ".join(labels[:most]) + more


def check_derivatives(sim, group, value, mechanism="the backward pass"):
    """``value`` of a gradient group as fetched ("params" or "initial_state": {name: (B, ...)}, "actions" (B, T, ...),
    "adjoint": {name: (B, T+1, ...)}, "jacobian" (B, S, N)); raises NonFiniteError if any entry is non-finite
    (a derivative overflowed although the rollout is finite), naming the step where the array has a time axis: a
    non-finite adjoint carries into every earlier step (0 * NaN is NaN), so its last bad step is where it went bad."""
    arrays = value if isinstance(value, dict) else {group: value}
    if all(np.isfinite(a).all() for a in arrays.values()):  # the common case: one pass over each array
        return value
    a = next(np.asarray(a) for a in arrays.values() if not np.isfinite(a).all())
    bad = ~np.isfinite(a).reshape(len(a), -1).all(axis=1)
    b, step = int(np.argmax(bad)), None
    if group in ("actions", "adjoint"):
        rows = ~np.isfinite(a[b]).reshape(a.shape[1], -1).all(axis=1)
        step = int(np.flatnonzero(rows).max()) + (group == "actions")  # dL/da[t] comes from lambda_(t+1)
        where = f"at step {step} of {sim.T}"
    elif group == "jacobian":
        where = "in the jacobian"
    else:  # {name: (B, ...)} in layout order: name the entries
        layout = sim.param_layout if group == "params" else sim.state_layout
        entries = np.concatenate([np.reshape(v[b], -1) for v in arrays.values()])
        labels = [label for label, entry in zip(layout.labels(), entries) if not np.isfinite(entry)]
        where = "in " + named([f"dL/d{label}" for label in labels])
    raise NonFiniteError(f"{type(sim).__name__}: {mechanism} turned non-finite {where} (batch element {b}) although "
                         "the rollout is finite: a derivative overflowed (tisim.diagnostics.health shows the adjoint "
                         "of every step)", step, b, value)


class Gradient:
    """The result of one backward pass. All arrays keep the batch axis first.

    value: the loss summed over the batch [-]; per_batch: each element's loss, shape (B,).
    params[name]: dL/dtheta, shape (B, *shape). initial_state[name]: dL/dx_0, shape (B, *shape).
    actions: dL/da, shape (B, T, *action shape). adjoint[name]: lambda_t = dL/dx_t, shape (B, T+1, *shape).

    Groups are copied from the simulator when first read, so an optimizer loop that reads only ``actions`` never
    copies the trajectory; before the simulator's next pass overwrites its arrays, unread groups of a Gradient that
    is still referenced are copied, so every Gradient stays a snapshot of its own pass.
    """

    def __init__(self, sim, value, per_batch):
        self.value, self.per_batch = value, per_batch
        self._sim, self._groups, self._missing = sim, {}, ""

    @classmethod
    def computed(cls, sim, per_batch, groups, mechanism, missing):
        """A Gradient whose groups a mechanism computed itself ({group: value as check_derivatives takes it}); the
        groups it lacks raise ValueError with ``missing``."""
        gradient = cls(None, float(per_batch.sum()), per_batch)
        gradient._groups = {group: check_derivatives(sim, group, value, mechanism) for group, value in groups.items()}
        gradient._missing = missing
        return gradient

    def _group(self, name):
        if name not in self._groups:
            if self._sim is None:
                raise ValueError(f"Gradient.{name}: {self._missing or 'not available'}")
            try:
                self._groups[name] = check_derivatives(self._sim, name, Protocol.of(self._sim).fetch(name))
            except NonFiniteError as error:  # raised whenever the group is read
                self._groups[name] = error
        if isinstance(self._groups[name], NonFiniteError):
            raise self._groups[name]
        return self._groups[name]

    def _snapshot(self):
        for name in ("params", "actions", "adjoint", "initial_state"):
            try:
                self._group(name)
            except NonFiniteError:
                pass  # kept, and raised when the group is read
        self._sim = None

    params = property(lambda self: self._group("params"))
    actions = property(lambda self: self._group("actions"))
    adjoint = property(lambda self: self._group("adjoint"))
    initial_state = property(lambda self: self._group("initial_state"))

    def __repr__(self):
        return f"Gradient(value={self.value:.6g}, per_batch={self.per_batch})"


@dataclass
class Jacobian:
    """d x_T / d(inputs): matrix has shape (B, S, N); rows label the final-state entries, cols the inputs."""

    matrix: np.ndarray
    rows: list
    cols: list
