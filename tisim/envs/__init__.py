"""Gymnasium environments over tisim simulators (docs/tutorials/environments.md).

    CartpoleSwingUp, PendulumSwingUp     single environments (tisim/envs/swing_up.py)
    Reacher, Ant                          Gymnasium's reacher and ant (tisim/envs/reach.py, walk.py; they need the
                                          mujoco package)
    SimulatedVectorEnv(env_class, n)      n environments as the batch of one simulator (tisim/envs/vector.py)

Importing tisim.envs registers "tisim/CartpoleSwingUp-v0", "tisim/PendulumSwingUp-v0", "tisim/Reacher-v0" and
"tisim/Ant-v0": gymnasium.make(id) gives the single environment, gymnasium.make_vec(id, num_envs=n) the batched
vector environment. Without the import,
gymnasium.make("tisim.envs:tisim/CartpoleSwingUp-v0") imports it first.
"""
import gymnasium

from tisim.envs.reach import Reacher
from tisim.envs.simulated import SimulatedEnv
from tisim.envs.swing_up import CartpoleSwingUp, PendulumSwingUp
from tisim.envs.vector import SimulatedVectorEnv
from tisim.envs.walk import Ant

__all__ = ["Ant", "CartpoleSwingUp", "PendulumSwingUp", "Reacher", "SimulatedEnv", "SimulatedVectorEnv"]

ENVIRONMENTS = {
    "tisim/CartpoleSwingUp-v0": ("tisim.envs.swing_up:CartpoleSwingUp", "tisim.envs.vector:cartpole_swing_up_vector"),
    "tisim/PendulumSwingUp-v0": ("tisim.envs.swing_up:PendulumSwingUp", "tisim.envs.vector:pendulum_swing_up_vector"),
    "tisim/Reacher-v0": ("tisim.envs.reach:Reacher", "tisim.envs.vector:reacher_vector"),
    "tisim/Ant-v0": ("tisim.envs.walk:Ant", "tisim.envs.vector:ant_vector"),
}

for _id, (_single, _vector) in ENVIRONMENTS.items():
    if _id not in gymnasium.registry:
        gymnasium.register(id=_id, entry_point=_single, vector_entry_point=_vector)
