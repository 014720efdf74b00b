# What Taichi 1.7.4's CPU backend gives a simulator step on this machine, measured on the kernels such steps are
# made of, with no tisim code in the way:
#   a second thread      one MPM gather (8,000 points of a 32^3 grid, 27 cells each, the body of tisim's 3D MPM
#                        gather) in a parallel loop, launched once a step as a per-step schedule would, on one
#                        thread and on two, with 1, 4 and 16 gathers per launch: what a second thread buys as a
#                        launch grows from about half a millisecond (an MPM phase of the peers' 3D workload) to
#                        about ten; the near-empty parallel and serialized launch for scale
#   strict arithmetic    the same gather serialized, with fast_math off (as tisim runs: its non-finite checks and
#                        float32 summation order need it) and on
#   lanes                a spring-force loop written per spring and written 8 springs a lane-vector: whether the
#                        compiler turns the lane form into vector instructions
# Each comparison first checks that its forms compute the same numbers (bitwise, or to 1e-5 for fast math).
#
# Command: python benchmarks/taichi_cpu_limits.py [--repeats 5] [--out out]   (about a minute on 2 cores)
import argparse
import json
import os
import pathlib
import time

import numpy as np
import taichi as ti

N_GRID, POINTS, STEPS = 32, 8000, 64
SPRINGS, LANES = 8192, 8


@ti.func
def gather_point(x: ti.template(), grid_v: ti.template(), v: ti.template(), C: ti.template(), p):
    # the APIC gather: quadratic B-spline weights over the point's 3 x 3 x 3 cells, velocity and affine field
    q = x[p] * N_GRID
    base = ti.cast(q - 0.5, ti.i32)
    fx = q - ti.cast(base, ti.f32)
    w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
    vel, aff = ti.Vector.zero(ti.f32, 3), ti.Matrix.zero(ti.f32, 3, 3)
    for a, b, c in ti.static(ti.ndrange(3, 3, 3)):
        d = (ti.Vector([a, b, c], dt=ti.f32) - fx) / N_GRID
        cell = ti.min(ti.max(base + ti.Vector([a, b, c]), 0), N_GRID - 1)
        g = w[a][0] * w[b][1] * w[c][2] * grid_v[cell[0] + N_GRID * (cell[1] + N_GRID * cell[2])]
        vel += g
        aff += (4.0 * N_GRID ** 2) * g.outer_product(d)
    v[p] = vel
    C[p] = aff


@ti.kernel
def gather_parallel(x: ti.types.ndarray(), grid_v: ti.types.ndarray(), v: ti.types.ndarray(),
                    C: ti.types.ndarray(), repeats: ti.i32):
    # repeats > 1 lengthens the launch: item p and p + POINTS write the same point with the same values
    for p in range(POINTS * repeats):
        gather_point(x, grid_v, v, C, p % POINTS)


@ti.kernel
def gather_serial(x: ti.types.ndarray(), grid_v: ti.types.ndarray(), v: ti.types.ndarray(), C: ti.types.ndarray()):
    ti.loop_config(serialize=True)
    for p in range(POINTS):
        gather_point(x, grid_v, v, C, p)


@ti.kernel
def empty(a: ti.types.ndarray(), serial: ti.template()):
    ti.loop_config(serialize=serial)
    for i in range(a.shape[0]):
        a[i] += 1.0


@ti.kernel
def springs_scalar(xa: ti.types.ndarray(), xb: ti.types.ndarray(), k: ti.types.ndarray(), rest: ti.types.ndarray(),
                   f: ti.types.ndarray()):
    ti.loop_config(serialize=True)
    for s in range(SPRINGS):
        d = ti.Vector([xb[s, c] - xa[s, c] for c in ti.static(range(3))])
        r = d.norm()
        scale = k[s] * (r - rest[s]) / r
        for c in ti.static(range(3)):
            f[s, c] = scale * d[c]


@ti.kernel
def springs_lanes(xa: ti.types.ndarray(), xb: ti.types.ndarray(), k: ti.types.ndarray(), rest: ti.types.ndarray(),
                  f: ti.types.ndarray()):
    # the same sums, LANES springs at a time as lane vectors: each lane's operations in the same order
    ti.loop_config(serialize=True)
    for block in range(SPRINGS // LANES):
        s = block * LANES
        d = [ti.Vector([xb[s + j, c] - xa[s + j, c] for j in ti.static(range(LANES))]) for c in ti.static(range(3))]
        r = ti.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
        scale = ti.Vector([k[s + j] for j in ti.static(range(LANES))]) * \
            (r - ti.Vector([rest[s + j] for j in ti.static(range(LANES))])) / r
        for j, c in ti.static(ti.ndrange(LANES, 3)):
            f[s + j, c] = scale[j] * d[c][j]


def timed(run, repeats):
    """Median seconds of run() over `repeats` calls, after one untimed call."""
    run()
    ti.sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        ti.sync()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def arrays(rng):
    """The gather's inputs (a block of points in the middle of the unit cube, a random grid velocity) and outputs."""
    x = ti.Vector.ndarray(3, ti.f32, POINTS)
    x.from_numpy((0.3 + 0.4 * rng.random((POINTS, 3))).astype(np.float32))
    grid_v = ti.Vector.ndarray(3, ti.f32, N_GRID ** 3)
    grid_v.from_numpy(rng.standard_normal((N_GRID ** 3, 3)).astype(np.float32))
    return x, grid_v, ti.Vector.ndarray(3, ti.f32, POINTS), ti.Matrix.ndarray(3, 3, ti.f32, POINTS)


def start(threads=None, fast_math=False):
    ti.reset()
    ti.init(arch=ti.cpu, default_fp=ti.f32, fast_math=fast_math, offline_cache=False, log_level=ti.WARN,
            **({} if threads is None else {"cpu_max_num_threads": threads}))


def threads_case(repeats):
    """{(threads, gathers per launch): seconds for STEPS launches}, the near-empty launches, and the velocities."""
    times, launches, results = {}, {}, {}
    for threads in (1, 2):
        start(threads)
        x, grid_v, v, C = arrays(np.random.default_rng(0))
        for per_launch in (1, 4, 16):
            times[threads, per_launch] = timed(
                lambda: [gather_parallel(x, grid_v, v, C, per_launch) for _ in range(STEPS)], repeats)
        results[threads] = v.to_numpy()
        a = ti.ndarray(ti.f32, 1024)
        for serial in (False, True):
            launches[threads, serial] = timed(lambda: [empty(a, serial) for _ in range(100)], repeats) / 100
    assert np.array_equal(results[1], results[2]), "the gather differs between one thread and two"
    return times, launches


def fast_math_case(repeats):
    times, results = {}, {}
    for fast in (False, True):
        start(1, fast)
        x, grid_v, v, C = arrays(np.random.default_rng(0))
        times[fast] = timed(lambda: [gather_serial(x, grid_v, v, C) for _ in range(STEPS)], repeats)
        results[fast] = C.to_numpy()
    gap = np.abs(results[True] - results[False]).max() / np.abs(results[False]).max()
    assert gap < 1e-5, f"fast math moved the gather by {gap:.1e} relative"
    return times, gap


def lanes_case(repeats):
    start(1)
    rng = np.random.default_rng(1)
    xa, xb, f = (ti.ndarray(ti.f32, (SPRINGS, 3)) for _ in range(3))
    k, rest = ti.ndarray(ti.f32, SPRINGS), ti.ndarray(ti.f32, SPRINGS)
    for array, shape in ((xa, (SPRINGS, 3)), (xb, (SPRINGS, 3)), (k, SPRINGS), (rest, SPRINGS)):
        array.from_numpy(rng.random(shape).astype(np.float32))
    times, results = {}, {}
    for name, kernel in (("scalar", springs_scalar), ("lanes", springs_lanes)):
        times[name] = timed(lambda: [kernel(xa, xb, k, rest, f) for _ in range(STEPS)], repeats)
        results[name] = f.to_numpy()
    assert np.array_equal(results["scalar"], results["lanes"]), "the lane form differs from the scalar one"
    return times


def main(argv=None):
    parser = argparse.ArgumentParser(description="What Taichi's CPU backend gives a simulator step here")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per case (>= 3)")
    parser.add_argument("--out", default="out", help="folder for taichi_cpu_limits.md and .json")
    args = parser.parse_args(argv)
    if args.repeats < 3:
        parser.error(f"--repeats must be at least 3, got {args.repeats}")
    gathers, launches = threads_case(args.repeats)
    strict, gap = fast_math_case(args.repeats)
    lanes = lanes_case(args.repeats)
    version = ".".join(map(str, ti.__version__))
    lines = [f"Taichi {version} on {os.cpu_count()} CPU threads; medians of {args.repeats}", "",
             f"A second thread: {STEPS} launches of a parallel loop over {POINTS:,} points doing g gathers of 27 "
             f"cells each (identical results on 1 and 2 threads)", "",
             "| gathers a launch | ms a launch, 1 thread | 2 threads | speed-up |", "|---|---|---|---|"]
    for per_launch in (1, 4, 16):
        one, two = gathers[1, per_launch] / STEPS, gathers[2, per_launch] / STEPS
        lines.append(f"| {per_launch} | {1e3 * one:.2f} | {1e3 * two:.2f} | {one / two:.2f} |")
    lines += ["", "| near-empty launch, 1,024 elements | 1 thread, us | 2 threads, us |", "|---|---|---|"]
    for serial, label in ((False, "parallel loop"), (True, "serialized loop")):
        lines.append(f"| {label} | {1e6 * launches[1, serial]:.1f} | {1e6 * launches[2, serial]:.1f} |")
    lines += ["", f"Strict arithmetic: the gather serialized, {STEPS} launches, one thread (fast math moves its "
                  f"results by {gap:.1e} relative)", "",
              f"| fast_math=False (tisim) | {1e3 * strict[False]:.1f} ms |", "|---|---|",
              f"| fast_math=True | {1e3 * strict[True]:.1f} ms ({strict[False] / strict[True]:.2f}x faster) |", "",
              f"Lanes: {SPRINGS:,} spring forces, {STEPS} launches, one thread (identical results)", "",
              f"| per spring | {1e3 * lanes['scalar']:.1f} ms |", "|---|---|",
              f"| {LANES} springs a lane vector | {1e3 * lanes['lanes']:.1f} ms "
              f"({lanes['scalar'] / lanes['lanes']:.2f}x faster) |"]
    text = "\n".join(lines)
    print(text)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "taichi_cpu_limits.md").write_text(text + "\n")
    figures = dict(
        gather_ms_per_launch={f"{t} threads, {g} a launch": 1e3 * s / STEPS for (t, g), s in gathers.items()},
        empty_launch_us={f"{t} threads, {'serialized' if s else 'parallel'}": 1e6 * v
                         for (t, s), v in launches.items()},
        gather_serial_ms={"fast_math=False": 1e3 * strict[False], "fast_math=True": 1e3 * strict[True]},
        fast_math_relative_change=float(gap), springs_ms={k: 1e3 * v for k, v in lanes.items()})
    (out / "taichi_cpu_limits.json").write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
