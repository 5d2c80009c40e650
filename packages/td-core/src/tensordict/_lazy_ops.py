"""Per-TensorDict methods of a lazy stack (``LazyOpsMixin``).

Methods that map a TensorDict to a TensorDict of the same batch size (``apply``,
``clone``, ``to``, ``select``, ``exclude``, comparisons, ...) run on each stacked
TensorDict and re-stack the results lazily; in-place methods (``apply_``,
``update``, ``update_``, ``zero_``, ...) run on each stacked TensorDict, so the
originals change. Arguments shaped like the stack are split along ``stack_dim``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from tensordict import _classes
from tensordict._base import TensorDictBase, is_tensor_collection
from tensordict._errors import locked_error
from tensordict._host import LazyStackHost
from tensordict._keys import NO_DEFAULT, NestedKey, unravel_key
from tensordict._shape_context import _track

__all__ = ["LazyOpsMixin"]

_Tensor = torch.Tensor
_Size = torch.Size


class LazyOpsMixin(LazyStackHost):
    """Per-TensorDict implementations of the TensorDictBase methods."""

    # -------------------------------------------------------------- helpers
    def _parts_of(self, other: Any, what: str) -> list:
        """One part of ``other`` per stacked TensorDict (``other`` shaped like the stack)."""

        bs = self._batch_size
        if (
            isinstance(other, _classes.LazyStackedTensorDict)
            and other.stack_dim == self.stack_dim
            and other._batch_size == bs
        ):
            return other.tensordicts
        if other.batch_size[: len(bs)] != bs:
            msg = (
                f"{what}: a TensorDict of batch_size {tuple(other.batch_size)} does not match the lazy "
                f"stack's batch_size {tuple(bs)}."
            )
            raise RuntimeError(msg)
        return list(other.unbind(self.stack_dim))

    def _td_batch_size(self, batch_size: Any) -> Any:
        """Per-TensorDict batch size for a stack batch size; ``False`` when the stack dim changes."""
        if batch_size is None:
            return None
        new = _Size(batch_size)
        if new == self._batch_size:
            return None
        sd = self.stack_dim
        if len(new) > sd and new[sd] == len(self.tensordicts):
            return _Size((*new[:sd], *new[sd + 1 :]))
        return False

    def _map_leaves(self, fn: Callable, keep_non_tensor: bool = False, **new_kwargs: Any) -> Any:
        names = new_kwargs.pop("names", NO_DEFAULT)
        bs_arg = new_kwargs.pop("batch_size", None)
        td_bs = self._td_batch_size(bs_arg)
        if td_bs is False:
            if names is not NO_DEFAULT:
                new_kwargs["names"] = names
            return self.contiguous()._map_leaves(
                fn, keep_non_tensor, batch_size=bs_arg, **new_kwargs
            )
        if td_bs is not None:
            new_kwargs["batch_size"] = td_bs
        out = self._new_lazy(
            [td._map_leaves(fn, keep_non_tensor, **new_kwargs) for td in self.tensordicts]
        )
        if names is not NO_DEFAULT and names is not None:
            out.names = names
        elif names is NO_DEFAULT and td_bs is None and self._names is not None:
            out._names = list(self._names)
        return out

    def apply_leaves_(self, fn: Callable[[torch.Tensor], Any]) -> Any:
        """Calls ``fn`` on every tensor leaf of every stacked TensorDict."""
        for td in self.tensordicts:
            td.apply_leaves_(fn)
        return self

    def _tensor_leaves(self) -> list:
        out: list = []
        for td in self.tensordicts:
            out.extend(td._tensor_leaves())
        return out

    # -------------------------------------------------------------- apply
    def apply(self, fn: Callable, *others: Any, **kwargs: Any) -> Any:
        """:meth:`TensorDictBase.apply` on each stacked TensorDict; the results are
        stacked lazily (``inplace=True`` writes into the stacked TensorDicts).

        ``others`` shaped like the stack are split along ``stack_dim``. A
        ``batch_size`` that changes the stack dim runs on a dense copy instead.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict, lazy_stack
            >>> tds = [TensorDict({"a": torch.zeros(2)}, [2]) for _ in range(3)]
            >>> out = lazy_stack(tds).apply(lambda x: x + 1)
            >>> type(out).__name__, out["a"].shape
            ('LazyStackedTensorDict', torch.Size([3, 2]))
            >>> _ = lazy_stack(tds).apply_(lambda x: x + 2)
            >>> tds[0]["a"]
            tensor([2., 2.])
        """
        return self._lazy_apply("apply", fn, others, kwargs)

    def named_apply(self, fn: Callable, *others: Any, **kwargs: Any) -> Any:
        """:meth:`TensorDictBase.named_apply` on each stacked TensorDict, re-stacked lazily."""
        return self._lazy_apply("named_apply", fn, others, kwargs)

    def _lazy_apply(self, method: str, fn: Callable, others: tuple, kwargs: dict) -> Any:
        td_bs = self._td_batch_size(kwargs.get("batch_size"))
        if td_bs is False:
            return getattr(self.contiguous(), method)(fn, *others, **kwargs)
        kwargs["batch_size"] = td_bs
        for i, other in enumerate(others):
            if not isinstance(other, TensorDictBase):
                msg = (
                    f"apply: `*others` must be TensorDicts, got a {type(other).__name__} at "
                    f"position {i}. Pass extra non-TensorDict arguments through a closure."
                )
                raise TypeError(msg)
        split = [self._parts_of(o, method) for o in others]
        names = kwargs.pop("names", NO_DEFAULT)
        out = kwargs.pop("out", None)
        out_parts = None
        if out is not None:
            if (
                isinstance(out, _classes.LazyStackedTensorDict)
                and out.stack_dim == self.stack_dim
                and out._batch_size == self._batch_size
            ):
                out_parts = out.tensordicts
            else:
                result = self._lazy_apply(method, fn, others, dict(kwargs, names=names))
                if result is not None:
                    out.update(result, inplace=True)
                return out
        tds = self.tensordicts
        results = []
        for i, td in enumerate(tds):
            if out_parts is not None:
                kwargs["out"] = out_parts[i]
            results.append(getattr(td, method)(fn, *[s[i] for s in split], **kwargs))
        if kwargs.get("inplace"):
            return self
        if out_parts is not None:
            return out
        if all(r is None for r in results):
            return None
        if any(r is None for r in results):
            like = next(r for r in results if r is not None)
            results = [r if r is not None else like.empty() for r in results]
        result = self._new_lazy(results)
        if names is not NO_DEFAULT and names is not None:
            result.names = names
        return result

    # -------------------------------------------------------------- keys
    def select(self, *keys: NestedKey, inplace: bool = False, strict: bool = True, as_tensordict: bool = False) -> Any:
        """A lazy stack of each stacked TensorDict's ``select(*keys)``.

        Raises:
            KeyError: ``strict=True`` and a key is missing from some stacked
                TensorDicts (their indices are named).
        """
        if len(keys) == 1 and isinstance(keys[0], list):
            keys = tuple(keys[0])
        if strict:
            for key in keys:
                self._check_present(key)
        parts = [td.select(*keys, inplace=inplace, strict=strict) for td in self.tensordicts]
        return self if inplace else self._new_lazy(parts, None, self._batch_size)

    def exclude(self, *keys: NestedKey, inplace: bool = False) -> Any:
        """A lazy stack of each stacked TensorDict's ``exclude(*keys)`` (in place with ``inplace=True``)."""
        if len(keys) == 1 and isinstance(keys[0], list):
            keys = tuple(keys[0])
        if inplace and self.is_locked:
            raise locked_error("exclude keys in place")
        parts = [td.exclude(*keys, inplace=inplace) for td in self.tensordicts]
        return self if inplace else self._new_lazy(parts, None, self._batch_size)

    def flatten_keys(self, separator: str = ".", inplace: bool = False, is_leaf: Any = None) -> Any:
        """Flattens the nested keys of every stacked TensorDict (see :meth:`TensorDictBase.flatten_keys`)."""
        parts = [td.flatten_keys(separator, inplace=inplace) for td in self.tensordicts]
        if inplace:
            return self
        out = self._new_lazy(parts, None, self._batch_size)
        # ``with stack.flatten_keys() as flat:`` writes new keys back on exit
        return _track(self, out, lambda r: r.unflatten_keys(separator))

    def unflatten_keys(self, separator: str = ".", inplace: bool = False) -> Any:
        """Unflattens the keys of every stacked TensorDict (see :meth:`TensorDictBase.unflatten_keys`)."""
        parts = [td.unflatten_keys(separator, inplace=inplace) for td in self.tensordicts]
        if inplace:
            return self
        out = self._new_lazy(parts, None, self._batch_size)
        return _track(self, out, lambda r: r.flatten_keys(separator))

    def filter_empty_(self) -> Any:
        """Removes, in place, every nested TensorDict without leaves from each stacked TensorDict."""
        for td in self.tensordicts:
            td.filter_empty_()
        return self

    def is_empty(self) -> bool:
        """``True`` when no stacked TensorDict holds a leaf."""
        return all(td.is_empty() for td in self.tensordicts)

    def empty(
        self,
        recurse: bool = False,
        *,
        batch_size: Any = None,
        device: Any = NO_DEFAULT,
        names: Any = None,
    ) -> Any:
        """A lazy stack of empty TensorDicts (a dense one when ``batch_size`` is given)."""
        if batch_size is not None and _Size(batch_size) != self._batch_size or not self.tensordicts:
            return TensorDictBase.empty(
                self, recurse, batch_size=batch_size, device=device, names=names  # type: ignore[arg-type]
            )
        kw = {} if device is NO_DEFAULT else {"device": device}
        return self._new_lazy(
            [td.empty(recurse, **kw) for td in self.tensordicts], None, self._batch_size
        )

    # -------------------------------------------------------------- update
    def update(
        self,
        input_dict_or_td: Mapping | TensorDictBase | None = None,
        clone: bool = False,
        inplace: bool = False,
        *,
        non_blocking: bool = False,
        keys_to_update: Sequence[NestedKey] | None = None,
        is_leaf: Any = None,
        update_batch_size: bool = False,
        ignore_lock: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Writes every key of ``input_dict_or_td`` into the stacked TensorDicts.

        A TensorDict shaped like the stack is split along ``stack_dim`` and each part
        updates one stacked TensorDict; other inputs go through
        :meth:`TensorDictBase.update` (values split on write). ``**kwargs`` are more
        entries (``key=value``), written after ``input_dict_or_td``.

        Raises:
            RuntimeError: a value does not fit the batch size, or the stack is locked.
        """
        if input_dict_or_td is self:  # type: ignore[comparison-overlap]
            return self
        if kwargs:
            merged = dict(input_dict_or_td.items()) if input_dict_or_td is not None else {}
            merged.update(kwargs)
            input_dict_or_td = merged
        if input_dict_or_td is None:
            return self
        src = input_dict_or_td
        if (
            update_batch_size
            and isinstance(src, TensorDictBase)
            and src.batch_size != self._batch_size
            and len(src.batch_size) == len(self._batch_size)
        ):
            # a new number of stacked TensorDicts (or new sizes): rebuild the stack from
            # the source's slices along the stack dim, keeping the keys it lacks
            if self.is_locked and not ignore_lock:
                raise locked_error("update the batch_size")
            sd = self.stack_dim
            parts = list(src.unbind(sd))
            n_old = len(self.tensordicts)
            new_tds = []
            for i, part in enumerate(parts):
                if i < n_old and self.tensordicts[i].batch_size == part.batch_size:
                    td = self.tensordicts[i]
                    td.update(part, clone=clone, non_blocking=non_blocking, keys_to_update=keys_to_update, is_leaf=is_leaf)
                else:
                    td = part.clone() if clone else part.copy()
                new_tds.append(td)
            self.tensordicts = new_tds
            self._batch_size = src.batch_size
            self._fast = None
            self._bs_cache = None
            return self
        if (
            isinstance(src, TensorDictBase)
            and not update_batch_size
            and src.batch_size == self._batch_size
        ):
            if self.is_locked and not ignore_lock and not inplace:
                raise locked_error("update")
            parts = self._parts_of(src, "update")
            for td, part in zip(self.tensordicts, parts):
                td.update(
                    part,
                    clone=clone,
                    inplace=inplace,
                    non_blocking=non_blocking,
                    keys_to_update=keys_to_update,
                    is_leaf=is_leaf,
                    ignore_lock=ignore_lock,
                )
            return self
        return TensorDictBase.update(
            self,  # type: ignore[type-var]
            src,
            clone=clone,
            inplace=inplace,
            non_blocking=non_blocking,
            keys_to_update=keys_to_update,
            is_leaf=is_leaf,
            update_batch_size=update_batch_size,
            ignore_lock=ignore_lock,
        )

    def update_(
        self,
        input_dict_or_td: Mapping | TensorDictBase | None = None,
        clone: bool = False,
        *,
        non_blocking: bool = False,
        keys_to_update: Sequence[NestedKey] | None = None,
        **kwargs: Any,
    ) -> Any:
        """In-place update of the stacked TensorDicts: every key must already exist in all
        of them (checked before anything is written). ``**kwargs`` are more entries.

        Raises:
            KeyError: a key is missing from some stacked TensorDicts (indices named).
        """

        if kwargs:
            merged = dict(input_dict_or_td.items()) if input_dict_or_td is not None else {}
            merged.update(kwargs)
            input_dict_or_td = merged
        if input_dict_or_td is None:
            return self
        src = input_dict_or_td
        if isinstance(src, Mapping) and not isinstance(src, TensorDictBase):
            try:
                src = _classes.TensorDict(dict(src), batch_size=self._batch_size)
            except RuntimeError:
                src = _classes.TensorDict(dict(src), batch_size=[])
        ktu = None if keys_to_update is None else {unravel_key(k) for k in keys_to_update}
        for key in src.keys(True, True):
            if ktu is None or key in ktu:
                try:
                    self._check_present(key)
                except KeyError as err:
                    msg = f"update_: key {key!r} was not found ({err.args[0] if err.args else err}); update_ writes existing keys only."
                    raise KeyError(msg) from None
        if src.batch_size[: len(self._batch_size)] == self._batch_size:
            parts = self._parts_of(src, "update_")
        else:
            parts = [src] * len(self.tensordicts)
        for td, part in zip(self.tensordicts, parts):
            td.update_(part, clone=clone, non_blocking=non_blocking, keys_to_update=keys_to_update)
        return self

    # -------------------------------------------------------------- comparisons
    def _compare(self, other: Any, op: Callable) -> Any:
        bs = self._batch_size
        n = len(self.tensordicts)
        if isinstance(other, TensorDictBase) or is_tensor_collection(other):
            if other.batch_size[: len(bs)] != bs:
                return TensorDictBase._compare(self, other, op)  # type: ignore[arg-type]
            parts = self._parts_of(other, "comparison")
        elif isinstance(other, Mapping):
            return TensorDictBase._compare(self, other, op)  # type: ignore[arg-type]
        elif isinstance(other, _Tensor) and other.ndim >= len(bs) and other.shape[: len(bs)] == bs:
            parts = list(other.unbind(self.stack_dim))
        else:
            parts = [other] * n
        return self._new_lazy(
            [td._compare(p, op) for td, p in zip(self.tensordicts, parts)], None, bs
        )

    def all(self, dim: int | None = None) -> Any:
        """``True`` if every leaf of every stacked TensorDict is all true; with ``dim``,
        a dense TensorDict reduced over that batch dim."""
        if dim is None:
            return all(td.all() for td in self.tensordicts)
        return TensorDictBase.all(self, dim)  # type: ignore[arg-type]

    def any(self, dim: int | None = None) -> Any:
        """``True`` if any leaf of any stacked TensorDict has a true element; with ``dim``,
        a dense TensorDict reduced over that batch dim."""
        if dim is None:
            return any(td.any() for td in self.tensordicts)
        return TensorDictBase.any(self, dim)  # type: ignore[arg-type]

    def data_ptr(self, *, storage: bool = False) -> Any:
        """The stacked TensorDicts' ``data_ptr()`` under the keys ``"0"``, ``"1"``, ...
        (batch_size ``[]``, on the CPU), as tensordict 0.15."""
        source = {str(i): td.data_ptr(storage=storage) for i, td in enumerate(self.tensordicts)}
        return _classes.TensorDict._new_unsafe(source, torch.Size(()), torch.device("cpu"))

    @property
    def hook_in(self) -> Any:
        """Deprecated (0.15): the callable applied to written values (``None`` here)."""
        _warn_deprecated_attr("hook_in")
        return self.__dict__.get("_hook_in")

    @hook_in.setter
    def hook_in(self, value: Any) -> None:
        _warn_deprecated_attr("hook_in")
        self.__dict__["_hook_in"] = value

    @property
    def hook_out(self) -> Any:
        """Deprecated (0.15): the callable applied to returned values (``None`` here)."""
        _warn_deprecated_attr("hook_out")
        return self.__dict__.get("_hook_out")

    @hook_out.setter
    def hook_out(self, value: Any) -> None:
        _warn_deprecated_attr("hook_out")
        self.__dict__["_hook_out"] = value

    def valid_keys(
        self, include_nested: bool = False, leaves_only: bool = False, is_leaf: Any = None, *, sort: bool = False
    ) -> Any:
        """Deprecated (0.15): :meth:`keys` with the same arguments."""
        warnings.warn(
            "LazyStackedTensorDict.valid_keys() is deprecated and will be removed in TensorDict 0.17. Use keys() instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.keys(include_nested, leaves_only, is_leaf, sort=sort)


def _warn_deprecated_attr(name: str) -> None:
    warnings.warn(
        f"LazyStackedTensorDict.{name} is deprecated and will be removed in TensorDict 0.17.",
        DeprecationWarning,
        stacklevel=3,
    )
