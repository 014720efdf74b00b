"""The Taichi 1.7.4 behaviours that tisim works around (docs/taichi_pitfalls.md), each shown as Taichi has it.

Every test asserts the behaviour itself, not tisim's workaround: when a Taichi upgrade fixes or changes one, its test
fails with "Taichi fixed ...: the workaround in <module> can go" (or "... changed ...: revisit <module>"). Tests that
need a crash, a restart, a second thread or a cold compile run a script in a fresh process, written to tmp_path
(Taichi reads a kernel's source from its file); the others run on the test runtime of tests/conftest.py (float64).
"""
import gc
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import taichi as ti

from tisim.autodiff.implicit import detach

SCRIPT_TIMEOUT = 120  # seconds; each script takes one to three


def fixed(what, where):
    return f"Taichi fixed {what}: the workaround in {where} can go"


def changed(what, where):
    return f"Taichi changed {what}: revisit {where}"


def raised(call):
    """The exception call() raises, or None."""
    try:
        call()
    except Exception as error:  # Taichi raises RuntimeError, TypeError and classes of its own
        return error
    return None


def environment(**changes):
    """This process's environment (tests/conftest.py's settings), with changes; None removes a variable."""
    env = dict(os.environ)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def run_script(tmp_path, body, env=None, threads=1, cache=True):
    """Run `body` after ti.init on a CPU in float64 (as tisim.init does: fast_math off) in a fresh process."""
    prelude = (f"import numpy as np\nimport taichi as ti\n\nti.init(arch=ti.cpu, default_fp=ti.f64, fast_math=False, "
               f"cpu_max_num_threads={threads}, offline_cache={cache}, log_level=ti.WARN)\n")
    path = tmp_path / "pitfall.py"
    path.write_text(prelude + textwrap.dedent(body))
    return subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env or environment(), capture_output=True,
                          text=True, timeout=SCRIPT_TIMEOUT)


def with_grads(values, dtype=ti.f64):
    """An ndarray holding `values`, with a zeroed gradient array."""
    values = np.asarray(values, dtype=np.float64)
    array = ti.ndarray(dtype, values.shape, needs_grad=True)
    array.from_numpy(values)
    array.grad.fill(0.0)
    return array


def reverse(kernel, *args):
    """Run kernel, then its reverse-mode gradient with d(total)/d(total) = 1; args end with `total`."""
    kernel(*args)
    args[-1].grad.fill(1.0)
    kernel.grad(*args)


def field_tree(*shapes, grad=False, dual=False):
    """Float64 fields of the given shapes in one field tree of their own (the test process makes few of them)."""
    builder, fields = ti.FieldsBuilder(), []
    for shape in shapes:
        field = ti.field(ti.f64, needs_grad=grad, needs_dual=dual)
        places = [field] + ([field.grad] if grad else []) + ([field.dual] if dual else [])
        (builder.place if shape == () else builder.dense(ti.i, shape).place)(*places)
        fields.append(field)
    builder.finalize()
    return fields


# ---- reverse mode ------------------------------------------------------------------------------------------------
@ti.kernel
def square_in_place(x: ti.types.ndarray(), total: ti.types.ndarray()):
    for i in range(x.shape[0]):
        x[i] = x[i] ** 2
        total[0] += x[i]


def test_plain_stores():
    """x[i] = x[i] ** 2 in place: the values are right, the gradient is 2 x^3 where 2 x is due."""
    x, total = with_grads([1.0, 2.0, 3.0]), with_grads([0.0])
    reverse(square_in_place, x, total)
    assert total.to_numpy()[0] == 14.0
    grad = x.grad.to_numpy()
    assert not np.allclose(grad, [2.0, 4.0, 6.0]), fixed("reverse mode of plain stores",
                                                         "tisim/core/model.py (steps add into x[t+1])")
    np.testing.assert_array_equal(grad, [2.0, 8.0, 18.0])


def test_loading_before_storing(tmp_path):
    """Compiling the reverse of entry stores into a local vector, or of a matrix product, warns of a load."""
    run = run_script(tmp_path, """
        @ti.kernel
        def entry_stores(x: ti.types.ndarray(), total: ti.types.ndarray()):
            for i in range(x.shape[0]):
                n = ti.Vector([0.0, 0.0])
                n[0] = x[i]
                n[1] = 2.0 * x[i]
                total[0] += n.norm_sqr()

        @ti.kernel
        def product(x: ti.types.ndarray(), total: ti.types.ndarray()):
            for i in range(x.shape[0]):
                m = ti.Matrix([[x[i], 1.0], [0.0, x[i]]])
                total[0] += (m @ ti.Vector([1.0, 2.0])).norm_sqr()

        for kernel in (entry_stores, product):
            x, total = ti.ndarray(ti.f64, 3, needs_grad=True), ti.ndarray(ti.f64, 1, needs_grad=True)
            x.from_numpy(np.array([1.0, 2.0, 3.0]))
            total.fill(0.0)
            kernel(x, total)
            total.grad.fill(1.0)
            kernel.grad(x, total)
            print("GRAD", kernel.__name__, x.grad.to_numpy().tolist(), flush=True)
    """, cache=False)  # a kernel found in the offline cache is not compiled, so it would not warn
    assert run.returncode == 0, run.stderr[-3000:]
    # |(x, 2x)|^2 = 5 x^2; |(x + 2, 2x)|^2 = 5 x^2 + 4 x + 4
    assert "GRAD entry_stores [10.0, 20.0, 30.0]" in run.stdout and "GRAD product [14.0, 24.0, 34.0]" in run.stdout
    output = run.stdout + run.stderr
    assert "before anything is stored to it" in output, fixed(
        "the 'loading before storing' warning", "tisim/systems/mpm/system.py (F' computed once per point), "
        "tisim/physics/contact.py point_box and tisim/systems/stiff_chain.py (vectors built whole)")
    assert "n[0] = x[i]" in output and "_matmul_helper" in output, output[-3000:]


@ti.func
def add_squares(x: ti.template(), total: ti.template(), scale):
    for i in range(x.shape[0]):
        total[0] += scale * x[i] ** 2


@ti.func
def add_squares_template(x: ti.template(), total: ti.template(), scale: ti.template()):
    for i in range(x.shape[0]):
        total[0] += scale * x[i] ** 2


@ti.kernel
def squares_by_value(x: ti.types.ndarray(), total: ti.types.ndarray()):
    add_squares(x, total, 2.0)


@ti.kernel
def squares_by_template(x: ti.types.ndarray(), total: ti.types.ndarray()):
    add_squares_template(x, total, 2.0)


def test_mixed_loops_and_statements():
    """A one-loop ti.func with a by-value argument at kernel top level makes the reverse refused."""
    x, total = with_grads([1.0, 2.0, 3.0]), with_grads([0.0])
    error = raised(lambda: reverse(squares_by_value, x, total))
    assert error is not None, fixed("mixed loops and statements in reverse mode",
                                    "tisim/core/model.py (_rollout: one top-level loop, template arguments)")
    assert "Mixed usage of for-loops and statements" in str(error)
    x, total = with_grads([1.0, 2.0, 3.0]), with_grads([0.0])
    reverse(squares_by_template, x, total)
    np.testing.assert_array_equal(x.grad.to_numpy(), [4.0, 8.0, 12.0])


@ti.kernel
def sibling_loops(k: ti.types.ndarray(), x: ti.types.ndarray(ndim=2), f: ti.types.ndarray(ndim=2),
                  total: ti.types.ndarray()):
    for b in range(x.shape[0]):
        for s in range(x.shape[1]):
            f[b, s] += k[0] * x[b, s]
        for i in range(x.shape[1]):
            total[0] += f[b, i] ** 2


@ti.kernel
def first_phase(k: ti.types.ndarray(), x: ti.types.ndarray(ndim=2), f: ti.types.ndarray(ndim=2),
                total: ti.types.ndarray()):
    for b, s in ti.ndrange(x.shape[0], x.shape[1]):
        f[b, s] += k[0] * x[b, s]


@ti.kernel
def second_phase(k: ti.types.ndarray(), x: ti.types.ndarray(ndim=2), f: ti.types.ndarray(ndim=2),
                 total: ti.types.ndarray()):
    for b, i in ti.ndrange(x.shape[0], x.shape[1]):
        total[0] += f[b, i] ** 2


def test_sibling_inner_loops():
    """Sibling inner loops passing values through an array: values right, dL/dk = 0, not 55."""
    results = []
    for kernels in ([sibling_loops], [first_phase, second_phase]):
        k, x = with_grads([0.5]), with_grads(np.arange(6.0).reshape(2, 3))
        f, total = with_grads(np.zeros((2, 3))), with_grads([0.0])
        for kernel in kernels:
            kernel(k, x, f, total)
        total.grad.fill(1.0)
        for kernel in reversed(kernels):
            kernel.grad(k, x, f, total)
        results.append((total.to_numpy()[0], k.grad.to_numpy()[0], x.grad.to_numpy()))
    (fused, fused_dk, fused_dx), (phased, phased_dk, phased_dx) = results
    assert fused == phased == 13.75
    assert phased_dk == 55.0 and np.array_equal(phased_dx, 0.5 * np.arange(6.0).reshape(2, 3))
    assert fused_dk != phased_dk, fixed("sibling inner loops in reverse mode",
                                        "tisim/core/phases.py (a launch per step, each phase a top-level loop)")
    assert fused_dk == 0.0 and not fused_dx.any()


@ti.kernel
def local_before_loop(x: ti.types.ndarray(), total: ti.types.ndarray()):
    for i in range(x.shape[0]):
        a = 2.0 * x[i]
        for _ in range(3):
            total[0] += a * a


@ti.kernel
def local_inside_loop(x: ti.types.ndarray(), total: ti.types.ndarray()):
    for i in range(x.shape[0]):
        for _ in range(3):
            a = 2.0 * x[i]
            total[0] += a * a


def test_locals_across_a_dynamic_loop():
    """A local set before a dynamic loop and read in it gets one iteration's derivative (8 x for 24 x)."""
    grads = []
    for kernel in (local_before_loop, local_inside_loop):
        x, total = with_grads([1.0, 2.0, 3.0]), with_grads([0.0])
        reverse(kernel, x, total)
        assert total.to_numpy()[0] == 168.0
        grads.append(x.grad.to_numpy())
    before, inside = grads
    np.testing.assert_array_equal(inside, [24.0, 48.0, 72.0])
    assert not np.array_equal(before, inside), fixed(
        "locals read across a dynamic loop in reverse mode",
        "tisim/core/model.py (steps read everything inside the loop), tests/itemwise_mass_spring.py step")
    np.testing.assert_array_equal(before, [8.0, 16.0, 24.0])


@ti.kernel
def with_while(x: ti.types.ndarray(), total: ti.types.ndarray()):
    for i in range(x.shape[0]):
        n = 0
        while n < 3:
            n += 1
        total[0] += n * x[i] ** 2


@ti.kernel
def with_break(x: ti.types.ndarray(), total: ti.types.ndarray()):
    for i in range(x.shape[0]):
        for k in range(5):
            if k == 3:
                break
            total[0] += x[i] ** 2


def test_while_and_break():
    """Reverse mode refuses a kernel with a while loop or a break, even one that no derivative passes through."""
    for kernel in (with_while, with_break):
        x, total = with_grads([1.0, 2.0, 3.0]), with_grads([0.0])
        error = raised(lambda: reverse(kernel, x, total))
        assert error is not None, fixed(f"reverse mode of {kernel.__name__.replace('with_', '')}",
                                        "tisim/systems/stiff_chain.py (a fixed number of Newton steps)")
        assert "Not supported" in str(error)


# ---- stop-gradient -----------------------------------------------------------------------------------------------
@ti.kernel
def bit_cast_round_trip(x: ti.types.ndarray(), total: ti.types.ndarray()):
    for i in range(x.shape[0]):
        frozen = ti.bit_cast(ti.bit_cast(x[i], ti.i64), ti.f64)
        total[0] += frozen * x[i]


@ti.kernel
def stop_grad_of_local(x: ti.types.ndarray(), total: ti.types.ndarray()):
    for i in range(x.shape[0]):
        frozen = x[i] * 1.0
        ti.stop_grad(frozen)
        total[0] += frozen * x[i]


@ti.kernel
def detached(x: ti.types.ndarray(), total: ti.types.ndarray()):
    for i in range(x.shape[0]):
        total[0] += detach(x[i]) * x[i]


def test_no_stop_gradient_for_locals():
    """ti.stop_grad refuses a local and a bit_cast round trip keeps the derivative; detach works."""
    error = raised(lambda: reverse(stop_grad_of_local, with_grads([1.0, 2.0, 3.0]), with_grads([0.0])))
    assert error is not None, fixed("ti.stop_grad of a local", "tisim/autodiff/implicit.py (detach)")
    assert "snode" in str(error)
    grads = []
    for kernel in (bit_cast_round_trip, detached):
        x, total = with_grads([1.0, 2.0, 3.0]), with_grads([0.0])
        reverse(kernel, x, total)
        assert total.to_numpy()[0] == 14.0
        grads.append(x.grad.to_numpy())
    assert not np.array_equal(grads[0], [1.0, 2.0, 3.0]), fixed("the bit_cast round trip's derivative",
                                                                 "tisim/autodiff/implicit.py (detach)")
    np.testing.assert_array_equal(grads[0], [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(grads[1], [1.0, 2.0, 3.0])


# ---- forward mode ------------------------------------------------------------------------------------------------
@ti.kernel
def scaled_vector(x: ti.template(), y: ti.template()):
    for i in range(x.shape[0]):
        v = ti.Vector([x[i], x[i]]) * 2.0
        y[i] = v[0]


@ti.kernel
def with_scalars(x: ti.template(), y: ti.template()):
    for i in range(x.shape[0]):
        y[i] = 2.0 * x[i]


@ti.kernel
def through_floor(x: ti.template(), y: ti.template()):
    for i in range(x.shape[0]):
        y[i] = x[i] + ti.floor(x[i] * 4.0) / 4.0


def tangent(kernel, x, y):
    with ti.ad.FwdMode(loss=y, param=x, seed=[1.0, 1.0, 1.0], clear_gradients=False):
        kernel(x, y)
    return y.dual.to_numpy()


def test_forward_mode_on_vector_locals():
    """Forward mode fails to compile arithmetic on a ti.Vector local ("UnaryOpStmt"); the same in scalars works."""
    x, y = field_tree(3, 3, dual=True)
    x.from_numpy(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(tangent(with_scalars, x, y), [2.0, 2.0, 2.0])
    error = raised(lambda: tangent(scaled_vector, x, y))
    assert error is not None, fixed("forward mode of vector locals",
                                    "tisim/autodiff/forward_mode.py (_forward_steps' NotImplementedError)")
    assert "UnaryOpStmt" in str(error)


def test_forward_mode_through_floor():
    """Forward mode refuses ti.floor ("Not supported"), so tisim's detach cannot run in forward mode."""
    x, y = field_tree(3, 3, dual=True)
    x.from_numpy(np.array([1.0, 2.0, 3.0]))
    error = raised(lambda: tangent(through_floor, x, y))
    assert error is not None, fixed("forward mode through floor",
                                    "tisim/autodiff/forward_mode.py (StiffChain refused by name)")
    assert "Not supported" in str(error)


def test_dual_numbers_on_fields_only():
    """An ndarray cannot carry dual numbers (no needs_dual), so forward mode runs on fields."""
    error = raised(lambda: ti.ndarray(ti.f64, 3, needs_dual=True))
    assert error is not None, fixed("dual numbers on ndarrays", "tisim/autodiff/forward_mode.py (_Fields) and "
                                    "tisim/core/model.py (_rollout_fields)")
    assert isinstance(error, TypeError) and "needs_dual" in str(error)


# ---- ti.ad.Tape --------------------------------------------------------------------------------------------------
@ti.kernel
def field_squares(x: ti.template(), total: ti.template()):
    for i in range(x.shape[0]):
        total[None] += x[i] ** 2


@ti.kernel
def squares(x: ti.types.ndarray(), total: ti.types.ndarray()):
    for i in range(x.shape[0]):
        total[0] += x[i] ** 2


def test_tape_clears_every_field():
    """A Tape zeroes every field's gradient, unread ones included, and no ndarray's."""
    x, total, other = field_tree(3, (), 4, grad=True)
    x.from_numpy(np.array([1.0, 2.0, 3.0]))
    other.grad.fill(5.0)
    with ti.ad.Tape(loss=total):
        field_squares(x, total)
    np.testing.assert_array_equal(x.grad.to_numpy(), [2.0, 4.0, 6.0])
    assert not other.grad.to_numpy().any(), fixed("Tape's clearing of every field",
                                                  "tisim/core/trajectory.py (prepare_grads)")
    x, total = with_grads([1.0, 2.0, 3.0]), with_grads([0.0])
    for _ in range(2):
        with ti.ad.Tape(loss=total):
            squares(x, total)
    assert not np.array_equal(x.grad.to_numpy(), [2.0, 4.0, 6.0]), fixed(
        "Tape's clearing of ndarray gradients", "tisim/core/trajectory.py (prepare_grads)")
    np.testing.assert_array_equal(x.grad.to_numpy(), [4.0, 8.0, 12.0])


def test_one_tape_at_a_time():
    """A Tape entered inside another ends the outer one's recording when it exits."""
    x, total = with_grads([1.0, 2.0, 3.0]), with_grads([0.0])
    y, other = with_grads([1.0, 1.0, 1.0]), with_grads([0.0])
    with ti.ad.Tape(loss=total):
        squares(x, total)
        with ti.ad.Tape(loss=other):
            squares(y, other)
        squares(x, total)
    assert total.to_numpy()[0] == 28.0
    np.testing.assert_array_equal(y.grad.to_numpy(), [2.0, 2.0, 2.0])
    assert not np.array_equal(x.grad.to_numpy(), [4.0, 8.0, 12.0]), fixed(
        "overlapping Tapes", "tisim/core/engine.py (the backward pass launches the .grad kernels itself)")
    np.testing.assert_array_equal(x.grad.to_numpy(), [2.0, 4.0, 6.0])


# ---- runtime -----------------------------------------------------------------------------------------------------
def test_cpu_loop_blocks(tmp_path):
    """On two CPU threads a range loop runs in blocks of max(512, n / 2) iterations, each on one thread."""
    run = run_script(tmp_path, """
        @ti.kernel
        def owners(thread: ti.types.ndarray(), busy: ti.types.ndarray()):
            for i in range(thread.shape[0]):
                s = 0.0
                for k in range(2000):  # enough work that both threads take blocks
                    s += ti.sin(s + k)
                busy[i] = s
                thread[i] = ti.global_thread_idx()

        for n in (512, 1100, 5000):
            thread, busy = ti.ndarray(ti.i32, n), ti.ndarray(ti.f64, n)
            owners(thread, busy)
            print("OWNERS", n, thread.to_numpy().tolist())
    """, threads=2)
    assert run.returncode == 0, run.stderr[-3000:]
    seen = set()
    for line in run.stdout.splitlines():
        if not line.startswith("OWNERS"):
            continue
        n, owners = int(line.split()[1]), np.array(json.loads(line.split(" ", 2)[2]))
        seen.add(n)
        block = max(512, -(-n // 2))
        for start in range(0, n, block):
            assert len(set(owners[start:start + block])) == 1, changed(
                f"how CPU range loops are split (n = {n}: {np.flatnonzero(np.diff(owners)) + 1} changes of thread)",
                "tests/test_threads.py (batches large enough to run on both threads)")
        assert set(owners) <= {0, 1}
    assert seen == {512, 1100, 5000}, run.stdout[-2000:]


def test_late_ndarray_finalizer(tmp_path):
    """An ndarray of a program ended by ti.reset, freed after ti.init, asks the new program to free it."""
    run = run_script(tmp_path, """
        import gc
        from taichi.lang import impl

        old = ti.ndarray(ti.f64, 8)
        ti.reset()
        ti.init(arch=ti.cpu, default_fp=ti.f64, fast_math=False, cpu_max_num_threads=1, log_level=ti.WARN)
        live, asked = impl.get_runtime().prog, []

        class Watched:
            def __getattr__(self, name):
                return getattr(live, name)

            def delete_ndarray(self, array):
                asked.append(array)

        impl.get_runtime().prog = Watched()
        del old
        gc.collect()
        impl.get_runtime().prog = live
        print("ASKED", len(asked))
    """)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "ASKED" in run.stdout, run.stdout
    assert "ASKED 1" in run.stdout, fixed("the late ndarray finalizer", "tisim/core/runtime.py (_detach_from_program)")


def test_kept_cpu_launch_context(tmp_path):
    """A kept CPU launch context breaks an ndarray set the usual way at its second launch, not a pointer."""
    run = run_script(tmp_path, """
        from taichi.lang import impl

        @ti.kernel
        def add_one(a: ti.types.ndarray(ndim=1)):
            for i in range(a.shape[0]):
                a[i] += 1.0

        prog = impl.get_runtime().prog
        for how in ("pointer", "ndarray"):
            a = ti.ndarray(ti.f64, 8)
            a.fill(0.0)
            kernel = add_one._primal
            compiled = kernel.compiled_kernels[kernel.ensure_compiled(a)]
            data = prog.compile_kernel(prog.config(), prog.get_device_caps(), compiled)
            context = compiled.make_launch_context()
            if how == "pointer":
                context.set_arg_external_array_with_shape((0,), prog.get_ndarray_data_ptr_as_int(a.arr), 64, [8], 0)
            else:
                context.set_arg_ndarray((0,), a.arr)
            for _ in range(3):
                prog.launch_kernel(data, context)
            print("LAUNCHED", how, a.to_numpy().tolist(), flush=True)
    """)
    assert "LAUNCHED pointer [3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0]" in run.stdout, run.stdout + run.stderr[-3000:]
    assert "LAUNCHED ndarray" not in run.stdout, fixed("kept CPU launch contexts with ndarray arguments",
                                                       "tisim/core/launch.py (raw pointers in _BoundCall)")
    assert run.returncode != 0 and "invalid DeviceAllocation" in run.stderr


def test_512_snode_trees(tmp_path):
    """The 512th field tree of a process crashes it (a segmentation fault, no Python error) when first used."""
    run = run_script(tmp_path, """
        for k in range(520):
            builder = ti.FieldsBuilder()
            field = ti.field(ti.f64)
            builder.dense(ti.i, 1).place(field)
            builder.finalize()
            if k >= 509:
                field.fill(1.0)
                print("USED TREE", k, flush=True)
        print("ALL TREES USED")
    """)
    assert "USED TREE 510" in run.stdout, run.stdout + run.stderr[-3000:]
    assert "ALL TREES USED" not in run.stdout and run.returncode != 0, fixed(
        "the limit of 512 field trees", "tisim/core/runtime.py (arrays as ndarrays; one field tree per structure)")
    assert "USED TREE 511" not in run.stdout and run.returncode < 0  # killed by a signal


def test_sources_edited_after_import(tmp_path):
    """Kernel sources are read at the first call: an edit after import runs, inserted lines misplace it."""
    (tmp_path / "kernels.py").write_text(textwrap.dedent("""\
        import taichi as ti


        @ti.kernel
        def first(out: ti.types.ndarray()):
            for i in range(out.shape[0]):
                out[i] = 1.0


        @ti.kernel
        def second(out: ti.types.ndarray()):
            for i in range(out.shape[0]):
                out[i] = 1.0
    """))
    run = run_script(tmp_path, """
        import pathlib
        import sys

        sys.path.insert(0, str(pathlib.Path(__file__).parent))
        import kernels

        path = pathlib.Path(kernels.__file__)
        path.write_text(path.read_text().replace("out[i] = 1.0", "out[i] = 2.0", 1))
        out = ti.ndarray(ti.f64, 2)
        kernels.first(out)
        print("FIRST", out.to_numpy().tolist())
        path.write_text("# two lines\\n# inserted\\n" + path.read_text())
        out.fill(0.0)
        kernels.second(out)
        print("SECOND", out.to_numpy().tolist())
    """, cache=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "FIRST" in run.stdout, run.stdout
    assert "FIRST [1.0, 1.0]" not in run.stdout, fixed("reading kernel sources at the first call",
                                                      "nothing in tisim (the page's advice)")
    assert "FIRST [2.0, 2.0]" in run.stdout
    assert "SECOND [2.0, 2.0]" in run.stdout, run.stdout  # first's edited body; its own stores 1.0


def test_kernels_need_a_source_file():
    """A kernel defined in `python -c` cannot compile: Taichi finds no source file to read it from."""
    code = ("import taichi as ti\nti.init(arch=ti.cpu, log_level=ti.WARN)\n\n@ti.kernel\ndef one() -> ti.i32:\n"
            "    return 1\n\nprint('VALUE', one())\n")
    run = subprocess.run([sys.executable, "-c", code], env=environment(), capture_output=True, text=True,
                         timeout=SCRIPT_TIMEOUT)
    assert run.returncode != 0 and "VALUE 1" not in run.stdout, fixed(
        "kernels defined without a source file", "tests/test_docs.py and tests/test_adding_a_system.py (code "
        "written to a module)")
    assert "Cannot find source code" in run.stderr


SCALE = 2.0


@ti.kernel
def fill_scale(out: ti.types.ndarray()):
    for i in range(out.shape[0]):
        out[i] = SCALE


def test_python_values_are_constants():
    """A Python global read by a kernel is frozen when the kernel compiles: changing it later changes nothing."""
    global SCALE
    out = ti.ndarray(ti.f64, 2)
    try:
        fill_scale(out)
        SCALE = 3.0
        fill_scale(out)
    finally:
        SCALE = 2.0
    assert out.to_numpy().tolist() == [2.0, 2.0], fixed(
        "Python values frozen at compile time", "tisim/core/model.py (model_of keys a model by its tables)")


@ti.data_oriented
class Host:
    @ti.kernel
    def fill(self, out: ti.types.ndarray()):
        for i in range(out.shape[0]):
            out[i] = 1.0


def test_data_oriented_instances():
    """A @ti.data_oriented class's kernel compiles once per instance, not once per class."""
    compiled = Host.fill._primal.compiled_kernels
    out, before = ti.ndarray(ti.f64, 2), len(compiled)
    first, second = Host(), Host()
    for host in (first, second, first):
        host.fill(out)
    assert len(compiled) - before == 2, fixed("compiling data-oriented kernels per instance",
                                              "tisim/core/runtime.py (host)")
    del first, second
    gc.collect()


def test_deprecation_warning_at_import():
    """`import taichi` warns (locale.getdefaultlocale is deprecated), so -W error cannot even import it."""
    run = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", "import taichi"],
                         env=environment(), capture_output=True, text=True, timeout=SCRIPT_TIMEOUT)
    assert run.returncode != 0, fixed("the DeprecationWarning at import", "tisim/core/runtime.py (its import)")
    assert "getdefaultlocale" in run.stderr


def test_unwritable_cache_folder(tmp_path):
    """With no writable offline-cache folder the results are right and the process crashes at exit."""
    home = tmp_path / "home"
    home.write_text("not a folder")
    env = environment(HOME=str(home), TI_OFFLINE_CACHE_FILE_PATH=None, XDG_CACHE_HOME=None)
    run = run_script(tmp_path, """
        @ti.kernel
        def double(a: ti.types.ndarray()):
            for i in range(a.shape[0]):
                a[i] = 2.0 * i

        a = ti.ndarray(ti.f64, 4)
        double(a)
        print("VALUES", a.to_numpy().tolist(), flush=True)
    """, env=env)
    assert "VALUES [0.0, 2.0, 4.0, 6.0]" in run.stdout, run.stdout + run.stderr[-3000:]
    assert run.returncode != 0, fixed("the crash at exit without a writable cache folder",
                                      "tisim/core/runtime.py (_cache_folder)")


def test_no_sinh_or_cosh():
    """Taichi has tanh but no sinh or cosh."""
    assert hasattr(ti, "tanh")
    assert not any(hasattr(module, name) for module in (ti, ti.math) for name in ("sinh", "cosh")), fixed(
        "the missing sinh and cosh", "tisim/physics/complementarity.py (_barrier)")
