"""3D articulated bodies: a kinematic tree of rigid bodies (Tree), from MJCF (load_mjcf) or a Python Builder,
simulated in generalized coordinates as MuJoCo steps it (Articulation)."""
from tisim.systems.articulation.builder import Builder
from tisim.systems.articulation.mjcf import load_mjcf
from tisim.systems.articulation.system import Articulation, double_pendulum
from tisim.systems.articulation.tree import HINGE, SLIDE, Tree

__all__ = ["Articulation", "Builder", "HINGE", "SLIDE", "Tree", "double_pendulum", "load_mjcf"]
