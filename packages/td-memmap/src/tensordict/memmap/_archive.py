"""One-file stores: a store folder packed into a zip archive (``.tdz``).

The archive is a plain zip file (the standard library's ``zipfile`` writes and
reads it; ``unzip`` extracts a loadable folder). Members are the folder's files
under their relative paths. Uncompressed members are *aligned*: a padding extra
field in the local header puts each member's data at a multiple of
:data:`ALIGN` bytes, so the loader maps the archive once and every tensor is a
view of that map (no copy). Compressed members (``"deflate"``, ``"lzma"``,
``"bzip2"``) and members of foreign, unaligned zips are read into shared memory.

Loading maps the archive copy-on-write by default (``mode="r"``/``"c"``: writes
stay in the process, the file is never modified); ``mode="r+"`` maps it shared,
so in-place writes reach the archive (its CRCs then no longer match: a zip tool
reports them until :func:`refresh_archive_checksums` is called).

Archives are written to a temporary file beside the destination and renamed
over it once complete, so a crash never leaves a half-written archive.
Unpacking applies the loader's rules: member names are relative paths without
``..``, links are refused, and the folder is published atomically.
"""

from __future__ import annotations

import os
import shutil
import stat
import struct
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "ALIGN",
    "ARCHIVE_SUFFIX",
    "ZipFS",
    "is_memmap_archive",
    "pack_memmap",
    "refresh_archive_checksums",
    "save_archive",
    "unpack_memmap",
    "wants_archive",
]

ARCHIVE_SUFFIX = ".tdz"
#: data of uncompressed members starts at a multiple of this many bytes
ALIGN = 64
_PAD_ID = 0xD935  # extra-field id used for alignment padding (as Android's zipalign)
_COMPRESSION = {None: zipfile.ZIP_STORED, "stored": zipfile.ZIP_STORED, "deflate": zipfile.ZIP_DEFLATED,
                "lzma": zipfile.ZIP_LZMA, "bzip2": zipfile.ZIP_BZIP2}
_EPOCH = (1980, 1, 1, 0, 0, 0)


def wants_archive(prefix: Any, archive: bool | None) -> bool:
    """Whether a save to ``prefix`` writes an archive (``archive`` given, or a ``.tdz`` name)."""
    if archive is not None:
        if archive and prefix is None:
            msg = "archive=True needs a file name to write (prefix is None)."
            raise ValueError(msg)
        return bool(archive)
    return prefix is not None and os.fspath(prefix).endswith(ARCHIVE_SUFFIX)


def _compression(name: Any) -> int:
    if name not in _COMPRESSION:
        msg = f"unknown compression {name!r}; expected one of {[k for k in _COMPRESSION if k]} or None."
        raise ValueError(msg)
    return _COMPRESSION[name]


def _files(src: str) -> list[str]:
    """Relative paths of every regular file of the store folder ``src`` (no links)."""
    out = []
    for folder, dirs, files in os.walk(src):
        dirs.sort()
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            path = os.path.join(folder, name)
            mode = os.lstat(path).st_mode
            if not stat.S_ISREG(mode):
                msg = f"cannot pack {path!r}: only regular files are packed (links, devices and FIFOs are refused)."
                raise RuntimeError(msg)
            out.append(os.path.relpath(path, src).replace(os.sep, "/"))
    return out


def pack_memmap(src: str | Path, dest: str | Path, *, compression: str | None = None,
                existsok: bool = True) -> Path:
    """Packs the store folder ``src`` into the one-file archive ``dest``.

    Args:
        src (str or Path): a folder written by :func:`memmap` / :func:`save`.
        dest (str or Path): the archive to write (``.tdz`` by convention).

    Keyword Args:
        compression (str, optional): ``None`` (members stored uncompressed and
            aligned, so loading maps them without a copy), ``"deflate"``, ``"lzma"``
            or ``"bzip2"``.
        existsok (bool): replace an existing ``dest``. Defaults to ``True``.

    Returns:
        Path: ``dest``.

    Raises:
        FileNotFoundError: ``src`` holds no store.
        RuntimeError: ``dest`` exists and ``existsok`` is False, or ``src`` holds a
            link or special file.

    Examples:
        >>> import os, tempfile, torch
        >>> from tensordict import TensorDict
        >>> with tempfile.TemporaryDirectory() as d:
        ...     _ = TensorDict({"a": torch.arange(3)}, [3]).memmap(os.path.join(d, "store"))
        ...     archive = pack_memmap(os.path.join(d, "store"), os.path.join(d, "store.tdz"))
        ...     (is_memmap_archive(archive), TensorDict.load_memmap(archive)["a"].tolist())
        (True, [0, 1, 2])
    """
    src, dest = os.path.abspath(os.fspath(src)), os.path.abspath(os.fspath(dest))
    if not os.path.isfile(os.path.join(src, "meta.json")):
        msg = f"no td-memmap store to pack at {src!r} (no meta.json)."
        raise FileNotFoundError(msg)
    if os.path.lexists(dest) and not existsok:
        msg = f"{dest!r} already exists; pass existsok=True to replace it."
        raise RuntimeError(msg)
    method = _compression(compression)
    folder = os.path.dirname(dest)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(dest)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w+b") as raw, zipfile.ZipFile(raw, "w", allowZip64=True) as zf:
            for rel in _files(src):
                _write_member(zf, raw, os.path.join(src, rel), rel, method)
        os.replace(tmp, dest)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return Path(dest)


def _write_member(zf: zipfile.ZipFile, raw: Any, path: str, name: str, method: int) -> None:
    size = os.path.getsize(path)
    info = zipfile.ZipInfo(name, _EPOCH)
    info.compress_type = method
    info.external_attr = (stat.S_IFREG | 0o644) << 16
    zip64 = size >= (1 << 31)
    if method == zipfile.ZIP_STORED:
        start = raw.tell()
        fixed = 30 + len(name.encode("utf-8")) + (20 if zip64 else 0)
        pad = (-(start + fixed + 4)) % ALIGN
        info.extra = struct.pack("<HH", _PAD_ID, pad) + b"\0" * pad
    with open(path, "rb") as f, zf.open(info, "w", force_zip64=zip64) as out:
        shutil.copyfileobj(f, out, 1 << 20)


def is_memmap_archive(path: str | Path) -> bool:
    """``True`` if ``path`` is a regular file holding a zip archive of a store (``meta.json`` at its root).

    Examples:
        >>> is_memmap_archive("/nonexistent.tdz")
        False
    """
    try:
        path = os.fspath(path)
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
        with zipfile.ZipFile(path) as zf:
            return any(i.filename == "meta.json" for i in zf.infolist())
    except (OSError, zipfile.BadZipFile, ValueError, TypeError):
        return False


def _check_name(name: str, archive: str) -> str:
    parts = name.split("/")
    if (not name or name.startswith("/") or "\\" in name or "\0" in name
            or any(p in ("", ".", "..") for p in parts[:-1]) or parts[-1] in (".", "..")):
        msg = f"{archive}: member {name!r} is not a relative path inside the archive; refusing to read it."
        raise RuntimeError(msg)
    return name


def unpack_memmap(archive: str | Path, dest: str | Path, *, existsok: bool = True) -> Path:
    """Extracts the archive ``archive`` into the store folder ``dest`` (published atomically).

    Raises:
        ValueError: ``archive`` is not a memory-mapped tensordict archive.
        RuntimeError: a member name leaves the folder, or a member is a link.

    Examples:
        >>> import os, tempfile, torch
        >>> from tensordict import TensorDict
        >>> with tempfile.TemporaryDirectory() as d:
        ...     _ = TensorDict({"a": torch.ones(2)}, [2]).save(os.path.join(d, "x.tdz"))
        ...     _ = unpack_memmap(os.path.join(d, "x.tdz"), os.path.join(d, "x"))
        ...     TensorDict.load_memmap(os.path.join(d, "x"))["a"].tolist()
        [1.0, 1.0]
    """
    from tensordict.memmap._store import Staging

    archive, dest = os.path.abspath(os.fspath(archive)), os.path.abspath(os.fspath(dest))
    if not is_memmap_archive(archive):
        msg = f"{archive!r} is not a memory-mapped tensordict archive (a zip file with meta.json at its root)."
        raise ValueError(msg)
    staging = Staging(dest, existsok)
    try:
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                name = _check_name(info.filename, archive)
                if stat.S_ISLNK(info.external_attr >> 16):
                    msg = f"{archive}: member {name!r} is a symbolic link; refusing to extract it."
                    raise RuntimeError(msg)
                target = os.path.join(staging.path, *name.split("/"))
                if info.is_dir():
                    os.makedirs(target, exist_ok=True)
                    continue
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with zf.open(info) as src, open(target, "xb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
        staging.commit()
    except BaseException:
        staging.abort()
        raise
    return Path(dest)


def refresh_archive_checksums(archive: str | Path) -> None:
    """Recomputes the CRC-32 of every stored member of ``archive`` after in-place writes (``mode="r+"``)."""
    path = os.fspath(archive)
    with zipfile.ZipFile(path) as zf:
        infos = [i for i in zf.infolist() if i.compress_type == zipfile.ZIP_STORED and not i.is_dir()]
        cd_offset = zf.start_dir
    with open(path, "r+b") as f:
        for info in infos:
            f.seek(info.header_offset)
            header = f.read(30)
            name_len, extra_len = struct.unpack("<HH", header[26:30])
            data = info.header_offset + 30 + name_len + extra_len
            f.seek(data)
            crc, left = 0, info.file_size
            while left:
                chunk = f.read(min(left, 1 << 20))
                crc = zlib.crc32(chunk, crc)
                left -= len(chunk)
            if not info.flag_bits & 0x08:
                f.seek(info.header_offset + 14)
                f.write(struct.pack("<I", crc))
            info.CRC = crc
        # the central directory holds the CRCs zipfile checks: rewrite each record's field
        f.seek(cd_offset)
        by_offset = {i.header_offset: i for i in infos}
        pos = cd_offset
        while True:
            f.seek(pos)
            rec = f.read(46)
            if len(rec) < 46 or rec[:4] != b"PK\x01\x02":
                break
            n, m, k = struct.unpack("<HHH", rec[28:34])
            (offset,) = struct.unpack("<I", rec[42:46])
            if offset == 0xFFFFFFFF:
                f.seek(pos + 46 + n)
                offset = _zip64_offset(f.read(m))
            info = by_offset.get(offset)  # type: ignore[assignment]
            if info is not None:
                f.seek(pos + 16)
                f.write(struct.pack("<I", info.CRC))
            pos += 46 + n + m + k


def _zip64_offset(extra: bytes) -> int:
    i = 0
    while i + 4 <= len(extra):
        tag, size = struct.unpack("<HH", extra[i:i + 4])
        if tag == 1:
            fields = extra[i + 4:i + 4 + size]
            return struct.unpack("<Q", fields[-8:])[0]
        i += 4 + size
    return -1


# --------------------------------------------------------------------------- saving
def save_archive(td: Any, prefix: Any, *, copy_existing: bool, existsok: bool, num_threads: int,
                 compression: str | None, fsync: bool, like: bool = False) -> Any:
    """Saves ``td`` as the archive ``prefix`` and returns it loaded from there.

    With ``like=True`` the members are zero-filled (``memmap_like``) and the result maps
    the archive shared (``mode="r+"``), so writes into it reach the archive.
    """
    from tensordict.memmap._load import load_tree
    from tensordict.memmap._save import save_tree

    dest = os.path.abspath(os.fspath(prefix))
    if os.path.lexists(dest) and not existsok:
        msg = f"{dest!r} already exists; pass existsok=True to replace it."
        raise RuntimeError(msg)
    _compression(compression)
    folder = os.path.dirname(dest)
    os.makedirs(folder, exist_ok=True)
    work = tempfile.mkdtemp(prefix=f".{os.path.basename(dest)}.", suffix=".td-pack", dir=folder)
    try:
        save_tree(td, os.path.join(work, "store"), like=like, copy_existing=True, existsok=True,
                  num_threads=num_threads)
        pack_memmap(os.path.join(work, "store"), dest, compression=compression)
        if fsync:
            fd = os.open(dest, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    # the archive was written just now from ``td``: its pickled values are the ones ``td`` holds
    return load_tree(dest, mode="r+" if like else "c", allow_pickle=True)


# --------------------------------------------------------------------------- loading
class ZipFS:
    """The loader's view of an archive: folders are member prefixes, files are members.

    The archive is opened once; the map of its bytes is made through that open
    file, so a concurrent replace of the archive cannot mix two versions.
    """

    def __init__(self, path: str, shared: bool) -> None:
        self.path = path
        self.shared = shared
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        if shared:
            flags = (flags & ~os.O_RDONLY) | os.O_RDWR
        self.fd = os.open(path, flags)
        self.file = os.fdopen(self.fd, "r+b" if shared else "rb")
        try:
            self.zip = zipfile.ZipFile(self.file)
        except zipfile.BadZipFile:
            self.file.close()
            msg = f"{path!r} is not a memory-mapped tensordict archive (not a zip file)."
            raise ValueError(msg) from None
        self.members = {}
        for info in self.zip.infolist():
            if info.is_dir():
                continue
            self.members[_check_name(info.filename, path)] = info
        if "meta.json" not in self.members:
            self.file.close()
            msg = f"{path!r} is not a memory-mapped tensordict archive (no meta.json at its root)."
            raise ValueError(msg)
        self.size = os.fstat(self.fd).st_size
        self._storage: torch.UntypedStorage | None = None

    def close(self) -> None:
        self.file.close()

    def exists(self, name: str) -> bool:
        return name in self.members

    def is_dir(self, name: str) -> bool:
        prefix = name + "/"
        return any(m.startswith(prefix) for m in self.members)

    def read(self, name: str, limit: int) -> bytes:
        info = self.members[name]
        if info.file_size > limit:
            msg = f"{self.path}: member {name!r} holds {info.file_size} bytes, over the {limit}-byte limit."
            raise RuntimeError(msg)
        return self.zip.read(info)

    def nbytes(self, name: str) -> int:
        return self.members[name].file_size

    def _data_offset(self, info: zipfile.ZipInfo) -> int:
        self.file.seek(info.header_offset)
        header = self.file.read(30)
        if header[:4] != b"PK\x03\x04":
            msg = f"{self.path}: bad local header for member {info.filename!r}; the archive is damaged."
            raise RuntimeError(msg)
        name_len, extra_len = struct.unpack("<HH", header[26:30])
        return info.header_offset + 30 + name_len + extra_len

    def tensor(self, name: str, dtype: torch.dtype, shape: tuple) -> torch.Tensor:
        """The member ``name`` as a tensor: a view of the archive's map when stored and aligned, else a copy."""
        from tensordict.memmap._fileio import tensor_on
        from tensordict.memmap._tensor import MemoryMappedTensor, _DisableTF, _wrap

        info = self.members[name]
        nbytes = info.file_size
        if info.compress_type == zipfile.ZIP_STORED:
            offset = self._data_offset(info)
            if offset % dtype.itemsize == 0 and offset + nbytes <= self.size:
                if self._storage is None:
                    self._storage = torch.UntypedStorage.from_file(f"/proc/self/fd/{self.fd}", self.shared,  # type: ignore[assignment]
                                                                   self.size)
                with _DisableTF():
                    return _wrap(tensor_on(self._storage, dtype, shape, offset // dtype.itemsize), self.path)  # type: ignore[arg-type]
            if self.shared:
                msg = (f"{self.path}: member {name!r} is not aligned for {dtype} (a zip made by another tool); "
                       "mode='r+' cannot write through it. Load with mode='r', or re-pack with pack_memmap().")
                raise RuntimeError(msg)
        elif self.shared:
            msg = (f"{self.path}: member {name!r} is compressed; mode='r+' cannot write through it. Load with "
                   "mode='r' (writes stay in memory).")
            raise RuntimeError(msg)
        data = bytearray(self.zip.read(info))
        flat = torch.frombuffer(data, dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)
        return MemoryMappedTensor.from_tensor(flat.view(dtype).view(shape) if nbytes else
                                              torch.empty(shape, dtype=dtype))
