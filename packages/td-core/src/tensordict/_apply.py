"""``apply``, ``named_apply``, ``apply_`` and the leaf tree helpers (``ApplyMixin``).

Two engines live here:

* ``apply`` walks the tree node by node, calls ``fn`` on each leaf and builds a new
  TensorDict of the results (or writes them in place / into ``out``). The common
  call (one TensorDict, no keyword) takes a short loop without any bookkeeping.
* ``_flatten_tensors`` / ``_unflatten_tensors`` turn a TensorDict into a flat list of
  its tensor leaves plus a *spec* (the nodes and their keys, in order) and back.
  The math in ``_ops.py`` uses them to hand every leaf to one ``torch._foreach_*``
  kernel. A spec is built per call and holds no tensor, so nothing can go stale.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

import torch

from tensordict import _classes
from tensordict._apply_dense import (
    NOT_DENSE,
    _bad_leaf,
    apply_dense,
    apply_inplace_dense,
    check_leaf_result,
)
from tensordict._deep import trampoline
from tensordict._device import _to_device
from tensordict._host import TensorDictHost
from tensordict._keys import _MISSING, _NO_NAMES, NO_DEFAULT
from tensordict._nested_shape import leaf_shape

if TYPE_CHECKING:
    from typing_extensions import Self

    from tensordict._base import TensorDictBase

__all__ = ["ApplyMixin"]

_Tensor = torch.Tensor
_Size = torch.Size

# spec entry kinds (besides a plain ``str``, which is a tensor leaf)
_NESTED = 1
_PASS = 2
_TC = 3  # a tensorclass instance: its ``_tensordict`` is walked, the class rebuilt
_PART = 4  # (pointwise walk) stacked TensorDict ``i`` of a lazy stack: ``(i, _PART, child_spec)``

_new_td = object.__new__
_DEEP = 100  # nesting levels walked by recursion before an explicit stack takes over


# ---------------------------------------------------------------------- tree helpers
def _flatten_tensors(td: Any, leaves: list, pointwise: bool = False) -> tuple:
    """Appends every tensor leaf of ``td`` (depth first, in key order) to ``leaves``.

    A lazy stack is walked in one of two ways:

    * ``pointwise=True`` (the element-wise math): through each stacked TensorDict, so
      the leaves are the stacked TensorDicts' own tensors (in-place ops write into
      them), keys held by only some stacked TensorDicts are kept, and
      :func:`_unflatten_tensors` rebuilds a lazy stack;
    * otherwise (reductions, cumulative ops, which act along batch dims): through its
      stacked leaves (``torch.stack`` of the shared keys).

    Returns:
        the spec ``(td, entries, simple)``: ``entries`` holds, in key order, a str for
        a tensor leaf, ``(key, _NESTED, child_spec)`` for a nested TensorDict and
        ``(key, _TC, (instance, child_spec))`` for a tensorclass instance and
        ``(key, _PASS, value)`` for anything else (non-tensor data), which the math
        passes through unchanged; for a lazy stack walked pointwise, one
        ``(i, _PART, child_spec)`` per stacked TensorDict. ``simple`` is ``True`` when
        every entry is a tensor.

    Raises:
        KeyError: (``pointwise=False``) a lazy stack holds a key that only some of its
            stacked TensorDicts have: the stacked walk would drop it.
    """
    n = len(leaves)
    try:
        return _flatten_rec(td, leaves, pointwise)
    except RecursionError:  # nested deeper than the recursion limit: walk it without recursion
        del leaves[n:]
        return trampoline(_flatten_node, td, leaves, pointwise)


def _flatten_rec(td: Any, leaves: list, pointwise: bool) -> tuple:
    """:func:`_flatten_tensors` by recursion (the fastest for the usual few levels)."""
    tdb = _classes.TensorDictBase
    td_cls = _classes.TensorDict
    if td.__class__ is td_cls:
        store = td._tensordict
        values = list(store.values())
        for v in values:
            if v.__class__ is not _Tensor:
                break
        else:
            leaves.extend(values)
            return (td, list(store), True)
    elif isinstance(td, _classes.LazyStackedTensorDict) and td.tensordicts:
        if pointwise:
            parts = [
                (i, _PART, _flatten_rec(sub, leaves, True)) for i, sub in enumerate(td.tensordicts)
            ]
            return (td, parts, False)
        _refuse_exclusive(td)
    entries: list = []
    simple = True
    append = leaves.append
    add = entries.append
    for key, value in td._items_raw():
        if value.__class__ is _Tensor or isinstance(value, _Tensor):
            add(key)
            append(value)
        elif isinstance(value, tdb):
            simple = False
            add((key, _NESTED, _flatten_rec(value, leaves, pointwise)))
        elif _is_tensorclass(value, tdb):
            simple = False
            add((key, _TC, (value, _flatten_rec(value._tensordict, leaves, pointwise))))
        else:
            simple = False
            add((key, _PASS, value))
    return (td, entries, simple)


def _flatten_node(td: Any, leaves: list, pointwise: bool) -> Generator[tuple, Any, tuple]:
    """One node of :func:`_flatten_tensors` (run by :func:`trampoline`): yields each nested
    node's arguments and is sent back its spec."""
    tdb = _classes.TensorDictBase
    td_cls = _classes.TensorDict
    if td.__class__ is td_cls:
        store = td._tensordict
        values = list(store.values())
        for v in values:
            if v.__class__ is not _Tensor:
                break
        else:
            leaves.extend(values)
            return (td, list(store), True)
    elif isinstance(td, _classes.LazyStackedTensorDict) and td.tensordicts:
        if pointwise:
            parts = []
            for i, sub in enumerate(td.tensordicts):
                parts.append((i, _PART, (yield (sub, leaves, True))))
            return (td, parts, False)
        _refuse_exclusive(td)
    entries: list = []
    simple = True
    append = leaves.append
    add = entries.append
    for key, value in td._items_raw():
        if value.__class__ is _Tensor or isinstance(value, _Tensor):
            add(key)
            append(value)
        elif isinstance(value, tdb):
            simple = False
            add((key, _NESTED, (yield (value, leaves, pointwise))))
        elif _is_tensorclass(value, tdb):
            simple = False
            add((key, _TC, (value, (yield (value._tensordict, leaves, pointwise)))))
        else:
            simple = False
            add((key, _PASS, value))
    return (td, entries, simple)


def _exclusive_keys(stack: Any) -> list:
    """``(index, key)`` of each key that only some stacked TensorDicts of ``stack`` hold."""
    shared = stack._keys_raw()
    out: list = []
    for i, sub in enumerate(stack.tensordicts):
        keys = sub._keys_raw()
        if len(keys) != len(shared) or keys != shared:
            out.extend((i, k) for k in keys if k not in shared)
    return out


def _refuse_exclusive(stack: Any) -> None:
    """Raises the KeyError of a stacked walk of a lazy stack that would drop keys."""
    lone = _exclusive_keys(stack)
    if lone:
        i, key = lone[0]
        msg = (
            f"key {key!r} is held by stacked TensorDict {i} of a lazy stack (batch_size "
            f"{tuple(stack.batch_size)}, stack_dim {stack.stack_dim}) but not by all of them "
            f"(keys held by some only: {[k for _, k in lone]}); a reduction or cumulative op "
            "over the stack cannot combine it. Select the shared keys first, or reduce each "
            "stacked TensorDict (`stack.tensordicts`)."
        )
        raise KeyError(msg)


def _is_tensorclass(value: Any, tdb: type) -> bool:
    return getattr(value, "_is_tensorclass", False) and isinstance(
        getattr(value, "_tensordict", None), tdb
    )


def _rewrap(instance: Any, td: Any) -> Any:
    """A tensorclass instance like ``instance`` holding ``td``."""
    non_tensor = getattr(instance, "_non_tensordict", None)
    return type(instance)._from_tensordict(td, dict(non_tensor) if non_tensor else None)


def _unflatten_tensors(spec: tuple, results: list, start: int = 0) -> tuple[Any, int]:
    """Rebuilds the tree of ``spec`` with ``results[start:]`` as its tensor leaves.

    Returns:
        ``(tensordict, next_position)``; every node keeps its batch size and device.
    """
    td, entries, simple = spec
    if simple:
        n = len(entries)
        if start == 0 and n == len(results):
            return td._new_like(dict(zip(entries, results))), n
        return td._new_like(dict(zip(entries, results[start : start + n]))), start + n
    try:
        return _unflatten_rec(spec, results, start)
    except RecursionError:  # nested deeper than the recursion limit: rebuild without recursion
        return trampoline(_unflatten_node, spec, results, start)


def _unflatten_rec(spec: tuple, results: list, start: int) -> tuple[Any, int]:
    """:func:`_unflatten_tensors` by recursion (the fastest for the usual few levels)."""
    td, entries, simple = spec
    if simple:
        n = len(entries)
        return td._new_like(dict(zip(entries, results[start : start + n]))), start + n
    source = {}
    parts = None
    for entry in entries:
        if entry.__class__ is str:
            source[entry] = results[start]
            start += 1
        elif entry[1] == _NESTED:
            source[entry[0]], start = _unflatten_rec(entry[2], results, start)
        elif entry[1] == _TC:
            sub, start = _unflatten_rec(entry[2][1], results, start)
            source[entry[0]] = _rewrap(entry[2][0], sub)
        elif entry[1] == _PART:
            sub, start = _unflatten_rec(entry[2], results, start)
            if parts is None:
                parts = []
            parts.append(sub)
        else:
            source[entry[0]] = entry[2]
    if parts is not None:  # a lazy stack walked pointwise stays a lazy stack
        return td._new_lazy(parts), start
    return td._new_like(source), start


def _unflatten_node(spec: tuple, results: list, start: int) -> Generator[tuple, Any, tuple]:
    """One node of :func:`_unflatten_tensors` (run by :func:`trampoline`)."""
    td, entries, simple = spec
    if simple:
        n = len(entries)
        return td._new_like(dict(zip(entries, results[start : start + n]))), start + n
    source = {}
    parts = None
    for entry in entries:
        if entry.__class__ is str:
            source[entry] = results[start]
            start += 1
        elif entry[1] == _NESTED:
            source[entry[0]], start = yield (entry[2], results, start)
        elif entry[1] == _TC:
            sub, start = yield (entry[2][1], results, start)
            source[entry[0]] = _rewrap(entry[2][0], sub)
        elif entry[1] == _PART:
            sub, start = yield (entry[2], results, start)
            if parts is None:
                parts = []
            parts.append(sub)
        else:
            source[entry[0]] = entry[2]
    if parts is not None:  # a lazy stack walked pointwise stays a lazy stack
        return td._new_lazy(parts), start
    return td._new_like(source), start


def _spec_keys(spec: tuple, prefix: tuple = ()) -> list:
    """The full nested key of every tensor leaf of ``spec``, in leaf order."""
    out: list = []
    # depth first, in key order: (entries, next position, prefix) of each open node
    todo = [(spec[1], 0, prefix)]
    while todo:
        entries, pos, prefix = todo.pop()
        for pos in range(pos, len(entries)):  # noqa: B020
            entry = entries[pos]
            if entry.__class__ is str:
                out.append(prefix + (entry,) if prefix else entry)
                continue
            if entry[1] == _NESTED:
                child = (entry[2][1], 0, prefix + (entry[0],))
            elif entry[1] == _TC:
                child = (entry[2][1][1], 0, prefix + (entry[0],))
            elif entry[1] == _PART:
                child = (entry[2][1], 0, prefix)
            else:
                continue
            todo.append((entries, pos + 1, prefix))  # the rest, after the child's leaves
            todo.append(child)
            break
    return out


def _collect_like(spec: tuple, other: Any, out: list, what: str, prefix: tuple = ()) -> None:
    """Appends ``other``'s tensors in the order of ``spec``'s leaves.

    Raises:
        KeyError: ``other`` lacks a key of ``spec`` or holds extra keys.
        TypeError: ``other`` holds a nested TensorDict where ``spec`` has a tensor (or
            the reverse).
    """
    n = len(out)
    try:
        _collect_rec(spec, other, out, what, prefix)
    except RecursionError:  # nested deeper than the recursion limit: walk it without recursion
        del out[n:]
        trampoline(_collect_node, spec, other, out, what, prefix)


def _collect_rec(spec: tuple, other: Any, out: list, what: str, prefix: tuple = ()) -> None:
    """:func:`_collect_like` by recursion (the fastest for the usual few levels)."""
    tdb = _classes.TensorDictBase
    td_cls = _classes.TensorDict
    td, entries, simple = spec
    if entries and entries[0].__class__ is tuple and entries[0][1] == _PART:
        for entry, part in zip(entries, _other_parts(td, other, what, prefix)):
            _collect_rec(entry[2], part, out, what, prefix)
        return
    if simple and other.__class__ is td_cls:
        store = other._tensordict
        if len(store) == len(entries):
            try:
                values = [store[k] for k in entries]
            except KeyError:
                values = None
            if values is not None:
                for v in values:
                    if v.__class__ is not _Tensor:
                        break
                else:
                    out.extend(values)
                    return
    get = other._get_raw
    for entry in entries:
        key = entry if entry.__class__ is str else entry[0]
        value = get(key, _MISSING)
        if value is _MISSING:
            full = prefix + (key,) if prefix else key
            msg = (
                f"{what}: key {full!r} is missing from the other TensorDict. Both TensorDicts "
                "must have the same keys; pass `default=` to fill missing entries, or "
                "`default='intersection'` to use only the shared keys."
            )
            raise KeyError(msg)
        if entry.__class__ is str:
            if not isinstance(value, _Tensor):
                full = prefix + (key,) if prefix else key
                msg = (
                    f"{what}: key {full!r} is a tensor in the TensorDict but a "
                    f"{type(value).__name__} in the other one."
                )
                raise TypeError(msg)
            out.append(value)
        elif entry[1] == _NESTED or entry[1] == _TC:
            if _is_tensorclass(value, tdb):
                value = value._tensordict
            if not isinstance(value, tdb):
                full = prefix + (key,) if prefix else key
                msg = (
                    f"{what}: key {full!r} is a TensorDict in the TensorDict but a "
                    f"{type(value).__name__} in the other one."
                )
                raise TypeError(msg)
            child = entry[2] if entry[1] == _NESTED else entry[2][1]
            _collect_rec(child, value, out, what, prefix + (key,))
    n_other = len(other._keys_raw())
    if n_other != len(entries):
        mine = {e if e.__class__ is str else e[0] for e in entries}
        extra = [k for k in other._keys_raw() if k not in mine]
        extra = [prefix + (k,) if prefix else k for k in extra]
        msg = (
            f"{what}: the other TensorDict has keys {extra} that the TensorDict lacks. "
            "Pass `default=` to fill missing entries, or `default='intersection'`."
        )
        raise KeyError(msg)


def _collect_node(
    spec: tuple, other: Any, out: list, what: str, prefix: tuple
) -> Generator[tuple, Any, None]:
    """One node of :func:`_collect_like` (run by :func:`trampoline`)."""
    tdb = _classes.TensorDictBase
    td_cls = _classes.TensorDict
    td, entries, simple = spec
    if entries and entries[0].__class__ is tuple and entries[0][1] == _PART:
        for entry, part in zip(entries, _other_parts(td, other, what, prefix)):
            yield (entry[2], part, out, what, prefix)
        return
    if simple and other.__class__ is td_cls:
        store = other._tensordict
        if len(store) == len(entries):
            try:
                values = [store[k] for k in entries]
            except KeyError:
                values = None
            if values is not None:
                for v in values:
                    if v.__class__ is not _Tensor:
                        break
                else:
                    out.extend(values)
                    return
    get = other._get_raw
    for entry in entries:
        key = entry if entry.__class__ is str else entry[0]
        value = get(key, _MISSING)
        if value is _MISSING:
            full = prefix + (key,) if prefix else key
            msg = (
                f"{what}: key {full!r} is missing from the other TensorDict. Both TensorDicts "
                "must have the same keys; pass `default=` to fill missing entries, or "
                "`default='intersection'` to use only the shared keys."
            )
            raise KeyError(msg)
        if entry.__class__ is str:
            if not isinstance(value, _Tensor):
                full = prefix + (key,) if prefix else key
                msg = (
                    f"{what}: key {full!r} is a tensor in the TensorDict but a "
                    f"{type(value).__name__} in the other one."
                )
                raise TypeError(msg)
            out.append(value)
        elif entry[1] == _NESTED or entry[1] == _TC:
            if _is_tensorclass(value, tdb):
                value = value._tensordict
            if not isinstance(value, tdb):
                full = prefix + (key,) if prefix else key
                msg = (
                    f"{what}: key {full!r} is a TensorDict in the TensorDict but a "
                    f"{type(value).__name__} in the other one."
                )
                raise TypeError(msg)
            child = entry[2] if entry[1] == _NESTED else entry[2][1]
            yield (child, value, out, what, prefix + (key,))
    n_other = len(other._keys_raw())
    if n_other != len(entries):
        mine = {e if e.__class__ is str else e[0] for e in entries}
        extra = [k for k in other._keys_raw() if k not in mine]
        extra = [prefix + (k,) if prefix else k for k in extra]
        msg = (
            f"{what}: the other TensorDict has keys {extra} that the TensorDict lacks. "
            "Pass `default=` to fill missing entries, or `default='intersection'`."
        )
        raise KeyError(msg)


def _other_parts(stack: Any, other: Any, what: str, prefix: tuple = ()) -> list:
    """``other`` (a TensorDict shaped like the lazy ``stack``) cut into one part per
    stacked TensorDict: its own stacked TensorDicts when it is a lazy stack alike, else
    its slices along ``stack_dim``.

    Raises:
        RuntimeError: ``other``'s batch size does not start with the stack's.
    """
    try:
        return stack._parts_of(other, what)
    except RuntimeError as err:
        if prefix:
            raise RuntimeError(f"{err} (at key {prefix if len(prefix) > 1 else prefix[0]!r})") from None
        raise


# ---------------------------------------------------------------------- apply engine
def _breaks(res: Any, n: int, b0: int, bs: torch.Size) -> bool:
    """``True`` if ``res``'s leading dims are not ``bs`` (``n = len(bs) > 0``)."""
    if getattr(res.__class__, "_pass_through", False):  # UnbatchedTensor: no batch dims
        return False
    if n == 1:
        try:
            return res.shape[0] != b0
        except IndexError:
            return True
    return res.shape[:n] != bs


def _missing_in_other(key: Any, index: int) -> KeyError:
    msg = (
        f"apply: key {key!r} is missing from the TensorDict number {index} passed in `*others`. "
        "Give the TensorDicts the same keys, or pass `default=` to use a value for missing entries."
    )
    return KeyError(msg)


def _rebatch_non_tensor(key: Any, value: Any, new_bs: Any) -> Any:
    """A non-tensor leaf following a batch-size change of its TensorDict."""
    if value.batch_size == new_bs:
        return value
    if hasattr(value, "_with_batch"):
        if not hasattr(value, "_items") or value.numel() == _Size(new_bs).numel():
            return value._with_batch(new_bs)
        items = value._items  # a NonTensorStack of one repeated object acts as that object
        if items and all(x is items[0] for x in items):
            return _classes.NonTensorData(items[0], new_bs, value.device)
    msg = (
        f"apply: the non-tensor entry {key!r} has batch_size {tuple(value.batch_size)} and "
        f"cannot take the new batch_size {tuple(new_bs)}: its number of elements differs. "
        "Exclude it before calling apply (`td.exclude(key).apply(...)`)."
    )
    raise RuntimeError(msg)


def _apply_simple(td: Any, fn: Callable, filter_empty: bool | None, prefix: tuple) -> Any:
    """``apply(fn)`` with one TensorDict and no keyword: the hot path, by recursion (the
    fastest for the usual few levels); a dense TensorDict nested more than ``_DEEP`` levels
    down is handed to :func:`_apply_simple_deep`, which has no recursion limit."""
    tdb = _classes.TensorDictBase
    td_cls = _classes.TensorDict
    dense = td.__class__ is td_cls
    if dense:
        bs = td._batch_size
        items = td._tensordict.items()
    else:
        bs = td.batch_size
        items = td._items_raw()
    n = len(bs)
    b0 = bs[0] if n else 0
    source = {}
    for key, value in items:
        cls = value.__class__
        if cls is td_cls:
            if len(prefix) < _DEEP:
                res = _apply_simple(value, fn, filter_empty, prefix + (key,))
            else:  # past _DEEP levels: the rest without recursion
                res = _apply_simple_deep(value, fn, filter_empty, prefix + (key,))
            if res is None:
                continue
            source[key] = res
            continue
        if cls is _Tensor or isinstance(value, _Tensor):
            res = fn(value)
            if res is None:
                continue
            if res.__class__ is _Tensor:
                if n:
                    if n == 1:
                        try:
                            bad = res.shape[0] != b0
                        except IndexError:
                            bad = True
                        except RuntimeError:  # a strided nested tensor has no sizes
                            bad = leaf_shape(res)[:1] != bs
                    else:
                        bad = res.shape[:n] != bs
                    if bad:
                        raise _bad_leaf(prefix + (key,) if prefix else key, res.shape, bs)
            elif not isinstance(res, (_Tensor, tdb)):
                res = td._convert_value(prefix + (key,) if prefix else key, res)
            elif n and _breaks(res, n, b0, bs):
                raise _bad_leaf(prefix + (key,) if prefix else key, res.shape, bs)
        elif isinstance(value, tdb):
            if isinstance(value, _classes.LazyStackedTensorDict):
                res = value.apply(fn, filter_empty=filter_empty)  # per stacked TensorDict
            else:
                res = (_apply_simple if len(prefix) < _DEEP else _apply_simple_deep)(
                    value, fn, filter_empty, prefix + (key,)
                )
            if res is None:
                continue
        elif _is_tensorclass(value, tdb):
            sub = (_apply_simple if len(prefix) < _DEEP else _apply_simple_deep)(
                value._tensordict, fn, filter_empty, prefix + (key,)
            )
            if sub is None:
                continue
            res = _rewrap(value, sub)
        else:
            res = value
        source[key] = res
    if not source and filter_empty is not False:
        if filter_empty or not td.is_empty():
            return None
    if dense:
        # what TensorDict._new_unsafe does, without two calls per node (same batch
        # size, device and names as ``td``)
        out = _new_td(td_cls)
        out._tensordict = source
        out._batch_size = bs
        out._device = td._device
        if td._names is not None:
            out._names = list(td._names)
        return out
    return td._new_like(source)


def _checked(td: Any, key: str, res: Any, prefix: tuple, path: list, bs: torch.Size) -> Any:
    """A leaf result of ``apply`` checked against the batch size ``bs`` (and converted, if
    not a tensor or TensorDict), for the walks without recursion; the leaf's nested key
    is ``prefix + path + (key,)``, built only when needed (an error, a conversion) so that
    a deep walk costs no key tuple per level."""
    if not isinstance(res, (_Tensor, _classes.TensorDictBase)):
        full = (*prefix, *path, key)
        return td._convert_value(full if len(full) > 1 else key, res)
    n = len(bs)
    if n and _breaks(res, n, bs[0], bs):
        full = (*prefix, *path, key)
        raise _bad_leaf(full if len(full) > 1 else key, res.shape, bs)
    return res


def _apply_simple_deep(td: Any, fn: Callable, filter_empty: bool | None, prefix: tuple) -> Any:
    """:func:`_apply_simple` without recursion (a chain of any depth works under the
    default recursion limit): ``parents`` holds, for each node being built above the
    current one, its state and the key under which the current node's result goes."""
    tdb = _classes.TensorDictBase
    parents: list = []
    path: list = []  # the keys from ``td`` (at ``prefix``) down to the node being built
    opening = True
    while True:
        if opening:
            items = iter(td._items_raw())
            source: dict = {}
        for key, value in items:
            if isinstance(value, _Tensor):
                res = fn(value)
                if res is None:
                    continue
                res = _checked(td, key, res, prefix, path, td.batch_size)
            elif isinstance(value, _classes.LazyStackedTensorDict):
                res = value.apply(fn, filter_empty=filter_empty)  # per stacked TensorDict
                if res is None:
                    continue
            elif isinstance(value, tdb) or _is_tensorclass(value, tdb):
                wrapper = None if isinstance(value, tdb) else value
                parents.append((td, items, source, key, wrapper))
                td = value if wrapper is None else value._tensordict
                path.append(key)
                break
            else:
                res = value
            source[key] = res
        else:  # every entry of ``td`` is done: its node
            if not source and filter_empty is not False and (filter_empty or not td.is_empty()):
                node = None
            else:
                node = td._new_like(source)
            if not parents:
                return node
            td, items, source, key, wrapper = parents.pop()
            path.pop()
            if node is not None:
                source[key] = node if wrapper is None else _rewrap(wrapper, node)
            opening = False
            continue
        opening = True


def _apply_others(
    td: Any, fn: Callable, others: tuple, filter_empty: bool | None, prefix: tuple
) -> Any:
    """``apply(fn, *others)`` without keywords: several TensorDicts walked together, by
    recursion (past ``_DEEP`` levels, by :func:`_apply_others_deep`)."""
    tdb = _classes.TensorDictBase
    td_cls = _classes.TensorDict
    if td.__class__ is td_cls:
        bs = td._batch_size
        items = td._tensordict.items()
    else:
        bs = td.batch_size
        items = td._items_raw()
    n = len(bs)
    b0 = bs[0] if n else 0
    gets = [o._tensordict.get if o.__class__ is td_cls else o._get_raw for o in others]
    single = gets[0] if len(gets) == 1 else None
    store = others[0]._tensordict if single is not None and others[0].__class__ is td_cls else None
    source = {}
    for key, value in items:
        if store is not None:
            try:
                other = store[key]
            except KeyError:
                raise _missing_in_other(prefix + (key,) if prefix else key, 1) from None
            vals = None
        elif single is not None:
            other = single(key, _MISSING)
            if other is _MISSING:
                raise _missing_in_other(prefix + (key,) if prefix else key, 1)
            vals = None
        else:
            vals = tuple(g(key, _MISSING) for g in gets)
            for i, v in enumerate(vals):
                if v is _MISSING:
                    raise _missing_in_other(prefix + (key,) if prefix else key, i + 1)
        if value.__class__ is _Tensor or isinstance(value, _Tensor):
            res = fn(value, other) if vals is None else fn(value, *vals)
            if res is None:
                continue
            if res.__class__ is _Tensor:
                if n:
                    if n == 1:
                        try:
                            bad = res.shape[0] != b0
                        except IndexError:
                            bad = True
                        except RuntimeError:  # a strided nested tensor has no sizes
                            bad = leaf_shape(res)[:1] != bs
                    else:
                        bad = res.shape[:n] != bs
                    if bad:
                        raise _bad_leaf(prefix + (key,) if prefix else key, res.shape, bs)
            elif not isinstance(res, (_Tensor, tdb)):
                res = td._convert_value(prefix + (key,) if prefix else key, res)
            elif n and _breaks(res, n, b0, bs):
                raise _bad_leaf(prefix + (key,) if prefix else key, res.shape, bs)
        elif isinstance(value, tdb):
            if vals is None:
                vals = (other,)
            for i, v in enumerate(vals):
                if not isinstance(v, tdb):
                    full = prefix + (key,) if prefix else key
                    msg = (
                        f"apply: key {full!r} is a TensorDict in the TensorDict but a "
                        f"{type(v).__name__} in TensorDict number {i + 1} of `*others`."
                    )
                    raise TypeError(msg)
            if isinstance(value, _classes.LazyStackedTensorDict):
                res = value.apply(fn, *vals, filter_empty=filter_empty)  # per stacked TensorDict
            else:
                res = (_apply_others if len(prefix) < _DEEP else _apply_others_deep)(
                    value, fn, vals, filter_empty, prefix + (key,)
                )
            if res is None:
                continue
        elif _is_tensorclass(value, tdb):
            subs = tuple(
                v._tensordict if _is_tensorclass(v, tdb) else v
                for v in ((other,) if vals is None else vals)
            )
            sub = (_apply_others if len(prefix) < _DEEP else _apply_others_deep)(
                value._tensordict, fn, subs, filter_empty, prefix + (key,)
            )
            if sub is None:
                continue
            res = _rewrap(value, sub)
        else:
            res = value
        source[key] = res
    if not source and filter_empty is not False:
        if filter_empty or not td.is_empty():
            return None
    return td._new_like(source)


def _apply_others_deep(
    td: Any, fn: Callable, others: tuple, filter_empty: bool | None, prefix: tuple
) -> Any:
    """:func:`_apply_others` without recursion (like :func:`_apply_simple_deep`)."""
    tdb = _classes.TensorDictBase
    parents: list = []
    path: list = []  # the keys from ``td`` (at ``prefix``) down to the node being built
    opening = True
    while True:
        if opening:
            items = iter(td._items_raw())
            source: dict = {}
        for key, value in items:
            vals = tuple(o._get_raw(key, _MISSING) for o in others)
            for i, v in enumerate(vals):
                if v is _MISSING:
                    raise _missing_in_other((*prefix, *path, key) if prefix or path else key, i + 1)
            if isinstance(value, _Tensor):
                res = fn(value, *vals)
                if res is None:
                    continue
                res = _checked(td, key, res, prefix, path, td.batch_size)
            elif isinstance(value, tdb) or _is_tensorclass(value, tdb):
                wrapper = None if isinstance(value, tdb) else value
                subs = tuple(v._tensordict if _is_tensorclass(v, tdb) else v for v in vals)
                for i, v in enumerate(subs):
                    if not isinstance(v, tdb):
                        full = (*prefix, *path, key) if prefix or path else key
                        msg = (
                            f"apply: key {full!r} is a TensorDict in the TensorDict but a "
                            f"{type(v).__name__} in TensorDict number {i + 1} of `*others`."
                        )
                        raise TypeError(msg)
                if isinstance(value, _classes.LazyStackedTensorDict):
                    res = value.apply(fn, *subs, filter_empty=filter_empty)  # per stacked TensorDict
                    if res is None:
                        continue
                else:
                    parents.append((td, items, source, others, key, wrapper))
                    td = value if wrapper is None else value._tensordict
                    others = subs
                    path.append(key)
                    break
            else:
                res = value
            source[key] = res
        else:
            if not source and filter_empty is not False and (filter_empty or not td.is_empty()):
                node = None
            else:
                node = td._new_like(source)
            if not parents:
                return node
            td, items, source, others, key, wrapper = parents.pop()
            path.pop()
            if node is not None:
                source[key] = node if wrapper is None else _rewrap(wrapper, node)
            opening = False
            continue
        opening = True


class _Ctx:
    """The settings of one ``apply`` call, shared by every node of the walk."""

    __slots__ = (
        "fn",
        "named",
        "nested_keys",
        "default",
        "filter_empty",
        "inplace",
        "call_on_nested",
        "is_leaf",
        "device",
        "new_bs",
    )

    fn: Any
    named: bool
    nested_keys: bool
    default: Any
    filter_empty: bool | None
    inplace: bool
    call_on_nested: bool
    is_leaf: Any
    device: Any
    new_bs: Any

    def __init__(self, **kwargs: Any) -> None:
        for name, value in kwargs.items():
            setattr(self, name, value)


class UnionDefault:
    """``apply(default=UnionDefault(value))``: walk the keys of every TensorDict, not only
    the first one's (the binary ops' ``default=``, whose result holds the keys of both).

    A plain ``default=`` walks the first TensorDict's keys, as tensordict 0.15.3's ``apply``.
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class _Missing:
    """Stands for a nested TensorDict that one of the walked TensorDicts lacks
    (with ``default=``): every key reads as the default."""

    __slots__ = ("batch_size",)

    def __init__(self, batch_size: torch.Size) -> None:
        self.batch_size = batch_size

    def _keys_raw(self) -> tuple:
        return ()

    def _get_raw(self, key: str, default: Any = _MISSING) -> Any:
        return _MISSING


def _walk(ctx: _Ctx, tds: list, out: Any, prefix: tuple, new_bs: torch.Size | None) -> Any:
    """The general ``apply`` over the tree under ``tds``, without recursion (see
    :mod:`tensordict._deep`): a chain of any depth works under the default recursion limit."""
    return trampoline(_walk_node, ctx, tds, out, prefix, new_bs)


def _walk_node(
    ctx: _Ctx, tds: list, out: Any, prefix: tuple, new_bs: torch.Size | None
) -> Generator[tuple, Any, Any]:
    """One node of the general ``apply``: ``tds[0]`` is the TensorDict (or a ``_Missing``)
    and ``tds[1:]`` the others. Returns the new node, ``None`` (filtered) or, in place,
    the node written to; a nested node is yielded as ``(ctx, tds, out, prefix, new_bs)`` to
    :func:`_walk`, which sends its result back."""
    TensorDictBase = _classes.TensorDictBase  # noqa: N806
    main = tds[0]
    if main.__class__ is _Missing:
        main = next(t for t in tds if t.__class__ is not _Missing)
    bs = main.batch_size
    nd = len(bs)
    target_bs = bs if new_bs is None else new_bs
    default = ctx.default
    keys = list(tds[0]._keys_raw())
    union = default.__class__ is UnionDefault
    if union:
        default = default.value
    if union and len(tds) > 1:
        seen = set(keys)
        for other in tds[1:]:
            for k in other._keys_raw():
                if k not in seen:
                    seen.add(k)
                    keys.append(k)
    fn = ctx.fn
    inplace = ctx.inplace
    device = ctx.device
    source: dict[str, Any] | None = {} if not inplace and out is None else None
    wrote = False
    for key in keys:
        full = prefix + (key,) if prefix else key
        values = []
        for i, t in enumerate(tds):
            v = t._get_raw(key, _MISSING)
            if v is _MISSING:
                if default is NO_DEFAULT:
                    raise _missing_in_other(full, i)
                v = None
            values.append(v)
        first = next(v for v in values if v is not None)
        wrapper = first if _is_tensorclass(first, TensorDictBase) else None
        nested = (
            (wrapper is not None or isinstance(first, TensorDictBase))
            and not ctx.call_on_nested
            and (ctx.is_leaf is None or not ctx.is_leaf(type(first)))
        )
        if (
            nested
            and wrapper is None
            and out is None
            and not ctx.named
            and isinstance(first, _classes.LazyStackedTensorDict)
            and all(isinstance(v, TensorDictBase) for v in values)
        ):
            # a lazy stack walks its own stacked TensorDicts (they may be heterogeneous)
            kw: dict = {"inplace": inplace, "call_on_nested": False, "is_leaf": ctx.is_leaf}
            kw["filter_empty"] = ctx.filter_empty
            if default is not NO_DEFAULT:
                kw["default"] = ctx.default
            if device is not NO_DEFAULT:
                kw["device"] = device
            if new_bs is not None:
                kw["batch_size"] = _Size((*new_bs, *first.batch_size[nd:]))
            res = first.apply(fn, *values[1:], **kw)
            if source is not None and res is not None:
                source[key] = res
            continue
        if nested:
            if wrapper is not None:
                values = [
                    v._tensordict if _is_tensorclass(v, TensorDictBase) else v for v in values
                ]
                first = wrapper._tensordict
            subs: list[Any] = []
            for i, v in enumerate(values):
                if v is None:
                    subs.append(_Missing(first.batch_size))
                elif isinstance(v, TensorDictBase):
                    subs.append(v)
                else:
                    msg = (
                        f"apply: key {full!r} is a TensorDict in one TensorDict but a "
                        f"{type(v).__name__} in TensorDict number {i}."
                    )
                    raise TypeError(msg)
            sub_bs = None if new_bs is None else _Size((*new_bs, *first.batch_size[nd:]))
            sub_out = None
            if out is not None:
                sub_out = out._get_raw(key, _MISSING)
                if sub_out is _MISSING:
                    sub_out = out._create_nested(key)
                elif _is_tensorclass(sub_out, TensorDictBase):
                    sub_out = sub_out._tensordict
            res = yield (ctx, subs, sub_out, prefix + (key,), sub_bs)
            if res is None:
                continue
            if source is not None:
                source[key] = res if wrapper is None else _rewrap(wrapper, res)
            continue
        is_tensor = (
            isinstance(first, _Tensor)
            or (ctx.is_leaf is not None and ctx.is_leaf(type(first)))
            or (ctx.call_on_nested and isinstance(first, TensorDictBase))
        )
        if not is_tensor:
            res = first if new_bs is None else _rebatch_non_tensor(full, first, target_bs)
            if source is not None:
                source[key] = res
            elif out is not None:
                out._set_raw(key, res)
            continue
        args = [default if v is None else v for v in values]
        if ctx.named:
            res = fn(full if ctx.nested_keys else key, *args)
        else:
            res = fn(*args)
        if res is None:
            continue
        res = check_leaf_result(main, full, res, target_bs, device, source is not None and new_bs is None)
        if inplace:
            wrote = True
            dest = values[0]
            if dest is not None and res is not dest:
                tds[0]._write_inplace(full, dest, res)
            elif dest is None:
                tds[0]._set_str(key, res, False)
        elif out is not None:
            wrote = True
            dest = out._get_raw(key, _MISSING)
            if dest is _MISSING:
                out._set_str(key, res, False)
            elif res is not dest:
                if isinstance(dest, _Tensor) and isinstance(res, _Tensor) and (
                    dest.dtype != res.dtype or dest.shape != res.shape
                ):
                    out._set_str(key, res, False)  # another dtype or shape: the entry is replaced
                else:
                    out._write_inplace(full, dest, res)
        else:
            source[key] = res  # type: ignore[index]  # source is a dict when out is None and not inplace
    if source is None:
        if ctx.filter_empty and not wrote and not tds[0]._has_non_tensor:
            return None  # every result was None: nothing left, as out of place
        return out if out is not None else tds[0]
    if not source and ctx.filter_empty is not False:
        if ctx.filter_empty or not _all_empty_nodes(tds[0]):
            return None
    if new_bs is None and device is NO_DEFAULT:
        return main._new_like(source)
    dev = main.device if device is NO_DEFAULT else device
    return main._new_like(source, batch_size=new_bs, device=dev)


def _all_empty_nodes(td: Any) -> bool:
    """``True`` when ``td`` holds no leaf at all (only, possibly, empty sub-TensorDicts)."""
    if td.__class__ is _Missing:
        return True
    return td.is_empty()


def _device_arg(device: Any) -> Any:
    if device is NO_DEFAULT or device is None:
        return device
    return _to_device(device)


_CONSTRUCTOR_KWARGS = frozenset({"lock", "non_blocking", "checked", "nested_keys_only", "num_threads", "pool"})


class ApplyMixin(TensorDictHost):
    """Mixed into TensorDictBase: apply, named_apply, apply_ and the tree helpers."""

    def apply(
        self,
        fn: Callable,
        *others: Any,
        batch_size: Any = None,
        device: Any = NO_DEFAULT,
        names: Any = _NO_NAMES,
        inplace: bool = False,
        default: Any = NO_DEFAULT,
        filter_empty: bool | None = None,
        propagate_lock: bool = False,
        call_on_nested: bool = False,
        is_leaf: Callable[[type], bool] | None = None,
        out: Any = None,
        named: bool = False,
        nested_keys: bool = False,
        prefix: tuple = (),
        **constructor_kwargs: Any,
    ) -> TensorDictBase | None:
        """Applies ``fn`` to every tensor leaf and returns a TensorDict of the results.

        ``fn`` is called on each tensor leaf, nested TensorDicts included, and its
        result is stored under the same key. A ``None`` result leaves the entry out,
        which filters the TensorDict. Non-tensor entries pass through unchanged.

        Args:
            fn (Callable): ``fn(leaf, *other_leaves) -> Tensor | TensorDict | None``.
            *others (TensorDictBase): TensorDicts walked together with this one; ``fn``
                receives their leaf under the same key after this one's.

        Keyword Args:
            batch_size (torch.Size or sequence of int, optional): the batch size of the
                result, for an ``fn`` that changes the leading dims. A nested TensorDict
                gets ``batch_size`` followed by its own extra batch dims.
            device (torch.device, optional): the device of the result (results on
                another device are moved there). ``None`` gives a result without device.
            names (list of str, optional): the batch dim names of the result.
            inplace (bool): write the results into the existing leaves (as ``set_``)
                and return ``self``. Defaults to ``False``.
            default (Any, optional): the value used for an entry that one of the walked
                TensorDicts lacks. Without it a missing entry raises ``KeyError``.
            filter_empty (bool, optional): ``True`` drops every nested TensorDict left
                without leaves (and returns ``None`` if the result is empty); ``False``
                keeps them; ``None`` (default) drops the ones emptied by ``fn``.
            propagate_lock (bool): lock the result if ``self`` is locked.
            call_on_nested (bool): call ``fn`` on the nested TensorDicts themselves
                instead of on their leaves.
            is_leaf (callable, optional): ``is_leaf(type) -> bool``; a value whose type
                it accepts is handed to ``fn`` whole.
            out (TensorDictBase, optional): write the results into ``out`` (in place
                where ``out`` has the key) and return it.
            named (bool): call ``fn(key, leaf, *other_leaves)`` as :meth:`named_apply`.
            nested_keys (bool): with ``named=True``, pass full nested keys.
            prefix (tuple): with ``named=True``, prepended to the keys passed.
            **constructor_kwargs: ``lock=True`` locks the result. ``num_threads``,
                ``pool`` and ``checked`` are accepted for compatibility; the leaves are
                always visited in the calling thread.

        Returns:
            a new TensorDict with the batch size of ``self`` (or ``batch_size``),
            ``self`` when ``inplace=True``, ``out`` when given, or ``None`` when
            ``filter_empty=True`` and no leaf remains.

        Raises:
            RuntimeError: a result's leading dims do not match the batch size.
            KeyError: an entry is missing from one of ``others`` and no ``default``
                is given.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3), "b": {"c": torch.ones(3, 2)}}, [3])
            >>> td.apply(lambda x: x + 1)["b", "c"].shape
            torch.Size([3, 2])
            >>> td.apply(lambda x: x[:2], batch_size=[2]).batch_size
            torch.Size([2])
            >>> "a" in td.apply(lambda x: None if x.ndim == 1 else x).keys()
            False
            >>> td.apply(lambda x, y: x + y, td)["a"]
            tensor([0., 0., 0.])
        """
        return self._apply_call(
            fn,
            others,
            named,
            nested_keys,
            tuple(prefix),
            batch_size,
            device,
            NO_DEFAULT if names is _NO_NAMES else names,
            inplace,
            default,
            filter_empty,
            propagate_lock,
            call_on_nested,
            is_leaf,
            out,
            constructor_kwargs,
        )

    def named_apply(
        self,
        fn: Callable,
        *others: Any,
        nested_keys: bool = False,
        prefix: tuple = (),
        batch_size: Any = None,
        device: Any = NO_DEFAULT,
        names: Any = _NO_NAMES,
        inplace: bool = False,
        default: Any = NO_DEFAULT,
        filter_empty: bool | None = None,
        propagate_lock: bool = False,
        call_on_nested: bool = False,
        is_leaf: Callable[[type], bool] | None = None,
        out: Any = None,
        **constructor_kwargs: Any,
    ) -> TensorDictBase | None:
        """Like :meth:`apply`, with the key passed first: ``fn(key, leaf, *other_leaves)``.

        Args:
            fn (Callable): ``fn(key, leaf, *other_leaves) -> Tensor | TensorDict | None``.
            *others (TensorDictBase): TensorDicts walked together with this one.

        Keyword Args:
            nested_keys (bool): pass the full nested key (a tuple for nested entries)
                instead of the last string. Defaults to ``False``.
            prefix (tuple): prepended to the nested keys passed to ``fn``.
            **kwargs: every keyword of :meth:`apply`.

        Returns:
            see :meth:`apply`.

        Raises:
            RuntimeError: a result's leading dims do not match the batch size.
            KeyError: an entry is missing from one of ``others`` and no ``default``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2), "b": {"c": torch.ones(2)}}, [2])
            >>> seen = []
            >>> _ = td.named_apply(lambda k, x: seen.append(k), nested_keys=True)
            >>> seen
            ['a', ('b', 'c')]
            >>> list(td.named_apply(lambda k, x: x if k != "a" else None).keys(True, True))
            [('b', 'c')]
        """
        return self._apply_call(
            fn,
            others,
            True,
            nested_keys,
            tuple(prefix),
            batch_size,
            device,
            NO_DEFAULT if names is _NO_NAMES else names,
            inplace,
            default,
            filter_empty,
            propagate_lock,
            call_on_nested,
            is_leaf,
            out,
            constructor_kwargs,
        )

    def apply_(self, fn: Callable, *others: Any, **kwargs: Any) -> Self:
        """Applies ``fn`` to every tensor leaf and writes the result into the leaf.

        Same as :meth:`apply` with ``inplace=True``: each result is copied into the
        leaf it comes from, so the leaves keep their storage.

        Args:
            fn (Callable): ``fn(leaf, *other_leaves) -> Tensor``; the result must
                broadcast to the leaf's shape.
            *others (TensorDictBase): TensorDicts walked together with this one.
            **kwargs: the keywords of :meth:`apply`.

        Returns:
            ``self``.

        Raises:
            RuntimeError: a result does not broadcast to its leaf.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3), "b": {"c": torch.ones(3)}}, [3])
            >>> a = td["a"]
            >>> _ = td.apply_(lambda x: x + 1)
            >>> a
            tensor([1., 1., 1.])
        """
        kwargs["inplace"] = True
        return self.apply(fn, *others, **kwargs)  # type: ignore[return-value]

    def _fast_apply(self, fn: Callable, *others: Any, **kwargs: Any) -> Any:
        """Alias of :meth:`apply` (kept for code written against the reference API)."""
        return self.apply(fn, *others, **kwargs)

    def _apply_call(
        self,
        fn: Callable,
        others: tuple,
        named: bool,
        nested_keys: bool,
        prefix: tuple,
        batch_size: Any,
        device: Any,
        names: Any,
        inplace: bool,
        default: Any,
        filter_empty: bool | None,
        propagate_lock: bool,
        call_on_nested: bool,
        is_leaf: Any,
        out: Any,
        constructor_kwargs: dict,
    ) -> Any:
        unknown = set(constructor_kwargs) - _CONSTRUCTOR_KWARGS
        if unknown:
            msg = f"apply() got unexpected keyword arguments {sorted(unknown)}."
            raise TypeError(msg)
        for i, other in enumerate(others):
            if not isinstance(other, _classes.TensorDictBase):
                msg = (
                    f"apply: `*others` must be TensorDicts, got a {type(other).__name__} at "
                    f"position {i}. Pass extra non-TensorDict arguments through a closure."
                )
                raise TypeError(msg)
        new_bs = None if batch_size is None else _Size(batch_size)
        if new_bs is not None and new_bs == self.batch_size:
            new_bs = None
        device = _device_arg(device)
        if (
            not named
            and new_bs is None
            and device is NO_DEFAULT
            and not inplace
            and out is None
            and not call_on_nested
            and is_leaf is None
            and (not others or default is NO_DEFAULT)
        ):
            if others:
                result = _apply_others(self, fn, others, filter_empty, prefix)
            else:
                result = _apply_simple(self, fn, filter_empty, prefix)
        elif (
            out is None
            and not call_on_nested
            and is_leaf is None
            and default is NO_DEFAULT
            and (not inplace or (not named and new_bs is None and device is NO_DEFAULT))
            and (
                result := (
                    apply_inplace_dense(self, fn, others, filter_empty)
                    if inplace
                    else apply_dense(self, fn, others, named, nested_keys, prefix, filter_empty, new_bs, device)
                )
            )
            is not NOT_DENSE
        ):
            # a tree of dense TensorDicts: one flat loop over the leaves (_apply_dense.py)
            if inplace:
                return result
        else:
            ctx = _Ctx(
                fn=fn,
                named=named,
                nested_keys=nested_keys,
                default=default,
                filter_empty=filter_empty,
                inplace=inplace,
                call_on_nested=call_on_nested,
                is_leaf=is_leaf,
                device=device,
                new_bs=new_bs,
            )
            result = _walk(ctx, [self, *others], out, prefix, new_bs)
            if inplace or out is not None:
                return result
        if result is None:
            if filter_empty is not False:
                # every result was None (fn run for its side effects): None, as tensordict 0.15
                return None
            result = self._new_like(
                {}, batch_size=new_bs, device=self.device if device is NO_DEFAULT else device
            )
        if names is not NO_DEFAULT:
            result.names = names
        elif new_bs is None and self._has_names() and not result._has_names():
            result.names = self.names
        if constructor_kwargs.get("lock") or (propagate_lock and self.is_locked):
            result.lock_()
        return result
