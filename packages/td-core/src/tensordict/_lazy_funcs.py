"""The stacking functions of the lazy-stack API: ``lazy_stack``,
``maybe_dense_stack`` and ``dense_stack_tds`` (exported by ``tensordict._lazy``),
and ``LazyStackMethodsMixin``, their method forms on every TensorDict
(``TensorDict.lazy_stack``, ``maybe_dense_stack``, ``to_lazystack``, ``densify``).

This module imports nothing of ``tensordict`` at import time, so ``_base`` can mix
it into ``TensorDictBase``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from tensordict import _classes, _stack
from tensordict._deep import levels
from tensordict._host import TensorDictHost
from tensordict._nontensor import _stack_non_tensor

if TYPE_CHECKING:  # pragma: no cover
    from tensordict._base import TensorDictBase

__all__ = ["lazy_stack", "maybe_dense_stack", "dense_stack_tds", "LazyStackMethodsMixin"]

_Tensor = torch.Tensor
_Size = torch.Size


def lazy_stack(
    input: Sequence[TensorDictBase], dim: int = 0, *, out: Any = None, **kwargs: Any
) -> Any:
    """Stacks TensorDicts into a :class:`LazyStackedTensorDict` along a new batch dim ``dim``.

    No leaf is copied: the result keeps ``input`` and stacks a key only when it is
    read. The TensorDicts must share one batch size; their keys and feature
    shapes may differ. A list of tensors is stacked with ``torch.stack``.

    Args:
        input (sequence of TensorDictBase): the TensorDicts to stack.
        dim (int, optional): the new batch dim. Defaults to ``0``.

    Keyword Args:
        out (TensorDictBase, optional): a TensorDict to write the result into (in place).
        **kwargs: passed to :class:`LazyStackedTensorDict` (``stack_dim_name``, ``strict_shape``).

    Returns:
        a :class:`LazyStackedTensorDict` (``out`` when given).

    Raises:
        RuntimeError: ``input`` is empty or the batch sizes differ (both named).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> a = TensorDict(x=torch.zeros(3), batch_size=[3])
        >>> b = TensorDict(y=torch.ones(3), batch_size=[3])
        >>> s = lazy_stack([a, b])
        >>> type(s).__name__, s.batch_size
        ('LazyStackedTensorDict', torch.Size([2, 3]))
    """
    if input.__class__ is list and input and not kwargs and out is None and dim == 0:
        # the common case: a list of dense TensorDicts sharing one batch size object
        # (what follows the first one is checked as ``LazyStackedTensorDict`` checks it:
        # by its ``_batch_size``; anything without one takes the checked path below)
        first = input[0]
        if first.__class__ is _classes.TensorDict:
            bs = first._batch_size
            try:
                for td in input:
                    if td._batch_size is not bs:
                        break
                else:
                    return _classes.LazyStackedTensorDict._new_unsafe(
                        input.copy(), 0, _Size((len(input), *bs))
                    )
            except AttributeError:
                pass
    tds = input if isinstance(input, list) else list(input)
    if not tds:
        msg = "lazy_stack expects a non-empty sequence of TensorDicts."
        raise RuntimeError(msg)
    if isinstance(tds[0], _Tensor):
        return torch.stack(tds, dim, out=out)  # type: ignore[arg-type]
    tc = _stack.tensorclass_of(tds)
    if tc is not None:  # tensorclass instances: an instance over the lazy stack
        return tc.lazy_stack(tds, dim, out=out, **kwargs)
    nt_classes = (_classes.NonTensorData, _classes.NonTensorStack)
    if out is None and not kwargs and isinstance(tds[0], nt_classes) and all(isinstance(td, nt_classes) for td in tds):
        # non-tensor leaves stay one leaf: a NonTensorStack, as tensordict 0.15.3 (TorchRL's
        # NonTensor.rand builds its batched values this way)
        whole = all(getattr(td, "_keeps_whole", False) for td in tds)  # equal MetaData stay one
        return _stack_non_tensor(tds, dim, collapse=whole)

    if kwargs:
        result = _classes.LazyStackedTensorDict(*tds, stack_dim=dim, **kwargs)
    else:
        result = _classes.LazyStackedTensorDict._from_list(tds, dim)
    if out is not None:
        if tuple(out.batch_size) != tuple(result.batch_size):
            msg = (
                f"lazy_stack(out=...): out.batch_size and stacked batch size must match, got "
                f"{tuple(out.batch_size)} and {tuple(result.batch_size)}."
            )
            raise RuntimeError(msg)
        # written TensorDict by TensorDict, so heterogeneous nested stacks are never stacked
        lead = (slice(None),) * result.stack_dim
        for i, td in enumerate(tds):
            out[lead + (i,)] = td
        return out
    return result


def _dense_stack(tds: list, dim: int, out: Any, maybe: bool) -> Any:
    prev = _stack._LAZY_LEGACY[0]
    _stack._LAZY_LEGACY[0] = False
    try:
        return _stack.stack(tds, dim, out=out, maybe_dense_stack=maybe)
    finally:
        _stack._LAZY_LEGACY[0] = prev


def maybe_dense_stack(
    input: Sequence[TensorDictBase], dim: int = 0, *, out: Any = None, **kwargs: Any
) -> Any:
    """Stacks TensorDicts densely when they have the same keys and shapes, lazily otherwise.

    The result is a :class:`~tensordict.TensorDict` when every TensorDict has the
    same keys and the same shape for each key; otherwise a
    :class:`LazyStackedTensorDict` (a nested key whose TensorDicts differ becomes a
    lazy stack inside a dense result). Tensors are stacked with ``torch.stack``.

    Args:
        input (sequence of TensorDictBase): the TensorDicts to stack.
        dim (int, optional): the new batch dim. Defaults to ``0``.

    Keyword Args:
        out (TensorDictBase, optional): a TensorDict to write the result into.

    Raises:
        RuntimeError: ``input`` is empty or the batch sizes differ.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, maybe_dense_stack
        >>> a = TensorDict(x=torch.zeros(3), batch_size=[3])
        >>> b = TensorDict(x=torch.ones(3), batch_size=[3])
        >>> c = TensorDict(y=torch.ones(3), batch_size=[3])
        >>> type(maybe_dense_stack([a, b])).__name__
        'TensorDict'
        >>> type(maybe_dense_stack([a, c])).__name__
        'LazyStackedTensorDict'
    """
    tds = list(input)
    if tds and isinstance(tds[0], _Tensor):
        return torch.stack(tds, dim, out=out)
    return _dense_stack(tds, dim, out, True)


def dense_stack_tds(td_list: Any, dim: int | None = None) -> TensorDictBase:
    """Densely stacks a list of TensorDicts (or the TensorDicts of a lazy stack).

    Unlike ``torch.stack`` under ``set_lazy_legacy(True)``, the result is always
    dense, also for TensorDicts that hold lazy stacks themselves.

    Args:
        td_list (sequence of TensorDictBase or LazyStackedTensorDict): the
            TensorDicts; for a lazy stack, its ``tensordicts``.
        dim (int, optional): the stack dim. Defaults to the lazy stack's
            ``stack_dim``, or ``0``.

    Returns:
        a dense :class:`~tensordict.TensorDict`.

    Raises:
        RuntimeError: the batch sizes or the shapes of a key differ.
        KeyError: the key sets differ.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> s = lazy_stack([TensorDict({"a": torch.zeros(2)}, [2]) for _ in range(3)], 1)
        >>> dense = dense_stack_tds(s)
        >>> type(dense).__name__, dense.batch_size
        ('TensorDict', torch.Size([2, 3]))
    """

    if isinstance(td_list, _classes.LazyStackedTensorDict):
        if dim is None:
            dim = td_list.stack_dim
        td_list = td_list.tensordicts
    if dim is None:
        dim = 0
    return _dense_stack(list(td_list), dim, None, False)


class LazyStackMethodsMixin(TensorDictHost):
    """Lazy-stack methods of every TensorDict."""

    @classmethod
    def lazy_stack(
        cls, input: Sequence[Any], dim: int = 0, *, out: Any = None, **kwargs: Any
    ) -> TensorDictBase:
        """Stacks TensorDicts into a lazy stack (see :func:`tensordict.lazy_stack`).

        Args:
            input (sequence of TensorDictBase): the TensorDicts to stack.
            dim (int, optional): the new batch dim. Defaults to ``0``.

        Keyword Args:
            out (TensorDictBase, optional): a TensorDict to write the result into.
            **kwargs: passed to :class:`~tensordict.LazyStackedTensorDict`.

        Returns:
            a :class:`~tensordict.LazyStackedTensorDict` (``out`` when given).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> a = TensorDict(x=torch.zeros(3), batch_size=[3])
            >>> b = TensorDict(y=torch.ones(3), batch_size=[3])
            >>> stack = TensorDict.lazy_stack([a, b])
            >>> type(stack).__name__, stack.batch_size
            ('LazyStackedTensorDict', torch.Size([2, 3]))
        """
        return lazy_stack(input, dim, out=out, **kwargs)

    @classmethod
    def maybe_dense_stack(
        cls, input: Sequence[Any], dim: int = 0, *, out: Any = None, **kwargs: Any
    ) -> TensorDictBase:
        """Stacks densely if possible, lazily otherwise (see :func:`tensordict.maybe_dense_stack`).

        Args:
            input (sequence of TensorDictBase): the TensorDicts to stack.
            dim (int, optional): the new batch dim. Defaults to ``0``.

        Keyword Args:
            out (TensorDictBase, optional): a TensorDict to write the result into.
            **kwargs: accepted for compatibility.

        Returns:
            a :class:`~tensordict.TensorDict` when every TensorDict has the same keys
            and shapes, else a :class:`~tensordict.LazyStackedTensorDict`.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> a = TensorDict(x=torch.zeros(3), batch_size=[3])
            >>> c = TensorDict(y=torch.ones(3), batch_size=[3])
            >>> type(TensorDict.maybe_dense_stack([a, c])).__name__
            'LazyStackedTensorDict'
        """
        return maybe_dense_stack(input, dim, out=out, **kwargs)

    def to_lazystack(self, dim: int = 0) -> TensorDictBase:
        """A lazy stack of ``self.unbind(dim)`` along ``dim`` (views of ``self``).

        On a lazy stack this moves the stack dim to ``dim``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2, 3)}, batch_size=(2, 3))
            >>> td2 = td.to_lazystack()
            >>> type(td2).__name__, td2.stack_dim, td2.batch_size
            ('LazyStackedTensorDict', 0, torch.Size([2, 3]))
            >>> td2.to_lazystack(1).stack_dim
            1
        """
        if getattr(self, "stack_dim", None) == dim % max(len(self.batch_size), 1):
            return self  # type: ignore[return-value]
        return lazy_stack(list(self.unbind(dim)), dim)

    def densify(self, layout: torch.layout = torch.strided) -> TensorDictBase:
        """This TensorDict with every lazy stack in it replaced by a dense TensorDict
        (nested tensors where the stacked shapes differ); returns ``self`` when it
        holds no lazy stack.

        Args:
            layout (torch.layout, optional): layout of the nested tensors,
                ``torch.strided`` (default) or ``torch.jagged``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict, lazy_stack
            >>> inner = lazy_stack([TensorDict(a=torch.zeros(3)), TensorDict(a=torch.ones(4))])
            >>> td = TensorDict({"inner": inner}, batch_size=[2])
            >>> td.densify(layout=torch.jagged)["inner", "a"].is_nested
            True
        """

        return levels(self, _densify_level(layout), _densify_children)

    def to_padded_tensor(self, padding: float = 0.0, mask_key: Any = None) -> TensorDictBase:
        """Replaces every nested-tensor leaf by its padded tensor.

        The ragged batch dims (``-1`` in ``batch_size``, as :meth:`densify` gives
        a lazy stack of TensorDicts of different batch sizes) take the padded size.

        Args:
            padding (float, optional): the value of the padded elements. Defaults to ``0.0``.
            mask_key (NestedKey, optional): where to write a boolean mask of the batch
                elements that are not padding. Defaults to ``None`` (no mask).

        Returns:
            a new TensorDict; the other leaves are kept as they are.

        Raises:
            RuntimeError: ``mask_key`` is given and the batch size has no ragged dim, or
                this is a lazy stack (densify it first).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> stack = TensorDict.lazy_stack([
            ...     TensorDict(a=torch.zeros(3), batch_size=[3]),
            ...     TensorDict(a=torch.ones(4), batch_size=[4]),
            ... ])
            >>> padded = stack.densify(layout=torch.jagged).to_padded_tensor(-1.0, mask_key="mask")
            >>> padded.batch_size
            torch.Size([2, 4])
            >>> padded["a"]
            tensor([[ 0.,  0.,  0., -1.],
                    [ 1.,  1.,  1.,  1.]])
            >>> padded["mask"]
            tensor([[ True,  True,  True, False],
                    [ True,  True,  True,  True]])
        """
        if isinstance(self, _classes.LazyStackedTensorDict):
            msg = "to_padded_tensor() of a lazy stack: call densify(layout=torch.jagged) first."
            raise RuntimeError(msg)
        bs = list(self.batch_size)
        nb = len(bs)
        ragged = [i for i, size in enumerate(bs) if size == -1]
        if mask_key is not None and not ragged:
            msg = (
                f"to_padded_tensor(mask_key={mask_key!r}) needs a ragged batch dim (-1 in the "
                f"batch size), got batch_size={tuple(self.batch_size)}."
            )
            raise RuntimeError(msg)
        mask = None
        for leaf in self.values(True, True):
            if isinstance(leaf, torch.Tensor) and leaf.is_nested and ragged:
                valid = torch.nested.to_padded_tensor(torch.ones_like(leaf, dtype=torch.bool), False)
                for i in ragged:
                    bs[i] = valid.shape[i]
                mask = valid.reshape(*valid.shape[:nb], -1)[..., 0] if valid.dim() > nb else valid
                break

        def pad(leaf: Any) -> Any:
            if isinstance(leaf, torch.Tensor) and leaf.is_nested:
                return torch.nested.to_padded_tensor(leaf, padding)
            return leaf

        out = self.apply(pad, batch_size=bs if ragged else None)
        if mask_key is not None:
            out.set(mask_key, mask)
        return out


_DENSIFY = LazyStackMethodsMixin.densify


def _densify_level(layout: torch.layout) -> Any:
    """One level of :meth:`densify` for a TensorDict that uses the method above, run by
    :func:`~tensordict._deep.levels` (any depth): ``sub`` densifies a nested one like it,
    a lazy stack densifies itself."""
    plain = _classes.TensorDict

    def level(td: Any, sub: Any) -> Any:
        changed = {}
        for key, value in td._items_raw():
            if isinstance(value, _classes.TensorDictBase):
                if value.__class__ is plain or type(value).densify is _DENSIFY:
                    dense = sub(value, sub)
                else:
                    dense = value.densify(layout=layout)
                if dense is not value:
                    changed[key] = dense
        if not changed:
            return td
        source = dict(td._items_raw())
        source.update(changed)
        return td._new_like(source)

    return level


def _densify_children(td: Any) -> list:
    return [v for _, v in td._items_raw() if isinstance(v, _classes.TensorDictBase) and type(v).densify is _DENSIFY]
