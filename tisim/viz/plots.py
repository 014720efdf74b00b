"""Plots with matplotlib (no pyplot state): optimization histories, trajectories and adjoints, written to PNG files.

Each function creates the folder it writes to and returns the path. Every panel has a title and axis labels with
their units, legends sit outside the data (beside the panel) and the layout is matplotlib's constrained layout, so
no text runs into another or out of the picture; ``text_outside`` checks that last point for a figure.
"""
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure


def _save(figure, path, dpi=100):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=dpi)
    return path


def text_outside(figure):
    """What a figure draws outside itself: a list of (what, extent in pixels) for each axes whose drawn extent
    (title, labels, the tick labels drawn, legend) leaves the figure and each figure-level text or legend that does;
    empty when everything is inside. Draws the figure once, with the Agg renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = figure.canvas if isinstance(figure.canvas, FigureCanvasAgg) else FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    box = figure.bbox
    parts = [(f"axes {axes.get_title() or k}", axes.get_tightbbox(renderer)) for k, axes in enumerate(figure.axes)
             if axes.get_visible()]
    parts += [(f"text {text.get_text()}", text.get_window_extent(renderer)) for text in figure.texts
              if text.get_visible() and text.get_text().strip()]
    parts += [("figure legend", legend.get_window_extent(renderer)) for legend in figure.legends]
    return [(what, tuple(np.round(extent.extents, 1))) for what, extent in parts
            if extent is not None and (extent.x0 < box.x0 - 1 or extent.y0 < box.y0 - 1 or
                                       extent.x1 > box.x1 + 1 or extent.y1 > box.y1 + 1)]


def plot_history(history, path, title="", *, stages=(), loss_label="loss", xlabel="iteration"):
    """Loss and gradient norm per optimizer iteration, log y; history is a list of {"loss": ..., "grad_norm": ...}.

    stages: [(iteration, name)] where a new stage of the optimization starts (a new loss, a longer horizon): a
    dashed vertical line with its name on both panels, so a jump there reads as the stage's, not as a failure."""
    figure = Figure(figsize=(9, 3.4), layout="constrained")
    panels = (("loss", loss_label, "loss"), ("grad_norm", "|gradient|", "gradient norm"))
    for k, (key, label, name) in enumerate(panels):
        axes = figure.add_subplot(1, 2, k + 1)
        axes.plot([float(row.get(key, np.nan)) for row in history], marker=".", markersize=3)
        axes.set(yscale="log", xlabel=xlabel, ylabel=label, title=name)
        axes.grid(True, which="both", alpha=0.3)
        for iteration, stage in stages:
            axes.axvline(iteration, color="tab:red", linestyle="--", linewidth=1)
            axes.annotate(stage, (iteration, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -3),
                          textcoords="offset points", va="top", fontsize=8, color="tab:red")
    if title:
        figure.suptitle(title)
    return _save(figure, path)


def plot_states(traj, names, dt, path, *, batch_index=0, title="", units=None):
    """One panel per state name against time t dt [s], for one batch element; traj: {name: array (B, T+1, ...)};
    units: {name: unit} for the y labels."""
    figure = Figure(figsize=(6, 1.8 * len(names) + 0.6), layout="constrained")
    units = units or {}
    for k, name in enumerate(names):
        values = np.asarray(traj[name])[batch_index]
        axes = figure.add_subplot(len(names), 1, k + 1)
        axes.plot(np.arange(len(values)) * dt, values.reshape(len(values), -1))
        axes.set(ylabel=f"{name} [{units[name]}]" if name in units else name, xlabel="t [s]")
        axes.grid(True, alpha=0.3)
    if title:
        figure.suptitle(title)
    return _save(figure, path)


def plot_adjoint(adjoint, dt, path, *, batch_index=0, title=""):
    """|lambda_t| = |dL/dx_t| per state against time [s], log y; adjoint: {name: array (B, T+1, ...)}."""
    figure = Figure(figsize=(7, 3.5), layout="constrained")
    axes = figure.add_subplot(1, 1, 1)
    for name, values in adjoint.items():
        values = np.asarray(values)[batch_index]
        axes.plot(np.arange(len(values)) * dt, np.linalg.norm(values.reshape(len(values), -1), axis=1), label=name)
    axes.set(yscale="log", xlabel="t [s]", ylabel="|lambda_t| = |dL/dx_t|", title=title or "adjoint per state")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, title="state")
    return _save(figure, path)


def plot_health(report, path, *, batch_index=0, title=""):
    """|lambda_t| against t (log y) above the non-smooth events of one batch element, from ``diagnostics.health``."""
    figure = Figure(figsize=(7, 4), layout="constrained")
    axes, events = figure.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    norm = report.adjoint_norm[batch_index]
    axes.semilogy(np.arange(len(norm)), np.where(norm > 0, norm, np.nan))
    axes.set_ylabel("|lambda_t| = |dL/dx_t|")
    axes.set_title(title or f"adjoint norm; growth {report.growth[batch_index]:.3g} per step backward")
    for row, (name, on) in enumerate(report.events.items()):
        events.fill_between(np.arange(on.shape[1]), row, row + on[batch_index] * 0.8, step="mid", label=name)
    events.set_yticks([row + 0.4 for row in range(len(report.events))], list(report.events))
    events.set_xlabel("step t")
    return _save(figure, path)


def plot_learning_curves(curves, path, title="", *, ylabel="return"):
    """Return against environment steps and against wall-clock seconds, one line per run, one colour per method.

    curves: {method: [run, ...]}, each run a dict of equal-length lists "steps", "seconds" and "return" (the
    evaluation's mean return at those points of training)."""
    return _save(learning_curves_figure(curves, title, ylabel=ylabel), path)


def learning_curves_figure(curves, title="", *, ylabel="return"):
    """The figure of ``plot_learning_curves``, not saved."""
    columns = max(min(len(curves), 3), 1)  # of the legend: five methods with long names in a row run past the figure
    figure = Figure(figsize=(10, 3.2 + 0.4 * -(-len(curves) // columns)), layout="constrained")
    colours = dict(zip(curves, ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")))
    for k, (key, label) in enumerate((("steps", "environment steps"), ("seconds", "wall-clock [s]"))):
        axes = figure.add_subplot(1, 2, k + 1)
        for method, runs in curves.items():
            for n, run in enumerate(runs):
                axes.plot(run[key], run["return"], color=colours.get(method), alpha=0.8, linewidth=1.2,
                          label=method if n == 0 and k == 0 else None)
        axes.set(xlabel=label, ylabel=ylabel, title=f"{ylabel} against {label.split(' [')[0]}")
        axes.grid(True, alpha=0.3)
    figure.legend(loc="outside lower center", ncols=columns, title="method (a line per seed)")
    if title:
        figure.suptitle(title)
    return figure
