"""tisim: a Taichi-based differentiable simulator. x[t+1] = f(x[t], a[t]; theta), and one backward pass for
dL/dtheta, dL/dx[0], dL/da[0:T] and the adjoint lambda_t."""
from tisim import adjoint, checkpointing, losses, systems  # noqa: F401 (the mechanisms register with the engine)
from tisim.derivatives import Gradient, Jacobian, NonFiniteError
from tisim.engine import System
from tisim.forward import jvp
from tisim.gradients import gradcheck
from tisim.quantities import Quantity
from tisim.runtime import init

__version__ = "0.1.0"

__all__ = [
    "Gradient",
    "Jacobian",
    "NonFiniteError",
    "Quantity",
    "System",
    "gradcheck",
    "init",
    "jvp",
    "losses",
    "systems",
]
