"""Dense views of a lazy stack (``LazyDenseMixin``): ``contiguous``,
``to_tensordict``, ``densify`` (nested tensors where shapes differ), the
``as_list``/``as_nested_tensor``/``as_padded_tensor`` reads, and the repr (built
from shapes alone: no leaf is stacked to print a lazy stack)."""

from __future__ import annotations

import textwrap
import warnings
from typing import Any

import torch

from tensordict import _classes
from tensordict._host import LazyStackHost
from tensordict._keys import _MISSING, NO_DEFAULT
from tensordict._nontensor import _stack_non_tensor
from tensordict._printoptions import get_printoptions
from tensordict._repr import fields_repr, leaf_repr
from tensordict._repr_compact import compact_repr
from tensordict._unbatched import UnbatchedTensor

__all__ = ["LazyDenseMixin"]

_Tensor = torch.Tensor


class _Text:
    """Holds a pre-formatted field repr for :func:`tensordict._repr.fields_repr`."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _pad_stack(values: list, dim: int, value: float, side: str) -> torch.Tensor:
    ndims = {v.ndim for v in values}
    if len(ndims) != 1:
        msg = f"as_padded_tensor: the values have different numbers of dims {sorted(ndims)}."
        raise RuntimeError(msg)
    if side not in ("right", "left"):
        msg = f"padding_side must be 'right' or 'left', got {side!r}."
        raise ValueError(msg)
    target = [max(v.shape[i] for v in values) for i in range(values[0].ndim)]
    padded = []
    for v in values:
        pad: list[int] = []
        for i in reversed(range(v.ndim)):
            missing = target[i] - v.shape[i]
            pad.extend((0, missing) if side == "right" else (missing, 0))
        padded.append(torch.nn.functional.pad(v, pad, value=value) if any(pad) else v)
    return torch.stack(padded, dim)


class LazyDenseMixin(LazyStackHost):
    """Conversions of a lazy stack to dense or nested storage, and its repr."""

    def is_contiguous(self) -> bool:
        """``False``: the leaves of a lazy stack live in the stacked TensorDicts (call
        :meth:`contiguous` for one dense TensorDict)."""
        return False

    def _dense_names(self) -> list | None:
        """The names of ``contiguous()`` / ``to_tensordict()``: as tensordict 0.15, the
        stack dim's name is kept only when the stacked TensorDicts name a dim too."""
        names = self._names
        if names is None:
            return None
        sd = self.stack_dim
        if all(n is None for n in names[:sd] + names[sd + 1 :]):
            return None
        return names

    def contiguous(self, *, canonical: bool = False, inplace: bool = False) -> Any:
        """A dense ``TensorDict`` holding every shared key stacked (a copy).

        Keys only some stacked TensorDicts hold are left out; non-tensor data stays
        a ``NonTensorStack`` (or one ``NonTensorData`` where all values are equal).

        Keyword Args:
            canonical (bool): passed on to nested TensorDicts (stacked leaves are
                freshly allocated, hence row-major, anyway).
            inplace (bool): not supported: a lazy stack has no contiguous storage to
                become in place.

        Raises:
            NotImplementedError: ``inplace=True``.

        Raises:
            RuntimeError: a key has different shapes across the stacked TensorDicts
                (use :meth:`densify` for nested tensors).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict, lazy_stack
            >>> s = lazy_stack([TensorDict({"a": torch.zeros(3)}, [3]) for _ in range(2)])
            >>> dense = s.contiguous()
            >>> type(dense).__name__, dense["a"].shape
            ('TensorDict', torch.Size([2, 3]))
        """

        if inplace:
            msg = (
                "contiguous(inplace=True) is not supported on a LazyStackedTensorDict: its leaves "
                "live in the stacked TensorDicts. Use `td = td.contiguous()` for a dense copy."
            )
            raise NotImplementedError(msg)
        source = {}
        for key in self._keys_raw():
            value = self._get_raw(key)
            if isinstance(value, _classes.TensorDictBase):
                value = value.contiguous(canonical=canonical) if canonical else value.contiguous()
            source[key] = value
        return _classes.TensorDict._new_unsafe(source, self._batch_size, self.device, self._dense_names())

    def to_tensordict(self, *, retain_none: bool | None = None) -> Any:
        """A dense ``TensorDict`` copy (same as :meth:`contiguous`, non-tensor data copied too)."""

        source = {}
        for key in self._keys_raw():
            value = self._get_raw(key)
            if isinstance(value, _classes.TensorDictBase):
                value = value.to_tensordict(retain_none=retain_none)
            elif not isinstance(value, _Tensor):
                value = value.clone()
            source[key] = value
        return _classes.TensorDict._new_unsafe(source, self._batch_size, self.device, self._dense_names())

    def densify(self, layout: torch.layout = torch.strided) -> Any:
        """A dense ``TensorDict``: leaves of equal shapes are stacked, the others become
        nested tensors (``torch.nested``) along the stack dim.

        Args:
            layout (torch.layout, optional): layout of the nested tensors,
                ``torch.strided`` (default) or ``torch.jagged``.

        Raises:
            RuntimeError: a key's shapes differ and ``stack_dim`` is not 0 (nested
                tensors are ragged along their first dim), or the layout cannot hold
                the shapes (``torch.jagged`` holds one ragged dim).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict, lazy_stack
            >>> s = lazy_stack([TensorDict(a=torch.zeros(3)), TensorDict(a=torch.ones(4))])
            >>> dense = s.densify(layout=torch.jagged)
            >>> type(dense).__name__, dense["a"].is_nested
            ('TensorDict', True)
        """

        source = {}
        sd = self.stack_dim
        for key in self._keys_raw():
            values = self._leaf_values(key)
            first = values[0]
            if isinstance(first, _Tensor):
                if len({tuple(v.shape) for v in values}) == 1:
                    source[key] = torch.stack(values, sd)
                else:
                    source[key] = self._nested(key, values, layout)
            elif isinstance(first, _classes.TensorDictBase):
                source[key] = self._get_raw(key).densify(layout=layout)
            else:
                source[key] = _stack_non_tensor(values, sd)  # type: ignore[assignment]
        return _classes.TensorDict._new_unsafe(source, self._batch_size, self.device, self._names)

    def get_nestedtensor(self, key: Any, default: Any = NO_DEFAULT, *, layout: Any = None) -> Any:
        """The leaf under ``key`` as a nested tensor (``torch.nested``) along the stack dim.

        Reads a leaf whose shapes differ across the stacked TensorDicts, which
        :meth:`get` refuses to stack.

        Args:
            key (NestedKey): a str or nested tuple key of a tensor leaf.
            default (Any, optional): returned when ``key`` is missing.

        Keyword Args:
            layout (torch.layout, optional): ``torch.strided`` (default) or ``torch.jagged``.

        Returns:
            a nested tensor with one component per stacked TensorDict.

        Raises:
            RuntimeError: ``stack_dim`` is not 0 (nested tensors are ragged along dim 0).
            KeyError: ``key`` is missing and no default is given.
            TypeError: the values under ``key`` are not tensors.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict, lazy_stack
            >>> s = lazy_stack([TensorDict(a=torch.zeros(2)), TensorDict(a=torch.ones(3))])
            >>> nt = s.get_nestedtensor("a")
            >>> nt.is_nested, [t.shape for t in nt.unbind()]
            (True, [torch.Size([2]), torch.Size([3])])
        """
        if self.stack_dim != 0:
            msg = (
                "LazyStackedTensorDict.get_nestedtensor can only be called when the stack_dim is 0. "
                f"Got stack_dim={self.stack_dim} (key {key!r}); move it first "
                f"(`stacked.transpose(0, {self.stack_dim})`)."
            )
            raise RuntimeError(msg)
        return self.get(key, default, as_nested_tensor=True, layout=layout)

    def _nested(self, key: Any, values: list, layout: Any) -> torch.Tensor:
        if self.stack_dim != 0:
            msg = (
                f"cannot build a nested tensor for key {key!r}: nested tensors are ragged along dim 0 "
                f"but the stack dim is {self.stack_dim}. Move it first (`stacked.transpose(0, {self.stack_dim})`)."
            )
            raise RuntimeError(msg)
        try:
            with warnings.catch_warnings():
                # torch warns that strided nested tensors are a prototype on every first
                # use; the layout was the caller's choice (or our documented default)
                warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors is in prototype")
                return torch.nested.as_nested_tensor(list(values), layout=layout)
        except (RuntimeError, ValueError, TypeError) as err:
            shapes = sorted({tuple(v.shape) for v in values})
            msg = (
                f"cannot build a nested tensor with layout={layout} for key {key!r} from shapes "
                f"{shapes[:5]}: {err}. torch.jagged holds a single ragged dim; try layout=torch.strided."
            )
            raise RuntimeError(msg) from None

    def _get_special(
        self,
        key: Any,
        default: Any,
        as_list: bool,
        as_nested_tensor: bool,
        as_padded_tensor: bool,
        layout: Any,
        padding_value: float,
        padding_side: str,
    ) -> Any:
        try:
            t = self._check_present(key)
        except KeyError:
            if default is not NO_DEFAULT and default is not _MISSING:
                return default
            raise
        k = t[0] if len(t) == 1 else t
        lazy_cls = _classes.LazyStackedTensorDict
        values = [
            td._get_special(k, NO_DEFAULT, as_list, False, as_padded_tensor, layout, padding_value, padding_side)
            if td.__class__ is lazy_cls and not as_nested_tensor
            else td._get_any_raw(k)
            for td in self.tensordicts
        ]
        if as_list:
            return [
                v if isinstance(v, (_Tensor, _classes.TensorDictBase, list)) else self._unwrap_leaf(v)
                for v in values
            ]
        if not all(isinstance(v, _Tensor) for v in values):
            msg = f"key {key!r}: as_nested_tensor / as_padded_tensor need tensor leaves."
            raise TypeError(msg)
        if as_nested_tensor:
            return self._nested(key, values, layout or torch.strided)
        return _pad_stack(values, self.stack_dim, padding_value, padding_side)

    # -------------------------------------------------------------- repr
    def _field_text(self, key: str) -> str:
        values = self._leaf_values(key)
        first = values[0]
        if isinstance(first, _Tensor):
            try:
                shape = first.shape if first.__class__ is UnbatchedTensor else self._combine_shapes([v.shape for v in values])
            except RuntimeError:
                shape = "heterogeneous"  # type: ignore[assignment]
            devices = {v.device for v in values}
            dtypes = {v.dtype for v in values}
            device = first.device if len(devices) == 1 else None
            dtype = first.dtype if len(dtypes) == 1 else "heterogeneous"
            try:
                shared = all(v.is_shared() or v.is_cuda for v in values)
            except Exception:  # noqa: BLE001 - meta / fake tensors
                shared = False
            # stacking gives a plain Tensor for parameters (as ``torch.stack`` does)
            name = "Tensor" if type(first) is torch.nn.Parameter else type(first).__name__
            return f"{name}(shape={shape}, device={device}, dtype={dtype}, is_shared={shared})"
        if isinstance(first, _classes.TensorDictBase):
            return repr(self._get_raw(key))
        return repr(self._stack_values(key, values))

    def __repr__(self) -> str:
        opts = get_printoptions()
        if opts["compact"]:
            return compact_repr(self, opts)
        common = list(self._keys_raw())
        fields = fields_repr([(k, _Text(self._field_text(k))) for k in common])
        seen = set(common)
        blocks = []
        for i, td in enumerate(self.tensordicts):
            own = sorted(
                ((k, v) for k, v in td._items_raw() if k not in seen), key=lambda kv: kv[0]
            )
            if own:
                lines = ",\n".join(f"{k}: {leaf_repr(v)}" for k, v in own)
                blocks.append(f"{i} ->\n" + textwrap.indent(lines, "    "))
        if blocks:
            exclusive = "exclusive_fields={\n" + textwrap.indent(",\n".join(blocks), "    ") + "}"
        else:
            exclusive = "exclusive_fields={\n}"
        opts = get_printoptions()
        parts = [fields, exclusive]
        if opts["show_batch_size"]:
            parts.append(f"batch_size={self._batch_size}")
        if opts["show_device"]:
            parts.append(f"device={self.device}")
        if opts["show_is_shared"]:
            parts.append(f"is_shared={self.is_shared() if common else False}")
        parts.append(f"stack_dim={self.stack_dim}")
        body = textwrap.indent(",\n".join(parts), " " * 4)
        return f"{type(self).__name__}(\n{body})"

    __str__ = __repr__
