"""Interactive windows with Taichi's GGUI: a live picture, text and controls, for demos run with --gui.

The picture is one of ``tisim.viz``'s frames (the same drawings as the GIFs); GGUI shows it and draws the controls.
GGUI needs Vulkan (Debian: libvulkan1 and mesa-vulkan-drivers, which give a software renderer) and, for a window on
screen, a display (a desktop, or Xvfb: `xvfb-run -a python demos/...`). ``offscreen=True`` renders without a display,
for tests and screenshots. When something is missing, ``Window`` raises ``WindowUnavailable`` saying what and how
to get it; demos print that message instead of a traceback.

A window keeps its text inside its panels (``Panel.text`` wraps lines to the panel's width), closes on Esc, and
can stay up after a run with the final frame (``Window.linger``) until the user closes it.
"""
import ctypes.util
import os
import textwrap
import time

import numpy as np
import taichi as ti

from tisim.core import runtime

# GGUI draws its panels with Dear ImGui's built-in font (ProggyClean, 13 px high), in which every character is
# 7 px wide; a panel keeps 8 px of padding on each side and 14 px on the right for a scrollbar.
CHAR_WIDTH_PX, PANEL_PADDING_PX, SCROLLBAR_PX = 7, 8, 14
DONE = "done: press Esc or close the window"


class WindowUnavailable(RuntimeError):
    """No GGUI window can open here; the message says why and what to install."""


def picture_or_reason(make):
    """make() (which writes a picture and returns its path), or None where GGUI cannot draw here (no Vulkan for a 3D
    scene), with the reason printed: a demo's figures never wait on its pictures."""
    try:
        return make()
    except WindowUnavailable as why:
        print(f"no GIF: {why}")
        return None


def window_problem(offscreen=False):
    """Why no window can open here, or None. Checks the display (unless offscreen) and the Vulkan loader."""
    if not offscreen and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return "no display (DISPLAY is not set): run under a desktop or `xvfb-run -a`"
    if ctypes.util.find_library("vulkan") is None:
        return "no Vulkan loader: install libvulkan1 and mesa-vulkan-drivers (Debian) or a GPU driver"
    return None


class Window:
    """A GGUI window showing RGB pictures (H, W, 3) with text and controls.

    Use: ``while window.running: window.draw(picture); with window.panel("controls", ...) as p: p.slider_float(...);
    window.show()``. Keys pressed since the last show() are in ``window.keys()``.
    """

    def __init__(self, title, size=(640, 480), *, offscreen=False,
                 hint="Without --gui the demo writes its pictures to out/ instead."):
        problem = window_problem(offscreen)
        if problem:
            raise WindowUnavailable(f"{title}: cannot open a window: {problem}. {hint}")
        runtime.ensure_init()
        self.size, self.offscreen = tuple(size), offscreen
        try:
            self._window = ti.ui.Window(title, self.size, vsync=False, show_window=not offscreen)
        except Exception as error:  # GGUI reports a missing Vulkan device as a generic error
            raise WindowUnavailable(f"{title}: GGUI could not start ({error}); install libvulkan1 and "
                                    f"mesa-vulkan-drivers. {hint}") from None
        self._canvas = self._window.get_canvas()
        self._keys = []

    @property
    def running(self):
        return self._window.running

    def draw(self, picture):
        """Show an RGB picture (H, W, 3) uint8, scaled to the window (GGUI indexes (x, y) from the bottom left)."""
        image = np.ascontiguousarray(np.transpose(picture[::-1], (1, 0, 2)), dtype=np.float32) / 255.0
        ti.set_logging_level(ti.ERROR)  # GGUI's own copy kernel warns about f64 -> f32 under a float64 runtime
        self._canvas.set_image(image)
        ti.set_logging_level(ti.WARN)

    def panel(self, title, x, y, width, height):
        """A sub-window of controls at (x, y) with that size, all as fractions of the window; a context manager
        that gives a ``Panel``: GGUI's controls (slider_float, button, ...) and text wrapped to the panel's width."""
        return Panel(self._window.get_gui(), title, (x, y, width, height), width * self.size[0])

    def cursor(self):
        """The mouse position as fractions of the window (x right, y up), and whether the left button is down;
        offscreen there is no mouse: ((0, 0), False)."""
        if self.offscreen:
            return (0.0, 0.0), False
        x, y = self._window.get_cursor_pos()
        return (float(x), float(y)), bool(self._window.is_pressed(ti.ui.LMB))

    def keys(self):
        """Keys pressed since the last show(), as GGUI names them ("a", "Space", "Return", ...)."""
        return list(self._keys)

    def image(self):
        """The picture drawn this frame, uint8 (H, W, 3); call it before show(). GGUI's buffer holds the canvas
        without the controls (a screenshot of the screen, e.g. ImageMagick's `import -window root`, has both)."""
        buffer = self._window.get_image_buffer_as_numpy()  # (W, H, 4), floats in [0, 1], y up
        return (np.transpose(buffer[:, ::-1, :3], (1, 0, 2)) * 255).round().astype(np.uint8)

    def show(self):
        """Present the frame (on screen) and collect the keys pressed meanwhile; Escape closes the window."""
        self._keys = []
        if not self.offscreen:
            self._window.show()
            while self._window.get_event(ti.ui.PRESS):
                self._keys.append(self._window.event.key)
                if self._window.event.key == ti.ui.ESCAPE:
                    self._window.running = False

    def linger(self, frame, *, close_after=None, fps=30):
        """Keep the window up after a run: frame(k) draws frame k (picture and panels) until the user closes the
        window or presses Esc, or, when close_after is given, that many seconds have passed (for scripts and
        tests). At most fps frames a second: a picture that stays still costs little. Returns the frames shown."""
        start, k = time.perf_counter(), 0
        while self.running and (close_after is None or time.perf_counter() - start < close_after):
            began = time.perf_counter()
            frame(k)
            self.show()
            k += 1
            if self.offscreen:
                break
            time.sleep(max(0.0, 1.0 / fps - (time.perf_counter() - began)))
        return k


def wrap(line, columns):
    """A line of text as lines of at most ``columns`` characters, broken at spaces where it can be (a word longer
    than a line is broken inside); leading spaces (a table's alignment) are kept on the first line."""
    if len(line) <= columns:
        return [line]
    indent = len(line) - len(line.lstrip(" "))
    indent = indent if indent < columns // 2 else 0
    return textwrap.wrap(line, columns, initial_indent=" " * indent, subsequent_indent=" " * (indent + 2),
                         break_on_hyphens=False) or [""]


class Panel:
    """A panel of a Window (``window.panel(...)``): GGUI's controls, and ``text`` that wraps its lines to the
    panel's width so that nothing is cut off at its edge."""

    def __init__(self, gui, title, placement, width_px):
        self._gui, self._title, self._placement = gui, title, placement
        self.columns = max(8, int((width_px - 2 * PANEL_PADDING_PX - SCROLLBAR_PX) // CHAR_WIDTH_PX))

    def __enter__(self):
        self._gui.begin(self._title, *self._placement)
        return self

    def __exit__(self, *exc):
        self._gui.end()
        return False

    def text(self, line, color=None):
        """A line of text, wrapped to the panel's width; color: (r, g, b) in [0, 1], or None for the default."""
        for part in wrap(str(line), self.columns):
            self._gui.text(part, color)

    def __getattr__(self, name):  # slider_float, slider_int, button, checkbox, color_edit_3
        return getattr(self._gui, name)
