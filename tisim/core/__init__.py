"""The engine: declared quantities, the compiled model of a system, the rollout and its backward pass.

    quantities   Quantity and Scratch declarations, and how they pack into arrays (Layout)
    access       typed access to the packed arrays from inside a step
    phases       a step made of phases over different domains, with scratch between them
    model        a system's structure and the kernels compiled for it
    engine       System: the public calls (rollout, gradient, jacobian) and the unrolled backward pass
    losses       losses on a rollout, evaluated by Taichi kernels the backward pass differentiates
    derivatives  Gradient and Jacobian records, NonFiniteError
    trajectory   the per-step arrays' housekeeping kernels
    segments     a rollout in segments through a small buffer: checkpoints, long runs that keep every k-th state
    memory       what a simulator's arrays will need, checked before anything is allocated
    stores       the accumulation rule checked in a system's source (no plain store into the next state)
    launch       kernel calls whose arguments are bound once
    protocol     what the gradient mechanisms may use of a simulator
    runtime      the one place that calls ti.init
    assets       robot and body descriptions read from JSON

Nothing here imports from the layers above (autodiff, physics, systems, optim, learn, viz).
"""
