"""One module per system; each declares its parameters, state and action and writes its step once."""
from tisim.systems.bouncing_ball import BouncingBall
from tisim.systems.cartpole import Cartpole
from tisim.systems.linear import Linear, ScalarLinear
from tisim.systems.pendulum import DoublePendulum, Pendulum
from tisim.systems.sliding_block import SlidingBlock

__all__ = [
    "BouncingBall",
    "Cartpole",
    "DoublePendulum",
    "Linear",
    "Pendulum",
    "ScalarLinear",
    "SlidingBlock",
]
