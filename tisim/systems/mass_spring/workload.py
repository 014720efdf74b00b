"""The reference mass-spring workload's actions and loss (benchmarks/README.md): what the benchmarks and the peers'
versions of the same rollout share."""
import numpy as np


def reference_actions(sim, amplitude=0.1, frequency=5.0):
    """The reference workload's actions a[t, s] = 0.1 sin(2 pi 5 t dt + phase_s), phase_s = 2 pi s / S."""
    t = np.arange(sim.T)[:, None] * sim.dt
    phase = 2 * np.pi * np.arange(sim.action_layout.size)[None, :] / sim.action_layout.size
    return amplitude * np.sin(2 * np.pi * frequency * t + phase)


def mean_x_weights(sim):
    """TerminalSum weights for minus the mean x of all particles (the reference workload's loss)."""
    w = np.zeros((sim.sizes["n_particles"], sim.sizes["dim"]))
    w[:, 0] = -1.0 / sim.sizes["n_particles"]
    return {"pos": w}
