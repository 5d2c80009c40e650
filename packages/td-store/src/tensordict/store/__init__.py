"""TensorDicts whose leaves live in a Redis-protocol key-value server (Redis, Valkey,
Dragonfly, KeyDB): :class:`TensorDictStore` and :class:`LazyStackedTensorDictStore`.

Provided by the ``td-store`` distribution (needs the ``redis`` client package and a
server). Several processes, on several machines, open the same data by its ``td_id``.
"""

from tensordict.store._codec import StoreDataError
from tensordict.store._conn import STORE_BACKENDS, StoreAuthenticationError, StoreConnectionError
from tensordict.store._lazy import LazyStackedTensorDictStore
from tensordict.store._store import TensorDictStore
from tensordict.store._version import __version__

__all__ = [
    "LazyStackedTensorDictStore",
    "STORE_BACKENDS",
    "StoreAuthenticationError",
    "StoreConnectionError",
    "StoreDataError",
    "TensorDictStore",
    "__version__",
]
