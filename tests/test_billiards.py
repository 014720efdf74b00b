"""Smoke test of demos/billiards.py: the optimized shot puts the target ball inside the goal circle."""
import pytest

from conftest import load_demo


@pytest.mark.perturbed
@pytest.mark.parametrize("contact", ["penalty", "qp"])
def test_billiards_shot_ends_inside_the_goal(tmp_path, contact):
    """From a straight shot that misses by ~57 cm, the target ball ends within the 6 cm goal, with penalty contact
    and with QP contact (measured 0.85 cm); the GIF is written."""
    r = load_demo("billiards").main(["--out", str(tmp_path), "--short", "--contact", contact])
    assert r["contact"] == contact
    assert r["miss_before"] > 5 * r["goal_radius"]
    assert r["miss_after"] < r["goal_radius"] and r["miss_after"] < r["miss_before"]
    assert (tmp_path / "billiards.gif").stat().st_size > 0
