"""TensorDictBase methods provided by td-store through td-core's sibling seam.

td-core forwards ``td.to_store(...)`` here (see ``tensordict._seams``): the TensorDict
comes first.
"""

from __future__ import annotations

from typing import Any

from tensordict import LazyStackedTensorDict

__all__ = ["to_store"]


def to_store(
    td: Any,
    *,
    backend: str = "redis",
    host: str = "localhost",
    port: int = 6379,
    db: int = 0,
    unix_socket_path: str | None = None,
    prefix: str = "tensordict",
    device: Any = None,
    **kwargs: Any,
) -> Any:
    """Uploads the TensorDict to a Redis-protocol server and returns a TensorDict backed by it.

    A lazy stack (stacked along dim 0) gives a
    :class:`~tensordict.store.LazyStackedTensorDictStore` (one blob per leaf, elements
    at offsets; shapes may differ between elements); any other TensorDict gives a
    :class:`~tensordict.store.TensorDictStore`. All leaves are written in one transaction.

    Keyword Args:
        backend (str): ``"redis"`` or ``"dragonfly"``. Defaults to ``"redis"``.
        host (str): the server's host. Defaults to ``"localhost"``.
        port (int): the server's port. Defaults to ``6379``.
        db (int): the database number. Defaults to ``0``.
        unix_socket_path (str, optional): a Unix socket to connect through instead.
        prefix (str): the key namespace on the server. Defaults to ``"tensordict"``.
        device (torch.device, optional): where reads put tensors; defaults to ``td.device``.
        **kwargs: the other keywords of :class:`~tensordict.store.TensorDictStore`
            (``password``, ``ssl``, ``allow_pickle``, ...).

    Returns:
        TensorDictStore or LazyStackedTensorDictStore: batch size ``td.batch_size``.

    Raises:
        ConnectionError: the server cannot be reached (the message names it).
        TypeError: a leaf cannot be stored (a non-JSON object without ``allow_pickle=True``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> st = TensorDict(obs=torch.zeros(8, 3), batch_size=[8]).to_store(port=PORT)  # doctest: +SKIP
        >>> type(st).__name__, st[2:4]["obs"].shape  # doctest: +SKIP
        ('TensorDictStore', torch.Size([2, 3]))
    """
    from tensordict.store import LazyStackedTensorDictStore, TensorDictStore

    common = {"backend": backend, "host": host, "port": port, "db": db, "unix_socket_path": unix_socket_path, "prefix": prefix, "device": device}
    if isinstance(td, LazyStackedTensorDict) and td.stack_dim == 0:
        return LazyStackedTensorDictStore.from_lazy_stack(td, **common, **kwargs)
    return TensorDictStore.from_tensordict(td, **common, **kwargs)
