"""Interactive windows: clear messages without a display, offscreen rendering, and real windows on Xvfb: the final
frame stays up, panel text fits its panel, Esc closes, the explorer's axes stay put."""
import math
import os
import pathlib
import re
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
SCREEN_TOOLS = [tool for tool in ("Xvfb", "import", "xdotool") if shutil.which(tool) is None]
needs_vulkan = pytest.mark.skipif(VULKAN is not None, reason=f"GGUI cannot render here: {VULKAN}")
needs_screen = pytest.mark.skipif(VULKAN is not None or bool(SCREEN_TOOLS),
                                  reason=f"needs Vulkan, Xvfb, ImageMagick and xdotool (.ci/run installs them); "
                                         f"missing: {SCREEN_TOOLS or VULKAN}")
ORANGE = np.array([230, 140, 40])  # adjoint_explorer's lambda bars
WINDOW_AT = (100, 100)  # where GGUI puts a window on a screen without a window manager: column, row [px]


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


def test_without_a_display_the_demo_says_why(monkeypatch, capsys):
    """--gui without a display prints what is missing and exits with status 2, not a traceback; the explorer, which
    has no --gui flag, points to its --offscreen instead."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    run = subprocess.run([sys.executable, str(ROOT / "demos" / "cartpole_opt.py"), "--gui"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "cannot open a window: no display" in run.stderr and "Traceback" not in run.stderr
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(WindowUnavailable, match="no display"):
        Window("test", (64, 48))
    assert load_demo("adjoint_explorer").main([]) == 2
    said = capsys.readouterr().err
    assert "cannot open a window: no display" in said and "--offscreen" in said and "--gui" not in said, said


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


def test_panel_text_wraps_to_the_panel_width():
    """A line too long for its panel becomes several, each within the panel's width in ImGui's 7 px characters,
    with every word kept; a short line stays as it is."""
    from tisim.viz.gui import CHAR_WIDTH_PX, Panel, wrap

    panel = Panel(None, "test", (0, 0, 0.5, 0.2), 400)
    assert panel.columns * CHAR_WIDTH_PX <= 400 - 16 - 14 < (panel.columns + 1) * CHAR_WIDTH_PX
    line = "drag from the cue ball and release to shoot; O: optimize from this shot; Esc: close the window"
    parts = wrap(line, panel.columns)
    assert len(parts) == 2 and all(len(part) <= panel.columns for part in parts), parts
    assert " ".join(part.strip() for part in parts) == line
    assert wrap("  t      x_t   lambda_t", panel.columns) == ["  t      x_t   lambda_t"]


def test_cartpole_live_view_names_each_stage():
    """The cart-pole window's panel names the stage that runs: when the second stage's optimizer starts counting
    from 1 again, the panel says stage 2 of 2 and where stage 1 ended, instead of an iteration count that jumps
    back unexplained."""
    cartpole = load_demo("cartpole_opt")

    class Recorder:  # a window that keeps the panel's lines
        running, size, frames = True, (80, 56), []

        def draw(self, picture):
            self.frames.append([])

        def panel(self, *placement):
            recorder = self

            class Lines:
                def __enter__(self):
                    return self

                def __exit__(self, *exc):
                    return False

                def text(self, line):
                    recorder.frames[-1].append(line)
            return Lines()

        def show(self):
            pass

    window, sim = Recorder(), tisim.systems.Cartpole(horizon=4, theta=np.pi)
    view = cartpole.LiveView(window, sim, (3, 2), every=1)
    for iteration, loss in ((1, 9.0), (2, 8.0), (3, 7.0), (1, 6.0), (2, 5.0)):
        assert view(iteration, {}, loss) is False
    first, second = window.frames[0][0], window.frames[3]
    assert first.startswith("stage 1 of 2") and "iteration 1 of 3" in first, first
    assert second[0].startswith("stage 2 of 2") and "iteration 1 of 2" in second[0], second
    assert "stage 1 ended after 3 iterations at loss 7.00" in second, second
    window.running = False
    assert view(3, {}, 4.0) is True  # a closed window stops the optimization


def start_xvfb():
    """An Xvfb server on a display it picks itself, returned once it accepts connections: `-displayfd` writes the
    number only when the server is ready (a fixed number could collide with a display left over, and a client
    started at once could find no server yet)."""
    xvfb = subprocess.Popen(["Xvfb", "-displayfd", "1", "-screen", "0", "1000x700x24"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    number = xvfb.stdout.readline().strip()
    if not number.isdigit():
        xvfb.kill()
        pytest.fail(f"Xvfb did not start (exit code {xvfb.wait()})")
    return xvfb, ":" + number


class OnScreen:
    """A demo running in its own process on a fresh Xvfb display, with screenshots (ImageMagick's `import`) and
    keys and clicks (xdotool) sent to its window."""

    def __init__(self, tmp_path, demo, *args):
        self.xvfb, self.display = start_xvfb()
        self.env = dict(os.environ, DISPLAY=self.display)
        self.log_path, self.shot_path = tmp_path / f"{demo}.log", tmp_path / f"{demo}.png"
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen([sys.executable, str(ROOT / "demos" / f"{demo}.py"), *args], env=self.env,
                                        stdout=self.log, stderr=subprocess.STDOUT, cwd=tmp_path)

    def said(self):
        return self.log_path.read_text()

    def shot(self):
        """The whole screen (700, 1000, 3) uint8, or None where no picture came (then self.seen says why)."""
        grab = subprocess.run(["import", "-display", self.display, "-window", "root", str(self.shot_path)],
                              capture_output=True, text=True)
        if grab.returncode:
            self.seen = f"import failed: {grab.stderr.strip()[-300:]}"
            return None
        screen = iio.imread(self.shot_path)
        if screen.ndim == 2:  # ImageMagick writes an all-black screen as grey levels
            return np.repeat(screen[..., None], 3, axis=2)
        return screen[..., :3]

    def wait_for(self, look, seconds, what):
        """Screenshots until look(screen) is true; the screen. Fails saying what was awaited and last seen."""
        deadline, self.seen = time.time() + seconds, "no screenshot taken"
        while time.time() < deadline:
            if self.process.poll() is not None:
                break
            screen = self.shot()
            if screen is not None and look(screen):
                return screen
            time.sleep(0.3)
        pytest.fail(f"{what} did not appear within {seconds} s (last look: {self.seen}; the demo "
                    f"{'exited with ' + str(self.process.poll()) if self.process.poll() is not None else 'ran on'}; "
                    f"it printed:\n{self.said()[-1500:]})")

    def xdotool(self, *args):
        subprocess.run(["xdotool", *args], env=self.env, check=True, capture_output=True, timeout=10)

    def press_escape(self):
        """Esc to the window under the mouse (with no window manager, the keyboard follows the pointer)."""
        self.xdotool("mousemove", str(WINDOW_AT[0] + 200), str(WINDOW_AT[1] + 300))
        time.sleep(0.2)
        self.xdotool("key", "Escape")

    def ended_within(self, seconds):
        try:
            return self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None

    def close(self):
        self.process.kill()
        self.process.wait()
        self.xvfb.kill()
        self.xvfb.wait()
        self.log.close()


@pytest.fixture
def on_screen(tmp_path):
    started = []

    def start(demo, *args):
        started.append(OnScreen(tmp_path, demo, *args))
        return started[-1]

    yield start
    for demo in started:
        demo.close()


def window_area(size):
    """Rows and columns of the screen that a window of size (width, height) covers."""
    return slice(WINDOW_AT[1], WINDOW_AT[1] + size[1]), slice(WINDOW_AT[0], WINDOW_AT[0] + size[0])


def panel_box(screen, size, placement, grow=6):
    """The panel's rectangle on the screen (left, top, right, bottom) [px, right and bottom exclusive]: the dark
    region near where the demo places it (placement: x, y, width, height as fractions of the window)."""
    x, y, w, h = placement
    left, top = WINDOW_AT[0] + round(x * size[0]) - grow, WINDOW_AT[1] + round(y * size[1]) - grow
    right, bottom = WINDOW_AT[0] + round((x + w) * size[0]) + grow, WINDOW_AT[1] + round((y + h) * size[1]) + grow
    area = screen[top:bottom, left:right].astype(int).sum(axis=2)
    dark = (area > 20) & (area < 250)  # ImGui's panel greys and blues, not the screen's black outside the window
    rows, columns = np.nonzero(dark.mean(axis=1) > 0.5)[0], np.nonzero(dark.mean(axis=0) > 0.5)[0]
    assert len(rows) > 40 and len(columns) > 100, f"no panel near {placement} of the window"
    return left + columns[0], top + rows[0], left + columns[-1] + 1, top + rows[-1] + 1


def text_overflow(screen, box):
    """(margin, scrollbar): how far [px] the rightmost text pixel (light grey, as ImGui writes) stays from the
    panel's right edge, and how many pixels of a scrollbar's grab show along that edge. ImGui clips a line that is
    too long near the panel's edge, so a clipped line leaves a margin of 9 px or less (measured: 9 in the explorer,
    4 in the billiards panel); text wrapped to fit (tisim.gui's Panel keeps 8 px padding and 14 px for a scrollbar)
    leaves more than 20. Text too long for the panel's height brings a scrollbar instead."""
    left, top, right, bottom = box
    area = screen[top:bottom, left:right].astype(int)
    grey = (area.max(axis=2) - area.min(axis=2)) <= 30
    columns = np.nonzero((grey & (area.min(axis=2) >= 150)).any(axis=0))[0]
    assert len(columns), "no text in the panel"
    band = area[20:-14, -16:-1]  # below the title bar, above the resize grip
    grab = (band.max(axis=2) - band.min(axis=2) <= 6) & (band.min(axis=2) >= 70) & (band.max(axis=2) <= 140)
    return int(right - 1 - (left + columns[-1])), int(grab.sum())


def assert_text_fits(screen, size, placement):
    margin, scrollbar = text_overflow(screen, panel_box(screen, size, placement))
    assert margin >= 14 and scrollbar == 0, (f"panel text cut off: the rightmost text is {margin} px from the "
                                             f"panel's edge (a clipped line leaves 9 or less), {scrollbar} "
                                             "scrollbar pixels")
    return margin


def colour_mask(picture, color, tolerance=30):
    return np.abs(picture.astype(int) - np.asarray(color)).sum(axis=2) < tolerance


def dark_grey(picture):
    """Pixels of the plots' ink (axes, ticks, labels) and its anti-aliased edges: dark and without hue."""
    picture = picture.astype(int)
    return (picture.max(axis=2) < 130) & (picture.max(axis=2) - picture.min(axis=2) <= 12)


@needs_screen
def test_cartpole_window_stays_up_on_its_final_frame_until_esc(on_screen):
    """After the optimization the cart-pole window replays the result and stays on its final frame: a screenshot
    after the run ended shows the window (not a closed, black screen) with the pole at the final angle the demo
    printed (measured from the pole's pixels to within 0.05 rad), the panel's text inside the panel; Esc closes it
    and the demo exits with status 0."""
    cartpole = load_demo("cartpole_opt")
    size, rows_columns = cartpole.SIZE, window_area(cartpole.SIZE)
    demo = on_screen("cartpole_opt", "--gui", "--iterations", "30,10", "--batch", "2", "--out", ".",
                     "--close-after", "60")
    deadline = time.time() + 60
    while "stays on its final frame" not in demo.said() and demo.process.poll() is None and time.time() < deadline:
        time.sleep(0.3)
    said = demo.said()
    assert "stays on its final frame" in said, f"the run did not end with the window up; it printed:\n{said[-1500:]}"
    last = [None]

    def still(screen):  # the replay is over when two screenshots in a row agree
        window = screen[rows_columns]
        same = last[0] is not None and np.array_equal(window, last[0])
        last[0] = window
        return same

    screen = demo.wait_for(still, 20, "a still final frame")
    window = screen[rows_columns].astype(int)
    white = (window.min(axis=2) >= 250).mean()
    pole, hinge = colour_mask(window, tisim.viz.raster.POLE), colour_mask(window, tisim.viz.raster.HINGE)
    assert white > 0.5 and pole.sum() > 300 and hinge.sum() > 10, (white, pole.sum(), hinge.sum())
    (hinge_row, hinge_column), (pole_row, pole_column) = np.argwhere(hinge).mean(0), np.argwhere(pole).mean(0)
    seen = math.atan2(pole_column - hinge_column, hinge_row - pole_row)  # theta from upright, leaning right > 0
    printed = float(re.search(r"final angle from upright ([-+0-9.]+) rad", said).group(1))
    assert abs(math.remainder(seen - printed, 2 * math.pi)) < 0.05, (seen, printed)
    margin = assert_text_fits(screen, size, cartpole.PANEL)
    demo.press_escape()
    assert demo.ended_within(10) == 0, f"Esc did not close the window; the demo printed:\n{demo.said()[-1500:]}"
    print(f"final frame: {white:.0%} white, {pole.sum()} pole pixels at {seen:+.3f} rad (printed {printed:+.4f}); "
          f"text {margin} px from the panel's edge")


@needs_screen
def test_explorer_axes_stay_put_when_a_slider_moves(on_screen):
    """The adjoint explorer on Xvfb shows the lambda bars and its controls; its panel text fits the panel; a click
    on the theta slider redraws the data (the blue line moves) while the axes, ticks and labels keep their pixels
    (at least 97% of the dark axis pixels stay dark), and Esc closes the window."""
    explorer = load_demo("adjoint_explorer")
    size = explorer.SIZE
    rows, _ = window_area(size)
    plot = (rows, slice(WINDOW_AT[0], WINDOW_AT[0] + explorer.PLOT_WIDTH))
    demo = on_screen("adjoint_explorer", "--steps", "9", "--close-after", "60")

    def ready(screen):
        bars = colour_mask(screen, ORANGE).sum()
        panel = (screen.sum(axis=2) < 120).sum() - (screen.sum(axis=2) == 0).sum()  # dark grey, not black
        demo.seen = f"{bars} bar pixels, {panel} panel pixels"
        return bars > 500 and panel > 5000

    before = demo.wait_for(ready, 60, "a frame with the lambda bars and the control panel")
    margin = assert_text_fits(before, size, explorer.PANEL)
    left, top, right, _ = panel_box(before, size, explorer.PANEL)
    # the theta slider: the panel's second row of controls, below the title bar (19 px), padding (8) and the a
    # slider (19 + 4 spacing); a click a third of the way along sets theta near -0.5
    demo.xdotool("mousemove", str(left + 8 + 80), str(top + 19 + 8 + 23 + 9), "click", "1")
    blue_before = colour_mask(before[plot], explorer.X_COLOR)

    def moved(screen):
        blue = colour_mask(screen[plot], explorer.X_COLOR)
        overlap = (blue & blue_before).sum() / max(blue.sum(), 1)
        demo.seen = f"{overlap:.0%} of the blue line where it was"
        return blue.sum() > 300 and overlap < 0.5

    after = demo.wait_for(moved, 15, "a redrawn plot after a click on the theta slider")
    ink_before, ink_after = dark_grey(before[plot]), dark_grey(after[plot])
    kept = (ink_before & ink_after).sum() / ink_before.sum()
    axis_column = ink_before.sum(axis=0).max()  # the vertical axis: one column dark most of the plot's height
    assert axis_column > 300 and kept > 0.97, (axis_column, kept)
    demo.press_escape()
    assert demo.ended_within(10) == 0, f"Esc did not close the window; the demo printed:\n{demo.said()[-1500:]}"
    print(f"axes: {kept:.1%} of {ink_before.sum()} axis pixels kept, vertical axis {axis_column} px; "
          f"text {margin} px from the panel's edge")


@needs_screen
def test_billiards_window_shows_the_optimizer_at_work(on_screen):
    """With a scripted shot on Xvfb the billiards window shows the optimizer's current aim as a line from the cue
    ball while it runs, then the optimized shot; the panel's text fits at both moments, and Esc closes the window."""
    billiards = load_demo("billiards")
    size, rows_columns = billiards.SIZE, window_area(billiards.SIZE)
    demo = on_screen("billiards", "--gui", "--aim", "1.45,0.2", "--close-after", "60")

    def aiming(screen):
        line = colour_mask(screen[rows_columns], billiards.AIM_COLOR).sum()
        panel = (screen.sum(axis=2) < 120).sum() - (screen.sum(axis=2) == 0).sum()  # dark grey, not black
        demo.seen = f"{line} aim line pixels, {panel} panel pixels"
        return line > 100 and panel > 5000

    during = demo.wait_for(aiming, 60, "the optimizer's aim line")
    margins = [assert_text_fits(during, size, billiards.PANEL)]
    last = [None]

    def at_rest(screen):
        window = screen[rows_columns]
        same = last[0] is not None and np.array_equal(window, last[0])
        last[0] = window
        demo.seen = f"{colour_mask(window, billiards.AIM_COLOR).sum()} aim line pixels"
        return same and colour_mask(window, billiards.AIM_COLOR).sum() == 0

    after = demo.wait_for(at_rest, 40, "a still frame of the optimized shot")
    margins.append(assert_text_fits(after, size, billiards.PANEL))
    demo.press_escape()
    assert demo.ended_within(10) == 0, f"Esc did not close the window; the demo printed:\n{demo.said()[-1500:]}"
    print(f"text {margins} px from the panel's edge")


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
