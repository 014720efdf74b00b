"""The material point method (MLS-MPM) in 2D and 3D: the system, its material laws and its grid transfers."""
from tisim.systems.mpm.system import BAND, MPM, Body

__all__ = [
    "BAND",
    "Body",
    "MPM",
]
