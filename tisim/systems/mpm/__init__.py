"""The material point method (MLS-MPM) in 2D and 3D: the system, its material laws and its grid transfers, and the
kinematic tools that shape its material, and free rigid bodies and articulated robots coupled to it both ways."""
from tisim.systems.mpm.body import Body
from tisim.systems.mpm.coupled import Coupled
from tisim.systems.mpm.kneading import Kneading
from tisim.systems.mpm.readouts import iou, occupancy
from tisim.systems.mpm.sculpting import Sculpting
from tisim.systems.mpm.shaping import Shaping
from tisim.systems.mpm.system import BAND, MPM
from tisim.systems.mpm.tools import Tool
from tisim.systems.mpm.tumbling import Tumbling

__all__ = [
    "BAND",
    "Body",
    "Coupled",
    "Kneading",
    "MPM",
    "Sculpting",
    "Shaping",
    "Tool",
    "Tumbling",
    "iou",
    "occupancy",
]
