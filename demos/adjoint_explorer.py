# The adjoint, one step at a time, in a window.
#
# x[t+1] = a x[t] + theta over T = 8 steps from x[0] = 0, loss (x_T - 2)^2. Sliders set a and theta and the forward
# trajectory (blue) redraws. "step back" (or Space) walks the backward sweep from t = T down to 0: each press reveals
# lambda_t = dL/dx_t (orange bar) and folds it into dL/dtheta = lambda_1 + ... + lambda_T. At the end the accumulated
# value stands beside a central finite difference. "reset" (or r) starts the sweep again.
#
# Command: python demos/adjoint_explorer.py            (needs a display and Vulkan; see tisim/viz/gui.py)
#          python demos/adjoint_explorer.py --offscreen --steps 9 --screenshot out/adjoint_explorer.png
import argparse
import pathlib
import sys

import imageio.v3 as iio
import numpy as np

import tisim
from tisim import viz
from tisim.gui import Window, WindowUnavailable

HORIZON, TARGET = 8, 2.0
X_COLOR, LAMBDA_COLOR, TARGET_COLOR = (60, 110, 190), (230, 140, 40), (150, 150, 150)


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


def picture(sweep, size=(500, 400)):
    """x_t as a line with dots; the revealed lambda_t as bars; the target as a grey line (y = 2)."""
    T = len(sweep.x) - 1
    high = max(np.abs(sweep.x).max(), np.abs(sweep.lam).max(), TARGET) * 1.15
    canvas = viz.Canvas(*size, bounds=(-0.6, T + 0.6, -high, high))
    canvas.line((-0.5, 0.0), (T + 0.5, 0.0), 1.5, viz.INK)
    canvas.line((-0.5, TARGET), (T + 0.5, TARGET), 1.0, TARGET_COLOR)
    for t in range(T + 1):
        if t > sweep.next_t and abs(sweep.lam[t]) > 1e-12:
            canvas.rectangle((t + 0.2, 0.5 * sweep.lam[t]), (0.3, abs(sweep.lam[t])), 0.0, LAMBDA_COLOR)
    for t in range(T):
        canvas.line((t, sweep.x[t]), (t + 1, sweep.x[t + 1]), 2.5, X_COLOR)
    for t in range(T + 1):
        canvas.circle((t, sweep.x[t]), 0.08, X_COLOR)
    return canvas.image()


def main(argv=None):
    parser = argparse.ArgumentParser(description=(
        "A window to step backward through the discrete adjoint of x[t+1] = a x[t] + theta, one step at a time, "
        "with sliders for a and theta (needs a display and Vulkan, or --offscreen)."))
    parser.add_argument("--offscreen", action="store_true", help="render without a display (for scripts and tests)")
    parser.add_argument("--steps", type=int, default=0, help="press 'step back' this many times at the start")
    parser.add_argument("--frames", type=int, default=None, help="stop after this many frames (offscreen: 1)")
    parser.add_argument("--screenshot", default=None, help="save the last frame as a PNG here")
    args = parser.parse_args(argv)
    try:
        window = Window("tisim: the adjoint, one step at a time", (900, 480), offscreen=args.offscreen)
    except WindowUnavailable as error:
        print(error, file=sys.stderr)
        return 2
    sim = tisim.systems.ScalarLinear(horizon=HORIZON)
    sweep = AdjointSweep(sim, 0.9, 1.0)
    for _ in range(args.steps):
        sweep.step()
    frames = args.frames if args.frames is not None else (3 if args.offscreen else None)  # the panel lays out late
    frame = 0
    page = np.full((480, 900, 3), 255, np.uint8)  # the plot on the left, the controls' panel on the right
    while window.running and (frames is None or frame < frames):
        page[:, :540] = picture(sweep, (540, 480))
        window.draw(page)
        with window.panel("adjoint", 0.60, 0.02, 0.38, 0.96) as panel:
            a = panel.slider_float("a", sweep.a, 0.0, 1.5)
            theta = panel.slider_float("theta", sweep.theta, -2.0, 2.0)
            step, reset = panel.button("step back"), panel.button("reset")
            for line in sweep.lines():
                panel.text(line)
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
