# tisim next to its peers, all in one process run: hand-written Taichi (DiffTaichi style: per-step fields, one
# launch per phase per step, ti.ad.Tape), JAX (jit + lax.scan, vmap over a batch), Warp (wp.Tape, one launch per
# step) and PyTorch eager, each implementing the same equations (peers_cartpole.py, peers_mass_spring.py,
# peers_mpm.py: tisim, hand-written Taichi and JAX only; peers_cloth.py: tisim, JAX and Warp only).
#
# Workloads (the reference definitions in benchmarks/README.md):
#   cartpole        Gymnasium's cart-pole, continuous force, theta from upright, semi-implicit Euler, T=500, B=1,
#                   f64; fixed random force sequences; loss |(x, x_dot, theta, theta_dot)[T]|^2
#   cartpole_batch  the same, B=1024 environments with different initial angles, T=200, f64
#   mass_spring     the reference 2D mass-spring body, 256 particles (32 x 8) and 2,048 (32 x 64), T=400, f32;
#                   loss = minus the mean x of all particles at T
#   mpm             tisim's MPM (MLS-MPM, APIC, neo-Hookean, sticky floor, its default parameters, dt 2e-4): a 2D box
#                   of 4,096 points (64 x 64, spacing h/2) resting on the floor of a 64^2 grid, T=256, f32, four
#                   actuators (equal slabs along x) driven by phase-shifted 5 Hz sines of amplitude 0.5; loss = minus
#                   the mean x of all points at T
#                   and the same in 3D: 8,000 points (20^3) on a 32^3 grid, T=128, f32. Compiling is slow here: on 2
#                   CPU cores the hand-written 3D reverse kernel (the 27-cell stencil unrolled) takes about 3.5
#                   minutes per float type, tisim's about 1 to 2 (both then kept in Taichi's offline cache)
#   cloth           tisim's MassSpring on tisim.robots.cloth(64, 64, spacing 0.01): a 3D sheet of 4,096 particles
#                   hanging from its two top corners (pinned), 23,938 structural, shear and bending springs, a small
#                   out-of-plane ripple in its initial positions; MassSpring's default mass, damping and ground law
#                   (penalty normal force, isotropic tanh friction: evaluated for every particle although the sheet
#                   stays 0.22 m above the ground), air drag 0.01 N s/m, dt 5e-4, T=200, f32. The input u is the
#                   per-spring stiffness k (about 1,000 N/m, a different sine pattern per iteration); loss = a fixed
#                   positive weighting of all positions at T (about the mean of x + y + z); the gradient is dL/dk and
#                   dL/dx0 (the initial positions). tisim, JAX and Warp only; Warp stepped from Python under wp.Tape
#                   as its own cloth examples run, in two forms: a launch per step (springs gathered per particle)
#                   and warp.sim's two (each spring once, atomics into a force array; then the particles)
# Per implementation and workload, what one optimizer iteration pays, from numpy actions to numpy results:
#   forward = rollout + loss;   fwd+bwd = rollout + loss + backward pass + dL/d(actions) as numpy.
# The first call of each (JIT compile or a cache load; forward first, then fwd+bwd) is reported apart from the
# steady state: the median over up to --repeats iterations, each timed right after an untimed call of the same kind
# (back to back, as in a tight optimizer loop), implementations interleaved round by round so drifts hit all alike;
# a slow implementation gets fewer repeats (--budget seconds of timed calls per measurement, at least 3), marked.
# Before any timing, every peer must agree with tisim: the loss (f64: 1e-9 relative; f32: 1e-4 at 256 particles)
# and dL/d(actions) (f64: max |difference| <= 1e-9 x max |dL/da| for the cart-pole; mass-spring in f64 at T=200:
# 1e-6). The mass-spring gradient at T=400 explodes through the stiff tanh friction (its largest entries move by
# O(1) under f32 rounding, and at 2,048 particles even under f64 summation order), so at T=400 it is reported, not
# asserted, and the f32 loss at 2,048 particles is asserted to 5e-4 (measured spread between peers: about 1e-4).
# MPM: the equations are proven the same in f64 on small instances (16^2 grid, 192 points, T=20; 12^3, 216 points,
# T=10): loss and dL/du to 1e-9 (measured: 1e-14). The f32 loss is 0.5 minus a displacement of only 1.5e-5 (2D) or
# 1.3e-6 (3D) of it, so its agreement checks rounding more than physics: asserted to 1e-5 (2D; measured up to
# 1.5e-6) and 1e-4 (3D; measured up to 3.4e-5: the Taichi versions' f32 running sum of -x_p / N over 8,000 points
# alone is off by 3.3e-5, while the hand-written f32 positions summed in f64 are within 1e-8 of f64's mean, and so is
# JAX's pairwise mean). The f32 dL/du is reported, not asserted (measured against the f64 gradient: 4e-6 to 2.3e-5 of
# max |dL/du| for every implementation, 2D and 3D).
# Cloth: the equations are proven the same in float64 on an 8 x 8 sheet (T=50) whose bottom row lands on the ground
# (148 particle-steps in contact, slipping): loss, dL/dk and dL/dx0 (each relative to its own largest entry) to 1e-10
# (measured: 1e-15). At 64 x 64 in f32 the loss is asserted to 1e-5 and both gradients to 1e-4 (measured: 1.5e-6
# between peers; every implementation's f32 gradient is within 1.1e-5 of the f64 one).
# A peer whose package is missing gets a row that says so; one that fails says why.
# --threads N runs every implementation on N cores: the process is pinned to N of the machine's cores before any
# package starts its threads, Taichi runs N threads and PyTorch's OpenMP pool N (the CPU/wall column shows what
# each used). Work per core, where the default run compares what each package makes of the
# whole machine.
#
#     TI_SKIP_VERSION_CHECK=ON TI_OFFLINE_CACHE_FILE_PATH=.cache/taichi .venv/bin/python benchmarks/peers.py \
#         [--workloads cartpole,cartpole_batch,mass_spring,mpm,cloth] [--repeats 30] [--budget 3] [--arch cpu|cuda] \
#         [--threads N] [--out out]
#     -> prints markdown tables and writes out/peers.md.   Peers: pip install -e '.[bench]'
import argparse
import faulthandler
import gc
import importlib.metadata
import importlib.util
import os
import pathlib
import platform
import statistics
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import peers_cartpole  # noqa: E402
import peers_cloth  # noqa: E402
import peers_mass_spring  # noqa: E402
import peers_mpm  # noqa: E402

WORKLOADS = ("cartpole", "cartpole_batch", "mass_spring", "mpm", "cloth")
DISTRIBUTIONS = {"taichi": "taichi", "jax": "jax", "warp": "warp-lang", "torch": "torch"}
POOL = 3  # action arrays cycled through, so every timed iteration sees new actions
MIN_REPEATS = 3
KINDS = ("forward", "gradient")
MPM_DIMS = (2, 3)
MPM_HORIZONS = {2: 256, 3: 128}  # the timed cases
MPM_CHECK_HORIZONS = {2: 20, 3: 10}  # the float64 agreement checks, on small instances
MPM_LOSS_TOL = {2: 1e-5, 3: 1e-4}  # f32, relative to the loss, about 0.5: rounding, not the physics (see the header)
CLOTH_LOSS_TOL, CLOTH_GRAD_TOL = 1e-5, 1e-4  # f32 at 64 x 64, relative (see the header)


class Case:
    """One configuration: implementations to build, a pool of actions, and the agreement limits.

    factories: {row label: (package, make(device) -> object with forward(u) and gradient(u))}; timed: False for a
    configuration that is only checked (the mass-spring f64 gradient check)."""

    def __init__(self, title, precision, factories, pool, loss_tol, grad_tol, timed=True):
        self.title, self.precision = title, precision
        self.factories, self.pool, self.timed = factories, pool, timed
        self.loss_tol, self.grad_tol = loss_tol, grad_tol


def cartpole_case(batch, horizon, devices):
    rng = np.random.default_rng(0)
    thetas = [0.1] if batch == 1 else rng.uniform(-0.3, 0.3, batch)
    s0 = peers_cartpole.initial_states(thetas)
    pool = [rng.normal(0.0, 1.0, (batch, horizon)) for _ in range(POOL)]  # force [N]
    factories = {label: (package, lambda device, f=f: f(s0, horizon, device))
                 for label, (f, package) in peers_cartpole.IMPLEMENTATIONS.items()}
    title = f"cart-pole, T={horizon}, B={batch}, f64"
    return Case(title, "f64", _with_devices(factories, devices), pool, 1e-9, 1e-9)


def mass_spring_case(n, horizon, precision, devices):
    body = peers_mass_spring.robot(n)
    dtype = np.float32 if precision == "f32" else np.float64
    S = len(body.springs)
    pool = [peers_mass_spring.actions(S, horizon, 2 * np.pi * p / POOL, dtype) for p in range(POOL)]
    factories = {label: (package, lambda device, f=f: f(body, horizon, dtype, device))
                 for label, (f, package) in peers_mass_spring.IMPLEMENTATIONS.items()}
    title = f"mass-spring, {n:,} particles ({S:,} springs), T={horizon}, {precision}"
    if precision == "f64":  # the gradient check, before the gradient explodes
        return Case(title, "f64", _with_devices(factories, devices), pool, 1e-9, 1e-6, timed=False)
    return Case(title, "f32", _with_devices(factories, devices), pool, 1e-4 if n <= 256 else 5e-4,
                None)


def mpm_case(dim, precision, devices, check=False):
    n_grid, points = (peers_mpm.CHECKS if check else peers_mpm.SIZES)[dim]
    horizon = (MPM_CHECK_HORIZONS if check else MPM_HORIZONS)[dim]
    scene = peers_mpm.block(dim, n_grid, points)
    dtype = np.float32 if precision == "f32" else np.float64
    pool = [peers_mpm.actions(horizon, 2 * np.pi * p / POOL, dtype) for p in range(POOL)]
    factories = {label: (package, lambda device, f=f: f(scene, horizon, dtype, device))
                 for label, (f, package) in peers_mpm.IMPLEMENTATIONS.items()}
    title = (f"MPM {dim}D, {n_grid}^{dim} grid, {len(scene.body.particles):,} points, {peers_mpm.ACTUATORS} actuators, "
             f"T={horizon}, {precision}")
    if check:  # the same equations: every peer to rounding in float64
        return Case(title, "f64", _with_devices(factories, devices), pool, 1e-9, 1e-9, timed=False)
    return Case(title, "f32", _with_devices(factories, devices), pool, MPM_LOSS_TOL[dim], None)


def cloth_case(precision, devices, check=False):
    size, horizon = ((peers_cloth.CHECK_SIZE, peers_cloth.CHECK_HORIZON) if check else
                     (peers_cloth.SIZE, peers_cloth.HORIZON))
    cloth = peers_cloth.sheet(size)
    dtype = np.float32 if precision == "f32" else np.float64
    pool = [peers_cloth.stiffness(cloth.n_springs, 2 * np.pi * p / POOL, dtype) for p in range(POOL)]
    factories = {label: (package, lambda device, f=f: f(cloth, horizon, dtype, device))
                 for label, (f, package) in peers_cloth.IMPLEMENTATIONS.items()}
    title = (f"cloth {size[0]}x{size[1]}, {cloth.n:,} particles ({cloth.n_springs:,} springs), u = k, T={horizon}, "
             f"{precision}")
    if check:  # the same equations, ground contact included: every peer to rounding in float64
        return Case(title, "f64", _with_devices(factories, devices), pool, 1e-10, 1e-10, timed=False)
    return Case(title, "f32", _with_devices(factories, devices), pool, CLOTH_LOSS_TOL, CLOTH_GRAD_TOL)


def _with_devices(factories, devices):
    return {label: (package, make, devices.get(package, "")) for label, (package, make) in factories.items()}


def plan(workloads, devices):
    """Cases in run order: every f64 case first, so the runtime restarts (tisim.init) once, into f32."""
    cases = []
    if "cartpole" in workloads:
        cases.append(cartpole_case(1, 500, devices))
    if "cartpole_batch" in workloads:
        cases.append(cartpole_case(1024, 200, devices))
    if "mass_spring" in workloads:
        cases += [mass_spring_case(n, 200, "f64", devices) for n in peers_mass_spring.GRIDS]
    mpm_dims = MPM_DIMS if "mpm" in workloads else ()
    cases += [mpm_case(dim, "f64", devices, check=True) for dim in mpm_dims]
    if "cloth" in workloads:
        cases.append(cloth_case("f64", devices, check=True))
    if "mass_spring" in workloads:
        cases += [mass_spring_case(n, 400, "f32", devices) for n in peers_mass_spring.GRIDS]
    cases += [mpm_case(dim, "f32", devices) for dim in mpm_dims]
    if "cloth" in workloads:
        cases.append(cloth_case("f32", devices))
    return cases


# ---- running ---------------------------------------------------------------------------------------------------------
class Row:
    """One implementation in one case: its object (or why there is none), first calls, samples, agreement."""

    def __init__(self, label, package, device):
        self.label, self.package, self.device = label, package, device
        self.impl, self.status, self.first, self.results = None, "", {}, {}
        self.samples = {kind: [] for kind in KINDS}
        self.repeats = {}


def clock(call):
    wall, cpu = time.perf_counter(), time.process_time()
    result = call()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def short(error):
    text = f"{type(error).__name__}: {error}".splitlines()[0]
    return text if len(text) < 160 else text[:157] + "..."


def start(case, label, package, make, device, sync):
    """Build one implementation and make its first calls (forward, then fwd+bwd) on the first actions."""
    row = Row(label, package, device)
    if importlib.util.find_spec(package) is None:
        row.status = f"not installed ({DISTRIBUTIONS[package]}; pip install -e '.[bench]')"
        return row
    try:
        row.impl = make(device)
        for kind in KINDS:
            wall, _, result = clock(lambda: (getattr(row.impl, kind)(case.pool[0]), sync())[0])
            row.first[kind], row.results[kind] = wall, result
    except Exception as error:  # noqa: BLE001 - a peer that cannot run gets a row that says why
        if label == "tisim":
            raise
        traceback.print_exc()
        row.impl, row.status = None, f"failed: {short(error)}"
    return row


def check(case, rows):
    """Assert every peer's loss (forward and fwd+bwd) and dL/du against tisim's; agreement table rows.
    A gradient that is a tuple of arrays (the cloth's dL/dk and dL/dx0) is compared part by part, each relative to
    its own largest entry; the worst part is asserted and every part reported."""
    ours_value, ours_grad = rows[0].results["gradient"]
    ours_parts = [np.asarray(p, np.float64) for p in (ours_grad if isinstance(ours_grad, tuple) else (ours_grad,))]
    scales = [float(np.max(np.abs(p))) for p in ours_parts]
    table = []
    for row in rows:
        if row.impl is None:
            table.append([case.title, row.label, row.status, "", "", "", ""])
            continue
        value, grad = row.results["gradient"]
        parts = grad if isinstance(grad, tuple) else (grad,)
        assert len(parts) == len(ours_parts) and all(np.shape(p) == np.shape(o) for p, o in zip(parts, ours_parts)), \
            f"{case.title}, {row.label}: dL/du shape {[np.shape(p) for p in parts]}"
        loss_err = max(abs(v - ours_value) for v in (value, row.results["forward"])) / abs(ours_value)
        errs = [float(np.max(np.abs(np.asarray(p, np.float64) - o))) / sc
                for p, o, sc in zip(parts, ours_parts, scales)]
        grad_err = max(errs)
        assert loss_err <= case.loss_tol, (f"{case.title}: {row.label} disagrees with tisim on the loss: "
                                           f"{value!r} vs {ours_value!r} (relative {loss_err:.2e} > {case.loss_tol})")
        assert case.grad_tol is None or grad_err <= case.grad_tol, (
            f"{case.title}: {row.label} disagrees with tisim on dL/du: max |difference| / max |dL/du| = "
            f"{grad_err:.2e} > {case.grad_tol}")
        asserted = f"loss <= {case.loss_tol:g}" + ("" if case.grad_tol is None else f", dL/du <= {case.grad_tol:g}")
        table.append([case.title, row.label, f"{value:.10g}", f"{loss_err:.1e}", " / ".join(f"{e:.1e}" for e in errs),
                      " / ".join(f"{sc:.3g}" for sc in scales), asserted])
    return table


def steady(case, rows, repeats, budget, sync):
    """Medians after one warm-up round; the warm-up's time caps each row's repeats at budget / time per call.
    Each timed call directly follows an untimed call of the same row and kind (back to back, as in a tight optimizer
    loop): after another framework's call, or any 20 ms pause, a sub-millisecond row runs up to 2x slower here, and
    which row happened to come first would decide the ratios."""
    live = [row for row in rows if row.impl is not None]
    for kind in KINDS:
        for row in live:
            wall, _, _ = clock(lambda: (getattr(row.impl, kind)(case.pool[1]), sync()))
            row.repeats[kind] = max(MIN_REPEATS, min(repeats, int(budget / wall)))
    for r in range(max(n for row in live for n in row.repeats.values())):
        u, previous = case.pool[r % POOL], case.pool[(r + 1) % POOL]
        for kind in KINDS:
            for row in live:
                if r < row.repeats[kind]:
                    call = getattr(row.impl, kind)
                    call(previous)
                    sync()
                    wall, cpu, _ = clock(lambda: (call(u), sync()))
                    row.samples[kind].append((wall, cpu))


def median(row, kind):
    return statistics.median(w for w, _ in row.samples[kind])


def run_case(case, args, sync):
    rows = [start(case, label, package, make, device, sync)
            for label, (package, make, device) in case.factories.items()]
    agreement = check(case, rows)
    if case.timed:
        steady(case, rows, args.repeats, args.budget, sync)
    return rows, agreement


# ---- evidence: what launches cost here, and what tisim launches ------------------------------------------------------
def launch_costs(repeats=200):
    """Rows (what, us per call): an almost empty call through each framework, median of `repeats`."""
    rows = []

    def timed(label, call):
        for _ in range(10):
            call()
        times = [clock(call)[0] for _ in range(repeats)]
        rows.append([label, f"{1e6 * statistics.median(times):.1f}"])

    import taichi as ti
    from engine_overhead import launch_probe  # a 1-argument kernel whose loop runs parallel or serialized

    from tisim.core.runtime import real
    scratch = ti.ndarray(real(), (1024,))
    for serialize, how in ((False, "parallel"), (True, "serialized")):
        probe = launch_probe(serialize)
        timed(f"Taichi kernel, one ndarray argument, {how} loop over 1,024 elements", lambda: probe(scratch))
    if importlib.util.find_spec("jax"):
        import jax
        import jax.numpy as jnp
        inc, x = jax.jit(lambda a: a + 1.0), jnp.zeros(1024, jnp.float32)
        timed("JAX jitted a + 1 (1,024 elements), called and waited for", lambda: inc(x).block_until_ready())
    if importlib.util.find_spec("warp"):
        import warp as wp
        a = wp.zeros(1024, dtype=wp.float32, device="cpu")
        timed("Warp launch of a + 1 (1,024 elements), cpu", lambda: wp.launch(_warp_increment(wp), dim=1024,
                                                                                inputs=[a], device="cpu"))
    if importlib.util.find_spec("torch"):
        import torch
        t = torch.zeros(1024)
        timed("PyTorch eager t + 1 (1,024 elements)", lambda: t + 1.0)
    return rows


_WARP_PROBE = []


def _warp_increment(wp):
    if not _WARP_PROBE:
        @wp.kernel
        def increment(a: wp.array(dtype=wp.float32)):
            a[wp.tid()] += 1.0
        _WARP_PROBE.append(increment)
    return _WARP_PROBE[0]


def tisim_calls(case, row, sync):
    """One tisim fwd+bwd iteration with every Taichi call timed (engine_overhead's instrumentation): a one-line
    summary of the calls it makes and how much of the iteration they take."""
    from engine_overhead import taichi_calls
    with taichi_calls(sync) as totals:
        wall, _, _ = clock(lambda: row.impl.gradient(case.pool[0]))
    calls = sum(n for _, n in totals.values())
    inside = sum(s for s, _ in totals.values())
    parts = ", ".join(f"{label} x{n} {1e3 * s:.2f} ms" for label, (s, n) in
                      sorted(totals.items(), key=lambda kv: -kv[1][0]))
    return (f"{case.title}: {calls} Taichi calls, {1e3 * inside:.2f} ms of {1e3 * wall:.2f} ms (instrumented) "
            f"inside them: {parts}")


# ---- report ----------------------------------------------------------------------------------------------------------
def ms(seconds):
    return f"{1e3 * seconds:.3f}" if seconds < 0.01 else f"{1e3 * seconds:.1f}"


def timing_rows(case, rows, repeats):
    table, tisim = [], rows[0]
    ours = {kind: median(tisim, kind) for kind in KINDS}
    for row in rows:
        if row.impl is None:
            table.append([row.label, row.device, row.status] + [""] * 7)
            continue
        fwd, full = median(row, "forward"), median(row, "gradient")
        cores = sum(c for _, c in row.samples["gradient"]) / sum(w for w, _ in row.samples["gradient"])
        n = f"{row.repeats['forward']} / {row.repeats['gradient']}"
        capped = any(row.repeats[k] < repeats for k in KINDS)
        table.append([row.label, row.device, f"{row.first['forward']:.2f} / {row.first['gradient']:.2f}", ms(fwd),
                      ms(full), f"{(full - fwd) / fwd:.2f}", f"{cores:.2f}", n + (" (capped)" if capped else ""),
                      f"{fwd / ours['forward']:.2f}", f"{full / ours['gradient']:.2f}"])
    peers = [row for row in rows[1:] if row.impl is not None and not row.label.startswith("tisim")]
    if peers:
        best = {kind: min(peers, key=lambda row: median(row, kind)) for kind in KINDS}
        ratios = {kind: ours[kind] / median(best[kind], kind) for kind in KINDS}
        table.append([f"**tisim / best peer** (forward: {best['forward'].label}; fwd+bwd: {best['gradient'].label})",
                      "", "", f"**{ratios['forward']:.2f}**", f"**{ratios['gradient']:.2f}**"] + [""] * 5)
    return table


def markdown(rows, header):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def versions():
    found = []
    for package, distribution in DISTRIBUTIONS.items():
        try:
            found.append(f"{package} {importlib.metadata.version(distribution)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{package} not installed")
    return ", ".join(found + [f"numpy {np.__version__}", f"Python {platform.python_version()}"])


def report(sections, agreement, costs, census, header, elapsed):
    timing_header = ["implementation", "device", "first forward / fwd+bwd [s]", "forward [ms]", "fwd+bwd [ms]",
                     "bwd/fwd", "CPU/wall (fwd+bwd)", "repeats (fwd / fwd+bwd)", "forward / tisim",
                     "fwd+bwd / tisim"]
    parts = ["# tisim vs peers: hand-written Taichi, JAX, Warp, PyTorch (same run)", "", header, "",
             "One iteration from numpy actions to numpy results: forward = rollout + loss; fwd+bwd = rollout + loss + "
             "backward pass + dL/d(actions). Medians; 'first' includes JIT compile or a cache load. bwd/fwd = "
             "(fwd+bwd - forward) / forward. CPU/wall = process CPU time / wall time (about how many cores were "
             "busy). '(capped)': fewer repeats than --repeats, by --budget. Ratios > 1: slower than tisim.", ""]
    for title, table in sections:
        parts += [f"## {title}", "", markdown(table, timing_header), ""]
    parts += ["## Agreement with tisim (asserted before timing)", "",
              "Loss: relative difference (the worse of forward and fwd+bwd). dL/du: max |difference| / max |dL/du| "
              "over every step (and spring or environment); for the cloth u is the per-spring stiffness k and "
              "the gradient two parts, dL/dk / dL/dx0, each relative to its own largest entry. Only the limits in "
              "the last column are asserted.", "",
              markdown(agreement, ["configuration", "implementation", "loss", "loss rel diff", "dL/du rel diff",
                                   "max abs dL/du (tisim)", "asserted"]), ""]
    if costs:
        parts += ["## What a near-empty call costs in this run", "",
                  markdown(costs, ["call", "us (median)"]), ""]
    if census:
        parts += ["## Where one tisim fwd+bwd iteration goes (Taichi calls, instrumented)", ""]
        parts += [f"- {line}" for line in census] + [""]
    parts.append(f"Whole benchmark: {elapsed:.0f} s.")
    return "\n".join(parts)


def devices_for(arch):
    """The device each package runs on: Taichi follows --arch; Warp and PyTorch use CUDA when asked and present."""
    devices = {"taichi": arch, "jax": "", "warp": "cpu", "torch": "cpu"}
    if importlib.util.find_spec("jax"):
        import jax
        devices["jax"] = jax.default_backend()
    if arch == "cuda" and importlib.util.find_spec("warp"):
        import warp as wp
        wp.config.quiet = True
        wp.init()
        devices["warp"] = "cuda:0" if wp.is_cuda_available() else "cpu"
    if arch == "cuda" and importlib.util.find_spec("torch"):
        import torch
        devices["torch"] = "cuda" if torch.cuda.is_available() else "cpu"
    return devices


def pin_threads(cores):
    """Keep this process, and every thread any package starts later, on these cores; size PyTorch's (OpenMP's)
    thread pool to match, and on one core turn XLA's multithreaded Eigen off."""
    if any(name in sys.modules for name in ("jax", "torch")):
        raise RuntimeError("--threads must take effect before JAX or PyTorch is imported")
    os.sched_setaffinity(0, cores)
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[variable] = str(len(cores))
    if len(cores) == 1:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()


def main(argv=None):
    parser = argparse.ArgumentParser(description="tisim vs hand-written Taichi, JAX, Warp and PyTorch.")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help="comma-separated, from " + ", ".join(WORKLOADS))
    parser.add_argument("--repeats", type=int, default=30, help="timed iterations per measurement (at most)")
    parser.add_argument("--budget", type=float, default=3.0, help="seconds per measurement that cap a slow row's "
                        f"repeats (at least {MIN_REPEATS})")
    parser.add_argument("--arch", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU cores for every implementation (default: all); --arch cpu only")
    parser.add_argument("--out", default="out", help="folder for peers.md")
    args = parser.parse_args(argv)
    if args.threads is not None:
        cores = sorted(os.sched_getaffinity(0))
        if not 1 <= args.threads <= len(cores) or args.arch != "cpu":
            parser.error(f"--threads: an integer from 1 to {len(cores)} (this process's cores), with --arch cpu; "
                         f"got {args.threads}")
        pin_threads(cores[:args.threads])
    faulthandler.enable()  # a crash inside a native library (Taichi, XLA, Warp, PyTorch) names the Python line
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = set(workloads) - set(WORKLOADS)
    if unknown or not workloads:
        parser.error(f"--workloads: choose from {', '.join(WORKLOADS)}; got {args.workloads!r}")

    started, load = time.perf_counter(), os.getloadavg()[0]
    cache = os.environ.get("TI_OFFLINE_CACHE_FILE_PATH", "")
    cached = len(os.listdir(cache)) if cache and os.path.isdir(cache) else "unknown"
    import taichi as ti

    import tisim
    sync = ti.sync if args.arch != "cpu" else (lambda: None)
    devices = devices_for(args.arch)
    sections, agreement, census, costs = [], [], [], []
    for case in plan(workloads, devices):
        rows = None
        gc.collect()  # free the last case's arrays while the runtime that made them is alive
        # restarts Taichi when the precision changes
        tisim.init(arch=args.arch, precision=case.precision, threads=args.threads)
        print(f"... {case.title}{'' if case.timed else ' (agreement only)'}", flush=True)
        rows, checked = run_case(case, args, sync)
        agreement += checked
        if case.timed:
            sections.append((case.title, timing_rows(case, rows, args.repeats)))
            census.append(tisim_calls(case, rows[0], sync))
        if not costs and args.arch == "cpu":
            costs = launch_costs()
    cores = f"{args.threads} of {os.cpu_count()} CPU cores (--threads)" if args.threads else \
        f"{os.cpu_count()} CPU cores"
    header = (f"arch={args.arch}, {cores}, load average at start {load:.2f}; {versions()}. "
              f"--repeats {args.repeats}, --budget {args.budget:g} s. Taichi offline-cache files at start: {cached}; "
              "Warp keeps compiled kernels in its own cache (~/.cache/warp), JAX compiles afresh in each process.")
    text = report(sections, agreement, costs, census, header, time.perf_counter() - started)
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "peers.md"), "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
