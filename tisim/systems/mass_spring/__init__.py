"""Mass-spring bodies and cloth: the system, and the robot descriptions it is built from."""
from tisim.systems.mass_spring.robots import Robot, cloth, from_cells, grid
from tisim.systems.mass_spring.system import MassSpring, mean_x_weights, obstacle_table, reference_actions

__all__ = [
    "MassSpring",
    "Robot",
    "cloth",
    "from_cells",
    "grid",
    "mean_x_weights",
    "obstacle_table",
    "reference_actions",
]
