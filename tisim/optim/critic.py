"""A learned critic for training policies through the simulator: V(o), the discounted cost still to come from the
observation o, for ``train_policy(..., critic=Critic(...))`` (SHAC's critic, Xu et al. 2022).

The critic is a tanh multilayer perceptron (``tisim.nn.MLP``'s layout) evaluated and fitted in numpy, off the
simulator: it reads the policy's observation, phi(x) normalized by the policy's obs_mean and obs_scale, and is fitted
after every window, by minibatch Adam on the squared error, to TD(lambda) targets built from the window's costs and a
target copy of itself:

    G[t] = c[t+1] + gamma ((1 - lambda) V'(o[t+1]) + lambda G[t+1]),   G[h] = V'(o[h]),   t = h-1 .. 0

where c[t+1] is the cost of the state step t reaches and V' the target critic, which follows the critic slowly
(V' <- tau V' + (1 - tau) V after each fit). The policy's window loss then bootstraps what lies beyond the window
with gamma^h V(o[h]) / h; its gradient with respect to the window's last state enters the backward pass there.
"""
import numpy as np

from tisim.learn.nn import MLP
from tisim.optim.optimizers import Adam


class Critic:
    """A value function to bootstrap the policy's windows (see the module docstring).

    costs(states) -> (B, T): the cost of every step of a window, in numpy, from its states {name: (B, T + 1, ...)}:
        the cost each step's result incurs, as the window's loss counts it (without the 1 / h and the discount).
    hidden: the widths of the tanh layers. gamma: the discount per step, also the one the window's loss should apply
    to its steps for the two to agree. lam: TD(lambda)'s lambda. lr, epochs, minibatches: the regression's Adam step,
    passes over each window's states, and minibatches per pass. tau: how much of itself the target critic keeps.
    """

    def __init__(self, costs, *, hidden=(32, 32), gamma=0.99, lam=0.95, lr=2e-3, epochs=16, minibatches=4, tau=0.2,
                 seed=0):
        if not callable(costs):
            raise TypeError(f"Critic: costs must be a function states -> (B, T) array, got {costs!r}")
        for name, value, low, high in (("gamma", gamma, 0.0, 1.0), ("lam", lam, 0.0, 1.0), ("tau", tau, 0.0, 1.0)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (low <= value <= high):
                raise ValueError(f"Critic: {name} must be a number in [{low:g}, {high:g}], got {value!r}")
        for name, value in (("epochs", epochs), ("minibatches", minibatches)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Critic: {name} must be an integer >= 1, got {value!r}")
        self.costs, self.hidden, self.gamma, self.lam, self.tau = costs, tuple(hidden), float(gamma), float(lam), tau
        self.lr, self.epochs, self.minibatches, self.seed = float(lr), epochs, minibatches, seed
        self.network = None  # made by attach, when the observation's size is known
        self.rng = np.random.default_rng(seed)

    def attach(self, policy):
        """Size the network for a policy's observation (train_policy calls it)."""
        self.policy = policy
        self.network = MLP((policy.n_observations, *self.hidden, 1))
        self.weights = self.network.initial_weights(self.seed)
        self.target = self.weights.copy()
        self.optimizer = Adam(lr=self.lr)

    # ---- the network in numpy -------------------------------------------------------------------------------------
    def _forward(self, weights, inputs):
        # the activations of every layer, inputs first, the output last
        layers, k, h = [np.asarray(inputs, dtype=np.float64)], 0, np.asarray(inputs, dtype=np.float64)
        sizes = self.network.sizes
        for layer, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            h = h @ weights[k:k + a * b].reshape(a, b) + weights[k + a * b:k + a * b + b]
            k += a * b + b
            if layer < len(sizes) - 2:
                h = np.tanh(h)
            layers.append(h)
        return layers

    def _backward(self, weights, layers, out_bar):
        # (d weights, d inputs) of sum(out_bar * output), by the chain rule through _forward's layers
        sizes = self.network.sizes
        offsets = np.cumsum([0] + [a * b + b for a, b in zip(sizes[:-1], sizes[1:])])
        grad, bar = np.zeros_like(weights), out_bar
        for layer in range(len(sizes) - 2, -1, -1):
            a, b, k = sizes[layer], sizes[layer + 1], offsets[layer]
            if layer < len(sizes) - 2:
                bar = bar * (1.0 - layers[layer + 1] ** 2)  # through tanh
            grad[k:k + a * b] = (layers[layer].T @ bar).reshape(-1)
            grad[k + a * b:k + a * b + b] = bar.sum(axis=0)
            bar = bar @ weights[k:k + a * b].reshape(a, b).T
        return grad, bar

    def observations(self, states, mean, scale):
        """The critic's inputs: the policy's normalized observation of states {name: (..., *shape)}."""
        return (self.policy.features_numpy(states) - mean) / scale

    def value(self, inputs, target=False):
        return self._forward(self.target if target else self.weights, inputs)[-1][..., 0]

    def value_gradient(self, states, mean, scale):
        """(V, dV/dx) at states {name: (B, *shape)}: dV/dx as {name: (B, *shape)}, through the observation's
        normalization and the sines and cosines of the angles."""
        inputs = self.observations(states, mean, scale)
        layers = self._forward(self.weights, inputs)
        _, input_bar = self._backward(self.weights, layers, np.ones((len(inputs), 1)))
        phi_bar = input_bar / scale
        packed = self.policy.pack(states)
        x_bar = np.zeros_like(packed)
        for column, (k, kind, extra) in enumerate(self.policy.plan):
            if kind in (0, 3):
                slope = 1.0
            elif kind in (1, 2):  # an angle's sine and cosine
                slope = np.cos(packed[:, k]) if kind == 1 else -np.sin(packed[:, k])
            else:  # the clock's harmonics
                omega = 2 * np.pi * extra * self.policy.clock[0]
                slope = omega * (np.cos(omega * packed[:, k]) if kind == 4 else -np.sin(omega * packed[:, k]))
            x_bar[:, k] += phi_bar[:, column] * slope
            if kind == 3:  # the entry less its centroid
                offset, items, width, c = self.policy.centroids[extra]
                x_bar[:, offset + c:offset + items * width:width] -= phi_bar[:, column, None] / items
        out, start = {}, 0
        for name, shape in self.policy.shapes:
            size = int(np.prod(shape, dtype=int))
            out[name] = x_bar[:, start:start + size].reshape((len(inputs),) + shape)
            start += size
        return layers[-1][:, 0], out

    # ---- fitting ----------------------------------------------------------------------------------------------------
    def targets(self, traj, mean, scale):
        """TD(lambda) targets of the window's states 0..h-1, (B, h), and their inputs, (B, h, n)."""
        costs = np.asarray(self.costs(traj), dtype=np.float64)
        inputs = self.observations(traj, mean, scale)
        batch, h = costs.shape
        if inputs.shape[:2] != (batch, h + 1):
            raise ValueError(f"Critic: costs(states) must be (B, T) = {inputs.shape[0], inputs.shape[1] - 1}, got "
                             f"{costs.shape}")
        later = self.value(inputs[:, 1:], target=True)  # V'(o[1..h])
        out = np.empty((batch, h))
        g = later[:, -1]
        for t in range(h - 1, -1, -1):
            g = costs[:, t] + self.gamma * ((1.0 - self.lam) * later[:, t] + self.lam * g)
            out[:, t] = g
        return out, inputs[:, :-1]

    def fit(self, traj, mean, scale):
        """Fit the critic to the window's TD(lambda) targets; returns the mean squared error after the fit."""
        targets, inputs = self.targets(traj, mean, scale)
        x, y = inputs.reshape(-1, inputs.shape[-1]), targets.reshape(-1)
        for _ in range(self.epochs):
            order = self.rng.permutation(len(y))
            for part in np.array_split(order, self.minibatches):
                layers = self._forward(self.weights, x[part])
                residual = layers[-1][:, 0] - y[part]
                grad, _ = self._backward(self.weights, layers, (2.0 / len(part)) * residual[:, None])
                self.weights = self.optimizer.step({"w": self.weights}, {"w": grad})["w"]
        error = float(np.mean((self.value(x) - y) ** 2))
        self.target = self.tau * self.target + (1.0 - self.tau) * self.weights
        return error
