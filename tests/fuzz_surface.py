"""Property-based fuzzing of tisim's public surface (hypothesis), for every system in tisim.systems automatically.

Every input either works or is refused with a ValueError or TypeError whose message names the argument at fault;
an accepted input gives finite results or a NonFiniteError naming the step; nothing crashes the process. Forward
mode may also answer NotImplementedError for the systems Taichi 1.7 cannot differentiate that way (documented).
tests/test_surface.py runs this script in a subprocess, so that a crash is seen as one.

    python tests/fuzz_surface.py --examples 10        # what make test runs
    python tests/fuzz_surface.py --examples 500       # an occasional long run

Prints one JSON line: the inputs tried, how many were accepted and refused, per kind; exits 1 on a violation.
"""
import argparse
import collections
import inspect
import json
import os
import sys
import tempfile
import time

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

os.environ.setdefault("TI_SKIP_VERSION_CHECK", "ON")
import tisim  # noqa: E402
from tisim import NonFiniteError  # noqa: E402
from tisim.core.quantities import sizes_of  # noqa: E402
from tisim.losses import Effort, TerminalSum, TerminalTarget, Tracking  # noqa: E402
from tisim.robots import Robot, grid  # noqa: E402
from tisim.systems.mpm import Body  # noqa: E402
from tisim.tasks import identify, optimize_actions  # noqa: E402

SYSTEMS = [getattr(tisim.systems, name) for name in tisim.systems.__all__]
# small instances: a reverse-mode Jacobian takes one backward pass per state entry
# and for the tools' systems elastic material: their default clay (von Mises) compiles each new kind of pass several
# times longer, and the surface is the same
ELASTIC = dict(material="neo_hookean")
SMALL = dict(MassSpring=dict(robot=grid(2, 2)), StiffChain=dict(n=2), ResidualPendulum=dict(hidden=3),
             MPM=dict(body=Body.box([0.45, 0.45], [0.55, 0.55], 0.05), n_grid=8), Shaping=ELASTIC,
             Sculpting=ELASTIC, Coupled=ELASTIC, Tumbling=ELASTIC)
TALLY = collections.Counter()

# hostile values: wild floats, wrong types, wrong shapes
wild_float = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -0.0, 1e-300, -1e300, 1e300])
not_numbers = st.booleans() | st.none() | st.text(max_size=3) | st.lists(wild_float, max_size=3) | st.just({"a": 1})
hostile = wild_float | st.integers(-10**6, 10**6) | not_numbers
# sizes: wrong kinds and values below the minimum, but no huge valid ones (a horizon of 10^6 is valid, and slow); the
# huge ones are past what 32-bit indices reach, refused before anything is made
sizes = st.integers(-2, 3) | wild_float | not_numbers | st.sampled_from([2 ** 31, 10 ** 12])
# the keywords that are no number of the step's arrays: what each takes, right and wrong
OWN = dict(
    robot=st.sampled_from(["worm", "no_such_robot", "", "/no/such/robot.json", "assets"]) | hostile,
    # bodies inside the walls of the small grid, and outside them (2D and 3D, refused before any compiling)
    body=st.sampled_from([Body.box([0.45, 0.45], [0.55, 0.55], 0.05), Body.box([0.0, 0.0], [0.2, 0.2], 0.05),
                          Body.box([0.0, 0.0, 0.0], [0.2, 0.2, 0.2], 0.05)]) | hostile,
    n_grid=st.sampled_from([0, 7, 8, 40000]) | sizes,
    dt=st.sampled_from([1e-5, 1e-4, 1e-3]) | hostile,
    spheres=st.lists(st.lists(wild_float, max_size=3), max_size=2) | hostile,
    boxes=st.lists(st.lists(wild_float, max_size=3), max_size=2) | hostile,
    sweeps=sizes, n_discs=sizes, n_boxes=sizes, hidden=sizes, seed=sizes,
    # MJCF: no file, a file that is not one, XML that MuJoCo refuses, and things that are no tree
    tree=st.sampled_from(["", "/no/such/robot.xml", "assets", "<mujoco><worldbody/></mujoco>", "<mujoco>"]) | hostile,
    ignore=st.sampled_from([(), ("contacts",), ("limits", "ref"), ("nothing",), "contacts"]) | hostile,
)


def arrays(shape):
    """The declared shape with wild entries, one entry too many or too few, or anything hostile."""
    wrong = st.sampled_from([(), (1,), (2, 3), shape + (1,), tuple(s + 1 for s in shape)])
    return (st.builds(lambda v: np.full(shape, v), wild_float)
            | wrong.flatmap(lambda s: st.builds(lambda v: np.full(s, v), wild_float)) | hostile)


class Violation(AssertionError):
    pass


def judged(kind, call, names, forward=False):
    """Run call(); it must return, or raise ValueError / TypeError naming one of `names`, or NonFiniteError naming
    its step (NotImplementedError too where `forward`). Returns the result or None."""
    TALLY[kind + " tried"] += 1
    try:
        result = call()
    except NonFiniteError as error:
        if "non-finite" not in str(error):
            raise Violation(f"{kind}: NonFiniteError without its step: {error}") from None
        TALLY[kind + " non-finite"] += 1
        return None
    # a missing robot file is FileNotFoundError; arrays beyond the machine's memory, MemoryError
    except (ValueError, TypeError, FileNotFoundError, MemoryError) as error:
        if not any(str(name) in str(error) for name in names):
            raise Violation(f"{kind}: {type(error).__name__} does not name {names}: {error}") from None
        TALLY[kind + " refused"] += 1
        return None
    except NotImplementedError as error:
        if not forward:
            raise Violation(f"{kind}: NotImplementedError outside forward mode: {error}") from None
        TALLY[kind + " not implemented"] += 1
        return None
    TALLY[kind + " accepted"] += 1
    return result


def read(value):
    """A result as {name: array}: every group a Gradient has (reading one may raise NonFiniteError), a Jacobian's
    matrix, a rollout's states."""
    if hasattr(value, "per_batch"):
        groups = {"value": value.value}
        for name in ("params", "initial_state", "actions"):
            try:
                got = getattr(value, name)
            except ValueError:  # a group this mechanism does not compute (forward mode: actions)
                continue
            groups.update(got if isinstance(got, dict) else {name: got})
        return groups
    if hasattr(value, "matrix"):
        return {"matrix": value.matrix}
    return value if isinstance(value, dict) else {"value": value}


def finite(kind, value):
    """Every number in a result (as read) is finite."""
    for name, entry in value.items():
        if not np.all(np.isfinite(entry)):
            raise Violation(f"{kind}: an accepted input gave a non-finite {name} without a NonFiniteError")


def make(cls, **keywords):
    return cls(**{"horizon": 6, **SMALL.get(cls.__name__, {}), **keywords})


def keyword_names(cls):
    names = [q.name for q in cls.PARAMS + cls.STATE] + list(sizes_of(cls)) + list(cls.OPTIONS)
    own = [k for k in inspect.signature(cls.__init__).parameters if k not in ("self", "values")]  # robot, seed...
    return sorted(set(names + own)) + ["colour"]  # and one that is no keyword at all


def question(sim, kind, method, wrt, mode):
    """A gradient or a Jacobian of an accepted simulator: finite, or a named error."""
    loss = TerminalTarget({sim.STATE[0].name: 0.0}) + 1e-3 * Effort()
    if kind == "gradient":
        result = judged("gradient", lambda: read(sim.gradient(loss, method=method)), ["method", "segments"],
                        forward=method == "forward_mode")
    else:
        result = judged("jacobian", lambda: read(sim.jacobian(wrt=wrt, mode=mode)), ["wrt", "mode"],
                        forward=mode == "forward")
    if result is not None:
        finite(kind, result)


def run_all(examples):
    common = settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                      suppress_health_check=list(HealthCheck))
    questions = dict(kind=st.sampled_from(["gradient", "jacobian"]),
                     method=st.sampled_from(["unrolled", "checkpointed", "forward_mode", "continuous_adjoint",
                                             "backprop", 3]),
                     wrt=st.sampled_from(["params", "initial_state", "actions", "theta"]),
                     mode=st.sampled_from(["auto", "reverse", "forward", None]))

    for cls in SYSTEMS:
        names = keyword_names(cls)

        @common
        @given(data=st.data(), **questions)
        def constructors(data, kind, method, wrt, mode):
            keywords = {}
            for name in data.draw(st.lists(st.sampled_from(names), max_size=3, unique=True)):
                counts = name in tuple(sizes_of(cls)) + ("horizon", "batch")
                keywords[name] = data.draw(OWN[name] if name in OWN else sizes if counts
                                           else st.floats(0.1, 2.0) | hostile)
            sim = judged("constructor", lambda: make(cls, **keywords), list(keywords))
            if sim is not None:
                traj = judged("rollout", sim.rollout, [])  # a dict of arrays
                if traj is not None:
                    finite("rollout", traj)
                    question(sim, kind, method, wrt, mode)

        @common
        @given(data=st.data(), **questions)
        def setters(data, kind, method, wrt, mode):
            sim = make(cls, batch=2)
            for _ in range(data.draw(st.integers(1, 3))):
                group = data.draw(st.sampled_from(["params", "initial_state", "actions"]))
                if group == "actions":
                    shape = (sim.T,) + sim.action_shape
                    value = data.draw(st.builds(lambda v: np.full(shape, v), st.floats(-1, 1)) | arrays(shape))
                    judged("set_actions", lambda: sim.set_actions(value), ["actions"])
                    continue
                layout = sim.param_layout if group == "params" else sim.state_layout
                name = data.draw(st.sampled_from(layout.names + ["mass"]))
                shape = layout.shapes.get(name, ())
                value = data.draw(st.builds(lambda v: np.full(shape, v), st.floats(0.1, 2.0)) | arrays(shape))
                setter = sim.set_params if group == "params" else sim.set_initial_state
                judged("set_" + group, lambda: setter(**{name: value}), [name])
            question(sim, kind, method, wrt, mode)

        @common
        @given(data=st.data())
        def losses(data):
            sim = make(cls)
            state = data.draw(st.sampled_from([q.name for q in cls.STATE] + ["nothing"]))
            shape = sim.state_layout.shapes.get(state, ())
            kind = data.draw(st.sampled_from(["target", "tracking", "sum", "effort"]))
            weight = data.draw(hostile | st.floats(0, 2))
            if kind == "target":
                build = lambda: TerminalTarget({state: data.draw(arrays(shape))}, weights=weight)  # noqa: E731
            elif kind == "tracking":
                build = lambda: Tracking({state: data.draw(arrays((sim.T + 1,) + shape))}, weights=weight)  # noqa
            elif kind == "sum":
                steps = data.draw(st.none() | st.lists(st.integers(-2, sim.T + 2), max_size=3) | hostile)
                build = lambda: TerminalSum({state: data.draw(arrays(shape))}, steps=steps)  # noqa: E731
            else:
                build = lambda: weight * Effort()  # noqa: E731
            loss = judged("loss", build, [state, "weights", "steps", "Effort", "target", "data"])
            if loss is not None:
                g = judged("loss gradient", lambda: read(sim.gradient(loss)),
                           [state, "weights", "steps", "data", "target"])
                if g is not None:
                    finite("loss gradient", g)

        @common
        @given(data=st.data())
        def tasks(data):
            sim = make(cls)
            loss = TerminalTarget({sim.STATE[0].name: 0.0})
            iterations = data.draw(st.integers(0, 2) | st.integers(-2, -1) | wild_float | not_numbers)
            if data.draw(st.booleans()):
                limits = data.draw(st.none() | st.tuples(wild_float, wild_float) | hostile)
                result = judged("optimize_actions", lambda: optimize_actions(sim, loss, limits=limits,
                                                                             iterations=iterations),
                                ["limits", "iterations", "actions"])
            else:
                fit = data.draw(st.lists(st.sampled_from(sim.param_layout.names), min_size=1, max_size=2, unique=True)
                                | st.lists(st.sampled_from(sim.param_layout.names + ["mass", 3]), max_size=2)
                                | not_numbers)
                result = judged("identify", lambda: identify(sim, loss, fit, iterations=iterations),
                                ["identify", "iterations", "mass"])
            if result is not None and not np.isfinite(result.loss) and result.history:
                raise Violation(f"a task on {cls.__name__} returned a non-finite loss without refusing")

        started = time.perf_counter()
        for test in (constructors, setters, losses, tasks):
            test()
        print(f"{cls.__name__}: {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)

    @common
    @given(document=st.recursive(hostile | st.integers(), lambda inner: st.lists(inner, max_size=4)
                                 | st.dictionaries(st.sampled_from(["name", "particles", "springs", "actuators",
                                                                    "description", "legs"]), inner, max_size=5)),
           valid=st.booleans(), text=st.booleans())
    def robot_files(document, valid, text):
        base = json.loads(Robot.load("worm").to_json())
        if valid and isinstance(document, dict):
            base.update(document)  # a real robot with some fields replaced
            document = base
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write(json.dumps(document)[: 40 if text else None])  # sometimes cut short: not JSON at all
        try:
            robot = judged("robot file", lambda: Robot.load(f.name), ["robot file"])
        finally:
            os.unlink(f.name)
        if robot is not None:
            sim = judged("robot simulator", lambda: tisim.systems.MassSpring(horizon=4, robot=robot), ["robot"])
            if sim is not None:
                traj = judged("robot rollout", sim.rollout, [])
                if traj is not None:
                    finite("robot rollout", traj)

    robot_files()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=25, help="hypothesis examples per property and system")
    parser.add_argument("--systems", help="comma-separated system names (default: every one)")
    args = parser.parse_args(argv)
    if args.systems:
        SYSTEMS[:] = [getattr(tisim.systems, name) for name in args.systems.split(",")]
    tisim.init(arch="cpu", precision="f64", deterministic=True)
    try:
        run_all(args.examples)
    except (Violation, ExceptionGroup) as failure:  # hypothesis groups several distinct failures
        for violation in getattr(failure, "exceptions", [failure]):
            print(f"violation: {violation}", *getattr(violation, "__notes__", []), sep="\n", file=sys.stderr)
        print(json.dumps(dict(TALLY)))
        return 1
    tried = sum(v for k, v in TALLY.items() if k.endswith(" tried"))
    print(json.dumps(dict(tried=tried, **dict(sorted(TALLY.items())))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
