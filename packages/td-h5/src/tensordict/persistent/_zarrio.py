"""Zarr (v3) backend of ``PersistentTensorDict``: stores, adapters, layout and atomic saves.

Layout (the one tensordict 0.15 writes, so stores move both ways):

* each tensor leaf is an array (one chunk, no compression unless ``chunks=`` /
  ``compressors=`` say otherwise), each nested TensorDict a group;
* every group carries the attribute ``"__tensordict__"``:
  ``{"batch_size": [...], "version": 1}`` plus ``"names"`` when a batch dim is named;
* a :class:`~tensordict.NonTensorData` leaf is a 1-d ``uint8`` array holding its value
  encoded as JSON (or, when JSON cannot hold it faithfully, as a pickle), with the
  attribute ``"__tensordict_non_tensor__": {"encoding": "json" | "pickle"}``;
* a :class:`~tensordict.NonTensorStack` of strings is a string array shaped like the
  batch, with the attribute ``"__tensordict_stack__"`` (the batch size);
* the root carries consolidated metadata, refreshed after every structural change.

The adapters :class:`ZGroup` / :class:`ZArray` give zarr's groups and arrays the part of
h5py's interface that the shared ``PersistentTensorDict`` code uses, with non-tensor
entries presented as group "attributes" (as HDF5 stores them), so views, lazy reads
and writes are the same code for both backends.

Nothing read from a store is trusted: a pickled entry is refused unless the
``PersistentTensorDict`` was opened with ``allow_pickle=True``; consolidated metadata
naming a path outside the store, or an array whose chunks disagree with its shape,
raise ``ValueError`` naming the store and the key; a non-tensor payload larger than
:data:`MAX_PAYLOAD` is refused before it is read.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import shutil
import uuid
from typing import Any

import numpy as np
import torch

from tensordict.persistent._nodes import ArrayNode, GroupNode, ValueNode

__all__ = [
    "ATTR_TD",
    "ATTR_NT",
    "ATTR_STACK",
    "zarr_module",
    "ZRoot",
    "ZGroup",
    "ZArray",
    "open_store",
    "save_atomic",
    "write_members",
]

ATTR_TD = "__tensordict__"
ATTR_NT = "__tensordict_non_tensor__"
ATTR_STACK = "__tensordict_stack__"
#: largest non-tensor payload read from a store (bytes)
MAX_PAYLOAD = 1 << 30
_TMP_TAG = ".td_tmp-"


def zarr_module() -> Any:
    """``import zarr`` (3 or newer), or ``ImportError`` naming the ``pip install`` line."""
    try:
        import zarr
    except ModuleNotFoundError as err:
        if err.name not in ("zarr", None):
            raise
        msg = (
            "the Zarr backend of PersistentTensorDict (to_zarr, from_zarr, backend='zarr') needs "
            "zarr>=3, which is not installed. Install it with `pip install \"td-h5[zarr]\"` "
            "(or `pip install \"zarr>=3\"`)."
        )
        raise ImportError(msg) from err
    if int(zarr.__version__.split(".")[0]) < 3:
        msg = (
            f"the Zarr backend of PersistentTensorDict needs zarr>=3, found zarr {zarr.__version__}. "
            "Upgrade it with `pip install \"zarr>=3\"`."
        )
        raise ImportError(msg)
    return zarr


def _is_store(obj: Any) -> bool:
    from zarr.abc.store import Store

    return isinstance(obj, Store)


def store_name(store: Any) -> str:
    """A readable name for a store: its folder or zip path when it has one."""
    for attr in ("root", "path"):
        value = getattr(store, attr, None)
        if value is not None and not callable(value):
            return os.fspath(value) if isinstance(value, (str, os.PathLike)) else str(value)
    return repr(store)


def _check_name(filename: str, key: str, single: bool = False) -> None:
    parts = key.split("/")
    if (single and len(parts) > 1) or "\\" in key or any(p in ("", ".", "..") for p in parts):
        msg = (
            f"Zarr store {filename!r} names the entry {key!r}, a path outside the store (or not a "
            "plain name): refusing to open it. The store's metadata is damaged or hostile."
        )
        raise ValueError(msg)


# ---------------------------------------------------------------------- root (the "file")
class ZRoot:
    """What h5py's ``File`` is to the shared code: the open store, its state and caches."""

    def __init__(self, store: Any, filename: str, mode: str, allow_pickle: bool | None) -> None:
        self.store = store
        self.filename = filename
        self.mode = mode
        self.allow_pickle = allow_pickle
        self.closed = False
        self.dirty = False
        self.cache: dict[str, dict] = {}
        self.top: ZGroup | None = None
        #: ``create_array`` keywords (``chunks=``, ``compressors=``) given to ``to_zarr``, for arrays added later
        self.kwargs: dict = {}

    # h5py's ``file.id.valid``
    @property
    def id(self) -> ZRoot:
        return self

    @property
    def valid(self) -> bool:
        return not self.closed

    @property
    def writable(self) -> bool:
        return self.mode != "r"

    def on_change(self) -> None:
        """Forgets cached listings; consolidated metadata is refreshed by :meth:`consolidate`."""
        self.cache.clear()
        self.dirty = True

    def consolidate(self) -> None:
        if not self.dirty or not self.writable or self.closed:
            return
        self.dirty = False
        if _is_zip(self.store):
            return  # a zip archive cannot replace its root document: it is not consolidated
        consolidate(self.store)

    def close(self) -> None:
        if self.closed:
            return
        try:
            self.consolidate()
        finally:
            self.closed = True
            try:
                self.store.close()
            except Exception:  # pragma: no cover - nothing to release
                pass

    def wrap(self, node: Any) -> Any:
        zarr = zarr_module()
        if isinstance(node, zarr.Group):
            return ZGroup(self, node)
        return ZArray(self, node)

    def move(self, src: str, dst: str) -> None:
        """Moves the member at absolute path ``src`` to ``dst`` (both inside the store)."""
        src_rel, dst_rel = src.strip("/"), dst.strip("/")
        root = getattr(self.store, "root", None)
        if root is not None and os.path.isdir(os.path.join(os.fspath(root), src_rel)):
            os.replace(os.path.join(os.fspath(root), src_rel), os.path.join(os.fspath(root), dst_rel))
        else:  # a store without folders: copy, then delete
            top = self.top
            assert top is not None
            node = top.g[src_rel]
            parent_path, _, name = dst_rel.rpartition("/")
            parent = top.g[parent_path] if parent_path else top.g
            _copy_node(node, parent, name)
            src_parent, _, src_name = src_rel.rpartition("/")
            del (top.g[src_parent] if src_parent else top.g)[src_name]
        self.on_change()


def consolidate(store: Any) -> None:
    """Writes the store's consolidated metadata (what tensordict 0.15 keeps fresh, for fast opening)."""
    import warnings

    zarr = zarr_module()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Consolidated metadata is currently not part")
        zarr.consolidate_metadata(store)


def _is_zip(store: Any) -> bool:
    return type(store).__name__ == "ZipStore"


def _copy_node(node: Any, parent: Any, name: str) -> None:
    zarr = zarr_module()
    if isinstance(node, zarr.Group):
        sub = parent.create_group(name, attributes=dict(node.attrs))
        for child_name, child in node.members():
            _copy_node(child, sub, child_name)
        return
    arr = parent.create_array(
        name, shape=node.shape, dtype=node.dtype, chunks=node.chunks, compressors=node.compressors,
        attributes=dict(node.attrs),
    )
    if node.size:
        arr[...] = node[...]


# ---------------------------------------------------------------------- adapters
class ZValue(ValueNode):
    """A non-tensor entry as read from a store (decoded by :meth:`decode` when asked for)."""

    __slots__ = ("root", "key", "node")

    def __init__(self, root: ZRoot, key: str, node: Any) -> None:
        self.root = root
        self.key = key
        self.node = node

    def raw(self) -> tuple[bytes, str | None]:
        node = self.node
        name = self.root.filename
        if node.ndim != 1 or np.dtype(node.dtype) != np.uint8:
            msg = (f"Zarr store {name!r}: the non-tensor entry {self.key!r} should be a 1-d uint8 array, "
                   f"found shape {tuple(node.shape)} and dtype {node.dtype}; the store is damaged.")
            raise ValueError(msg)
        if node.shape[0] > MAX_PAYLOAD:
            msg = (f"Zarr store {name!r}: the non-tensor entry {self.key!r} declares {node.shape[0]} bytes, "
                   f"more than the {MAX_PAYLOAD} a non-tensor value may hold; refusing to read it.")
            raise ValueError(msg)
        marker = node.attrs.get(ATTR_NT)
        encoding = marker.get("encoding") if isinstance(marker, dict) else None
        return _read_array(self.root, self.key, node, ...).tobytes(), encoding

    def decode(self) -> Any:
        payload, encoding = self.raw()
        name = self.root.filename
        if encoding == "json":
            try:
                return json.loads(payload.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as err:
                msg = f"Zarr store {name!r}: the non-tensor entry {self.key!r} is not valid JSON ({err})."
                raise ValueError(msg) from None
        if encoding == "pickle":
            if self.root.allow_pickle is not True:
                msg = (
                    f"Refusing to load pickled non-tensor data from a zarr TensorDict: entry {self.key!r} of "
                    f"Zarr store {name!r} is a pickle, and unpickling can execute arbitrary code. Open the "
                    "store with allow_pickle=True only when its data is trusted."
                )
                raise RuntimeError(msg)
            return pickle.loads(payload)  # noqa: S301 - allow_pickle=True: the caller trusts the store
        msg = f"Zarr store {name!r}: unknown non-tensor encoding {encoding!r} for entry {self.key!r}."
        raise ValueError(msg)


class Encoded:
    """A non-tensor value encoded for a store (what ``group.attrs[name] = ...`` takes)."""

    __slots__ = ("payload", "encoding")

    def __init__(self, payload: bytes, encoding: str) -> None:
        self.payload = payload
        self.encoding = encoding


def encode(key: Any, value: Any, allow_pickle: bool | None, filename: str = "") -> Encoded:
    """JSON when it round-trips faithfully, else a pickle (unless ``allow_pickle`` is ``False``).

    Raises:
        TypeError: the value needs pickle and ``allow_pickle=False``.
    """
    try:
        text = json.dumps(value, allow_nan=False)
        if _same(json.loads(text), value):
            return Encoded(text.encode("utf-8"), "json")
    except (TypeError, ValueError, RecursionError):
        pass
    if allow_pickle is False:
        where = f" in Zarr store {filename!r}" if filename else ""
        msg = (
            f"cannot store the non-tensor value under key {key!r} (a {type(value).__name__}){where} as JSON, "
            "and allow_pickle=False forbids a pickle. Convert it to JSON-compatible data (str, numbers, "
            "bools, None, lists and dicts of them), or pass allow_pickle=True."
        )
        raise TypeError(msg)
    try:
        return Encoded(pickle.dumps(value), "pickle")
    except Exception as err:
        msg = f"cannot store the non-tensor value under key {key!r} (a {type(value).__name__}): it can be neither JSON-encoded nor pickled ({err})."
        raise TypeError(msg) from None


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 1 << 62


def _read_array(root: ZRoot, key: str, node: Any, sel: Any) -> np.ndarray:
    try:
        nbytes = math.prod(_selection_shape(tuple(node.shape), sel)) * np.dtype(node.dtype).itemsize
    except (TypeError, IndexError, ValueError):
        nbytes = 0  # an unusual selection: zarr checks it
    if nbytes > _memory_bytes():
        msg = (f"Zarr store {root.filename!r}: reading {key!r} (shape {tuple(node.shape)}, dtype {node.dtype}) "
               f"would allocate {nbytes} bytes, more than this machine's memory; read it by index (get_at).")
        raise MemoryError(msg)
    try:
        if isinstance(sel, np.ndarray) or (isinstance(sel, tuple) and any(isinstance(s, np.ndarray) for s in sel)):
            return np.asarray(node.oindex[sel])
        return np.asarray(node[sel])
    except IndexError:
        raise
    except Exception as err:
        msg = f"Zarr store {root.filename!r}: array {key!r} cannot be read ({type(err).__name__}: {err}); the store is damaged or incomplete."
        raise ValueError(msg) from err


class ZAttrs:
    """The non-tensor entries of a group, presented as h5py presents group attributes."""

    __slots__ = ("group",)

    def __init__(self, group: ZGroup) -> None:
        self.group = group

    def _names(self) -> list:
        return [n for n, (_, nt) in self.group._members().items() if nt]

    def keys(self) -> list:
        return self._names()

    def __iter__(self) -> Any:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __contains__(self, name: object) -> bool:
        hit = self.group._members().get(name)
        return hit is not None and hit[1]

    def __getitem__(self, name: str) -> ZValue:
        hit = self.group._members().get(name)
        if hit is None or not hit[1]:
            raise KeyError(name)
        return ZValue(self.group.root, self.group.path_of(name), hit[0])

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self else default

    def __setitem__(self, name: str, value: Any) -> None:
        if isinstance(value, ZValue):
            payload, encoding = value.raw()
        elif isinstance(value, Encoded):
            payload, encoding = value.payload, value.encoding
        else:
            enc = encode(name, value, self.group.root.allow_pickle, self.group.root.filename)
            payload, encoding = enc.payload, enc.encoding
        g = self.group.g
        if name in self.group._members():
            del g[name]
        write_payload(g, name, payload, encoding)
        self.group.root.on_change()
        self.group.root.consolidate()

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        del self.group.g[name]
        self.group.root.on_change()
        self.group.root.consolidate()


def write_payload(g: Any, name: str, payload: bytes, encoding: str | None) -> None:
    n = len(payload)
    arr = g.create_array(
        name, shape=(n,), dtype="uint8", chunks=(max(n, 1),), compressors=None, fill_value=0,
        attributes={ATTR_NT: {"encoding": encoding}},
    )
    if n:
        arr[...] = np.frombuffer(payload, dtype=np.uint8)


class ZGroup(GroupNode):
    """A Zarr group with the h5py ``Group`` interface the shared code uses."""

    __slots__ = ("root", "g", "name")
    ZARR = True

    def __init__(self, root: ZRoot, g: Any) -> None:
        self.root = root
        self.g = g
        self.name = "/" + g.path if g.path else "/"

    def path_of(self, name: str) -> str:
        return self.name.rstrip("/") + "/" + name

    @property
    def file(self) -> ZRoot:
        return self.root

    def _members(self) -> dict:
        cache = self.root.cache
        hit = cache.get(self.name)
        if hit is not None:
            return hit
        try:
            items = list(self.g.members())
        except Exception:
            items = self._members_one_by_one()
        out = {}
        for n, node in items:
            _check_name(self.root.filename, n, single=True)
            out[n] = (node, _is_nt(node))
        cache[self.name] = out
        return out

    def _members_one_by_one(self) -> list:
        """Opens members one at a time, to name the one whose metadata is invalid."""
        filename = self.root.filename
        out = []
        folder = getattr(self.root.store, "root", None)
        where = os.path.join(os.fspath(folder), self.g.path) if folder is not None else None
        if where is not None and os.path.isdir(where):
            names = sorted(n for n in os.listdir(where) if os.path.isfile(os.path.join(where, n, "zarr.json")))
        else:
            try:
                names = list(self.g.keys())
            except Exception as err:
                msg = (f"Zarr store {filename!r}: the members of group {self.name!r} cannot be read "
                       f"({type(err).__name__}: {err}); the store is damaged or was not written by zarr.")
                raise ValueError(msg) from None
        for n in names:
            _check_name(filename, n, single=True)
            try:
                out.append((n, self.g[n]))
            except Exception as err:
                msg = (f"Zarr store {filename!r}: the metadata of entry {self.path_of(n)!r} is invalid "
                       f"({type(err).__name__}: {err}); the store is damaged or was not written by zarr.")
                raise ValueError(msg) from None
        return out

    # h5py Group interface
    def keys(self) -> list:
        return [n for n, (_, nt) in self._members().items() if not nt]

    def get(self, name: str, default: Any = None, getlink: bool = False) -> Any:
        hit = self._members().get(name)
        if hit is None or hit[1]:
            return default
        return self.root.wrap(hit[0])

    def __contains__(self, name: object) -> bool:
        hit = self._members().get(name)
        return hit is not None and not hit[1]

    def __getitem__(self, name: str) -> Any:
        node = self.g
        for part in name.strip("/").split("/"):
            node = node[part]
        return self.root.wrap(node)

    def __delitem__(self, name: str) -> None:
        del self.g[name]
        self.root.on_change()

    def create_group(self, name: str) -> ZGroup:
        sub = self.g.create_group(name)
        self.root.on_change()
        return ZGroup(self.root, sub)

    def require_group(self, name: str) -> ZGroup:
        node = self.g
        for part in name.strip("/").split("/"):
            node = node.require_group(part)
        self.root.on_change()
        return ZGroup(self.root, node)

    def create_dataset(self, name: str, shape: Any = None, dtype: Any = None, data: Any = None, **kwargs: Any) -> ZArray:
        if data is not None:
            data = np.asarray(data)
            shape, dtype = data.shape, data.dtype
        arr = create_array(self.g, name, tuple(shape), dtype, {**self.root.kwargs, **kwargs}, self.root.filename)
        if data is not None and data.size:
            arr[...] = data
        self.root.on_change()
        return ZArray(self.root, arr)

    def move(self, src: str, dst: str) -> None:
        if not src.startswith("/"):
            src = self.path_of(src)
        if not dst.startswith("/"):
            dst = self.path_of(dst)
        self.root.move(src, dst)

    @property
    def attrs(self) -> ZAttrs:
        return ZAttrs(self)

    @property
    def meta(self) -> Any:
        """The group's real zarr attributes (where ``__tensordict__`` lives)."""
        return self.g.attrs

    # backend hooks called by _h5io
    def stored_batch_size(self) -> tuple | None:
        meta = self.g.attrs.get(ATTR_TD)
        bs = meta.get("batch_size") if isinstance(meta, dict) else None
        if not isinstance(bs, list) or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < (1 << 63) for x in bs):
            return None
        return tuple(bs)

    def stored_names(self, ndim: int) -> list | None:
        meta = self.g.attrs.get(ATTR_TD)
        names = meta.get("names") if isinstance(meta, dict) else None
        if not isinstance(names, list) or len(names) != ndim or not all(n is None or isinstance(n, str) for n in names):
            return None
        if all(n is None for n in names):
            return None
        return list(names)

    def write_batch_meta(self, batch_size: Any, names: list | None) -> None:
        self.g.attrs[ATTR_TD] = batch_meta(batch_size, names)

    def write_leaf(self, name: str, value: Any, kwargs: dict) -> None:
        write_leaf(self.g, name, value, {**self.root.kwargs, **kwargs}, self.root.allow_pickle, self.root.filename)
        self.root.on_change()

    def write_stack(self, name: str, items: list, shape: tuple) -> ZArray:
        if name in self._members():
            del self.g[name]
        arr = _write_string_stack(self.g, name, items, shape)
        self.root.on_change()
        return ZArray(self.root, arr)


def _is_nt(node: Any) -> bool:
    attrs = getattr(node, "attrs", None)
    return attrs is not None and hasattr(node, "dtype") and ATTR_NT in attrs


class ZArray(ArrayNode):
    """A Zarr array with the h5py ``Dataset`` interface the shared code uses."""

    __slots__ = ("root", "a", "name")
    ZARR = True

    def __init__(self, root: ZRoot, a: Any) -> None:
        self.root = root
        self.a = a
        self.name = "/" + a.path

    @property
    def file(self) -> ZRoot:
        return self.root

    @property
    def shape(self) -> tuple:
        return tuple(self.a.shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.a.dtype)

    @property
    def ndim(self) -> int:
        return len(self.a.shape)

    @property
    def attrs(self) -> Any:
        return self.a.attrs

    def __getitem__(self, sel: Any) -> np.ndarray:
        if sel.__class__ is tuple and not sel:
            sel = ...
        return _read_array(self.root, self.name, self.a, sel)

    def __setitem__(self, sel: Any, value: Any) -> None:
        if sel.__class__ is tuple and not sel:
            sel = ...
        if isinstance(value, np.ndarray):
            # zarr wants the selection's exact shape (h5py broadcasts size-1 dims away)
            target = _selection_shape(self.shape, sel)
            if value.shape != target and value.size == int(np.prod(target)):
                value = value.reshape(target)
            if value.ndim == 0:
                value = value[()]  # one element: a scalar, not a 0-d array
        if isinstance(sel, np.ndarray) or (isinstance(sel, tuple) and any(isinstance(s, np.ndarray) for s in sel)):
            self.a.oindex[sel] = value
        else:
            self.a[sel] = value

    def kind(self) -> tuple[str, torch.dtype | None]:
        dt = self.dtype
        if dt.kind in "biufc":
            from tensordict.persistent._h5io import _torch_dtype_of

            tdt = _torch_dtype_of(dt)
            return ("tensor", tdt) if tdt is not None else ("other", None)
        if ATTR_STACK in self.a.attrs and dt.kind in "OUT":
            return "stack", None
        return "other", None

    def read_strings(self) -> Any:
        arr = _read_array(self.root, self.name, self.a, ...)
        return np.asarray(arr, dtype=object)


def _selection_shape(shape: tuple, sel: Any) -> tuple:
    """Shape of ``array[sel]`` for ints, slices, Ellipsis and 1-d position arrays (orthogonal)."""
    if sel is Ellipsis:
        return tuple(shape)
    parts = sel if isinstance(sel, tuple) else (sel,)
    out: list = []
    dim = 0
    for part in parts:
        if part is Ellipsis:
            rest = len(shape) - (len(parts) - 1)
            out.extend(shape[dim : dim + rest])
            dim += rest
            continue
        if isinstance(part, slice):
            out.append(len(range(*part.indices(shape[dim]))))
        elif isinstance(part, np.ndarray):
            out.append(int(part.sum()) if part.dtype == np.bool_ else part.size)
        dim += 1
    out.extend(shape[dim:])
    return tuple(out)


# ---------------------------------------------------------------------- writing
def batch_meta(batch_size: Any, names: list | None) -> dict:
    meta: dict = {"batch_size": [int(x) for x in batch_size], "version": 1}
    if names is not None and any(n is not None for n in names):
        meta["names"] = list(names)
    return meta


def _chunks_for(shape: tuple, chunks: Any) -> Any:
    """A ``chunks=`` spec fitted to an array's rank: it constrains the leading dims."""
    if chunks is None:
        return tuple(max(int(s), 1) for s in shape) if shape else ()
    if isinstance(chunks, int):
        chunks = (chunks,)
    if isinstance(chunks, (tuple, list)):
        spec = tuple(chunks)[: len(shape)]
        return tuple(max(1, min(int(c), int(s)) if int(s) else 1) if c not in (None, -1) else max(int(s), 1)
                     for c, s in zip(spec, shape)) + tuple(max(int(s), 1) for s in shape[len(spec):])
    return chunks


def create_array(g: Any, name: str, shape: tuple, dtype: Any, kwargs: dict, filename: str = "") -> Any:
    kw = dict(kwargs)
    chunks = _chunks_for(shape, kw.pop("chunks", None))
    kw.setdefault("compressors", None)
    kw.setdefault("fill_value", 0 if np.dtype(dtype).kind in "biufc" else None)
    try:
        return g.create_array(name, shape=shape, dtype=dtype, chunks=chunks, **kw)
    except (TypeError, ValueError) as err:
        where = f" of Zarr store {filename!r}" if filename else ""
        msg = f"cannot create the array {name!r}{where} (shape {shape}, dtype {dtype}): {err}"
        raise type(err)(msg) from err


def _numpy_of(key: Any, t: torch.Tensor) -> np.ndarray:
    if t.dtype not in _ZARR_OK:
        msg = (
            f"cannot store key {key!r} of dtype {t.dtype} in a Zarr store: zarr has no such dtype. "
            "Cast it first (e.g. `.float()`)."
        )
        raise TypeError(msg)
    if t.requires_grad:
        t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.resolve_conj().resolve_neg()
    return t.contiguous().numpy()


_ZARR_OK = {
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
    torch.float32, torch.float64, torch.complex64, torch.complex128,
    *(getattr(torch, n) for n in ("uint16", "uint32", "uint64") if hasattr(torch, n)),
}


def check_tree(td: Any, allow_pickle: bool | None, prefix: tuple = ()) -> None:
    """Refuses (before anything is written) a leaf the Zarr layout cannot hold."""
    from tensordict import NonTensorData, NonTensorStack, TensorDictBase

    for key, value in td._items_raw():
        path = prefix + (key,)
        if not isinstance(key, str) or not key or "/" in key or key in (".", ".."):
            msg = f"key {path!r} cannot be stored in a Zarr store: names must be non-empty str without '/', and not '.' or '..'."
            raise ValueError(msg)
        if isinstance(value, torch.Tensor):
            _numpy_of(path, value[:0] if value.ndim else value)
        elif isinstance(value, NonTensorData):
            encode(path, value.data, allow_pickle)
        elif isinstance(value, NonTensorStack):
            items = value.tolist()
            if not _str_stack(value):
                encode(path, items, allow_pickle)
        elif isinstance(value, TensorDictBase):
            check_tree(value, allow_pickle, path)
        else:
            msg = f"cannot store key {path!r} of type {type(value).__name__} in a Zarr store."
            raise TypeError(msg)


def _str_stack(value: Any) -> bool:
    items = getattr(value, "_items", None)
    if items is None:
        return False
    flat = _flat(value.tolist())
    return bool(flat) and all(isinstance(x, str) for x in flat) and len(flat) == int(np.prod(tuple(value.batch_size)))


def _one_value(value: Any) -> bool:
    """A stack whose every element is the same value (what expanding a NonTensorData gives)."""
    flat = _flat(value.tolist())
    if not flat:
        return False
    first = flat[0]
    try:
        return all(type(x) is type(first) and bool(x == first) for x in flat[1:])
    except Exception:
        return False


def _flat(items: Any) -> list:
    if isinstance(items, list):
        return [y for x in items for y in _flat(x)]
    return [items]


def _write_string_stack(g: Any, name: str, items: list, shape: tuple) -> Any:
    arr = np.array(_flat(items), dtype=object).reshape(shape) if shape else np.array(items, dtype=object)
    z = g.create_array(name, shape=tuple(shape), dtype=str, chunks=tuple(max(int(s), 1) for s in shape) or None,
                       compressors=None, attributes={ATTR_STACK: [int(s) for s in shape]})
    if arr.size:
        z[...] = arr
    return z


def write_leaf(g: Any, name: str, value: Any, kwargs: dict, allow_pickle: bool | None, filename: str = "") -> None:
    from tensordict import NonTensorData, NonTensorStack, TensorDictBase

    if isinstance(value, torch.Tensor):
        arr = _numpy_of(name, value)
        z = create_array(g, name, tuple(arr.shape), arr.dtype, kwargs, filename)
        if arr.size:
            z[...] = arr
    elif isinstance(value, NonTensorData):
        enc = encode(name, value.data, allow_pickle, filename)
        write_payload(g, name, enc.payload, enc.encoding)
    elif isinstance(value, NonTensorStack) and _one_value(value):
        enc = encode(name, _flat(value.tolist())[0], allow_pickle, filename)  # e.g. an expanded NonTensorData
        write_payload(g, name, enc.payload, enc.encoding)
    elif isinstance(value, NonTensorStack):
        if _str_stack(value):
            _write_string_stack(g, name, value.tolist(), tuple(value.batch_size))
        else:
            enc = encode(name, value.tolist(), allow_pickle, filename)
            write_payload(g, name, enc.payload, enc.encoding)
    elif isinstance(value, TensorDictBase):
        sub = g.create_group(name, attributes={ATTR_TD: _td_meta(value)})
        write_members(sub, value, kwargs, allow_pickle, filename)
    else:  # pragma: no cover - check_tree refuses it first
        msg = f"cannot store key {name!r} of type {type(value).__name__} in a Zarr store."
        raise TypeError(msg)


def _td_meta(td: Any) -> dict:
    return batch_meta(td.batch_size, td.names if td._has_names() else None)


def write_members(g: Any, td: Any, kwargs: dict, allow_pickle: bool | None, filename: str = "") -> None:
    """Writes the entries of ``td`` into the group ``g`` (which already carries ``td``'s batch metadata)."""
    for key, value in td._items_raw():
        write_leaf(g, key, value, kwargs, allow_pickle, filename)


def _write_store(store: Any, td: Any, kwargs: dict, allow_pickle: bool | None, filename: str) -> None:
    zarr = zarr_module()
    root = zarr.open_group(store=store, mode="w", attributes={ATTR_TD: _td_meta(td)})
    write_members(root, td, kwargs, allow_pickle, filename)
    if not _is_zip(store):  # a zip archive cannot replace its root document without a duplicate entry
        consolidate(store)


def save_atomic(target: Any, td: Any, kwargs: dict, allow_pickle: bool | None) -> Any:
    """Writes ``td`` as a new store at ``target`` (a folder path or a zarr ``Store``).

    A folder is written beside ``target`` under a temporary name and moved in place once
    complete: an error leaves an earlier store at ``target`` intact. A ``Store`` object
    is cleared and written in place. Returns what to open: the path or the store.
    """
    check_tree(td, allow_pickle)
    zarr = zarr_module()
    if _is_store(target):
        _write_store(target, td, kwargs, allow_pickle, store_name(target))
        return target
    path = os.path.abspath(os.fspath(target))
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        msg = f"cannot write Zarr store {os.fspath(target)!r}: folder {folder!r} does not exist."
        raise FileNotFoundError(msg)
    if os.path.exists(path) and not os.path.isdir(path):
        msg = f"cannot write Zarr store {os.fspath(target)!r}: a file (not a folder) is in the way."
        raise FileExistsError(msg)
    tmp = f"{path}{_TMP_TAG}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        _write_store(zarr.storage.LocalStore(tmp), td, kwargs, allow_pickle, os.fspath(target))
        if os.path.isdir(path):
            old = f"{path}{_TMP_TAG}old-{uuid.uuid4().hex[:8]}"
            os.replace(path, old)
            try:
                os.replace(tmp, path)
            except BaseException:
                os.replace(old, path)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return os.fspath(target)


# ---------------------------------------------------------------------- opening
_ZMODES = {"r": "r", "r+": "r+", "a": "a", "w": "w", "w-": "w-", "x": "w-"}


def open_store(target: Any, mode: str, allow_pickle: bool | None) -> tuple[ZRoot, ZGroup]:
    """Opens ``target`` (a folder path, a zarr ``Store`` or a zarr ``Group``).

    Raises:
        FileNotFoundError: a path that does not exist (modes ``"r"``, ``"r+"``).
        ValueError: the folder is not a Zarr store, or its metadata names paths outside it.
    """
    zarr = zarr_module()
    if isinstance(target, zarr.Group):
        store = target.store
        mode = "r" if store.read_only else "r+"
        root = ZRoot(store, store_name(store), mode, allow_pickle)
        top = ZGroup(root, target)
        root.top = top
        return root, top
    if _is_store(target):
        store, filename = target, store_name(target)
        if store.read_only:
            mode = "r"
        folder = getattr(store, "root", None)
        if isinstance(folder, (str, os.PathLike)) and os.path.isdir(folder):
            _check_root_file(os.fspath(folder))
    else:
        filename = os.fspath(target)
        if mode in ("r", "r+") and not os.path.exists(filename):
            msg = (f"Zarr store {filename!r} does not exist (mode={mode!r}). Check the path, or open it "
                   "with mode='w' or 'a' to create it.")
            raise FileNotFoundError(msg)
        if mode in ("r", "r+") and not os.path.isfile(os.path.join(filename, "zarr.json")) \
                and not os.path.isfile(os.path.join(filename, ".zgroup")):
            msg = f"{filename!r} is not a Zarr store (no zarr.json or .zgroup in it)."
            raise ValueError(msg)
        store = zarr.storage.LocalStore(filename, read_only=mode == "r")
        _check_root_file(filename)
    use_consolidated = None if mode == "r" else False
    try:
        g = zarr.open_group(store=store, mode=_ZMODES[mode], use_consolidated=use_consolidated)
    except FileExistsError:
        raise
    except (FileNotFoundError, KeyError) as err:
        msg = f"Zarr store {filename!r} has no root group (mode={mode!r}): {err}"
        raise FileNotFoundError(msg) from None
    except ValueError as err:
        msg = f"Zarr store {filename!r} cannot be opened: {err}"
        raise ValueError(msg) from None
    _check_consolidated(g, filename)
    root = ZRoot(store, filename, mode, allow_pickle)
    top = ZGroup(root, g)
    root.top = top
    return root, top


def _check_root_file(folder: str) -> None:
    """Checks the consolidated metadata of a folder store before zarr reads it."""
    path = os.path.join(folder, "zarr.json")
    if not os.path.isfile(path) or os.path.getsize(path) > MAX_PAYLOAD:
        return
    try:
        with open(path, "rb") as f:
            meta = json.loads(f.read())
    except (OSError, ValueError):
        return  # zarr reports a damaged root document itself
    consolidated = meta.get("consolidated_metadata") if isinstance(meta, dict) else None
    entries = consolidated.get("metadata") if isinstance(consolidated, dict) else None
    if isinstance(entries, dict):
        for key in entries:
            _check_name(folder, str(key))


def _check_consolidated(g: Any, filename: str) -> None:
    meta = getattr(g.metadata, "consolidated_metadata", None)
    if meta is None:
        return
    for key in meta.metadata:
        _check_name(filename, key)
