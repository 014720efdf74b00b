"""Sweeps (tisim/optim/sweep.py): every backend gives the serial results bit for bit in deterministic mode; failed jobs
are reported and do not stop the others; killed workers are retried; an interrupted sweep resumes from its folder; and a
real two-node Ray cluster on this machine finishes a sweep in which one of its workers was killed mid-job."""
import os
import pathlib
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pytest

from tisim import sweep

import sweep_driver

DRIVER = pathlib.Path(sweep_driver.__file__)
JOBS = 8


@pytest.fixture(scope="module")
def reference():
    """The serial backend's results, in this process (deterministic, as the test runtime is)."""
    return sweep.run(sweep_driver.job, sweep_driver.configs(JOBS), progress=False)


def assert_same(outcomes, reference):
    assert len(outcomes) == len(reference.outcomes)
    for got, want in zip(outcomes, reference.outcomes):
        assert got.error == want.error, (got.index, got.error, want.error)
        if want.ok:
            assert got.value.keys() == want.value.keys()
            for key, value in want.value.items():
                if isinstance(value, np.ndarray):
                    assert got.value[key].dtype == value.dtype and np.array_equal(got.value[key], value), key
                else:
                    assert got.value[key] == value, key


def test_serial_reports_failures_with_their_configuration(reference):
    failed = {o.index: o for o in reference.failures}
    assert sorted(failed) == [3, 5]
    assert failed[3].error.startswith("ValueError") and "l must be in (0, inf)" in failed[3].error
    assert failed[3].config["l"] == -1.0
    assert failed[5].error.startswith("NonFiniteError") and "at step 104 of 200" in failed[5].error
    assert all(o.ok and o.value["theta"].shape == (2, 81) for o in reference.outcomes if o.index not in failed)
    table = reference.table()
    assert "8 jobs, 6 done, 2 failed" in table and '"l": -1.0' in table


def test_processes_equal_serial_bitwise(reference):
    result = sweep.run(sweep_driver.job, sweep_driver.configs(JOBS), backend="processes", workers=2,
                       deterministic=True, progress=False)
    assert_same(result.outcomes, reference)
    assert len({o.worker for o in result.outcomes}) == 2  # both workers took jobs


def _kill_first_job(pids, killed, timeout=120):
    """Watch the folder of job starts; SIGKILL the first worker seen, in the middle of its job."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        started = sorted(pids.iterdir())
        if started:
            time.sleep(0.3)  # well inside the job's 1 s wait
            job, pid = started[0].name.split("-")[:2]
            os.kill(int(pid), signal.SIGKILL)
            killed.append((int(job), int(pid)))
            return
        time.sleep(0.05)


def test_processes_retry_a_job_whose_worker_was_killed(reference, tmp_path, monkeypatch):
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("SWEEP_TEST_PIDS", str(pids))  # the spawned workers inherit these
    monkeypatch.setenv("SWEEP_TEST_SLEEP", "1.0")
    killed = []
    killer = threading.Thread(target=_kill_first_job, args=(pids, killed))
    killer.start()
    result = sweep.run(sweep_driver.job, sweep_driver.configs(JOBS), backend="processes", workers=2,
                       deterministic=True, progress=False)
    killer.join()
    assert killed, "no job started"
    assert_same(result.outcomes, reference)
    job, pid = killed[0]
    assert result.outcomes[job].attempts == 2 and result.outcomes[job].worker.split(":")[1] != str(pid)
    assert result.summary()["retried"] >= 1  # the job killed, and the one beside it in the broken pool


def test_an_interrupted_sweep_resumes_from_its_folder(reference, tmp_path):
    folder = tmp_path / "results"
    env = dict(os.environ, SWEEP_TEST_SLEEP="0.4")
    driver = subprocess.Popen([sys.executable, str(DRIVER), "--backend", "processes", "--workers", "2",
                               "--folder", str(folder), "--jobs", str(JOBS)], env=env, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline and len(list((folder / "jobs").glob("*.npz")) if folder.exists() else []) < 3:
        time.sleep(0.05)
    os.killpg(driver.pid, signal.SIGKILL)  # the driver and its workers, at once
    driver.wait()
    saved = len(list((folder / "jobs").glob("*.npz")))
    assert 3 <= saved < JOBS, saved
    result = sweep.run(sweep_driver.job, sweep_driver.configs(JOBS), folder=folder, progress=False)
    assert_same(result.outcomes, reference)
    resumed = result.summary()["resumed"]
    assert resumed >= 1 and resumed == sum(o.resumed for o in result.outcomes)
    assert all(o.ok for o in result.outcomes if o.resumed)  # failed jobs are never taken as done: they run again
    again = sweep.run(sweep_driver.job, sweep_driver.configs(JOBS), folder=folder, progress=False)
    assert again.summary()["resumed"] == 6 and again.summary()["failed"] == 2
    assert_same(again.outcomes, reference)


def _unpicklable(config):
    return {"value": object()}


def test_a_result_that_is_not_data_fails_that_job():
    result = sweep.run(_unpicklable, [dict(i=0)], progress=False)
    assert result.failures[0].error.startswith("TypeError: the job's result['value'] is a object")


def _fn(config):
    return config


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(fn=3), TypeError, "fn must be a function"),
    (dict(configs=dict(a=1)), TypeError, "configs must be a list"),
    (dict(configs=[1]), TypeError, "configs[0] must be a dict"),
    (dict(configs=[dict(a={1, 2})]), TypeError, "configs[0]['a'] is a set"),
    (dict(configs=[dict(a=np.array([None]))]), TypeError, "array of Python objects"),
    (dict(configs=[{1: 2}]), TypeError, "has the key 1"),
    (dict(configs=[dict(a=1, b=2), dict(b=2, a=1)]), ValueError, "configs[0] and configs[1] are the same"),
    (dict(backend="mpi"), ValueError, "backend must be one of"),
    (dict(workers=0), ValueError, "workers must be a positive int"),
    (dict(threads=0), ValueError, "threads must be a positive int"),
    (dict(threads=2, deterministic=True), ValueError, "deterministic=True runs each worker on one thread"),
    (dict(retries=-1), ValueError, "retries must be an int >= 0"),
    (dict(address="127.0.0.1:1"), ValueError, "address is for backend='ray'"),
    (dict(folder=3), TypeError, "folder must be a path"),
    (dict(fn=lambda config: config, backend="processes"), TypeError, "this fn cannot be pickled"),
])
def test_bad_arguments_are_named(kwargs, error, words):
    arguments = dict(fn=_fn, configs=[dict(a=1)], progress=False)
    arguments.update(kwargs)
    with pytest.raises(error) as raised:
        sweep.run(arguments.pop("fn"), arguments.pop("configs"), **arguments)
    assert words in str(raised.value)


def test_a_folder_of_another_sweep_is_refused(tmp_path):
    sweep.run(_fn, [dict(a=1)], folder=tmp_path, progress=False)
    with pytest.raises(ValueError, match="holds a sweep of '_fn', not of '_unpicklable'"):
        sweep.run(_unpicklable, [dict(a=1)], folder=tmp_path, progress=False)
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="exists and is not a folder"):
        sweep.run(_fn, [dict(a=1)], folder=tmp_path / "file", progress=False)


# ---- a real Ray cluster: a head node and one worker node on this machine ---------------------------------------------

def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cluster_processes(temp_dir):
    """Every process of the cluster started with this temp dir: its daemons (named by it) and their descendants."""
    parents, roots = {}, set()
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        if temp_dir in cmdline:
            roots.add(int(entry.name))
    found, grew = set(roots), True
    while grew:
        children = {pid for pid, parent in parents.items() if parent in found} - found
        found |= children
        grew = bool(children)
    return found


def test_ray_cluster_survives_a_killed_worker(reference, tmp_path):
    ray_cli = pathlib.Path(sys.executable).with_name("ray")
    temp_dir = tempfile.mkdtemp(prefix="tisim-ray-", dir="/tmp")  # short: Ray's socket paths must stay < 108 bytes
    pids = tmp_path / "pids"
    pids.mkdir()
    port = _free_port()
    # token authentication with a token of this test's own, so that what ~/.ray holds on this machine does not matter
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32),
               SWEEP_TEST_PIDS=str(pids), SWEEP_TEST_SLEEP="1.0")
    common = ["--num-cpus", "1", "--object-store-memory", str(100 * 2 ** 20), "--disable-usage-stats"]
    try:
        subprocess.run([str(ray_cli), "start", "--head", "--port", str(port), "--node-ip-address", "127.0.0.1",
                        "--include-dashboard", "false", "--temp-dir", temp_dir] + common,
                       env=env, check=True, capture_output=True, timeout=120)
        subprocess.run([str(ray_cli), "start", "--address", f"127.0.0.1:{port}", "--node-ip-address", "127.0.0.1"]
                       + common, env=env, check=True, capture_output=True, timeout=120)
        driver = subprocess.Popen([sys.executable, str(DRIVER), "--backend", "ray", "--address", f"127.0.0.1:{port}",
                                   "--folder", str(tmp_path / "results"), "--jobs", str(JOBS)],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        killed = []
        _kill_first_job(pids, killed, timeout=180)
        output, _ = driver.communicate(timeout=300)
        assert driver.returncode == 0, output
        assert killed, "no job started"
        assert "8 jobs, 6 done, 2 failed" in output, output
    finally:
        for pid in _cluster_processes(temp_dir):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(temp_dir, ignore_errors=True)
    # every result arrived, equal to the serial run's, the killed job among them, run again by another worker
    result = sweep.run(sweep_driver.job, sweep_driver.configs(JOBS), folder=tmp_path / "results", progress=False)
    assert result.summary()["resumed"] == 6
    assert_same(result.outcomes, reference)
    job, pid = killed[0]
    attempts = [int(p.name.split("-")[1]) for p in pids.iterdir() if p.name.startswith(f"{job}-")]
    assert pid in attempts and len(attempts) >= 2
    # both nodes ran jobs: each attempt's file names its worker's parent, the raylet of its node
    assert len({p.name.split("-")[2] for p in pids.iterdir()}) == 2
