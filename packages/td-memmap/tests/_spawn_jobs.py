"""Functions that spawned children of td-memmap's tests run.

A function defined in a test module cannot be imported by a spawned child under
pytest's importlib import mode; the test module puts this folder on ``sys.path``
(which spawned children inherit) and passes these functions instead.
"""

from __future__ import annotations


def add_one_and_report(td, q) -> None:
    """Adds 1 to ``td["a"]`` in place and puts ``("ok", sum of td["b"])`` on ``q``."""
    try:
        td["a"] += 1
        q.put(("ok", float(td["b"].sum())))
    except Exception as err:  # noqa: BLE001 - reported to the parent at once
        q.put(("error", repr(err)))


def write_shared_value(td, key, value, q) -> None:
    """Reports the value it sees under ``key``, then writes ``value`` there in place."""
    try:
        seen = td[key]
        td.set_(key, value)
        q.put(("ok", seen))
    except Exception as err:  # noqa: BLE001 - reported to the parent at once
        q.put(("error", repr(err)))
