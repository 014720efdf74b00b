# What Taichi's storage and launch pattern cost on one CPU thread: the forward pass of the cloth workload of
# peers.py (64 x 64 sheet, 4,096 particles, T=200, f32; the equations in peers_cloth.py's header) written by hand
# six ways, beside tisim's MassSpring doing the same work, interleaved in one process:
#   fields, a launch per step            (T+1, N) vector fields, DiffTaichi's way (peers_cloth.taichi_handwritten)
#   fields, one launch                   the same body with the time loop inside the kernel
#   ndarrays, a launch per step          (T+1, N) vec3 ndarrays passed as arguments
#   ndarrays, one launch                 the same, the time loop inside
#   tisim's layout, one launch           a (B, T+1, 6N) scalar ndarray, positions then velocities per row, as
#                                        tisim keeps its states
#   tisim's layout, parameters as data   the same, every constant and the per-spring k and rest length read from
#                                        one parameter row, as tisim reads theta
# What is left between the last form and tisim is tisim's own step (its contact law with a softness, its friction
# tanh) and its contract (each row zeroed, the step added into it, every row checked for non-finite values).
# Every hand-written form must reach the same final positions as the first (bitwise: one thread, the same
# operations; to 1e-6 for the one whose constant products are not folded) and tisim's to 1e-5 before anything is
# timed.
#
# Command: python benchmarks/taichi_storage.py [--repeats 7] [--out out]   (about a minute on 2 cores)
import argparse
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import peers_cloth as pc  # noqa: E402
from peers_cloth import DRAG, DT, EPS, FLOOR, KC, KD, MU, C, G, M  # noqa: E402


def forms(cloth, T):
    """{label: run()}, each run a whole forward pass; {label: (restart(), final positions (N, 3))} to check them."""
    import taichi as ti
    spring_of, other_of, present = cloth.robot.incidence()
    N, S, D = cloth.n, cloth.n_springs, spring_of.shape[1]
    f32, ndarray = np.float32, ti.types.ndarray

    @ti.func
    def load(x: ti.template(), t, j, rows: ti.template(), velocities: ti.template()):
        """Particle j's position (or velocity) at step t: x[t, j], or from tisim's rows x[0, t, :]."""
        value = ti.Vector.zero(ti.f32, 3)
        if ti.static(rows):
            start = 3 * (N + j) if ti.static(velocities) else 3 * j
            value = ti.Vector([x[0, t, start + c] for c in ti.static(range(3))])
        else:
            value = x[t, j]
        return value

    # tisim's parameters are data: one row theta (1, P) holding kc, kd, mu, eps, m, g, c, drag, dt, then k, then the
    # rest lengths; the hand-written forms fold the constants into the code
    names = ("kc", "kd", "mu", "eps", "m", "g", "c", "drag", "dt")
    constants = dict(kc=KC, kd=KD, mu=MU, eps=EPS, m=M, g=G, c=C, drag=DRAG, dt=DT)

    @ti.func
    def value(theta: ti.template(), data: ti.template(), name: ti.template()):
        result = ti.cast(constants[name], ti.f32)
        if ti.static(data):
            result = theta[0, names.index(name)]
        return result

    @ti.func
    def spring_value(table: ti.template(), theta: ti.template(), data: ti.template(), start: ti.template(), s):
        result = ti.cast(0.0, ti.f32)
        if ti.static(data):
            result = theta[0, start + s]
        else:
            result = table[s]
        return result

    @ti.func
    def velocity(t, i, x: ti.template(), v: ti.template(), rows: ti.template(), k: ti.template(),
                 rest: ti.template(), spring: ti.template(), other: ti.template(), weight: ti.template(),
                 theta: ti.template(), data: ti.template()):
        """Particle i's position at step t and its velocity at step t + 1."""
        xi, vi = load(x, t, i, rows, False), load(v, t, i, rows, True)
        kc, kd, mu = value(theta, data, "kc"), value(theta, data, "kd"), value(theta, data, "mu")
        eps, m, g = value(theta, data, "eps"), value(theta, data, "m"), value(theta, data, "g")
        c, drag, dt = value(theta, data, "c"), value(theta, data, "drag"), value(theta, data, "dt")
        depth, vn = -xi[1], vi[1]
        fn = ti.select(depth > 0.0, kc * depth - kd * ti.min(vn, 0.0), 0.0)
        vt = ti.Vector([vi[0], 0.0, vi[2]])
        slip = ti.sqrt(vt.dot(vt) + FLOOR)
        f = ti.Vector([0.0, fn - m * g, 0.0]) - (mu * fn * ti.tanh(slip / eps) / slip) * vt - drag * vi
        for q in ti.static(range(D)):
            s, j = spring[i, q], other[i, q]
            d = load(x, t, j, rows, False) - xi
            r = d.norm()
            n = d / r
            k_s = spring_value(k, theta, data, len(names), s)
            rest_s = spring_value(rest, theta, data, len(names) + S, s)
            f += weight[i, q] * (k_s * (r - rest_s) + c * (load(v, t, j, rows, True) - vi).dot(n)) * n
        return xi, vi + dt * f / m

    tables = [cloth.robot.rest_lengths().astype(f32), cloth.robot.free().astype(f32), spring_of.astype(np.int32),
              other_of.astype(np.int32), present.astype(f32)]
    k = pc.stiffness(S)
    x0 = np.zeros((T + 1, N, 3), f32)
    x0[0] = cloth.x0

    # fields: the state and every table at addresses known when compiling
    xf, vf = ti.Vector.field(3, ti.f32, (T + 1, N)), ti.Vector.field(3, ti.f32, (T + 1, N))
    kf, rf, ff = ti.field(ti.f32, S), ti.field(ti.f32, S), ti.field(ti.f32, N)
    sf, of, wf = ti.field(ti.i32, (N, D)), ti.field(ti.i32, (N, D)), ti.field(ti.f32, (N, D))
    for field, data in zip((xf, kf, rf, ff, sf, of, wf), (x0, k, *tables)):
        field.from_numpy(data)

    @ti.func
    def particle(x: ti.template(), v: ti.template(), k: ti.template(), rest: ti.template(), free: ti.template(),
                 spring: ti.template(), other: ti.template(), weight: ti.template(), t, i):
        xi, v_next = velocity(t, i, x, v, False, k, rest, spring, other, weight, k, False)
        x[t + 1, i] = xi + free[i] * DT * v_next
        v[t + 1, i] = free[i] * v_next

    @ti.kernel
    def field_step(t: ti.i32):
        for i in range(N):
            particle(xf, vf, kf, rf, ff, sf, of, wf, t, i)

    @ti.kernel
    def field_fused():
        ti.loop_config(serialize=True)
        for _ in range(1):
            for t in range(T):
                for i in range(N):
                    particle(xf, vf, kf, rf, ff, sf, of, wf, t, i)

    # ndarrays: the same state as kernel arguments
    vec3 = ti.math.vec3
    xn, vn = ti.ndarray(vec3, (T + 1, N)), ti.ndarray(vec3, (T + 1, N))
    kn, rn, fn_ = ti.ndarray(ti.f32, S), ti.ndarray(ti.f32, S), ti.ndarray(ti.f32, N)
    sn, on, wn = ti.ndarray(ti.i32, (N, D)), ti.ndarray(ti.i32, (N, D)), ti.ndarray(ti.f32, (N, D))
    for array, data in zip((xn, kn, rn, fn_, sn, on, wn), (x0, k, *tables)):
        array.from_numpy(data)
    args = (kn, rn, fn_, sn, on, wn)

    @ti.kernel
    def nd_step(x: ndarray(dtype=vec3, ndim=2), v: ndarray(dtype=vec3, ndim=2), k: ndarray(ndim=1),
                rest: ndarray(ndim=1), free: ndarray(ndim=1), spring: ndarray(ndim=2), other: ndarray(ndim=2),
                weight: ndarray(ndim=2), t: ti.i32):
        for i in range(N):
            particle(x, v, k, rest, free, spring, other, weight, t, i)

    @ti.kernel
    def nd_fused(x: ndarray(dtype=vec3, ndim=2), v: ndarray(dtype=vec3, ndim=2), k: ndarray(ndim=1),
                 rest: ndarray(ndim=1), free: ndarray(ndim=1), spring: ndarray(ndim=2), other: ndarray(ndim=2),
                 weight: ndarray(ndim=2)):
        ti.loop_config(serialize=True)
        for _ in range(1):
            for t in range(T):
                for i in range(N):
                    particle(x, v, k, rest, free, spring, other, weight, t, i)

    # tisim's layout: one scalar row per batch element and step, positions then velocities
    rows = ti.ndarray(ti.f32, (1, T + 1, 6 * N))
    first = np.zeros((1, T + 1, 6 * N), f32)
    first[0, 0, :3 * N] = cloth.x0.reshape(-1)
    rows.from_numpy(first)

    theta = ti.ndarray(ti.f32, (1, len(names) + 2 * S))
    theta.from_numpy(np.concatenate([[constants[name] for name in names], k, tables[0]])[None].astype(f32))

    @ti.kernel
    def row_fused(x: ndarray(ndim=3), theta: ndarray(ndim=2), k: ndarray(ndim=1), rest: ndarray(ndim=1),
                  free: ndarray(ndim=1), spring: ndarray(ndim=2), other: ndarray(ndim=2), weight: ndarray(ndim=2),
                  data: ti.template()):
        ti.loop_config(serialize=True)
        for _ in range(1):
            for t in range(T):
                for i in range(N):
                    xi, v_next = velocity(t, i, x, x, True, k, rest, spring, other, weight, theta, data)
                    x_next = xi + free[i] * value(theta, data, "dt") * v_next
                    for c in ti.static(range(3)):
                        x[0, t + 1, 3 * i + c] = x_next[c]
                        x[0, t + 1, 3 * (N + i) + c] = free[i] * v_next[c]

    def synced(call):
        def run():
            call()
            ti.sync()
        return run

    runs = {
        "fields, a launch per step": synced(lambda: [field_step(t) for t in range(T)]),
        "fields, one launch": synced(field_fused),
        "ndarrays, a launch per step": synced(lambda: [nd_step(xn, vn, *args, t) for t in range(T)]),
        "ndarrays, one launch": synced(lambda: nd_fused(xn, vn, *args)),
        "tisim's layout, one launch": synced(lambda: row_fused(rows, theta, *args, False)),
        "tisim's layout, parameters as data": synced(lambda: row_fused(rows, theta, *args, True)),
    }
    # the forms in a pair share their state: each check starts from a state with only step 0 set, so that a form
    # that wrote nothing could not pass on its partner's result
    def restart(*pairs):
        def start():
            for array, value in pairs:
                array.from_numpy(value)
        return start

    fields = restart((xf, x0), (vf, np.zeros_like(x0)))
    ndarrays = restart((xn, x0), (vn, np.zeros_like(x0)))
    rows_restart = restart((rows, first))

    def rows_final():
        return rows.to_numpy()[0, T, :3 * N].reshape(N, 3)
    finals = {  # label: (restart, final positions (N, 3))
        "fields, a launch per step": (fields, lambda: xf.to_numpy()[T]),
        "fields, one launch": (fields, lambda: xf.to_numpy()[T]),
        "ndarrays, a launch per step": (ndarrays, lambda: xn.to_numpy()[T]),
        "ndarrays, one launch": (ndarrays, lambda: xn.to_numpy()[T]),
        "tisim's layout, one launch": (rows_restart, rows_final),
        "tisim's layout, parameters as data": (rows_restart, rows_final),
    }
    return runs, finals, k


def main(argv=None):
    parser = argparse.ArgumentParser(description="Taichi's storage and launch pattern on the cloth forward pass")
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds, every form once a round (>= 3)")
    parser.add_argument("--out", default="out", help="folder for taichi_storage.md")
    args = parser.parse_args(argv)
    if args.repeats < 3:
        parser.error(f"--repeats must be at least 3, got {args.repeats}")
    import tisim
    tisim.init(precision="f32", threads=1)
    cloth, T = pc.sheet(pc.SIZE), pc.HORIZON
    runs, finals, k = forms(cloth, T)
    model = pc.Tisim(cloth, T, np.float32)
    runs["tisim MassSpring (evaluate)"] = lambda: model.forward(k)
    for label, run in runs.items():  # compile, and check every form against the first and against tisim
        if label in finals:
            restart, final_positions = finals[label]
            restart()
        run()
        if label in finals:
            final = final_positions()
            if label == next(iter(finals)):
                reference = final
            elif "data" in label:  # products of constants are folded in float64 in the others: not bitwise
                gap = np.abs(final - reference).max() / np.abs(reference).max()
                assert gap < 1e-6, f"{label}: differs from the first form by {gap:.1e} relative"
            else:
                assert np.array_equal(final, reference), f"{label}: differs from the first form"
    model.sim.set_params(k=k)
    tisim_final = model.sim.rollout()["pos"][0, T]
    gap = np.abs(tisim_final - reference).max() / np.abs(reference).max()
    assert gap < 1e-5, f"tisim's final positions differ from the hand-written ones by {gap:.1e} relative"
    times = {label: [] for label in runs}
    for _ in range(args.repeats):
        for label, run in runs.items():
            start = time.perf_counter()
            run()
            times[label].append(time.perf_counter() - start)
    base = np.median(times["fields, a launch per step"])
    lines = [f"cloth forward, {cloth.n:,} particles ({cloth.n_springs:,} springs), T={T}, f32, one thread; "
             f"agreement: the hand-written forms bitwise, tisim to {gap:.1e}", "",
             "| form | ms (median) | / fields, a launch per step |", "|---|---|---|"]
    lines += [f"| {label} | {1e3 * np.median(t):.1f} | {np.median(t) / base:.2f} |" for label, t in times.items()]
    text = "\n".join(lines)
    print(text)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "taichi_storage.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
