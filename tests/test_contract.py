"""The contract every system in tisim.systems keeps, checked on each without listing them: tisim.testing.check_system
(gradients against float64 central differences in every group, every schedule and mechanism agreeing, the bad-input
matrix, batch independence, a run in Taichi's debug mode, the accumulation rule in its source, ...). A new system
is checked here the moment tisim.systems exports it; and the checker fails on systems that break the contract."""
import ast
import linecache

import pytest
import taichi as ti

import tisim
from tisim.core.engine import System
from tisim.core.quantities import Quantity
from tisim.testing import PlainStores, check_system

SYSTEMS = [getattr(tisim.systems, name) for name in tisim.systems.__all__
           if isinstance(getattr(tisim.systems, name), type) and issubclass(getattr(tisim.systems, name), System)]
IDS = [cls.__name__ for cls in SYSTEMS]


# Three of the tools' systems check their structure on elastic material: their default, von Mises clay, compiles
# each of the contract's kinds of pass (one launch per step, debug mode) several times longer, and MPM's own tests
# check that law's gradients against central differences (and, in make stress, against Taichi's reverse mode).
# Coupled keeps its clay: on elastic material its dropped disc meets a kink of the push law within the contract's
# difference step (1e-5: 1e-3 to 6e-2 off there, 1.4e-5 at a step of 1e-6, where rounding sets the floor).
KEYWORDS = {name: dict(material="neo_hookean") for name in ("Shaping", "Sculpting", "Tumbling")}


@pytest.mark.parametrize("cls", SYSTEMS, ids=IDS)
def test_the_system_keeps_the_contract(cls):
    # raises AssertionError naming the failed checks, with the report
    report = check_system(cls, keywords=KEYWORDS.get(cls.__name__))
    names = [check.name for check in report.checks]
    # the checks that must have run on every system (a check skipped by mistake would pass silently)
    for name in ("declarations", "units", "construction", "bad_input", "rollout", "finite", "agreement/checkpointed",
                 "adjoint", "batch_independence", "accumulation", "debug"):
        assert name in names, f"{cls.__name__}: {name} did not run: {report}"
    groups = [name.rpartition("/")[2] for name in names if name.startswith("gradient")]
    assert sorted(groups) == ["actions", "initial_state", "params"], report
    assert ("options" in names) == bool(cls.OPTIONS)


def test_every_system_is_checked():
    """The classes found are the exported systems (a system left out of the contract would pass silently)."""
    assert {cls.__name__ for cls in SYSTEMS} == set(tisim.systems.__all__)
    assert len(SYSTEMS) >= 11


def test_the_store_check_can_fail():
    visitor = PlainStores()
    source = ("@ti.func\ndef step(x, w, b, t):\n    x[b, t + 1, 0] = 1.0\n    x[b, t + 1, 1] += 1.0\n"
              "    w[b, 3] = 0.0\n    y[b, t + 1] = 2.0\n    s.x[s.b, s.t + 1, 2] = 0.0\n    s.w[s.b, 0] = 1.0\n"
              "    s.x[s.b, s.t, 2] = 0.0\n\ndef numpy_side(x, t):\n    x[0, t + 1] = 0.0\n")
    visitor.visit(ast.parse(source))
    assert [line.split(":")[0] for line in visitor.found] == ["line 3", "line 5", "line 7", "line 8"]


def test_the_store_check_reads_a_class_run_from_a_string():
    """A class whose module has no file (code run from a string, as a notebook does) is read from its functions'
    source; the static checks run even where the class cannot be built."""
    source = ("import taichi as ti\nfrom tisim.core.engine import System\n\nclass Unbuilt(System):\n"
              "    @ti.func\n    def step(self, s):\n        s.x[s.b, s.t + 1, 0] = 1.0\n")
    linecache.cache["<a notebook cell>"] = (len(source), None, source.splitlines(True), "<a notebook cell>")
    namespace = {"__name__": "a_notebook"}
    exec(compile(source, "<a notebook cell>", "exec"), namespace)
    report = check_system(namespace["Unbuilt"], raise_on_failure=False)
    assert "Unbuilt line 3: s.x[s.b, s.t + 1, 0] = 1.0" in report["accumulation"].detail
    assert "ACTION must declare exactly one quantity" in report["construction"].detail
    assert [check.name for check in report.failed] == ["declarations", "accumulation", "construction"]


# ---- systems that break the contract: the checker must say which rule ----------------------------------------------
class StoresTheNextState(System):
    """x[t+1] = a x[t] + u[t], written with a plain store instead of advance: the rollout is right, the adjoint the
    backward pass had left in x.grad[t+1] is overwritten."""

    PARAMS = (Quantity("a", 0.9, "-", "coefficient of x[t]"),)
    STATE = (Quantity("x", 0.0, "-", "the state"),)
    ACTION = (Quantity("u", 0.0, "-", "input added every step"),)
    DT = 1.0

    @ti.func
    def step(self, s: ti.template()):
        s.x[s.b, s.t + 1, 0] = s.param("a") * s.state("x") + s.action("u")


class ReadsAnotherBatchElement(System):
    """x[t+1] = a x[t] + u[t], with every element reading the first element's a."""

    PARAMS = (Quantity("a", 0.9, "-", "coefficient of x[t]"),)
    STATE = (Quantity("x", 0.0, "-", "the state"),)
    ACTION = (Quantity("u", 0.0, "-", "input added every step"),)
    DT = 1.0

    @ti.func
    def step(self, s: ti.template()):
        s.advance("x", 0, s.theta[0, self.P.a] * s.state("x") + s.action("u"))


class MisDeclared(System):
    """A correct step under wrong declarations: a default outside its bounds, a known name in a new unit."""

    PARAMS = (Quantity("a", -0.5, "-", "coefficient of x[t]", bounds="(0, 1)"),
              Quantity("g", 9.8, "m/s", "gravitational acceleration"))
    STATE = (Quantity("x", 0.0, "-", "the state"),)
    ACTION = (Quantity("u", 0.0, "-", "input added every step"),)
    DT = 1.0

    @ti.func
    def step(self, s: ti.template()):
        s.advance("x", 0, s.param("a") * s.state("x") + s.param("g") + s.action("u"))


def test_a_plain_store_into_the_next_state_fails_by_source_and_by_adjoint():
    """The store leaves the rollout and the gradients with respect to the inputs right, and erases the adjoint
    lambda_t = dL/dx_t of every step after the first: the checker finds it in the source and in the adjoint."""
    with pytest.raises(AssertionError, match=r"check_system\(StoresTheNextState\) failed accumulation, adjoint") \
            as failure:
        check_system(StoresTheNextState, debug=False)
    report = failure.value.report
    assert {check.name for check in report.failed} == {"adjoint", "accumulation"}, report
    assert report["adjoint"].measured > 0.1
    assert "s.x[s.b, s.t + 1, 0] = s.param" in report["accumulation"].detail  # the store, quoted
    assert report["gradient/initial_state"].passed and report["gradient/params"].passed


def test_reading_another_batch_element_fails_batch_independence():
    report = check_system(ReadsAnotherBatchElement, debug=False, raise_on_failure=False)
    assert not report.passed
    assert "batch_independence" in {check.name for check in report.failed}, report
    assert report["batch_independence"].measured > 1e-3
    assert report["accumulation"].passed and report["declarations"].passed


def test_wrong_declarations_fail_by_name():
    report = check_system(MisDeclared, debug=False, raise_on_failure=False)
    assert [check.name for check in report.failed] == ["declarations", "units"], report
    assert "the default -0.5 is outside its bounds (0, 1)" in report["declarations"].detail
    assert "'g' is in 'm/s' here but 'm/s^2'" in report["units"].detail
    assert report["declarations"].measured == report["units"].measured == 1
    without_units = check_system(MisDeclared, debug=False, units=False, raise_on_failure=False)
    assert [check.name for check in without_units.failed] == ["declarations"]
