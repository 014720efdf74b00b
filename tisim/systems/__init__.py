"""One module per system; each declares its parameters, state and action and writes its step once."""
from tisim.systems.linear import Linear, ScalarLinear

__all__ = [
    "Linear",
    "ScalarLinear",
]
