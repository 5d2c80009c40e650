"""The long ``repr`` of TensorDicts and its inverse, ``parse_tensor_dict_string``.

Format (keys sorted, nested containers indented by four spaces)::

    TensorDict(
        fields={
            a: Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.float32, is_shared=False)},
        batch_size=torch.Size([3]),
        device=None,
        is_shared=False)
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Generator
from typing import Any

import torch

from tensordict import _classes
from tensordict._deep import trampoline
from tensordict._nested_shape import leaf_shape
from tensordict._nontensor import NonTensorData
from tensordict._printoptions import _options, get_printoptions, set_printoptions
from tensordict._repr_compact import compact_repr

__all__ = [
    "fields_repr",
    "get_printoptions",
    "leaf_repr",
    "parse_tensor_dict_string",
    "set_printoptions",
    "td_repr",
]


def _tensor_repr(value: torch.Tensor, opts: dict) -> str:
    name = type(value).__name__
    parts = []
    if opts["show_shape"]:
        parts.append(f"shape={leaf_shape(value)}")
    if opts["plain"] and value.is_floating_point() and value.numel() and value.device.type != "meta":
        with torch.no_grad():
            parts.append(f"mean={value.mean().item():.4g}")
            if value.numel() > 1:
                parts.append(f"std={value.std().item():.4g}")
        if opts["show_dtype"]:
            parts.append(f"dtype={value.dtype}")
        return f"{name}({', '.join(parts)})"
    if opts["show_field_device"]:
        parts.append(f"device={value.device}")
    if opts["show_dtype"]:
        parts.append(f"dtype={value.dtype}")
    if opts["show_field_is_shared"]:
        try:
            shared = value.is_shared() or value.is_cuda
        except Exception:  # meta / fake tensors
            shared = False
        parts.append(f"is_shared={shared}")
    if opts["show_grad"]:
        parts.append(f"requires_grad={value.requires_grad}")
    if opts["show_is_contiguous"]:
        parts.append(f"is_contiguous={value.is_contiguous()}")
    if opts["show_is_view"]:
        parts.append(f"is_view={value._is_view()}")
    if opts["show_storage_size"]:
        try:
            size = value.untyped_storage().nbytes()
        except Exception:  # meta / fake tensors
            size = 0
        parts.append(f"storage_size={size}")
    return f"{name}({', '.join(parts)})"


def leaf_repr(value: Any) -> str:
    """One field's repr: ``Tensor(shape=..., device=..., dtype=..., is_shared=...)``.

    What it shows follows :func:`tensordict.set_printoptions`.
    """
    if isinstance(value, torch.Tensor):
        return _tensor_repr(value, _options())
    return repr(value)


def _sorted_items(items: Any) -> list:
    order = _options()["sort_keys"]
    if order == "insertion":
        return list(items)
    if callable(order):
        return sorted(items, key=lambda kv: order(str(kv[0])))
    return sorted(items, key=lambda kv: str(kv[0]))


def fields_repr(items: Any, name: str = "fields") -> str:
    """``fields={...}`` block for ``(key, value)`` pairs, sorted by key (see
    ``set_printoptions(sort_keys=...)``)."""
    lines = []
    for key, value in _sorted_items(items):
        lines.append(f"{key}: {leaf_repr(value)}")
    body = textwrap.indent(",\n".join(lines), " " * 4)
    return f"{name}={{\n{body}}}" if lines else f"{name}={{\n}}"


def td_repr(td: Any, extra_fields: list[str] | None = None, tail: list[str] | None = None) -> str:
    """Full repr of a TensorDict-like ``td`` (the lines shown follow
    :func:`tensordict.set_printoptions`).

    Nested TensorDicts whose repr is this one are written in the same walk, without
    recursion (see :mod:`tensordict._deep`), and each line is indented once, when the
    text is joined: the cost grows with the length of the text, at any nesting depth."""
    opts = _options()
    if opts["compact"]:
        return compact_repr(td, opts)
    out: list[list] = []  # [indent, text] per line; indented when joined
    trampoline(_td_lines, td, 0, "", extra_fields, tail, opts, out)
    return "\n".join(" " * i + t if i and t.strip() else t for i, t in out)


def _add_lines(out: list, indent: int, text: str, lead: str = "") -> None:
    """Appends the lines of ``text`` (the first after ``lead``) at ``indent``."""
    lines = text.split("\n")
    out.append([indent, lead + lines[0]])
    out.extend([indent, line] for line in lines[1:])


def _td_lines(
    td: Any, indent: int, lead: str, extra_fields: Any, tail: Any, opts: dict, out: list
) -> Generator[tuple, None, None]:
    """The lines of ``td_repr(td)`` at ``indent``, the first after ``lead``; a nested
    TensorDict printed by :func:`td_repr` is yielded (run by :func:`trampoline`)."""
    base_repr = _classes.TensorDictBase.__repr__
    out.append([indent, f"{lead}{type(td).__name__}("])
    inner = indent + 4
    out.append([inner, "fields={"])
    entries = _sorted_items(td._items_raw())
    for pos, (key, value) in enumerate(entries):
        if pos:
            out[-1][1] += ","
        if isinstance(value, _classes.TensorDictBase) and type(value).__repr__ is base_repr:
            yield (value, inner + 4, f"{key}: ", None, None, opts, out)
        else:
            _add_lines(out, inner + 4, leaf_repr(value), f"{key}: ")
    if entries:
        out[-1][1] += "}"
    else:
        out.append([inner, "}"])
    parts = list(extra_fields or [])
    if opts["show_batch_size"]:
        parts.append(f"batch_size={td.batch_size}")
    if opts["show_device"]:
        parts.append(f"device={td.device}")
    if opts["show_is_shared"]:
        parts.append(f"is_shared={td.is_shared() if list(td._keys_raw()) else False}")
    parts.extend(tail or [])
    for part in parts:
        out[-1][1] += ","
        _add_lines(out, inner, part)
    out[-1][1] += ")"


# ---------------------------------------------------------------------- parsing
# Every variable-length part of these patterns is bounded (a size list, a device, a
# class name), so one match attempt costs O(1) and parsing is linear in the input.
_TENSOR_RE = re.compile(
    r"(?P<cls>\w{1,200})\(shape=torch\.Size\(\[(?P<shape>[0-9, \-]{0,1400})\]\), device=(?P<device>[^,\n]{1,200}), "
    r"dtype=torch\.(?P<dtype>\w{1,60}), is_shared=(?P<shared>True|False)\)"
)
_NONTENSOR_HEAD = "NonTensorData(data="
_NONTENSOR_TAIL_RE = re.compile(
    r", batch_size=torch\.Size\(\[(?P<bs>[0-9, \-]{0,1400})\]\), device=(?P<device>[^)\n]{0,200})\)"
)
_NONTENSOR_SEP = ", batch_size=torch.Size(["
_TAIL_RE = re.compile(
    r",[ \t\n]{0,200}batch_size=torch\.Size\(\[(?P<bs>[0-9, \-]{0,1400})\]\),[ \t\n]{0,200}"
    r"device=(?P<device>[^,\s]{1,200}),[ \t\n]{0,200}is_shared=(?:True|False)"
    r"(?:,[ \t\n]{0,200}stack_dim=\d{1,20})?\)"
)
_EXCLUSIVE_RE = re.compile(r",[ \t\n]{0,200}exclusive_fields=\{")
_HEAD_RE = re.compile(r"[ \t\n]{0,4000}(?P<cls>\w{1,200})\([ \t\n]{0,200}fields=\{")
_INT64_MAX = (1 << 63) - 1


def _size(text: str) -> list[int]:
    text = text.strip()
    if not text:
        return []
    try:
        size = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        size = [-1]
    if any(v < 0 for v in size):
        msg = f"parse_tensor_dict_string: invalid size [{text}]."
        raise ValueError(msg)
    if any(v > _INT64_MAX for v in size):
        msg = f"parse_tensor_dict_string: size [{text}] has a dimension beyond int64."
        raise ValueError(msg)
    return size


def _match_nontensor(s: str, pos: int, end: int) -> tuple[str, str, str, int] | None:
    """``(data, batch size, device, end)`` of ``NonTensorData(data=..., batch_size=..., device=...)`` at ``pos``.

    The data text runs up to the first ``, batch_size=torch.Size([`` that is followed
    by a complete tail; each candidate is checked with a bounded pattern, so the scan
    is linear in the line's length.
    """
    if not s.startswith(_NONTENSOR_HEAD, pos, end):
        return None
    start = pos + len(_NONTENSOR_HEAD)
    at = s.find(_NONTENSOR_SEP, start, end)
    while at >= 0:
        m = _NONTENSOR_TAIL_RE.match(s, at, end)
        if m is not None:
            return s[start:at], m["bs"], m["device"], m.end()
        at = s.find(_NONTENSOR_SEP, at + 1, end)
    return None


def _device(text: str) -> torch.device | None:
    text = text.strip()
    if text == "None":
        return None
    try:
        return torch.device(text)
    except RuntimeError:
        msg = f"parse_tensor_dict_string: invalid device {text!r}."
        raise ValueError(msg) from None


def _parse_td(s: str, pos: int) -> tuple[Any, int]:
    m = _HEAD_RE.match(s, pos)
    if m is None:
        msg = f"parse_tensor_dict_string: expected 'TensorDict(\\n    fields={{' at position {pos}."
        raise ValueError(msg)
    pos = m.end()
    fields: dict = {}
    n = len(s)
    line_end = -1  # end of the line holding ``pos`` (found once per line: linear time)
    while True:
        while pos < n and s[pos] in " \n\t,":
            pos += 1
        if pos >= n:
            msg = "parse_tensor_dict_string: unexpected end of string inside fields."
            raise ValueError(msg)
        if s[pos] == "}":
            pos += 1
            break
        if line_end < pos:
            line_end = s.find("\n", pos)
            if line_end < 0:
                line_end = n
        sep = s.find(": ", pos, line_end)
        if sep < 0:
            msg = f"parse_tensor_dict_string: expected 'key: value' at position {pos}."
            raise ValueError(msg)
        key = s[pos:sep]
        pos = sep + 2
        mt = _TENSOR_RE.match(s, pos, line_end)
        mn = _match_nontensor(s, pos, line_end) if mt is None else None
        if mt is not None:
            dtype = getattr(torch, mt["dtype"], None)
            if not isinstance(dtype, torch.dtype):
                msg = f"parse_tensor_dict_string: unknown dtype {mt['dtype']!r} for key {key!r}."
                raise ValueError(msg)
            device = _device(mt["device"]) or torch.device("cpu")
            if device.type == "cuda" and not torch.cuda.is_available():
                device = torch.device("cpu")
            try:
                # an expanded 0-d zero: no memory is allocated whatever shape the text names
                fields[key] = torch.zeros((), dtype=dtype, device=device).expand(_size(mt["shape"]))
            except (RuntimeError, TypeError) as err:  # invalid shape
                msg = f"parse_tensor_dict_string: cannot build the tensor of key {key!r}: {err}"
                raise ValueError(msg) from None
            pos = mt.end()
        elif mn is not None:
            fields[key] = NonTensorData(mn[0], _size(mn[1]))
            pos = mn[3]
        else:
            fields[key], pos = _parse_td(s, pos)
    mx = _EXCLUSIVE_RE.match(s, pos)
    if mx is not None:  # lazy stacks: skip the per-TensorDict exclusive fields
        depth, pos = 1, mx.end()
        while depth and pos < len(s):
            depth += {"{": 1, "}": -1}.get(s[pos], 0)
            pos += 1
    mt = _TAIL_RE.match(s, pos)
    if mt is None:
        msg = f"parse_tensor_dict_string: expected 'batch_size=..., device=..., is_shared=...)' at position {pos}."
        raise ValueError(msg)
    bs = _size(mt["bs"])
    device = _device(mt["device"])  # type: ignore[assignment]
    if device is not None and device.type == "cuda" and not torch.cuda.is_available():
        device = None  # type: ignore[assignment]
    td = _classes.TensorDict._new_unsafe({}, torch.Size(bs), device)
    for key, value in fields.items():
        try:
            td.set(key, value)
        except (RuntimeError, ValueError) as err:  # e.g. a shape that does not fit batch_size
            msg = f"parse_tensor_dict_string: inconsistent entry {key!r}: {err}"
            raise ValueError(msg) from None
    return td, mt.end()


def parse_tensor_dict_string(string: str) -> Any:
    """Rebuilds a TensorDict from its ``repr``: same keys, shapes, dtypes, batch sizes.

    Tensor values are zero-filled (the repr holds no data) as expanded views of one
    zero, so no memory is allocated whatever the shapes (``td.clone()`` gives writable
    leaves); non-tensor values come back as the strings shown.

    Raises:
        ValueError: ``string`` is not a TensorDict repr.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, parse_tensor_dict_string
        >>> td = TensorDict({"a": torch.ones(3), "b": {"c": torch.ones(3, 2)}}, [3])
        >>> parse_tensor_dict_string(repr(td))["b", "c"].shape
        torch.Size([3, 2])
    """
    if not isinstance(string, str):
        msg = f"parse_tensor_dict_string expects a str, got {type(string).__name__}."
        raise TypeError(msg)
    try:
        td, pos = _parse_td(string, 0)
    except RecursionError:
        msg = "parse_tensor_dict_string: the string is nested too deeply."
        raise ValueError(msg) from None
    if string[pos:].strip():
        msg = f"parse_tensor_dict_string: unexpected trailing text at position {pos}."
        raise ValueError(msg)
    return td
