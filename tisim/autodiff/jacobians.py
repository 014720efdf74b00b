"""d x_T / d(theta, x_0 or a): the Jacobian of a rollout's final state, by reverse or forward mode.

Reverse mode takes one backward pass per final-state entry (S passes), seeding the adjoint of x_T with a unit
vector; forward mode one forward-mode pass per input entry (tisim/autodiff/forward_mode.py). "auto" picks forward
mode when the inputs are fewer than the outputs, and falls back to reverse mode where Taichi's forward mode cannot
compile the step. This module is the engine's "jacobian" mechanism.
"""
import numpy as np

from tisim.autodiff.forward_mode import forward_jacobian
from tisim.core.derivatives import Jacobian, check_derivatives
from tisim.core.engine import mechanism
from tisim.core.protocol import Protocol
from tisim.core.trajectory import download, seed_final_state


def columns(sim, wrt):
    """The Jacobian's column labels for the input group `wrt`."""
    if wrt == "params":
        return sim.param_layout.labels()
    if wrt == "initial_state":
        return sim.state_layout.labels()
    shape = sim.action_shape
    return [f"{sim.action_name}[{t}]" + (f"[{j}]" if shape else "")
            for t in range(sim.T) for j in range(sim.action_layout.size)]


@mechanism("jacobian")
def jacobian(sim, wrt, mode):
    """``sim.jacobian(wrt=..., mode=...)`` once its arguments are checked."""
    inputs = {"params": sim.param_layout.size, "initial_state": sim.state_layout.size,
              "actions": sim.T * sim.action_layout.size}[wrt]
    rows, cols = sim.state_layout.labels(), columns(sim, wrt)
    if mode == "forward" or (mode == "auto" and inputs < sim.state_layout.size):
        try:
            matrix = forward_jacobian(sim, wrt).astype(np.float64)
            return Jacobian(check_derivatives(sim, "jacobian", matrix, "forward mode"), rows, cols)
        except NotImplementedError:
            if mode == "forward":
                raise  # "auto" falls back to reverse mode where Taichi's forward mode cannot compile the step
    passes, p = [], Protocol.of(sim)
    for k in range(sim.state_layout.size):
        p.forward(grads=True)
        seed_final_state(sim.x.grad, k, p.serial)
        p.backward()
        if wrt == "params":
            passes.append(download(sim.theta.grad)[:, :sim.param_layout.size])
        elif wrt == "initial_state":
            passes.append(download(sim.x.grad)[:, 0])
        else:
            passes.append(download(sim.u.grad).reshape(sim.B, -1))
    matrix = check_derivatives(sim, "jacobian", np.stack(passes, axis=1).astype(np.float64))
    return Jacobian(matrix, rows, cols)
