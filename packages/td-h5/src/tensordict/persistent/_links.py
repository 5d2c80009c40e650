"""Which members of an HDF5 group a ``PersistentTensorDict`` reads.

An HDF5 file can point outside itself: an external link opens another file, a dataset
with external storage reads raw bytes from other files, and a virtual dataset maps
datasets of other files. A file is untrusted input, so none of these is followed:
such members are not listed in ``keys()``, and asking for one by name raises a
``KeyError`` that says why. Named datatypes and dangling soft links hold no data and
are not listed either. Soft links inside the file are followed (checked the same way
along their target path).

Every check reads link and dataset-creation metadata only: nothing outside the file
is opened.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any, cast

import h5py

from tensordict.persistent._nodes import GroupNode, is_group

__all__ = ["has_link", "refusal", "refused_error", "scan", "resolve_path"]

#: how many soft links a target path may go through (HDF5's own default limit is 16)
_MAX_SOFT = 16


def has_link(group: h5py.Group, name: str) -> bool:
    """Whether ``group`` has a link called ``name`` (the link itself is not followed)."""
    if isinstance(group, GroupNode):
        return name in cast("Container[str]", group)  # the Zarr group adapter defines __contains__
    try:
        return bool(group.id.links.exists(name.encode("utf-8")))
    except (KeyError, ValueError, TypeError, RuntimeError, UnicodeError):
        return False


def _link_type(group: h5py.Group, name: str) -> int | None:
    try:
        return group.id.links.get_info(name.encode("utf-8")).type
    except (KeyError, ValueError, TypeError, RuntimeError, UnicodeError):
        return None


def _storage_refusal(dset: h5py.Dataset) -> str | None:
    dcpl = dset.id.get_create_plist()
    n_ext = dcpl.get_external_count()
    if n_ext:
        files = [_text(dcpl.get_external(i)[0]) for i in range(min(n_ext, 4))]
        return f"a dataset whose raw data lives in external file(s) {files}"
    if dcpl.get_layout() == h5py.h5d.VIRTUAL:
        count = dcpl.get_virtual_count()
        files = sorted({_text(dcpl.get_virtual_filename(i)) for i in range(count)} - {"."})
        if files:
            return f"a virtual dataset mapping data of other file(s) {files[:4]}"
    return None


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _link_refusal(group: h5py.Group, name: str, depth: int) -> str | None:
    """Why the link ``name`` of ``group`` points outside the file, or ``None`` (it does not)."""
    try:
        link = group.get(name, getlink=True)
    except TypeError:  # h5py: "Unknown link type"
        return "a link of a user-defined type"
    if link is None or isinstance(link, h5py.HardLink):
        return None
    if isinstance(link, h5py.ExternalLink):
        return f"an external link to {link.path!r} in file {_text(link.filename)!r}"
    if isinstance(link, h5py.SoftLink):
        if depth >= _MAX_SOFT:
            return f"a chain of more than {_MAX_SOFT} soft links"
        why = _path_refusal(group, link.path, depth + 1)
        if why is not None:
            return f"a soft link to {link.path!r}, which goes through {why}"
        return None
    return "a link of a user-defined type"  # pragma: no cover - h5py knows three link classes


def _path_refusal(group: h5py.Group, path: str, depth: int) -> str | None:
    """Why following ``path`` from ``group`` (or the root when absolute) leaves the file."""
    here = group.file if path.startswith("/") else group
    parts = [p for p in path.split("/") if p not in ("", ".")]
    for i, part in enumerate(parts):
        why = _link_refusal(here, part, depth)
        if why is not None:
            return why
        obj = here.get(part)
        if obj is None:
            return None  # dangling: h5py reports it as missing
        if i == len(parts) - 1:
            return _storage_refusal(obj) if isinstance(obj, h5py.Dataset) else None
        if not isinstance(obj, h5py.Group):
            return None
        here = obj
    return None


def refusal(group: h5py.Group, name: str, listed: bool = False) -> str | None:
    """Why the member ``name`` of ``group`` is not read, or ``None`` when it is data of this file.

    Reasons: an external link, a soft link whose target leaves the file, a dataset with
    external storage or a virtual dataset mapping other files, a named datatype, a
    dangling soft link. ``listed``: ``name`` comes from listing ``group``, so it must
    resolve.

    Raises:
        OSError: the member exists but its metadata cannot be read (a damaged file).
    """
    if isinstance(group, GroupNode):
        return None
    try:
        why = _link_refusal(group, name, 0)
        if why is not None:
            return why
        obj = group.get(name)  # None when missing, dangling, or when the object cannot be opened
        if obj is None:
            if not has_link(group, name):
                if listed:  # listed by the group but not found by name: a damaged link table
                    msg = "listed in the group, but no link of that name can be found"
                    raise KeyError(msg)
                return None
            if _link_type(group, name) == h5py.h5l.TYPE_SOFT:
                return "a dangling soft link (its target does not exist)"
            group[name]  # a hard link whose object cannot be opened: raises h5py's reason
            return "an object that cannot be opened"
        if isinstance(obj, h5py.Dataset):
            return _storage_refusal(obj)
        if isinstance(obj, h5py.Group):
            return None
        return (
            "a named datatype (not data)"
            if isinstance(obj, h5py.Datatype)
            else "not a dataset or group"
        )
    except (OSError, RuntimeError, ValueError, KeyError) as err:
        msg = f"entry {name!r} of the HDF5 group {group.name!r} cannot be read: the file is damaged ({err})"
        raise OSError(msg) from None


def scan(group: h5py.Group, names: Any) -> dict[str, str]:
    """``{name: reason}`` for every member of ``names`` that is not read (see :func:`refusal`)."""
    if isinstance(group, GroupNode):
        return {}  # a Zarr group has no links; its names were checked when listed
    out = {}
    for name in names:
        why = refusal(group, name, listed=True)
        if why is not None:
            out[name] = why
    return out


def refused_error(key: Any, why: str, filename: str) -> KeyError:
    msg = (
        f"key {key!r} of HDF5 file {filename!r} is {why}: PersistentTensorDict does not read data "
        "from outside the file (external links, external storage, virtual datasets), nor entries "
        "that are not data. Open the file with h5py directly if you trust what it points to, or "
        "delete the entry (`del td[key]` removes the link, not its target)."
    )
    return KeyError(msg)


def resolve_path(root: h5py.Group, path: str, filename: str) -> Any:
    """The object at ``path`` under ``root`` (``None`` when missing), never leaving the file.

    Raises:
        KeyError: a component of ``path`` points outside the file.
    """
    here = root
    parts = [p for p in path.split("/") if p not in ("", ".")]
    for part in parts:
        if not is_group(here):
            return here
        why = refusal(here, part)
        if why is not None:
            raise refused_error(path, why, filename)
        here = here.get(part)
        if here is None:
            return None
    return here
