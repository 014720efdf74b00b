"""Smoke tests of demos/contact_gradients.py and demos/chaos_horizon.py at tiny size, against their referees.

Both demos report statistics of contact-rich or chaotic rollouts, so each runs exactly and under last-bit
perturbations of its inputs (conftest.PERTURBATIONS), and every test holds for each run."""
import json
import os
import pathlib

import numpy as np
import pytest

import tisim
from tisim.systems import DoublePendulum

from conftest import LAST_BITS, PERTURBATIONS, TEST_SETTINGS, load_demo, perturbed_inputs


@pytest.fixture(scope="module", params=list(PERTURBATIONS.values()), ids=list(PERTURBATIONS))
def contact(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("contact")
    tisim.init(**TEST_SETTINGS)  # module fixtures run before the per-test runtime fixture
    with perturbed_inputs(request.param):
        return load_demo("contact_gradients").main(["--short", "--out", str(out)])


@pytest.fixture(scope="module", params=list(PERTURBATIONS.values()), ids=list(PERTURBATIONS))
def chaos(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("chaos")
    tisim.init(**TEST_SETTINGS)
    with perturbed_inputs(request.param):
        return dict(load_demo("chaos_horizon").main(["--short", "--out", str(out)]), perturbed=bool(request.param))


@pytest.mark.parametrize("setting", ["hard", "soft", "impact", "qp"])
def test_contact_free_points_agree(contact, setting):
    """Where no sample of the stencil touches the floor, backward and central difference agree to 1e-9."""
    r = contact[setting]
    free = r["regime"] == "free"
    assert free.sum() >= 1
    np.testing.assert_allclose(r["backward"][free], r["central"][free], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(r["backward"][free], 1.0, rtol=1e-9)  # L = py0 - g t^2 / 2 in free fall


@pytest.mark.parametrize("setting", ["soft", "impact", "qp"])
def test_smooth_or_rigid_contact_agrees_away_from_switches(contact, setting):
    """Soft penalty contact, the exact time of impact and QP contact (which bounces at the time of impact): away from
    rebound-count changes, backward and central difference agree within 5% of the scale."""
    r = contact[setting]
    away = r["regime"] != "switch"
    scale = np.maximum(np.abs(r["central"][away]), np.median(np.abs(r["central"])))
    assert np.all(np.abs(r["backward"][away] - r["central"][away]) <= 0.05 * scale)


@pytest.mark.parametrize("setting", ["hard", "soft"])
def test_smoothed_estimate_matches_smoothed_loss(contact, setting):
    """Away from switches, the zeroth-order estimate is within 4 standard errors of the smoothed loss's difference."""
    r = contact[setting]
    away = r["regime"] != "switch"
    z = np.abs(r["smoothed"] - r["smoothed_central"])[away] / r["paired_se"][away]
    assert np.all(z < 4.0), z


def test_softness_reduces_disagreement(contact):
    """Soft contact cuts the median |backward - central| / median |central| at least 20-fold, and the PNG exists."""
    assert contact["hard"]["disagreement"] > 20 * contact["soft"]["disagreement"]
    assert contact["hard"]["disagreement"] > 1.0  # hard contact: the backward pass follows the sawtooth's teeth
    assert os.path.getsize(contact["png"]) > 10_000
    figures = json.loads((pathlib.Path(contact["png"]).parent / "contact_gradients.json").read_text())
    assert figures["hard"]["median_disagreement"] == contact["hard"]["disagreement"]


def test_chaos_exponents(chaos):
    """The double pendulum's fitted rate is positive and several times the pendulum's, whose growth is ~ linear."""
    chaotic, regular = chaos["cases"]["double pendulum"], chaos["cases"]["pendulum"]
    assert chaotic["rate"] > 0.5
    assert chaotic["rate"] > 3 * regular["rate"]
    assert 0.6 < regular["power"] < 1.4
    # the check compares two rollouts; perturbed, their inputs differ by LAST_BITS, which the growth amplifies
    amplified = LAST_BITS * chaotic["norm"].max() if chaos["perturbed"] else 0.0
    assert chaos["jacobian_check"] < max(1e-12, amplified), (chaos["jacobian_check"], amplified)
    assert os.path.getsize(chaos["png"]) > 10_000


def test_chaos_norm_matches_central_differences(chaos):
    """||dx_T/dx_0|| of the double pendulum at T = 2 s equals its central-difference value to 1e-5 relative."""
    i = int(np.flatnonzero(chaos["seconds"] == 2.0)[0])
    case, h = chaos["cases"]["double pendulum"], 1e-6
    names = [q.name for q in DoublePendulum.STATE]
    x0 = np.array([case["initial"].get(name, 0.0) for name in names])
    starts = np.concatenate([x0 + h * np.eye(4), x0 - h * np.eye(4)])  # +h e_j, then -h e_j
    sim = DoublePendulum(horizon=int(chaos["steps"][i]), batch=8, dt=chaos["dt"],
                         **{name: starts[:, k] for k, name in enumerate(names)})
    traj = sim.rollout()
    final = np.stack([traj[name][:, -1] for name in names], axis=1)  # (8, 4)
    central = ((final[:4] - final[4:]) / (2 * h)).T  # column j: d x_T / d x0_j
    norm = np.linalg.norm(central, ord=2)
    assert norm > 5.0
    np.testing.assert_allclose(case["norm"][i], norm, rtol=1e-5)
    np.testing.assert_allclose(case["jacobian"][i], central, rtol=0, atol=1e-5 * norm)
