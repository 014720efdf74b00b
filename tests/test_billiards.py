"""Smoke test of demos/billiards.py: the optimized shot puts the target ball inside the goal circle."""
import importlib.util
import os

DEMO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "demos", "billiards.py")


def load():
    spec = importlib.util.spec_from_file_location("billiards", DEMO)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_billiards_shot_ends_inside_the_goal(tmp_path):
    """From a straight shot that misses by ~57 cm, the target ball ends within the 6 cm goal; the GIF is written."""
    r = load().main(["--out", str(tmp_path), "--short"])
    assert r["miss_before"] > 5 * r["goal_radius"]
    assert r["miss_after"] < r["goal_radius"] and r["miss_after"] < r["miss_before"]
    assert (tmp_path / "billiards.gif").stat().st_size > 0
