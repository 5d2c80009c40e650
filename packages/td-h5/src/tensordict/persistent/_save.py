"""Writing a whole TensorDict to a new HDF5 file (``to_h5`` / ``from_dict``), atomically.

The file is written under a temporary name in the destination folder and moved over
``filename`` (``os.replace``) only once complete, so a process killed mid-write, a
full disk or a file-size limit never leaves a half-written ``filename``: the earlier
file, if any, stays as it was, and a first write leaves no file at all. The temporary
name is ``.<name>.<pid>-<random>.tmp``; one left by a killed writer (its pid is gone)
is removed by the next save to the same name and listed by ``tensordict inspect``.

A file that another process (or another ``h5py.File`` of this one) holds open for
writing is not replaced: HDF5 takes an exclusive ``flock`` on a file opened for
writing, and ``to_h5`` takes a shared one on the file it is about to replace (held
until the new file is in place), so it refuses with ``BlockingIOError`` as h5py's own
``File(filename, "w")`` does, and no writer can open the file while it is replaced.
Readers (shared locks) do not block a replace: they keep reading the old file.

The HDF5 library does not survive a failed ``write(2)`` well: once a metadata flush
fails (``ENOSPC``, ``EFBIG`` under ``RLIMIT_FSIZE``), closing the file may crash the
process. So HDF5 writes through a Python file object (h5py's ``fileobj`` driver): the
bytes go to disk through Python, a failed write surfaces as an ``OSError`` inside
h5py, and HDF5 unwinds cleanly. The error is re-raised naming the file.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import uuid
from typing import Any

import h5py
import torch

from tensordict.persistent import _h5io as io

__all__ = ["save_atomic", "stale_temp_files", "temp_files"]

#: ``.<name>.<pid>-<hex>.tmp``: the temporary file a save writes beside its destination
_TEMP = re.compile(r"\.(?P<name>.+)\.(?P<pid>[0-9]{1,10})-[0-9a-f]{8}\.tmp")


def temp_files(filename: str) -> list[tuple[str, int]]:
    """``(path, writer pid)`` of the temporary files of saves to ``filename`` (finished or not)."""
    folder, base = os.path.split(os.path.abspath(filename))
    try:
        entries = os.listdir(folder)
    except OSError:
        return []
    out = []
    for entry in entries:
        m = _TEMP.fullmatch(entry)
        if m is not None and m.group("name") == base:
            out.append((os.path.join(folder, entry), int(m.group("pid"))))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def stale_temp_files(filename: str) -> list[str]:
    """Temporary files beside ``filename`` left by saves whose process is gone (this host)."""
    return [path for path, pid in temp_files(filename) if pid != os.getpid() and not _alive(pid)]


def _remove_stale(filename: str) -> None:
    for path in stale_temp_files(filename):
        try:
            if stat.S_ISREG(os.lstat(path).st_mode):
                os.unlink(path)
        except OSError:
            pass

#: dataset options that may make the file smaller than the raw data
_SHRINKING_KWARGS = ("compression", "scaleoffset")
_BUFFER = 1 << 20


def _data_bytes(td: Any) -> int:
    """Bytes of tensor data in ``td``: a lower bound of the size of its HDF5 file."""
    from tensordict import TensorDictBase

    total = 0
    for _key, value in td._items_raw():
        if isinstance(value, TensorDictBase):
            total += _data_bytes(value)
        elif isinstance(value, torch.Tensor):
            total += value.numel() * value.element_size()
    return total


def _check_size_limit(filename: str, td: Any, h5_kwargs: dict) -> None:
    """Fails before anything is written when the data alone exceeds ``RLIMIT_FSIZE``."""
    if any(h5_kwargs.get(k) is not None for k in _SHRINKING_KWARGS):
        return
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft == resource.RLIM_INFINITY:
        return
    need = _data_bytes(td)
    if need > soft:
        msg = (
            f"cannot write HDF5 file {filename!r}: its tensors alone take {need} bytes, more than the "
            f"file-size limit of this process (RLIMIT_FSIZE = {soft} bytes, `ulimit -f`). Nothing was "
            "written; an earlier file is unchanged."
        )
        raise OSError(errno.EFBIG, msg)


def save_atomic(filename: str, td: Any, h5_kwargs: dict) -> None:
    """Writes the validated TensorDict ``td`` to ``filename`` (replaced once complete).

    Args:
        filename (str): destination; its folder must exist.
        td (TensorDictBase): the data (checked by ``io.validate_tree`` beforehand).
        h5_kwargs (dict): ``create_dataset`` options for every tensor.

    Raises:
        OSError: the write failed (disk full, file-size limit, I/O error); the message
            names ``filename``, which is left as it was. The temporary file is removed.
    """
    _check_size_limit(filename, td, h5_kwargs)
    folder = os.path.dirname(os.path.abspath(filename))
    tmp = os.path.join(folder, f".{os.path.basename(filename)}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    lock_fd = _lock_existing(filename)
    _remove_stale(filename)
    try:
        with open(tmp, "xb+", buffering=_BUFFER) as raw:
            with h5py.File(raw, "w") as f:
                io.write_tree(f, td, h5_kwargs)
        os.replace(tmp, filename)
    except BaseException as err:
        _remove(tmp)
        if isinstance(err, (OSError, RuntimeError)):  # h5py reports I/O failures as either
            code = _errno_in(err)
            reason = os.strerror(code) if code else str(err)
            msg = (
                f"could not write HDF5 file {filename!r}: {reason}. Nothing was replaced: an earlier "
                "file is unchanged."
            )
            cls = type(err) if type(err) in (PermissionError, FileNotFoundError) else OSError
            raise cls(code or errno.EIO, msg) from err
        raise
    finally:
        if lock_fd is not None:
            os.close(lock_fd)


def _lock_existing(filename: str) -> int | None:
    """Takes a shared lock on the file ``filename`` that is about to be replaced.

    Returns the locked descriptor (closing it releases the lock), or ``None`` when
    there is no file to lock or the file system has no locks.

    Raises:
        BlockingIOError: another writer holds the file open (an exclusive lock).
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return None
    try:
        fd = os.open(filename, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None  # missing or unreadable: nothing of anyone else's to protect here
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        msg = (
            f"unable to lock file {filename!r}: another process (or another open h5py.File) holds it open for "
            "writing; close it first. Nothing was written and the file is unchanged."
        )
        raise BlockingIOError(errno.EAGAIN, msg) from None
    except OSError:  # no locks on this file system
        return fd
    return fd


def _errno_in(err: BaseException) -> int | None:
    """The errno of the OSError that made h5py fail (h5py keeps it as the context)."""
    seen = set()
    cur: BaseException | None = err
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.errno:
            return cur.errno
        cur = cur.__cause__ or cur.__context__
    return None


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
