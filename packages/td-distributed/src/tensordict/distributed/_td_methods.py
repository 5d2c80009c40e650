"""``TensorDictBase`` methods provided by td-distributed.

td-core's ``_seams.py`` forwards ``td.send(...)``, ``td.map(...)`` and friends here,
passing the TensorDict (or, for ``from_remote_init``, the class) first. The
implementations live in the modules named by concern: ``_p2p`` (point to point),
``_collectives`` and ``_pool`` (worker pools).
"""

from __future__ import annotations

from tensordict.distributed._collectives import (
    all_gather,
    all_reduce,
    broadcast,
    gather_and_stack,
    reduce,
    scatter,
)
from tensordict.distributed._p2p import from_remote_init, init_remote, irecv, isend, recv, send
from tensordict.distributed._pool import map, map_iter  # noqa: A004 - the method's public name

__all__ = [
    "send",
    "recv",
    "isend",
    "irecv",
    "init_remote",
    "from_remote_init",
    "broadcast",
    "all_reduce",
    "reduce",
    "all_gather",
    "gather_and_stack",
    "scatter",
    "map",
    "map_iter",
]
