"""Networks inside the physics: the MLP against numpy, its gradients, and a joint fit that beats physics alone."""
import numpy as np
import pytest
import taichi as ti

import tisim
from tisim.nn import MLP

from conftest import load_demo

LAYERS = [(3, 5, 2), (2, 1), (3, 4, 4, 1)]
NETWORKS = {sizes: MLP(sizes) for sizes in LAYERS}  # kernels compile per network object: made once


@ti.kernel
def evaluate(network: ti.template(), theta: ti.types.ndarray(ndim=2), inputs: ti.types.ndarray(ndim=2),
             out: ti.types.ndarray(ndim=2)):
    for b in range(inputs.shape[0]):
        y = network.apply(theta, 0, 0, ti.Vector([inputs[b, i] for i in ti.static(range(network.sizes[0]))]))
        for j in ti.static(range(network.sizes[-1])):
            out[b, j] = y[j]


@pytest.mark.parametrize("sizes", LAYERS)
def test_mlp_matches_numpy(sizes):
    """The Taichi network equals the numpy referee for several layer shapes (1e-13)."""
    network = NETWORKS[sizes]
    weights = network.initial_weights(3) + 0.05  # nonzero biases too
    assert network.n_weights == len(weights) and "weights" in repr(network)
    theta = ti.ndarray(ti.f64, (1, network.n_weights))
    theta.from_numpy(weights[None])
    inputs = np.random.default_rng(0).normal(size=(6, sizes[0]))
    out = np.zeros((6, sizes[-1]))
    evaluate(network, theta, inputs, out)
    np.testing.assert_allclose(out, network.apply_numpy(weights, inputs), rtol=1e-13, atol=1e-15)


def test_residual_pendulum_gradients():
    """dL/d(weights), with the physics parameters, initial state and torques, match float64 central differences."""
    sim = tisim.systems.ResidualPendulum(horizon=60, batch=2, hidden=6, theta=np.array([1.0, -0.5]))
    report = tisim.gradcheck(sim, tisim.losses.TerminalTarget({"theta": 0.0, "theta_dot": 0.0}), max_entries=25)
    assert report.worst <= 1e-6, str(report)


def test_initializations():
    """Glorot weights stay inside their limit, He weights have their standard deviation, and biases start at 0."""
    network = MLP((200, 300, 1))
    glorot, he = network.initial_weights(0), network.initial_weights(0, method="he")
    first = slice(0, 200 * 300)
    assert np.abs(glorot[first]).max() <= np.sqrt(6 / 500) and np.all(glorot[first.stop:first.stop + 300] == 0)
    assert he[first].std() == pytest.approx(np.sqrt(2 / 200), rel=0.02)


def test_bad_network():
    """Networks need at least an input and an output layer of integer sizes; unknown initializations are named;
    ResidualPendulum names a bad hidden size or seed."""
    with pytest.raises(ValueError, match="sizes must be at least"):
        MLP((3,))
    with pytest.raises(TypeError, match="sizes must be integers"):
        MLP((3, None, 1))
    for keywords, message in ((dict(hidden=None), "hidden must be an integer >= 1"),
                              (dict(hidden=0), "hidden must be an integer >= 1"),
                              (dict(seed=-1), "seed must be an integer >= 0")):
        with pytest.raises(ValueError, match=message):
            tisim.systems.ResidualPendulum(horizon=2, **keywords)
    with pytest.raises(ValueError, match=r"method must be one of \['glorot', 'he'\]"):
        MLP((2, 1)).initial_weights(method="xavier")


@pytest.mark.perturbed
def test_joint_fit_beats_physics_alone(tmp_path):
    """Fitting physics and residual network together predicts held-out swings better than physics alone."""
    result = load_demo("residual_learning").main(["--out", str(tmp_path)])
    errors = result["errors"]
    assert errors["physics + residual"] < 0.8 * errors["physics only"], errors  # measured 0.037 against 0.060
    assert result["png"].stat().st_size > 10_000
