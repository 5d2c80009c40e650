"""Operations a ``PersistentTensorDict`` refuses, as tensordict 0.15 does (``LimitsMixin``).

Each of them would either rewrite the file's layout behind the user's back (in-place
``select``, ``flatten_keys``, ``unflatten_keys``, ``to``, ``memmap_``) or hand back
something that looks like a view of the file but is a detached copy (``select``,
``view``). The messages say what to do instead: copy the data into memory first with
:meth:`~tensordict.persistent.PersistentTensorDict.to_tensordict`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from tensordict import TensorDictBase, lazy_legacy

if TYPE_CHECKING:  # the class the mixin is mixed into (type checkers only)
    _MixinBase = TensorDictBase
else:
    _MixinBase = object

__all__ = ["LimitsMixin"]


def _not_a_tensordict(cls: type) -> bool:
    """Leaves for ``keys(is_leaf=)``: tensors and non-tensor data alike."""
    return not issubclass(cls, TensorDictBase)


class LimitsMixin(_MixinBase):
    """Refusals of operations that make no sense on an HDF5-backed TensorDict."""

    # upstream's key/value cache slot; a PersistentTensorDict never caches (reads go to the file)
    _cache = None

    def select(self, *keys: Any, inplace: bool = False, strict: bool = True, **kwargs: Any) -> Any:
        """Not supported on a PersistentTensorDict (as in tensordict 0.15).

        Raises:
            NotImplementedError: always; ``td.to_tensordict().select(...)`` selects
                from an in-memory copy.

        Examples:
            >>> import os, tempfile, torch
            >>> from tensordict import TensorDict
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     with TensorDict(a=torch.zeros(2), b=torch.ones(2), batch_size=[2]).to_h5(os.path.join(tmp, "s.h5")) as td:
            ...         print(list(td.to_tensordict().select("a").keys()))
            ['a']
        """
        msg = (
            f"Cannot call select on a PersistentTensorDict (keys {list(keys)!r}): the result would not be "
            "backed by the file. Copy the data first: td.to_tensordict().select(...)."
        )
        raise NotImplementedError(msg)

    def split_keys(
        self,
        *key_sets: Any,
        inplace: bool = False,
        default: Any = None,
        strict: bool = True,
        reproduce_struct: bool = False,
    ) -> tuple:
        """``TensorDictBase.split_keys``: the selected parts are read into memory; the rest is
        ``self`` with those keys deleted from the file (``inplace=True``) or an in-memory copy.
        ``reproduce_struct`` applies to the selected parts, as in ``TensorDictBase.split_keys``.

        Raises:
            KeyError: a key is missing and ``strict=True``.
            RuntimeError: ``inplace=True`` and the file is read-only or the TensorDict locked.
        """
        if inplace and self.is_locked:
            msg = "Cannot modify locked TensorDict: split_keys(inplace=True) deletes the selected keys."
            raise RuntimeError(msg)
        dense = self.to_tensordict()
        *parts, _rest = dense.split_keys(
            *key_sets, inplace=False, default=default, strict=strict, reproduce_struct=reproduce_struct
        )
        used = [key for part in parts for key in part.keys(True, True, is_leaf=_not_a_tensordict)]
        rest = self.exclude(*used, inplace=inplace)
        return (*parts, rest)

    def view(self, *shape: Any, size: Any = None, batch_size: Any = None) -> Any:
        """``view(dtype)`` reinterprets every leaf (in memory); a shape view is not supported
        (except under ``set_lazy_legacy(True)``, where it is a live view whose writes reach the file).

        Raises:
            RuntimeError: a new shape is asked for; use ``td.to_tensordict().view(...)``
                (or ``reshape``, which returns an in-memory TensorDict).

        Examples:
            >>> import os, tempfile, torch
            >>> from tensordict import TensorDict
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     with TensorDict(a=torch.zeros(2, 3), batch_size=[2, 3]).to_h5(os.path.join(tmp, "v.h5")) as td:
            ...         print(td.to_tensordict().view(-1).batch_size)
            torch.Size([6])
        """
        if (shape and isinstance(shape[0], torch.dtype)) or lazy_legacy():
            # a dtype view, or under set_lazy_legacy(True) a live view whose writes reach the file
            return super().view(*shape, size=size, batch_size=batch_size)
        msg = (
            f"Cannot call `view` on a persistent tensordict (batch_size {tuple(self.batch_size)}): HDF5 "
            "datasets cannot be viewed with another shape. Use td.to_tensordict().view(...) or td.reshape(...) "
            "for an in-memory copy."
        )
        raise RuntimeError(msg)

    def to(self, *args: Any, inplace: bool = False, **kwargs: Any) -> Any:
        """``TensorDictBase.to`` (an in-memory TensorDict); ``inplace=True`` is not supported.

        Raises:
            TypeError: ``inplace=True``: the file's datasets keep their dtype.
        """
        if inplace:
            msg = (
                "Cannot use inplace=True with PersistentTensorDict.to(): the HDF5 datasets keep their dtype and "
                "live on disk. Use td.to(...) for an in-memory copy."
            )
            raise TypeError(msg)
        return super().to(*args, **kwargs)

    def flatten_keys(self, separator: str = ".", inplace: bool = False, is_leaf: Any = None) -> Any:
        """``TensorDictBase.flatten_keys`` (an in-memory TensorDict); ``inplace=True`` is not supported.

        Raises:
            ValueError: ``inplace=True``.
        """
        if inplace:
            msg = ("Cannot call flatten_keys in_place with a PersistentTensorDict: it would rename the file's "
                   "groups and datasets. Use td.flatten_keys() for an in-memory copy.")
            raise ValueError(msg)
        return super().flatten_keys(separator, is_leaf=is_leaf)

    def unflatten_keys(self, separator: str = ".", inplace: bool = False) -> Any:
        """``TensorDictBase.unflatten_keys`` (an in-memory TensorDict); ``inplace=True`` is not supported.

        Raises:
            ValueError: ``inplace=True``.
        """
        if inplace:
            msg = ("Cannot call flatten_keys in_place with a PersistentTensorDict (unflatten_keys): it would "
                   "rename the file's datasets. Use td.unflatten_keys() for an in-memory copy.")
            raise ValueError(msg)
        return super().unflatten_keys(separator)

    def memmap_(self, *args: Any, **kwargs: Any) -> Any:
        """Not supported: the data of a PersistentTensorDict lives in its HDF5 file.

        Raises:
            RuntimeError: always; ``td.memmap(prefix)`` writes a memory-mapped copy.

        Examples:
            >>> import os, tempfile, torch
            >>> from tensordict import TensorDict
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     with TensorDict(a=torch.zeros(2), batch_size=[2]).to_h5(os.path.join(tmp, "m.h5")) as td:
            ...         print(type(td.memmap(os.path.join(tmp, "mm"))["a"]).__name__)
            MemoryMappedTensor
        """
        msg = (
            f"Cannot build a memmap TensorDict in-place from a PersistentTensorDict: its data lives in the "
            f"HDF5 file {self.filename!r}. Use td.memmap(prefix) for a memory-mapped copy."  # type: ignore[attr-defined]
        )
        raise RuntimeError(msg)
