"""What one optimizer iteration pays in tisim, next to a hand-written NumPy reference timed in the same run.

For ScalarLinear and Linear (n=8, m=2), T=500, batch 1 and 64, loss TerminalTarget(x -> 2) + 0.01 Effort, it times
    rollout    set_actions(fresh actions) + sim.rollout()
    gradient   set_actions(fresh actions) + g = sim.gradient(loss) + read g.value and g.actions (as an optimizer does)
against NumPy doing the same work vectorized over the batch: copy the actions, the forward loop, and for "gradient" the
loss and the hand-written adjoint loop lambda_t = A^T lambda_{t+1} with dL/dtheta, dL/dx0, dL/da and lambda itself.
Before any timing the NumPy results must agree with tisim (1e-9 relative in f64, 1e-3 in f32).
"first call" is the first tisim call on a fresh simulator, before the check: JIT compile (or a load from Taichi's
offline cache) plus the run; a later case reuses kernels an earlier one compiled (ndarray kernels ignore shapes).
Steady state: median and min over --repeats iterations after a warm-up, tisim and NumPy interleaved. Read the ratios
inside one run; absolute times drift between hours.
Then one ScalarLinear (T=500) gradient iteration, B=1 and B=64, is split by Taichi call (kernel launches by name,
ndarray transfers and fills, the Python around them), timed by wrapping Taichi's own entry points, so the split
follows whatever the engine does.

    TI_SKIP_VERSION_CHECK=ON .venv/bin/python benchmarks/engine_overhead.py [--arch cpu] [--precision f64]
        [--repeats 100] [--out out]        -> prints the tables and writes out/engine_overhead.md
"""
import argparse
import collections
import contextlib
import os
import platform
import statistics
import time

import numpy as np

T = 500
GOAL, W_TARGET, W_EFFORT = 2.0, 1.0, 0.01
POOL = 8  # distinct action arrays cycled through, so every iteration sees new actions


class ScalarReference:
    """x[t+1] = a x[t] + c + u[t] for B independent (a, c, x0), in plain NumPy."""

    def __init__(self, a, c, x0, dtype):
        self.a, self.c, self.x0 = (np.asarray(v, dtype) for v in (a, c, x0))
        self.dtype = dtype

    def rollout(self, actions):
        u = np.array(actions, dtype=self.dtype)  # what set_actions pays: a private copy
        x = np.empty((len(self.a), T + 1), self.dtype)
        x[:, 0] = self.x0
        drive = self.c[:, None] + u
        for t in range(T):
            x[:, t + 1] = self.a * x[:, t] + drive[:, t]
        return u, x

    def gradient(self, actions):
        u, x = self.rollout(actions)
        miss = x[:, -1] - GOAL
        per_batch = W_TARGET * miss ** 2 + W_EFFORT * (u ** 2).sum(1)
        lam = np.empty_like(x)  # lam[:, t] = dL/dx_t
        lam[:, -1] = 2 * W_TARGET * miss
        for t in range(T - 1, -1, -1):
            lam[:, t] = self.a * lam[:, t + 1]
        later = lam[:, 1:]  # the adjoint of the state each step writes
        return dict(value=per_batch.sum(), per_batch=per_batch,
                    params={"a": (later * x[:, :-1]).sum(1), "theta": later.sum(1)},
                    initial_state={"x": lam[:, 0]}, actions=later + 2 * W_EFFORT * u, adjoint={"x": lam})


class LinearReference:
    """x[t+1] = A x[t] + B u[t] + c for B independent (A, B, c, x0), in plain NumPy."""

    def __init__(self, A, Bm, c, x0, dtype):
        self.A, self.Bm, self.c, self.x0 = (np.asarray(v, dtype) for v in (A, Bm, c, x0))
        self.At, self.dtype = self.A.transpose(0, 2, 1).copy(), dtype

    def rollout(self, actions):
        u = np.array(actions, dtype=self.dtype)
        batch, n = self.x0.shape
        x = np.empty((batch, T + 1, n), self.dtype)
        x[:, 0] = self.x0
        drive = np.einsum("bik,btk->bti", self.Bm, u) + self.c[:, None]  # B u[t] + c for all t at once
        for t in range(T):
            x[:, t + 1] = np.matmul(self.A, x[:, t, :, None])[..., 0] + drive[:, t]
        return u, x

    def gradient(self, actions):
        u, x = self.rollout(actions)
        miss = x[:, -1] - GOAL
        per_batch = W_TARGET * (miss ** 2).sum(1) + W_EFFORT * (u ** 2).sum((1, 2))
        lam = np.empty_like(x)
        lam[:, -1] = 2 * W_TARGET * miss
        for t in range(T - 1, -1, -1):
            lam[:, t] = np.matmul(self.At, lam[:, t + 1, :, None])[..., 0]
        later = lam[:, 1:]
        params = {"A": np.einsum("bti,btj->bij", later, x[:, :-1]), "B": np.einsum("bti,btk->bik", later, u),
                  "theta": later.sum(1)}
        return dict(value=per_batch.sum(), per_batch=per_batch, params=params, initial_state={"x": lam[:, 0]},
                    actions=np.einsum("bik,bti->btk", self.Bm, later) + 2 * W_EFFORT * u, adjoint={"x": lam})


def make_case(tisim, system, batch, dtype, rng):
    """(simulator, loss, NumPy reference, pool of action arrays (B, T, *shape)) with per-element parameters."""
    x0 = rng.uniform(-1, 1, batch)
    if system == "ScalarLinear":
        a, c = rng.uniform(0.85, 0.95, batch), rng.uniform(0.5, 1.5, batch)
        sim = tisim.systems.ScalarLinear(horizon=T, batch=batch, a=a, theta=c, x=x0)
        ref, shape, goal = ScalarReference(a, c, x0, dtype), (), GOAL
    else:
        n, m = 8, 2
        q = np.linalg.qr(rng.standard_normal((batch, n, n)))[0]  # orthogonal; scaled below 1 so x stays bounded
        A = rng.uniform(0.9, 0.97, (batch, 1, 1)) * q
        Bm, c = 0.5 * rng.standard_normal((batch, n, m)), 0.1 * rng.standard_normal((batch, n))
        x0 = rng.uniform(-1, 1, (batch, n))
        sim = tisim.systems.Linear(horizon=T, batch=batch, n=n, m=m, A=A, B=Bm, theta=c, x=x0)
        ref, shape, goal = LinearReference(A, Bm, c, x0, dtype), (m,), np.full(n, GOAL)
    loss = tisim.losses.TerminalTarget({"x": goal}, weights=W_TARGET) + W_EFFORT * tisim.losses.Effort()
    pool = [0.3 * rng.standard_normal((batch, T) + shape) for _ in range(POOL)]
    return sim, loss, ref, pool


def check_agreement(label, sim, loss, ref, actions, tol):
    """Assert tisim and NumPy agree on the trajectory, the loss and every gradient group."""
    def worst(got, want):
        got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
        assert got.shape == want.shape, f"{label}: shape {got.shape} != {want.shape}"
        return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300))

    sim.set_actions(actions)
    errors = {"rollout": worst(sim.rollout()["x"], ref.rollout(actions)[1])}
    g, r = sim.gradient(loss), ref.gradient(actions)
    errors.update(value=worst(g.value, r["value"]), per_batch=worst(g.per_batch, r["per_batch"]),
                  actions=worst(g.actions, r["actions"]), x0=worst(g.initial_state["x"], r["initial_state"]["x"]),
                  adjoint=worst(g.adjoint["x"], r["adjoint"]["x"]))
    errors.update({f"d{k}": worst(g.params[k], r["params"][k]) for k in r["params"]})
    bad = {k: e for k, e in errors.items() if not e <= tol}
    assert not bad, f"{label}: tisim and NumPy disagree (relative error > {tol:g}): {bad}"
    return max(errors.values())


def clock(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def optimizer_step(sim, loss, actions):
    """What a trajectory optimizer does each step: new actions, one gradient, read the loss and dL/da."""
    sim.set_actions(actions)
    g = sim.gradient(loss)
    return g.value, g.actions


def steady(ours, theirs, pool, repeats, warmup=10):
    """Per-iteration times (tisim, NumPy) after a warm-up, the two interleaved so drifts hit both alike."""
    mine, reference = [], []
    for i in range(warmup + repeats):
        u = pool[i % POOL]
        a, b = clock(lambda: ours(u)), clock(lambda: theirs(u))
        if i >= warmup:
            mine.append(a)
            reference.append(b)
    return mine, reference


def launch_probe(serialize):
    """A one-argument kernel with one top-level loop over the batch. A parallel loop is dispatched to Taichi's CPU
    thread pool; a serialized one runs on the calling thread. The difference is what a parallel launch costs."""
    import taichi as ti

    @ti.kernel
    def probe(a: ti.types.ndarray(ndim=1)):
        ti.loop_config(serialize=serialize)
        for b in range(a.shape[0]):
            a[b] += 1.0

    return probe


@contextlib.contextmanager
def taichi_calls(sync):
    """While active, time every outermost Taichi call: kernel launches by name (".grad" for reverse mode; "bound"
    for tisim's bound calls, tisim/core/launch.py), ndarray transfers and fills. Yields {label: [seconds, calls]}."""
    from taichi.lang import _ndarray, kernel_impl
    from taichi.lang.enums import AutodiffMode

    from tisim.core import launch

    totals, depth = collections.defaultdict(lambda: [0.0, 0]), [0]
    labels = [(kernel_impl.Kernel, "__call__", lambda k: k.func.__name__ + (
                  ".grad" if k.autodiff_mode != AutodiffMode.NONE else "")),
              (_ndarray.ScalarNdarray, "to_numpy", lambda a: "ndarray.to_numpy"),
              (_ndarray.ScalarNdarray, "from_numpy", lambda a: "ndarray.from_numpy"),
              (_ndarray.Ndarray, "fill", lambda a: f"ndarray.fill ({a.dtype})"),
              (launch._BoundCall, "__call__", lambda b: b.name + " (bound)")]
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in labels]

    def timed(original, label):
        def call(self, *args, **kwargs):
            if depth[0]:  # inside another timed call (Taichi's own transfer kernels): counted there
                return original(self, *args, **kwargs)
            depth[0] += 1
            start = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                sync()
                entry = totals[label(self)]
                entry[0] += time.perf_counter() - start
                entry[1] += 1
                depth[0] -= 1
        return call

    for (owner, name, label), (_, _, original) in zip(labels, originals):
        setattr(owner, name, timed(original, label))
    try:
        yield totals
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def breakdown(sim, loss, pool, repeats, sync):
    """Rows (label, calls, median us, share) of one gradient iteration split by Taichi call, the Python around
    them, and reference timings taken without the instrumentation."""
    import taichi as ti

    def iteration(i):
        return optimizer_step(sim, loss, pool[i % POOL])

    per_label, whole = collections.defaultdict(list), []
    with taichi_calls(sync) as totals:
        for i in range(10 + repeats):
            totals.clear()
            seconds = clock(lambda: iteration(i))
            if i >= 10:
                whole.append(seconds)
                for label, (spent, calls) in totals.items():
                    per_label[label].append((spent, calls))
                per_label["Python around the Taichi calls"].append((seconds - sum(v[0] for v in totals.values()), 0))
    medians = {label: statistics.median([v[0] for v in samples] + [0.0] * (repeats - len(samples)))
               for label, samples in per_label.items()}
    total = sum(medians.values())
    rows = [[label, max(v[1] for v in per_label[label]) or "", us(spent), f"{100 * spent / total:.0f}%"]
            for label, spent in sorted(medians.items(), key=lambda kv: -kv[1])]
    rows.append(["sum of the rows above", "", us(total), "100%"])
    rows.append(["(ref) median of whole instrumented iterations", "", us(statistics.median(whole)), ""])

    scratch = ti.ndarray(sim.x.dtype, (sim.B,))
    parallel, serial = launch_probe(False), launch_probe(True)
    references = [
        ("(ref) the same iteration, not instrumented", iteration),
        ("(ref) set_actions alone", lambda i: sim.set_actions(pool[i % POOL])),
        ("(ref) sim.gradient(loss) alone, actions unchanged", lambda i: sim.gradient(loss)),
        ("(ref) sim._forward() alone (private: rollout + loss state), actions unchanged", lambda i: sim._forward()),
        ("(ref) 1-arg kernel, parallel for over B", lambda i: parallel(scratch)),
        ("(ref) the same kernel, loop serialized", lambda i: serial(scratch)),
    ]
    for label, fn in references:
        times = [clock(lambda: (fn(i), sync())) for i in range(10 + repeats)][10:]
        rows.append([label, "", us(statistics.median(times)), ""])
    return rows


def markdown(rows, header):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def comparison(tisim, dtype, tol, repeats):
    """Table rows of the side-by-side runs, and the ScalarLinear cases {B: (sim, loss, pool)} for the breakdown."""
    rng, rows, scalar_cases = np.random.default_rng(0), [], {}
    for system in ("ScalarLinear", "Linear"):
        for batch in (1, 64):
            sim, loss, ref, pool = make_case(tisim, system, batch, dtype, rng)
            label = "ScalarLinear" if system == "ScalarLinear" else "Linear n=8 m=2"
            jobs = {"rollout": (lambda u: (sim.set_actions(u), sim.rollout()), ref.rollout),
                    "gradient": (lambda u: optimizer_step(sim, loss, u), ref.gradient)}
            firsts = {kind: clock(lambda: ours(pool[0])) for kind, (ours, _) in jobs.items()}
            error = check_agreement(f"{label} B={batch}", sim, loss, ref, pool[1], tol)
            for kind, (ours_fn, theirs_fn) in jobs.items():
                ours, theirs = steady(ours_fn, theirs_fn, pool, repeats)
                med, ref_med = statistics.median(ours), statistics.median(theirs)
                rows.append([label, batch, kind, ms(firsts[kind]), ms(med), ms(min(ours)), ms(ref_med),
                             ms(min(theirs)), f"{med / ref_med:.2f}", f"{error:.1e}"])
            if system == "ScalarLinear":
                scalar_cases[batch] = (sim, loss, pool)
    return rows, scalar_cases


def ms(seconds):
    return f"{1e3 * seconds:.3f}"


def us(seconds):
    return f"{1e6 * seconds:.0f}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--precision", choices=("f64", "f32"), default="f64")
    parser.add_argument("--repeats", type=int, default=100, help="timed iterations per measurement, after warm-up")
    parser.add_argument("--out", default="out", help="folder for engine_overhead.md")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    cache = os.environ.get("TI_OFFLINE_CACHE_FILE_PATH", "")
    cached = len(os.listdir(cache)) if cache and os.path.isdir(cache) else "unknown"
    import taichi as ti

    import tisim
    init_s = clock(lambda: tisim.init(arch=args.arch, precision=args.precision, deterministic=False))
    dtype, tol = (np.float64, 1e-9) if args.precision == "f64" else (np.float32, 1e-3)
    rows, scalar_cases = comparison(tisim, dtype, tol, args.repeats)
    sync = ti.sync if args.arch != "cpu" else (lambda: None)
    split = {batch: breakdown(*case, args.repeats, sync) for batch, case in scalar_cases.items()}

    taichi_version = ".".join(map(str, ti.__version__))
    versions = f"taichi {taichi_version}, numpy {np.__version__}, Python {platform.python_version()}"
    report = "\n".join([
        "# Engine overhead: one optimizer iteration, tisim vs hand-written NumPy (same run)", "",
        f"arch={args.arch}, precision={args.precision}, T={T}, repeats={args.repeats}, {os.cpu_count()} CPU cores "
        f"(tisim uses all), {versions}; tisim.init {ms(init_s)} ms; offline-cache files at start: {cached}.",
        "Loss: TerminalTarget(x -> 2) + 0.01 Effort. Times in ms; 'first call' includes JIT compile or an "
        "offline-cache load; tisim/numpy = ratio of medians; max rel err: worst disagreement over trajectory, loss "
        "and all gradient groups.", "",
        markdown(rows, ["system", "B", "iteration", "first call", "tisim median", "tisim min", "numpy median",
                        "numpy min", "tisim/numpy", "max rel err"]), "",
        *[part for batch, rows in split.items() for part in (
            f"## Where one ScalarLinear (T={T}, B={batch}) gradient iteration goes", "",
            "One iteration = set_actions + gradient + read g.actions. Each Taichi call timed where tisim makes it "
            "(median per iteration, us; calls per iteration); share of the sum of medians. '(ref)' rows are timed "
            "on their own, without the instrumentation.", "",
            markdown(rows, ["Taichi call or part", "calls", "us", "share"]), "")],
        f"Whole benchmark: {time.perf_counter() - start:.1f} s.",
    ])
    print(report)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "engine_overhead.md"), "w") as f:
        f.write(report + "\n")


if __name__ == "__main__":
    main()
