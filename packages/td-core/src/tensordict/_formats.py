"""On-disk format constants shared by the writers and the readers (one place).

* the consolidated file (``td.consolidate(filename=...)``, read by
  ``from_consolidated`` and by ``python -m tensordict inspect``): an 8-byte magic, a
  ``uint32`` format version and a ``uint64`` JSON-metadata length (little endian), the
  JSON metadata, then the data, which starts on a 64-byte boundary;
* the td-memmap folder (``td.memmap(prefix)``): a ``meta.json`` per folder whose
  ``"format"`` is ``"td-memmap"``, and member file names that match
  :data:`MEMMAP_MEMBER` (percent-encoded keys, ``.memmap`` or ``.pkl`` suffix).

The public names are re-exported by :mod:`tensordict.ext` for the sibling
distributions. This module imports nothing from td-core.
"""

from __future__ import annotations

import re
import struct

__all__ = [
    "CONSOLIDATED_ALIGN",
    "CONSOLIDATED_FORMAT",
    "CONSOLIDATED_HEADER",
    "CONSOLIDATED_MAGIC",
    "CONSOLIDATED_VERSION",
    "MEMMAP_FORMAT",
    "MEMMAP_MEMBER",
    "MEMMAP_META",
]

#: first bytes of a consolidated file
CONSOLIDATED_MAGIC = b"TDCONSOL"
#: the version written in a consolidated file's header
CONSOLIDATED_VERSION = 1
#: the header: magic, version (uint32), metadata length (uint64), little endian
CONSOLIDATED_HEADER = struct.Struct("<8sIQ")
#: the data of a consolidated file (and every run in it) starts on this boundary
CONSOLIDATED_ALIGN = 64
#: the ``"format"`` field of a consolidated file's JSON metadata
CONSOLIDATED_FORMAT = "tensordict.consolidated"

#: the metadata file of every td-memmap folder
MEMMAP_META = "meta.json"
#: the ``"format"`` field of a td-memmap ``meta.json``
MEMMAP_FORMAT = "td-memmap"
#: member names td-memmap writes (anything else named in metadata is refused)
MEMMAP_MEMBER = re.compile(r"^[A-Za-z0-9_%~\-]{1,240}(\.memmap|\.pkl)?$")
