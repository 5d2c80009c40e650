"""Small public helpers of ``tensordict`` / ``tensordict.utils``: dtype predicates
(``is_bool``, ``is_floating``, ``is_integer``, ``is_inexact``), ``KEY_SEPARATOR``,
``unravel_key_to_tuple``, the ``timeit`` registry and the JSON backend switch
(``set_json_backend``, ``get_json_backend``, ``json_dumps``)."""

from __future__ import annotations

import functools
import importlib
import json
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from tensordict._compat_upstream import _unravel_key_to_tuple
from tensordict._helpers import logger

__all__ = [
    "KEY_SEPARATOR",
    "is_bool",
    "is_floating",
    "is_inexact",
    "is_integer",
    "get_json_backend",
    "json_dumps",
    "set_json_backend",
    "timeit",
    "unravel_key_to_tuple",
]

#: the separator of flattened nested keys (``flatten_keys``, ``state_dict``): ``"a.b"``.
KEY_SEPARATOR = "."


def _dtype_of(args: tuple) -> torch.dtype | None:
    if not args:
        msg = "the dtype predicates take the value to test as their last argument (fn(value) or fn(key, value))."
        raise TypeError(msg)
    return getattr(args[-1], "dtype", None)


def is_bool(*args: Any) -> bool:
    """``True`` if the last argument is a ``torch.bool`` tensor.

    Usable as ``fn(value)`` and as ``fn(key, value)`` (e.g. a ``cast_filter``).

    Examples:
        >>> import torch
        >>> is_bool(torch.zeros(2, dtype=torch.bool)), is_bool("k", torch.zeros(2))
        (True, False)
    """
    return _dtype_of(args) is torch.bool


def is_floating(*args: Any) -> bool:
    """``True`` if the last argument is a floating-point tensor (not complex).

    Examples:
        >>> import torch
        >>> is_floating(torch.zeros(2)), is_floating(torch.zeros(2, dtype=torch.complex64))
        (True, False)
    """
    dtype = _dtype_of(args)
    return isinstance(dtype, torch.dtype) and dtype.is_floating_point


def is_integer(*args: Any) -> bool:
    """``True`` if the last argument is an integer tensor (signed or unsigned, not bool).

    Examples:
        >>> import torch
        >>> is_integer(torch.zeros(2, dtype=torch.uint8)), is_integer(torch.zeros(2, dtype=torch.bool))
        (True, False)
    """
    dtype = _dtype_of(args)
    return (
        isinstance(dtype, torch.dtype) and dtype is not torch.bool and not dtype.is_floating_point and not dtype.is_complex
    )


def is_inexact(*args: Any) -> bool:
    """``True`` if the last argument is a floating-point or complex tensor.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(x=torch.zeros(3), i=torch.zeros(3, dtype=torch.long))
        >>> out = td.bfloat16(cast_filter=is_inexact)
        >>> out["x"].dtype, out["i"].dtype
        (torch.bfloat16, torch.int64)
    """
    dtype = _dtype_of(args)
    return isinstance(dtype, torch.dtype) and (dtype.is_floating_point or dtype.is_complex)


def unravel_key_to_tuple(key: Any) -> tuple:
    """A nested key as a flat tuple of str (``"a"`` gives ``("a",)``); ``()`` if ``key`` is
    not a valid nested key (no error).

    Examples:
        >>> unravel_key_to_tuple(("a", ("b", ("c",))))
        ('a', 'b', 'c')
        >>> unravel_key_to_tuple(("a", 1))
        ()
    """
    return _unravel_key_to_tuple(key)


class timeit:  # noqa: N801 - public name of the tensordict API
    """Accumulates the time spent under a name: a decorator or a context manager.

    Each name keeps ``[mean seconds, total seconds, count]`` in ``timeit._REG``;
    :meth:`print` logs them (``INFO``, the ``tensordict`` logger), :meth:`erase` zeroes them.

    Args:
        name (str): the name the time is recorded under.

    Examples:
        >>> @timeit("step")
        ... def step():
        ...     return 1
        >>> _ = step()
        >>> with timeit("block"):
        ...     _ = step()
        >>> timeit._REG["step"][2]
        2
        >>> timeit.erase()
    """

    _REG: dict[str, list] = {}

    def __init__(self, name: str) -> None:
        self.name = name
        self._starts: list[float] = []

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return timed

    def __enter__(self) -> None:
        self._starts.append(time.perf_counter())

    def __exit__(self, *exc: Any) -> None:
        elapsed = time.perf_counter() - self._starts.pop()
        entry = timeit._REG.setdefault(self.name, [0.0, 0.0, 0])
        entry[1] += elapsed
        entry[2] += 1
        entry[0] = entry[1] / entry[2]

    @staticmethod
    def print(prefix: str | None = None) -> None:  # noqa: A003 - upstream's name
        """Logs each name's mean (ms) and total (s) time at ``INFO`` level, names sorted.

        Args:
            prefix (str, optional): put before each line, joined with ``" -- "``.
        """
        for name in sorted(timeit._REG):
            mean, total, _ = timeit._REG[name]
            line = f"{name} took {mean * 1000:4.4} msec (total = {total} sec)"
            logger.info(f"{prefix} -- {line}" if prefix else line)

    @staticmethod
    def erase() -> None:
        """Zeroes the mean, total and count of every name."""
        for name in timeit._REG:
            timeit._REG[name] = [0.0, 0.0, 0]


_JSON_BACKEND = ["json"]


def set_json_backend(backend: str) -> None:
    """Chooses the JSON backend: ``"json"`` (the default) or ``"orjson"``.

    .. deprecated:: 0.15
        Kept for compatibility; this implementation writes and reads JSON with the
        standard library either way (``orjson`` must still be importable to choose it).

    Raises:
        ValueError: ``backend`` is another string.
        ImportError: ``"orjson"`` is chosen and not installed.
    """
    warnings.warn(
        "tensordict.utils.set_json_backend is deprecated and will be removed in TensorDict 0.17.",
        DeprecationWarning,
        stacklevel=2,
    )
    if backend not in ("json", "orjson"):
        msg = f"Backend must be either 'json' or 'orjson', got {backend!r}."
        raise ValueError(msg)
    if backend == "orjson":
        import orjson  # noqa: F401 - the choice needs the package

    _JSON_BACKEND[0] = backend


def get_json_backend() -> Any:
    """The module of the JSON backend chosen with :func:`set_json_backend` (``json`` by default).

    Examples:
        >>> from tensordict.utils import get_json_backend
        >>> get_json_backend().__name__
        'json'
    """
    if _JSON_BACKEND[0] == "json":
        return json
    return importlib.import_module(_JSON_BACKEND[0])


def json_dumps(data: Any, **kwargs: Any) -> str | bytes:
    """``data`` as JSON with the chosen backend: a ``str`` from ``json`` (``kwargs`` go to
    :func:`json.dumps`), ``bytes`` from ``orjson`` (which takes no formatting options).

    Examples:
        >>> from tensordict.utils import json_dumps
        >>> json_dumps({"a": [1, 2]}, separators=(",", ":"))
        '{"a":[1,2]}'
    """
    backend = get_json_backend()
    if backend is json:
        return json.dumps(data, **kwargs)
    return backend.dumps(data)
