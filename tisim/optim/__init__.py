"""Optimizers, the loops built on them, snapshots to resume from, and sweeps.

    optimizers   Adam, GradientDescent, lbfgs and minimize, the one optimization loop (tisim.optim)
    tasks        optimize_actions, identify, receding_horizon (tisim.tasks)
    snapshot     resume files of an optimization run, data only
    sweep        one function over many configurations: serial, processes or Ray (tisim.sweep)
"""
from tisim.optim.optimizers import Adam, GradientDescent, Result, lbfgs, minimize

__all__ = [
    "Adam",
    "GradientDescent",
    "Result",
    "lbfgs",
    "minimize",
]
