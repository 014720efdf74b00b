# The adjoint, one step at a time, in a window.
#
# x[t+1] = a x[t] + theta over T = 8 steps from x[0] = 0, loss (x_T - 2)^2. Sliders set a and theta and the forward
# trajectory (blue) redraws. "step back" (or Space) walks the backward sweep from t = T down to 0: each press reveals
# lambda_t = dL/dx_t (orange bar) and folds it into dL/dtheta = lambda_1 + ... + lambda_T. At the end the accumulated
# value stands beside a central finite difference. "reset" (or r) starts the sweep again. The plot's axes keep one
# scale, -10..10, whatever the sliders say (values beyond it end in an arrow at the edge). Esc closes the window.
#
# Command: python demos/adjoint_explorer.py            (needs a display and Vulkan; see tisim/viz/gui.py)
#          python demos/adjoint_explorer.py --offscreen --steps 9 --screenshot out/adjoint_explorer.png
import argparse
import pathlib
import sys
import time

import imageio.v3 as iio
import numpy as np

import tisim
from tisim import viz
from tisim.gui import Window, WindowUnavailable

HORIZON, TARGET = 8, 2.0
X_COLOR, LAMBDA_COLOR, TARGET_COLOR = (60, 110, 190), (230, 140, 40), (150, 150, 150)
GRID_COLOR = (228, 228, 232)
Y_RANGE, Y_TICKS = (-10.0, 10.0), (-10, -5, 0, 5, 10)  # the plot's fixed vertical scale
MARGINS = dict(left=52, right=14, top=40, bottom=42)  # [px] around the plot: tick labels, legend, axis label
SIZE, PLOT_WIDTH = (900, 480), 540  # the window and its plot on the left [px]
PANEL = (0.60, 0.02, 0.38, 0.96)  # the controls' panel on the right: x, y, width, height as fractions of the window


class AdjointSweep:
    """The backward sweep of x[t+1] = a x[t] + theta, revealed one lambda_t per step()."""

    def __init__(self, sim, a, theta):
        self.a, self.theta = a, theta
        sim.set_params(a=a, theta=theta)
        loss = tisim.losses.TerminalTarget({"x": TARGET})
        g = sim.gradient(loss)
        self.x, self.lam, self.loss = sim.rollout()["x"][0], g.adjoint["x"][0], g.value
        self.backward_dtheta = float(g.params["theta"][0])
        h = 1e-6
        sim.set_params(theta=theta + h)
        up = sim.evaluate(loss)[0]
        sim.set_params(theta=theta - h)
        down = sim.evaluate(loss)[0]
        sim.set_params(theta=theta)
        self.finite_difference = float((up - down) / (2 * h))
        self.next_t, self.running = len(self.x) - 1, 0.0

    @property
    def done(self):
        return self.next_t < 0

    def step(self):
        """Reveal lambda at the next step back; theta drives steps 1..T, so lambda_t (t >= 1) joins dL/dtheta."""
        if self.done:
            return None
        t = self.next_t
        if t >= 1:
            self.running += self.lam[t]
        self.next_t -= 1
        return t

    def lines(self):
        T = len(self.x) - 1
        out = [f"L = (x_T - {TARGET:g})^2 = {self.loss:.6f}", "  t      x_t   lambda_t"]
        for t in range(T, -1, -1):
            shown = f"{self.lam[t]:10.5f}" if t > self.next_t else "         ?"
            out.append(f"{t:3d} {self.x[t]:8.4f} {shown}")
        out.append(f"dL/dtheta so far (sum of lambda_t, t >= 1): {self.running:.6f}")
        if self.done:
            out += [f"backward pass dL/dtheta:   {self.backward_dtheta:.6f}",
                    f"central difference:        {self.finite_difference:.6f}"]
        return out


def plot_area(size):
    """The plot's rectangle in pixels, (left, right, bottom, top), measured from the picture's bottom left."""
    return MARGINS["left"], size[0] - MARGINS["right"], MARGINS["bottom"], size[1] - MARGINS["top"]


def picture(sweep, size=(500, 400)):
    """x_t as a line with dots; the revealed lambda_t as bars; the target as a grey line (y = 2); axes with ticks
    on a fixed scale (t from 0 to T across, Y_RANGE up), so moving a slider moves the data, never the axes."""
    T = len(sweep.x) - 1
    left, right, bottom, top = plot_area(size)
    low, high = Y_RANGE

    def at(t, y):  # data to pixels (x right, y up)
        return (left + (t + 0.6) / (T + 1.2) * (right - left), bottom + (y - low) / (high - low) * (top - bottom))

    def inside(y):
        return min(max(y, low), high)

    def off_scale(t, y, color):  # an arrow at the edge the value went past
        if low <= y <= high:
            return
        (u, v), sign = at(t, inside(y)), 1.0 if y > high else -1.0
        canvas.polygon([(u - 6, v - sign * 2), (u + 6, v - sign * 2), (u, v + sign * 8)], color)

    canvas = viz.Canvas(*size, bounds=(0, size[0], 0, size[1]))  # one world unit a pixel
    for y in Y_TICKS:
        canvas.line((left, at(0, y)[1]), (right, at(0, y)[1]), 1.0, GRID_COLOR)
    canvas.line(at(-0.6, TARGET), at(T + 0.6, TARGET), 1.0, TARGET_COLOR)
    canvas.line(at(-0.6, 0.0), at(T + 0.6, 0.0), 1.0, viz.INK)
    for t in range(T + 1):
        if t > sweep.next_t and abs(sweep.lam[t]) > 1e-12:
            (u0, v0), (u1, v1) = at(t + 0.05, 0.0), at(t + 0.35, inside(sweep.lam[t]))
            canvas.rectangle((0.5 * (u0 + u1), 0.5 * (v0 + v1)), (u1 - u0, abs(v1 - v0)), 0.0, LAMBDA_COLOR)
            off_scale(t + 0.2, sweep.lam[t], LAMBDA_COLOR)
    for t in range(T):
        canvas.line(at(t, inside(sweep.x[t])), at(t + 1, inside(sweep.x[t + 1])), 2.5, X_COLOR)
    for t in range(T + 1):
        canvas.circle(at(t, inside(sweep.x[t])), 3.5, X_COLOR)
        off_scale(t, sweep.x[t], X_COLOR)
    canvas.line((left, bottom), (right, bottom), 1.5, viz.INK)  # the axes, over everything
    canvas.line((left, bottom), (left, top), 1.5, viz.INK)
    for t in range(T + 1):
        canvas.line((at(t, 0)[0], bottom), (at(t, 0)[0], bottom - 5), 1.5, viz.INK)
    for y in Y_TICKS:
        canvas.line((left, at(0, y)[1]), (left - 5, at(0, y)[1]), 1.5, viz.INK)
    image = canvas.image()
    height = size[1]
    for t in range(T + 1):
        viz.write(image, str(t), (at(t, 0)[0], height - bottom + 7), viz.INK, anchor="centre", box=False)
    viz.write(image, "t (step)", (0.5 * (left + right), height - bottom + 23), viz.INK, anchor="centre", box=False)
    for y in Y_TICKS:
        label = f"{y:g}"
        width = viz.text_mask(label).shape[1]
        viz.write(image, label, (left - 9 - width, height - at(0, y)[1] - 7), viz.INK, box=False)
    column = left
    for words, color in (("x_t", X_COLOR), ("lambda_t = dL/dx_t", LAMBDA_COLOR), (f"target {TARGET:g}", TARGET_COLOR)):
        image[12:24, column:column + 14] = color
        viz.write(image, words, (column + 19, 10), viz.INK, box=False)
        column += 19 + viz.text_mask(words).shape[1] + 18
    return image


def main(argv=None):
    parser = argparse.ArgumentParser(description=(
        "A window to step backward through the discrete adjoint of x[t+1] = a x[t] + theta, one step at a time, "
        "with sliders for a and theta (needs a display and Vulkan, or --offscreen)."))
    parser.add_argument("--offscreen", action="store_true", help="render without a display (for scripts and tests)")
    parser.add_argument("--steps", type=int, default=0, help="press 'step back' this many times at the start")
    parser.add_argument("--frames", type=int, default=None, help="stop after this many frames (offscreen: 1)")
    parser.add_argument("--screenshot", default=None, help="save the last frame as a PNG here")
    parser.add_argument("--close-after", type=float, default=None, metavar="SECONDS",
                        help="close the window this many seconds after it opens (for scripts and tests; default: it "
                             "stays until you press Esc or close it)")
    args = parser.parse_args(argv)
    try:
        window = Window("tisim: the adjoint, one step at a time", SIZE, offscreen=args.offscreen,
                        hint="With --offscreen the demo renders without a display; add --screenshot FILE to save "
                             "the picture.")
    except WindowUnavailable as error:
        print(error, file=sys.stderr)
        return 2
    sim = tisim.systems.ScalarLinear(horizon=HORIZON)
    sweep = AdjointSweep(sim, 0.9, 1.0)
    for _ in range(args.steps):
        sweep.step()
    frames = args.frames if args.frames is not None else (3 if args.offscreen else None)  # the panel lays out late
    frame, opened = 0, time.perf_counter()
    page = np.full((SIZE[1], SIZE[0], 3), 255, np.uint8)  # the plot on the left, the controls' panel on the right
    while window.running and (frames is None or frame < frames) and \
            (args.close_after is None or time.perf_counter() - opened < args.close_after):
        page[:, :PLOT_WIDTH] = picture(sweep, (PLOT_WIDTH, SIZE[1]))
        window.draw(page)
        with window.panel("adjoint", *PANEL) as panel:
            a = panel.slider_float("a", sweep.a, 0.0, 1.5)
            theta = panel.slider_float("theta", sweep.theta, -2.0, 2.0)
            step, reset = panel.button("step back"), panel.button("reset")
            panel.text(f"next 'step back' (or Space) reveals lambda_{sweep.next_t}" if not sweep.done else
                       "backward sweep done: 'reset' or r starts again")
            for line in sweep.lines():
                panel.text(line)
            panel.text("Esc closes the window")
        keys = window.keys()
        moved = abs(a - sweep.a) > 1e-6 or abs(theta - sweep.theta) > 1e-6  # sliders hold float32
        if moved or reset or "r" in keys:
            sweep = AdjointSweep(sim, a, theta)
        elif step or " " in keys or "Space" in keys:
            sweep.step()
        frame += 1
        if args.screenshot and frame == frames:
            path = pathlib.Path(args.screenshot)
            path.parent.mkdir(parents=True, exist_ok=True)
            iio.imwrite(path, window.image())
        window.show()
    return sweep


if __name__ == "__main__":
    result = main()
    sys.exit(result if isinstance(result, int) else 0)
