"""Every constructor checks its arguments before any other work (reading a robot, building a body, compiling), by
name and with the allowed range."""
import inspect

import numpy as np
import pytest

import tisim.systems
from tisim.core.memory import INDEX_LIMIT
from tisim.core.quantities import sizes_of
from tisim.systems import MPM, MassSpring, ResidualPendulum, Rigid2D
from tisim.systems.mpm import Body

SYSTEMS = [getattr(tisim.systems, name) for name in tisim.systems.__all__]


@pytest.mark.parametrize("cls", SYSTEMS, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("kwargs, message", [
    (dict(horizon=0), "horizon must be an integer >= 1 and <= 2,147,483,646, got 0"),
    (dict(horizon=2 ** 31), "horizon must be an integer >= 1 and <= 2,147,483,646, got 2147483648"),
    (dict(horizon=2.0), "horizon must be an integer"),
    (dict(horizon=3, batch=0), "batch must be an integer >= 1 and <= 2,147,483,647, got 0"),
    (dict(horizon=3, dt=-1.0), "dt must be a finite number > 0"),
])
def test_the_run_is_checked_first(cls, kwargs, message):
    """horizon, batch and dt are checked first in every system, even with a robot that does not exist or a grid
    that could not be made."""
    extra = {"MassSpring": dict(robot="no_such_robot"), "MPM": dict(n_grid=0)}.get(cls.__name__, {})
    with pytest.raises(ValueError, match=f"{cls.__name__}: {message}"):
        cls(**kwargs, **extra)


@pytest.mark.parametrize("cls", SYSTEMS, ids=lambda cls: cls.__name__)
def test_a_size_the_system_computes_is_refused_by_name(cls):
    """A structural size the constructor computes itself (a body's dimension, a robot's springs) given as a keyword
    is a ValueError naming it, never Python's 'got multiple values for keyword argument'."""
    own = set(inspect.signature(cls.__init__).parameters)
    derived = [key for key in sizes_of(cls) if key not in own]
    for key in derived:
        try:
            cls(horizon=2, **{key: 2})
        except ValueError as error:
            assert key in str(error)
        except TypeError as error:
            pytest.fail(f"{cls.__name__}({key}=2): {error}")


@pytest.mark.parametrize("make, message", [
    (lambda: MPM(horizon=2, n_grid=0), r"MPM: n_grid must be an integer >= 8 \(and <= 32,767 in 2D\), got 0"),
    (lambda: MPM(horizon=2, n_grid=40000), r"n_grid must be an integer >= 8 \(and <= 32,767 in 2D\), got 40000"),
    (lambda: MPM(horizon=2, n_grid=900, body=Body.box([0.4, 0.4, 0.4], [0.5, 0.5, 0.5], 0.05)),
     r"n_grid must be an integer >= 8 \(and <= 894 in 3D\), got 900"),
    (lambda: MPM(horizon=2, dim=3), "MPM: dim is not a keyword: 2D or 3D follows from the body, points of shape "
                                    r"\(N, 2\) or \(N, 3\): pass body=Body.box\(lower, upper, spacing\) with three"),
    (lambda: MPM(horizon=2, n_cells=64), "MPM: n_cells is not a keyword: it is n_grid \\*\\* dim; pass n_grid"),
    (lambda: MPM(horizon=2, n_particles=4), "MPM: n_particles is not a keyword"),
    (lambda: MassSpring(horizon=2, dim=3), 'MassSpring: dim is not a keyword: .* such as "quadruped3d"'),
    (lambda: MassSpring(horizon=2, n_springs=3), "MassSpring: n_springs is not a keyword: it follows from the robot"),
    (lambda: MassSpring(horizon=2, spheres=0.0), r"MassSpring: spheres must be a list of \(centre, size\) pairs, "
                                                 "got 0.0"),
    (lambda: MassSpring(horizon=2, boxes="box"), "MassSpring: boxes must be a list of"),
    (lambda: ResidualPendulum(horizon=2, n_weights=3), "ResidualPendulum: n_weights is not a keyword"),
    (lambda: Rigid2D(horizon=2, n_bodies=3), "Rigid2D: n_bodies follows from n_discs and n_boxes"),
])
def test_bad_sizes_name_the_argument_and_the_allowed_range(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_an_mpm_grid_at_the_index_limit_is_allowed_and_one_beyond_it_is_not():
    """The largest n_grid is the last whose grid momentum (n_grid^dim cells of dim entries) Taichi's 32-bit indexing
    reaches."""
    from tisim.systems.mpm.system import largest_grid

    for dim in (2, 3):
        n = largest_grid(dim)
        assert n ** dim * dim <= INDEX_LIMIT < (n + 1) ** dim * dim


def test_a_robot_or_body_file_is_checked_before_any_compiling(tmp_path):
    """A robot or body file that is missing, not JSON or has unknown fields is refused, naming the file."""
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"robot file .*bad.json.* is not valid JSON"):
        MassSpring(horizon=2, robot=str(tmp_path / "bad.json"))
    (tmp_path / "extra.json").write_text('{"cells": [[0, 0]], "cell": 0.1, "origin": [0.2, 0.2], "colour": 1}')
    with pytest.raises(ValueError, match=r"body file .*extra.json.*: unknown fields \['colour'\]"):
        Body.load(tmp_path / "extra.json")
    with pytest.raises(FileNotFoundError, match=r"robot files in assets/robots: \[.*'worm'"):
        MassSpring(horizon=2, robot="no_such_robot")
    assert np.isfinite(MassSpring(horizon=2, robot="worm").rollout()["pos"]).all()


def test_sizes_are_declared_with_their_defaults_and_minimums():
    """STRUCTURE's Size rows give each size its default and its least value; a plain name is Size(name)."""
    from tisim import Size
    from tisim.systems import Linear, StiffChain

    with pytest.raises(ValueError, match="Size 'n': default 0 is below its minimum 1"):
        Size("n", 0)
    assert sizes_of(Linear) == {"n": Size("n", 2), "m": Size("m", 1)}
    assert Linear(horizon=2).sizes == {"n": 2, "m": 1}
    assert StiffChain(horizon=2).sizes["newton_steps"] == 6
    assert sizes_of(MassSpring)["n_springs"] == Size("n_springs") and sizes_of(MassSpring)["n_boxes"].minimum == 0
    with pytest.raises(ValueError, match="Linear: n must be an integer >= 1"):
        Linear(horizon=2, n=0)
    assert Rigid2D(horizon=2, n_discs=0, n_boxes=1).sizes["n_discs"] == 0


def test_a_step_written_with_positional_arrays_is_refused_before_compiling():
    """A step or rates with the arrays as positional arguments (the form before the step context) is refused at
    construction, with the form to use; a class with neither a step nor phases too."""
    import taichi as ti

    from tisim import Quantity, System

    class Positional(System):
        STATE = (Quantity("x", 0.0, "m", "position"),)
        ACTION = (Quantity("f", 0.0, "N", "force"),)

        @ti.func
        def step(self, x: ti.template(), theta: ti.template(), u: ti.template(), dt, b, t):
            pass

    class PositionalRates(Positional):
        @ti.func
        def step(self, s: ti.template()):
            s.advance("x", 0, s.state("x"))

        @ti.func
        def rates(self, x: ti.template(), theta: ti.template(), u: ti.template(), b, t, f: ti.template()):
            pass

    class NoStep(System):
        STATE = Positional.STATE
        ACTION = Positional.ACTION

    with pytest.raises(TypeError, match=r"Positional.step\('self', 'x', .*step\(self, s\).*s.state\(name, i\)"):
        Positional(horizon=2)
    with pytest.raises(TypeError, match=r"PositionalRates.rates\(.*rates\(self, s\)"):
        PositionalRates(horizon=2)
    with pytest.raises(TypeError, match=r"NoStep: declare a step, step\(self, s\), or PHASES"):
        NoStep(horizon=2)
    PositionalRates.rates = None  # without the rates it builds and runs
    assert PositionalRates(horizon=2).rollout()["x"].shape == (1, 3)
