"""A pendulum with a learned term: the physics of ``Pendulum`` plus a small network's angular acceleration.

    theta'' = -(g / l) sin(theta) + (tau - c theta') / (m l^2) + N(sin theta, cos theta, theta'; w)

N is a ``tisim.nn.MLP`` (3 inputs, one tanh hidden layer, 1 output) whose weights w are the parameter
"w_residual", so they are fitted together with g, l, m, c from the same backward pass. The inputs are sin and cos of
the angle (periodic) and the angular velocity; the network starts small (weights scaled by 0.1), near the physics.
"""
import taichi as ti

from tisim.core.model import check_count, check_derived, check_run
from tisim.core.quantities import Quantity
from tisim.learn.nn import MLP
from tisim.systems.pendulum import Pendulum


class ResidualPendulum(Pendulum):
    """Pendulum plus a learned angular acceleration (constructor keywords: hidden units, seed of the weights)."""

    PARAMS = Pendulum.PARAMS + (
        Quantity("w_residual", 0.0, "-", "weights of the residual network (layout in tisim.nn)", shape=("n_weights",)),
    )
    STRUCTURE = ("hidden", "n_weights")

    def __init__(self, horizon, batch=1, dt=None, hidden=16, seed=0, **values):
        check_run("ResidualPendulum", horizon, batch, dt)
        check_derived("ResidualPendulum", values, {"n_weights": "it follows from hidden (the network's width)"})
        check_count("ResidualPendulum", "hidden", hidden)
        check_count("ResidualPendulum", "seed", seed, minimum=0)
        self.network = MLP((3, hidden, 1))
        super().__init__(horizon, batch, dt, hidden=hidden, n_weights=self.network.n_weights, **values)
        if "w_residual" not in values:
            self.set_params(w_residual=self.network.initial_weights(seed, scale=0.1))

    def topology(self):
        return dict(network=self.network)

    @ti.func
    def learned_acceleration(self, s: ti.template(), q, w):
        inputs = ti.Vector([ti.sin(q), ti.cos(q), w])
        return self.network.apply(s.theta, s.b, self.P.w_residual, inputs)[0]
