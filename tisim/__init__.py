"""tisim: a Taichi-based differentiable simulator. x[t+1] = f(x[t], a[t]; theta), and one backward pass for
dL/dtheta, dL/dx[0], dL/da[0:T] and the adjoint lambda_t.

The package is in layers, each a folder that imports only from the folders before it:

    core      the engine: quantities, the compiled model, the rollout and its backward pass, losses
    autodiff  the other gradient mechanisms (checkpointed, forward mode, continuous adjoint), checks, diagnostics
    physics   integrators and contact laws as Taichi functions
    learn     networks inside a step, closed-loop policies, PyTorch interop
    systems   one module (or folder) per system
    optim     optimizers, the loops built on them (tasks), resume snapshots, sweeps
    viz       drawings, GIFs, 3D scenes, windows, plots
    envs      Gymnasium environments over the systems (import tisim.envs; needs gymnasium)

The names users reach for are flat: tisim.losses, tisim.optim, tisim.tasks, tisim.plots, ... (FLAT_NAMES below).
"""
import importlib
import importlib.abc
import importlib.util
import sys

from tisim import systems
from tisim.autodiff import checkpointing, continuous_adjoint, forward_mode, jacobians  # noqa: F401 (they register)
from tisim.autodiff.forward_mode import jvp
from tisim.autodiff.gradient_check import gradcheck
from tisim.core import losses
from tisim.core.derivatives import Gradient, Jacobian, NonFiniteError
from tisim.core.engine import System
from tisim.core.quantities import Quantity, Scratch, Size
from tisim.core.runtime import init

__version__ = "0.1.0"

# tisim.<flat name> is the module on the right, both as an attribute and to `import tisim.<flat name>`. They load on
# first use: the pictures import matplotlib and the PyTorch interop imports torch, which plain simulation never needs.
FLAT_NAMES = {
    "diagnostics": "tisim.autodiff.diagnostics",
    "gui": "tisim.viz.gui",
    "losses": "tisim.core.losses",
    "nn": "tisim.learn.nn",
    "plots": "tisim.viz.plots",
    "policy": "tisim.learn.policy",
    "pytorch": "tisim.learn.pytorch",
    "robots": "tisim.systems.mass_spring.robots",
    "scene": "tisim.viz.scene",
    "sweep": "tisim.optim.sweep",
    "tasks": "tisim.optim.tasks",
}


class _FlatNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `tisim.<flat name>` and hands back the module it names, so both spellings are one module object."""

    def find_spec(self, fullname, path=None, target=None):
        package, _, name = fullname.rpartition(".")
        if package == "tisim" and name in FLAT_NAMES:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        module = importlib.import_module(FLAT_NAMES[spec.name.rpartition(".")[2]])
        self._own_spec = module.__spec__  # the import system sets the alias's spec on the module next
        return module

    def exec_module(self, module):
        module.__spec__ = self._own_spec  # the module was imported already, under its own name


if not any(isinstance(finder, _FlatNames) for finder in sys.meta_path):
    sys.meta_path.append(_FlatNames())


# the layer packages and tisim.testing, also loaded on first use
SUBPACKAGES = ("autodiff", "core", "learn", "optim", "physics", "testing", "viz")


def __getattr__(name):
    if name in FLAT_NAMES or name in SUBPACKAGES:
        return importlib.import_module(f"tisim.{name}")
    raise AttributeError(f"module 'tisim' has no attribute {name!r}")


__all__ = [
    "Gradient",
    "Jacobian",
    "NonFiniteError",
    "Quantity",
    "Scratch",
    "Size",
    "System",
    "gradcheck",
    "init",
    "jvp",
    "losses",
    "systems",
]
