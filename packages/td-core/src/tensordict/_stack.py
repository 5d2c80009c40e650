"""``stack`` and ``cat`` of TensorDicts (dense). ``torch.stack``/``torch.cat`` on
TensorDicts land here through ``__torch_function__``; under
``set_lazy_legacy(True)`` ``stack`` builds a ``LazyStackedTensorDict`` instead."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from tensordict import _classes
from tensordict._nontensor import NonTensorData, NonTensorStack, _cat_non_tensor, _stack_non_tensor
from tensordict._switch import ModeSwitch
from tensordict._unbatched import UnbatchedTensor

if TYPE_CHECKING:
    from tensordict._base import TensorDictBase

__all__ = ["stack", "cat", "set_lazy_legacy", "lazy_legacy"]

_LAZY_LEGACY = [False]


def _common_device(tds: Sequence[TensorDictBase], dense: bool = False) -> torch.device | None:
    """The device every TensorDict of ``tds`` has, else ``None``; ``dense``: all of them are
    ``TensorDict`` instances, whose ``_device`` is read directly."""
    if dense:
        device = tds[0]._device
        for td in tds:
            if td._device is not device and td._device != device:
                return None
        return device
    device = tds[0].device
    for td in tds[1:]:
        if td.device != device:
            return None
    return device


def tensorclass_of(items: list) -> Any:
    """The class of ``items`` when they are tensorclass instances, else ``None``: the
    module-level ``stack``/``cat``/``lazy_stack`` hand those to the class's own
    classmethods, which keep the class and its non-tensor fields."""
    first = items[0] if items else None
    if first is None or isinstance(first, (torch.Tensor, _classes.TensorDictBase)):
        return None
    return type(first) if getattr(first, "_is_tensorclass", False) else None


def _all_dense(tds: list) -> bool:
    """Whether every item of ``tds`` is a plain ``TensorDict`` (whose attributes and store the
    stacking code may read directly)."""
    td_cls = _classes.TensorDict
    for td in tds:
        if td.__class__ is not td_cls:
            return False
    return True


def _dense_keys(stores: list) -> list | None:
    """The keys of ``stores[0]`` when every store has as many keys, else ``None``. With the
    per-key gather (``[s[key] for s in stores]``, a ``KeyError`` when a key is missing) equal
    lengths make equal key sets, without a set comparison of every store."""
    n_keys = len(stores[0])
    for store in stores:
        if len(store) != n_keys:
            return None
    return list(stores[0])


class _StackKeysError(KeyError, RuntimeError):
    """The TensorDicts to stack hold different keys: a ``RuntimeError`` as in tensordict
    0.15.3 (TorchRL's rollout catches it and matches its opening words) and a ``KeyError``."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _check_keys(tds: Sequence[TensorDictBase], op: str) -> list[str]:
    keys = list(tds[0]._keys_raw())
    ref = set(keys)
    for i, td in enumerate(tds[1:], 1):
        other = td._keys_raw()
        if len(other) != len(ref) or not ref.issuperset(other):
            missing = sorted(ref - set(other))
            extra = sorted(set(other) - ref)
            msg = (
                f"{op}: TensorDict {i} has different keys than TensorDict 0 "
                f"(missing {missing}, extra {extra}). Use `tensordict.lazy_stack` for heterogeneous keys."
            )
            if op == "stack":
                raise _StackKeysError(f"The sets of keys in the tensordicts to stack are exclusive: {msg}")
            raise KeyError(msg)
    return keys


def _swap_lazy(values: list, dim: int, maybe_dense_stack: bool) -> Any:
    """Stacks lazy stacks that share one ``stack_dim`` and length: a lazy stack along
    that dim (shifted when ``dim`` comes before it) of the (dense where possible)
    stacks of their ``i``-th TensorDicts, so each keeps its own keys and shapes.
    ``None`` when the lazy stacks differ in stack dim or length, or a part fails."""
    lazy_cls = _classes.LazyStackedTensorDict
    first = values[0]
    sd, n = first.stack_dim, len(first.tensordicts)
    if not n or not all(v.__class__ is lazy_cls and v.stack_dim == sd and len(v.tensordicts) == n for v in values):
        return None
    new_sd, inner_dim = (sd + 1, dim) if dim <= sd else (sd, dim - 1)
    if maybe_dense_stack:
        keys = set(first.keys(True, True))
        if any(set(v.keys(True, True)) != keys for v in values[1:]):
            # the stacks hold different keys: every part stays lazy
            parts = [lazy_cls._from_list([v.tensordicts[i] for v in values], inner_dim) for i in range(n)]
            return lazy_cls._from_list(parts, new_sd)
    try:
        parts = [
            stack([v.tensordicts[i] for v in values], inner_dim, maybe_dense_stack=maybe_dense_stack)  # type: ignore[misc]
            for i in range(n)
        ]
    except (RuntimeError, KeyError):
        return None
    return lazy_cls._from_list(parts, new_sd)


def _stack_lazy_values(values: list, dim: int, maybe_dense_stack: bool) -> Any:
    """Stacks lazy stacks that cannot be stacked densely (heterogeneous shapes or keys):
    see :func:`_swap_lazy`; otherwise a lazy stack of the lazy stacks."""
    out = _swap_lazy(values, dim, maybe_dense_stack)
    return _classes.LazyStackedTensorDict._from_list(values, dim) if out is None else out


def stack(list_of_tensordicts: Sequence[TensorDictBase], dim: int = 0, *, out: Any = None, maybe_dense_stack: bool = False) -> TensorDictBase:
    """Stacks TensorDicts along a new batch dim ``dim``.

    Every TensorDict must have the same ``batch_size`` and keys. The result has
    ``batch_size[:dim] + [len(list)] + batch_size[dim:]``. Differing non-tensor
    values become a :class:`~tensordict.NonTensorStack`. Under
    ``set_lazy_legacy(True)`` a lazy stack is returned.

    Raises:
        RuntimeError: empty list, or the batch sizes differ (both shapes named).
        KeyError: the key sets differ.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, stack
        >>> tds = [TensorDict({"a": torch.zeros(3)}, [3]) for _ in range(2)]
        >>> stack(tds, 1).batch_size
        torch.Size([3, 2])
    """
    try:
        return _stack_level(list_of_tensordicts, dim, out, maybe_dense_stack, _stack_nested)
    except RecursionError:  # nested deeper than the recursion limit allows
        return _bottom_up(_stack_level, list_of_tensordicts, dim, out, maybe_dense_stack)


def _stack_nested(values: list, dim: int, maybe_dense_stack: bool) -> Any:
    """The stack of a nested key's TensorDicts, by recursion (the usual case); the level a
    RecursionError stops finishes its subtree bottom up (the levels above carry on)."""
    try:
        return _stack_level(values, dim, None, maybe_dense_stack, _stack_nested)
    except RecursionError:
        return _bottom_up(_stack_level, values, dim, None, maybe_dense_stack)


def _stack_level(
    list_of_tensordicts: Sequence[TensorDictBase], dim: int, out: Any, maybe_dense_stack: bool, nested: Callable
) -> Any:
    """One level of :func:`stack`; ``nested(values, dim, maybe_dense_stack)`` gives the
    stack of a nested key (:func:`_stack_nested`, or a look-up of the results that
    :func:`_bottom_up` computed first for a deep tree)."""
    tds = list(list_of_tensordicts)
    if not tds:
        msg = "stack expects a non-empty sequence of TensorDicts."
        raise RuntimeError(msg)
    tc = tensorclass_of(tds)
    if tc is not None:
        return tc.maybe_dense_stack(tds, dim, out=out) if maybe_dense_stack else tc.stack(tds, dim, out=out)
    dense = _all_dense(tds)
    bs = tds[0].batch_size
    checked = False
    if dense:  # attribute reads, not properties; equal sizes are often one object
        for td in tds:
            if td._batch_size is not bs and td._batch_size != bs:  # type: ignore[attr-defined]
                break
        else:
            checked = True
    for i, td in enumerate(() if checked else tds[1:], 1):
        if td.batch_size != bs:
            if maybe_dense_stack and len(td.batch_size) == len(bs):
                # no dense form: a lazy stack, with -1 where the batch sizes differ
                return _classes.LazyStackedTensorDict(*tds, stack_dim=dim)
            msg = (
                f"stack expects every TensorDict to have the same batch_size, got {tuple(bs)} "
                f"(TensorDict 0) and {tuple(td.batch_size)} (TensorDict {i})."
            )
            raise RuntimeError(msg)
    nd = len(bs)
    if not -nd - 1 <= dim <= nd:
        msg = f"stack: dim={dim} is out of range for batch_size {tuple(bs)}."
        raise IndexError(msg)
    if dim < 0:
        dim += nd + 1
    if _LAZY_LEGACY[0]:
        return _classes.LazyStackedTensorDict(*tds, stack_dim=dim)
    if maybe_dense_stack and tds[0].__class__ is _classes.LazyStackedTensorDict:
        swapped = _swap_lazy(tds, dim, True)
        if swapped is not None:
            return swapped
    stores = [td._tensordict for td in tds] if dense else None
    keys = _dense_keys(stores) if stores is not None else None
    if keys is None:
        dense = False
        try:
            keys = _check_keys(tds, "stack")
        except KeyError:
            if maybe_dense_stack:
                return _classes.LazyStackedTensorDict(*tds, stack_dim=dim)
            raise
    source = {}

    for key in keys:
        if dense:
            try:
                values = [s[key] for s in stores]  # type: ignore[union-attr]
            except KeyError:  # the key sets differ: the checked path names the difference
                try:
                    _check_keys(tds, "stack")
                except KeyError:
                    if maybe_dense_stack:
                        return _classes.LazyStackedTensorDict(*tds, stack_dim=dim)
                    raise
                raise
        else:
            values = [td._get_raw(key) for td in tds]
        first = values[0]
        if first.__class__ is UnbatchedTensor:
            source[key] = _one_unbatched(key, values)
        elif isinstance(first, torch.Tensor):
            try:
                source[key] = torch.stack(values, dim)
            except RuntimeError as err:
                shapes = sorted({tuple(v.shape) for v in values})
                if maybe_dense_stack:
                    return _classes.LazyStackedTensorDict(*tds, stack_dim=dim)
                msg = (
                    f"The shapes of the tensors to stack is incompatible: stack: cannot stack key {key!r}, "
                    f"shapes differ: {shapes} ({err})."
                )
                raise RuntimeError(msg) from None
        elif isinstance(first, _classes.TensorDictBase):
            lazy_cls = _classes.LazyStackedTensorDict
            try:
                source[key] = nested(values, dim, maybe_dense_stack)
            except RuntimeError:
                if not any(v.__class__ is lazy_cls for v in values):
                    raise
                # nested lazy stacks of heterogeneous shapes have no dense form: they stay lazy
                source[key] = _stack_lazy_values(values, dim, maybe_dense_stack)
        elif isinstance(first, (NonTensorData, NonTensorStack)):
            source[key] = _stack_non_tensor(values, dim)
        else:
            source[key] = torch.stack(values, dim)
    new_bs = torch.Size((*bs[:dim], len(tds), *bs[dim:]))
    _rebatch_unbatched(source, new_bs)

    names = None
    if tds[0]._has_names() and all(td.names == tds[0].names for td in tds):
        names = list(tds[0].names)
        names.insert(dim, None)
    result = _classes.TensorDict._new_unsafe(source, new_bs, _common_device(tds, dense), names)
    if not dense and hasattr(tds[0].__class__, "_typed_restack"):  # TypedTensorDict keeps its class
        result = tds[0]._typed_restack(tds, result)
    if out is not None:
        try:
            out.update_(result)
        except KeyError:
            # as tensordict 0.15.3: ``out`` receives the keys it holds, the others are dropped
            out.update_(result.select(*out.keys(True, True), strict=False))
        return out
    return result


def cat(list_of_tensordicts: Sequence[TensorDictBase], dim: int = 0, *, out: Any = None) -> TensorDictBase:
    """Concatenates TensorDicts along existing batch dim ``dim``.

    Raises:
        RuntimeError: empty list, or batch sizes differ outside ``dim``.
        KeyError: the key sets differ.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, cat
        >>> tds = [TensorDict({"a": torch.zeros(3, 4)}, [3, 4]) for _ in range(2)]
        >>> cat(tds, 0).batch_size
        torch.Size([6, 4])
    """
    try:
        return _cat_level(list_of_tensordicts, dim, out, None, _cat_nested)
    except RecursionError:  # nested deeper than the recursion limit allows
        return _bottom_up(_cat_level, list_of_tensordicts, dim, out, None)


def _cat_nested(values: list, dim: int, _unused: Any) -> Any:
    """The concatenation of a nested key's TensorDicts, by recursion (the usual case; see
    :func:`_stack_nested`)."""
    try:
        return _cat_level(values, dim, None, None, _cat_nested)
    except RecursionError:
        return _bottom_up(_cat_level, values, dim, None, None)


def _cat_level(list_of_tensordicts: Sequence[TensorDictBase], dim: int, out: Any, _unused: Any, nested: Callable) -> Any:
    """One level of :func:`cat` (see :func:`_stack_level`)."""
    tds = list(list_of_tensordicts)
    if not tds:
        msg = "cat expects a non-empty sequence of TensorDicts."
        raise RuntimeError(msg)
    tc = tensorclass_of(tds)
    if tc is not None:
        return tc.cat(tds, dim, out=out)
    lazy_cls = _classes.LazyStackedTensorDict
    for td in tds:
        if td.__class__ is lazy_cls:
            return _cat_lazy(tds, dim, out)
    bs = tds[0].batch_size
    nd = len(bs)
    if not nd:
        msg = "cat: TensorDicts with batch_size [] cannot be concatenated; use stack."
        raise RuntimeError(msg)
    if not -nd <= dim < nd:
        msg = f"cat: dim={dim} is out of range for batch_size {tuple(bs)}."
        raise IndexError(msg)
    if dim < 0:
        dim += nd
    dense = _all_dense(tds)
    for i, td in enumerate(tds[1:], 1):
        obs = td._batch_size if dense else td.batch_size  # type: ignore[attr-defined]
        if obs is bs or obs == bs:  # the common case, without a generator per TensorDict
            continue
        if len(obs) != nd or any(a != b for j, (a, b) in enumerate(zip(bs, obs)) if j != dim):
            msg = (
                f"cat expects batch sizes that match outside dim {dim}, got {tuple(bs)} "
                f"(TensorDict 0) and {tuple(obs)} (TensorDict {i})."
            )
            raise RuntimeError(msg)
    stores = [td._tensordict for td in tds] if dense else None
    keys = _dense_keys(stores) if stores is not None else None
    if keys is None:
        dense = False
        keys = _check_keys(tds, "cat")
    source = {}

    for key in keys:
        if dense:
            try:
                values = [s[key] for s in stores]  # type: ignore[union-attr]
            except KeyError:  # the key sets differ: the checked path names the difference
                _check_keys(tds, "cat")
                raise
        else:
            values = [td._get_raw(key) for td in tds]
        first = values[0]
        if first.__class__ is UnbatchedTensor:
            source[key] = _one_unbatched(key, values)
        elif isinstance(first, torch.Tensor):
            source[key] = torch.cat(values, dim)
        elif isinstance(first, _classes.TensorDictBase):
            source[key] = nested(values, dim, None)
        elif isinstance(first, (NonTensorData, NonTensorStack)):
            source[key] = _cat_non_tensor(values, dim)
        else:
            source[key] = torch.cat(values, dim)
    new_bs = list(bs)
    sizes: list[int] = [td._batch_size[dim] for td in tds] if dense else [td.batch_size[dim] for td in tds]  # type: ignore[attr-defined]
    new_bs[dim] = sum(sizes)
    _rebatch_unbatched(source, torch.Size(new_bs))

    names = tds[0].names if tds[0]._has_names() else None
    result = _classes.TensorDict._new_unsafe(source, torch.Size(new_bs), _common_device(tds, dense), names)
    if not dense and hasattr(tds[0].__class__, "_typed_restack"):  # TypedTensorDict keeps its class
        result = tds[0]._typed_restack(tds, result)
    if out is not None:
        out.update_(result)
        return out
    return result


def _bottom_up(level: Callable, tds: Sequence[TensorDictBase], dim: int, out: Any, flag: Any) -> Any:
    """``level(tds, dim, out, flag, nested)`` for a tree deeper than the recursion limit,
    without recursion: the lists of nested dense TensorDicts met under the same keys are
    collected first (an explicit stack), then stacked/concatenated deepest first, each level
    finding its nested results (or the error a nested level raised, re-raised where the
    recursive walk would have raised it) in ``done``."""
    tds = list(tds)
    td_cls = _classes.TensorDict
    if tds and tds[0].__class__ is td_cls and dim < 0:
        # the nested levels get the dim as the top level normalises it
        dim += len(tds[0].batch_size) + (level is _stack_level)
    done: dict = {}

    def nested(values: list, dim: int, flag: Any) -> Any:
        res = done.get(tuple(map(id, values)), _MISSING_RESULT)
        if res is _MISSING_RESULT:  # not collected (not dense): its own recursive walk
            return level(values, dim, None, flag, nested)
        if isinstance(res, BaseException):
            raise res
        return res

    order: list = []
    todo: list[list] = [tds]
    while todo:
        values = todo.pop()
        first = values[0]
        if first.__class__ is not td_cls:
            continue
        for key, value in first._tensordict.items():
            if value.__class__ is td_cls:
                subs = [v._tensordict.get(key) if v.__class__ is td_cls else None for v in values]
                if all(sub.__class__ is td_cls for sub in subs):
                    order.append(subs)
                    todo.append(subs)
    for values in reversed(order):  # every list after the lists nested in it
        try:
            done[tuple(map(id, values))] = level(values, dim, None, flag, nested)
        except RecursionError:  # the caller is itself near the limit: nothing to keep
            raise
        except Exception as err:  # raised when its parent asks for it
            done[tuple(map(id, values))] = err
    return level(tds, dim, out, flag, nested)


_MISSING_RESULT = object()


def _cat_lazy(tds: list, dim: int, out: Any) -> Any:
    """``cat`` when some inputs are lazy stacks: the result is a lazy stack along their
    stack dim (dense inputs are unbound along it), so heterogeneous stacked
    TensorDicts are never stacked. Along the stack dim the stacked TensorDicts are
    chained; along another dim the i-th ones are concatenated together."""
    lazy_cls = _classes.LazyStackedTensorDict
    lazies = [td for td in tds if td.__class__ is lazy_cls]
    sd = lazies[0].stack_dim
    bs = lazies[0].batch_size
    nd = len(bs)
    if not -nd <= dim < nd:
        msg = f"cat: dim={dim} is out of range for batch_size {tuple(bs)}."
        raise IndexError(msg)
    if dim < 0:
        dim += nd
    parts = [
        td.tensordicts if td.__class__ is lazy_cls and td.stack_dim == sd else list(td.unbind(sd))
        for td in tds
    ]
    if dim != sd and len({len(p) for p in parts}) != 1:
        msg = (
            f"cat along dim {dim} (not the stack dim {sd}) needs the same number of stacked "
            f"tensordicts in every input, got {[len(p) for p in parts]}."
        )
        raise RuntimeError(msg)
    for i, td in enumerate(tds):
        obs = td.batch_size
        if len(obs) != nd or any(a != b for j, (a, b) in enumerate(zip(bs, obs)) if j != dim):
            msg = (
                f"cat expects batch sizes that match outside dim {dim}, got {tuple(bs)} "
                f"and {tuple(obs)} (TensorDict {i})."
            )
            raise RuntimeError(msg)
    td_bs = [*bs[:sd], *bs[sd + 1 :]]
    if dim == sd:
        chained = [t for p in parts for t in p]
        if out is not None and out.__class__ is lazy_cls and out.stack_dim == sd and len(out.tensordicts) == len(chained):
            for dest, src in zip(out.tensordicts, chained):
                dest.update_(src)
            return out
        if not chained:
            result = lazy_cls(stack_dim=sd, batch_size=td_bs)
        else:
            result = lazy_cls._from_list(chained, sd)
    else:
        td_dim = dim - (dim > sd)
        n = len(parts[0])
        if out is not None and out.__class__ is lazy_cls and out.stack_dim == sd and len(out.tensordicts) == n:
            for i, dest in enumerate(out.tensordicts):
                cat([p[i] for p in parts], td_dim, out=dest)
            return out
        result = lazy_cls._from_list([cat([p[i] for p in parts], td_dim) for i in range(n)], sd)
    if out is not None:
        out.update_(result)
        return out
    return result


def _one_unbatched(key: str, values: list) -> Any:
    """Stacking unbatched tensors keeps the first one whole; warns if the others differ
    (in storage and in value: equal copies, e.g. from worker processes, are silent)."""
    first = values[0]
    ptr = first.data_ptr()
    if any(v.data_ptr() != ptr and not _same_values(v, first) for v in values[1:]):
        warnings.warn(
            f"Stacking or concatenating UnbatchedTensor entries under key {key!r} that have different "
            "data storage: only the first one is kept.",
            UserWarning,
            stacklevel=3,
        )
    return first


def _same_values(a: Any, b: Any) -> bool:
    plain = torch.Tensor
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.as_subclass(plain), b.as_subclass(plain))


def _rebatch_unbatched(source: dict, batch_size: torch.Size) -> None:
    for key, value in source.items():
        if value.__class__ is UnbatchedTensor:
            source[key] = value._rebatch(batch_size)


def lazy_legacy(allow_none: bool = False) -> bool:
    """``True`` if ``torch.stack`` of TensorDicts builds lazy stacks (see :class:`set_lazy_legacy`)."""
    return _LAZY_LEGACY[0]


class set_lazy_legacy(ModeSwitch):  # noqa: N801 - public name of the tensordict API
    """Makes ``torch.stack`` of TensorDicts lazy (``True``) or dense (``False``, the default).

    Used as a context manager or a decorator, it sets the mode for the block (or the
    call) and restores the previous one after; ``set_lazy_legacy(mode).set()`` sets it
    process-wide until ``.unset()``. Creating the object alone changes nothing.

    Args:
        mode (bool): ``True`` for lazy stacks.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, set_lazy_legacy
        >>> tds = [TensorDict({"a": torch.zeros(2)}, [2]) for _ in range(3)]
        >>> with set_lazy_legacy(True):
        ...     type(torch.stack(tds)).__name__
        'LazyStackedTensorDict'
        >>> type(torch.stack(tds)).__name__
        'TensorDict'
    """

    def __init__(self, mode: bool) -> None:
        super().__init__()
        self.mode = bool(mode)

    def _read(self) -> bool:
        return _LAZY_LEGACY[0]

    def _write(self, value: bool) -> None:
        _LAZY_LEGACY[0] = value
