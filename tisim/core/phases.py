"""Phased steps: a step made of loops over different domains, with per-step scratch between them.

A system may declare its step as PHASES, each a loop over its own domain, in order:

    PHASES = (("springs", "n_springs"), ("particles", "n_particles"))
    SCRATCH = (Scratch("spring_force", "N", "...", shape=("n_springs", 2)),)

and implement each phase as ``name(self, s, i)``, a @ti.func for item i of its domain, where s is the step context
(tisim/core/access.py: ``Step``). s.w holds the scratch (read and written with s.scratch and s.accumulate); the last
phase writes the next state (with s.advance), the earlier ones write scratch only. A phase reads what earlier
phases of the step wrote, never what it writes itself.

A phase may repeat, as ("sweep", "n_contacts", 16): it is then ``name(self, s, i, r)``, run 16 times with r = 0, 1,
..., each run reading what the earlier ones wrote (an iterative solver's sweeps, each into
its own scratch slots: a phase still never reads what the same run writes). r is a run-time index, so the phase
compiles once however often it repeats: unrolled into one kernel, 16 sweeps of Rigid2D's contact solve take minutes
to compile for the backward pass (Taichi's passes grow faster than the code). The last phase cannot repeat.

A phase may be a solve differentiated by the implicit function theorem, as ("impulses", "n_contacts", "implicit"),
followed by any number of ("conditions", "n_contacts", "residual") entries. ``impulses_solve(self, s)`` finds the
solution y (into scratch) by any method, serial loops and early exits included: it is never differentiated.
``impulses`` and the residual phases after it, plain phases over their domains, compute the
residual r(y, inputs) of the conditions the solution meets into scratch, zero at the solution.
``impulses_reverse(self, s, bar)``, never differentiated either, reads the later phases' derivative ybar from the
scratch's derivative (bar: a step context over the derivative arrays, bar.scratch), solves (dr/dy)^T lambda = ybar
and adds -lambda there as the residual's derivative (bar.accumulate). The backward pass then differentiates the
residual phases, which gives the inputs dL/dinputs = -lambda^T dr/dinputs: the derivative of the exact solution,
however many iterations the solve took, at the cost of one adjoint solve (and the residual's adds to ybar,
-(dr/dy)^T lambda, cancel it, as they must). Later phases must not read the residual, and the adjoint must see
every other derivative of y, so only phases after the residual read y.

A plain phase may name a forward-only form for the fused schedule below, FUSED = {"scatter": ("scatter_point",
"n_particles")}: the same sums over another domain (MPM: a point with its cells unrolled, for a pair), so that both
schedules take the same steps: to the last bit where the sums keep their order (MassSpring's), to rounding where
they are regrouped for speed (MPM's). The last phase's FUSED form sets the next
state (s.set_next) instead of adding into it, every entry once: nothing differentiates it, so the += rule
has nothing to protect there, and the engine does not zero x[t+1] before it (on the 64 x 64 cloth the zeroing and
the adds cost 5% of the forward pass).

A plain phase may have a hand-written reverse, REVERSES = {"gather": ("gather_reverse", "n_particles")}:
``gather_reverse(self, s, bar, i)``, never differentiated, over its own domain: bar is the step context over the
derivative arrays (x.grad, theta.grad, u.grad, w.grad). It reads the derivatives of what the phase wrote
(bar.next_state, bar.scratch) and adds the derivatives of what it read (bar.add_state, bar.add_param,
bar.add_action, bar.accumulate). The backward pass runs it in place of Taichi's reverse of the phase (MPM: a point's
3^d cells unrolled, where Taichi's reverse mode of the unrolled form took minutes to compile).

The schedules:
- per step (every backward pass, and every pass on a GPU): one launch per step, each phase a top-level loop over
  batch x domain (a repeated phase: a launch per repetition). Taichi puts a barrier between top-level loops, and
  its reverse mode differentiates them correctly; it does not differentiate two sibling loops inside one outer
  loop (docs/taichi_pitfalls.md#sibling-inner-loops), so the phases cannot share the fused time loop of a plain
  step when differentiated.
- fused (the forward pass on a CPU, never differentiated): the phases as inner loops of the engine's one-kernel
  rollout, where sibling loops are correct and a step costs no launch (tests/test_contract.py compares the two on
  every phased system, tests/test_complementarity.py on a repeated phase).
- fused backward (a CPU, when every phase has a hand-written reverse): the backward pass is one kernel too, each
  step's recomputed scratch refilled by the FUSED forms, then the reverses, last phase first (run_reverses: on a
  small body a launch per step costs more than the step). Keep the reverses lean: the kernel holds every phase and
  its reverse at once, and Taichi's compile time grows faster than the code (halving the arithmetic of MPM 3D's
  transfer reverses halved its cold compile).

Scratch is zeroed by the engine before each step, except, in the fused forward pass, assigned scratch
(Scratch(assigned=True)), whose every entry one item sets once a step (s.assign). Kept scratch (keep=True)
has a row per step, which the backward pass reads; recomputed scratch (keep=False) has one row, and the backward
pass of step t first reruns the step's earlier phases on x[t] to refill it. In Taichi's debug mode
(tisim.init(debug=True)) the fused forward pass fills assigned scratch and a next state that is set with NaN
instead, so an entry a phase forgets ends the rollout with a NonFiniteError at that step.

Layout of w, shape (B, R + rows K): the recomputed scratch first (R entries), then one row of K kept entries per
step of the arrays it serves (the full horizon, or one checkpointed segment); in each part the assigned scratch
follows the scratch that is added into.
"""
import os
import warnings
from typing import Any, NamedTuple

import numpy as np
import taichi as ti

from tisim.core import runtime
from tisim.core.access import Step, entry_shape
from tisim.core.protocol import Protocol
from tisim.core.quantities import Layout

IMPLICIT = "implicit"  # a PHASES entry's third field: a solve with an adjoint (above)
RESIDUAL = "residual"  # ... a further phase of the residual of the implicit phase before it
REVERSE = "reverse"  # a plain phase with a hand-written reverse (REVERSES, above)
PLAIN = (0, IMPLICIT, RESIDUAL, REVERSE)  # the kinds of phase that run once a step, one item each
SERIAL_THREADS = 4  # a CPU of up to this many threads runs a step's item loops serialized (Scratchpad.steps)


class Phase(NamedTuple):
    """One phase of a step as the kernels run it, made by ``phase_list`` from a system's PHASES, FUSED and REVERSES
    (the kernels iterate over these records with ti.static, so they are plain values fixed at compile time)."""

    name: str  # as declared in PHASES
    function: Any  # the bound @ti.func for item i of the domain (its FUSED form in a fused list)
    size: int  # the domain's size, a STRUCTURE size
    kind: Any  # 0 (plain), a repeat count, IMPLICIT, RESIDUAL or REVERSE
    solve: Any = None  # IMPLICIT: the solve, once per batch element
    reverse: Any = None  # IMPLICIT: the adjoint solve; REVERSE: the hand-written reverse over its own domain
    reverse_size: int = 0  # REVERSE: the size of the reverse's domain


class LaunchUnit(NamedTuple):
    """Phases[first:last] launched together by the per-step schedule (fused: in their FUSED forms), of one kind: 0 for
    a run of plain phases, a repeat count, IMPLICIT (a solve with its residual phases) or REVERSE. A unit is a
    template argument of the kernels, kept from call to call (a number as a template would keep launch.Launches
    from binding the call)."""

    first: int
    last: int
    fused: bool
    kind: Any


class ScratchLayout:
    """Offsets of the scratch in w, for given structural sizes."""

    def __init__(self, scratch, sizes):
        self.names = [q.name for q in scratch]
        self.assigned = {q.name for q in scratch if q.assigned}
        # assigned scratch last in each part, so the entries a step must zero are a prefix of it
        scratch = sorted(scratch, key=lambda q: q.assigned)
        self.recomputed = Layout([q for q in scratch if not q.keep], sizes, "scratch")
        self.kept = Layout([q for q in scratch if q.keep], sizes, "scratch")
        # (recomputed, kept) entries that items add into, which the fused forward pass zeroes before a step
        self.zeroed = tuple(sum(int(np.prod(layout.shapes[q.name], dtype=int)) for q in layout.quantities.values()
                                if not q.assigned) for layout in (self.recomputed, self.kept))

    def width(self, rows):
        return self.recomputed.size + rows * self.kept.size

    def _layout(self, name):
        if name in self.kept.offsets:
            return self.kept
        if name in self.recomputed.offsets:
            return self.recomputed
        raise KeyError(f"no scratch named {name!r}; declared: {self.names}")

    def entry(self, name):
        """(offset at step 0, item width, item shape) of scratch `name`, at compile time."""
        layout = self._layout(name)
        offset, width, shape = entry_shape(layout, name)
        return offset + (self.recomputed.size if layout is self.kept else 0), width, shape

    def step_width(self, name):
        """How far step t + 1's entries lie from step t's: K for kept scratch, 0 for recomputed."""
        return self.kept.size if self._layout(name) is self.kept else 0


def phase_list(host, fused=False):
    """[Phase] of a kernel host, in order, for ti.static loops; fused: with the FUSED forms in place."""
    name = type(host).__name__
    declared = {}
    for attribute, form in (("FUSED", "its fused form"), ("REVERSES", "its hand-written reverse")):
        declared[attribute] = getattr(host, attribute, {})
        if attribute == "REVERSES" and getattr(host, "ADJOINTS", None):  # the earlier name
            warnings.warn(f"{name}: ADJOINTS is now REVERSES (the hand-written reverses of phases); the old name "
                          "will be removed", DeprecationWarning, stacklevel=2)
            declared[attribute] = {**host.ADJOINTS, **declared[attribute]}
        for phase, (function, domain) in declared[attribute].items():
            if phase not in [entry[0] for entry in host.PHASES if len(entry) == 2] or not hasattr(host, function) \
                    or domain not in host.sizes:
                raise ValueError(f"{name}: {attribute} maps a plain phase to ({form}, a STRUCTURE size), got "
                                 f"{phase!r}: {(function, domain)!r}")
    forms, reverses = declared["FUSED"] if fused else {}, declared["REVERSES"]
    if host.PHASES and len(host.PHASES[-1]) > 2:
        raise ValueError(f"{name}: the last phase writes the next state and cannot repeat or be a solve")
    phases = []
    for entry in host.PHASES:
        kind, extra = entry[2] if len(entry) > 2 else 0, {}
        if kind == IMPLICIT:
            missing = [entry[0] + part for part in ("_solve", "_reverse") if not hasattr(host, entry[0] + part)]
            if missing:
                raise ValueError(f"{name}: the implicit phase {entry[0]!r} needs {missing} (tisim/core/phases.py)")
            extra = dict(solve=getattr(host, entry[0] + "_solve"), reverse=getattr(host, entry[0] + "_reverse"))
        elif kind == RESIDUAL:
            if not phases or phases[-1].kind not in (IMPLICIT, RESIDUAL):
                raise ValueError(f"{name}: the residual phase {entry[0]!r} must follow an implicit phase")
        elif isinstance(kind, bool) or not isinstance(kind, int) or kind < 0 or (len(entry) > 2 and kind == 0):
            raise ValueError(f"{name}: phase {entry[0]!r} repeats an integer >= 1 times or is {IMPLICIT!r} or "
                             f"{RESIDUAL!r}, got {kind!r}")
        if entry[0] in reverses:
            reverse, domain = reverses[entry[0]]
            kind, extra = REVERSE, dict(reverse=getattr(host, reverse), reverse_size=host.sizes[domain])
        function, domain = forms.get(entry[0], entry[:2])
        phases.append(Phase(entry[0], getattr(host, function), host.sizes[domain], kind, **extra))
    return phases


def launch_units(phases, fused=False):
    """The per-step schedule's launches of a step, [LaunchUnit]: a run of plain phases in one kernel, one repeated
    phase (a launch per repetition), one implicit phase (its solve, then its residual phases; backwards, its
    adjoint solve, then the residual's gradient), or a phase with a hand-written reverse (backwards, that reverse).
    fused: the launches run the phases' FUSED forms (never differentiated: the backward pass's refill)."""
    units, first = [], 0
    for k, phase in enumerate(phases):
        if phase.kind == RESIDUAL:  # joins the implicit unit before it
            units[-1] = units[-1]._replace(last=k + 1)
            first = k + 1
        elif phase.kind:  # a count, IMPLICIT or REVERSE: a unit of its own
            if first < k:
                units.append(LaunchUnit(first, k, fused, 0))
            units.append(LaunchUnit(k, k + 1, fused, phase.kind))
            first = k + 1
    if first < len(phases):
        units.append(LaunchUnit(first, len(phases), fused, 0))
    return units


def unit_phases(host, unit):
    """The phases a launch unit runs (in Python, at compile time), in their FUSED forms where it says so."""
    return (host.fused_phases if unit.fused else host.phases)[unit.first:unit.last]


@ti.kernel
def run_step(host: ti.template(), x: ti.types.ndarray(ndim=3), theta: ti.types.ndarray(ndim=2),
             u: ti.types.ndarray(ndim=3), w: ti.types.ndarray(ndim=2), dt: float, t: ti.i32, serial: ti.template(),
             unit: ti.template(), r: ti.i32):
    # the unit's phases at step t, each a top-level loop; r: the repetition, for a repeated phase
    for phase in ti.static(unit_phases(host, unit)):
        ti.loop_config(serialize=serial)
        for b, i in ti.ndrange(x.shape[0], phase.size):
            s = ti.static(Step(host, x, theta, u, w, dt, b, t))
            if ti.static(phase.kind in PLAIN):
                phase.function(s, i)
            else:
                phase.function(s, i, r)


@ti.kernel
def run_reverse(host: ti.template(), x: ti.types.ndarray(ndim=3), x_grad: ti.types.ndarray(ndim=3),
                theta: ti.types.ndarray(ndim=2), theta_grad: ti.types.ndarray(ndim=2), u: ti.types.ndarray(ndim=3),
                u_grad: ti.types.ndarray(ndim=3), w: ti.types.ndarray(ndim=2), w_grad: ti.types.ndarray(ndim=2),
                dt: float, t: ti.i32, serial: ti.template(), unit: ti.template()):
    # the hand-written reverse of the unit's phase at step t over its own domain (never differentiated)
    ti.loop_config(serialize=serial)
    phase = ti.static(host.phases[unit.first])
    for b, i in ti.ndrange(x.shape[0], phase.reverse_size):
        phase.reverse(ti.static(Step(host, x, theta, u, w, dt, b, t)),
                      ti.static(Step(host, x_grad, theta_grad, u_grad, w_grad, dt, b, t)), i)


@ti.kernel
def run_fused(host: ti.template(), x: ti.types.ndarray(ndim=3), theta: ti.types.ndarray(ndim=2),
              u: ti.types.ndarray(ndim=3), w: ti.types.ndarray(ndim=2), dt: float, t0: ti.i32, t1: ti.i32,
              serial: ti.template()):
    # steps t0..t1-1 in one launch, the phases as inner loops in their FUSED forms (never differentiated): the
    # forward pass of a checkpointed segment on a CPU, the same steps as the per-step schedule (see FUSED above)
    ti.loop_config(serialize=serial)
    for b in range(x.shape[0]):
        for t in range(t0, t1):
            fused_step(host, x, theta, u, w, dt, b, t)


@ti.kernel
def run_reverses(host: ti.template(), x: ti.types.ndarray(ndim=3), x_grad: ti.types.ndarray(ndim=3),
                 theta: ti.types.ndarray(ndim=2), theta_grad: ti.types.ndarray(ndim=2), u: ti.types.ndarray(ndim=3),
                 u_grad: ti.types.ndarray(ndim=3), w: ti.types.ndarray(ndim=2), w_grad: ti.types.ndarray(ndim=2),
                 dt: float, t0: ti.i32, t1: ti.i32, serial: ti.template()):
    # The backward pass of steps t1 - 1 down to t0 in one launch, for a step whose every phase has a hand-written
    # reverse (never differentiated, so its phases may be sibling loops): the recomputed scratch refilled by the
    # FUSED forms of the earlier phases, then the reverses, last phase first
    ti.loop_config(serialize=serial)
    recomputed, kept = ti.static(host.scratch_layout.recomputed.size, host.scratch_layout.kept.size)
    zeroed = ti.static(host.scratch_layout.zeroed)
    for b in range(x.shape[0]):
        for k in range(t1 - t0):
            t = t1 - 1 - k
            for r in range(recomputed + t * kept, recomputed + (t + 1) * kept):
                w_grad[b, r] = 0.0
            if ti.static(recomputed):  # the refill writes the step's kept row again, so that is zeroed too
                for r in range(recomputed):
                    w_grad[b, r] = 0.0
                # only what the FUSED forms add into, as in fused_step: they set assigned scratch
                for r in range(zeroed[0]):
                    w[b, r] = 0.0
                for r in range(recomputed + t * kept, recomputed + t * kept + zeroed[1]):
                    w[b, r] = 0.0
                for phase in ti.static(host.fused_phases[:-1]):
                    for i in range(phase.size):
                        phase.function(ti.static(Step(host, x, theta, u, w, dt, b, t)), i)
            for phase in ti.static(host.phases[::-1]):
                for i in range(phase.reverse_size):
                    phase.reverse(ti.static(Step(host, x, theta, u, w, dt, b, t)),
                                  ti.static(Step(host, x_grad, theta_grad, u_grad, w_grad, dt, b, t)), i)


@ti.kernel
def run_solve(host: ti.template(), x: ti.types.ndarray(ndim=3), theta: ti.types.ndarray(ndim=2),
              u: ti.types.ndarray(ndim=3), w: ti.types.ndarray(ndim=2), dt: float, t: ti.i32, serial: ti.template(),
              unit: ti.template()):
    # the solve of the unit's implicit phase at step t, per batch element (never differentiated)
    ti.loop_config(serialize=serial)
    for b in range(x.shape[0]):
        ti.static(host.phases[unit.first].solve)(ti.static(Step(host, x, theta, u, w, dt, b, t)))


@ti.kernel
def run_implicit_reverse(host: ti.template(), x: ti.types.ndarray(ndim=3), theta: ti.types.ndarray(ndim=2),
                u: ti.types.ndarray(ndim=3), w: ti.types.ndarray(ndim=2), w_grad: ti.types.ndarray(ndim=2), dt: float,
                t: ti.i32, serial: ti.template(), unit: ti.template()):
    # the adjoint solve of the unit's implicit phase at step t, per batch element: w_grad of the solution in, w_grad
    # of the residual out
    ti.loop_config(serialize=serial)
    for b in range(x.shape[0]):
        ti.static(host.phases[unit.first].reverse)(ti.static(Step(host, x, theta, u, w, dt, b, t)),
                                                   ti.static(Step(host, None, None, None, w_grad, dt, b, t)))


@ti.kernel
def clear(w: ti.types.ndarray(ndim=2), w_grad: ti.types.ndarray(ndim=2), recomputed: ti.i32, kept: ti.i32,
          t0: ti.i32, t1: ti.i32, serial: ti.template()):
    # zero the recomputed scratch and the kept rows of steps t0..t1-1, values and gradients
    ti.loop_config(serialize=serial)
    for b in range(w.shape[0]):
        for k in range(recomputed):
            w[b, k] = 0.0
            w_grad[b, k] = 0.0
        for k in range(recomputed + t0 * kept, recomputed + t1 * kept):
            w[b, k] = 0.0
            w_grad[b, k] = 0.0


@ti.func
def fused_step(host: ti.template(), x: ti.template(), theta: ti.template(), u: ti.template(), w: ti.template(),
               dt, b, t):
    # The phases as inner loops of the engine's one-kernel forward pass (never differentiated: see above); the
    # step's scratch that items add into is zeroed here, while it is in cache. Assigned scratch is not: on the
    # 64 x 64 cloth, zeroing its spring forces cost 10% of the forward pass. In debug mode it is filled with NaN
    # instead, so that an entry no item assigns makes the rollout non-finite.
    recomputed, kept = ti.static(host.scratch_layout.recomputed.size, host.scratch_layout.kept.size)
    zeroed = ti.static(host.scratch_layout.zeroed)
    row = recomputed + t * kept  # where the step's kept scratch starts
    for k in range(zeroed[0]):
        w[b, k] = 0.0
    for k in range(zeroed[1]):
        w[b, row + k] = 0.0
    if ti.static(runtime.settings()["debug"]):
        for k in range(zeroed[0], recomputed):
            w[b, k] = ti.math.nan
        for k in range(zeroed[1], kept):
            w[b, row + k] = ti.math.nan
    s = ti.static(Step(host, x, theta, u, w, dt, b, t))
    for phase in ti.static(host.fused_phases):
        if ti.static(phase.kind == IMPLICIT):
            ti.static(phase.solve)(s)
        if ti.static(phase.kind in PLAIN):
            for i in range(phase.size):
                phase.function(s, i)
        else:
            for r in range(phase.kind):
                for i in range(phase.size):
                    phase.function(s, i, r)


class Scratchpad:
    """A simulator's scratch arrays, one per number of rows (the horizon; a checkpointed segment's length)."""

    def __init__(self, sim):
        self.sim = sim
        self.arrays = {}
        self.units = None  # (the whole step, its refill) as launch units, made once: their tuples key the bindings

    def __call__(self, rows):
        if rows not in self.arrays:
            self.arrays[rows] = ti.ndarray(runtime.real(), (self.sim.B, max(self.sim.scratch_layout.width(rows), 1)),
                                           needs_grad=True)
        return self.arrays[rows]

    def steps(self, x, u, t0, t1, serial, grad=False, per_step=False):
        """Steps t0..t1-1 of the states x (B, n+1, S), or their reverse-mode gradient. Unless per_step (a GPU's
        schedule: a launch per step), the forward steps are one launch, and so is the gradient where every phase
        has a hand-written reverse."""
        sim, layout = self.sim, self.sim.scratch_layout
        w = self(x.shape[1] - 1)
        protocol = Protocol.of(sim)
        launch, host = protocol.launch, protocol.kernels
        recomputed, kept = layout.recomputed.size, layout.kept.size
        # a step's loops run over batch x items, adding into shared entries (a grid cell, a particle's force), which
        # in a parallel loop are atomic adds. On a CPU of up to SERIAL_THREADS they run serialized, where adds are
        # plain: on 2 threads every batch size of MPM and MassSpring ran 1.4-2.3x faster serialized, so an atomic
        # costs 3-5x a plain add and only more threads than that may pay. On a GPU a serialized loop would run on
        # one GPU thread.
        threads = runtime.settings()["threads"] or os.cpu_count() or 1
        items = runtime.settings()["arch"] == "cpu" and (serial or threads <= SERIAL_THREADS)
        def run(units, t, grad=False):
            for unit in reversed(units) if grad else units:
                if unit.kind == IMPLICIT:
                    if grad:
                        launch(run_implicit_reverse, host, x, sim.theta, u, w, w.grad, sim.dt, t, serial, unit)
                    else:
                        launch(run_solve, host, x, sim.theta, u, w, sim.dt, t, serial, unit)
                    launch(run_step, host, x, sim.theta, u, w, sim.dt, t, items, unit, 0, grad=grad)
                    continue
                if unit.kind == REVERSE and grad:
                    launch(run_reverse, host, x, x.grad, sim.theta, sim.theta.grad, u, u.grad, w, w.grad, sim.dt, t,
                           items, unit)
                    continue
                runs = 1 if unit.kind in PLAIN else unit.kind
                for r in reversed(range(runs)) if grad else range(runs):
                    launch(run_step, host, x, sim.theta, u, w, sim.dt, t, items, unit, r, grad=grad)

        if self.units is None:
            self.units = launch_units(host.phases), launch_units(host.phases[:-1], fused=True)
        whole, refill = self.units
        if grad and host.fused_reverse and not per_step:
            launch(run_reverses, host, x, x.grad, sim.theta, sim.theta.grad, u, u.grad, w, w.grad, sim.dt, t0, t1,
                   serial)
            return
        if not grad:
            launch(clear, w, w.grad, recomputed, kept, t0, t1, serial)
            if not per_step:
                launch(run_fused, host, x, sim.theta, u, w, sim.dt, t0, t1, serial)
                return
            for t in range(t0, t1):
                if recomputed and t > t0:
                    launch(clear, w, w.grad, recomputed, kept, t, t, serial)
                run(whole, t)
            return
        for t in range(t1 - 1, t0 - 1, -1):
            if recomputed:
                launch(clear, w, w.grad, recomputed, kept, t, t + 1, serial)
                run(refill, t)
            run(whole, t, grad=True)
