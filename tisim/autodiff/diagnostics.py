"""A gradient health report for a rollout: where the adjoint grows or dies, where it turned non-finite, and which
non-smooth switches (contacts, sticking) fired along the way.

    report = tisim.diagnostics.health(sim, loss)
    print(report)                                  # a table per batch element
    tisim.plots.plot_health(report, "out/health.png")

adjoint_norm[b, t] = |lambda_t| = |dL/dx_t| over all states. Going backward from T, it grows like exp(rate (T - t))
in a chaotic or amplifying system and decays in a contracting one; ``growth`` is that rate per step, fitted to
log |lambda_t|. A gradient through many contact switches is piecewise: the events tell how many were crossed.

    with tisim.diagnostics.last_bits(1e-12, seed=1):   # every input moved in its last bits
        result = optimize_actions(sim, loss)             # does the outcome survive another CPU's rounding?
"""
import contextlib
from dataclasses import dataclass, field

import numpy as np

from tisim.core import engine
from tisim.core.derivatives import NonFiniteError


@dataclass
class HealthReport:
    """adjoint_norm (B, T+1); growth (B,) per step; first_nonfinite: (step, batch element, where) or None;
    events {name: bool (B, T+1)}; value: the loss (nan if the rollout failed)."""

    adjoint_norm: np.ndarray
    growth: np.ndarray
    first_nonfinite: tuple = None
    events: dict = field(default_factory=dict)
    value: float = float("nan")

    def switches(self):
        """{name: (B,) number of times the switch turned on or off}."""
        return {name: np.abs(np.diff(on.astype(int), axis=1)).sum(axis=1) for name, on in self.events.items()}

    def __str__(self):
        lines = [f"loss {self.value:.6g}"]
        if self.first_nonfinite:
            step, b, where = self.first_nonfinite
            lines.append(f"first non-finite: step {step}, batch element {b}, in the {where}")
        header = f"{'batch':>5} {'|lambda_T|':>11} {'|lambda_0|':>11} {'growth/step':>12}"
        switches = self.switches()
        lines.append(header + "".join(f" {name + ' switches':>22}" for name in switches))
        for b in range(len(self.growth)):
            norm = self.adjoint_norm[b]
            row = f"{b:>5} {norm[-1]:>11.4g} {norm[0]:>11.4g} {self.growth[b]:>12.4g}"
            lines.append(row + "".join(f" {int(count[b]):>22}" for count in switches.values()))
        return "\n".join(lines)


def growth_rate(adjoint_norm):
    """Per batch element, the slope of log |lambda_t| against steps back from T (least squares over finite,
    non-zero entries); positive: the adjoint grows going backward."""
    T = adjoint_norm.shape[1] - 1
    back = T - np.arange(T + 1)
    rates = np.full(adjoint_norm.shape[0], np.nan)
    for b, norm in enumerate(adjoint_norm):
        usable = np.isfinite(norm) & (norm > 0)
        if usable.sum() >= 2:
            rates[b] = np.polyfit(back[usable], np.log(norm[usable]), 1)[0]
    return rates


def health(sim, loss):
    """Run one gradient of ``loss`` on ``sim`` (unrolled) and report on its adjoint; see the module docstring."""
    B, T = sim.B, sim.T
    try:
        g = sim.gradient(loss)
    except NonFiniteError as error:
        where = "rollout" if error.step is not None else "loss"
        nan = np.full((B, T + 1), np.nan)
        return HealthReport(nan, np.full(B, np.nan), (error.step, error.batch, where), {})
    try:
        adjoint = g.adjoint
    except NonFiniteError as error:  # what the backward pass left is what this report is for
        adjoint = error.values
    norm = np.sqrt(sum(np.sum(v.reshape(B, T + 1, -1) ** 2, axis=2) for v in adjoint.values()))
    first = None
    bad = ~np.isfinite(norm)
    if bad.any():
        b, t = max(((b, int(np.max(np.nonzero(bad[b])[0]))) for b in range(B) if bad[b].any()), key=lambda p: p[1])
        first = (t, b, "adjoint (the backward pass; the rollout is finite)")
    return HealthReport(norm, growth_rate(norm), first, sim.events(sim.rollout()), g.value)


@contextlib.contextmanager
def last_bits(size=1e-12, seed=0):
    """Inside the block, every input a simulator is given (parameters, initial states and actions, by constructors and
    setters, so every optimizer iterate too) is shrunk toward zero by a random relative amount below ``size``.

    Another CPU rounds differently in the last bits (Taichi compiles for the host CPU; numpy's BLAS picks kernels per
    CPU), and so does another thread count; an optimization, a chaotic rollout or a statistic can turn that into a
    different answer. Run it again inside this block, with a few seeds, to see whether its outcome depends on
    rounding. Shrinking keeps every value inside its declared bounds (all of them hold 0 or end at it), and a zero
    stays zero. Not thread-safe: it applies to every simulator in the process while the block runs."""
    if isinstance(size, bool) or not isinstance(size, (int, float)) or not 0 <= size <= 1e-3:
        raise ValueError(f"last_bits: size must be a relative size in [0, 1e-3], got {size!r}")
    rng = np.random.default_rng(seed)
    previous = engine._jitter
    engine._jitter = lambda value: value * (1.0 - size * rng.random(np.shape(value)))
    try:
        yield
    finally:
        engine._jitter = previous
