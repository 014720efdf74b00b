"""Test settings: float64, one thread (bitwise reproducible), an offline kernel cache inside the checkout."""
import os

import pytest

os.environ.setdefault("TI_SKIP_VERSION_CHECK", "ON")
os.environ.setdefault("TI_OFFLINE_CACHE_FILE_PATH",
                      os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".cache", "taichi"))
os.environ.setdefault("MPLBACKEND", "Agg")

import tisim  # noqa: E402

TEST_SETTINGS = dict(arch="cpu", precision="f64", deterministic=True)


@pytest.fixture(autouse=True)
def runtime():
    """Every test starts on the test runtime (a no-op unless a test changed it)."""
    tisim.init(**TEST_SETTINGS)
    yield
