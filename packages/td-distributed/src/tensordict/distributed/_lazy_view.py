"""Lazy stacks on the wire: a ``LazyStackedTensorDict`` (as the root or nested) travels
as a plain TensorDict of its stacked TensorDicts.

``plain_view(td)`` gives a TensorDict whose nested entry ``"<i>"`` stands for the
``i``-th stacked TensorDict of each lazy stack (recursively), holding the *same*
tensor objects: receiving into the view writes into the lazy stack's members, so
members of different shapes or keys need no stacking. Sender and receiver apply the
same mapping, so the structure digests compare the members one by one. A node on the
path to a lazy stack gets ``batch_size=[]`` (members may have other batch sizes than
the stack); everything else is kept as it is.
"""

from __future__ import annotations

from typing import Any

from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

__all__ = ["has_lazy", "plain_view", "lazy_layout"]


def _has_lazy(td: Any) -> bool:
    if isinstance(td, LazyStackedTensorDict):
        return True
    for _, value in td._items_raw():
        if isinstance(value, TensorDictBase) and _has_lazy(value):
            return True
    return False


def has_lazy(td: Any) -> bool:
    """Whether ``td`` is or holds (at any depth) a ``LazyStackedTensorDict``."""
    return _has_lazy(td)


def _view(td: Any) -> Any:
    if isinstance(td, LazyStackedTensorDict):
        return TensorDict({str(i): _view(member) for i, member in enumerate(td.tensordicts)}, batch_size=[])
    if not any(isinstance(v, TensorDictBase) and _has_lazy(v) for _, v in td._items_raw()):
        return td
    source = {}
    for key, value in td._items_raw():
        source[key] = _view(value) if isinstance(value, TensorDictBase) and _has_lazy(value) else value
    return TensorDict(source, batch_size=[])


def plain_view(td: Any) -> Any:
    """``td`` itself when it holds no lazy stack; otherwise its plain view (module docstring)."""
    if not isinstance(td, TensorDictBase) or td.__class__ is TensorDict and not _has_lazy(td):
        return td
    if not _has_lazy(td):
        return td
    return _view(td)


def lazy_layout(td: Any) -> list | None:
    """Where ``plain_view(td)`` replaced lazy stacks, so that a receiver can rebuild them.

    Returns ``None`` when ``td`` holds no lazy stack; otherwise one entry per node of
    the view that differs from the original, outermost first, keyed by its path in the
    view: ``{"path": [...], "lazy": {"stack_dim": d, "n": n}}`` for a lazy stack (its
    members are the view's entries ``"0"`` ... ``"n-1"``), ``{"path": [...],
    "batch_size": [...]}`` for a TensorDict on the way to one (the view gives it
    ``batch_size=[]``).
    """
    if not isinstance(td, TensorDictBase) or not _has_lazy(td):
        return None
    out: list = []

    def walk(node: Any, path: tuple) -> None:
        if isinstance(node, LazyStackedTensorDict):
            out.append({"path": list(path), "lazy": {"stack_dim": node.stack_dim, "n": len(node.tensordicts)}})
            for i, member in enumerate(node.tensordicts):
                if _has_lazy(member):
                    walk(member, (*path, str(i)))
            return
        out.append({"path": list(path), "batch_size": list(node.batch_size)})
        for key, value in node._items_raw():
            if isinstance(value, TensorDictBase) and _has_lazy(value):
                walk(value, (*path, key))

    walk(td, ())
    return out
