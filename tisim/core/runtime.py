"""The Taichi runtime: the one place that calls ``ti.init`` and owns compiled-kernel lifetime.

Every array a simulator holds is a ``ti.ndarray`` and every kernel takes its arrays as arguments. Kernels therefore
compile once per system class and structure (not once per simulator), and field trees are made once per structure
(MassSpring's topology; forward mode's buffers, per buffer size too), so a process can create and discard any number of
simulators (Taichi's field trees run out at 512 per process).
"""
import gc
import os
import tempfile
import warnings
import weakref

os.environ.setdefault("TI_SKIP_VERSION_CHECK", "ON")  # no network here; the check only delays start-up
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # taichi calls locale.getdefaultlocale at import
    import taichi as ti
    from taichi._snode.snode_tree import SNodeTree
    from taichi.lang._ndarray import Ndarray

ARCHS = {"cpu": ti.cpu, "cuda": ti.cuda, "vulkan": ti.vulkan, "metal": ti.metal, "gpu": ti.gpu}
PRECISIONS = {"f32": ti.f32, "f64": ti.f64}
CACHE_BYTES = 1 << 30  # the offline cache's size limit (Taichi's default is 100 MB: see init)

_settings = None  # the settings of the live runtime, or None before the first init
_generation = 0  # bumped by every (re)initialization; arrays of an older generation are dead
_hosts = {}  # (class, structure) -> the shared instance that kernels are compiled on
_bound_calls = weakref.WeakSet()  # every Launches (tisim/core/launch.py): they hold handles into the live program
_emptied_on_restart = set()  # classes whose instances a restart empties wherever they are held (see below)


def _cache_folder(path):
    """A writable offline-cache folder: the argument, else TI_OFFLINE_CACHE_FILE_PATH, else ~/.cache, else /tmp."""
    candidates = [path, os.environ.get("TI_OFFLINE_CACHE_FILE_PATH"),
                  os.path.join(os.path.expanduser("~"), ".cache", "tisim", "taichi"),
                  os.path.join(tempfile.gettempdir(), "tisim-taichi-cache")]
    for folder in filter(None, candidates):
        try:
            os.makedirs(folder, exist_ok=True)
            if os.access(folder, os.W_OK):
                return folder
        except OSError:
            continue
    raise RuntimeError("tisim.init: no writable folder for Taichi's offline cache; pass cache_folder=")


def init(arch="cpu", precision="f64", deterministic=False, threads=None, debug=False, cache_folder=None):
    """Start (or keep) the Taichi runtime. Idempotent: the same settings again do nothing.

    Main arguments:
        arch: "cpu", "cuda", "vulkan", "metal" or "gpu" (Taichi picks a GPU backend).
        precision: "f64" (default; what gradient checks need) or "f32".
    Other arguments:
        deterministic: run on one CPU thread so results are bitwise reproducible run to run (atomic additions from
            several threads land in varying order and differ in the last bits).
        threads: CPU threads (default: all cores); must be None or 1 when deterministic.
        debug: Taichi's debug mode (bounds checks; global-data-access checks in gradient tests); about 3x slower.
        cache_folder: where compiled kernels are kept between processes.

    Calling again with different settings restarts Taichi: simulators made before then stop working and say so.
    """
    global _settings, _generation
    if arch not in ARCHS:
        raise ValueError(f"tisim.init: arch must be one of {sorted(ARCHS)}, got {arch!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"tisim.init: precision must be one of {sorted(PRECISIONS)}, got {precision!r}")
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"tisim.init: threads must be a positive int or None, got {threads!r}")
    if deterministic and threads not in (None, 1):
        raise ValueError(f"tisim.init: deterministic=True runs on one thread; got threads={threads}")
    threads = 1 if deterministic else threads
    settings = dict(arch=arch, precision=precision, deterministic=bool(deterministic), threads=threads,
                    debug=bool(debug))
    if settings == _settings:
        return
    if _settings is not None:
        # bound calls hold handles to compiled kernels that the old program owns: drop them while it still exists
        for calls in list(_bound_calls):
            calls.clear()
        _detach_from_program()
        ti.reset()
    options = dict(arch=ARCHS[arch], default_fp=PRECISIONS[precision], debug=debug, fast_math=False,
                   offline_cache=True, log_level=ti.WARN)
    folder = _cache_folder(cache_folder)
    if folder != os.environ.get("TI_OFFLINE_CACHE_FILE_PATH"):  # Taichi warns when an argument overrides the variable
        options["offline_cache_file_path"] = folder
    if threads is not None:
        options["cpu_max_num_threads"] = threads
    if "TI_OFFLINE_CACHE_MAX_SIZE_OF_FILES" not in os.environ:
        # Taichi drops the least recently used quarter of its cache once the folder passes 100 MB. One MPM model's
        # kernels take a few MB and tisim's tests about 130 MB, so a session using a few systems kept evicting
        # kernels it would compile again (half a minute each for MPM's backward pass).
        options["offline_cache_max_size_of_files"] = CACHE_BYTES
    ti.init(**options)
    _settings = settings
    _generation += 1
    _hosts.clear()


class _Retired:
    """Mixed into an array of a finished program: freeing it no longer asks the live program to free it."""

    def __del__(self):
        pass


_retired_classes = {}


def _detach_from_program():
    """Before a restart: make the program about to end unreachable from every Python object, so that it ends with the
    restart and nothing later reaches into the next one.

    Two Taichi 1.7.4 behaviours make this necessary (both seen in CI runs as crashes long after a restart):
    - A field tree (``SNodeTree``, from ``FieldsBuilder.finalize``; MassSpring's topology, forward mode's fields)
      keeps a reference to its program. A simulator kept past a restart kept the old program alive, and when the
      simulator was collected later the old program's destructor freed its arrays' memory a second time: memory
      the new program had handed out again (a segfault in the next kernel).
    - An ndarray is freed by asking the *live* program to free the object at its address. An old array freed after
      a restart could free a new array that reuses that address ("invalid DeviceAllocation", "argument not found").
    Field trees and bound kernel calls (tisim/core/launch.py) forget their program; arrays get a class whose finalizer
    does nothing. ``gc.get_objects()`` finds them wherever they are held (by users, or as garbage not yet collected).
    """
    for obj in gc.get_objects():
        cls = type(obj)  # not isinstance: that reads __class__, which some objects (torch's) warn on
        if cls is SNodeTree:
            obj.prog = None
        elif cls in _emptied_on_restart:  # a bound call still held after its Launches was cleared (a kept traceback)
            obj.__dict__.clear()
        elif issubclass(cls, Ndarray) and not issubclass(cls, _Retired):
            if cls not in _retired_classes:
                _retired_classes[cls] = type("Retired" + cls.__name__, (_Retired, cls), {})
            obj.__class__ = _retired_classes[cls]


def hold_launches(launches):
    """Register a Launches (tisim/core/launch.py): a restart clears its bound calls while the old program still
    exists."""
    _bound_calls.add(launches)


def empty_on_restart(cls):
    """Instances of ``cls`` hold handles into the live program: a restart empties every one (tisim/core/launch.py
    registers its bound call; this module imports nothing of tisim, so imports point one way)."""
    _emptied_on_restart.add(cls)
    return cls


def ensure_init():
    """Initialize with the defaults unless the user already chose settings."""
    if _settings is None:
        init()


def current():
    """The live runtime's settings (a copy), or None before the first init; starts nothing."""
    return None if _settings is None else dict(_settings)


def settings():
    """The live runtime's settings (a copy), initializing with the defaults first if needed."""
    ensure_init()
    return dict(_settings)


def generation():
    return _generation


def real():
    """The Taichi float type of the live runtime."""
    ensure_init()
    return PRECISIONS[_settings["precision"]]


def numpy_real():
    import numpy as np
    return np.float64 if settings()["precision"] == "f64" else np.float32


def host(key, make):
    """The object that kernels run on for ``key`` (a class and its structure), made by ``make()`` once per runtime.

    Taichi compiles a ``@ti.data_oriented`` kernel once per instance. Routing every call through one bare instance per
    (class, structure) compiles it once per class instead, and lets simulators come and go without recompiling.
    """
    ensure_init()
    if key not in _hosts:
        _hosts[key] = make()
    return _hosts[key]
