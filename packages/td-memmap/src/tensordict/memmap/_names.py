"""Keys to file names, and the checks applied to names read back from disk.

A key may be any string: ``".."``, ``"a/b"``, ``"/etc/passwd"``, ``"x\\0y"``, ``""``.
Its file name is its UTF-8 bytes with everything outside ``[A-Za-z0-9_-]``
percent-encoded (``.`` included), so a name never contains a path separator, never
starts with a dot, and never clashes with another key's data file, sub-folder or
``meta.json`` (suffixes are the only dots). The key itself is kept in the JSON
metadata and loaded back from there, so the encoding never has to be decoded.

Names are also made unique ignoring case (for case-insensitive file systems) and
kept short enough for any file system (long names end in a hash of the key).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable

from tensordict.ext import MEMMAP_MEMBER

__all__ = ["assign_names", "encode_key", "member_path"]

_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_MAX = 160
#: what a member name read from metadata must look like
_VALID = MEMMAP_MEMBER  # shared with `python -m tensordict inspect` (tensordict.ext)


def encode_key(key: str) -> str:
    """The file-system-safe stem of ``key`` (no suffix).

    Examples:
        >>> encode_key("obs")
        'obs'
        >>> encode_key("../x")
        '%2E%2E%2Fx'
        >>> encode_key("")
        '%'
    """
    raw = key.encode("utf-8", "surrogatepass")
    out = "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in raw)
    if not out:
        return "%"
    if len(out) > _MAX:
        digest = hashlib.sha256(raw).hexdigest()[:24]
        out = out[: _MAX - 26] + "~" + digest
    return out


def assign_names(keys: Iterable[str]) -> dict[str, str]:
    """Maps each key of one folder to a stem that is unique ignoring case."""
    out: dict[str, str] = {}
    taken: set[str] = {"meta"}
    for key in keys:
        stem = encode_key(key)
        low = stem.lower()
        n = 0
        while low in taken:
            n += 1
            low = f"{stem}~{n}".lower()
        taken.add(low)
        out[key] = stem if n == 0 else f"{stem}~{n}"
    return out


def _link_in(root: str, path: str) -> str | None:
    """The first component of ``path`` below ``root`` that is a symbolic link, if any."""
    rel = os.path.relpath(path, root)
    if rel == os.curdir or rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return None  # not below root: the realpath check reports it
    current = root
    for part in rel.split(os.sep):
        current = os.path.join(current, part)
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            return None  # missing: the caller reports it
        except OSError as err:
            msg = f"cannot inspect {current!r} inside the store {root!r}: {err.strerror or err}."
            raise RuntimeError(msg) from None
        if stat.S_ISLNK(mode):
            return current
    return None


def member_path(folder: str, name: object, root: str, what: str, *, strict: bool = True, checked: bool = False) -> str:
    """``folder/name`` for a ``name`` read from (untrusted) metadata.

    ``root`` is the store's real path. No component of the result below ``root``
    may be a symbolic link (td-memmap never writes one; a link could lead to a
    file outside the store or to a device), and the result must resolve inside
    ``root``. Nothing is opened or read.

    With ``strict`` (our own stores), the name must look like one this library
    writes (``fullmatch``: a trailing newline does not pass); otherwise (stores
    written by the ``tensordict`` package) it must be one path component.

    With ``checked``, ``folder`` is ``root`` or a path this function returned (so it is
    real, inside ``root`` and free of links): only the new component is inspected, which
    keeps a top-down walk of a deep store linear in its depth (the full check walks
    every component from ``root``, and ``realpath`` resolves every one of them again).

    Raises:
        RuntimeError: the name is not one this library writes, a component is a
            symbolic link, or the path leaves ``root``.
    """
    meta = os.path.join(folder, "meta.json")
    if not isinstance(name, str) or (strict and not _VALID.fullmatch(name)) or os.sep in name or name in ("", ".", ".."):
        msg = f"{meta}: invalid {what} name {name!r} in the metadata; refusing to read outside the store."
        raise RuntimeError(msg)
    path = os.path.join(folder, name)
    if checked:
        try:
            is_link = stat.S_ISLNK(os.lstat(path).st_mode)
        except FileNotFoundError:
            return path  # missing: the caller reports it
        except OSError as err:
            msg = f"cannot inspect {path!r} inside the store {root!r}: {err.strerror or err}."
            raise RuntimeError(msg) from None
        link = path if is_link else None
    else:
        link = _link_in(root, path)
    if link is not None:
        try:
            target = repr(os.readlink(link))
        except OSError:
            target = "an unreadable target"
        msg = (
            f"{meta}: {what} {name!r}: {link!r} is a symbolic link (to {target}). td-memmap does not follow "
            f"links inside a store, since they can lead outside the store {root!r}; refusing to read it."
        )
        raise RuntimeError(msg)
    if checked:
        return path  # one plain component below a real folder inside root
    real = os.path.realpath(path)
    if not (real == root or real.startswith(root + os.sep)):
        msg = f"{meta}: {what} {name!r} resolves to {real!r}, outside the store {root!r}; refusing to read it."
        raise RuntimeError(msg)
    return path
