"""Interactive windows: clear messages without a display, offscreen rendering, and a real window on Xvfb."""
import os
import pathlib
import shutil
import subprocess
import sys
import time

import imageio.v3 as iio
import numpy as np
import pytest

import tisim
from tisim.gui import Window, WindowUnavailable, window_problem

from conftest import load_demo

ROOT = pathlib.Path(__file__).resolve().parent.parent
VULKAN = window_problem(offscreen=True)
SCREEN_TOOLS = [tool for tool in ("Xvfb", "import") if shutil.which(tool) is None]
needs_vulkan = pytest.mark.skipif(VULKAN is not None, reason=f"GGUI cannot render here: {VULKAN}")
needs_screen = pytest.mark.skipif(VULKAN is not None or bool(SCREEN_TOOLS),
                                  reason=f"needs Vulkan, Xvfb and ImageMagick (.ci/run installs them); "
                                         f"missing: {SCREEN_TOOLS or VULKAN}")
ORANGE = np.array([230, 140, 40])  # adjoint_explorer's lambda bars


def test_adjoint_sweep_steps_through_the_worked_example():
    """The explorer's backward sweep reveals lambda_3..lambda_0 and folds them into dL/dtheta = 3.8482."""
    explorer = load_demo("adjoint_explorer")
    sweep = explorer.AdjointSweep(tisim.systems.ScalarLinear(horizon=3), 0.9, 1.0)
    revealed = []
    while not sweep.done:
        t = sweep.step()
        revealed.append((t, sweep.lam[t], sweep.running))
    expected = [(3, 1.42, 1.42), (2, 1.278, 2.698), (1, 1.1502, 3.8482), (0, 1.03518, 3.8482)]
    for (t, lam, running), (t0, lam0, running0) in zip(revealed, expected):
        assert t == t0 and abs(lam - lam0) < 1e-12 and abs(running - running0) < 1e-12
    assert abs(sweep.finite_difference - 3.8482) < 1e-6 and sweep.step() is None
    assert any("central difference" in line for line in sweep.lines())


def test_without_a_display_the_demo_says_why(monkeypatch):
    """--gui without a display prints what is missing and exits with status 2, not a traceback."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    run = subprocess.run([sys.executable, str(ROOT / "demos" / "cartpole_opt.py"), "--gui"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "cannot open a window: no display" in run.stderr and "Traceback" not in run.stderr
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(WindowUnavailable, match="no display"):
        Window("test", (64, 48))


@needs_vulkan
def test_offscreen_window_shows_the_picture():
    """An offscreen GGUI window renders the picture it is given, pixel for pixel."""
    picture = np.full((48, 64, 3), 255, np.uint8)
    picture[:24, :32] = (200, 60, 50)  # top left red
    picture[30:, 40:] = (60, 110, 190)  # bottom right blue
    window = Window("test", (64, 48), offscreen=True)
    window.draw(picture)
    shown = window.image()
    assert shown.shape == picture.shape
    assert np.abs(shown.astype(int) - picture).max() <= 2


def start_xvfb():
    """An Xvfb server on a display it picks itself, returned once it accepts connections: `-displayfd` writes the
    number only when the server is ready (a fixed number could collide with a display left over, and a client
    started at once could find no server yet)."""
    xvfb = subprocess.Popen(["Xvfb", "-displayfd", "1", "-screen", "0", "1000x600x24"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    number = xvfb.stdout.readline().strip()
    if not number.isdigit():
        xvfb.kill()
        pytest.fail(f"Xvfb did not start (exit code {xvfb.wait()})")
    return xvfb, ":" + number


@needs_screen
def test_explorer_window_on_a_virtual_display(tmp_path):
    """The adjoint explorer opens a real window on Xvfb; a screenshot shows the lambda bars and the controls."""
    xvfb, display = start_xvfb()
    env = dict(os.environ, DISPLAY=display)
    log = open(tmp_path / "demo.log", "w")
    demo = subprocess.Popen([sys.executable, str(ROOT / "demos" / "adjoint_explorer.py"), "--steps", "9"], env=env,
                            stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    shot, found, seen = tmp_path / "screen.png", None, "no screenshot taken"
    try:
        deadline = time.time() + 90
        while time.time() < deadline and demo.poll() is None:
            time.sleep(1.0)
            grab = subprocess.run(["import", "-display", display, "-window", "root", str(shot)], capture_output=True,
                                  text=True)
            if grab.returncode:
                seen = f"import failed: {grab.stderr.strip()[-300:]}"
                continue
            screen = iio.imread(shot).astype(int)
            if screen.ndim == 2:  # ImageMagick writes an all-black screen as grey levels
                seen = "an all-black screen"
                continue
            screen = screen[..., :3]
            bars = (np.abs(screen - ORANGE).sum(axis=2) < 30).sum()
            panel = (screen.sum(axis=2) < 120).sum() - (screen.sum(axis=2) == 0).sum()  # dark grey, not black
            seen = f"{bars} bar pixels, {panel} panel pixels"
            if bars > 500 and panel > 5000:
                found = (bars, panel)
                break
    finally:
        ended = demo.poll()
        demo.kill()
        xvfb.kill()
        log.close()
    said = (tmp_path / "demo.log").read_text()[-1500:]
    assert found, (f"no frame with the lambda bars and the control panel appeared within 90 s (last look: {seen}; "
                   f"the demo {'exited with ' + str(ended) if ended is not None else 'was still running'}; it "
                   f"printed:\n{said})")


@pytest.mark.perturbed
@needs_vulkan
def test_billiards_window_shoots_and_optimizes_offscreen():
    """The billiards window takes a shot, optimizes from it on O, and ends with the target ball in the goal."""
    result = load_demo("billiards").main(["--gui", "--offscreen", "--aim", "1.45,0.2"])  # at the target ball
    assert result["miss"] < result["goal_radius"]


@needs_vulkan
def test_mpm_walker_replays_its_best_gait_offscreen(tmp_path, monkeypatch):
    """With --gui the walker replays its best gait in a window; offscreen, once. Without a display it says so and
    exits with status 2 before any optimization."""
    walker = load_demo("mpm_walker")
    r = walker.main(["--iterations", "1", "--horizon", "100", "--starts", "1", "--gui", "--offscreen", "--out",
                     str(tmp_path)])
    assert r["replays"] == 1
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert walker.main(["--gui", "--out", str(tmp_path)]) == 2
