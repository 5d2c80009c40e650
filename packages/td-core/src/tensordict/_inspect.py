"""``tensordict inspect PATH``: the key tree of a stored TensorDict, read from metadata only.

Three kinds of store are recognised, by what is on disk rather than by name:

- a **td-memmap folder** (``meta.json`` + ``<key>.memmap`` files, one sub-folder per
  nested TensorDict; see the td-memmap README). Only the JSON metadata is parsed and
  the data files are ``stat``-ed; nothing is mapped or unpickled, so td-memmap does
  not even need to be installed;
- an **HDF5 file** (signature ``\\x89HDF\\r\\n\\x1a\\n``), walked with h5py when it is
  installed (td-h5 depends on it): dataset shapes, dtypes and storage sizes, group
  attributes; links are listed, never followed;
- a **consolidated file** written by ``td.consolidate(filename=...)`` (magic
  ``TDCONSOL``): only the header and the JSON metadata are read.

For each entry the report gives the key, kind, shape, dtype, batch size, bytes on disk
and, for non-tensor values, a shortened repr; and for the store whether it is complete:
every data file present with the size the metadata records, no interrupted save. A
store is untrusted input: names read from metadata must stay inside the store, and
nothing is imported, unpickled or executed.

The public entry points are :func:`inspect_store` (returns a :class:`StoreReport`) and
:func:`render` (the text tree); ``python -m tensordict inspect PATH`` prints it.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from dataclasses import dataclass, field
from typing import Any

from tensordict._formats import (
    CONSOLIDATED_ALIGN,
    CONSOLIDATED_HEADER,
    CONSOLIDATED_MAGIC,
    MEMMAP_FORMAT,
    MEMMAP_MEMBER,
    MEMMAP_META,
)

__all__ = ["Entry", "StoreReport", "inspect_store", "render", "human_bytes"]

_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_VALUE_WIDTH = 48

#: dtype name -> item size, for the dtypes a store may name
_ITEMSIZE = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "complex128": 16, "complex64": 8,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8,
    "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
}


@dataclass
class Entry:
    """One node of a stored tree.

    Attributes:
        key (str): the key (``""`` for the root, ``"[i]"`` for the i-th item of a lazy stack).
        kind (str): ``"TensorDict"``, ``"LazyStackedTensorDict"``, ``"Tensor"``,
            ``"NonTensorData"``, ``"NonTensorStack"``, ``"link"`` or ``"file"`` (a stray file).
        shape (list[int] | None): tensor shape (tensors and string datasets).
        dtype (str | None): dtype name, e.g. ``"float32"``.
        batch_size (list[int] | None): batch size of containers and non-tensor values.
        nbytes (int | None): bytes this entry occupies on disk, when known.
        value (str | None): shortened repr of a non-tensor value stored in the metadata.
        note (str | None): extra facts (``"tensorclass mod.Cls"``, ``"gzip"``, ``"pickled"``, ...).
        problems (list[str]): why this entry is incomplete or damaged (empty when fine).
        children (list[Entry]): entries of a container, in stored order.
    """

    key: str
    kind: str
    shape: list | None = None
    dtype: str | None = None
    batch_size: list | None = None
    nbytes: int | None = None
    value: str | None = None
    note: str | None = None
    problems: list = field(default_factory=list)
    children: list = field(default_factory=list)

    def walk(self) -> Any:
        """Yields this entry and every descendant, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()

    def to_dict(self) -> dict:
        """A JSON-serialisable dict of this entry (children nested)."""
        out = {k: v for k, v in self.__dict__.items() if k != "children" and v not in (None, [])}
        if self.children:
            out["children"] = [c.to_dict() for c in self.children]
        return out


@dataclass
class StoreReport:
    """What :func:`inspect_store` found.

    Attributes:
        path (str): the absolute path inspected.
        format (str): ``"td-memmap"``, ``"hdf5"`` or ``"consolidated"``.
        root (Entry): the root container.
        bytes_on_disk (int): total size of the store's files (``st_size``).
        allocated (int | None): blocks actually allocated (sparse files allocate less), when known.
        files (int): number of files in the store.
        problems (list[str]): store-wide problems (an interrupted save, a truncated file).
        notes (list[str]): facts that do not make the store incomplete.
    """

    path: str
    format: str
    root: Entry
    bytes_on_disk: int = 0
    allocated: int | None = None
    files: int = 0
    problems: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    @property
    def all_problems(self) -> list[str]:
        """Store-wide problems followed by every entry's problems."""
        out = list(self.problems)
        for entry in self.root.walk():
            out.extend(entry.problems)
        return out

    @property
    def complete(self) -> bool:
        """``True`` if nothing is missing, truncated or damaged."""
        return not self.all_problems

    @property
    def tensor_bytes(self) -> int:
        """Bytes of tensor data the metadata describes (uncompressed: shape x item size)."""
        total = 0
        for e in self.root.walk():
            if e.kind == "Tensor":
                size = _itemsize(e.dtype)
                total += math.prod(e.shape) * size if size is not None and e.shape is not None else e.nbytes or 0
        return total

    def to_dict(self) -> dict:
        """A JSON-serialisable dict (what ``tensordict inspect --json`` prints)."""
        return {
            "path": self.path, "format": self.format, "complete": self.complete,
            "bytes_on_disk": self.bytes_on_disk, "allocated": self.allocated, "files": self.files,
            "tensor_bytes": self.tensor_bytes, "problems": self.all_problems, "notes": self.notes,
            "root": self.root.to_dict(),
        }


# ------------------------------------------------------------------------ helpers
def human_bytes(n: int | None) -> str:
    """``1536`` -> ``"1.5 KiB"``.

    Examples:
        >>> human_bytes(24), human_bytes(1536), human_bytes(3 * 2**30)
        ('24 B', '1.5 KiB', '3.0 GiB')
    """
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


def _short(value: Any, width: int = _VALUE_WIDTH) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _int_list(value: Any) -> list | None:
    if isinstance(value, list) and all(type(v) is int and v >= 0 for v in value):
        return value
    return None


def _itemsize(dtype: Any) -> int | None:
    return _ITEMSIZE.get(dtype) if isinstance(dtype, str) else None


#: the largest metadata the inspector reads (the loaders' cap)
_META_MAX_BYTES = 64 << 20
#: deepest JSON nesting the inspector parses (td-memmap metadata nests 3 levels)
_MAX_JSON_DEPTH = 64
_JSON_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _json_depth(raw: bytes) -> int:
    """Deepest ``[``/``{`` nesting of the JSON text ``raw`` (strings skipped), in one linear pass."""
    depth = top = 0
    for m in _JSON_TOKENS.finditer(raw):
        tok = m.group()
        if tok in (b"[", b"{"):
            depth += 1
            top = max(top, depth)
        elif tok in (b"]", b"}"):
            depth -= 1
    return top


def _read_regular(path: str, cap: int = _META_MAX_BYTES) -> bytes:
    """The bytes of ``path`` under the loaders' rules: not a link, a regular file, at most ``cap`` bytes.

    Opened with ``O_NOFOLLOW | O_NONBLOCK`` and checked with ``fstat`` before a byte
    is read, so a link (to a file outside the store, ``/dev/zero``...) or a FIFO is
    refused instead of followed or waited on.

    Raises:
        FileNotFoundError: ``path`` is missing.
        ValueError: ``path`` is a link, not a regular file, or larger than ``cap``.
    """
    if os.path.islink(path):
        msg = f"{path} is a symbolic link; stores never contain links, so it is not followed"
        raise ValueError(msg)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as err:
        msg = f"{path} cannot be opened ({err.strerror or err})"
        raise ValueError(msg) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            msg = f"{path} is not a regular file (a device, FIFO, socket or folder); not read"
            raise ValueError(msg)
        if st.st_size > cap:
            msg = f"{path} holds {st.st_size} bytes, over the {cap}-byte limit for metadata; not read"
            raise ValueError(msg)
        data = os.read(fd, cap + 1)
        chunks = [data]
        while data and sum(map(len, chunks)) <= cap:
            data = os.read(fd, cap + 1)
            chunks.append(data)
        raw = b"".join(chunks)
        if len(raw) > cap:
            msg = f"{path} holds more than {cap} bytes, over the limit for metadata; not read"
            raise ValueError(msg)
        return raw
    finally:
        os.close(fd)


def _parse_json(raw: bytes, where: str) -> Any:
    """``json.loads(raw)``; ``ValueError`` naming ``where`` for bad or too deeply nested JSON."""
    if _json_depth(raw) > _MAX_JSON_DEPTH:
        msg = f"{where}: the JSON nests more than {_MAX_JSON_DEPTH} levels deep (store metadata is shallow)"
        raise ValueError(msg)
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        msg = f"{where}: not valid JSON ({type(err).__name__}: {err})"
        raise ValueError(msg) from None


def _files_under(root: str) -> tuple[int, int, int]:
    """(count, total st_size, total allocated bytes) of the regular files under ``root``."""
    count = size = alloc = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            try:
                st = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            count += 1
            size += st.st_size
            alloc += getattr(st, "st_blocks", 0) * 512
    return count, size, alloc


# ------------------------------------------------------------------------ td-memmap
def _member(folder: str, name: Any, root: str) -> str | None:
    """``folder/name`` if ``name`` is a name td-memmap writes, is not a link and stays inside ``root``."""
    if not isinstance(name, str) or not MEMMAP_MEMBER.fullmatch(name):
        return None
    path = os.path.join(folder, name)
    if os.path.islink(path):
        return None
    real = os.path.realpath(path)
    return path if real == root or real.startswith(root + os.sep) else None


def _siblings(path: str, tag: str) -> list[str]:
    parent, name = os.path.split(path)
    start = f".{name}{tag}"
    try:
        return sorted(os.path.join(parent, e) for e in os.listdir(parent or ".") if e.startswith(start))
    except OSError:
        return []


def _memmap_leaf(entry: dict, folder: str, root: str, where: str) -> Entry:
    key = entry["key"]
    kind = entry.get("kind")
    if kind == "tensor":
        shape, dtype, nbytes = _int_list(entry.get("shape")), entry.get("dtype"), entry.get("nbytes")
        node = Entry(key, "Tensor", shape=shape, dtype=dtype if isinstance(dtype, str) else None)
        size = _itemsize(dtype)
        if shape is None or size is None or type(nbytes) is not int or nbytes != math.prod(shape) * size:
            node.problems.append(f"{where}: key {key!r} has inconsistent metadata "
                                 f"(shape {entry.get('shape')!r}, dtype {dtype!r}, nbytes {nbytes!r})")
            return node
        path = _member(folder, entry.get("file"), root)
        if path is None:
            node.problems.append(f"{where}: key {key!r} names an invalid data file {entry.get('file')!r}")
            return node
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            node.problems.append(f"{path}: data file of key {key!r} is missing")
            return node
        if not stat.S_ISREG(st.st_mode):
            node.problems.append(f"{path}: data file of key {key!r} is not a regular file")
            return node
        actual = st.st_size
        node.nbytes = actual
        if actual != nbytes:
            node.problems.append(f"{path}: data file of key {key!r} has {actual} bytes, the metadata "
                                 f"records {nbytes} (truncated or resized)")
        return node
    if kind in ("non_tensor", "non_tensor_stack"):
        name = "NonTensorData" if kind == "non_tensor" else "NonTensorStack"
        node = Entry(key, name, batch_size=_int_list(entry.get("batch_size")))
        if entry.get("encoding") == "json" and "value" in entry:
            node.value = _short(entry["value"])
        elif entry.get("encoding") == "pickle":
            path = _member(folder, entry.get("file"), root)
            node.note = "pickled, not read (loads only with allow_pickle=True)"
            if path is None:
                node.problems.append(f"{where}: key {key!r} names an invalid pickle file {entry.get('file')!r}")
            elif not os.path.isfile(path):
                node.problems.append(f"{path}: pickle file of key {key!r} is missing")
            else:
                node.nbytes = os.lstat(path).st_size
        else:
            node.problems.append(f"{where}: key {key!r} has an unknown encoding {entry.get('encoding')!r}")
        return node
    node = Entry(key, str(kind))
    node.problems.append(f"{where}: key {key!r} has an unknown kind {kind!r}")
    return node


def _memmap_folder(folder: str, key: str, root: str, depth: int, seen: set | None = None) -> Entry:
    where = os.path.join(folder, MEMMAP_META)
    if depth > 64:
        return Entry(key, "TensorDict", problems=[f"{folder}: nested more than 64 levels deep"])
    seen = set() if seen is None else seen
    try:
        st = os.stat(folder)
    except OSError as err:
        return Entry(key, "TensorDict", problems=[f"{folder}: cannot be read ({err.strerror or err})"])
    ident = (st.st_dev, st.st_ino)
    if ident in seen:  # metadata naming one sub-folder twice (a DAG or a cycle): each is visited once
        return Entry(key, "TensorDict", problems=[f"{folder}: referenced more than once in the metadata "
                                                  "(a shared or cyclic sub-folder; td-memmap writes each once)"])
    seen.add(ident)
    try:
        meta = _parse_json(_read_regular(where), where)
    except FileNotFoundError:
        node = Entry(key, "TensorDict", problems=[f"{where} is missing (interrupted save or copy)"])
        node.children = _stray_files(folder)
        return node
    except (OSError, ValueError) as err:
        return Entry(key, "TensorDict", problems=[str(err)])
    if not isinstance(meta, dict) or meta.get("format") != MEMMAP_FORMAT:
        return Entry(key, "TensorDict", problems=[f"{where}: not td-memmap metadata"])
    kind = meta.get("type")
    node = Entry(key, kind if isinstance(kind, str) else "?", batch_size=_int_list(meta.get("batch_size")))
    if meta.get("device") is not None:
        node.note = f"device={meta['device']}"
    names = meta.get("names")
    if isinstance(names, list) and any(n is not None for n in names):
        node.note = ", ".join(filter(None, [node.note, f"names={names}"]))
    reg = meta.get("registered")
    if isinstance(reg, dict):
        extra = reg.get("extra") if isinstance(reg.get("extra"), dict) else {}
        cls = extra.get("class")  # type: ignore[union-attr]
        label = f"tensorclass {cls}" if reg.get("name") == "tensordict.tensorclass" and cls else f"{reg.get('name')}"
        node.note = ", ".join(filter(None, [label, node.note]))
    if node.batch_size is None:
        node.problems.append(f"{where}: invalid batch_size {meta.get('batch_size')!r}")
    if kind == "LazyStackedTensorDict":
        node.note = ", ".join(filter(None, [f"stack_dim={meta.get('stack_dim')}", node.note]))
        stack = meta.get("stack") if isinstance(meta.get("stack"), list) else []
        for i, name in enumerate(stack):  # type: ignore[arg-type]
            sub = _member(folder, name, root)
            if sub is None or not os.path.isdir(sub):
                what = "invalid" if sub is None else "missing"
                node.children.append(Entry(f"[{i}]", "TensorDict", problems=[f"{where}: stacked folder {name!r} is {what}"]))
            else:
                node.children.append(_memmap_folder(sub, f"[{i}]", root, depth + 1, seen))
        return node
    if kind != "TensorDict":
        node.problems.append(f"{where}: unknown container type {kind!r}")
        return node
    entries = meta.get("entries")
    if not isinstance(entries, list):
        node.problems.append(f"{where}: 'entries' is not a list")
        return node
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
            node.problems.append(f"{where}: invalid entry {_short(entry)}")
            continue
        if entry.get("kind") == "tensordict":
            sub = _member(folder, entry.get("dir"), root)
            if sub is None:
                node.children.append(Entry(entry["key"], "TensorDict",
                                           problems=[f"{where}: key {entry['key']!r} names an invalid folder"]))
            elif not os.path.isdir(sub):
                node.children.append(Entry(entry["key"], "TensorDict",
                                           problems=[f"{sub}: folder of key {entry['key']!r} is missing"]))
            else:
                node.children.append(_memmap_folder(sub, entry["key"], root, depth + 1, seen))
        else:
            node.children.append(_memmap_leaf(entry, folder, root, where))
    return node


def _stray_files(folder: str) -> list[Entry]:
    out = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and not os.path.islink(path):
            out.append(Entry(name, "file", nbytes=os.lstat(path).st_size))
    return out


def _looks_like_memmap(folder: str) -> bool:
    """A folder with ``meta.json``, one being saved into, or one holding only td-memmap data files."""
    if os.path.lexists(os.path.join(folder, MEMMAP_META)) or _siblings(folder, ".td-tmp-"):
        return True  # a meta.json that is a link, FIFO or device is reported, not skipped
    try:
        files = [e for e in os.listdir(folder) if os.path.isfile(os.path.join(folder, e))]
    except OSError:
        return False
    return bool(files) and all(MEMMAP_MEMBER.match(e) and e.endswith((".memmap", ".pkl")) for e in files)


def _inspect_memmap(path: str) -> StoreReport:
    root = os.path.realpath(path)
    staging = _siblings(root, ".td-tmp-")
    report = StoreReport(root, "td-memmap", Entry("", "TensorDict"))
    if os.path.isdir(root):
        report.root = _memmap_folder(root, "", root, 0)
        if staging and not os.path.isfile(os.path.join(root, MEMMAP_META)):
            report.problems.append(f"a save into {root} was interrupted before it completed ({staging[0]} remains)")
        elif staging:
            report.notes.append(f"a newer save is in progress or was interrupted ({staging[0]}); "
                                "the published store below is unaffected")
    else:
        old = [p for p in _siblings(root, ".td-old-") if os.path.isfile(os.path.join(p, MEMMAP_META))]
        if old:
            report.root = _memmap_folder(old[0], "", os.path.realpath(old[0]), 0)
            report.problems.append(f"{root} is missing: a save was interrupted while replacing it; the earlier "
                                   f"complete save is at {old[0]} (load_memmap recovers it)")
            root = old[0]
        else:
            report.problems.append(f"{root} does not exist: a first save into it was interrupted "
                                   f"({staging[0]} remains)")
            report.root.problems.append("nothing was published")
            return report
    report.files, report.bytes_on_disk, report.allocated = _files_under(root)
    return report


# ------------------------------------------------------------------------ consolidated
def _consol_node(node: Any, key: str, leaves: list, total: int, where: str, depth: int) -> Entry:
    if not isinstance(node, dict) or depth > 64:
        return Entry(key, "TensorDict", problems=[f"{where}: invalid node for key {key!r}"])
    out = Entry(key, "TensorDict", batch_size=_int_list(node.get("batch_size")))
    if node.get("device") is not None:
        out.note = f"device={node['device']}"
    for item in node.get("entries") if isinstance(node.get("entries"), list) else []:  # type: ignore[union-attr]
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)):
            out.problems.append(f"{where}: invalid entry {_short(item)}")
            continue
        name, kind, payload = item
        if kind == "tensor":
            spec = leaves[payload] if type(payload) is int and 0 <= payload < len(leaves) else None
            if not isinstance(spec, dict):
                out.children.append(Entry(name, "Tensor", problems=[f"{where}: key {name!r}: bad leaf index"]))
                continue
            shape, dtype, offset = _int_list(spec.get("shape")), spec.get("dtype"), spec.get("offset")
            leaf = Entry(name, "Tensor", shape=shape, dtype=dtype if isinstance(dtype, str) else None)
            size = _itemsize(dtype)
            if shape is None or size is None or type(offset) is not int:
                leaf.problems.append(f"{where}: key {name!r} has invalid metadata {_short(spec)}")
            else:
                leaf.nbytes = math.prod(shape) * size
                if offset + leaf.nbytes > total:
                    leaf.problems.append(f"{where}: key {name!r} ends at byte {offset + leaf.nbytes} of the "
                                         f"storage, past its {total} bytes")
            out.children.append(leaf)
        elif kind == "td":
            out.children.append(_consol_node(payload, name, leaves, total, where, depth + 1))
        elif kind == "data":
            out.children.append(Entry(name, "NonTensorData", batch_size=out.batch_size, value=_short(payload)))
        elif kind == "stack":
            shape = _int_list(payload.get("shape")) if isinstance(payload, dict) else None
            items = payload.get("items") if isinstance(payload, dict) else None
            out.children.append(Entry(name, "NonTensorStack", batch_size=shape, value=_short(items)))
        else:
            out.children.append(Entry(name, str(kind), problems=[f"{where}: key {name!r}: unknown kind {kind!r}"]))
    return out


def _inspect_consolidated(path: str) -> StoreReport:
    size = os.stat(path).st_size
    report = StoreReport(path, "consolidated", Entry("", "TensorDict"), bytes_on_disk=size, files=1)
    with open(path, "rb") as f:
        head = f.read(CONSOLIDATED_HEADER.size)
        if len(head) < CONSOLIDATED_HEADER.size:
            report.problems.append(f"{path}: truncated inside the {CONSOLIDATED_HEADER.size}-byte header")
            return report
        _magic, version, meta_len = CONSOLIDATED_HEADER.unpack(head)
        if meta_len > size - CONSOLIDATED_HEADER.size:
            report.problems.append(f"{path}: truncated: the header announces {meta_len} bytes of metadata, "
                                   f"the file holds {size} bytes in all")
            return report
        if meta_len > _META_MAX_BYTES:
            report.problems.append(f"{path}: the header announces {meta_len} bytes of metadata, over the "
                                   f"{_META_MAX_BYTES}-byte limit; not read")
            return report
        raw = f.read(meta_len)
    try:
        meta = _parse_json(raw, f"{path}: the metadata")
    except ValueError as err:
        report.problems.append(str(err))
        return report
    if not isinstance(meta, dict) or meta.get("format") != "tensordict.consolidated":
        report.problems.append(f"{path}: the metadata is not consolidated-TensorDict metadata")
        return report
    report.notes.append(f"format version {version}")
    nbytes = meta.get("nbytes")
    leaves = meta.get("leaves") if isinstance(meta.get("leaves"), list) else []
    if type(nbytes) is not int or nbytes < 0:
        report.problems.append(f"{path}: invalid storage size {nbytes!r}")
        nbytes = 0
    data_start = -(-(CONSOLIDATED_HEADER.size + meta_len) // CONSOLIDATED_ALIGN) * CONSOLIDATED_ALIGN
    if data_start + nbytes > size:
        report.problems.append(f"{path}: truncated: the storage needs bytes {data_start}..{data_start + nbytes}, "
                               f"the file has {size} bytes")
    report.root = _consol_node(meta.get("root"), "", leaves, nbytes, path, 0)  # type: ignore[arg-type]
    return report


# ------------------------------------------------------------------------ HDF5
def _h5_dtype(dset: Any) -> str:
    marker = dset.attrs.get("_td_dtype")
    if isinstance(marker, bytes):
        marker = marker.decode("utf-8", "replace")
    return marker if isinstance(marker, str) and marker in _ITEMSIZE else dset.dtype.name


def _h5_group(group: Any, key: str, h5py: Any, file_size: int, depth: int) -> Entry:
    node = Entry(key, "TensorDict")
    if depth > 64:
        node.problems.append(f"{group.name}: nested more than 64 levels deep")
        return node
    shapes = []
    for name in group:
        link = group.get(name, getlink=True)
        if isinstance(link, (h5py.SoftLink, h5py.ExternalLink)):
            target = link.path if isinstance(link, h5py.SoftLink) else f"{link.filename}:{link.path}"
            node.children.append(Entry(name, "link", note=f"-> {target} (not followed)"))
            continue
        try:
            obj = group[name]
        except (KeyError, OSError, RuntimeError) as err:
            node.children.append(Entry(name, "?", problems=[f"{group.name}/{name}: cannot be read ({err})"]))
            continue
        if isinstance(obj, h5py.Group):
            node.children.append(_h5_group(obj, name, h5py, file_size, depth + 1))
            continue
        if not isinstance(obj, h5py.Dataset):
            node.children.append(Entry(name, type(obj).__name__))
            continue
        shape = list(obj.shape) if obj.shape is not None else []
        storage = obj.id.get_storage_size()
        if h5py.check_string_dtype(obj.dtype) is not None:
            stack = obj.attrs.get("_td_type") in ("non_tensor_stack", b"non_tensor_stack")
            leaf = Entry(name, "NonTensorStack" if stack else "NonTensorData", shape=shape, dtype="str", nbytes=storage)
        else:
            leaf = Entry(name, "Tensor", shape=shape, dtype=_h5_dtype(obj), nbytes=storage)
            shapes.append(tuple(shape))
        notes = [obj.compression] if obj.compression else []
        if obj.chunks is not None:
            notes.append(f"chunks={list(obj.chunks)}")
        leaf.note = ", ".join(notes) or None
        offset = obj.id.get_offset()
        if offset is not None and storage and offset + storage > file_size:
            leaf.problems.append(f"{group.name}/{name}: its data ends at byte {offset + storage}, past the end "
                                 f"of the file ({file_size} bytes): the file is truncated")
        node.children.append(leaf)
    bs = group.attrs.get("_td_batch_size")
    if bs is not None:
        node.batch_size = [int(x) for x in list(bs)]
    else:
        node.batch_size = list(_common_prefix(shapes))
        node.note = "batch size inferred (no _td_batch_size attribute)"
    for name, value in group.attrs.items():
        if name in ("_td_batch_size", "_td_names"):
            continue
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif hasattr(value, "tolist"):
            value = value.tolist()
        node.children.append(Entry(name, "NonTensorData", batch_size=node.batch_size, value=_short(value),
                                   note="group attribute"))
    return node


def _common_prefix(shapes: list) -> tuple:
    if not shapes:
        return ()
    common = list(shapes[0])
    for shape in shapes[1:]:
        n = 0
        while n < min(len(common), len(shape)) and common[n] == shape[n]:
            n += 1
        del common[n:]
    return tuple(common)


def _inspect_h5(path: str) -> StoreReport:
    try:
        import h5py
    except ImportError:
        msg = (f"{path} is an HDF5 file; inspecting it needs h5py. Install h5py with `pip install h5py`, "
               "or td-h5 from a checkout: `pip install -c constraints.txt ./packages/td-h5`.")
        raise ImportError(msg) from None
    size = os.stat(path).st_size
    report = StoreReport(path, "hdf5", Entry("", "TensorDict"), bytes_on_disk=size, files=1)
    try:
        handle = h5py.File(path, "r")
    except OSError as err:
        report.problems.append(f"{path}: has an HDF5 signature but cannot be opened ({err}); it is truncated "
                               "or damaged")
        return report
    with handle:
        report.root = _h5_group(handle, "", h5py, size, 0)
    _report_h5_temp_files(path, report)
    return report


#: ``.<name>.<pid>-<hex>.tmp``: the temporary file a ``to_h5`` writes beside its destination
_H5_TEMP = re.compile(r"\.(?P<name>.+)\.(?P<pid>[0-9]{1,10})-[0-9a-f]{8}\.tmp")


def _report_h5_temp_files(path: str, report: StoreReport) -> None:
    """Notes the temporary files of interrupted saves to ``path`` (ignored by readers, removed by the next save)."""
    folder, base = os.path.split(path)
    try:
        entries = sorted(os.listdir(folder))
    except OSError:
        return
    for entry in entries:
        m = _H5_TEMP.fullmatch(entry)
        if m is None or m.group("name") != base:
            continue
        pid = int(m.group("pid"))
        try:
            os.kill(pid, 0)
            alive = True
        except ProcessLookupError:
            alive = False
        except (PermissionError, OverflowError):
            alive = True
        what = "a save in progress (process {pid} is running)" if alive else "left by an interrupted save"
        report.notes.append(f"{os.path.join(folder, entry)}: temporary file {what.format(pid=pid)}; readers "
                            "ignore it and the next save to this file removes it")


# ------------------------------------------------------------------------ entry points
def _hdf5_signature(path: str) -> bool:
    """HDF5 files start with the signature at byte 0, 512, 1024, 2048, ... (user block)."""
    with open(path, "rb") as f:
        offset = 0
        size = os.fstat(f.fileno()).st_size
        while offset + 8 <= size:
            f.seek(offset)
            if f.read(8) == _HDF5_MAGIC:
                return True
            offset = 512 if offset == 0 else offset * 2
    return False


def inspect_store(path: str | os.PathLike) -> StoreReport:
    """Describes the TensorDict stored at ``path`` without loading its data.

    Args:
        path (str or PathLike): a td-memmap folder, an HDF5 file or a consolidated file.

    Returns:
        StoreReport: the key tree, sizes on disk and completeness.

    Raises:
        FileNotFoundError: nothing exists at ``path`` (and no interrupted save next to it).
        ValueError: ``path`` exists but is none of the three kinds of store.
        ImportError: ``path`` is an HDF5 file and h5py is not installed.

    Examples:
        >>> import tempfile, os, torch
        >>> from tensordict import TensorDict
        >>> with tempfile.TemporaryDirectory() as d:
        ...     path = os.path.join(d, "td.bin")
        ...     _ = TensorDict({"a": torch.zeros(4, 3)}, [4]).consolidate(filename=path)
        ...     report = inspect_store(path)
        ...     (report.format, report.complete, report.root.children[0].shape)
        ('consolidated', True, [4, 3])
    """
    full = os.path.abspath(os.fspath(path))
    if os.path.isdir(full):
        if not _looks_like_memmap(full):
            msg = (f"{full} is a folder but not a td-memmap store: it has no {MEMMAP_META} and no data files. "
                   "Expected a td-memmap folder, an HDF5 file or a consolidated TensorDict file.")
            raise ValueError(msg)
        return _inspect_memmap(full)
    if os.path.isfile(full):
        with open(full, "rb") as f:
            head = f.read(8)
        if head == CONSOLIDATED_MAGIC:
            return _inspect_consolidated(full)
        if _hdf5_signature(full):
            return _inspect_h5(full)
        msg = (f"{full} is not a stored TensorDict: it is neither an HDF5 file nor a consolidated TensorDict "
               f"file (first bytes {head!r}). Expected a td-memmap folder, an HDF5 file or a consolidated file.")
        raise ValueError(msg)
    if os.path.exists(full):
        msg = f"{full} is neither a file nor a folder."
        raise ValueError(msg)
    if _siblings(full, ".td-tmp-") or _siblings(full, ".td-old-"):
        return _inspect_memmap(full)
    msg = f"{full}: no such file or folder."
    raise FileNotFoundError(msg)


def _line(entry: Entry) -> str:
    if entry.kind == "Tensor":
        text = f"Tensor(shape={entry.shape}, dtype={entry.dtype})"
    elif entry.kind in ("NonTensorData", "NonTensorStack"):
        parts = [entry.value] if entry.value is not None else []
        if entry.shape is not None:
            parts.append(f"shape={entry.shape}, dtype={entry.dtype}")
        elif entry.batch_size:
            parts.append(f"batch_size={entry.batch_size}")
        text = f"{entry.kind}({', '.join(parts)})"
    elif entry.kind in ("link", "file"):
        text = entry.kind
    else:
        text = f"{entry.kind}(batch_size={'?' if entry.batch_size is None else entry.batch_size})"
    if entry.note:
        text += f" [{entry.note}]"
    if entry.nbytes is not None:
        text += f"  {human_bytes(entry.nbytes)}"
    if entry.problems:
        text += "  <- " + ("MISSING" if any("missing" in p for p in entry.problems) else "DAMAGED")
    return text


def render(report: StoreReport, max_depth: int | None = None, ascii_only: bool = False) -> str:
    """The report as text: a header line, the key tree, then the status.

    Args:
        report (StoreReport): from :func:`inspect_store`.
        max_depth (int, optional): levels of nesting to show (``None``: all).
        ascii_only (bool): draw the tree with ASCII characters only.
    """
    tee, last, bar = ("|-- ", "`-- ", "|   ") if ascii_only else ("├── ", "└── ", "│   ")
    disk = f"{human_bytes(report.bytes_on_disk)} on disk in {report.files} file(s)"
    if report.allocated is not None and report.allocated < report.bytes_on_disk:
        disk += f" ({human_bytes(report.allocated)} allocated: sparse files)"
    lines = [f"{report.path}: {report.format} store, {disk}, {human_bytes(report.tensor_bytes)} of tensor data"]
    lines.append(_line(report.root))

    def visit(entry: Entry, indent: str, depth: int) -> None:
        if max_depth is not None and depth >= max_depth and entry.children:
            lines.append(f"{indent}{last}... ({len(entry.children)} entries)")
            return
        for i, child in enumerate(entry.children):
            end = i == len(entry.children) - 1
            lines.append(f"{indent}{last if end else tee}{child.key}: {_line(child)}")
            visit(child, indent + ("    " if end else bar), depth + 1)

    visit(report.root, "", 0)
    lines.extend(f"note: {n}" for n in report.notes)
    problems = report.all_problems
    if problems:
        lines.append(f"status: INCOMPLETE or damaged ({len(problems)} problem(s))")
        lines.extend(f"  - {p}" for p in problems)
    else:
        lines.append("status: complete")
    return "\n".join(lines)
