"""Gymnasium environments over tisim simulators (docs/tutorials/environments.md).

    CartpoleSwingUp, PendulumSwingUp     single environments (tisim/envs/swing_up.py)
    Reacher, Ant                          Gymnasium's reacher and ant (tisim/envs/reach.py, walk.py; they need the
                                          mujoco package)
    SoftWalker                            a mass-spring robot walks forward (tisim/envs/walk.py)
    Pinch, RollingPin, Move, Chopsticks   tools shape clay into a target shape, PlasticineLab's kind of task
                                          (tisim/envs/shape.py)
    SimulatedVectorEnv(env_class, n)      n environments as the batch of one simulator (tisim/envs/vector.py)

Importing tisim.envs registers "tisim/CartpoleSwingUp-v0", "tisim/PendulumSwingUp-v0", "tisim/Reacher-v0",
"tisim/Ant-v0", "tisim/SoftWalker-v0", "tisim/Pinch-v0", "tisim/RollingPin-v0", "tisim/Move-v0" and
"tisim/Chopsticks-v0": gymnasium.make(id) gives the single environment, gymnasium.make_vec(id, num_envs=n) the
batched vector environment.
Without the import, gymnasium.make("tisim.envs:tisim/CartpoleSwingUp-v0") imports it first.
"""
import gymnasium

from tisim.envs.reach import Reacher
from tisim.envs.shape import Chopsticks, Move, Pinch, RollingPin
from tisim.envs.simulated import SimulatedEnv
from tisim.envs.swing_up import CartpoleSwingUp, PendulumSwingUp
from tisim.envs.vector import SimulatedVectorEnv
from tisim.envs.walk import Ant, SoftWalker

__all__ = ["Ant", "CartpoleSwingUp", "Chopsticks", "Move", "PendulumSwingUp", "Pinch", "Reacher", "RollingPin",
           "SimulatedEnv", "SimulatedVectorEnv", "SoftWalker"]

ENVIRONMENTS = {
    "tisim/CartpoleSwingUp-v0": ("tisim.envs.swing_up:CartpoleSwingUp", "tisim.envs.vector:cartpole_swing_up_vector"),
    "tisim/PendulumSwingUp-v0": ("tisim.envs.swing_up:PendulumSwingUp", "tisim.envs.vector:pendulum_swing_up_vector"),
    "tisim/Reacher-v0": ("tisim.envs.reach:Reacher", "tisim.envs.vector:reacher_vector"),
    "tisim/Ant-v0": ("tisim.envs.walk:Ant", "tisim.envs.vector:ant_vector"),
    "tisim/SoftWalker-v0": ("tisim.envs.walk:SoftWalker", "tisim.envs.vector:soft_walker_vector"),
    "tisim/Pinch-v0": ("tisim.envs.shape:Pinch", "tisim.envs.vector:pinch_vector"),
    "tisim/RollingPin-v0": ("tisim.envs.shape:RollingPin", "tisim.envs.vector:rolling_pin_vector"),
    "tisim/Move-v0": ("tisim.envs.shape:Move", "tisim.envs.vector:move_vector"),
    "tisim/Chopsticks-v0": ("tisim.envs.shape:Chopsticks", "tisim.envs.vector:chopsticks_vector"),
}

for _id, (_single, _vector) in ENVIRONMENTS.items():
    if _id not in gymnasium.registry:
        gymnasium.register(id=_id, entry_point=_single, vector_entry_point=_vector)
