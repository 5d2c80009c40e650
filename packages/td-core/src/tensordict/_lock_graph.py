"""Which locked TensorDicts hold a nested TensorDict (the lock graph).

Locking a TensorDict locks every nested one and records, on each, a weak reference to
the locked ancestor. ``unlock_()`` on a nested TensorDict whose locked ancestor is
still alive raises: unlocking it alone would let the ancestor's structure change
behind its back. Once the ancestor is unlocked (or garbage-collected) the nested one
can be unlocked.
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any

import torch

from tensordict import _classes

__all__ = ["check_unlock", "register_locked_root", "unregister_locked_root"]


def _children(node: Any) -> list:
    """The TensorDicts ``node`` holds: a lazy stack holds the TensorDicts it stacks (its
    nested values are stacked afresh on each read, so the graph runs through the parts)."""
    if isinstance(node, _classes.LazyStackedTensorDict):
        return list(node.tensordicts)
    return [value for _, value in node._items_raw() if isinstance(value, _classes.TensorDictBase)]


def _descendants(root: Any) -> list:
    out = []
    stack = [root]
    while stack:
        node = stack.pop()
        for value in _children(node):
            out.append(value)
            stack.append(value)
    return out


def _warn_compiled_lock() -> bool:
    warnings.warn(
        "Using lock_() inside a compiled function: the record of locked ancestors "
        "(which makes unlock_() of a nested TensorDict raise while a locked parent "
        "holds it) uses weak references, which torch.compile cannot return, so it is "
        "skipped there. Lock in eager mode, before the compiled function, when that "
        "check matters.",
        category=UserWarning,
        stacklevel=2,
    )
    return True


# runs once, when Dynamo traces the call (a warning is not something a graph can hold):
# the mark that ``torch.compiler.assume_constant_result`` sets, set here directly because
# calling that function imports torch._dynamo, which ``import tensordict`` must not do
# (tests/test_compile.py checks that the warning is still seen)
_warn_compiled_lock._dynamo_marked_constant = True  # type: ignore[attr-defined]


def register_locked_root(root: Any) -> None:
    """Records ``root`` as a locked ancestor of each nested TensorDict (skipped, with a
    warning, inside ``torch.compile``)."""
    if torch.compiler.is_compiling():
        _warn_compiled_lock()
        return
    ref = weakref.ref(root)
    for node in _descendants(root):
        parents = [p for p in node._lock_parents if p() is not None and p() is not root]
        parents.append(ref)
        node._lock_parents = parents


def unregister_locked_root(root: Any) -> None:
    """Forgets ``root`` as a locked ancestor (it was unlocked)."""
    for node in _descendants(root):
        if node._lock_parents:
            node._lock_parents = [p for p in node._lock_parents if p() is not None and p() is not root]


def check_unlock(td: Any) -> None:
    """Raises if a live, locked ancestor holds ``td`` (for a lazy stack: holds one of
    the TensorDicts it stacks, other than ``td`` itself)."""
    nodes = [td]
    while nodes:
        node = nodes.pop()
        if isinstance(node, _classes.LazyStackedTensorDict):
            nodes.extend(node.tensordicts)
        for ref in node._lock_parents:
            parent = ref()
            if parent is None or parent is td or not parent._is_locked:
                continue
            msg = (
                "Cannot unlock a tensordict that is part of a locked graph. Unlock the root "
                f"tensordict first (a locked {type(parent).__name__} with batch_size "
                f"{tuple(parent.batch_size)} holds this one)."
            )
            raise RuntimeError(msg)
