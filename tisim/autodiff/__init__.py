"""The gradient mechanisms beyond plain unrolling, and the tools that check and diagnose gradients.

    checkpointing        the checkpointed backward pass (method="checkpointed")
    forward_mode         directional derivatives with Taichi's forward mode (method="forward_mode", tisim.jvp)
    continuous_adjoint   optimize-then-discretize for ODE systems (method="continuous_adjoint")
    jacobians            d x_T / d(theta, x_0 or a), by reverse or forward mode
    implicit             the implicit function theorem inside a step (detach)
    gradient_check       tisim.gradcheck: central differences in float64 against the backward pass
    diagnostics          a gradient health report: where the adjoint grows or dies, which switches fired

Each mechanism registers with the engine when tisim is imported; they import only tisim.core.
"""
