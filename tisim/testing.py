"""The contract every system keeps, as one call: ``check_system(cls)`` runs it on any System subclass.

    from tisim.testing import check_system
    report = check_system(MySystem)        # raises AssertionError naming the failed checks
    print(report)                          # each check: measured value against its threshold

tests/test_contract.py runs it on every system tisim.systems exports; docs/adding_a_system.md shows how to read
its report. See ``check_system`` for the checks and their thresholds. ``assert_gradients_agree(ours, reference)``
holds two gradients of one problem together, entry by entry: a phase's hand-written reverse against Taichi's
reverse mode of it (a subclass with REVERSES = {}), or one mechanism against another.
"""
import math
import re
import time
from dataclasses import dataclass, field

import numpy as np

from tisim.autodiff.gradient_check import gradcheck
from tisim.core import losses, runtime
from tisim.core.engine import GROUPS, System
from tisim.core.protocol import Protocol
from tisim.core.quantities import Quantity
from tisim.core.stores import PlainStores, plain_stores

__all__ = ["Check", "ContractFailure", "PlainStores", "SystemReport", "assert_gradients_agree", "check_system"]

GRADIENT_TOLERANCE = 1e-5  # worst relative error against Richardson-extrapolated central differences, per group
AGREEMENT_TOLERANCE = 1e-12  # |g - g_ref| <= tol (max |g_ref| + |g_ref|) entry by entry: mechanisms, schedules
STEP = 1e-5  # central-difference step, relative to max(1, |value|)
ENTRIES = 6  # entries per group that the central differences check, evenly spaced
# Names the exported systems declare with more than one unit, on purpose (docs/reference/glossary.md says why)
SEVERAL_UNITS = {"x": ("m", "-"), "theta": ("rad", "-"), "drag": ("N s/m", "1/s")}


@dataclass
class Check:
    """One check: it passed when ``measured <= threshold``. measured is a relative error or a count of problems
    (threshold 0); detail says what went wrong, or why the check could not run."""

    name: str
    passed: bool
    measured: float
    threshold: float
    detail: str = ""
    seconds: float = 0.0


@dataclass
class SystemReport:
    """What ``check_system`` found: one ``Check`` per row, in the order they ran."""

    system: str
    checks: list = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self):
        return all(check.passed for check in self.checks)

    @property
    def failed(self):
        return [check for check in self.checks if not check.passed]

    def __getitem__(self, name):
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(f"no check named {name!r}; checks: {[check.name for check in self.checks]}")

    def __str__(self):
        width = max([len(check.name) for check in self.checks] + [5])
        lines = [f"check_system({self.system}): {len(self.checks) - len(self.failed)} of {len(self.checks)} checks "
                 f"passed in {self.seconds:.1f} s",
                 f"{'check':<{width}}  {'measured':>9}  {'threshold':>9}  result  {'time':>6}"]
        for check in self.checks:
            lines.append(f"{check.name:<{width}}  {check.measured:>9.2g}  {check.threshold:>9.2g}  "
                         f"{'pass' if check.passed else 'FAIL':<6}  {check.seconds:>5.2f}s")
        for check in self.failed:
            lines.append(f"{check.name}: {check.detail}")
        return "\n".join(lines)


class ContractFailure(AssertionError):
    """What check_system raises when a check fails: an AssertionError whose message names the failed checks and holds
    the report, which is also its ``report`` attribute."""

    def __init__(self, report):
        names = ", ".join(check.name for check in report.failed)
        super().__init__(f"check_system({report.system}) failed {names}\n{report}")
        self.report = report


def check_system(cls, *, keywords=None, horizon=6, batch=2, seed=0, debug=True, units=True,
                 raise_on_failure=True):
    """Run the contract on the system class ``cls`` and return a ``SystemReport``. With raise_on_failure (the
    default) a failed check raises ContractFailure, an AssertionError that names the failed checks, prints the
    report and carries it as ``.report``; with raise_on_failure=False the report is returned either way.

    The simulators are small: horizon 6, batch 2, inputs drawn near the defaults (states + 0.01 N(0, 1), actions
    0.05 N(0, 1), both inside their bounds) with ``seed``, and the loss TerminalTarget(x[0] + 0.1) + 0.01 Effort,
    which touches every state and the actions. The checks, in the order they run; each passes when measured <=
    threshold:

        check                 threshold  measured
        declarations          0          problems in the tables: a quantity without a unit or a meaning, a default
                                         outside its bounds, a parameter and a state of one name, not one ACTION
        units                 0          declared names whose unit is not one the exported systems give the name
                                         (x, theta and drag have two on purpose: SEVERAL_UNITS)
        accumulation          0          plain stores (=, not +=) into the next state x[..., t + 1, ...] or scratch
                                         w[...] in @ti.func bodies of the class, its bases (mixins included) and
                                         the functions of their modules
        construction          0          problems of cls(horizon=6) with the defaults: a non-finite or misshapen rollout
        bad_input             0          malformed inputs (horizon, batch, dt, unknown keywords and names, NaN, out of
                                         bounds, wrong shapes) accepted, or refused without naming the argument
        options               0          unknown option values accepted, or refused without the choices (OPTIONS only)
        rollout               0          states not shaped (B, T+1, *shape), or not starting at the initial state set
        finite                0          non-finite loss or gradient entries; an all-zero gradient counts as one
        agreement/<variant>   1e-12      max over entries of |g - g_ref| / (max |g_ref| + |g_ref|), g the flat
                                         gradient: the checkpointed mechanism (2 segments), a second simulator of the
                                         same problem, one launch per step (a GPU's schedule: item-wise and phased
                                         steps)
        gradient/<group>      1e-5       worst relative error of dL/d(params, initial_state, actions) against float64
                                         central differences, Richardson-extrapolated, step 1e-5, 6 entries per group
        adjoint               1e-12      as agreement, for lambda_t (t = 1, T - 1) against dL/dx_0 of the rollout
                                         restarted at x_t with the remaining actions
        batch_independence    1e-12      as agreement, for each batch element's rollout, loss and gradient against a
                                         batch-1 simulator of that element's inputs
        debug                 1e-12      as agreement, for the gradient in Taichi's debug mode (bounds checks; assigned
                                         scratch and a next state that is set are filled with NaN first)

    keywords: constructor keywords for every simulator it makes (structure sizes, options, parameter and state
    values), e.g. {"n": 3} for a smaller body or {"contact": "qp"} to check another law.
    debug: False skips the debug-mode check, the slowest. units: False skips the units check (for names that are
    not meant to join the exported systems' vocabulary).
    The checks need float64 and the debug check its own runtime: check_system restarts Taichi where it has to
    (tisim.init) and restores the settings it found, so simulators made before the call stop working.
    """
    if not (isinstance(cls, type) and issubclass(cls, System)) or cls is System:
        raise TypeError(f"check_system: cls must be a subclass of tisim.System, got {cls!r}")
    keywords = dict(keywords or {})
    start = time.perf_counter()
    report = SystemReport(cls.__name__)
    entry = runtime.current()
    checked = dict(entry or runtime.settings(), precision="f64", debug=False)
    try:
        runtime.ensure_init()
        if runtime.settings() != checked:
            _init(checked)
        _run(cls, report, keywords, horizon, batch, seed, debug, units, checked)
    finally:
        if entry is not None and runtime.settings() != entry:
            _init(entry)
        elif entry is None and runtime.settings() != checked:
            _init(checked)
    report.seconds = time.perf_counter() - start
    if raise_on_failure and not report.passed:
        raise ContractFailure(report)
    return report


def assert_gradients_agree(gradient, reference, tolerance=AGREEMENT_TOLERANCE):
    """Assert that two results of ``sim.gradient`` agree: every entry of every parameter's, initial state's and the
    actions' derivatives within ``tolerance`` of the reference's, relatively and against the largest entry of its
    name (empty names, such as a system's absent balls, skipped). The message names the entry that differs."""
    for group in ("params", "initial_state"):
        for name, value in getattr(reference, group).items():
            if value.size:
                np.testing.assert_allclose(getattr(gradient, group)[name], value, rtol=tolerance,
                                           atol=tolerance * np.abs(value).max(), err_msg=f"{group} {name}")
    np.testing.assert_allclose(gradient.actions, reference.actions, rtol=tolerance,
                               atol=tolerance * np.abs(reference.actions).max(), err_msg="actions")


def _init(settings):
    runtime.init(**{key: settings[key] for key in ("arch", "precision", "deterministic", "threads", "debug")})


def _run(cls, report, keywords, horizon, batch, seed, debug, units, settings):
    def check(name, threshold, measure):
        """measure() -> (measured, detail); an exception fails the check with its message."""
        begun = time.perf_counter()
        try:
            measured, detail = measure()
        except Exception as error:  # a broken system may fail anywhere: that is this check's finding
            measured, detail = math.inf, f"{type(error).__name__}: {error}"
        passed = bool(measured <= threshold)
        report.checks.append(Check(name, passed, float(measured), float(threshold), "" if passed else detail,
                                   time.perf_counter() - begun))
        return passed

    check("declarations", 0, lambda: _count(_declaration_problems(cls)))
    if units:
        check("units", 0, lambda: _count(_unit_clashes(cls)))
    check("accumulation", 0, lambda: _count(plain_stores(cls)))
    if not check("construction", 0, lambda: _count(_construction_problems(cls, keywords, horizon))):
        return  # the rest make simulators the same way
    check("bad_input", 0, lambda: _count(_bad_input_accepted(cls, keywords)))
    if cls.OPTIONS:
        check("options", 0, lambda: _count(_unknown_options_accepted(cls, keywords)))

    state = {}

    def rollout():
        sim, loss = _problem(cls, keywords, horizon, batch, seed)
        state.update(sim=sim, loss=loss, traj=sim.rollout())
        return _count(_rollout_problems(sim, state["traj"]))

    def finite():
        gradient = state["sim"].gradient(state["loss"])
        state.update(reference=_flat(gradient), per_batch=gradient.per_batch, adjoint=gradient.adjoint)
        return _count(_finite_problems(state["per_batch"], state["reference"]))

    if not (check("rollout", 0, rollout) and check("finite", 0, finite)):
        return  # the checks below compare against this rollout's gradient
    ref, scale = state["reference"], np.abs(state["reference"]).max()

    # a second simulator of the same problem, fused and, where the step has phases, a launch per step
    variants = {"checkpointed": lambda: _flat(state["sim"].gradient(state["loss"], method="checkpointed",
                                                                    segments=2))}
    for per_step in (False, True):
        if per_step and not state["sim"].phases:
            continue

        def variant(per_step=per_step):
            other, loss = _problem(cls, keywords, horizon, batch, seed)
            _set_per_step(other, per_step)
            return _flat(other.gradient(loss))
        variants["one launch per step" if per_step else "same problem"] = variant
    for name, compute in variants.items():
        check(f"agreement/{name}", AGREEMENT_TOLERANCE, lambda compute=compute: (_disagreement(compute(), ref), ""))

    for group in GROUPS:
        def differences(group=group):
            result = gradcheck(state["sim"], state["loss"], groups=(group,), step=STEP, max_entries=ENTRIES,
                               extrapolate=True)
            return result.worst, f"worst at {result[group].worst_entry}\n{result}"
        check(f"gradient/{group}", GRADIENT_TOLERANCE, differences)

    check("adjoint", AGREEMENT_TOLERANCE, lambda: _adjoint_error(cls, keywords, state))
    check("batch_independence", AGREEMENT_TOLERANCE,
          lambda: _batch_dependence(cls, keywords, state, scale))
    if debug:
        def in_debug_mode():
            _init(dict(settings, debug=True))
            sim, loss = _problem(cls, keywords, horizon, batch, seed)
            return _disagreement(_flat(sim.gradient(loss)), ref), ""
        check("debug", AGREEMENT_TOLERANCE, in_debug_mode)


def _count(problems):
    return len(problems), "; ".join(problems)


# ---- the problem ---------------------------------------------------------------------------------------------------
def _inside(interval, values):
    """values moved 1e-3 inside the interval's bounds (infinite bounds leave them be)."""
    return np.clip(values, interval.low + 1e-3, interval.high - 1e-3)


def _problem(cls, keywords, horizon, batch, seed):
    """A small simulator of `cls` with nearby random inputs, and a loss that touches every state and the actions."""
    rng = np.random.default_rng(seed)
    sim = cls(horizon=horizon, batch=batch, **keywords)
    start = sim.initial_state
    intervals = {q.name: q.interval for q in cls.STATE}
    sim.set_initial_state(**{k: _inside(intervals[k], v + 0.01 * rng.normal(size=v.shape)) for k, v in start.items()})
    sim.set_actions(_inside(cls.ACTION[0].interval, 0.05 * rng.normal(size=(batch, horizon) + sim.action_shape)))
    target = {k: v[0] + 0.1 for k, v in start.items()}
    return sim, losses.TerminalTarget(target) + 0.01 * losses.Effort()


def _flat(gradient):
    return np.concatenate([np.ravel(v) for group in (gradient.params, gradient.initial_state)
                           for v in group.values()] + [np.ravel(gradient.actions)])


def _disagreement(values, reference, scale=None):
    """max |values - reference| / (scale + |reference|), scale = max |reference| by default: <= tol is
    numpy.testing.assert_allclose(values, reference, rtol=tol, atol=tol * scale)."""
    values, reference = np.asarray(values, dtype=float), np.asarray(reference, dtype=float)
    if values.shape != reference.shape:
        raise ValueError(f"shape {values.shape} against the reference's {reference.shape}")
    scale = np.abs(reference).max(initial=0.0) if scale is None else scale
    denominator = scale + np.abs(reference)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(values == reference, 0.0, np.abs(values - reference) / denominator)
    return float(np.nan_to_num(ratio, nan=np.inf).max(initial=0.0))


def _set_per_step(simulator, on):
    """Run a simulator on a GPU's schedule, one launch per step (on), or the fused one where the device allows."""
    Protocol.of(simulator).per_step = on


# ---- the checks ----------------------------------------------------------------------------------------------------
def _declaration_problems(cls):
    problems = []
    if len(cls.ACTION) != 1:
        problems.append(f"ACTION declares {len(cls.ACTION)} quantities; it declares exactly one")
    seen = {}
    for group in ("PARAMS", "STATE", "ACTION", "SCRATCH"):
        for q in getattr(cls, group):
            where = f"{group} {getattr(q, 'name', q)!r}"
            if group != "SCRATCH" and not isinstance(q, Quantity):
                problems.append(f"{where} is not a Quantity")
                continue
            if not (q.unit and q.meaning):
                problems.append(f"{where} needs a unit and a meaning ('-' for dimensionless)")
            if group != "SCRATCH" and not q.interval.contains(q.default):
                problems.append(f"{where}: the default {q.default:g} is outside its bounds {q.interval}")
            if group in ("PARAMS", "STATE") and q.name in seen:
                problems.append(f"{where}: the name is declared in {seen[q.name]} too (constructor keywords are "
                                "by name)")
            seen.setdefault(q.name, group)
    return problems


def _exported_units(but=None):
    """{name: {unit: [systems]}} over the systems tisim.systems exports, leaving out the class `but`."""
    import tisim.systems

    units = {}
    for name in tisim.systems.__all__:
        system = getattr(tisim.systems, name)
        if system is but:
            continue
        for group in ("PARAMS", "STATE", "ACTION", "SCRATCH"):
            for q in getattr(system, group, ()):
                units.setdefault(q.name, {}).setdefault(q.unit, []).append(name)
    return units


def _unit_clashes(cls):
    known, clashes = _exported_units(but=cls), []
    for group in ("PARAMS", "STATE", "ACTION", "SCRATCH"):
        for q in getattr(cls, group):
            if q.name in known and q.unit not in known[q.name] and q.unit not in SEVERAL_UNITS.get(q.name, ()):
                elsewhere = "; ".join(f"{unit!r} in {', '.join(systems)}" for unit, systems in known[q.name].items())
                clashes.append(f"{q.name!r} is in {q.unit!r} here but {elsewhere}: keep the unit or pick a new name")
    return clashes


def _construction_problems(cls, keywords, horizon):
    sim = cls(horizon=horizon, **keywords)
    return _rollout_problems(sim, sim.rollout())  # a non-finite rollout raises NonFiniteError, naming step and state


def _bad_input_accepted(cls, keywords):
    """Each malformed input must raise ValueError before any work, with a message naming the argument."""
    name, problems = cls.__name__, []

    def expect(description, call, pattern):
        try:
            call()
        except ValueError as error:
            if not re.search(pattern, str(error)):
                problems.append(f"{description}: the message {str(error)!r} does not match {pattern!r}")
            return
        except Exception as error:
            problems.append(f"{description}: raised {type(error).__name__} ({error}), not ValueError")
            return
        problems.append(f"{description}: accepted")

    def make(**changes):
        return lambda: cls(**{**keywords, **changes})

    expect("horizon=0", make(horizon=0), f"{name}: horizon must be an integer >= 1")
    expect("batch=0", make(horizon=3, batch=0), f"{name}: batch must be an integer >= 1")
    expect("dt=-1", make(horizon=3, dt=-1.0), rf"{name}: dt must be a finite number > 0")
    expect("dt=nan", make(horizon=3, dt=math.nan), rf"{name}: dt must be a finite number > 0")
    expect("an unknown keyword", make(horizon=3, no_such_thing=1.0), f"{name}: unknown keyword 'no_such_thing'")
    sim = cls(horizon=3, **keywords)
    expect("an unknown parameter", lambda: sim.set_params(no_such_thing=1.0),
           "set_params: unknown parameter name 'no_such_thing'")
    for q in cls.PARAMS:
        expect(f"{q.name}=nan", lambda q=q: sim.set_params(**{q.name: math.nan}), f"set_params: {q.name} contains NaN")
        if math.isfinite(q.interval.low):
            expect(f"{q.name} below its bounds", lambda q=q: sim.set_params(**{q.name: q.interval.low - 1.0}),
                   rf"set_params: {q.name} must be in \{q.interval}"[:-1])
        expect(f"{q.name} of a wrong shape", lambda q=q: sim.set_params(**{q.name: np.zeros((7, 5, 3))}),
               f"set_params: {q.name} must have shape")
    for q in cls.STATE:
        expect(f"initial {q.name}=nan", lambda q=q: sim.set_initial_state(**{q.name: math.nan}),
               f"set_initial_state: {q.name} contains NaN")
        if math.isfinite(q.interval.low):
            expect(f"initial {q.name} below its bounds",
                   lambda q=q: sim.set_initial_state(**{q.name: q.interval.low - 1.0}),
                   rf"set_initial_state: {q.name} must be in \{q.interval}"[:-1])
    expect("actions of a wrong shape", lambda: sim.set_actions(np.zeros((4,) + sim.action_shape)),
           "set_actions: actions .* must have shape")
    expect("actions with NaN", lambda: sim.set_actions(np.full((3,) + sim.action_shape, math.nan)),
           "set_actions: actions .* contain NaN")
    return problems


def _unknown_options_accepted(cls, keywords):
    problems = []
    for key, allowed in cls.OPTIONS.items():
        pattern = rf"{cls.__name__}: {key} must be one of \{list(allowed)}"[:-1]
        try:
            cls(horizon=3, **{**keywords, key: "no such choice"})
            problems.append(f"{key}='no such choice' accepted")
        except ValueError as error:
            if not re.search(pattern, str(error)):
                problems.append(f"{key}: the message {str(error)!r} does not list the choices {list(allowed)}")
    return problems


def _rollout_problems(sim, traj):
    problems = []
    if set(traj) != set(sim.state_layout.names):
        problems.append(f"the rollout has states {sorted(traj)}, the system declares {sim.state_layout.names}")
    start = sim.initial_state
    for name, shape in sim.state_layout.shapes.items():
        expected = (sim.B, sim.T + 1) + shape
        if name not in traj:
            continue
        if traj[name].shape != expected:
            problems.append(f"{name} has shape {traj[name].shape}, not (B, T+1, *shape) = {expected}")
        elif not np.array_equal(traj[name][:, 0], start[name]):
            problems.append(f"{name}[:, 0] is not the initial state set")
    return problems


def _finite_problems(per_batch, gradient):
    problems = []
    if not np.all(np.isfinite(per_batch)):
        problems.append(f"the loss is non-finite: {per_batch}")
    bad = int(np.sum(~np.isfinite(gradient)))
    if bad:
        problems.append(f"{bad} gradient entries are non-finite")
    elif not np.any(gradient):
        problems.append("the gradient is zero in every entry: the checks against it would pass vacuously")
    return problems


def _adjoint_error(cls, keywords, state):
    """The adjoint lambda_t = dL/dx_t at t = 1 and T - 1 against dL/dx_0 of a simulator that starts at x_t with the
    remaining actions (the loss's terms all lie at the final step or on actions, so it is the same function of
    x_t). A plain store into x[t+1] leaves every other gradient right and erases these."""
    sim, loss, traj, adjoint = (state[k] for k in ("sim", "loss", "traj", "adjoint"))
    worst, detail = 0.0, ""
    for t in sorted({1, sim.T - 1} & set(range(1, sim.T))):
        rest = cls(horizon=sim.T - t, batch=sim.B, **keywords)
        rest.set_initial_state(**{k: v[:, t] for k, v in traj.items()})
        rest.set_actions(sim.actions[:, t:])
        theirs = rest.gradient(loss).initial_state
        error = _disagreement(np.concatenate([np.ravel(adjoint[k][:, t]) for k in theirs]),
                              np.concatenate([np.ravel(v) for v in theirs.values()]))
        if error > worst or not detail:
            worst, detail = error, f"lambda_{t} differs from dL/dx_0 of the rollout restarted at step {t}"
    return worst, detail


def _batch_dependence(cls, keywords, state, scale):
    """Element b of the batch against a batch-1 simulator of element b's inputs: rollout, loss and gradient."""
    sim, loss, traj, reference, per_batch = (state[k] for k in ("sim", "loss", "traj", "reference", "per_batch"))
    params, start, actions = sim.params, sim.initial_state, sim.actions
    # the flat gradient is (params..., initial states..., actions), each quantity batch-major
    sizes = [v[0].size for v in params.values()] + [v[0].size for v in start.values()] + [actions[0].size]
    pieces = np.split(reference, np.cumsum([s * sim.B for s in sizes])[:-1])
    worst, detail = 0.0, ""
    for b in range(sim.B):
        alone = cls(horizon=sim.T, **keywords)
        alone.set_params(**{k: v[b] for k, v in params.items() if not np.array_equal(alone.params[k][0], v[b])})
        alone.set_initial_state(**{k: v[b] for k, v in start.items()})
        alone.set_actions(actions[b])
        mine = np.concatenate([np.ravel(traj[k][b]) for k in traj])
        theirs = np.concatenate([np.ravel(v[0]) for v in alone.rollout().values()])
        gradient = alone.gradient(loss)
        own = np.concatenate([piece.reshape(sim.B, -1)[b] for piece in pieces])
        for what, a, r, s in (("rollout", theirs, mine, np.abs(mine).max()),
                              ("loss", gradient.per_batch, per_batch[b:b + 1], abs(per_batch[b])),
                              ("gradient", _flat(gradient), own, scale)):
            error = _disagreement(a, r, s)
            if error > worst:
                worst, detail = error, f"batch element {b}'s {what} differs from a batch-1 simulator's"
    return worst, detail
