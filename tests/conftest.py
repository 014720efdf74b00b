"""Test settings: float64, one thread (bitwise reproducible), an offline kernel cache inside the checkout."""
import importlib.util
import os
import pathlib

import pytest

os.environ.setdefault("TI_SKIP_VERSION_CHECK", "ON")
os.environ.setdefault("TI_OFFLINE_CACHE_FILE_PATH",
                      os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".cache", "taichi"))
os.environ.setdefault("MPLBACKEND", "Agg")

import tisim  # noqa: E402

# TISIM_TEST_ARCH=cuda runs the suite on a GPU (benchmarks/gpu_check.sh); CI and `make test` use the CPU
TEST_SETTINGS = dict(arch=os.environ.get("TISIM_TEST_ARCH", "cpu"), precision="f64", deterministic=True)


@pytest.fixture(autouse=True)
def runtime():
    """Every test starts on the test runtime (a no-op unless a test changed it)."""
    tisim.init(**TEST_SETTINGS)
    yield


def load_demo(name):
    """A demo script from demos/ as a module (demos/ is not a package); nothing runs at import."""
    path = pathlib.Path(__file__).resolve().parent.parent / "demos" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
