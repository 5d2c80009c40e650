"""Process-group plumbing shared by point-to-point and collective calls.

- rank conversions (group-relative <-> global) and argument checks;
- which device the buffers must live on for the group's backend, and whether the
  backend lets a receive buffer be larger than the message (gloo does; nccl and the
  others need exact sizes);
- message tags (``init_tag``, ``pseudo_rand``);
- waiting on ``Work`` objects and turning backend failures (a peer that died, a
  timeout) into one clear ``RuntimeError`` that names the operation, the peer and
  the process group's timeout.

Every wait goes through ``Work.wait()`` without a timeout of our own: the backend
applies the process group's timeout (``init_process_group(timeout=...)``,
``new_group(timeout=...)``), so a blocking call never outlives it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

__all__ = [
    "CommError",
    "check_initialized",
    "comm_mode",
    "default_gloo",
    "global_rank",
    "group_rank",
    "group_size",
    "pg_timeout",
    "resolve_peer",
    "tag_sequence",
    "wait_all",
]


class CommError(RuntimeError):
    """A transfer or collective that failed in the backend (dead peer, timeout, broken pipe)."""


def is_raw(group: Any) -> bool:
    """``True`` for a process group built directly (``ProcessGroupGloo(store, rank, size)``),
    which the c10d registry does not know: it is addressed by its own ranks, through
    its own ``send``/``recv`` methods."""
    if group is None or group is dist.GroupMember.WORLD:
        return False
    if not dist.is_initialized():
        return True
    try:
        dist.get_process_group_ranks(group)
    except (ValueError, RuntimeError, KeyError):
        return True
    return False


def my_rank(group: Any) -> int:
    """This process's global rank (its rank in a raw group)."""
    return group.rank() if is_raw(group) else dist.get_rank()


def p2p_isend(t: torch.Tensor, peer: int, group: Any, tag: int) -> Any:
    """``dist.isend`` (``peer`` global), or the raw group's own ``send`` (``peer`` its rank)."""
    if is_raw(group):
        return group.send([t], peer, tag)
    return dist.isend(t, peer, group=group, tag=tag)


def p2p_irecv(t: torch.Tensor, peer: int, group: Any, tag: int) -> Any:
    """``dist.irecv`` (``peer`` global), or the raw group's own ``recv`` (``peer`` its rank)."""
    if is_raw(group):
        return group.recv([t], peer, tag)
    return dist.irecv(t, peer, group=group, tag=tag)


def check_initialized(op: str, group: Any = None) -> None:
    """Raises a clear error when no default process group exists (and ``group`` is not a
    raw process group, which needs none)."""
    if group is not None and dist.is_available() and is_raw(group):
        return
    if not dist.is_available() or not dist.is_initialized():
        msg = (
            f"{op}: torch.distributed is not initialized. Call "
            "torch.distributed.init_process_group(backend, ...) first (or launch with torchrun)."
        )
        raise RuntimeError(msg)


def _is_world(group: Any) -> bool:
    return group is None or group is dist.GroupMember.WORLD


def group_size(group: Any) -> int:
    return dist.get_world_size(group)


def group_rank(group: Any) -> int:
    """This process's rank in ``group`` (-1 if it is not a member)."""
    return dist.get_rank(group)


def global_rank(group: Any, rank: int, op: str, what: str) -> int:
    """Converts a rank in ``group``'s own numbering into the global rank."""
    size = group_size(group)
    if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < size:
        msg = f"{op}: {what}={rank!r} is not a rank of the process group (group ranks are 0..{size - 1})."
        raise ValueError(msg)
    if _is_world(group):
        return rank
    return dist.get_global_rank(group, rank)


def check_peer_args(op: str, peer: int | None, group: Any, group_peer: int | None, name: str) -> None:
    """Validates how the peer of a point-to-point call is named (no process group needed).

    Raises:
        ValueError: ``group_<name>`` without ``group``; both ``<name>`` and
            ``group_<name>``; neither.
    """
    if group_peer is not None and group is None:
        msg = (
            f"{op}: group_{name} requires `group` (it is a rank in that group's numbering); pass "
            f"group=... too, or use {name}=<global rank>."
        )
        raise ValueError(msg)
    if peer is not None and group_peer is not None:
        msg = f"{op}: {name} and group_{name} are mutually exclusive ({name}={peer}, group_{name}={group_peer})."
        raise ValueError(msg)
    if peer is None and group_peer is None:
        msg = f"{op}: Exactly one of {name} (global rank) and group_{name} (rank in `group`) must be given."
        raise ValueError(msg)


def resolve_peer(op: str, peer: int | None, group: Any, group_peer: int | None, name: str) -> tuple[int, int]:
    """``(global rank, group rank)`` of the peer of a point-to-point call.

    ``peer`` is a global rank (as in ``torch.distributed.send``); ``group_peer`` is
    the same peer in ``group``'s numbering. Exactly one must be given.
    """
    check_peer_args(op, peer, group, group_peer, name)
    if group_peer is not None and is_raw(group):
        size = group.size()
        if not isinstance(group_peer, int) or isinstance(group_peer, bool) or not 0 <= group_peer < size:
            msg = f"{op}: group_{name}={group_peer!r} is not a rank of the process group (ranks 0..{size - 1})."
            raise ValueError(msg)
        return group_peer, group_peer
    if group_peer is not None:
        g = global_rank(group, group_peer, op, f"group_{name}")
        return g, group_peer
    world = dist.get_world_size()
    if not isinstance(peer, int) or isinstance(peer, bool) or not 0 <= peer < world:
        msg = f"{op}: {name}={peer!r} is not a rank of the job (global ranks are 0..{world - 1})."
        raise ValueError(msg)
    if _is_world(group):
        return peer, peer
    try:
        return peer, dist.get_group_rank(group, peer)
    except (ValueError, RuntimeError):
        msg = f"{op}: global rank {peer} is not a member of the given process group."
        raise ValueError(msg) from None


def comm_mode(group: Any) -> tuple[torch.device, bool]:
    """``(buffer device, exact sizes needed)`` for the group's backend.

    gloo moves CPU tensors and accepts a receive buffer larger than the message;
    nccl moves CUDA tensors of exactly the posted size; other backends are treated
    as CPU with exact sizes.
    """
    backend = str(group.name() if is_raw(group) else dist.get_backend(group)).lower()
    if "gloo" in backend:
        return torch.device("cpu"), False
    if "nccl" in backend:
        return torch.device("cuda", torch.cuda.current_device()), True
    return torch.device("cpu"), True


_DEFAULT_GLOO: list = [None, None]


def default_gloo() -> tuple | None:
    """``(process group, rank, world size)`` of the default process group when it runs
    gloo (CPU buffers, short messages allowed); ``None`` otherwise or before
    ``init_process_group``.

    Cached per default process group object, so the fast paths of repeated transfers pay
    for no backend look-up; a new ``init_process_group`` is seen at once.
    """
    pg = dist.GroupMember.WORLD
    if pg is None:
        return None
    cached = _DEFAULT_GLOO
    if cached[0] is not pg:
        device, exact = comm_mode(None)
        info = (pg, dist.get_rank(), dist.get_world_size()) if device.type == "cpu" and not exact else None
        cached[0], cached[1] = pg, info
    return cached[1]


def pg_timeout(group: Any) -> str:
    """The process group's timeout, as text (``"unknown"`` if torch does not expose it)."""
    pg = dist.GroupMember.WORLD if group is None else group
    for dev in ("cpu", "cuda"):
        try:
            backend = pg._get_backend(torch.device(dev))  # type: ignore[union-attr]
            timeout = backend.options._timeout
            return f"{timeout.total_seconds():g}s"
        except Exception:  # noqa: BLE001 - private API, best effort only
            continue
    return "unknown"


def tag_sequence(init_tag: int, pseudo_rand: bool) -> Any:
    """``tag(i)``: the tag of the ``i``-th message of a transfer.

    Sequential tags start at ``init_tag``; with ``pseudo_rand`` they are drawn from a
    generator seeded by ``init_tag`` (so two transfers with different seeds rarely
    collide). Both sides derive the same sequence.
    """
    if not isinstance(init_tag, int) or isinstance(init_tag, bool) or init_tag < 0:
        msg = f"init_tag must be a non-negative int, got {init_tag!r}."
        raise ValueError(msg)
    if not pseudo_rand:
        return lambda i: init_tag + i
    rng = random.Random(init_tag)
    cache: list[int] = []

    def tag(i: int) -> int:
        while len(cache) <= i:
            cache.append(rng.randrange(1 << 30))
        return cache[i]

    return tag


def comm_error(op: str, err: BaseException, peer: str, group: Any, started: float) -> CommError:
    """A clear error for a failed transfer/collective (wrapping the backend's message)."""
    elapsed = time.monotonic() - started
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    timed_out = "timed out" in text.lower() or "timeout" in text.lower()
    why = "it timed out" if timed_out else "the connection failed"
    msg = (
        f"{op}: the transfer with {peer} failed after {elapsed:.1f}s ({why}; process-group timeout "
        f"{pg_timeout(group)}). The peer process may have died or stopped, or it did not make the "
        f"matching call (same group, ranks and tags). Backend error: {text}"
    )
    return CommError(msg)


def wait_all(works: Sequence[Any], op: str, peer: str, group: Any, started: float) -> None:
    """Waits for every work; the first failure becomes a :class:`CommError`.

    It stops at the first failure (a dead peer fails every pending transfer with
    it; waiting on each would only add timeouts). The works keep their buffers
    alive, so nothing is freed under the backend's feet.
    """
    for work in works:
        try:
            work.wait()
        except Exception as err:  # noqa: BLE001 - any backend failure
            raise comm_error(op, err, peer, group, started) from err
