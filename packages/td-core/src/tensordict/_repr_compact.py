"""The compact repr of ``set_printoptions(compact=True)``, as tensordict 0.15.3 prints it:
``TensorDict(batch_size=[3], fields={a: f32[4], b: {c: i64[]}})``.

Built from metadata only (each leaf's feature shape, dtype and device): no data is read
and no leaf of a lazy stack is stacked. A line that would pass 80 columns is split into
one entry per line (each entry split by the same rule). The verbose repr stays the default
here (see docs/design.md).

A node is a token (``str``) or a container ``(prefix, [(key, node), ...])``.
"""

from __future__ import annotations

from typing import Any

import torch

from tensordict import _classes
from tensordict._nested_shape import leaf_shape
from tensordict._nontensor import NonTensorData, NonTensorStack

__all__ = ["compact_repr"]

_WIDTH = 80
_CPU = torch.device("cpu")
#: word -> abbreviation, replaced anywhere in the dtype name, in this order
#: (``bfloat16`` -> ``bf16``, ``uint8`` -> ``u8``, ``float8_e4m3fn`` -> ``f8_e4m3fn``)
_SHORT = (("float", "f"), ("uint", "u"), ("int", "i"), ("complex", "c"))


def _dtype_name(dtype: torch.dtype | None) -> str:
    name = str(dtype).rsplit(".", 1)[-1]
    for word, short in _SHORT:
        name = name.replace(word, short)
    return name


def _token(td: Any, shape: Any, dtype: torch.dtype | None, devices: set, opts: dict) -> str:
    text = "[" + ",".join(str(int(s)) for s in shape) + "]"
    if opts["show_dtype"]:
        text = _dtype_name(dtype) + text
    if td.device is None and devices != {_CPU}:
        text += "@" + ",".join(sorted(str(d) for d in devices))
    return text


def _feature_shape(td: Any, tensor: torch.Tensor) -> tuple:
    shape = leaf_shape(tensor)  # a nested tensor: -1 for its ragged dims
    if getattr(tensor.__class__, "_pass_through", False):  # an UnbatchedTensor: its whole shape
        return tuple(shape)
    return tuple(shape[td.batch_dims :])


def _stack_leaf(stack: Any, key: str, opts: dict) -> Any:
    """A lazy stack's leaf: differing dims are ``-1``, dtypes promoted, devices merged;
    a member holding non-tensor data gives that member's entry."""
    shapes, dtypes, devices = set(), set(), set()
    todo = list(stack.tensordicts)
    while todo:
        member = todo.pop()
        if isinstance(member, _classes.LazyStackedTensorDict):
            todo.extend(member.tensordicts)
            continue
        value = member._get_raw(key, None)
        if not isinstance(value, torch.Tensor):
            return _entry(member, key, opts)
        shapes.add(_feature_shape(member, value))
        dtypes.add(value.dtype)
        devices.add(value.device)
    shape = None
    for other in shapes:
        if shape is None:
            shape = list(other)
        elif len(other) != len(shape):
            shape = [-1]
            break
        else:
            shape = [s if s == o else -1 for s, o in zip(shape, other)]
    dtype = None
    for d in dtypes:
        dtype = d if dtype is None else torch.promote_types(dtype, d)
    return _token(stack, shape or [], dtype, devices, opts)


def _first_member(td: Any) -> Any:
    while isinstance(td, _classes.LazyStackedTensorDict) and td.tensordicts:
        td = td.tensordicts[0]
    return td


def _entry(td: Any, key: str, opts: dict) -> Any:
    first = _first_member(td)
    value = first._get_raw(key, None) if hasattr(first, "_get_raw") else first.get(key, None)
    if isinstance(value, NonTensorData):
        return type(value.data).__name__
    if isinstance(value, NonTensorStack):
        return "NonTensorStack"
    if isinstance(value, torch.Tensor) or value is None:
        if isinstance(td, _classes.LazyStackedTensorDict):
            return _stack_leaf(td, key, opts)
        if value is None:
            return "None"
        return _token(td, _feature_shape(td, value), value.dtype, {value.device}, opts)
    if getattr(value, "_is_tensorclass", False) or isinstance(value, _classes.TensorDictBase):
        sub = value if first is td else td._get_raw(key, None) if hasattr(td, "_get_raw") else td.get(key)
        prefix = "" if type(value) is _classes.TensorDict else type(value).__name__
        extra = sub.batch_size[td.batch_dims :]
        if extra:
            prefix += "[" + ",".join(map(str, extra)) + "]"
        return prefix, _body(sub, opts)
    return type(value).__name__


def _flat(node: Any) -> str:
    if isinstance(node, str):
        return node
    prefix, entries = node
    return prefix + "{" + ", ".join(f"{k}: {_flat(v)}" for k, v in entries) + "}"


def _entries(td: Any, keys: Any, opts: dict) -> list:
    entries = [(key, _entry(td, key, opts)) for key in keys]
    order = opts["sort_keys"]
    if order == "alphabetical":
        entries.sort(key=lambda e: f"{e[0]}: {_flat(e[1])}")
    elif callable(order):
        entries.sort(key=lambda e: order(f"{e[0]}: {_flat(e[1])}"))
    return entries


def _body(td: Any, opts: dict) -> list:
    if getattr(td, "_is_tensorclass", False):
        inner = td._tensordict
        entries = _entries(inner, list(inner.keys()), opts)
        return entries + [(k, "None" if v is None else type(v).__name__) for k, v in td._non_tensordict.items()]
    return _entries(td, list(td.keys()), opts)


def _render(node: Any, indent: str, used: int, tail: int) -> str:
    """``node`` on one line if ``used + len + tail`` fits the width, else one entry per line."""
    flat = _flat(node)
    if isinstance(node, str) or not node[1] or used + len(flat) + tail <= _WIDTH:
        return flat
    prefix, entries = node
    pad = indent + "    "
    lines = []
    last = len(entries) - 1
    for i, (key, value) in enumerate(entries):
        text = _render(value, pad, len(pad) + len(str(key)) + 2, tail + 1 if i == last else 1)
        lines.append(f"{pad}{key}: {text}")
    return prefix + "{\n" + ",\n".join(lines) + "}"


def compact_repr(td: Any, opts: dict) -> str:
    """The compact repr of a TensorDict or a lazy stack (``opts``: the print options)."""
    header = []
    if opts["show_batch_size"]:
        header.append("batch_size=[" + ",".join(map(str, td.batch_size)) + "]")
    if opts["show_device"] and td.device is not None:
        header.append(f"device={td.device}")
    exclusive = []
    if isinstance(td, _classes.LazyStackedTensorDict):
        header.append(f"stack_dim={td.stack_dim}")
        common = set(td.keys())
        for i, member in enumerate(td.tensordicts):
            own = [k for k in member.keys() if k not in common]
            if own:
                exclusive.append((str(i), ("", _entries(member, own, opts))))
    head = f"{type(td).__name__}(" + "".join(f"{h}, " for h in header) + "fields="
    tail = 1 + len(", exclusive_fields={") if exclusive else 1
    out = head + _render(("", _body(td, opts)), "", len(head), tail)
    if exclusive:
        used = len(out.rsplit("\n", 1)[-1]) + len(", exclusive_fields=")
        out += ", exclusive_fields=" + _render(("", exclusive), "", used, 1)
    return out + ")"
