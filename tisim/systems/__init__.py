"""One module per system; each declares its parameters, state and action and writes its step once."""
from tisim.systems.articulation.system import Articulation
from tisim.systems.bouncing_ball import BouncingBall
from tisim.systems.cartpole import Cartpole
from tisim.systems.linear import Linear, ScalarLinear
from tisim.systems.mass_spring.handling import Handling
from tisim.systems.mass_spring.manipulation import Manipulation
from tisim.systems.mass_spring.system import MassSpring
from tisim.systems.mpm.coupled import Coupled
from tisim.systems.mpm.kneading import Kneading
from tisim.systems.mpm.sculpting import Sculpting
from tisim.systems.mpm.shaping import Shaping
from tisim.systems.mpm.system import MPM
from tisim.systems.mpm.tumbling import Tumbling
from tisim.systems.pendulum import DoublePendulum, Pendulum
from tisim.systems.residual_pendulum import ResidualPendulum
from tisim.systems.rigid2d.system import Rigid2D
from tisim.systems.sliding_block import SlidingBlock
from tisim.systems.stiff_chain import StiffChain

__all__ = [
    "Articulation",
    "BouncingBall",
    "Cartpole",
    "Coupled",
    "DoublePendulum",
    "Handling",
    "Kneading",
    "Linear",
    "Manipulation",
    "MassSpring",
    "MPM",
    "Pendulum",
    "ResidualPendulum",
    "Rigid2D",
    "ScalarLinear",
    "Sculpting",
    "Shaping",
    "SlidingBlock",
    "StiffChain",
    "Tumbling",
]
