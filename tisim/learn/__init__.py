"""Learned parts around and inside the simulator.

    nn        small multilayer perceptrons whose weights are simulator parameters (tisim.nn)
    pytorch   a rollout's loss as a differentiable torch function (tisim.pytorch; needs tisim[torch])
"""
