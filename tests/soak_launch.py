"""Soak test of the bound launch path (tisim/core/launch.py): many simulators of every system, with random batch sizes
and horizons, made, used and dropped in random order, with garbage collection and runtime restarts at random points.

Every simulator has a twin made with binding off (launch.BINDING = False: Taichi's own call path for every call),
given the same inputs and asked the same things (rollout, evaluate, a gradient by each mechanism, Jacobians), and
their answers must agree bit for bit (one thread), errors included. Resident memory is sampled as it goes: after
the first fifth of the run (kernels compiled) it must stay within --memory-growth MB.

    python tests/soak_launch.py --simulators 100          # what make test runs (tests/test_surface.py)
    python tests/soak_launch.py --simulators 5000         # an occasional long run

Prints one JSON line with the counts, the seconds and the memory; exits 1 at the first disagreement.
"""
import argparse
import gc
import json
import os
import sys
import time

import numpy as np

os.environ.setdefault("TI_SKIP_VERSION_CHECK", "ON")
import tisim  # noqa: E402
from tisim.core import launch  # noqa: E402
from tisim.losses import Effort, TerminalTarget  # noqa: E402
from tisim.robots import grid  # noqa: E402

SETTINGS = dict(arch="cpu", precision="f64", deterministic=True)
ROBOTS = [grid(3, 2), grid(4, 2, actuate_every_spring=False)]


def systems(rng):
    """(class, constructor keywords) of a random configuration of each system."""
    return [
        (tisim.systems.ScalarLinear, {}),
        (tisim.systems.Linear, dict(n=int(rng.integers(1, 4)), m=int(rng.integers(1, 3)))),
        (tisim.systems.Pendulum, {}),
        (tisim.systems.DoublePendulum, {}),
        (tisim.systems.Cartpole, {}),
        (tisim.systems.ResidualPendulum, dict(hidden=4)),
        (tisim.systems.BouncingBall, dict(contact=str(rng.choice(["penalty", "impact"])))),
        (tisim.systems.SlidingBlock, dict(friction=str(rng.choice(["tanh", "huber", "stick_slip"])))),
        (tisim.systems.MassSpring, dict(robot=ROBOTS[int(rng.integers(len(ROBOTS)))])),
        (tisim.systems.Rigid2D, dict(n_discs=int(rng.integers(1, 3)), n_boxes=int(rng.integers(0, 2)))),
        (tisim.systems.StiffChain, dict(n=int(rng.integers(2, 4)))),
    ]


def outcome(call):
    """What a call returned (arrays as float64) or which error it raised, for a bitwise comparison."""
    try:
        value = call()
    except (ValueError, TypeError, NotImplementedError, FloatingPointError) as error:
        return ("error", type(error).__name__, str(error))
    if hasattr(value, "per_batch"):  # a Gradient: every group it has
        groups = {"per_batch": value.per_batch}
        for name in ("params", "initial_state", "actions", "adjoint"):
            try:
                got = getattr(value, name)
            except ValueError:  # not kept by this mechanism
                continue
            groups.update({f"{name}.{k}": v for k, v in got.items()} if isinstance(got, dict) else {name: got})
        return groups
    if hasattr(value, "matrix"):
        return {"matrix": value.matrix}
    return value if isinstance(value, dict) else {"value": np.asarray(value)}


def same(a, b):
    if isinstance(a, tuple) or isinstance(b, tuple):
        return a == b
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)


class Pair:
    """A simulator and its twin with binding off, given the same inputs."""

    def __init__(self, rng, cls, keywords):
        self.B, self.T = int(rng.integers(1, 5)), int(rng.integers(2, 40))
        launch.BINDING = True
        self.bound = cls(horizon=self.T, batch=self.B, **keywords)
        launch.BINDING = False
        self.plain = cls(horizon=self.T, batch=self.B, **keywords)
        launch.BINDING = True
        self.name = f"{cls.__name__}(B={self.B}, T={self.T}, {keywords})"
        first = cls.STATE[0].name
        self.loss = TerminalTarget({first: 0.0}) + 1e-3 * Effort()
        self.set_actions(rng)

    def set_actions(self, rng):
        actions = 0.05 * rng.standard_normal((self.B, self.T) + self.bound.action_shape)
        for sim in (self.bound, self.plain):
            sim.set_actions(actions)

    def nudge_parameter(self, rng):
        name = str(rng.choice(self.bound.param_layout.names))
        value = self.bound.params[name] * (1.0 + 0.01 * rng.random())
        for sim in (self.bound, self.plain):
            sim.set_params(**{name: value})

    def ask(self, rng):
        """One random question to both; returns its label, or raises AssertionError if the answers differ."""
        question = str(rng.choice(["rollout", "evaluate", "unrolled", "checkpointed", "forward", "adjoint",
                                   "jacobian", "actions", "params"]))
        segments = int(rng.integers(1, self.T + 1))
        mode = str(rng.choice(["reverse", "forward"]))
        wrt = str(rng.choice(["params", "initial_state"]))
        if question == "actions":
            self.set_actions(rng)
            return question
        if question == "params":
            self.nudge_parameter(rng)
            return question
        calls = {
            "rollout": lambda sim: sim.rollout(),
            "evaluate": lambda sim: sim.evaluate(self.loss),
            "unrolled": lambda sim: sim.gradient(self.loss),
            "checkpointed": lambda sim: sim.gradient(self.loss, method="checkpointed", segments=segments),
            "forward": lambda sim: sim.gradient(self.loss, method="forward_mode"),
            "adjoint": lambda sim: sim.gradient(self.loss, method="continuous_adjoint"),
            "jacobian": lambda sim: sim.jacobian(wrt=wrt, mode=mode),
        }
        a, b = (outcome(lambda sim=sim: calls[question](sim)) for sim in (self.bound, self.plain))
        if not same(a, b):
            raise AssertionError(f"{self.name}: {question} differs between bound and plain calls")
        return question


def resident_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulators", type=int, default=200, help="pairs of simulators to make in all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--restarts", type=float, default=0.01,
                        help="chance of a runtime restart per pair made (and one half-way in any case)")
    parser.add_argument("--memory-growth", type=float, default=150.0, help="MB allowed after the warm-up")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    tisim.init(**SETTINGS)
    start, live, counts = time.perf_counter(), [], dict(pairs=0, questions=0, restarts=0, collections=0, dropped=0)
    memory, samples = dict(start=resident_mb(), warm=None, peak=0.0), []
    while counts["pairs"] < args.simulators:
        cls, keywords = systems(rng)[int(rng.integers(11))]
        live.append(Pair(rng, cls, keywords))
        counts["pairs"] += 1
        for _ in range(int(rng.integers(1, 4))):
            pair = live[int(rng.integers(len(live)))]
            pair.ask(rng)
            counts["questions"] += 1
        while len(live) > 12 or (live and rng.random() < 0.3):  # drop in random order
            live.pop(int(rng.integers(len(live))))
            counts["dropped"] += 1
        if rng.random() < 0.1:
            gc.collect()
            counts["collections"] += 1
        if rng.random() < args.restarts or counts["pairs"] == args.simulators // 2:  # at least one, half-way
            old = live[0] if live else None
            tisim.init(**dict(SETTINGS, precision="f32"))  # a restart, and one back
            tisim.init(**SETTINGS)
            counts["restarts"] += 1
            if old is not None:  # an old simulator says so instead of crashing
                try:
                    old.bound.rollout()
                    raise AssertionError("a simulator from before a restart still ran")
                except RuntimeError:
                    pass
            live.clear()
        if counts["pairs"] == max(1, args.simulators // 5):
            gc.collect()
            memory["warm"] = resident_mb()
        memory["peak"] = max(memory["peak"], resident_mb())
        if counts["pairs"] % max(1, args.simulators // 10) == 0:
            samples.append(round(resident_mb()))
    live.clear()
    gc.collect()
    memory["end"] = resident_mb()
    growth = memory["peak"] - (memory["warm"] or memory["start"])
    summary = dict(counts, seconds=round(time.perf_counter() - start, 1),
                   memory_mb={k: round(v, 1) for k, v in memory.items()}, growth_mb=round(growth, 1),
                   memory_every_tenth_mb=samples)
    print(json.dumps(summary))
    if growth > args.memory_growth:
        print(f"resident memory grew {growth:.0f} MB after the warm-up (allowed {args.memory_growth} MB)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
