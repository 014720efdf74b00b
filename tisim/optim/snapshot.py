"""Snapshots of an optimization run (``tisim.optim.minimize(snapshot=...)``): data only, written atomically, checked
against the problem on resume.

A snapshot is one numpy .npz file read with allow_pickle=False: an entry "meta" holds JSON (the loop's counters, the
optimizer's scalars, the history's columns, the description of the problem) and the other entries are the arrays it
names (the variables, the best values, the optimizer's moments, the recorded values). Nothing in it is code, and a
file that is anything else is refused with an error, never run.

Writing goes to a temporary file in the same folder, which is flushed and fsynced, renamed over the old snapshot and
followed by an fsync of the folder: a process killed at any moment leaves the old snapshot or the new one, whole.
"""
import io
import json
import os
import zipfile

import numpy as np

FORMAT, VERSION = "tisim optimization snapshot", 1
HISTORY_COLUMNS = ("iteration", "loss", "grad_norm", "lr", "best")


def canonical(signature):
    """A description of a problem as plain JSON (tuples as lists, numpy numbers as numbers): what a snapshot keeps and
    what resuming compares."""
    def plain(value):
        if isinstance(value, (np.ndarray, np.generic)):
            return value.tolist()
        raise TypeError(f"snapshot: the problem's description holds {type(value).__name__}, which is not data")
    return json.loads(json.dumps(signature, default=plain))


def save(path, state, signature):
    """Write the loop ``state`` of minimize and the problem's ``signature`` to ``path`` atomically."""
    arrays = {}
    meta = dict(format=FORMAT, version=VERSION, signature=canonical(signature),
                state=encode({k: v for k, v in state.items() if k != "history"}, arrays),
                history=_encode_history(state["history"], arrays))
    write(path, meta, arrays)


def write(path, meta, arrays):
    """Write JSON ``meta`` and numpy ``arrays`` as one .npz file at ``path`` atomically: a process killed at any
    moment leaves the old file or the new one, whole."""
    buffer = io.BytesIO()
    np.savez(buffer, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(buffer.getbuffer())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)  # the rename itself reaches the disk
    finally:
        os.close(descriptor)


def read(path):
    """(meta, arrays) of a file made by ``write``; OSError or ValueError (never code run) for anything else."""
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(bytes(data["meta"]).decode())
            return meta, {k: data[k] for k in data.files if k != "meta"}
    except (ValueError, KeyError, zipfile.BadZipFile, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{type(error).__name__}: {error}") from None


def load(path, signature):
    """The loop state saved at ``path``; ValueError if it is not a snapshot or was written for another problem."""
    try:
        meta, arrays = read(path)
    except (ValueError, OSError) as error:
        raise ValueError(f"snapshot {path!r} is not a tisim snapshot ({error}); remove it to start afresh") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise ValueError(f"snapshot {path!r} is not a tisim snapshot of version {VERSION}; remove it to start "
                         "afresh")
    difference = _difference(meta.get("signature"), canonical(signature), "")
    if difference:
        raise ValueError(f"snapshot {path!r} was written for a different problem: {difference}; use another "
                         "snapshot file, or remove this one to start afresh")
    try:
        state = decode(meta["state"], arrays)
        state["history"] = _decode_history(meta["history"], arrays)
        state["best"] = tuple(state["best"])
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"snapshot {path!r} is damaged ({type(error).__name__}: {error})") from None
    return state


def encode(value, arrays):
    """JSON with each numpy array replaced by {"array": name}, the array put in ``arrays``."""
    if isinstance(value, np.ndarray):
        name = f"a{len(arrays)}"
        arrays[name] = value
        return {"array": name}
    if isinstance(value, dict):
        return {"dict": [[key, encode(item, arrays)] for key, item in value.items()]}
    if isinstance(value, (list, tuple)):
        return [encode(item, arrays) for item in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def decode(value, arrays):
    if isinstance(value, dict) and "array" in value:
        return arrays[value["array"]]
    if isinstance(value, dict):
        return {key: decode(item, arrays) for key, item in value["dict"]}
    if isinstance(value, list):
        return [decode(item, arrays) for item in value]
    return value


def _encode_history(history, arrays):
    # columns, not a list of dicts: a long run's history stays a few numbers per iteration
    columns = {key: encode(np.array([entry[key] for entry in history], dtype=np.float64), arrays)
               for key in HISTORY_COLUMNS}
    names = list(history[0]["values"]) if history and "values" in history[0] else []
    values = {name: encode(np.stack([entry["values"][name] for entry in history]), arrays) for name in names}
    return dict(columns=columns, values=values)


def _decode_history(encoded, arrays):
    columns = {key: arrays[item["array"]] for key, item in encoded["columns"].items()}
    values = {name: arrays[item["array"]] for name, item in encoded["values"].items()}
    history = []
    for i in range(len(columns["iteration"])):
        entry = {key: float(columns[key][i]) for key in HISTORY_COLUMNS}
        entry["iteration"] = int(entry["iteration"])
        if values:
            entry["values"] = {name: stacked[i] for name, stacked in values.items()}
        history.append(entry)
    return history


def _difference(saved, current, where):
    """A sentence naming the first place where two JSON-like descriptions differ, or ""."""
    if isinstance(saved, dict) and isinstance(current, dict):
        for key in list(saved) + [k for k in current if k not in saved]:
            place = f"{where}[{key!r}]" if where else key
            if key not in current or key not in saved:
                return f"{place} is {'in the snapshot' if key in saved else 'new'} but not " \
                       f"{'here' if key in saved else 'in the snapshot'}"
            found = _difference(saved[key], current[key], place)
            if found:
                return found
        return ""
    if saved != current:
        return f"{where} is {saved!r} in the snapshot and {current!r} here"
    return ""
