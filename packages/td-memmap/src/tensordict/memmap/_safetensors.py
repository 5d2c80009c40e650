"""TensorDicts in safetensors files (``to_safetensors`` / ``from_safetensors``).

Each tensor is stored under its nested key joined with ``"."`` (the names of a model's
``state_dict``). The structure (batch size and dim names of each level, the class of
each tensorclass, the stack dim of each lazy stack, the JSON non-tensor values, which
tensors are ``UnbatchedTensor``) is one JSON string under the ``"tensordict"`` key of
the file's ``__metadata__``, in the layout tensordict 0.15 writes, so files go both ways
between the two. A file without it (a Hugging Face checkpoint) loads as a nested
TensorDict with an empty batch size, names split on ``"."``.

The bytes go through the ``safetensors`` package both ways (``save_file`` and
``load_file``). Reading never runs code: the header is checked here first (declared sizes
against the file size, dtypes, offsets inside the data, no overlapping tensors) so that a
bad file is refused, naming it and the key, before anything is allocated; a tensorclass is
looked up only among modules already imported, and nothing is unpickled. Writing goes to a
temporary file that replaces ``path`` once complete.
"""

from __future__ import annotations

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
#: the dtypes written (each has a code in ``_ITEMSIZE``, so what is written reads back)
_WRITABLE = frozenset({
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.uint16, torch.float16, torch.bfloat16, torch.int32,
    torch.uint32, torch.float32, torch.int64, torch.uint64, torch.float64, torch.complex64,
    torch.float8_e5m2, torch.float8_e4m3fn,
})


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
        if value.dtype not in _WRITABLE:
            msg = f"Cannot save the tensor {name!r} as safetensors: the format has no {value.dtype}."
            raise TypeError(msg)
        value = value.detach()
        if value.__class__ is not torch.Tensor:
            value = value.as_subclass(torch.Tensor)
        if value.device.type != "cpu":
            value = value.cpu()
        value = value.contiguous()  # save_file takes contiguous tensors only
        storage = value.untyped_storage()
        ptr = storage.data_ptr()
        if storage.nbytes() and ptr in self.storages:
            value = value.clone()  # save_file refuses tensors that share memory: save a copy
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
    it. The file is written by ``safetensors.torch.save_file``: tensors that share memory
    are stored as copies, non-contiguous ones packed, tensors on another device go through
    the CPU. It is written next to ``path`` and moved over it once complete, so a failed
    save leaves an earlier file intact.

    Args:
        data (TensorDictBase or tensorclass): what to save.
        path (str or Path): the file.

    Raises:
        ImportError: safetensors is not installed (the install line is given).
        TypeError: a nested, jagged or sparse tensor, a dtype the format lacks, a
            non-JSON non-tensor value, a ``NonTensorStack``, a lazy stack whose entries
            have different keys.
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
    st = _safetensors_torch("to_safetensors")
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
        st.save_file(writer.tensors, tmp, metadata=metadata)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# ---------------------------------------------------------------------- read
def _bad(path: str, what: str) -> ValueError:
    return ValueError(f"from_safetensors: {path!r} {what}")


def read_header(path: str) -> dict:
    """The checked JSON header of a safetensors file (no tensor bytes are read).

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is shorter than its header says, the header is larger than
            100 MB, not JSON, names an unknown dtype, a shape that disagrees with the
            byte range, a range outside the data, or two tensors whose bytes overlap
            (the key is named).
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        head = os.pread(fd, 8, 0)
        if len(head) < 8:
            raise _bad(path, f"is not a safetensors file: it holds {size} bytes, fewer than the 8-byte header length.")
        n = int.from_bytes(head, "little")
        if n > size - 8:
            raise _bad(path, f"is cut short or not a safetensors file: its header declares {n} bytes but the file holds {size - 8} after the length field.")
        if n > HEADER_LIMIT:
            raise _bad(path, f"has a header of {n} bytes, more than the {HEADER_LIMIT} bytes this reader accepts.")
        raw = os.pread(fd, n, 8)
    finally:
        os.close(fd)
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
    return header


def _check_entry(path: str, name: str, info: Any, data_size: int) -> tuple:
    if not isinstance(info, dict):
        raise _bad(path, f"has a header entry for tensor {name!r} that is not an object.")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    itemsize = _ITEMSIZE.get(dtype) if type(dtype) is str else None
    if itemsize is None:
        raise _bad(path, f"gives tensor {name!r} the unknown dtype {dtype!r}.")
    if type(shape) is not list or not all(type(d) is int and d >= 0 for d in shape):
        raise _bad(path, f"gives tensor {name!r} the invalid shape {shape!r}.")
    if type(offsets) is not list or len(offsets) != 2 or type(offsets[0]) is not int or type(offsets[1]) is not int:
        raise _bad(path, f"gives tensor {name!r} the invalid data_offsets {offsets!r}.")
    begin, end = offsets
    if not 0 <= begin <= end:
        raise _bad(path, f"gives tensor {name!r} the invalid data_offsets {offsets!r}.")
    if end > data_size:
        raise _bad(path, f"is cut short: tensor {name!r} ends at byte {end} of the data, which holds {data_size} bytes.")
    if end - begin != math.prod(shape) * itemsize:
        raise _bad(path, f"gives tensor {name!r} {end - begin} bytes, but shape {shape} of {dtype} needs {math.prod(shape) * itemsize}.")
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

    def build(self, node: Any, where: tuple, parent: tuple | None = None) -> Any:
        """The level ``node`` as a TensorDict, lazy stack or tensorclass; as the plain dict
        of its entries when it only repeats ``parent``'s ``(batch_size, names)`` (the
        enclosing TensorDict then builds it, at a fraction of the cost)."""
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
                source[key] = self.build(entry["td"], full, (batch_size, node.get("names")))
            else:
                raise _bad(self.path, f"has metadata of an unknown kind for key {full}.")
        if (
            parent is not None and (batch_size, node.get("names")) == parent
            and node.get("stack_dim") is None and node.get("class") is None
        ):
            return source
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
    ``TensorDict.from_module``). The header is checked before any tensor is read; the
    tensors are then read by ``safetensors.torch.load_file`` (a private mapping of the
    file: changing a loaded tensor never changes the file).

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
    header = read_header(path)
    device = None if device is None else torch.device(device)
    tensors = st.load_file(path, device="cpu" if device is None else str(device))
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
