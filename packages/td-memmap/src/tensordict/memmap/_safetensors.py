"""TensorDicts in safetensors files (``to_safetensors`` / ``from_safetensors``).

Each tensor is stored under its nested key joined with ``"."`` (the names of a model's
``state_dict``). The structure (batch size and dim names of each level, the class of
each tensorclass, the stack dim of each lazy stack, the JSON non-tensor values, which
tensors are ``UnbatchedTensor``) is one JSON string under the ``"tensordict"`` key of
the file's ``__metadata__``, in the layout tensordict 0.15 writes, so files go both ways
between the two. A file without it (a Hugging Face checkpoint) loads as a nested
TensorDict with an empty batch size, names split on ``"."``.

Reading never runs code: the header is checked (declared sizes against the file size,
dtypes, offsets inside the data, no overlapping tensors) before the tensors are read, a
tensorclass is looked up only among modules already imported, and nothing is unpickled.
Writing goes to a temporary file that replaces ``path`` once complete.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from tensordict import (
    NonTensorData,
    NonTensorStack,
    TensorDict,
    TensorDictBase,
    UnbatchedTensor,
    ext,
    is_tensorclass,
)

__all__ = ["to_safetensors", "from_safetensors"]

#: the largest JSON header read (safetensors' own reader refuses larger ones too)
HEADER_LIMIT = 100 * 1024 * 1024
_ITEMSIZE = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8, "C64": 8, "C128": 16,
}
_JSON_SCALARS = (str, int, float, bool, type(None))
_DTYPES = {
    "BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16, "U16": torch.uint16,
    "F16": torch.float16, "BF16": torch.bfloat16, "I32": torch.int32, "U32": torch.uint32, "F32": torch.float32,
    "I64": torch.int64, "U64": torch.uint64, "F64": torch.float64, "C64": torch.complex64,
    "F8_E5M2": torch.float8_e5m2, "F8_E4M3": torch.float8_e4m3fn,
}


def _safetensors_torch(feature: str) -> Any:
    try:
        import safetensors.torch as st  # noqa: PLC0415  (optional dependency, imported on use)
    except ModuleNotFoundError as err:
        if err.name is not None and err.name.split(".")[0] != "safetensors":
            raise
        msg = (
            f"{feature} needs the `safetensors` package, which is not installed. Install it with "
            '`pip install safetensors` (or `pip install "td-memmap[safetensors]"`).'
        )
        raise ImportError(msg) from err
    return st


# ---------------------------------------------------------------------- write
def _is_json(value: Any) -> bool:
    if isinstance(value, _JSON_SCALARS):
        return not isinstance(value, float) or math.isfinite(value)
    if isinstance(value, list):
        return all(_is_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    return False


class _Writer:
    """Walks a TensorDict into ``(node, {name: tensor})``."""

    def __init__(self) -> None:
        self.tensors: dict[str, torch.Tensor] = {}
        self.storages: set = set()

    def tensor(self, value: torch.Tensor, key: tuple) -> str:
        if value.is_nested or value.layout != torch.strided:
            msg = f"Cannot save the tensor at {key} as safetensors: nested, jagged and sparse tensors are not supported."
            raise TypeError(msg)
        name = ".".join(key)
        if name in self.tensors:
            msg = f"Two keys of the tensordict have the safetensors name {name!r}."
            raise ValueError(msg)
        value = value.detach()
        if value.__class__ is not torch.Tensor:
            value = value.as_subclass(torch.Tensor)
        if value.device.type != "cpu":
            value = value.cpu()
        value = value.contiguous()
        ptr = value.untyped_storage().data_ptr()
        if value.numel() and ptr in self.storages:
            value = value.clone()  # safetensors refuses tensors that share memory: save a copy
        self.storages.add(ptr)
        self.tensors[name] = value
        return name

    def node(self, data: Any, prefix: tuple) -> dict:
        node: dict = {"batch_size": list(data.batch_size), "names": _names(data)}
        if is_tensorclass(data):
            node["class"] = str(type(data))
            holder, td = data, data.to_tensordict()
        else:
            holder, td = None, data
        if isinstance(td, ext.LazyStackedTensorDict):
            node["stack_dim"] = td.stack_dim
            keys = [set(t.keys()) for t in td.tensordicts]
            if any(k != keys[0] for k in keys):
                msg = f"Cannot save the lazy stack at {prefix or 'the root'} as safetensors: its entries have different keys."
                raise TypeError(msg)
        entries: dict = {}
        for key in td.keys():
            full = (*prefix, key)
            value = getattr(holder, key) if holder is not None and is_tensorclass(getattr(holder, key, None)) else td.get(key)
            if isinstance(value, NonTensorStack):
                msg = f"Cannot save the non-tensor stack at {full} as safetensors: only single JSON values are supported."
                raise TypeError(msg)
            if isinstance(value, NonTensorData):
                if not _is_json(value.data):
                    msg = (
                        f"Cannot save the non-tensor value at {full} as safetensors: {type(value.data).__name__} "
                        "is not a JSON value (str, int, float, bool, None, list or dict)."
                    )
                    raise TypeError(msg)
                entries[key] = {"non_tensor": value.data}
            elif isinstance(value, TensorDictBase) or is_tensorclass(value):
                entries[key] = {"td": self.node(value, full)}
            elif isinstance(value, torch.Tensor):
                entry: dict = {"tensor": self.tensor(value, full)}
                if isinstance(value, UnbatchedTensor):
                    entry["unbatched"] = True
                entries[key] = entry
            else:
                msg = f"Cannot save the value at {full} as safetensors: {type(value).__name__} is not a tensor."
                raise TypeError(msg)
        node["keys"] = entries
        return node


def _write_file(path: str, tensors: dict, metadata: dict) -> None:
    """Writes the safetensors layout: 8-byte header length, JSON header (padded with spaces
    to 8 bytes), then each tensor's bytes, largest item size first so every tensor is aligned.
    The bytes go from each tensor's memory to the file (no intermediate copy)."""
    codes = {dtype: code for code, dtype in _DTYPES.items()}
    order = sorted(tensors.items(), key=lambda item: (-item[1].element_size(), item[0]))
    header: dict = {"__metadata__": metadata}
    offset = 0
    for name, tensor in order:
        code = codes.get(tensor.dtype)
        if code is None:
            msg = f"Cannot save the tensor {name!r} as safetensors: the format has no {tensor.dtype}."
            raise TypeError(msg)
        nbytes = tensor.numel() * tensor.element_size()
        header[name] = {"dtype": code, "shape": list(tensor.shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little"))
        f.write(raw)
        for _, tensor in order:
            if tensor.numel():
                f.write((ctypes.c_ubyte * (tensor.numel() * tensor.element_size())).from_address(tensor.data_ptr()))


def _names(data: Any) -> list | None:
    try:
        names = data.names
    except (RuntimeError, AttributeError):
        return None
    return None if names is None or all(n is None for n in names) else list(names)


def to_safetensors(data: Any, path: str | Path) -> None:
    """Saves a TensorDict, a lazy stack or a tensorclass to a safetensors file.

    Tensors are stored under their nested keys joined with ``"."``; the structure (batch
    sizes, dim names, tensorclass classes, lazy-stack dims, JSON non-tensor values,
    ``UnbatchedTensor`` marks) is JSON in the file's metadata, as tensordict 0.15 writes
    it. Tensors that share memory are stored as copies; tensors on another device go
    through the CPU. The file is written next to ``path`` and moved over it once complete,
    so a failed save leaves an earlier file intact.

    Args:
        data (TensorDictBase or tensorclass): what to save.
        path (str or Path): the file.

    Raises:
        ImportError: safetensors is not installed (the install line is given).
        TypeError: a nested, jagged or sparse tensor, a non-JSON non-tensor value, a
            ``NonTensorStack``, a lazy stack whose entries have different keys.
        ValueError: two keys with one name once joined with ``"."`` (``"a.b"`` and
            ``("a", "b")``).

    Examples:
        >>> import tempfile, torch
        >>> from pathlib import Path
        >>> from tensordict import TensorDict, from_safetensors, to_safetensors
        >>> td = TensorDict({"w": torch.ones(2, 3), "sub": {"b": torch.zeros(2)}}, batch_size=[2])
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     to_safetensors(td, Path(tmp) / "td.safetensors")
        ...     loaded = from_safetensors(Path(tmp) / "td.safetensors")
        >>> loaded.batch_size, loaded["sub", "b"]
        (torch.Size([2]), tensor([0., 0.]))
    """
    _safetensors_torch("to_safetensors")  # the format's package is this feature's requirement
    if not isinstance(data, TensorDictBase) and not is_tensorclass(data):
        msg = f"to_safetensors expects a TensorDict or a tensorclass, got {type(data).__name__}."
        raise TypeError(msg)
    writer = _Writer()
    root = writer.node(data, ())
    metadata = {"tensordict": json.dumps({"version": 1, "root": root})}
    path = os.fspath(path)
    folder, base = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix="-" + base)
    os.close(fd)
    try:
        _write_file(tmp, writer.tensors, metadata)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# ---------------------------------------------------------------------- read
def _bad(path: str, what: str) -> ValueError:
    return ValueError(f"from_safetensors: {path!r} {what}")


def _map_tensors(path: str, header: dict, data_start: int) -> dict | None:
    """The tensors of a checked header as copy-on-write views of one private mapping of the
    file (no bytes copied; writes stay in this process). ``None`` if one is misaligned."""
    size = os.path.getsize(path)
    storage: Any = torch.UntypedStorage.from_file(path, shared=False, nbytes=size) if size else None
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(info["dtype"])
        begin = data_start + info["data_offsets"][0]
        if dtype is None or begin % dtype.itemsize:
            return None
        shape = info["shape"]
        if storage is None or not math.prod(shape):
            out[name] = torch.empty(shape, dtype=dtype)
            continue
        stride: list[int] = []
        step = 1
        for dim in reversed(shape):
            stride.insert(0, step)
            step *= dim
        out[name] = torch.empty(0, dtype=dtype).set_(storage, begin // dtype.itemsize, shape, stride)
    return out


def read_header(path: str) -> tuple[dict, int]:
    """The checked JSON header of a safetensors file and where its data starts (no tensor
    bytes are read).

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is shorter than its header says, the header is larger than
            100 MB, not JSON, names an unknown dtype, a shape that disagrees with the
            byte range, a range outside the data, or two tensors whose bytes overlap
            (the key is named).
    """
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise _bad(path, f"is not a safetensors file: it holds {size} bytes, fewer than the 8-byte header length.")
        n = int.from_bytes(head, "little")
        if n > size - 8:
            raise _bad(path, f"is cut short or not a safetensors file: its header declares {n} bytes but the file holds {size - 8} after the length field.")
        if n > HEADER_LIMIT:
            raise _bad(path, f"has a header of {n} bytes, more than the {HEADER_LIMIT} bytes this reader accepts.")
        raw = f.read(n)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise _bad(path, f"has a header that is not valid JSON ({err}).") from err
    if not isinstance(header, dict):
        raise _bad(path, "has a header that is not a JSON object.")
    data_size = size - 8 - n
    spans = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        spans.append((*_check_entry(path, name, info, data_size), name))
    spans.sort()
    for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise _bad(path, f"has overlapping tensors: {n0!r} (bytes {b0}..{e0}) and {n1!r} (bytes {b1}..{e1}).")
    return header, 8 + n


def _check_entry(path: str, name: str, info: Any, data_size: int) -> tuple:
    if not isinstance(info, dict):
        raise _bad(path, f"has a header entry for tensor {name!r} that is not an object.")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if dtype not in _ITEMSIZE:
        raise _bad(path, f"gives tensor {name!r} the unknown dtype {dtype!r}.")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise _bad(path, f"gives tensor {name!r} the invalid shape {shape!r}.")
    if (
        not isinstance(offsets, list) or len(offsets) != 2
        or not all(isinstance(o, int) for o in offsets) or not 0 <= offsets[0] <= offsets[1]
    ):
        raise _bad(path, f"gives tensor {name!r} the invalid data_offsets {offsets!r}.")
    begin, end = offsets
    if end > data_size:
        raise _bad(path, f"is cut short: tensor {name!r} ends at byte {end} of the data, which holds {data_size} bytes.")
    if end - begin != math.prod(shape) * _ITEMSIZE[dtype]:
        raise _bad(path, f"gives tensor {name!r} {end - begin} bytes, but shape {shape} of {dtype} needs {math.prod(shape) * _ITEMSIZE[dtype]}.")
    return begin, end


def _find_class(path: str, text: str) -> Any:
    """The tensorclass written as ``"<class 'module.Name'>"``, among imported modules only."""
    if not (isinstance(text, str) and text.startswith("<class '") and text.endswith("'>")):
        raise _bad(path, f"names the invalid class {text!r}.")
    dotted = text[len("<class '"):-2]
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        obj = sys.modules.get(".".join(parts[:cut]))
        if obj is None:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr, None)
        if obj is not None and isinstance(obj, type) and is_tensorclass(obj):
            return obj
    msg = (
        f"Could not find the tensorclass {text} saved in {path}. Import the module that defines it "
        "before you load the file (modules named in a file are never imported)."
    )
    raise RuntimeError(msg)


class _Reader:
    def __init__(self, path: str, tensors: dict, device: Any) -> None:
        self.path, self.tensors, self.device = path, tensors, device

    def build(self, node: Any, where: tuple) -> Any:
        if not isinstance(node, dict) or not isinstance(node.get("keys"), dict):
            raise _bad(self.path, f"has invalid tensordict metadata at {where or 'the root'}.")
        batch_size = node.get("batch_size")
        if not isinstance(batch_size, list) or not all(isinstance(d, int) and d >= 0 for d in batch_size):
            raise _bad(self.path, f"has the invalid batch size {batch_size!r} at {where or 'the root'}.")
        source: dict = {}
        for key, entry in node["keys"].items():
            full = (*where, key)
            if not isinstance(entry, dict):
                raise _bad(self.path, f"has invalid metadata for key {full}.")
            if "tensor" in entry:
                name = entry["tensor"]
                if name not in self.tensors:
                    raise _bad(self.path, f"has metadata naming the tensor {name!r} (key {full}), which the file does not hold.")
                value = self.tensors[name]
                source[key] = UnbatchedTensor(value) if entry.get("unbatched") else value
            elif "non_tensor" in entry:
                source[key] = NonTensorData(entry["non_tensor"], batch_size=batch_size)
            elif "td" in entry:
                source[key] = self.build(entry["td"], full)
            else:
                raise _bad(self.path, f"has metadata of an unknown kind for key {full}.")
        try:
            td: Any = TensorDict(source, batch_size=batch_size, names=node.get("names"), device=self.device)
        except (RuntimeError, ValueError, TypeError) as err:
            raise _bad(self.path, f"does not match its metadata at {where or 'the root'}: {err}") from err
        if node.get("stack_dim") is not None:
            dim = node["stack_dim"]
            if not isinstance(dim, int) or not 0 <= dim < len(batch_size):
                raise _bad(self.path, f"has the invalid stack dim {dim!r} at {where or 'the root'}.")
            td = ext.LazyStackedTensorDict(*td.unbind(dim), stack_dim=dim)
        if node.get("class") is not None:
            td = _find_class(self.path, node["class"]).from_tensordict(td)
        return td


def _plain(path: str, tensors: dict, device: Any) -> Any:
    """A file without tensordict metadata: names split on ``"."``, batch size ``[]``."""
    root: dict = {}
    for name in sorted(tensors):
        parts = name.split(".")
        node = root
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise _bad(path, f"holds both a tensor and a sub-tree at {part!r} (tensor {name!r}).")
        if parts[-1] in node:
            raise _bad(path, f"holds both a tensor and a sub-tree at {name!r}.")
        node[parts[-1]] = tensors[name]
    return TensorDict(root, batch_size=[], device=device)


def from_safetensors(path: str | Path, *, device: Any = None) -> Any:
    """Loads a TensorDict, lazy stack or tensorclass from a safetensors file.

    A file written by :func:`to_safetensors` (here or by tensordict 0.15) loads with its
    structure: batch sizes, dim names, tensorclasses, lazy stacks (with the same stack
    dim; their entries load as dense TensorDicts) and non-tensor values. A tensorclass
    loads only if the module that defines it is imported: a module named in a file is
    never imported. Any other safetensors file (a model checkpoint) loads as a nested
    TensorDict with batch size ``[]``, names split on ``"."`` (the layout of
    ``TensorDict.from_module``). The header is checked before any tensor is read.

    Args:
        path (str or Path): the file.

    Keyword Args:
        device (torch.device, optional): where the tensors load, and the device of the
            result. Defaults to ``None``: CPU tensors, no device.

    Returns:
        TensorDict, LazyStackedTensorDict or the saved tensorclass.

    Raises:
        ImportError: safetensors is not installed (the install line is given).
        FileNotFoundError: no such file.
        ValueError: a header that declares more bytes than the file holds, a header over
            100 MB, overlapping or out-of-range tensors, invalid metadata (the file and the
            key are named).
        RuntimeError: the saved tensorclass is not among the imported modules.

    Examples:
        >>> import tempfile, torch
        >>> from pathlib import Path
        >>> from safetensors.torch import save_file
        >>> from tensordict import from_safetensors
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     save_file({"0.weight": torch.ones(4, 3), "0.bias": torch.zeros(4)}, Path(tmp) / "m.safetensors")
        ...     params = from_safetensors(Path(tmp) / "m.safetensors")
        >>> params["0", "weight"].shape
        torch.Size([4, 3])
    """
    st = _safetensors_torch("from_safetensors")
    path = os.fspath(path)
    if not os.path.isfile(path):
        msg = f"from_safetensors: no such file: {path!r}"
        raise FileNotFoundError(msg)
    header, data_start = read_header(path)
    device = None if device is None else torch.device(device)
    tensors = _map_tensors(path, header, data_start)
    if tensors is None:  # a dtype or an alignment the mapping cannot serve: safetensors' reader
        tensors = st.load_file(path)
    if device is not None and device.type != "cpu":
        tensors = {k: v.to(device) for k, v in tensors.items()}
    meta = header.get("__metadata__") or {}
    raw = meta.get("tensordict") if isinstance(meta, dict) else None
    if raw is None:
        return _plain(path, tensors, device)
    try:
        doc = json.loads(raw)
    except (TypeError, json.JSONDecodeError) as err:
        raise _bad(path, f"has tensordict metadata that is not valid JSON ({err}).") from err
    if not isinstance(doc, dict) or doc.get("version") != 1:
        version = doc.get("version") if isinstance(doc, dict) else None
        raise _bad(path, f"has tensordict metadata of version {version!r}; this reader knows version 1.")
    return _Reader(path, tensors, device).build(doc.get("root"), ())
