"""Learned parts around and inside the simulator.

    nn        small multilayer perceptrons whose weights are simulator parameters (tisim.nn)
    policy    closed-loop policies: a network reads the state and writes the action in every step (tisim.policy)
    pytorch   a rollout's loss as a differentiable torch function (tisim.pytorch; needs tisim[torch])
"""
