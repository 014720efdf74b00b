"""Test settings: float64, one thread (bitwise reproducible), an offline kernel cache inside the checkout; last-bit
perturbations for tests of outcomes that rounding could change."""
import contextlib
import importlib.util
import os
import pathlib
import sys

import pytest

os.environ.setdefault("TI_SKIP_VERSION_CHECK", "ON")
os.environ.setdefault("TI_OFFLINE_CACHE_FILE_PATH",
                      os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".cache", "taichi"))
os.environ.setdefault("MPLBACKEND", "Agg")

import tisim  # noqa: E402
import tisim.core.phases  # noqa: E402
import tisim.diagnostics  # noqa: E402

# TISIM_TEST_ARCH=cuda runs the suite on a GPU (benchmarks/gpu_check.sh); CI and `make test` use the CPU.
# TISIM_TEST_THREADS=2 runs it on two threads, the parallel kernels users get by default (tests/test_threads.py
# compares them with one thread in make test); otherwise one thread, bitwise reproducible.
THREADS = int(os.environ.get("TISIM_TEST_THREADS", "1"))
TEST_SETTINGS = dict(arch=os.environ.get("TISIM_TEST_ARCH", "cpu"), precision="f64", deterministic=THREADS == 1,
                     threads=None if THREADS == 1 else THREADS)
if THREADS > 1:  # a step's item loops run parallel on machines of more threads than SERIAL_THREADS: check them here
    tisim.core.phases.SERIAL_THREADS = 1


@pytest.fixture(autouse=True)
def runtime():
    """Every test starts on the test runtime (a no-op unless a test changed it)."""
    tisim.init(**TEST_SETTINGS)
    yield


DEMOS = pathlib.Path(__file__).resolve().parent.parent / "demos"


def load_demo(name):
    """A demo script from demos/ as a module (demos/ is not a package); nothing runs at import. A demo may import
    another, as it does when run as a script from demos/."""
    if str(DEMOS) not in sys.path:
        sys.path.append(str(DEMOS))
    path = DEMOS / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- last-bit perturbations ------------------------------------------------------------------------------------------
# Another x86-64 CPU rounds differently in the last bits (Taichi compiles for the host CPU; numpy's BLAS picks its
# kernels per CPU), and an optimization, a chaotic rollout or a statistic can turn that into a different answer. A test
# marked @pytest.mark.perturbed runs once exactly and once per seed below with every input that reaches a simulator
# (parameters, initial states, actions: each set_* call, so every optimizer iterate too) shrunk toward zero by a
# random relative 1e-12 (tisim.diagnostics.last_bits).
LAST_BITS = 1e-12
PERTURBATIONS = {"exact": None, "last-bits-1": 1, "last-bits-2": 2}


def pytest_configure(config):
    config.addinivalue_line("markers", "perturbed: run once exactly and under last-bit perturbations of every input "
                                       "(tests/conftest.py)")
    config.addinivalue_line("markers", "stress: long, run by make stress rather than make test (a second referee "
                                       "of what faster tests already check, or a long soak)")


# ---- the order the files start in ----------------------------------------------------------------------------------
# make test hands whole files to two workers (pytest-xdist's loadfile, in collection order: --no-loadscope-reorder),
# so the longest files go first and the short ones fill the end, and both workers finish together (longest first:
# Graham's rule for scheduling). Approximate seconds on a cold kernel cache, 2 cores; files not listed follow in
# their usual order. Only the schedule depends on this list, never a result.
LONGEST_FIRST = ("test_mpm_gradients.py", "test_articulation_contact.py", "test_demos.py", "test_docs.py",
                 "test_contract.py", "test_gui.py", "test_threads.py", "test_complementarity.py", "test_mpm.py",
                 "test_nn.py", "test_surface.py", "test_policy_training.py", "test_articulation_quaternions.py",
                 "test_sweep.py", "test_scene.py", "test_mass_spring.py", "test_mass_spring_3d.py",
                 "test_articulation.py", "test_billiards.py", "test_tape.py", "test_memory.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


def pytest_generate_tests(metafunc):
    if metafunc.definition.get_closest_marker("perturbed"):
        metafunc.fixturenames.append("last_bits")
        metafunc.parametrize("last_bits", list(PERTURBATIONS.values()), ids=list(PERTURBATIONS))


def perturbed_inputs(seed, size=LAST_BITS):
    """tisim.diagnostics.last_bits for a seed; seed None: inputs unchanged."""
    return contextlib.nullcontext() if seed is None else tisim.diagnostics.last_bits(size, seed)


@pytest.fixture(autouse=True)
def _last_bits(request):
    """Applies the perturbation of a test marked perturbed (see above)."""
    seed = request.node.callspec.params.get("last_bits") if hasattr(request.node, "callspec") else None
    with perturbed_inputs(seed):
        yield
