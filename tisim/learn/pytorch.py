"""PyTorch interop: a rollout's loss as a differentiable torch function, so a torch model can sit in front of the
simulator (producing actions, parameters or initial states) and train with ``loss.backward()``.

    import torch, tisim
    from tisim.pytorch import rollout_loss

    sim = tisim.systems.Cartpole(horizon=100, theta=3.0)
    policy = torch.nn.Linear(4, 100, dtype=torch.float64)
    actions = policy(features)                                     # (T,) or (B, T): one force per step
    L = rollout_loss(sim, tisim.losses.TerminalTarget({"theta": 0.0}), actions=actions)   # (B,) tensor
    L.sum().backward()                                             # through tisim's backward pass into policy

Inputs are float tensors: ``actions`` shaped like ``sim.set_actions`` takes them; ``params`` and
``initial_state`` are {name: tensor}, each of the declared shape (shared by the batch: its gradient is summed over
the batch) or with the batch axis first. The forward call runs tisim's forward and backward pass at once (one
``sim.gradient``) and keeps the gradients for torch's backward. Requires the optional extra: pip install tisim[torch].
"""
import numpy as np
import torch

from tisim.core.engine import GROUPS


class _Rollout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, sim, loss, slots, *tensors):
        for (group, name), tensor in zip(slots, tensors):
            value = tensor.detach().cpu().numpy().astype(np.float64)
            if group == "actions":
                sim.set_actions(value)
            elif group == "params":
                sim.set_params(**{name: value})
            else:
                sim.set_initial_state(**{name: value})
        g = sim.gradient(loss)
        ctx.slots, ctx.shapes = slots, [tuple(t.shape) for t in tensors]
        ctx.grads = [g.actions if group == "actions" else getattr(g, group)[name] for group, name in slots]
        ctx.dtype, ctx.device = tensors[0].dtype, tensors[0].device
        return torch.as_tensor(g.per_batch, dtype=ctx.dtype, device=ctx.device)

    @staticmethod
    def backward(ctx, upstream):
        weights = upstream.detach().cpu().numpy().astype(np.float64)  # dOut/dL_b, one per batch element
        out = []
        for grad, shape in zip(ctx.grads, ctx.shapes):
            scaled = grad * weights.reshape((-1,) + (1,) * (grad.ndim - 1))
            if len(shape) < scaled.ndim:  # an input shared by the batch: its gradient sums over the batch
                scaled = scaled.sum(axis=0)
            out.append(torch.as_tensor(scaled.reshape(shape), dtype=ctx.dtype, device=ctx.device))
        return (None, None, None, *out)


def rollout_loss(sim, loss, *, actions=None, params=None, initial_state=None):
    """The loss of each batch element, a (B,) tensor differentiable in every tensor given (see the module docstring)."""
    slots, tensors = [], []
    if actions is not None:
        slots.append(("actions", None))
        tensors.append(actions)
    for group, values in (("params", params), ("initial_state", initial_state)):
        if values is None:
            continue
        if not isinstance(values, dict):
            raise TypeError(f"rollout_loss: {group} must be a dict {{name: tensor}}, got {type(values).__name__}")
        for name, tensor in values.items():
            slots.append((group, name))
            tensors.append(tensor)
    if not tensors:
        raise ValueError(f"rollout_loss: give at least one of actions, params, initial_state (groups: {GROUPS})")
    for (group, name), tensor in zip(slots, tensors):
        label = group if name is None else f"{group}[{name!r}]"
        if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point():
            raise TypeError(f"rollout_loss: {label} must be a floating-point torch.Tensor, got {type(tensor).__name__}")
    return _Rollout.apply(sim, loss, tuple(slots), *tensors)
