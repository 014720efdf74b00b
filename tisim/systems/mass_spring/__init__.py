"""Mass-spring bodies and cloth: the system, the robot descriptions it is built from, and kinematic tools and
articulated robots that handle them."""
from tisim.systems.mass_spring.handling import Handling
from tisim.systems.mass_spring.manipulation import Manipulation
from tisim.systems.mass_spring.robots import Robot, cloth, from_cells, grid
from tisim.systems.mass_spring.system import MassSpring, obstacle_table
from tisim.systems.mass_spring.workload import mean_x_weights, reference_actions

__all__ = [
    "Handling",
    "Manipulation",
    "MassSpring",
    "Robot",
    "cloth",
    "from_cells",
    "grid",
    "mean_x_weights",
    "obstacle_table",
    "reference_actions",
]
