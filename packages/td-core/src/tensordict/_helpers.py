"""General helpers of ``tensordict.utils`` that downstream libraries use.

``logger``, ``Buffer``, ``strtobool``, ``is_seq_of_nested_key``, ``is_namedtuple``,
``is_namedtuple_class``, ``print_directory_tree``, ``convert_ellipsis_to_idx`` and
``implement_for`` (pick a function's implementation by the installed version of a library).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = [
    "Buffer",
    "convert_ellipsis_to_idx",
    "implement_for",
    "is_namedtuple",
    "is_namedtuple_class",
    "is_seq_of_nested_key",
    "logger",
    "print_directory_tree",
    "strtobool",
]

#: the ``tensordict`` logger (level from ``TD_LOGGING_LEVEL``, default ``INFO``).
logger = logging.getLogger("tensordict")
logger.setLevel(os.environ.get("TD_LOGGING_LEVEL", "INFO").upper())

#: ``torch.nn.Buffer``: a tensor that a module registers as a buffer when assigned.
Buffer = torch.nn.Buffer


def strtobool(value: str) -> bool:
    """``True`` for ``"y"``, ``"yes"``, ``"t"``, ``"true"``, ``"on"``, ``"1"``; ``False`` for their opposites.

    Raises:
        ValueError: any other string.

    Examples:
        >>> strtobool("Yes"), strtobool("0")
        (True, False)
    """
    low = value.strip().lower()
    if low in ("y", "yes", "t", "true", "on", "1"):
        return True
    if low in ("n", "no", "f", "false", "off", "0"):
        return False
    msg = f"invalid truth value {value!r}"
    raise ValueError(msg)


def _is_nested_key(key: Any) -> bool:
    if isinstance(key, str):
        return True
    if isinstance(key, tuple):
        return all(_is_nested_key(k) for k in key)
    return False


def is_seq_of_nested_key(seq: Any) -> bool:
    """``True`` if ``seq`` is a list or tuple whose items are all nested keys (empty included).

    Examples:
        >>> is_seq_of_nested_key(["a", ("b", "c")]), is_seq_of_nested_key("a"), is_seq_of_nested_key([1])
        (True, False, False)
    """
    if isinstance(seq, str) or not isinstance(seq, Sequence):
        return False
    return all(_is_nested_key(k) for k in seq)


def is_namedtuple_class(cls: Any) -> bool:
    """``True`` for a class made by ``collections.namedtuple`` / ``typing.NamedTuple``.

    Examples:
        >>> from collections import namedtuple
        >>> is_namedtuple_class(namedtuple("P", "x y")), is_namedtuple_class(tuple)
        (True, False)
    """
    return isinstance(cls, type) and issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple)


def is_namedtuple(obj: Any) -> bool:
    """``True`` for an instance of a named tuple class.

    Examples:
        >>> from collections import namedtuple
        >>> is_namedtuple(namedtuple("P", "x y")(1, 2)), is_namedtuple((1, 2))
        (True, False)
    """
    return is_namedtuple_class(type(obj))


def _human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "TB":
            return f"{size:.2f} {unit}"
        size /= 1024
    return f"{size:.2f} TB"


def print_directory_tree(path: str | os.PathLike, indent: str = "", display_metadata: bool = True) -> str:
    """Logs the folders and files under ``path`` as a tree (e.g. a memory-mapped
    TensorDict) and returns the lines, as tensordict 0.15 does.

    Each line goes to the ``tensordict`` logger at ``INFO`` level (nothing is printed).
    A folder's line ends with ``/``; each level below it is indented by four more
    spaces. Entries come in ``os.listdir`` order, a folder's content right after it.
    The walk uses an explicit stack (any depth).

    Args:
        path (str or PathLike): the folder (or file) to show.
        indent (str): prefix of every line of the tree. Defaults to ``""``.
        display_metadata (bool): first give ``Directory size: <total size of the
            files>`` (``B``/``KB``/``MB``/``GB``, two decimals). Defaults to ``True``.

    Returns:
        the lines, joined by newlines.

    Raises:
        FileNotFoundError: ``path`` does not exist.

    Examples:
        >>> import pathlib, tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     _ = (pathlib.Path(d) / "a.txt").write_text("x")
        ...     tree = print_directory_tree(d)
        >>> tree.splitlines()[0], tree.splitlines()[2]
        ('Directory size: 1.00 B', '    a.txt')
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        msg = f"print_directory_tree: {path!r} does not exist."
        raise FileNotFoundError(msg)
    lines = []
    if display_metadata:
        total = 0
        for root, _, files in os.walk(path):
            for name in files:
                total += os.path.getsize(os.path.join(root, name))
        lines.append(f"Directory size: {_human_size(total)}")
    todo = [(path, indent)]  # depth first, in name order: an explicit stack
    while todo:
        entry, prefix = todo.pop()
        name = os.path.basename(os.path.normpath(entry))
        if os.path.isdir(entry):
            lines.append(f"{prefix}{name}/")
            todo.extend((os.path.join(entry, sub), prefix + "    ") for sub in reversed(os.listdir(entry)))
        else:
            lines.append(f"{prefix}{name}")
    for line in lines:
        logger.info(line)
    return "\n".join(lines)


# ------------------------------------------------------------------------ implement_for


def _version_tuple(version: str) -> tuple:
    """``"2.13.0+cpu"`` -> ``(2, 13, 0)``; pre-releases sort before the release."""
    parts: list = []
    for piece in re.split(r"[.+]", version):
        match = re.match(r"(\d+)(.*)", piece)
        if match is None:
            break
        parts.append(int(match.group(1)))
        if match.group(2):  # "0rc1", "0a2", "0.dev3": a pre-release of this number
            parts.append(-1)
            break
    return tuple(parts)


def _installed_version(module_name: str | Callable) -> str | None:
    if callable(module_name):
        module = module_name()
        return getattr(module, "__version__", None)
    top = module_name.split(".")[0]
    module = sys.modules.get(module_name)
    version = getattr(module, "__version__", None) if module is not None else None
    if version is not None:
        return str(version)
    try:
        return importlib.metadata.version(top)
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    version = getattr(module, "__version__", None)
    return None if version is None else str(version)


class implement_for:  # noqa: N801 - public name of the tensordict API
    """Decorator: the function runs only when ``module_name``'s version is in a range.

    Several functions with the same qualified name can be decorated, each for its
    range of versions; the name ends up bound to the one matching the installed
    version. Calling a name that has no implementation for the installed version
    raises.

    Args:
        module_name (str or callable): the library (``"torch"``, ``"gymnasium"``) or
            a callable returning the module.
        from_version (str, optional): lowest version supported (included).
        to_version (str, optional): first version no longer supported (excluded).
        class_method (bool): make the result a ``classmethod``. Defaults to ``False``.
        compilable (bool): accepted for API compatibility; the choice is made at
            decoration time, so the result is compilable either way.

    Raises:
        ModuleNotFoundError: calling a function that has no implementation for the
            installed version (or whose library is not installed).

    Examples:
        >>> @implement_for("torch", "2.0")
        ... def backend():
        ...     return "new"
        >>> @implement_for("torch", None, "2.0")
        ... def backend():
        ...     return "old"
        >>> backend()
        'new'
    """

    #: (module, qualname) -> chosen implementation
    _implementations: dict = {}

    def __init__(
        self,
        module_name: str | Callable,
        from_version: str | None = None,
        to_version: str | None = None,
        *,
        class_method: bool = False,
        compilable: bool = False,
    ) -> None:
        self.module_name = module_name
        self.from_version = from_version
        self.to_version = to_version
        self.class_method = class_method
        self.compilable = compilable

    def _in_range(self) -> bool:
        version = _installed_version(self.module_name)
        if version is None:
            return False
        current = _version_tuple(version)
        if self.from_version is not None and current < _version_tuple(self.from_version):
            return False
        return not (self.to_version is not None and current >= _version_tuple(self.to_version))

    def _wrap(self, fn: Callable) -> Any:
        return classmethod(fn) if self.class_method else fn

    def __call__(self, fn: Callable) -> Any:
        key = (fn.__module__, fn.__qualname__)
        if self._in_range():
            self._implementations[key] = fn
            return self._wrap(fn)
        chosen = self._implementations.get(key)
        if chosen is not None:
            return self._wrap(chosen)
        name = self.module_name if isinstance(self.module_name, str) else getattr(self.module_name, "__name__", "?")
        wanted = f"[{self.from_version}, {self.to_version})"

        @functools.wraps(fn)
        def unsupported(*args: Any, **kwargs: Any) -> Any:
            chosen = self._implementations.get(key)
            if chosen is not None:
                return chosen(*args, **kwargs)
            msg = (
                f"{fn.__qualname__} has no implementation for the installed version of {name!r} "
                f"({_installed_version(self.module_name)}); this one supports {wanted}."
            )
            raise ModuleNotFoundError(msg)

        return self._wrap(unsupported)

    @classmethod
    def reset(cls) -> None:
        """Forgets every chosen implementation (for tests)."""
        cls._implementations.clear()


def convert_ellipsis_to_idx(idx: Any, batch_size: Sequence[int]) -> tuple:
    """Replaces the ``Ellipsis`` of an index by the full slices it stands for.

    Args:
        idx (index): an index of a tensor of shape ``batch_size`` (a tuple or one item).
        batch_size (sequence of int): the indexed shape.

    Returns:
        the index as a tuple without ``Ellipsis``.

    Raises:
        RuntimeError: the index holds more than one ``Ellipsis``.

    Examples:
        >>> convert_ellipsis_to_idx((0, ..., 1), (2, 3, 4, 5))
        (0, slice(None, None, None), slice(None, None, None), 1)
    """
    items = idx if isinstance(idx, tuple) else (idx,)
    count = sum(1 for i in items if i is Ellipsis)
    if count == 0:
        return items
    if count > 1:
        msg = f"convert_ellipsis_to_idx: an index can hold one Ellipsis, got {idx!r}."
        raise RuntimeError(msg)
    consumed = 0
    for item in items:
        if item is Ellipsis or item is None:
            continue
        if isinstance(item, torch.Tensor) and item.dtype is torch.bool:
            consumed += item.ndim
        else:
            consumed += 1
    fill = max(len(batch_size) - consumed, 0)
    pos = next(i for i, item in enumerate(items) if item is Ellipsis)
    return (*items[:pos], *([slice(None)] * fill), *items[pos + 1 :])
