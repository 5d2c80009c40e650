"""``apply_`` and ``named_apply`` over trees of dense TensorDicts, as one flat loop.

The general ``apply`` engine (``_apply._walk_node``) handles every option and every
kind of node, one node generator per nested TensorDict. The two calls below are common
enough to deserve a shorter road when the tree (``self`` and each of ``others``) holds
only :class:`~tensordict.TensorDict` nodes and plain ``torch.Tensor`` leaves:

* ``apply_(fn, *others)`` (``apply(inplace=True)``): each result is written into its
  leaf;
* ``apply(fn, *others, ...)`` out of place when it does not take the simplest road
  (``named_apply``, ``batch_size=``, ``device=``): the results are assembled into new
  TensorDicts, node by node, children before parents.

The tree is first listed without recursion (:func:`_dense_tree`), so depth is bounded by
memory only, and without running user code: any other kind of node or leaf, or a key
missing from one of ``others``, makes the lister give up and the caller falls back to
the general engine, which then runs ``fn`` for the first time. ``fn`` is then called
once per leaf in the order the general engine uses (depth first, in key order), with
the same checks on each result and the same errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tensordict import _classes
from tensordict._keys import NO_DEFAULT

__all__ = ["apply_inplace_dense", "apply_dense", "NOT_DENSE", "check_leaf_result"]

_Tensor = torch.Tensor

#: returned when the tree is not a dense one: the general engine takes the call
NOT_DENSE = object()


def _bad_leaf(key: Any, shape: Any, batch_size: Any) -> RuntimeError:
    msg = (
        f"apply: the result for key {key!r} has shape {tuple(shape)}, whose leading dims do "
        f"not match the batch_size {tuple(batch_size)} of the result. Return values whose "
        "shape starts with the batch size, or pass `batch_size=` with the new batch size."
    )
    return RuntimeError(msg)


def check_leaf_result(node: Any, full: Any, res: Any, bs: torch.Size, device: Any, convert: bool) -> Any:
    """The checks the general ``apply`` runs on a non-``None`` result of ``fn``.

    A tensor or TensorDict must start with ``bs`` (an ``UnbatchedTensor`` is rebatched
    instead) and is moved to ``device`` (unless ``NO_DEFAULT``/``None``); with
    ``convert``, anything else goes through ``node._convert_value``.

    Raises:
        RuntimeError: the result's leading dims are not ``bs`` (the key is named).
    """
    if isinstance(res, (_Tensor, _classes.TensorDictBase)):
        n = len(bs)
        if n and res.shape[:n] != bs:
            if getattr(res.__class__, "_pass_through", False):  # UnbatchedTensor
                res = res._rebatch(bs)  # type: ignore[union-attr]
            else:
                raise _bad_leaf(full, res.shape, bs)
        if device is not NO_DEFAULT and device is not None and res.device != device:
            res = res.to(device)
    elif convert:
        res = node._convert_value(full, res)
    return res


def _dense_tree(td: Any, others: tuple) -> tuple | None:
    """Lists a tree of dense TensorDicts, or returns ``None`` if it is not one.

    Returns:
        ``(nodes, leaves)``: ``nodes`` in depth-first order, each
        ``[td, parent_index, key, entries]`` where ``entries`` holds, in key order,
        ``(key, True, leaf_position)`` for a leaf and ``(key, False, child_index)`` for a
        nested node; ``leaves`` holds, in the order of the calls of ``fn`` (depth first,
        in key order), ``(node_index, key, column)`` with ``column`` the leaf of ``td``
        followed by the leaves of ``others`` under the same key.
    """
    td_cls = _classes.TensorDict
    if td.__class__ is not td_cls:
        return None
    for other in others:
        if other.__class__ is not td_cls:
            return None
    nodes: list = [[td, -1, None, []]]
    leaves: list = []
    # (items iterator, node index, the others' nodes at that position) of each open node
    stack: list = [(iter(td._tensordict.items()), 0, [o._tensordict for o in others])]
    while stack:
        items, index, peers = stack[-1]
        entries = nodes[index][3]
        for key, value in items:
            cls = value.__class__
            if cls is _Tensor:
                column = [value]
                for store in peers:
                    other_value = store.get(key)
                    if other_value.__class__ is not _Tensor:
                        return None  # missing, nested or another kind: the general engine reports it
                    column.append(other_value)
                entries.append((key, True, len(leaves)))
                leaves.append((index, key, column))
            elif cls is td_cls:
                subs = []
                for store in peers:
                    sub = store.get(key)
                    if sub.__class__ is not td_cls:
                        return None
                    subs.append(sub._tensordict)
                child = len(nodes)
                nodes.append([value, index, key, []])
                entries.append((key, False, child))
                stack.append((iter(value._tensordict.items()), child, subs))
                break
            else:
                return None
        else:
            stack.pop()
    return nodes, leaves


def _full_key(nodes: list, index: int, key: str, prefix: tuple) -> Any:
    """The nested key of leaf ``key`` of node ``index`` (``prefix`` first), as ``apply``
    names it: a str at the top level without prefix, a tuple otherwise."""
    path = [key]
    while index > 0:
        node = nodes[index]
        path.append(node[2])
        index = node[1]
    path.reverse()
    if not prefix and len(path) == 1:
        return key
    return (*prefix, *path)


def apply_inplace_dense(td: Any, fn: Callable, others: tuple, filter_empty: bool | None) -> Any:
    """``td.apply(fn, *others, inplace=True)`` on a dense tree; :data:`NOT_DENSE` otherwise.

    Returns:
        ``td``, or ``None`` when ``filter_empty`` is true and ``fn`` returned ``None`` for
        every leaf held directly by ``td`` (as the general engine does).
    """
    tree = _dense_tree(td, others)
    if tree is None:
        return NOT_DENSE
    nodes, leaves = tree
    top_wrote = False
    for node_index, key, column in leaves:
        leaf = column[0]
        res = fn(*column)
        if res is None:
            continue
        if node_index == 0:
            top_wrote = True
        if res is leaf:
            continue
        if res.__class__ is _Tensor and res.shape == leaf.shape:
            leaf.copy_(res)
            continue
        owner = nodes[node_index][0]
        full = _full_key(nodes, node_index, key, ())
        res = check_leaf_result(owner, full, res, owner._batch_size, NO_DEFAULT, False)
        owner._write_inplace(full, leaf, res)
    if filter_empty and not top_wrote:
        return None
    return td


def apply_dense(
    td: Any,
    fn: Callable,
    others: tuple,
    named: bool,
    nested_keys: bool,
    prefix: tuple,
    filter_empty: bool | None,
    new_bs: torch.Size | None,
    device: Any,
) -> Any:
    """``td.apply(fn, *others, ...)`` out of place on a dense tree (``named`` as
    :meth:`named_apply`; ``new_bs``/``device`` as ``batch_size=``/``device=``);
    :data:`NOT_DENSE` otherwise.

    Returns:
        the new TensorDict, or ``None`` when the filtered result is empty (the caller
        applies ``filter_empty`` at the top, as for the general engine).
    """
    tree = _dense_tree(td, others)
    if tree is None:
        return NOT_DENSE
    nodes, leaves = tree
    # per node: the nested key passed to fn, and the batch size of its result (None: its own)
    paths: list = [prefix]
    targets: list = [new_bs]
    for node in nodes[1:]:
        parent = node[1]
        paths.append((*paths[parent], node[2]))
        above = targets[parent]
        if above is not None:
            above = torch.Size((*above, *node[0]._batch_size[len(nodes[parent][0]._batch_size) :]))
        targets.append(above)
    convert = new_bs is None
    results: list = []
    for node_index, key, column in leaves:
        if named:
            path = paths[node_index]
            full = (*path, key) if path else key
            res = fn(full if nested_keys else key, *column)
        else:
            res = fn(*column)
        if res is not None:
            owner = nodes[node_index][0]
            bs = targets[node_index]
            if bs is None:
                bs = owner._batch_size
            if not (
                res.__class__ is _Tensor
                and (not bs or res.shape[: len(bs)] == bs)
                and (device is NO_DEFAULT or device is None)
            ):
                path = paths[node_index]
                res = check_leaf_result(owner, (*path, key) if path else key, res, bs, device, convert)
        results.append(res)
    # children before parents: a node's sub-results are ready when it is assembled
    built: list = [None] * len(nodes)
    for node_index in range(len(nodes) - 1, -1, -1):
        owner, _, _, entries = nodes[node_index]
        source: dict = {}
        for key, is_leaf, position in entries:
            sub = results[position] if is_leaf else built[position]
            if sub is not None:
                source[key] = sub
            if not is_leaf:
                built[position] = None  # held by its parent from now on
        if not source and filter_empty is not False and (filter_empty or not owner.is_empty()):
            built[node_index] = None
        elif device is NO_DEFAULT and new_bs is None:
            built[node_index] = owner._new_like(source)
        else:
            target = targets[node_index]
            built[node_index] = owner._new_like(
                source, batch_size=target, device=owner.device if device is NO_DEFAULT else device
            )
    return built[0]
