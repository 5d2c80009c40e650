"""Batch-dim names: how each shape op maps the names of the dims it touches.

A TensorDict's ``names`` label its batch dims; a nested TensorDict's first
``parent.batch_dims`` names are its parent's (its own extra dims keep their own
names). Shape ops pass a *names rule* to the engines in ``_shape.py``: ``None``
(the result is unnamed), a list (the new names of the dims the op acted on) or a
function from the old names of those dims to the new ones. :func:`derive_names`
applies a rule to one TensorDict, nested ones included, so every level keeps the
names of its extra dims.

This module imports nothing from td-core.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = [
    "NAMES_LENGTH_MSG",
    "check_names",
    "derive_names",
    "drop_dims",
    "index_names",
    "insert_dim",
    "refine",
    "renamed",
    "sync_child_names",
]

#: upstream's wording for a names list of the wrong length (tests pin it)
NAMES_LENGTH_MSG = "the length of the dimension names must equate the tensordict batch_dims"


def check_names(value: Sequence[Any], batch_size: Sequence[int]) -> list | None:
    """Validates a names list against ``batch_size``; ``None`` when no dim is named.

    Raises:
        ValueError: wrong length, a name that is not a str, or a repeated name.
    """
    value = list(value)
    if len(value) != len(batch_size):
        msg = (
            f"{NAMES_LENGTH_MSG}: names {value} has {len(value)} entries, batch_size "
            f"{tuple(batch_size)} has {len(batch_size)} dims."
        )
        raise ValueError(msg)
    named = [v for v in value if v is not None]
    for v in named:
        if not isinstance(v, str):
            msg = f"dim names must be str or None, got {v!r} in {value}."
            raise ValueError(msg)
    if len(set(named)) != len(named):
        msg = f"dim names must be unique, got {value}."
        raise ValueError(msg)
    return value if named else None


def derive_names(td: Any, rule: Any, nd: int) -> list | None:
    """New names of ``td`` after an op on its first ``nd`` batch dims.

    Args:
        td: the TensorDict before the op.
        rule: ``None`` (no names), a list (new names of the op's dims) or a
            function mapping the old names of the first ``nd`` dims to the new ones.
        nd (int): how many leading batch dims the op acted on.

    Returns:
        the names list, or ``None`` when no dim is named.
    """
    if rule is None:
        return None
    has = td._has_names()
    if callable(rule):
        if not has:
            return None
        cur = td.names
        out = list(rule(cur[:nd])) + cur[nd:]
    else:
        rest = td.names[nd:] if has else [None] * max(len(td.batch_size) - nd, 0)
        out = list(rule) + rest
    for n in out:
        if n is not None:
            return out
    return None


def drop_dims(dims: Sequence[int]) -> Callable[[list], list]:
    """Rule for ops that remove the batch dims ``dims`` (squeeze, unbind, reductions)."""
    gone = set(dims)
    return lambda names: [n for i, n in enumerate(names) if i not in gone]


def insert_dim(dim: int, count: int = 1) -> Callable[[list], list]:
    """Rule for ops that insert ``count`` unnamed dims at ``dim``."""
    return lambda names: [*names[:dim], *([None] * count), *names[dim:]]


def index_names(names: list, index: tuple, nd: int) -> list | None:
    """Names after indexing the first ``nd`` batch dims with a normalised ``index``.

    An int (or 0-d tensor) drops its dim, a slice or an integer list/tensor keeps
    it, ``None`` inserts an unnamed dim and a boolean mask of ``k`` dims becomes one
    unnamed dim. Two or more tensor/list indices (advanced indexing that moves dims)
    give unnamed dims (``None`` is returned).
    """
    out: list = []
    pos = 0
    n_adv = 0
    for idx in index:
        if idx is None:
            out.append(None)
        elif idx.__class__ is int or idx.__class__ is bool:
            pos += 1
        elif idx.__class__ is slice:
            out.append(names[pos])
            pos += 1
        elif isinstance(idx, torch.Tensor):
            if idx.dtype is torch.bool:
                k = idx.ndim
                pos += k
                out.append(None)
                n_adv += 1
            elif idx.ndim == 0:
                pos += 1
            else:
                out.append(names[pos] if idx.ndim == 1 else None)
                out.extend([None] * (idx.ndim - 1))
                pos += 1
                n_adv += 1
        elif _is_first_class_dim(idx):
            pos += 1  # a first-class dim (functorch.dim) leaves the batch dims
        else:
            out.append(names[pos] if pos < len(names) else None)
            pos += 1
    if n_adv > 1:
        return None
    out.extend(names[pos:nd])
    out.extend(names[nd:])
    for n in out:
        if n is not None:
            return out
    return None


def _is_first_class_dim(idx: Any) -> bool:
    cls = type(idx)
    return cls.__name__ == "Dim" and cls.__module__.startswith("functorch")


def refine(current: list, names: Sequence[Any]) -> list:
    """``current`` refined with ``names`` (``...`` stands for the dims not listed).

    Raises:
        RuntimeError: a name would replace a different existing name
            ("refine_names: cannot coerce TensorDict ...").
        ValueError: more names than dims, or more than one ``...``.
    """
    nd = len(current)
    names = list(names)
    if names.count(Ellipsis) > 1:
        msg = f"refine_names: at most one '...' is allowed, got {names}."
        raise ValueError(msg)
    if Ellipsis in names:
        i = names.index(Ellipsis)
        fill = nd - len(names) + 1
        if fill < 0:
            msg = f"refine_names: {len(names) - 1} names for {nd} batch dims."
            raise ValueError(msg)
        names = [*names[:i], *current[i : i + fill], *names[i + 1 :]]
    if len(names) != nd:
        msg = f"{NAMES_LENGTH_MSG}: refine_names got {len(names)} names for {nd} batch dims."
        raise ValueError(msg)
    new = []
    for old, name in zip(current, names):
        if old is not None and name is not None and old != name:
            msg = (
                f"refine_names: cannot coerce TensorDict names {current} with {names}: "
                f"dim {old!r} cannot be renamed {name!r}."
            )
            raise RuntimeError(msg)
        new.append(old if name is None else name)
    return new


def renamed(current: list, names: Sequence[Any], rename_map: dict) -> list:
    """The names after ``rename(*names, **rename_map)`` (positional names replace all).

    Raises:
        ValueError: a keyword names no current dim, or both forms are given.
    """
    if names and rename_map:
        msg = "rename takes either positional names or old=new keywords, not both."
        raise ValueError(msg)
    if names:
        if len(names) == 1 and names[0] is None:
            return [None] * len(current)
        return list(names)
    for old in rename_map:
        if old not in current:
            msg = f"rename: no batch dim is named {old!r} (names are {current})."
            raise ValueError(msg)
    return [rename_map.get(n, n) for n in current]


def sync_child_names(parent: Any, child: Any) -> None:
    """Makes a TensorDict about to be stored in ``parent`` agree with its dim names.

    A named ``parent`` renames the child's first ``parent.batch_dims`` dims (in
    place; the child's own extra dims keep their names); an unnamed ``parent``
    takes the child's names for its dims when the child has some.
    """
    nd = len(parent.batch_size)
    child_names = child.names
    if parent._has_names():
        names = parent.names
        if child_names[:nd] != names:
            child.names = names + child_names[nd:]
        return
    prefix = child_names[:nd]
    for n in prefix:
        if n is not None:
            parent.names = prefix
            return
