"""Optimizers and the one optimization loop that system identification, trajectory optimization and MPC share.

Variables are a dict {name: numpy array}. ``minimize`` calls ``objective(values) -> (loss, gradients)`` once per
iteration and applies an optimizer step, with, optionally: box bounds (projection after each step), log-space
variables (for quantities that must stay positive), gradient-norm clipping, early stopping, a guard that rejects
a non-finite step and halves the learning rate, a callback, a progress bar and atomic snapshots to resume from.
"""
import os
import time
from dataclasses import dataclass, field

import numpy as np

from tisim.core.derivatives import NonFiniteError
from tisim.optim import snapshot as snapshots


class Adam:
    """Adam (Kingma and Ba 2015): per-entry steps scaled by running moments of the gradient."""

    def __init__(self, lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8):
        _check_positive("Adam", lr=lr, eps=eps)
        if not (0 <= beta1 < 1 and 0 <= beta2 < 1):
            raise ValueError(f"Adam: beta1 and beta2 must be in [0, 1), got {beta1}, {beta2}")
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.state = {"t": 0, "m": {}, "v": {}}
        self._settings = dict(lr=lr, beta1=beta1, beta2=beta2, eps=eps)

    def settings(self):
        """What the optimizer was made with (the rate it started at: the guard halves lr as it goes)."""
        return dict(self._settings)

    def step(self, values, grads):
        s = self.state
        s["t"] += 1
        out = {}
        for name, g in grads.items():
            m = s["m"][name] = self.beta1 * s["m"].get(name, 0.0) + (1 - self.beta1) * g
            v = s["v"][name] = self.beta2 * s["v"].get(name, 0.0) + (1 - self.beta2) * g * g
            m_hat, v_hat = m / (1 - self.beta1 ** s["t"]), v / (1 - self.beta2 ** s["t"])
            out[name] = values[name] - self.lr * m_hat / (np.sqrt(v_hat) + self.eps)
        return out


class GradientDescent:
    """Gradient descent with (heavy-ball) momentum: v <- momentum v + g;  x <- x - lr v."""

    def __init__(self, lr=1e-2, momentum=0.0):
        _check_positive("GradientDescent", lr=lr)
        if not 0 <= momentum < 1:
            raise ValueError(f"GradientDescent: momentum must be in [0, 1), got {momentum}")
        self.lr, self.momentum = lr, momentum
        self.state = {"v": {}}
        self._settings = dict(lr=lr, momentum=momentum)

    settings = Adam.settings

    def step(self, values, grads):
        out = {}
        for name, g in grads.items():
            v = self.state["v"][name] = self.momentum * self.state["v"].get(name, 0.0) + g
            out[name] = values[name] - self.lr * v
        return out


def lbfgs(objective, x0, *, iterations=100, memory=10, value=None, callback=None, tol=1e-12):
    """Minimize ``objective(x) -> (loss, gradient)`` over a flat float64 vector by L-BFGS (Nocedal and Wright,
    algorithm 7.4) with a backtracking line search: each iteration tries the quasi-Newton step and halves it until
    the loss falls by at least 1e-4 of the predicted decrease (Armijo), at most 30 times. A trial whose rollout
    turns non-finite (NonFiniteError) counts as no decrease.

    value(x) -> loss, if given, prices the trial steps without a gradient (one rollout instead of a backward pass
    too). callback(iteration, x, loss) after each accepted step; returning True stops. Stops early when a step
    changes the loss by less than tol (relative) or no trial step decreases it. Returns (x, loss, history of
    losses)."""
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 0:
        raise ValueError(f"lbfgs: iterations must be an int >= 0, got {iterations!r}")
    if isinstance(memory, bool) or not isinstance(memory, int) or memory < 1:
        raise ValueError(f"lbfgs: memory must be an int >= 1, got {memory!r}")
    x = np.array(x0, dtype=np.float64).ravel()
    loss, grad = objective(x)
    history, pairs = [float(loss)], []
    for it in range(iterations):
        # two-loop recursion: d = -H g with H the inverse-Hessian estimate from the last `memory` steps
        q, alphas = grad.copy(), []
        for s, y in reversed(pairs):
            alpha = s @ q / (y @ s)
            q -= alpha * y
            alphas.append(alpha)
        if pairs:
            s, y = pairs[-1]
            q *= (s @ y) / (y @ y)
        else:
            q *= 1.0 / max(np.linalg.norm(grad), 1e-300)  # first step: unit length along -g
        for (s, y), alpha in zip(pairs, reversed(alphas)):
            q += s * (alpha - y @ q / (y @ s))
        direction = -q
        slope = grad @ direction
        if not slope < 0:  # not a descent direction: restart from steepest descent
            pairs, direction = [], -grad / max(np.linalg.norm(grad), 1e-300)
            slope = grad @ direction
        step, accepted = 1.0, False
        for _ in range(30):
            trial = x + step * direction
            try:
                trial_loss = float(value(trial) if value else objective(trial)[0])
            except NonFiniteError:  # a step too long for the simulation's stability: shorter
                trial_loss = np.inf
            if np.isfinite(trial_loss) and trial_loss <= loss + 1e-4 * step * slope:
                accepted = True
                break
            step *= 0.5
        if not accepted:
            break
        new_loss, new_grad = objective(trial)
        s, y = trial - x, new_grad - grad
        if s @ y > 1e-12 * np.linalg.norm(s) * np.linalg.norm(y):  # keep the estimate positive definite
            pairs = (pairs + [(s, y)])[-memory:]
        change = abs(loss - new_loss) / max(abs(loss), 1e-300)
        x, loss, grad = trial, float(new_loss), new_grad
        history.append(loss)
        if callback and callback(it, x, loss):
            break
        if change < tol:
            break
    return x, loss, history


def _check_positive(owner, **values):
    for name, value in values.items():
        if not (isinstance(value, (int, float)) and 0 < value < np.inf):
            raise ValueError(f"{owner}: {name} must be a finite number > 0, got {value!r}")


@dataclass
class Result:
    """What ``minimize`` returns: the best values seen, their loss, and the per-iteration history."""

    values: dict
    loss: float
    iterations: int
    history: list = field(default_factory=list)  # [{"iteration", "loss", "grad_norm", "lr", "values"?}]
    stopped: str = ""
    seconds: float = 0.0


def minimize(objective, values, *, optimizer=None, iterations=100, bounds=None, log_space=(), clip=None,
             tol=0.0, patience=20, callback=None, progress=False, record_values=False, snapshot=None,
             snapshot_every=10, problem=None, description="optimizing", **renamed):
    """Minimize ``objective(values) -> (loss, {name: gradient})`` over the dict ``values``.

    Main arguments:
        optimizer: Adam (default, lr 1e-2) or GradientDescent, applied to the variables (log-space ones in log).
        iterations: the most iterations to run.
        bounds: {name: (low, high)}; values are projected into the box after every step.
        log_space: names optimized as log(value) (they must start > 0 and stay so).
        clip: rescale the (variable-space) gradient to at most this norm.
    Other arguments:
        tol, patience: stop when the best loss improved by less than tol (relative) over `patience` iterations.
        callback(iteration, values, loss): called after every accepted step; returning True stops the run.
        progress: show a progress bar (rich). record_values: keep each iteration's values in the history too.
        snapshot: a file to save the run to every `snapshot_every` iterations and at its end, and to resume from
            if it exists: a resumed run continues exactly where the saved one was (tisim/optim/snapshot.py: data only,
            written atomically). Resuming checks that the file was written for the same problem: the variables'
            names and shapes, bounds, log-space names, clipping, the optimizer and its settings, and `problem`, any
            JSON-like description of what is optimized (the tasks give their simulator's); a difference is an error
            naming it.
    A step whose loss or gradient is non-finite (or whose rollout raises NonFiniteError) is rejected: the values
    stay, the learning rate halves, and after 10 rejections in a row the run stops.
    (checkpoint= and checkpoint_every=, the earlier names of snapshot= and snapshot_every=, still work and warn.)
    """
    snapshot, snapshot_every = _renamed_keywords(renamed, snapshot, snapshot_every)
    optimizer = optimizer or Adam()
    names = list(values)
    for name in list(log_space) + list(bounds or {}):
        if name not in names:
            raise ValueError(f"minimize: {name!r} is not among the variables {names}")
    for name in log_space:
        if np.any(np.asarray(values[name]) <= 0):
            raise ValueError(f"minimize: log-space variable {name!r} must be > 0, got {values[name]}")
    if not isinstance(iterations, int) or iterations < 0:
        raise ValueError(f"minimize: iterations must be an int >= 0, got {iterations!r}")
    to_var = {n: (np.log if n in log_space else np.asarray) for n in names}
    from_var = {n: (np.exp if n in log_space else np.asarray) for n in names}
    state = {"iteration": 0, "z": {n: to_var[n](np.asarray(values[n], dtype=np.float64)) for n in names},
             "optimizer": optimizer.state, "lr": optimizer.lr, "history": [], "best": (np.inf, None),
             "rejected": 0, "stopped": ""}
    signature = _signature(state["z"], log_space, bounds, clip, optimizer, problem) if snapshot else None
    if snapshot and os.path.exists(snapshot):
        state = snapshots.load(snapshot, signature)
        optimizer.state, optimizer.lr = state["optimizer"], state["lr"]
    start = time.perf_counter()
    bar = _Progress(iterations, description) if progress else None
    try:
        while state["iteration"] < iterations and not state["stopped"]:
            _iterate(objective, optimizer, state, names, from_var, to_var, bounds, log_space, clip, record_values)
            state["iteration"] += 1
            best = state["best"][0]
            if bar:
                bar.update(state["iteration"], best)
            if callback and state["history"] and callback(state["iteration"], _values(state, names, from_var),
                                                          state["history"][-1]["loss"]):
                state["stopped"] = "callback"
            if tol > 0 and len(state["history"]) > patience:
                old = state["history"][-patience - 1]["best"]
                if old - best <= tol * abs(old):
                    state["stopped"] = f"converged (best loss improved < {tol:g} over {patience} iterations)"
            last = state["stopped"] or state["iteration"] == iterations
            if snapshot and (state["iteration"] % snapshot_every == 0 or last):
                snapshots.save(snapshot, state, signature)
    finally:
        if bar:
            bar.close()
    loss, best_z = state["best"]
    best_values = {n: from_var[n](best_z[n]) for n in names} if best_z else _values(state, names, from_var)
    return Result(best_values, float(loss), state["iteration"], state["history"],
                  state["stopped"] or "iterations", time.perf_counter() - start)


def _renamed_keywords(renamed, snapshot, snapshot_every):
    """snapshot and snapshot_every, taken from their earlier names checkpoint and checkpoint_every if given so
    (with a DeprecationWarning: a checkpoint is gradient checkpointing's); any other keyword is an error."""
    import warnings

    new_names = {"checkpoint": "snapshot", "checkpoint_every": "snapshot_every"}
    unknown = sorted(set(renamed) - set(new_names))
    if unknown:
        raise TypeError(f"minimize() got unexpected keyword arguments {unknown}")
    for old in renamed:
        warnings.warn(f"minimize: {old}= is now {new_names[old]}=; the old name will be removed", DeprecationWarning,
                      stacklevel=3)
    return renamed.get("checkpoint", snapshot), renamed.get("checkpoint_every", snapshot_every)


def _signature(z, log_space, bounds, clip, optimizer, problem):
    """What a snapshot must have been written for to be resumed (compared by tisim/optim/snapshot.py)."""
    settings = getattr(optimizer, "settings", dict)()
    return dict(variables={n: list(np.shape(v)) for n, v in z.items()}, log_space=sorted(log_space),
                bounds={n: [None if b is None else np.asarray(b, dtype=np.float64) for b in pair]
                        for n, pair in (bounds or {}).items()},
                clip=clip, optimizer=dict(kind=type(optimizer).__name__, **settings), problem=problem)


def _values(state, names, from_var):
    return {n: from_var[n](state["z"][n]) for n in names}


def _iterate(objective, optimizer, state, names, from_var, to_var, bounds, log_space, clip, record_values):
    values = _values(state, names, from_var)
    try:
        loss, grads = objective(values)
        loss = float(loss)
        finite = np.isfinite(loss) and all(np.all(np.isfinite(grads[n])) for n in names)
    except NonFiniteError:
        finite = False
    if not finite:  # keep the values, shorten the step
        state["rejected"] += 1
        optimizer.lr *= 0.5
        state["lr"] = optimizer.lr
        if state["rejected"] >= 10:
            state["stopped"] = "10 non-finite steps in a row"
        return
    state["rejected"] = 0
    z = state["z"]
    g = {n: np.asarray(grads[n], dtype=np.float64) * (values[n] if n in log_space else 1.0) for n in names}
    norm = float(np.sqrt(sum(np.sum(v * v) for v in g.values())))
    if clip and norm > clip:
        g = {n: v * (clip / norm) for n, v in g.items()}
    if loss < state["best"][0]:
        state["best"] = (loss, {n: z[n].copy() for n in names})
    entry = {"iteration": state["iteration"], "loss": loss, "grad_norm": norm, "lr": optimizer.lr,
             "best": state["best"][0]}
    if record_values:
        entry["values"] = {n: np.array(v, copy=True) for n, v in values.items()}
    state["history"].append(entry)
    z_next = optimizer.step(z, g)
    for n, (low, high) in (bounds or {}).items():
        low, high = (to_var[n](np.float64(b)) if b is not None and (n not in log_space or b > 0) else None
                     for b in (low, high))
        z_next[n] = np.clip(z_next[n], low, high)
    state["z"] = z_next


class _Progress:
    def __init__(self, total, description):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("best loss {task.fields[best]:.4g}"), TimeElapsedColumn())
        self.task = self.progress.add_task(description, total=total, best=float("inf"))
        self.progress.start()

    def update(self, done, best):
        self.progress.update(self.task, completed=done, best=best)

    def close(self):
        self.progress.stop()
