"""Plots with matplotlib (no pyplot state): optimization histories, trajectories and adjoints, written to PNG files.

Each function creates the folder it writes to and returns the path.
"""
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure


def _save(figure, path):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    return path


def plot_history(history, path, title=""):
    """Loss and gradient norm per optimizer iteration, log y; history is a list of {"loss": ..., "grad_norm": ...}."""
    figure = Figure(figsize=(8, 3.2))
    for k, key in enumerate(("loss", "grad_norm")):
        axes = figure.add_subplot(1, 2, k + 1)
        axes.plot([float(row.get(key, np.nan)) for row in history], marker=".")
        axes.set(yscale="log", xlabel="iteration", ylabel=key.replace("_", " "))
        axes.grid(True, which="both", alpha=0.3)
    figure.suptitle(title)
    return _save(figure, path)


def plot_states(traj, names, dt, path, *, batch_index=0, title=""):
    """One panel per state name against time t dt [s], for one batch element; traj: {name: array (B, T+1, ...)}."""
    figure = Figure(figsize=(6, 1.8 * len(names) + 0.6))
    for k, name in enumerate(names):
        values = np.asarray(traj[name])[batch_index]
        axes = figure.add_subplot(len(names), 1, k + 1)
        axes.plot(np.arange(len(values)) * dt, values.reshape(len(values), -1))
        axes.set(ylabel=name)
        axes.grid(True, alpha=0.3)
    axes.set(xlabel="t [s]")
    figure.suptitle(title)
    return _save(figure, path)


def plot_adjoint(adjoint, dt, path, *, batch_index=0, title=""):
    """|lambda_t| = |dL/dx_t| per state against time [s], log y; adjoint: {name: array (B, T+1, ...)}."""
    figure = Figure(figsize=(6, 3.5))
    axes = figure.add_subplot(1, 1, 1)
    for name, values in adjoint.items():
        values = np.asarray(values)[batch_index]
        axes.plot(np.arange(len(values)) * dt, np.linalg.norm(values.reshape(len(values), -1), axis=1), label=name)
    axes.set(yscale="log", xlabel="t [s]", ylabel="|lambda_t|", title=title)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    return _save(figure, path)


def plot_health(report, path, *, batch_index=0, title=""):
    """|lambda_t| against t (log y) above the non-smooth events of one batch element, from ``diagnostics.health``."""
    figure = Figure(figsize=(7, 4))
    axes, events = figure.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    norm = report.adjoint_norm[batch_index]
    axes.semilogy(np.arange(len(norm)), np.where(norm > 0, norm, np.nan))
    axes.set_ylabel("|lambda_t|")
    axes.set_title(title or f"adjoint norm; growth {report.growth[batch_index]:.3g} per step backward")
    for row, (name, on) in enumerate(report.events.items()):
        events.fill_between(np.arange(on.shape[1]), row, row + on[batch_index] * 0.8, step="mid", label=name)
    events.set_yticks([row + 0.4 for row in range(len(report.events))], list(report.events))
    events.set_xlabel("step t")
    return _save(figure, path)
