# What the two-way coupling costs: a free disc dropped into a clay bed (demos/ball_penetrometer.py's scene, neo-Hookean
# so that the hand-written version stays short) stepped three ways, at batch 1 on the CPU:
#   - tisim's MPM alone (the clay, no disc);
#   - tisim's Coupled (the clay and the disc pushing each other): its one-launch forward pass and backward pass;
#   - the same coupled step hand-written in Taichi, DiffTaichi's way: per-step (T+1, N) fields, one grid reused by
#     every step, a launch per phase per step, the grid recomputed per step in the backward pass
#     (ti.ad.grad_replaced), all under ti.ad.Tape, the disc's impulse summed by atomic adds in the grid's kernel.
# The loss is the disc's height plus the points' mean height after T steps; its gradient is taken with respect to the
# disc's starting velocity and the clay's Young's modulus. Before timing, a float64 check: the hand-written rollout's
# loss and gradient must equal tisim's to 1e-10 (the same equations; they agree to rounding). Timings: one rollout +
# loss, and one rollout + loss + backward pass, medians over interleaved repeats, compile (the first call) left out.
#
# Command: python benchmarks/coupled_cost.py [--steps 500] [--repeats 10] [--threads 1] [--out out]
import argparse
import json
import pathlib
import statistics
import sys
import time

import numpy as np
from machine import describe

import tisim
from tisim.losses import TerminalSum
from tisim.systems.mpm import BAND, MPM, Body, Coupled, Tool

N_GRID, BED, RADIUS, SPEED = 64, 0.12, 0.03, 2.0  # cells; the clay's depth [m]; the disc [m]; its drop [m/s]
E, NU, RHO, G, DT = 1e5, 0.3, 1800.0, 9.8, 2e-4
MASS = 7800.0 * np.pi * RADIUS ** 2  # a steel disc, per metre of depth [kg]


def clay():
    base = BAND / N_GRID
    return Body.box([0.3, base], [0.7, base + BED], 0.5 / N_GRID)


def disc():
    return Tool.sphere([0.5, BAND / N_GRID + BED + RADIUS + 0.002], RADIUS)


def tisim_simulators(steps):
    """(Coupled, MPM alone, the loss of each) on the scene."""
    common = dict(horizon=steps, body=clay(), n_grid=N_GRID, material="neo_hookean", E=E, nu=NU, rho=RHO, g=G)
    coupled = Coupled(tools=[disc()], tool_mass=[MASS], **common)
    coupled.set_initial_state(tool_vel=[[0.0, -SPEED]])
    alone = MPM(**common)
    n = coupled.n_particles
    up = np.zeros((n, 2))
    up[:, 1] = 1.0 / n
    return coupled, alone, TerminalSum({"pos": up, "tool_pos": [[0.0, 1.0]]}), TerminalSum({"pos": up})


def handwritten(steps, softness):
    """The coupled step in hand-written Taichi (module comment); forward() -> loss, gradient() -> (loss, dL/d the
    disc's starting velocity, dL/dE)."""
    import taichi as ti

    from tisim.core.runtime import numpy_real, real

    body = clay()
    N, T, dim = len(body.particles), steps, 2
    inv_h, volume = float(N_GRID), float(body.volume)
    mass = RHO * volume

    @ti.data_oriented
    class HandTaichi:
        def __init__(self):
            vector, matrix = (lambda: ti.Vector.field(dim, real(), (T + 1, N), needs_grad=True),
                              lambda: ti.Matrix.field(dim, dim, real(), (T + 1, N), needs_grad=True))
            self.x, self.v, self.C, self.F = vector(), vector(), matrix(), matrix()
            self.grid_m = ti.field(real(), (N_GRID, N_GRID), needs_grad=True)
            self.grid_mv = ti.Vector.field(dim, real(), (N_GRID, N_GRID), needs_grad=True)
            self.grid_v = ti.Vector.field(dim, real(), (N_GRID, N_GRID), needs_grad=True)
            self.ball_x = ti.Vector.field(dim, real(), T + 1, needs_grad=True)
            self.ball_v = ti.Vector.field(dim, real(), T + 1, needs_grad=True)
            self.impulse = ti.Vector.field(dim, real(), (), needs_grad=True)
            self.E = ti.field(real(), (), needs_grad=True)
            self.loss = ti.field(real(), (), needs_grad=True)
            x = np.zeros((T + 1, N, dim), numpy_real())
            x[0] = body.particles
            F = np.zeros((T + 1, N, dim, dim), numpy_real())
            F[0] = np.eye(dim)
            self.x.from_numpy(x)
            self.F.from_numpy(F)
            self.ball_x[0] = disc().centre.tolist()
            self.ball_v[0] = [0.0, -SPEED]
            self.E[None] = E

        @ti.kernel
        def clear_grid(self):
            for I in ti.grouped(self.grid_m):  # gradients too: each step's backward pass starts from a clean grid
                self.grid_m[I] = 0.0
                self.grid_mv[I] = ti.Vector.zero(float, dim)
                self.grid_v[I] = ti.Vector.zero(float, dim)
                self.grid_m.grad[I] = 0.0
                self.grid_mv.grad[I] = ti.Vector.zero(float, dim)
                self.grid_v.grad[I] = ti.Vector.zero(float, dim)
            self.impulse[None] = ti.Vector.zero(float, dim)
            self.impulse.grad[None] = ti.Vector.zero(float, dim)

        @ti.func
        def stencil(self, s, p):
            q = self.x[s, p] * inv_h
            base = ti.cast(q - 0.5, ti.i32)
            fx = q - ti.cast(base, float)
            w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
            return base, fx, w

        @ti.kernel
        def p2g(self, s: ti.i32):
            for p in range(N):
                base, fx, w = self.stencil(s, p)
                identity = ti.Matrix.identity(float, dim)
                F = (identity + DT * self.C[s, p]) @ self.F[s, p]
                self.F[s + 1, p] = F
                mu, la = self.E[None] / (2 * (1 + NU)), self.E[None] * NU / ((1 + NU) * (1 - 2 * NU))
                tau = mu * (F @ F.transpose() - identity) + la * ti.log(F.determinant()) * identity
                affine = mass * self.C[s, p] - (4.0 * DT * volume * inv_h ** 2) * tau
                for i, j in ti.static(ti.ndrange(3, 3)):
                    d = (ti.Vector([i, j], float) - fx) / inv_h
                    cell = ti.min(ti.max(base + ti.Vector([i, j]), 0), N_GRID - 1)
                    self.grid_m[cell] += w[i][0] * w[j][1] * mass
                    self.grid_mv[cell] += w[i][0] * w[j][1] * (mass * self.v[s, p] + affine @ d)

        @ti.func
        def seen(self, s):
            """The disc's velocity as the clay meets it, and its place then."""
            u = self.ball_v[s] - DT * G * ti.Vector.unit(dim, 1, float)
            return u, self.ball_x[s] + DT * u

        @ti.kernel
        def grid_op(self, s: ti.i32):
            for I in ti.grouped(self.grid_m):
                m = self.grid_m[I]
                free = self.grid_mv[I] / ti.max(m, 1e-30) * ti.select(m > 0.0, 1.0, 0.0) \
                    - DT * G * ti.Vector.unit(dim, 1, float)
                v = ti.Vector([free[k] * ti.select((I[k] <= BAND and free[k] < 0.0)
                                                   or (I[k] >= N_GRID - BAND and free[k] > 0.0), 0.0, 1.0)
                               for k in ti.static(range(dim))])
                v = v * ti.select(I[1] <= BAND and free[1] < 0.0, 0.0, 1.0)  # the sticky floor
                u, centre = self.seen(s)  # the disc: frictionless, its reach fading over the softness
                d = ti.cast(I, float) / inv_h - centre
                length = ti.sqrt(d.dot(d) + 1e-30)
                n, r = d / length, v - u
                normal = r.dot(n)
                after = v - ti.exp(-ti.max(length - RADIUS, 0.0) / softness) * ti.min(normal, 0.0) * n
                self.impulse[None] += m * (v - after)
                self.grid_v[I] = after

        @ti.kernel
        def move_disc(self, s: ti.i32):
            u, _ = self.seen(s)
            self.ball_v[s + 1] = u + self.impulse[None] / MASS
            self.ball_x[s + 1] = self.ball_x[s] + DT * self.ball_v[s + 1]

        @ti.kernel
        def g2p(self, s: ti.i32):
            for p in range(N):
                base, fx, w = self.stencil(s, p)
                v = ti.Vector.zero(float, dim)
                C = ti.Matrix.zero(float, dim, dim)
                for i, j in ti.static(ti.ndrange(3, 3)):
                    d = (ti.Vector([i, j], float) - fx) / inv_h
                    cell = ti.min(ti.max(base + ti.Vector([i, j]), 0), N_GRID - 1)
                    vi = w[i][0] * w[j][1] * self.grid_v[cell]
                    v += vi
                    C += (4.0 * inv_h ** 2) * vi.outer_product(d)
                self.v[s + 1, p] = v
                self.C[s + 1, p] = C
                self.x[s + 1, p] = self.x[s, p] + DT * v

        @ti.kernel
        def compute_loss(self):
            for p in range(N):  # the disc's height once, in the loop (autodiff takes no statement beside a loop)
                self.loss[None] += self.x[T, p][1] / N + ti.select(p == 0, self.ball_x[T][1], 0.0)

        @ti.ad.grad_replaced
        def step(self, s):
            self.clear_grid()
            self.p2g(s)
            self.grid_op(s)
            self.move_disc(s)
            self.g2p(s)

        @ti.ad.grad_for(step)
        def step_grad(self, s):
            self.clear_grid()  # the forward pass left the last step's grid: recompute step s's
            self.p2g(s)
            self.grid_op(s)
            self.g2p.grad(s)
            self.move_disc.grad(s)
            self.grid_op.grad(s)
            self.p2g.grad(s)

        def run(self):
            for s in range(T):
                self.step(s)
            self.compute_loss()

        def forward(self):
            self.loss[None] = 0.0
            self.run()
            return float(self.loss[None])

        def gradient(self):
            with ti.ad.Tape(loss=self.loss):  # clears every gradient, sets loss = 0, runs the grads in reverse
                self.run()
            return float(self.loss[None]), self.ball_v.grad.to_numpy()[0], float(self.E.grad[None])

    return HandTaichi()


def agreement(steps):
    """tisim's Coupled and the hand-written version in float64: relative differences of the loss and gradients."""
    coupled, _, loss, _ = tisim_simulators(steps)
    g = coupled.gradient(loss)
    hand = handwritten(steps, float(coupled.params["tool_softness"][0]))
    value, velocity_grad, E_grad = hand.gradient()
    mine = (g.value, g.initial_state["tool_vel"][0, 0], g.params["E"][0, 0])
    return {"loss": abs(value / mine[0] - 1.0),
            "dL_dvelocity": float(np.abs(velocity_grad - mine[1]).max() / np.abs(mine[1]).max()),
            "dL_dE": abs(E_grad / mine[2] - 1.0), "steps": steps, "dL_dE_value": mine[2],
            "dL_dvelocity_value": mine[1].tolist()}


def clock(call):
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description="The cost of Coupled's two-way coupling against MPM alone and "
                                                 "against the same coupled step hand-written in Taichi.")
    parser.add_argument("--steps", type=int, default=500, help="steps of 0.2 ms a rollout (default 500)")
    parser.add_argument("--repeats", type=int, default=10, help="timed calls of each kind (default 10)")
    parser.add_argument("--threads", type=int, default=1, help="Taichi's CPU threads (default 1)")
    parser.add_argument("--out", default="out", help="folder for coupled_cost.json (default out)")
    args = parser.parse_args()
    tisim.init(precision="f64", threads=args.threads)
    check = agreement(100)
    print(f"float64, 100 steps, hand-written against tisim: loss {check['loss']:.1e}, dL/d(start velocity) "
          f"{check['dL_dvelocity']:.1e}, dL/dE {check['dL_dE']:.1e} (relative)")
    assert max(check["loss"], check["dL_dvelocity"], check["dL_dE"]) < 1e-10, "the two versions disagree"
    coupled, alone, loss, alone_loss = tisim_simulators(args.steps)
    hand = handwritten(args.steps, float(coupled.params["tool_softness"][0]))
    calls = {"MPM alone": (lambda: alone.evaluate(alone_loss), lambda: alone.gradient(alone_loss).params),
             "Coupled": (lambda: coupled.evaluate(loss), lambda: coupled.gradient(loss).params),
             "hand-written Taichi": (hand.forward, hand.gradient)}
    times = {name: ([], []) for name in calls}
    for forward, full in calls.values():  # compiles
        forward()
        full()
    for _ in range(args.repeats):
        for name, (forward, full) in calls.items():
            times[name][0].append(clock(forward))
            times[name][1].append(clock(full))
    rows = {name: {"rollout_ms": 1e3 * statistics.median(f), "rollout_and_gradient_ms": 1e3 * statistics.median(b)}
            for name, (f, b) in times.items()}
    lines = ["| | rollout [ms] | rollout + gradient [ms] | against Coupled |", "|---|---|---|---|"]
    base = rows["Coupled"]
    for name, row in rows.items():
        lines.append(f"| {name} | {row['rollout_ms']:.0f} | {row['rollout_and_gradient_ms']:.0f} | "
                     f"{row['rollout_ms'] / base['rollout_ms']:.2f} / "
                     f"{row['rollout_and_gradient_ms'] / base['rollout_and_gradient_ms']:.2f} |")
    print("\n".join(lines))
    folder = pathlib.Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    figures = {"benchmark": "coupled_cost", "date": time.strftime("%Y-%m-%d"),
               "command": "python benchmarks/coupled_cost.py " + " ".join(sys.argv[1:]), "steps": args.steps,
               "points": int(coupled.n_particles), "n_grid": N_GRID, "repeats": args.repeats,
               "machine": describe(f"{args.threads} thread(s)"), "agreement_float64": check, "rows": rows}
    (folder / "coupled_cost.json").write_text(json.dumps(figures, indent=2))
    print(f"wrote {folder / 'coupled_cost.json'}")


if __name__ == "__main__":
    main()
