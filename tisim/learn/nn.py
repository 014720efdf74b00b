"""Small multilayer perceptrons whose weights are tisim parameters, for learned terms inside a step.

An ``MLP((3, 16, 1))`` maps 3 inputs through a tanh layer of 16 to 1 linear output. Its weights live in the
simulator's parameter array (a Quantity of shape (n_weights,)), so the one backward pass that gives dL/dtheta for the
physics gives dL/dweights too, and ``tisim.tasks.identify`` fits both at once. In a step:

    correction = self.network.apply(s.theta, s.b, self.P.w_residual, inputs)   # s: the step context

Layout of the flat weights: for each layer, the (n_in, n_out) matrix row-major, then the n_out biases.
"""
import operator

import numpy as np
import taichi as ti


@ti.data_oriented
class MLP:
    """A tanh multilayer perceptron with a linear output layer; sizes = (inputs, hidden..., outputs)."""

    def __init__(self, sizes):
        try:
            sizes = tuple(operator.index(n) for n in sizes)
        except TypeError:
            raise TypeError(f"MLP: sizes must be integers (inputs, hidden..., outputs), got {sizes!r}") from None
        if len(sizes) < 2 or min(sizes) < 1:
            raise ValueError(f"MLP: sizes must be at least (inputs, outputs), all >= 1, got {sizes}")
        self.sizes = sizes
        self.n_weights = sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:]))

    # equal shapes compile to the same kernels (a model's topology, tisim/core/model.py)
    def __eq__(self, other):
        return isinstance(other, MLP) and other.sizes == self.sizes

    def __hash__(self):
        return hash(("MLP", self.sizes))

    def __repr__(self):
        return f"MLP({' -> '.join(map(str, self.sizes))}, {self.n_weights} weights)"

    INITIALIZATIONS = ("glorot", "he")

    def initial_weights(self, seed=0, scale=1.0, method="glorot"):
        """Random matrices times ``scale`` and zero biases, flat in the layout above.

        method: "glorot" (uniform, limit sqrt(6 / (n_in + n_out)): keeps tanh layers' variance; Glorot and Bengio
        2010) or "he" (normal, std sqrt(2 / n_in); He et al. 2015)."""
        if method not in self.INITIALIZATIONS:
            raise ValueError(f"MLP.initial_weights: method must be one of {list(self.INITIALIZATIONS)}, "
                             f"got {method!r}")
        rng = np.random.default_rng(seed)
        parts = []
        for a, b in zip(self.sizes[:-1], self.sizes[1:]):
            if method == "glorot":
                limit = np.sqrt(6.0 / (a + b))
                matrix = rng.uniform(-limit, limit, size=a * b)
            else:
                matrix = rng.normal(0.0, np.sqrt(2.0 / a), size=a * b)
            parts += [scale * matrix, np.zeros(b)]
        return np.concatenate(parts)

    def apply_numpy(self, weights, inputs):
        """The same network in numpy, inputs (..., n_in) -> (..., n_out): a referee for the Taichi version."""
        h, k = np.asarray(inputs, dtype=np.float64), 0
        for layer, (a, b) in enumerate(zip(self.sizes[:-1], self.sizes[1:])):
            matrix = weights[k:k + a * b].reshape(a, b)
            bias = weights[k + a * b:k + a * b + b]
            k += a * b + b
            h = h @ matrix + bias
            if layer < len(self.sizes) - 2:
                h = np.tanh(h)
        return h

    @ti.func
    def apply(self, theta: ti.template(), b, offset, inputs):
        """The network on a ti.Vector of inputs, weights read from theta[b, offset:]; returns a ti.Vector."""
        return self._layer(theta, b, offset, inputs, 0)

    @ti.func
    def _layer(self, theta: ti.template(), b, k, h, layer: ti.template()):
        # one layer per (compile-time) recursion: the vector size changes from layer to layer
        a, n = ti.static(self.sizes[layer], self.sizes[layer + 1])
        out = ti.Vector([theta[b, k + a * n + j] for j in ti.static(range(n))])
        for i in ti.static(range(a)):
            out += ti.Vector([theta[b, k + i * n + j] for j in ti.static(range(n))]) * h[i]
        if ti.static(layer < len(self.sizes) - 2):
            return self._layer(theta, b, k + a * n + n, ti.tanh(out), layer + 1)
        else:
            return out
