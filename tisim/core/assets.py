"""Descriptions read from JSON files: robots and bodies are data, never code.

``read(path, kind, folder, required, optional)`` finds a file by path, or by name in assets/<folder>/ ("quadruped"
-> assets/robots/quadruped.json), and returns its object after checking that it is one, that the required fields are
there and that no other fields are. Every failure is a ValueError (FileNotFoundError for a missing file) naming the
file and what is wrong with it; the caller checks the fields' values.

The files are package data of tisim: ``ASSETS`` is the folder tisim/assets inside the installed package (a wheel
carries the files there), which in a checkout is a link to the repository's top-level assets/.
"""
import importlib.resources
import json
import pathlib


def _folder():
    """tisim/assets through the package; a checkout whose link to ../assets was not made falls back to that
    folder."""
    packaged = pathlib.Path(str(importlib.resources.files("tisim") / "assets"))
    if packaged.is_dir():
        return packaged
    return pathlib.Path(__file__).resolve().parents[2] / "assets"


ASSETS = _folder()


def read(path, kind, folder, required, optional=()):
    """(the file's path, the JSON object in it): `path`, or assets/<folder>/<path>.json, with its required and
    optional fields only."""
    assets, folder = folder, ASSETS / folder
    path = pathlib.Path(path)
    if not path.suffix and not path.exists():
        path = folder / f"{path}.json"
    where = f"{kind} file {str(path)!r}"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        known = sorted(p.stem for p in folder.glob("*.json"))
        raise FileNotFoundError(f"{where} not found; {kind} files in assets/{assets}: {known}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{where} is not valid JSON: {error}") from None
    except OSError as error:  # a folder, no permission
        raise ValueError(f"{where} cannot be read: {error.strerror}") from None
    fields = [f for f in (*required, *optional) if f not in ("name", "description")]
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected an object with {', '.join(fields)}")
    for key in required:
        if key not in data:
            raise ValueError(f"{where}: missing field {key!r}")
    unknown = set(data) - set(required) - set(optional)
    if unknown:
        raise ValueError(f"{where}: unknown fields {sorted(unknown)}")
    return path, data
