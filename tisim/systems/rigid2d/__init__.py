"""2D rigid bodies (discs and boxes) with penalty or convex contact: the system and its contact impulses."""
from tisim.systems.rigid2d.system import Rigid2D

__all__ = [
    "Rigid2D",
]
