"""Non-tensor values on disk: JSON when JSON holds them exactly, pickle otherwise.

A value is stored as JSON only if it round-trips unchanged: ``None``, ``bool``,
``int``, ``float``, ``str`` and lists / str-keyed dicts of those (a tuple would
come back as a list, so it is pickled). Pickled values are written on save and
read back only when the caller passes ``allow_pickle=True``.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

from tensordict.memmap._fileio import open_regular

__all__ = ["json_faithful", "dump_pickle", "load_pickle"]

_SCALARS = (bool, int, float, str)


def json_faithful(value: Any, depth: int = 0) -> bool:
    """``True`` if ``json.loads(json.dumps(value)) == value`` with the same types."""
    if depth > 64:
        return False
    if value is None:
        return True
    cls = type(value)
    if cls in _SCALARS:
        return True
    if cls is list:
        return all(json_faithful(v, depth + 1) for v in value)
    if cls is dict:
        return all(type(k) is str and json_faithful(v, depth + 1) for k, v in value.items())
    return False


def dump_pickle(path: str, value: Any, key: Any) -> None:
    """Pickles ``value`` to ``path``.

    Raises:
        TypeError: ``value`` cannot be pickled (names ``key``).
    """
    try:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as err:
        msg = (
            f"cannot save non-tensor value under key {key!r}: it is not JSON-serialisable and "
            f"pickling it failed ({type(err).__name__}: {err})."
        )
        raise TypeError(msg) from err
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as err:
        raise (err if err.filename is not None else OSError(err.errno, err.strerror, path)) from err


def load_pickle(path: str, key: Any, allow_pickle: bool) -> Any:
    """Unpickles ``path`` if ``allow_pickle``; otherwise explains how to opt in.

    Raises:
        RuntimeError: ``allow_pickle`` is False, or the file is a symbolic link or
            not a regular file.
        FileNotFoundError: the file is missing.
    """
    if not allow_pickle:
        msg = (
            f"the value under key {key!r} is stored with pickle ({path}). Unpickling can run arbitrary "
            "code, so it is refused by default. If you trust where this store came from, pass "
            "allow_pickle=True to load_memmap() / load() / memmap_refresh_()."
        )
        raise RuntimeError(msg)
    try:
        fd = open_regular(path, f"pickled value file (key {key!r})")
    except FileNotFoundError:
        msg = f"pickled value file {path!r} (key {key!r}) is missing."
        raise FileNotFoundError(msg) from None
    with os.fdopen(fd, "rb") as f:
        return pickle.load(f)  # noqa: S301 - explicit opt-in above
