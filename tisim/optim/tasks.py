"""The loops users came for, all built on ``tisim.optim.minimize``:

optimize_actions      trajectory optimization: the action sequence a[0:T] that minimizes a loss, within force limits
identify              system identification: the parameters under which the rollouts match recorded data
receding_horizon      model-predictive control: plan H steps on a planner, apply the first k to a plant, shift, re-plan
train_policy          a closed-loop policy trained through the simulator, window by window (policy_training.py)
train_policy_and_model   the same while the model's parameters are fitted to what a plant does under the policy
"""
from dataclasses import dataclass

import numpy as np

from tisim.core.protocol import Protocol
from tisim.optim.optimizers import Adam, minimize
from tisim.optim.policy_training import train_policy, train_policy_and_model  # noqa: F401 (loops listed above)


def optimize_actions(sim, loss, *, limits=None, iterations=200, optimizer=None, initial=None, **options):
    """Minimize ``loss`` over the actions of ``sim`` (all batch elements at once, independently).

    limits: (low, high) box on every action entry, e.g. the motor's force range. initial: starting actions (the
    simulator's current actions by default). Other options go to ``minimize`` (tol, callback, progress, snapshot).
    The best actions found are left set on ``sim``; the ``Result`` has them as values["actions"] (B, T, ...).
    """
    if limits is not None:
        try:
            low, high = (float(b) for b in limits)
        except (TypeError, ValueError):
            raise TypeError(f"optimize_actions: limits must be a pair of numbers (low, high), got {limits!r}") from None
        if not (np.isfinite(low) and np.isfinite(high) and low < high):
            raise ValueError(f"optimize_actions: limits must be finite (low, high) with low < high, got {limits}")
    start = sim.actions
    if initial is not None:
        start = np.broadcast_to(Protocol.of(sim).validated_actions(initial), start.shape)
    if limits is not None:
        start = np.clip(start, low, high)

    def objective(values):
        sim.set_actions(values["actions"])
        g = sim.gradient(loss)
        return g.value, {"actions": g.actions}

    result = minimize(objective, {"actions": np.array(start)}, optimizer=optimizer or Adam(lr=0.1),
                      iterations=iterations, bounds={"actions": limits} if limits is not None else None,
                      problem=_problem("optimize_actions", sim, loss), description="optimizing actions", **options)
    sim.set_actions(result.values["actions"])
    return result


def identify(sim, loss, names, *, iterations=300, optimizer=None, log_space=None, **options):
    """Fit the parameters ``names`` of ``sim`` so that its rollouts minimize ``loss`` (typically a Tracking loss).

    Each batch element can hold one experiment (its own initial state, actions and data); the fitted parameters are
    shared by all of them, so their gradient is the sum over the batch. Parameters whose declared bounds exclude
    zero from below, such as masses and lengths, are fitted in log space (positive throughout) unless log_space
    says otherwise. The fitted values are left set on ``sim``; the ``Result`` has them per name (shape as declared).
    """
    if isinstance(names, str) or not isinstance(names, (list, tuple)) or not names:
        raise TypeError(f"identify: names must be a non-empty list of parameter names, e.g. "
                        f"{sim.param_layout.names[:2]}, got {names!r}")
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"identify: names must be parameter names (str), got {name!r}")
        sim.param_layout.check_name(name, "identify")
    if log_space is None:
        log_space = [n for n in names if sim.param_layout.quantities[n].interval.low >= 0]
    start = {n: np.array(sim.params[n][0]) for n in names}
    for n in log_space:
        start[n] = np.maximum(start[n], 1e-12)

    def objective(values):
        sim.set_params(**values)
        g = sim.gradient(loss)
        return g.value, {n: g.params[n].sum(axis=0) for n in names}

    result = minimize(objective, start, optimizer=optimizer or Adam(lr=0.02), iterations=iterations,
                      log_space=log_space, problem=_problem("identify", sim, loss),
                      description="identifying parameters", **options)
    sim.set_params(**result.values)
    return result


def _problem(task, sim, loss):
    """What a snapshot of this task was written for (compared when a run resumes from it)."""
    return dict(task=task, system=type(sim).__name__, horizon=sim.T, batch=sim.B, dt=sim.dt, sizes=sim.sizes,
                options=sim.options, loss=repr(loss))


@dataclass
class Plan:
    """A receding-horizon run: the plant's states (T+1 per state, batch axis first), the applied actions, and one
    ``Result`` per re-plan."""

    states: dict
    actions: np.ndarray
    plans: list


def receding_horizon(planner, plant, loss, *, steps, apply=1, limits=None, iterations=50, first_iterations=None,
                     lr=0.1, callback=None):
    """Model-predictive control: re-plan on the simulator ``planner`` (horizon H) and apply the first ``apply``
    actions to the simulator ``plant``.

    planner and plant are simulators of the same system and batch size; plant's horizon must equal ``apply`` (it is
    stepped that far per re-plan) and its parameters may differ from the planner's (a modelling error). steps: total
    plant steps, a multiple of ``apply``. Each plan is warm-started from the previous one shifted by ``apply`` steps;
    the first plan gets ``first_iterations`` (default: iterations), each with a fresh Adam(lr).
    callback(step, states) after each re-plan.
    """
    if plant.T != apply:
        raise ValueError(f"receding_horizon: plant horizon must equal apply={apply}, got {plant.T}")
    if steps % apply or steps < apply:
        raise ValueError(f"receding_horizon: steps must be a positive multiple of apply={apply}, got {steps}")
    if planner.B != plant.B:
        raise ValueError(f"receding_horizon: planner and plant batch sizes differ ({planner.B} vs {plant.B})")
    state = {k: v.copy() for k, v in plant.initial_state.items()}
    history = {k: [v] for k, v in state.items()}
    applied, plans = [], []
    plan = planner.actions
    for done in range(0, steps, apply):
        planner.set_initial_state(**state)
        result = optimize_actions(planner, loss, limits=limits, initial=plan, optimizer=Adam(lr=lr),
                                  iterations=first_iterations if (done == 0 and first_iterations) else iterations)
        plans.append(result)
        plan = planner.actions
        plant.set_initial_state(**state)
        plant.set_actions(plan[:, :apply])
        traj = plant.rollout()
        for k in state:
            state[k] = traj[k][:, -1]
            history[k].extend(np.moveaxis(traj[k][:, 1:], 1, 0))
        applied.append(plan[:, :apply])
        plan = np.concatenate([plan[:, apply:], np.repeat(plan[:, -1:], apply, axis=1)], axis=1)  # shift, hold last
        if callback:
            callback(done + apply, state)
    return Plan({k: np.stack(v, axis=1) for k, v in history.items()}, np.concatenate(applied, axis=1), plans)
