"""Sweeps: one function run over many configurations, in this process, in worker processes, or on a Ray cluster.

    from tisim import sweep
    result = sweep.run(fit_one, configs, backend="processes", workers=2, folder="out/fits")
    result.values      # what fit_one returned, in the order of configs (None where a job failed)

A configuration and a job's result are data: numbers, strings, booleans, None, lists, dicts with string keys, and
numpy arrays. Taichi's state cannot travel between processes, so each worker process initializes tisim itself, once,
with ``threads`` CPU threads (or deterministically, on one thread); a job builds its simulators from its configuration.

Faults: a job that raises is reported with its configuration and its error and the others go on. A worker process that
dies in the middle of a job (killed, out of memory, a crash) costs that job an attempt; it runs again up to ``retries``
times (Ray's task retries on "ray"; a fresh pool of processes on "processes").

Results folder: with ``folder=``, each job's outcome is written there as it arrives (one .npz per job, data only,
written atomically), and running the same sweep again reads what is there and runs only the jobs without a result
(failed ones run again). In deterministic mode every backend gives the serial backend's results bit for bit.
"""
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import json
import multiprocessing
import os
import pickle
import socket
import time
import traceback

import numpy as np

from tisim.core import runtime
from tisim.optim import snapshot

BACKENDS = ("serial", "processes", "ray")
FORMAT, VERSION = "tisim sweep job", 1
# what a worker inherits from this process: where compiled kernels live, and the version check left off
_INHERITED = ("TI_OFFLINE_CACHE_FILE_PATH", "TI_SKIP_VERSION_CHECK")
_QUIET = {"ENABLE_TAICHI_HEADER_PRINT": "False"}  # one banner per worker would break the progress bar


@dataclasses.dataclass
class Outcome:
    """One job: its configuration, and what it returned or why it failed."""
    index: int  # its place in the list of configurations
    config: dict
    value: object = None  # what the function returned (None if it failed)
    error: str = None  # "TypeName: message" if it failed
    traceback: str = None
    seconds: float = 0.0  # the job's own time, in its worker
    attempts: int = 1  # more than one: a worker died during an earlier attempt (on Ray: Ray's retries are not seen)
    worker: str = ""  # host:pid
    resumed: bool = False  # read from the results folder, not run this time

    @property
    def ok(self):
        return self.error is None


@dataclasses.dataclass
class Result:
    """What ``run`` returns: every job's Outcome in the order of the configurations, and the sweep's figures."""
    outcomes: list
    backend: str
    workers: int
    seconds: float  # wall time of the sweep

    @property
    def values(self):
        return [o.value for o in self.outcomes]

    @property
    def failures(self):
        return [o for o in self.outcomes if not o.ok]

    def summary(self):
        """The figures of the sweep as plain data (what ``table`` prints)."""
        ran = [o for o in self.outcomes if not o.resumed]
        job_seconds = [o.seconds for o in ran]
        return dict(backend=self.backend, workers=self.workers, jobs=len(self.outcomes),
                    done=sum(o.ok for o in self.outcomes), failed=len(self.failures),
                    resumed=len(self.outcomes) - len(ran), retried=sum(o.attempts > 1 for o in ran),
                    seconds=self.seconds, job_seconds_mean=float(np.mean(job_seconds)) if ran else 0.0,
                    job_seconds_max=float(np.max(job_seconds)) if ran else 0.0,
                    jobs_per_second=len(ran) / self.seconds if self.seconds > 0 else 0.0)

    def table(self):
        """A summary table, and one line per failed job with its configuration and error."""
        s = self.summary()
        # Ray retries a task whose worker died without telling the driver: there the count is unknown
        retried = "retries by Ray not counted" if s["backend"] == "ray" else f"{s['retried']} retried after a " \
                                                                               "worker died"
        lines = [f"sweep on {s['backend']} ({s['workers']} worker{'s' if s['workers'] != 1 else ''}): "
                 f"{s['jobs']} jobs, {s['done']} done, {s['failed']} failed, {s['resumed']} resumed from the folder, "
                 f"{retried}",
                 f"  {s['seconds']:.1f} s wall, {s['jobs_per_second']:.2f} jobs/s; a job took "
                 f"{s['job_seconds_mean']:.2f} s on average, {s['job_seconds_max']:.2f} s at most"]
        if s["resumed"] == s["jobs"]:
            lines[1] = "  nothing ran: every job's result was in the folder"
        for o in self.failures:
            lines.append(f"  failed: job {o.index} {_short(o.config)}: {o.error}")
        return "\n".join(lines)


def run(fn, configs, *, backend="serial", workers=None, threads=1, deterministic=False, folder=None, address=None,
        retries=3, progress=True):
    """Run ``fn(config)`` for every configuration; returns a Result.

    Main arguments:
        fn: a function of one configuration returning data (a module-level function, or one defined in a script:
            workers receive it pickled).
        configs: a list of configurations (dicts of data; no two the same).
        backend: "serial" (this process, the default), "processes" (worker processes on this machine) or "ray".
        workers: jobs run at once (default: this machine's cores, or the Ray cluster's CPUs, divided by threads).
        folder: write each outcome there as it arrives, and resume from what is there.
    Other arguments:
        threads: Taichi CPU threads of each worker (Ray reserves that many CPUs a job).
        deterministic: workers run tisim deterministically (one thread), and so does the serial backend (which
            restarts this process's runtime if it ran otherwise): results are then the same bits on every backend.
        address: "ray" only: a running cluster's "host:port" (or the RAY_ADDRESS variable); None starts a local Ray
            instance, as ray.init() does, and stops it at the end.
        retries: how many more times a job runs after a worker died during it.
        progress: a progress bar with done, failed and running counts, and the summary table at the end.
    """
    if not callable(fn):
        raise TypeError(f"sweep.run: fn must be a function of one configuration, got {type(fn).__name__}")
    if backend not in BACKENDS:
        raise ValueError(f"sweep.run: backend must be one of {list(BACKENDS)}, got {backend!r}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"sweep.run: workers must be a positive int or None, got {workers!r}")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"sweep.run: threads must be a positive int, got {threads!r}")
    if deterministic and threads != 1:
        raise ValueError(f"sweep.run: deterministic=True runs each worker on one thread; got threads={threads}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"sweep.run: retries must be an int >= 0, got {retries!r}")
    if address is not None and backend != "ray":
        raise ValueError(f"sweep.run: address is for backend='ray', not {backend!r}")
    keys = _keys(configs)
    if backend == "processes":
        try:
            pickle.dumps(fn)
        except Exception as error:
            raise TypeError(f"sweep.run: backend='processes' sends fn to its workers pickled, and this fn cannot be "
                            f"pickled ({error}); define it at the top level of a module or script") from None
    store = _Store(folder, fn) if folder is not None else None
    settings = _worker_settings(threads, deterministic)
    outcomes = [None] * len(keys)
    if store is not None:
        for i, key in enumerate(keys):
            outcomes[i] = store.load(key, i, configs[i])
    todo = [i for i, o in enumerate(outcomes) if o is None]
    bar = _Progress(len(keys), backend) if progress else None
    start = time.perf_counter()

    def arrived(i, reply, attempts):
        outcomes[i] = _outcome(i, configs[i], reply, attempts)
        if store is not None:
            store.save(keys[i], outcomes[i])

    def update(running):
        if bar is not None:
            bar.update(outcomes, running)

    update(0)
    try:
        if backend == "serial":
            workers = 1
            _run_serial(fn, configs, todo, settings, arrived, update)
        elif backend == "processes":
            workers = workers or max(1, _cores() // threads)
            _run_processes(fn, configs, todo, settings, workers, retries, arrived, update)
        else:
            workers = _run_ray(fn, configs, todo, settings, workers, threads, address, retries, arrived, update)
    finally:
        if bar is not None:
            bar.close()
    result = Result(outcomes, backend, workers, time.perf_counter() - start)
    if store is not None:
        store.finish(result)
    if progress:
        print(result.table())
    return result


# ---- configurations and results as data ------------------------------------------------------------------------------

def _check_data(value, where):
    """TypeError naming the place if ``value`` is not data (what a configuration or a result may hold)."""
    if value is None or isinstance(value, (bool, int, float, str, np.generic)):
        return
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise TypeError(f"{where} is a numpy array of Python objects; sweeps carry numeric arrays only")
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_data(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where} has the key {key!r}; dict keys must be str")
            _check_data(item, f"{where}[{key!r}]")
        return
    raise TypeError(f"{where} is a {type(value).__name__}; sweeps carry numbers, strings, booleans, None, lists, "
                    "dicts with str keys and numpy arrays")


def _fingerprint(value):
    """Canonical JSON of a configuration: arrays by dtype, shape and a hash of their bytes; key order ignored."""
    def plain(item):
        if isinstance(item, np.ndarray):
            item = np.ascontiguousarray(item)
            return {"array": [item.dtype.str, list(item.shape), hashlib.sha256(item.tobytes()).hexdigest()]}
        if isinstance(item, np.generic):
            return item.item()
        raise TypeError(type(item).__name__)
    return json.dumps(value, default=plain, sort_keys=True)


def _keys(configs):
    """One key per configuration (a hash of its content), after checking each is data and none repeats."""
    if isinstance(configs, (dict, str)) or not hasattr(configs, "__len__"):
        raise TypeError(f"sweep.run: configs must be a list of configurations (dicts), got {type(configs).__name__}")
    keys, seen = [], {}
    for i, config in enumerate(configs):
        if not isinstance(config, dict):
            raise TypeError(f"sweep.run: configs[{i}] must be a dict, got {type(config).__name__}")
        _check_data(config, f"sweep.run: configs[{i}]")
        key = hashlib.sha256(_fingerprint(config).encode()).hexdigest()[:20]
        if key in seen:
            raise ValueError(f"sweep.run: configs[{seen[key]}] and configs[{i}] are the same configuration; add a "
                             "field (a repeat number or seed) to tell repeats apart")
        seen[key] = i
        keys.append(key)
    return keys


def _short(config, width=70):
    text = _fingerprint(config)
    return text if len(text) <= width else text[:width - 3] + "..."


def _outcome(index, config, reply, attempts):
    return Outcome(index=index, config=config, value=reply.get("value"), error=reply.get("error"),
                   traceback=reply.get("traceback"), seconds=reply.get("seconds", 0.0), attempts=attempts,
                   worker=reply.get("worker", ""))


class _Store:
    """The results folder: sweep.json (which function), jobs/<key>.npz (one outcome each), summary.json (the end)."""

    def __init__(self, folder, fn):
        if not isinstance(folder, (str, os.PathLike)):
            raise TypeError(f"sweep.run: folder must be a path, got {type(folder).__name__}")
        self.folder = os.fspath(folder)
        if os.path.exists(self.folder) and not os.path.isdir(self.folder):
            raise ValueError(f"sweep.run: folder {self.folder!r} exists and is not a folder")
        os.makedirs(os.path.join(self.folder, "jobs"), exist_ok=True)
        # the function by its name, not its module: a script's __main__.fit is the same fit imported elsewhere
        name = getattr(fn, "__qualname__", type(fn).__name__)
        manifest = os.path.join(self.folder, "sweep.json")
        if os.path.exists(manifest):
            with open(manifest) as f:
                saved = json.load(f)
            if saved.get("function") != name:
                raise ValueError(f"sweep.run: folder {self.folder!r} holds a sweep of {saved.get('function')!r}, not "
                                 f"of {name!r}; use another folder, or empty this one to start afresh")
        else:
            with open(manifest + ".tmp", "w") as f:
                json.dump(dict(format="tisim sweep", version=VERSION, function=name,
                               module=getattr(fn, "__module__", None)), f)
            os.replace(manifest + ".tmp", manifest)

    def _path(self, key):
        return os.path.join(self.folder, "jobs", f"{key}.npz")

    def load(self, key, index, config):
        """The saved outcome of a finished job, or None (none saved, failed, or unreadable: it runs again)."""
        path = self._path(key)
        if not os.path.exists(path):
            return None
        try:
            meta, arrays = snapshot.read(path)
            if meta.get("format") != FORMAT or meta.get("version") != VERSION or meta.get("error") is not None:
                return None
            return Outcome(index=index, config=config, value=snapshot.decode(meta["value"], arrays),
                           seconds=meta["seconds"], attempts=meta["attempts"], worker=meta["worker"], resumed=True)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save(self, key, outcome):
        arrays = {}
        meta = dict(format=FORMAT, version=VERSION, config=snapshot.encode(outcome.config, arrays),
                    value=snapshot.encode(outcome.value, arrays), error=outcome.error, traceback=outcome.traceback,
                    seconds=outcome.seconds, attempts=outcome.attempts, worker=outcome.worker)
        snapshot.write(self._path(key), meta, arrays)

    def finish(self, result):
        path = os.path.join(self.folder, "summary.json")
        with open(path + ".tmp", "w") as f:
            json.dump(dict(result.summary(), failures=[dict(index=o.index, config=_fingerprint(o.config),
                                                            error=o.error) for o in result.failures]), f, indent=1)
        os.replace(path + ".tmp", path)


# ---- what runs in a worker -------------------------------------------------------------------------------------------

def _cores():
    """The cores this process may run on (a container's share, where the machine has more)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _worker_settings(threads, deterministic):
    """tisim.init arguments for the workers: this process's arch and precision, the sweep's threads."""
    live = runtime.current() or {}
    settings = dict(arch=live.get("arch", "cpu"), precision=live.get("precision", "f64"))
    if deterministic:
        settings["deterministic"] = True
    else:
        settings["threads"] = threads
    return settings


def execute(fn, config, settings):
    """Run one job in a worker: initialize tisim (once per process and settings), call fn, return a plain reply."""
    runtime.init(**settings)
    start = time.perf_counter()
    reply = dict(worker=f"{socket.gethostname()}:{os.getpid()}")
    try:
        value = fn(config)
        _check_data(value, "the job's result")
        reply["value"] = value
    except Exception as error:  # a failed job is reported, never allowed to stop the sweep
        reply.update(error=f"{type(error).__name__}: {error}", traceback=traceback.format_exc())
    reply["seconds"] = time.perf_counter() - start
    return reply


def _run_serial(fn, configs, todo, settings, arrived, update):
    if not settings.get("deterministic"):  # the caller's runtime as it is: restarting it would end their simulators
        runtime.ensure_init()
        settings = runtime.settings()
    for i in todo:
        update(1)
        arrived(i, execute(fn, configs[i], settings), 1)
    update(0)


@contextlib.contextmanager
def _worker_environment():
    """Variables the spawned workers inherit (and this process gets back as they were)."""
    saved = {k: os.environ.get(k) for k in _QUIET}
    os.environ.update(_QUIET)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v


def _run_processes(fn, configs, todo, settings, workers, retries, arrived, update):
    # spawn, not fork: a forked copy of a process with Taichi's threads running can hang
    context = multiprocessing.get_context("spawn")
    queue, attempts = list(todo), {i: 0 for i in todo}
    with _worker_environment():
        while queue:
            pool = concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=context)
            running, broken = {}, False
            try:
                while (queue or running) and not broken:
                    while queue and len(running) < workers:
                        i = queue.pop(0)
                        attempts[i] += 1
                        running[pool.submit(execute, fn, configs[i], settings)] = i
                    update(len(running))
                    done, _ = concurrent.futures.wait(running, timeout=0.5,
                                                      return_when=concurrent.futures.FIRST_COMPLETED)
                    for future in done:
                        i = running.pop(future)
                        try:
                            arrived(i, future.result(), attempts[i])
                        except concurrent.futures.process.BrokenProcessPool:
                            broken = True
                            _requeue(i, attempts, retries, queue, arrived, "a worker process died during the job")
                        except Exception as error:  # fn or its result could not be pickled, for instance
                            arrived(i, dict(error=f"{type(error).__name__}: {error}"), attempts[i])
                if broken:  # every job that was in the pool when it broke runs again
                    for i in running.values():
                        _requeue(i, attempts, retries, queue, arrived, "a worker process died during the job")
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
    update(0)


def _requeue(i, attempts, retries, queue, arrived, why):
    if attempts[i] <= retries:
        queue.insert(0, i)
    else:
        arrived(i, dict(error=f"WorkerDied: {why}, {attempts[i]} attempts"), attempts[i])


def _run_ray(fn, configs, todo, settings, workers, threads, address, retries, arrived, update):
    try:
        import ray
    except ImportError:
        raise ImportError("sweep.run: backend='ray' needs Ray: pip install 'tisim[ray]'") from None
    started = not ray.is_initialized()
    if started:
        options = dict(address=address, log_to_driver=False, include_dashboard=False)
        if address is None and not os.environ.get("RAY_ADDRESS") and workers is not None:
            options["num_cpus"] = workers * threads
        ray.init(**options)
    try:
        capacity = max(1, int(ray.cluster_resources().get("CPU", 1) // threads))
        workers = min(workers, capacity) if workers else capacity
        env = {k: os.environ[k] for k in _INHERITED if k in os.environ}
        task = ray.remote(execute).options(num_cpus=threads, max_retries=retries,
                                           runtime_env={"env_vars": dict(env, **_QUIET)})
        fn_ref = ray.put(fn)
        queue, running = list(todo), {}
        while queue or running:
            while queue and len(running) < workers:
                i = queue.pop(0)
                running[task.remote(fn_ref, configs[i], settings)] = i
            update(len(running))
            done, _ = ray.wait(list(running), num_returns=1, timeout=0.5)
            for ref in done:
                i = running.pop(ref)
                try:
                    arrived(i, ray.get(ref), 1)
                except ray.exceptions.RayError as error:  # the retries ran out, or the task could not run
                    arrived(i, dict(error=f"{type(error).__name__}: {str(error).splitlines()[0]}"), retries + 1)
        update(0)
    finally:
        if started:
            ray.shutdown()
    return workers


class _Progress:
    def __init__(self, total, backend):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        self.progress = Progress(TextColumn(f"sweep ({backend})"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("done {task.fields[done]}, failed {task.fields[failed]}, "
                                            "running {task.fields[running]}"), TimeElapsedColumn())
        self.task = self.progress.add_task("sweep", total=total, done=0, failed=0, running=0)
        self.progress.start()

    def update(self, outcomes, running):
        finished = [o for o in outcomes if o is not None]
        failed = sum(not o.ok for o in finished)
        self.progress.update(self.task, completed=len(finished), done=len(finished) - failed, failed=failed,
                             running=running)

    def close(self):
        self.progress.stop()
