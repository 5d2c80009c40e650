"""Writes into a memory-mapped TensorDict's ``NonTensorStack`` reach its store.

A tensor leaf of a memory-mapped TensorDict is the file itself, so an in-place
write (``td[1::2] = other``) is on disk at once. A ``NonTensorStack`` leaf lives in
the folder's ``meta.json`` (or a ``.pkl`` file beside it); :class:`StackFileSink` is
the write hook (``tensordict.ext.set_write_hook``) that rewrites that entry after
each in-place element write, in this process or in a worker the TensorDict was sent
to (the hook is pickled with the stack).

The folder's ``meta.json`` is replaced atomically (written to a temporary file in
the same folder, then renamed over it), keeping every other field (its
``generation`` included), so a reader sees the old or the new entry, never a mix.
A ``.pkl`` file the new entry no longer uses is removed after the rename.

The sink remembers the ``generation`` id of the save that made it. When the folder's
``meta.json`` names another generation (the store was re-saved, or grown by
``append_memmap``, since this TensorDict was mapped), the write is refused with a
``RuntimeError`` and the store is left as it is: rewriting the entry from this stale
stack would put back the old row count under the new metadata.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from tensordict.memmap._names import assign_names
from tensordict.memmap._store import META

__all__ = ["StackFileSink"]


class StackFileSink:
    """Rewrites the entry of ``key`` in ``folder``'s ``meta.json`` from a stack.

    Args:
        folder (str): the store folder holding the TensorDict (its ``meta.json``).
        key (str): the key of the stack in that TensorDict.
        make_entry (callable): ``make_entry(key, stack, stem, folder)`` gives the
            metadata entry (and writes a ``.pkl`` file into ``folder`` when the
            objects are not JSON-faithful); a module-level function, so the sink
            pickles.
        generation (str, optional): the generation id of the save that wrote
            ``folder``; ``None`` skips the check.

    Raises:
        RuntimeError: on a call, when ``folder``'s ``meta.json`` names another
            generation than ``generation``.
        KeyError: on a call, when the entry of ``key`` is gone from the store.
    """

    __slots__ = ("folder", "key", "make_entry", "generation")

    def __init__(self, folder: str, key: str, make_entry: Callable[..., dict],
                 generation: str | None = None) -> None:
        self.folder = folder
        self.key = key
        self.make_entry = make_entry
        self.generation = generation

    def __call__(self, stack: Any) -> None:
        path = os.path.join(self.folder, META)
        with open(path, encoding="ascii") as f:
            meta = json.load(f)
        found = meta.get("generation")
        if self.generation is not None and found != self.generation:
            msg = (
                f"cannot persist a write into key {self.key!r}: the store {self.folder!r} was re-saved or "
                f"appended to since this TensorDict was mapped (generation {found!r}, expected "
                f"{self.generation!r}); the store was left unchanged. Load it again with load_memmap."
            )
            raise RuntimeError(msg)
        entries = meta.get("entries", [])
        positions = [i for i, e in enumerate(entries) if e.get("key") == self.key]
        if not positions:
            msg = f"cannot persist a write into key {self.key!r}: the store {self.folder!r} has no such entry any more."
            raise KeyError(msg)
        i = positions[0]
        entry = entries[i]
        old_file = entry.get("file")
        stem = old_file[: -len(".pkl")] if old_file else assign_names(e.get("key") for e in entries)[self.key]
        new = self.make_entry(self.key, stack, stem, self.folder)
        entries[i] = new
        tmp = os.path.join(self.folder, f".{META}.{os.getpid()}.tmp")
        with open(tmp, "w", encoding="ascii") as f:
            json.dump(meta, f, allow_nan=True, separators=(",", ":"))
        os.replace(tmp, path)
        if old_file and new.get("file") != old_file:
            try:
                os.remove(os.path.join(self.folder, old_file))
            except FileNotFoundError:
                pass

    def __reduce__(self) -> tuple:
        return (StackFileSink, (self.folder, self.key, self.make_entry, self.generation))
