"""PyTorch interop: gradients through a rollout reach a torch model, equal to tisim's own."""
import numpy as np
import pytest

import tisim
from tisim.losses import Effort, TerminalTarget

torch = pytest.importorskip("torch")
from tisim.pytorch import rollout_loss  # noqa: E402


def cartpole():
    sim = tisim.systems.Cartpole(horizon=60, batch=2, theta=np.array([3.0, 2.5]))
    return sim, TerminalTarget({"theta": 0.0, "x": 0.0}) + 1e-3 * Effort()


def test_matches_tisim_gradients():
    """Gradients wrt actions, per-element and shared parameters and initial states equal tisim's to 1e-12."""
    sim, loss = cartpole()
    actions = torch.tensor(np.random.default_rng(0).normal(size=(2, 60)), requires_grad=True)
    l_pole = torch.tensor(0.6, dtype=torch.float64, requires_grad=True)  # shared by the batch
    theta0 = torch.tensor([3.0, 2.5], dtype=torch.float64, requires_grad=True)  # one per batch element
    L = rollout_loss(sim, loss, actions=actions, params={"l": l_pole}, initial_state={"theta": theta0})
    L.sum().backward()
    g = sim.gradient(loss)
    np.testing.assert_allclose(L.detach().numpy(), g.per_batch, rtol=1e-14)
    np.testing.assert_allclose(actions.grad.numpy(), g.actions, rtol=1e-12)
    assert l_pole.grad.item() == pytest.approx(g.params["l"].sum(), rel=1e-12)
    np.testing.assert_allclose(theta0.grad.numpy(), g.initial_state["theta"], rtol=1e-12)


@pytest.mark.perturbed
def test_a_torch_policy_trains_through_the_simulator():
    """A linear torch policy's weight gradient is the chain rule through tisim (checked against torch's own
    finite-difference gradcheck), and a few Adam steps lower the loss."""
    sim = tisim.systems.Pendulum(horizon=30, batch=1, theta=1.0)
    loss = TerminalTarget({"theta": 0.0, "theta_dot": 0.0})
    features = torch.tensor(np.linspace(0, 1, 30)[:, None] ** np.arange(3), dtype=torch.float64)  # (T, 3)

    def objective(weights):
        return rollout_loss(sim, loss, actions=features @ weights).sum()

    weights = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(objective, (weights,), eps=1e-6, atol=1e-8, rtol=1e-6)
    optimizer = torch.optim.Adam([weights], lr=0.5)
    first = objective(weights).item()
    for _ in range(20):
        optimizer.zero_grad()
        value = objective(weights)
        value.backward()
        optimizer.step()
    assert objective(weights).item() < 0.5 * first


def test_bad_inputs():
    """Wrong shapes, non-tensors and unknown names raise errors that name the input."""
    sim, loss = cartpole()
    with pytest.raises(ValueError, match="actions .* must have shape"):
        rollout_loss(sim, loss, actions=torch.zeros(61, dtype=torch.float64))
    with pytest.raises(TypeError, match="actions must be a floating-point torch.Tensor"):
        rollout_loss(sim, loss, actions=np.zeros(60))
    with pytest.raises(TypeError, match=r"params\['l'\] must be a floating-point"):
        rollout_loss(sim, loss, params={"l": torch.tensor(1)})
    with pytest.raises(ValueError, match="unknown parameter name 'length'"):
        rollout_loss(sim, loss, params={"length": torch.tensor(1.0)})
    with pytest.raises(ValueError, match="give at least one"):
        rollout_loss(sim, loss)
