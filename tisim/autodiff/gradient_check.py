"""Checking gradients: central differences in float64 against the backward pass, group by group."""
from dataclasses import dataclass, field

import numpy as np

from tisim.core import runtime
from tisim.core.engine import GROUPS
from tisim.core.protocol import Protocol


@dataclass
class GroupCheck:
    """One group's comparison: the worst relative error, where it occurred, and both gradients (flat, packed order)."""

    group: str
    worst: float
    worst_entry: str
    checked: int
    backward: np.ndarray = field(repr=False)
    central: np.ndarray = field(repr=False)


class GradcheckReport(dict):
    """{group: GroupCheck}; ``worst`` is the largest relative error over all groups."""

    @property
    def worst(self):
        return max((check.worst for check in self.values()), default=0.0)

    def __str__(self):
        lines = [f"{'group':<14} {'entries':>8} {'worst rel. error':>17}  where"]
        for check in self.values():
            lines.append(f"{check.group:<14} {check.checked:>8} {check.worst:>17.3e}  {check.worst_entry}")
        return "\n".join(lines)


def relative_errors(backward, central):
    """|backward - central| / max(|backward|, |central|, 1e-6 max|central|, 1e-12), entry by entry."""
    floor = max(1e-6 * float(np.max(np.abs(central), initial=0.0)), 1e-12)
    return np.abs(backward - central) / np.maximum(np.maximum(np.abs(backward), np.abs(central)), floor)


def _central(sim, loss, values, e, h):
    """(L(v + h e) - L(v - h e)) / 2h for entry e of the packed host array ``values``, per batch element."""
    original = values[:, e].copy()
    try:
        values[:, e] = original + h
        Protocol.of(sim).invalidate()
        up = sim.evaluate(loss)
        values[:, e] = original - h
        Protocol.of(sim).invalidate()
        down = sim.evaluate(loss)
    finally:
        values[:, e] = original
        Protocol.of(sim).invalidate()
    return (up - down) / (2 * h)


def gradcheck(sim, loss, *, groups=GROUPS, step=1e-5, max_entries=None, extrapolate=False, method="unrolled"):
    """Compare ``sim.gradient(loss)`` with central differences for each group ("params", "initial_state", "actions").

    Each entry is perturbed by +-h, h = step * max(1, |value|), in all batch elements at once (they are independent),
    so one check costs two rollouts per entry. max_entries: check at most this many entries per group, evenly spaced
    (default all). extrapolate: Richardson-extrapolate the differences at h and h/2 (error O(h^4) instead of
    O(h^2), twice the rollouts), for stiff systems where no single h is both small and above round-off.
    method: the mechanism under test, as in ``sim.gradient`` (method="forward_mode" has no action gradients).
    Needs the f64 runtime: in f32 the differences are dominated by round-off.
    Returns a ``GradcheckReport``; errors are relative (see ``relative_errors``), worst over entries and batch.
    """
    if runtime.settings()["precision"] != "f64":
        raise RuntimeError("gradcheck needs tisim.init(precision='f64')")
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        raise ValueError(f"gradcheck: groups must be among {list(GROUPS)}, got {unknown}")
    if not (0 < step < 1):
        raise ValueError(f"gradcheck: step must be in (0, 1), got {step}")
    g = sim.gradient(loss, method=method)
    backward = {
        "params": lambda: np.concatenate([v.reshape(sim.B, -1) for v in g.params.values()], axis=1),
        "initial_state": lambda: np.concatenate([v.reshape(sim.B, -1) for v in g.initial_state.values()], axis=1),
        "actions": lambda: g.actions.reshape(sim.B, -1),
    }
    labels = {"params": sim.param_layout.labels(), "initial_state": sim.state_layout.labels(),
              "actions": [f"{sim.action_name}[{t}][{j}]" for t in range(sim.T) for j in range(sim.action_layout.size)]}
    arrays = Protocol.of(sim).inputs
    report = GradcheckReport()
    for group in groups:
        values = arrays[group]
        count = values.shape[1]
        entries = np.arange(count) if not max_entries or count <= max_entries else \
            np.unique(np.linspace(0, count - 1, max_entries).round().astype(int))
        central = np.zeros((sim.B, len(entries)))
        for n, e in enumerate(entries):
            h = step * np.maximum(1.0, np.abs(values[:, e]))
            central[:, n] = _central(sim, loss, values, e, h)
            if extrapolate:
                central[:, n] = (4 * _central(sim, loss, values, e, h / 2) - central[:, n]) / 3
        ad = backward[group]()[:, entries]
        errors = relative_errors(ad, central)
        b, n = np.unravel_index(np.argmax(errors), errors.shape) if errors.size else (0, 0)
        report[group] = GroupCheck(group, float(errors.max(initial=0.0)),
                                   f"{labels[group][entries[n]]} (batch {b})" if errors.size else "-",
                                   int(errors.size), ad, central)
    return report
