"""Crash-safe publication of a store.

A save never writes into the destination folder. It writes the whole tree into a
hidden sibling, ``.<name>.td-tmp-<pid>-<random>``, then publishes it in one step:

- destination missing or an empty folder: ``rename`` (atomic);
- destination holds anything (an earlier save): ``renameat2(RENAME_EXCHANGE)``
  swaps the two folders atomically (Linux); where that is not available, the old
  folder is first renamed to ``.<name>.td-old-...`` and the new one renamed into
  place (the loader recovers from a crash between the two renames).

Afterwards, entries of the old folder that the old save did not write (a user's
README, say) are moved into the new folder, and what the old save wrote (the
entries its ``meta.json`` files list) is deleted in a background thread
(``wait_cleanup()`` waits for it; it is also awaited at exit), or at once when
it is a few small files. Nothing the
library did not write is ever deleted: a staging folder carries a marker file
(``.td-staging``) until just before it is published, and only a marked folder is
removed whole; from any other hidden folder left by a killed process, only the
entries its metadata lists are removed, the user's entries are moved back into
the store (or left in place, with a warning, when a name is taken).

Every ``meta.json`` of one save carries the same random ``generation`` id; the
root one is written last. A loader checks that every folder it reads belongs to
the generation it started with and that the root still names it at the end, so
a load that overlaps a re-save retries instead of mixing the two saves.

So if the process is killed at any point, the destination holds either the
earlier complete save or the new complete save. A sibling staging folder with no
published destination marks an interrupted save: ``load_memmap`` reports it as
incomplete.
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import json
import os
import re
import secrets
import shutil
import threading
from typing import Any

from tensordict.ext import MEMMAP_FORMAT, MEMMAP_META
from tensordict.memmap._fileio import open_regular
from tensordict.memmap._upstream import is_upstream_meta, upstream_owned

__all__ = ["Staging", "find_partial", "read_meta", "wait_cleanup", "new_generation", "fsync_path", "META", "FORMAT",
           "META_MAX_BYTES", "MARKER"]

META = MEMMAP_META  # the format constants live in td-core (tensordict.ext)
_JSON_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')
#: the largest ``meta.json`` a loader reads (one entry per key takes ~100 bytes)
META_MAX_BYTES = 64 << 20
FORMAT = MEMMAP_FORMAT
_TMP = ".td-tmp-"
_OLD = ".td-old-"
#: present in a staging folder until just before it is published: the folder is ours alone
MARKER = ".td-staging"
#: journal of an append in progress, at the root of a store (see ``_append.py``)
JOURNAL = ".td-append.json"


def new_generation() -> str:
    """A random id shared by every ``meta.json`` of one save."""
    return secrets.token_hex(8)


def fsync_path(path: str, directory: bool = False) -> None:
    """Flushes ``path`` (a file, or a folder's entries) to stable storage."""
    fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _hidden(prefix: str, tag: str) -> str:
    parent, name = os.path.split(prefix)
    return os.path.join(parent, f".{name}{tag}{os.getpid()}-{secrets.token_hex(4)}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _siblings(prefix: str, tag: str) -> list[tuple[str, int]]:
    parent, name = os.path.split(prefix)
    start = f".{name}{tag}"
    out = []  # type: ignore[var-annotated]
    try:
        entries = os.listdir(parent)
    except FileNotFoundError:
        return out
    for entry in entries:
        if entry.startswith(start):
            pid_part = entry[len(start) :].split("-", 1)[0]
            pid = int(pid_part) if pid_part.isdigit() else -1
            out.append((os.path.join(parent, entry), pid))
    return out


def find_partial(prefix: str) -> tuple[list[str], list[str]]:
    """``(staging folders, old folders)`` left next to ``prefix`` by interrupted saves."""
    return [p for p, _ in _siblings(prefix, _TMP)], [p for p, _ in _siblings(prefix, _OLD)]


def _remove_stale(prefix: str) -> None:
    """Cleans staging/old siblings whose writing process is gone (same host).

    A folder still holding the staging marker was never published: it holds only
    what a save wrote, and is removed. Any other (an earlier tree swapped out by a
    save that was killed before it finished) loses only the entries its metadata
    lists; the rest is the user's and is moved back into ``prefix``.
    """
    for tag in (_TMP, _OLD):
        for path, pid in _siblings(prefix, tag):
            if pid != os.getpid() and pid > 0 and not _pid_alive(pid):
                if tag == _OLD and not os.path.exists(prefix):
                    continue  # the only complete copy: keep it for recovery
                if os.path.lexists(os.path.join(path, MARKER)):
                    _remove_staging(path)
                else:
                    retire(path, prefix if os.path.isdir(prefix) else None)


def _remove_staging(path: str) -> None:
    """Removes a staging folder, its marker last.

    Were the marker removed first and the process killed, what is left would no longer
    be known as ours, and a later save would keep it as the user's.
    """
    try:
        entries = os.listdir(path)
    except OSError:
        return
    for entry in entries:
        if entry == MARKER:
            continue
        full = os.path.join(path, entry)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full, ignore_errors=True)
        else:
            try:
                os.unlink(full)
            except OSError:
                pass
    shutil.rmtree(path, ignore_errors=True)  # the marker, then the folder


_libc: Any = None


def _exchange(a: str, b: str) -> bool:
    """Atomically swaps two paths (Linux ``renameat2``); ``False`` if unsupported."""
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
            _libc.renameat2  # noqa: B018 - probe
        except (OSError, AttributeError):
            _libc = False
    if _libc is False:
        return False
    at_fdcwd, rename_exchange = -100, 2
    res = _libc.renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    if res == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, f"renameat2({a!r}, {b!r}) failed: {os.strerror(err)}")


def read_meta(folder: str) -> dict:
    """Parses ``folder/meta.json``.

    The file must be a regular file (not a symbolic link, device or FIFO: checked
    before anything is read) of at most :data:`META_MAX_BYTES` bytes.

    Raises:
        FileNotFoundError: no metadata file.
        RuntimeError: the file is a link or not a regular file, is too large, cannot
            be read, or is not valid td-memmap metadata.
    """
    path = os.path.join(folder, META)
    fd = open_regular(path, "metadata file")
    try:
        size = os.fstat(fd).st_size
        if size > META_MAX_BYTES:
            raise RuntimeError(_too_large(path, size))
        chunks, total = [], 0
        while True:  # the size can lie (procfs) or change: read at most one byte past the cap
            chunk = os.read(fd, min(1 << 20, META_MAX_BYTES + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > META_MAX_BYTES:
                raise RuntimeError(_too_large(path, total))
        raw = b"".join(chunks)
    except OSError as err:
        msg = f"{path}: cannot read the metadata file ({err.strerror or err}); the store is damaged or unreadable."
        raise RuntimeError(msg) from None
    finally:
        os.close(fd)
    return parse_meta(raw, path)


def parse_meta(raw: bytes, path: str) -> dict:
    """Parses the bytes of a ``meta.json`` (``path`` is named in errors).

    Raises:
        RuntimeError: not valid JSON, nested too deeply, or not td-memmap metadata.
    """
    if _nesting_depth(raw) > META_MAX_DEPTH:
        msg = (f"{path}: the metadata nests more than {META_MAX_DEPTH} levels deep; td-memmap metadata is "
               "shallow, so the store is damaged or was not written by td-memmap.")
        raise RuntimeError(msg)
    try:
        meta = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        msg = f"{path}: not valid JSON ({type(err).__name__}: {err}); the store is damaged or incomplete."
        raise RuntimeError(msg) from None
    if not isinstance(meta, dict) or (meta.get("format") != FORMAT and not is_upstream_meta(meta)):
        msg = f"{path}: not td-memmap metadata (missing \"format\": \"{FORMAT}\")."
        raise RuntimeError(msg)
    return meta


#: deepest JSON nesting a ``meta.json`` may have (ours nest 3 levels; deeper is refused before parsing)
META_MAX_DEPTH = 64


def _nesting_depth(raw: bytes) -> int:
    """Deepest ``[``/``{`` nesting of the JSON text ``raw`` (strings skipped), in one linear pass."""
    depth = top = 0
    for m in _JSON_TOKENS.finditer(raw):
        tok = m.group()
        if tok in (b"[", b"{"):
            depth += 1
            if depth > top:
                top = depth
        elif tok in (b"]", b"}"):
            depth -= 1
    return top


def _too_large(path: str, size: int) -> str:
    return (
        f"{path}: the metadata file holds {size} bytes or more, over the {META_MAX_BYTES}-byte limit for a "
        "td-memmap meta.json; refusing to read it (the store is damaged or was not written by td-memmap)."
    )


def _owned_entries(folder: str) -> set[str]:
    """Names in ``folder`` written by the save whose metadata lives there."""
    try:
        meta = read_meta(folder)
    except (FileNotFoundError, RuntimeError):
        return set()
    if is_upstream_meta(meta):
        return upstream_owned(folder, meta)
    owned = {META, MARKER, JOURNAL}
    for entry in meta.get("entries", []) if isinstance(meta.get("entries"), list) else []:
        if isinstance(entry, dict):
            for field in ("file", "dir"):
                if isinstance(entry.get(field), str):
                    owned.add(entry[field])
    for sub in meta.get("stack", []) if isinstance(meta.get("stack"), list) else []:
        if isinstance(sub, str):
            owned.add(sub)
    return owned


def retire(old: str, dest: str | None) -> list[str]:
    """Removes from the replaced tree ``old`` what its save wrote; moves the rest to ``dest``.

    Entries not listed by ``old``'s metadata (a user's files, at any depth) are
    renamed to the same place under ``dest`` when that name is free there; an
    owned sub-folder is retired recursively. ``old`` is removed once empty.
    Returns the paths left behind (names already taken in ``dest``).
    """
    owned = _owned_entries(old)
    left: list[str] = []
    try:
        # the metadata (and the staging marker) go last: a kill half-way through leaves a
        # folder whose remaining files are still listed as ours, so a later save finishes
        # the job instead of taking them for the user's files and keeping them forever
        entries = sorted(os.listdir(old), key=lambda e: e in (META, MARKER))
    except OSError:
        return left
    for entry in entries:
        path = os.path.join(old, entry)
        target = os.path.join(dest, entry) if dest is not None else None
        try:
            is_dir = os.path.isdir(path) and not os.path.islink(path)
            if entry in owned:
                if is_dir:
                    sub_dest = target if target is not None and os.path.isdir(target) else None
                    left.extend(retire(path, sub_dest))
                else:
                    os.unlink(path)
            elif target is not None and not os.path.lexists(target):
                os.rename(path, target)
            else:
                left.append(path)
        except OSError:
            left.append(path)
    try:
        os.rmdir(old)
    except OSError:
        pass
    return left


def _retire_and_report(old: str, dest: str) -> None:
    left = retire(old, dest)
    if left:
        import warnings

        warnings.warn(
            f"the save at {dest!r} replaced a store holding files td-memmap did not write whose names the new "
            f"save also uses; they were kept in {old!r}: {left[:5]}{' ...' if len(left) > 5 else ''}.",
            RuntimeWarning,
            stacklevel=2,
        )


class Staging:
    """A hidden sibling folder that becomes ``prefix`` on :meth:`commit`.

    Args:
        prefix (str): absolute destination path.
        existsok (bool): allow replacing a non-empty destination.

    Raises:
        RuntimeError: ``prefix`` is a file, or holds data and ``existsok`` is False.
    """

    def __init__(self, prefix: str, existsok: bool) -> None:
        self.prefix = prefix
        if os.path.lexists(prefix) and not os.path.isdir(prefix):
            msg = f"cannot save to {prefix!r}: it exists and is not a directory."
            raise RuntimeError(msg)
        if not existsok and os.path.isdir(prefix) and os.listdir(prefix):
            msg = f"{prefix!r} already exists and is not empty; pass existsok=True to replace the store there."
            raise RuntimeError(msg)
        parent = os.path.dirname(prefix)
        os.makedirs(parent, exist_ok=True)
        if os.path.isdir(prefix) and os.stat(prefix).st_dev != os.stat(parent).st_dev:
            msg = (
                f"cannot save to {prefix!r}: it is a mount point. A save is published by renaming a folder "
                "written next to it, which cannot cross file systems; save into a sub-folder of it instead."
            )
            raise RuntimeError(msg)
        _remove_stale(prefix)
        self.path = _hidden(prefix, _TMP)
        os.mkdir(self.path)
        with open(os.path.join(self.path, MARKER), "wb"):
            pass

    def abort(self) -> None:
        if os.path.lexists(os.path.join(self.path, MARKER)):
            _remove_staging(self.path)
        else:  # already swapped with the earlier tree: remove only what was written
            retire(self.path, self.prefix if os.path.isdir(self.prefix) else None)

    def commit(self, fsync: bool = False) -> None:
        """Publishes the staging folder as ``prefix`` (see the module docstring).

        With ``fsync``, the folders' entries are flushed before and after the
        rename, so the published tree survives a power cut.
        """
        prefix, new = self.prefix, self.path
        os.unlink(os.path.join(new, MARKER))
        parent = os.path.dirname(prefix)
        if fsync:
            fsync_path(new, directory=True)
        if not os.path.isdir(prefix):
            os.rename(new, prefix)
            if fsync:
                fsync_path(parent, directory=True)
            _remove_stale(prefix)
            return
        try:
            os.rename(new, prefix)  # replaces an empty directory atomically
            if fsync:
                fsync_path(parent, directory=True)
            return
        except OSError as err:
            if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
        owned = _owned_entries(prefix)
        if _exchange(new, prefix):
            old = new  # after the swap, the staging path holds the old tree
        else:
            old = _hidden(prefix, _OLD)
            os.rename(prefix, old)
            os.rename(new, prefix)
        if fsync:
            fsync_path(parent, directory=True)
        for entry in os.listdir(old):  # the user's files come back at once; the rest is retired later
            if entry not in owned and not os.path.lexists(os.path.join(prefix, entry)):
                os.rename(os.path.join(old, entry), os.path.join(prefix, entry))
        if _small_tree(old):
            _retire_and_report(old, prefix)  # a few small files: quicker here than a thread's start
        else:
            _defer(_retire_and_report, old, prefix)


# --------------------------------------------------------------------------- background cleanup
# Deleting the replaced tree (unlinking every data file) is the slowest part of a
# re-save on many file systems and nobody waits for its result, so it runs in a
# background thread. If the process dies first, the hidden folder (named with this
# pid) is removed by the next save next to it.
_pending: list[threading.Thread] = []
_pending_lock = threading.Lock()


#: a replaced tree of at most this many entries, no folder among them, holding at most
#: ``_SMALL_BYTES`` on disk, is deleted by the save itself: starting the cleanup thread costs
#: more (the caller waits for the thread to start, and for the GIL it then holds)
_SMALL_ENTRIES = 16
_SMALL_BYTES = 64 << 20


def _small_tree(folder: str) -> bool:
    try:
        with os.scandir(folder) as it:
            used = 0
            for n, entry in enumerate(it):
                if n >= _SMALL_ENTRIES or entry.is_dir(follow_symlinks=False):
                    return False
                used += entry.stat(follow_symlinks=False).st_blocks * 512
                if used > _SMALL_BYTES:
                    return False
    except OSError:
        return False
    return True


def _defer(fn: Any, *args: Any) -> None:
    thread = threading.Thread(target=fn, args=args, name="td-memmap-cleanup", daemon=True)
    with _pending_lock:
        _pending[:] = [t for t in _pending if t.is_alive()]
        _pending.append(thread)
    thread.start()


def wait_cleanup(timeout: float | None = None) -> None:
    """Waits until the trees replaced by earlier saves are deleted."""
    with _pending_lock:
        threads = list(_pending)
    for thread in threads:
        thread.join(timeout)


atexit.register(wait_cleanup, 30.0)
