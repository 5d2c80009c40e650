"""``tensordict.distributed``: TensorDicts across processes and machines.

Provided by the ``td-distributed`` distribution. Importing it is not needed to use
the features: they are methods of every TensorDict, which import this package when
first called:

- point to point: ``td.send(dst)`` / ``td.recv(src)``, ``td.isend`` / ``td.irecv``,
  ``td.init_remote(dst)`` / ``TensorDict.from_remote_init(src)``;
- collectives: ``td.broadcast(src)``, ``td.all_reduce(op)``, ``td.reduce(dst, op)``,
  ``td.all_gather()``, ``td.gather_and_stack(dst)``, ``td.scatter(src)``;
- worker pools: ``td.map(fn, dim, num_workers)`` and ``td.map_iter(...)``.

The engine is ``torch.distributed`` (gloo on CPU, nccl on GPU) and
``torch.multiprocessing``; jobs spanning machines are launched with ``torchrun``.
A failed transfer or collective (dead peer, timeout) raises :class:`CommError`, a
``RuntimeError``; a malformed message raises :class:`WireError`, a ``ValueError``.
The wire format is described in ``tensordict.distributed._wire``. The functions are
also available here, taking the TensorDict first (``send(td, dst)``).
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
from tensordict.distributed._integrity import (
    integrity_mode,
    max_message_bytes,
    set_integrity_mode,
    set_max_message_bytes,
)
from tensordict.distributed._p2p import from_remote_init, init_remote, irecv, isend, recv, send
from tensordict.distributed._pool import map, map_iter  # noqa: A004
from tensordict.distributed._transport import CommError as CommError
from tensordict.distributed._version import __version__
from tensordict.distributed._wire import WireError as WireError

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
    "max_message_bytes",
    "set_max_message_bytes",
    "integrity_mode",
    "set_integrity_mode",
    "__version__",
]
# also importable from here (not in __all__ until docs/api documents them): CommError, WireError
