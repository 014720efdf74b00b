"""BouncingBall against contact mechanics: bounce heights, penetration, friction impulse, smoothness, gradients and what
bad input gets."""
import numpy as np
import pytest

import tisim
from tisim.systems import BouncingBall

G, R = 9.8, 0.1
STATES = ("px", "py", "vx", "vy")


def gradcheck_all_groups(sim, loss):
    """tisim.gradcheck in params and initial_state at the default step, and in actions at step 1e-4."""
    # Params and initial state at the default step (1e-5). One action moves the final state by only ~dt per unit, so
    # round-off in the loss would reach ~1e-6 of its gradient there; actions take step 1e-4 (truncation < 1e-7).
    report = tisim.gradcheck(sim, loss, groups=("params", "initial_state"), max_entries=20)
    report.update(tisim.gradcheck(sim, loss, groups=("actions",), step=1e-4, max_entries=20))
    return report


def peak_heights(py, vy):
    """Apex heights of the disc's bottom [m]: at each step where vy turns from + to -, py - r + vy^2 / (2 g), the exact
    apex of the ballistic flight between steps."""
    top = np.flatnonzero((vy[:-1] > 0) & (vy[1:] <= 0))
    return py[top] - R + vy[top] ** 2 / (2 * G)


def test_impact_peak_heights_fall_by_e_squared():
    """Impact mode: each apex is e^2 times the previous to 1e-9; then the ball rests on the floor."""
    # Impact mode, bottom dropped from 1 m, e = 0.8, dt = 1 ms: each apex is e^2 times the previous (to 1e-9) down to 10
    # micrometres (below g dt^2 / 2 a whole flight can fit in two steps and its apex go unseen); then the ball comes to
    # rest on the floor and never sinks below it.
    traj = BouncingBall(horizon=5000, contact="impact", e=0.8, r=R, py=1.0 + R).rollout()
    peaks = np.concatenate([[1.0], peak_heights(traj["py"][0], traj["vy"][0])])
    peaks = peaks[peaks > 1e-5]
    assert len(peaks) >= 25
    np.testing.assert_allclose(peaks[1:] / peaks[:-1], 0.64, rtol=1e-9)
    bottom = traj["py"][0] - R
    assert bottom.min() >= 0.0
    assert np.all(bottom[-500:] == 0.0) and np.all(traj["vy"][0, -500:] == 0.0)


def non_adhesive_restitution(e):
    """Restitution of the spring-damper that pushes but never pulls (force max(0, k d + c d')), with the damping ratio
    zeta = -ln e / sqrt(pi^2 + ln^2 e) that restitution_damping gives: exp(-tan(phi) (pi - 2 phi)), phi = asin(zeta)
    (Schwager and Poeschel 2007, the linear dashpot without attraction). It exceeds e: 0.397 for e = 0.3, 0.808 for
    e = 0.8, because the contact ends when the force reaches zero, before the linear model's pulling phase."""
    zeta = -np.log(e) / np.sqrt(np.pi**2 + np.log(e) ** 2)
    phi = np.arcsin(zeta)
    return np.exp(-np.tan(phi) * (np.pi - 2 * phi))


def test_penalty_restitution_is_that_of_a_non_adhesive_spring_damper():
    """Penalty mode without gravity rebounds at the non-adhesive spring-damper's restitution, not e."""
    # g = 0, approaching the floor at 1 m/s, dt = 10 us: the rebound speed is non_adhesive_restitution(e) to 1e-3 (not e
    # itself: penalty_normal never pulls, so the contact returns more than the linear model it is tuned on).
    e = np.array([0.3, 0.5, 0.8, 0.95])
    traj = BouncingBall(horizon=5000, batch=4, dt=1e-5, g=0.0, e=e, mu=0.0, r=R, py=R + 2e-3, vy=-1.0).rollout()
    assert np.all(traj["py"][:, -1] > R)  # the contact is over
    np.testing.assert_allclose(traj["vy"][:, -1], non_adhesive_restitution(e), rtol=1e-3)
    assert traj["vy"][0, -1] > 1.3 * e[0]


def test_penalty_peak_heights_fall_by_about_e_squared():
    """Penalty mode: apex ratios are e_na^2 within 1% (high bounces) and e^2 within 2.5% (all > 5 cm)."""
    # Penalty mode, k = 1e5, dt = 0.1 ms, bottom dropped from 1 m, e = 0.8 and 0.9: the apex ratio of the bounces above
    # 20 cm is the non-adhesive e_na^2 within 1% (measured -0.4..0%; gravity during contact lowers the slower bounces),
    # and that of all bounces above 5 cm is e^2 within 2.5% (measured +0.5..+2.0% for e = 0.8, where e_na^2 / e^2 =
    # 1.020; +0.0..+0.5% for e = 0.9).
    e = np.array([0.8, 0.9])
    sim = BouncingBall(horizon=30_000, batch=2, dt=1e-4, e=e, r=R, py=1.0 + R)
    traj = sim.rollout()
    for b in range(2):
        peaks = np.concatenate([[1.0], peak_heights(traj["py"][b], traj["vy"][b])])
        high, low = peaks[peaks > 0.2], peaks[peaks > 0.05]
        assert len(high) >= 4 and len(low) >= 5
        np.testing.assert_allclose(high[1:] / high[:-1], non_adhesive_restitution(e[b]) ** 2, rtol=1e-2)
        ratio = low[1:] / low[:-1]
        np.testing.assert_allclose(ratio, e[b] ** 2, rtol=2.5e-2)
        assert np.all(ratio > e[b] ** 2)


def test_penalty_penetration_below_undamped_amplitude():
    """Penalty mode: the deepest penetration lies between 80% and 100% of v_impact sqrt(m / k)."""
    # The deepest penetration of the first impact stays below v_impact sqrt(m / k) (the undamped spring's amplitude) and
    # above 80% of it, for k from 1e4 to 1e6 and m of 0.5 and 2 kg (dt = 0.1 ms).
    k = np.array([1e4, 1e5, 1e6, 1e5])
    m = np.array([1.0, 0.5, 1.0, 2.0])
    traj = BouncingBall(horizon=6000, batch=4, dt=1e-4, k=k, m=m, r=R, py=1.0 + R).rollout()
    first_contact = slice(0, 5000)  # the drop takes 0.45 s, the contact < 0.05 s; the first apex is 0.5 s later
    depth = (R - traj["py"][:, first_contact]).max(axis=1)
    bound = np.sqrt(2 * G * 1.0) * np.sqrt(m / k)
    assert np.all(depth < bound), depth / bound
    assert np.all(depth > 0.8 * bound), depth / bound


def test_sliding_through_contact_friction_impulse_is_mu_times_normal_impulse():
    """Sliding through a bounce, the tangential impulse is mu times the normal impulse (to 1e-12)."""
    # Penalty mode, vx0 = 5 m/s (sliding throughout the bounce): the horizontal velocity drops by mu times the normal
    # impulse per unit mass, sum dt fn / m = delta vy + g t (to 1e-12).
    dt, steps = 1e-3, 600
    sim = BouncingBall(horizon=steps, dt=dt, vx=5.0, mu=0.5, r=R, py=1.0 + R)
    traj = sim.rollout()
    vx, vy = traj["vx"][0], traj["vy"][0]
    normal_impulse = vy[-1] - vy[0] + G * steps * dt
    assert normal_impulse > 7.0 and vx[-1] > 0.5
    assert vx[-1] - vx[0] == pytest.approx(-0.5 * normal_impulse, rel=1e-12)


def test_stiff_contact_friction_stops_without_reversing():
    """At the default dt, contact friction stops a slow slide exactly and never reverses it."""
    # Penalty mode at the default dt, where mu fn dt / (m eps) >> 1 during contact: a slow slide is stopped, never
    # reversed (vx ends exactly 0 for vx0 from 1 cm/s to 1 m/s, which the normal impulse can all absorb).
    vx0 = np.array([0.01, 0.2, 1.0])
    traj = BouncingBall(horizon=700, batch=3, vx=vx0, r=R, py=1.0 + R).rollout()
    assert np.all(traj["vx"] >= 0.0)
    np.testing.assert_allclose(traj["vx"][:, -1], 0.0, rtol=0, atol=1e-12)


def test_softness_makes_final_height_smooth_in_drop_height():
    """With softness > 0 the final height is smooth in the drop height; with the hard switch it is not."""
    # Final height after one bounce as a function of the drop height (101 heights over 1 cm): with softness 3 mm the
    # second differences are uniform (max < 2 x median) and 1e-4 times those of the hard switch, whose kinks and jumps
    # come from the whole steps spent in contact.
    heights = np.linspace(0.5, 0.51, 101)

    def second_differences(softness):
        sim = BouncingBall(horizon=600, batch=heights.size, softness=softness, mu=0.0, py=heights)
        return np.abs(np.diff(sim.rollout()["py"][:, -1], 2))

    soft, hard = second_differences(3e-3), second_differences(0.0)
    assert soft.max() < 2 * np.median(soft)
    assert soft.max() < 1e-4 * hard.max()


def test_gradcheck_free_flight():
    """Free flight: the backward pass matches float64 central differences to 1e-6 in all three groups."""
    # No contact (dt = 10 ms, T = 100, the ball stays above 5 m), random forces.
    steps = 100
    sim = BouncingBall(horizon=steps, batch=2, dt=1e-2, py=[8.0, 10.0], vx=[1.0, -0.5], vy=[3.0, 0.0])
    sim.set_actions(np.random.default_rng(4).uniform(-1.0, 1.0, size=(2, steps, 2)))
    assert sim.rollout()["py"].min() > 5.0
    loss = tisim.losses.TerminalTarget({name: 0.0 for name in STATES}) + 0.01 * tisim.losses.Effort()
    report = gradcheck_all_groups(sim, loss)
    assert set(report) == {"params", "initial_state", "actions"}
    assert report.worst <= 1e-6, str(report)


def test_gradcheck_soft_contact():
    """Soft penalty contact: the backward pass matches float64 central differences to 1e-4."""
    # Through a soft penalty bounce (softness 3 mm, dt = 1 ms, T = 600, sliding at 5 m/s so friction stays saturated),
    # and high above the floor (d / softness < -700, where the soft gate once overflowed to a NaN gradient). The
    # tolerance is set by the differences' truncation error in the stiff contact (measured 1e-6 to 1.1e-5 over ten
    # random pushes; the default step, as the larger one would add truncation error).
    steps = 600
    sim = BouncingBall(horizon=steps, batch=3, softness=3e-3, py=[0.5, 0.4, 3.0], vx=[5.0, -5.0, 1.0])
    sim.set_actions(np.random.default_rng(5).normal(size=(3, steps, 2)))
    traj = sim.rollout()
    assert np.all((R - traj["py"][:2]).max(axis=1) > 0)  # both bounce
    assert np.abs(traj["vx"][:2]).min() > 0.5 and traj["py"][2].min() > 1.0
    loss = tisim.losses.TerminalTarget({name: 0.0 for name in STATES})
    report = tisim.gradcheck(sim, loss, max_entries=20)
    assert report.worst <= 1e-4, str(report)


@pytest.mark.parametrize("kwargs, message", [
    (dict(e=1.5), r"e must be in \[0, 1\], got 1.5"),
    (dict(e=-0.1), r"e must be in \[0, 1\], got -0.1"),
    (dict(k=0.0), r"k must be in \(0, inf\), got 0"),
    (dict(k=-1e5), r"k must be in \(0, inf\), got -100000"),
    (dict(m=0.0), r"m must be in \(0, inf\), got 0"),
    (dict(m=-1.0), r"m must be in \(0, inf\), got -1"),
    (dict(mu=-0.5), r"mu must be in \[0, inf\), got -0.5"),
    (dict(softness=-1e-3), r"softness must be in \[0, inf\), got -0.001"),
    (dict(kappa=-1e-3), r"kappa must be in \[0, inf\), got -0.001"),
    (dict(contact="impulse"), r"contact must be one of \['penalty', 'impact', 'qp'\], got 'impulse'"),
])
def test_bad_input_names_the_parameter_and_interval(kwargs, message):
    """Out-of-range e, k, m, mu, softness and unknown contact modes raise ValueError naming what is allowed."""
    with pytest.raises(ValueError, match=message):
        BouncingBall(horizon=10, **kwargs)
