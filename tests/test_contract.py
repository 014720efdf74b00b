"""The contract every system in tisim.systems keeps, checked on each without listing them: gradients against
float64 central differences in every group, every schedule and mechanism agreeing, the bad-input matrix, a run in
Taichi's debug mode (bounds checks), and the accumulation rule in its source. A new system is checked here the
moment tisim.systems exports it."""
import ast
import inspect
import math

import numpy as np
import pytest

import tisim
from tisim.engine import System

SYSTEMS = [getattr(tisim.systems, name) for name in tisim.systems.__all__
           if isinstance(getattr(tisim.systems, name), type) and issubclass(getattr(tisim.systems, name), System)]
IDS = [cls.__name__ for cls in SYSTEMS]
HORIZON, BATCH = 6, 2


def schedules(cls):
    """Constructor keywords of every form of the step a class has."""
    return [dict(schedule=s) for s in ("items", "phased")] if cls.PHASES and cls.ITEMS else [{}]


def inside(interval, values):
    """values moved 1e-3 inside the interval's bounds (infinite bounds leave them be)."""
    return np.clip(values, interval.low + 1e-3, interval.high - 1e-3)


def problem(cls, seed=0, **keywords):
    """A small simulator of `cls` with nearby random inputs, and a loss that touches every state and the actions."""
    rng = np.random.default_rng(seed)
    sim = cls(horizon=HORIZON, batch=BATCH, **keywords)
    start = sim.initial_state
    sim.set_initial_state(**{k: v + 0.01 * rng.normal(size=v.shape) for k, v in start.items()})
    interval = cls.ACTION[0].interval
    sim.set_actions(inside(interval, 0.05 * rng.normal(size=(BATCH, HORIZON) + sim.action_shape)))
    target = {k: v[0] + 0.1 for k, v in start.items()}
    return sim, tisim.losses.TerminalTarget(target) + 0.01 * tisim.losses.Effort()


def flat(gradient):
    return np.concatenate([np.ravel(v) for group in (gradient.params, gradient.initial_state)
                           for v in group.values()] + [np.ravel(gradient.actions)])


@pytest.mark.parametrize("cls", SYSTEMS, ids=IDS)
def test_gradients_match_central_differences(cls):
    """Every group of every form of the step, against Richardson-extrapolated float64 central differences."""
    for keywords in schedules(cls):
        sim, loss = problem(cls, **keywords)
        report = tisim.gradcheck(sim, loss, step=1e-5, max_entries=6, extrapolate=True)
        assert report.worst <= 1e-5, f"{cls.__name__} {keywords}: {report}"


@pytest.mark.parametrize("cls", SYSTEMS, ids=IDS)
def test_every_schedule_and_mechanism_agrees(cls):
    """The unrolled gradient is the checkpointed one (two segments), the one-launch-per-step one of an item-wise
    or phased step (a GPU's schedule) and, for a system with two forms of its step, the other form's: to 1e-12 in
    float64."""
    sim, loss = problem(cls)
    reference = flat(sim.gradient(loss))
    scale = np.abs(reference).max()
    assert scale > 0
    variants = {"checkpointed": flat(sim.gradient(loss, method="checkpointed", segments=2))}
    for keywords in schedules(cls):
        for per_step in (False, True):
            other, _ = problem(cls, **keywords)
            if per_step and not (cls.ITEMS or other.phases):
                continue
            other._per_step = per_step
            variants[f"{keywords} per_step={per_step}"] = flat(other.gradient(loss))
    for name, values in variants.items():
        np.testing.assert_allclose(values, reference, rtol=1e-12, atol=1e-12 * scale, err_msg=name)


@pytest.mark.parametrize("cls", SYSTEMS, ids=IDS)
def test_bad_input_is_refused_by_name(cls):
    """Each malformed input raises before any work, naming the argument (and the allowed range)."""
    name = cls.__name__
    for keywords, message in [(dict(horizon=0), "horizon must be an integer >= 1"),
                              (dict(horizon=3, batch=0), "batch must be an integer >= 1"),
                              (dict(horizon=3, dt=-1.0), r"dt must be a finite number > 0"),
                              (dict(horizon=3, dt=math.nan), r"dt must be a finite number > 0"),
                              (dict(horizon=3, no_such_thing=1.0), "unknown keyword 'no_such_thing'")]:
        with pytest.raises(ValueError, match=f"{name}: {message}"):
            cls(**keywords)
    sim = cls(horizon=3)
    for q in cls.PARAMS:
        with pytest.raises(ValueError, match=f"set_params: {q.name} contains NaN"):
            sim.set_params(**{q.name: math.nan})
        if math.isfinite(q.interval.low):
            with pytest.raises(ValueError, match=rf"set_params: {q.name} must be in \{q.interval}"[:-1]):
                sim.set_params(**{q.name: q.interval.low - 1.0})
        with pytest.raises(ValueError, match=f"set_params: {q.name} must have shape"):
            sim.set_params(**{q.name: np.zeros((7, 5, 3))})
    for q in cls.STATE:
        with pytest.raises(ValueError, match=f"set_initial_state: {q.name} contains NaN"):
            sim.set_initial_state(**{q.name: math.nan})
    with pytest.raises(ValueError, match="set_actions: actions .* must have shape"):
        sim.set_actions(np.zeros((4,) + sim.action_shape))
    with pytest.raises(ValueError, match="set_actions: actions .* contain NaN"):
        sim.set_actions(np.full((3,) + sim.action_shape, math.nan))


@pytest.mark.parametrize("cls", [cls for cls in SYSTEMS if cls.OPTIONS], ids=[c.__name__ for c in SYSTEMS if c.OPTIONS])
def test_an_unknown_option_is_refused_with_the_choices(cls):
    """Every option of every system refuses a value it does not offer, listing the ones it does, before any work."""
    for key, allowed in cls.OPTIONS.items():
        with pytest.raises(ValueError, match=rf"{cls.__name__}: {key} must be one of \{list(allowed)}"[:-1]):
            cls(horizon=3, **{key: "no such choice"})


@pytest.mark.parametrize("cls", SYSTEMS, ids=IDS)
def test_debug_mode_run_gives_the_same_gradient(cls):
    """With tisim.init(debug=True) (Taichi's bounds checks on every array access) the rollout and gradient run
    and equal those of the ordinary runtime."""
    sim, loss = problem(cls)
    plain = flat(sim.gradient(loss))
    tisim.init(precision="f64", deterministic=True, debug=True)  # the next test's fixture restores the runtime
    sim, loss = problem(cls)
    np.testing.assert_allclose(flat(sim.gradient(loss)), plain, rtol=1e-12, atol=1e-12 * np.abs(plain).max())


class PlainStores(ast.NodeVisitor):
    """Plain stores (=, not +=) into the next state x[..., t + 1, ...] or into scratch w[...] in @ti.func bodies."""

    def __init__(self):
        self.found = []
        self.taichi = False

    def visit_FunctionDef(self, node):
        outer = self.taichi
        self.taichi = outer or any(ast.unparse(d) == "ti.func" for d in node.decorator_list)
        self.generic_visit(node)
        self.taichi = outer

    def visit_Assign(self, node):
        if not self.taichi:
            return
        for target in node.targets:
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                text = ast.unparse(target)
                if (target.value.id == "x" and "t + 1" in text) or target.value.id == "w":
                    self.found.append(f"line {node.lineno}: {ast.unparse(node)}")
        self.generic_visit(node)


@pytest.mark.parametrize("cls", SYSTEMS, ids=IDS)
def test_steps_accumulate_into_the_next_state(cls):
    """A plain store into x[t+1] gives the same rollout and a silently wrong adjoint (taichi-facts.md), so no
    system's source stores into the next state or into scratch: they add (+=, advance, accumulate)."""
    visitor = PlainStores()
    visitor.visit(ast.parse(inspect.getsource(inspect.getmodule(cls))))
    assert not visitor.found, f"{cls.__name__}: plain stores: {visitor.found}"


def test_the_store_check_can_fail():
    visitor = PlainStores()
    source = ("@ti.func\ndef step(x, w, b, t):\n    x[b, t + 1, 0] = 1.0\n    x[b, t + 1, 1] += 1.0\n"
              "    w[b, 3] = 0.0\n    y[b, t + 1] = 2.0\n\ndef numpy_side(x, t):\n    x[0, t + 1] = 0.0\n")
    visitor.visit(ast.parse(source))
    assert [line.split(":")[0] for line in visitor.found] == ["line 3", "line 5"]


def test_every_system_is_checked():
    """The classes found are the exported systems (a system left out of the contract would pass silently)."""
    assert {cls.__name__ for cls in SYSTEMS} == set(tisim.systems.__all__)
    assert len(SYSTEMS) >= 11
