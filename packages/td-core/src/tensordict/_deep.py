"""Tree walks that do not recurse in Python, so nesting depth is bounded by memory only.

A TensorDict can nest thousands of levels deep (``td["a", "b", ..., "z"]``); a walk that
calls itself once per level would stop at the interpreter's recursion limit (1,000
frames by default). The engines that build a result node from its children's results
(``apply``, the element-wise math, indexing, ``stack``/``cat``, ``repr``, ``from_dict``,
...) are written as *node generators*: the code for one node, which ``yield``\\ s the
arguments of each nested node it needs and is sent back that node's result.
:func:`trampoline` runs them with an explicit stack of suspended generators.

The hottest engines (``apply(fn)``, one TensorDict, no keyword) use a hand-written loop
with the same explicit stack instead, which costs nothing per flat TensorDict.

Light builders whose result for a node depends only on the results of its nested
nodes (``filter_non_tensor_data``, ``densify``, ``empty(recurse=True)``) are written as
one *level function* run by :func:`levels`: by recursion while the tree is shallow (a
generator per node would cost them half their time), bottom up past the limit.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

__all__ = ["levels", "trampoline"]


def trampoline(node: Callable[..., Generator[tuple, Any, Any]], *args: Any) -> Any:
    """Runs the node generator ``node(*args)`` and every node generator it asks for.

    ``node(*args)`` yields a tuple ``sub_args`` when it needs the result of a nested node;
    :func:`trampoline` then runs ``node(*sub_args)`` (and, in turn, what that one asks for)
    to completion and sends its return value back into the suspended generator. The
    suspended generators wait on a list, not on the Python call stack.

    Args:
        node: a generator function (the code for one node of the tree).
        *args: the arguments of the root node.

    Returns:
        the root generator's return value.

    Raises:
        whatever a node raises: an exception raised in a nested node is thrown into the
        suspended parent at its ``yield`` (as it would reach the caller of a recursive
        call), so a parent can catch it and add context.

    Examples:
        >>> def depth(d):
        ...     return (1 + (yield (d["next"],))) if "next" in d else 1
        >>> chain = {}
        >>> for _ in range(5000):
        ...     chain = {"next": chain}
        >>> trampoline(depth, chain)
        5001
    """
    gen = node(*args)
    stack: list = []
    res = None
    exc: BaseException | None = None
    while True:
        try:
            sub = gen.send(res) if exc is None else gen.throw(exc)
        except StopIteration as done:
            if not stack:
                return done.value
            res = done.value
            exc = None
            gen = stack.pop()
            continue
        except BaseException as err:  # raised in a nested node: it reaches its parent
            if not stack:
                raise
            exc = err
            gen = stack.pop()
            continue
        stack.append(gen)
        gen = node(*sub)
        res = None
        exc = None


def levels(root: Any, level: Callable[[Any, Callable], Any], children: Callable[[Any], Any]) -> Any:
    """Runs ``level(root, sub)``, where ``sub(child, sub)`` gives a nested node's result.

    ``level`` builds one node's result and calls ``sub(child, sub)`` for each nested node
    it needs; ``children(node)`` lists those nested nodes (the same ones, in any order).
    While the tree is shallow, ``sub`` is ``level`` itself (plain recursion, one call per
    node: the fastest for a few levels). Past the recursion limit the walk starts over:
    the nodes are listed with an explicit stack and ``level`` runs on the deepest first,
    ``sub`` then returning the results already made. ``level`` must therefore have no
    side effects.

    Args:
        root: the root node.
        level: the code for one node, ``level(node, sub) -> result``.
        children: ``children(node) -> iterable of the nested nodes level asks sub for``.

    Returns:
        ``level(root, level)``.

    Examples:
        >>> def size(d, sub):
        ...     return 1 + sum(sub(v, sub) for v in d.values())
        >>> chain = {}
        >>> for _ in range(5000):
        ...     chain = {"next": chain}
        >>> levels(chain, size, lambda d: d.values())
        5001
    """
    try:
        return level(root, level)
    except RecursionError:
        pass
    order = [root]
    i = 0
    while i < len(order):
        order.extend(children(order[i]))
        i += 1
    done: dict = {}  # id -> result (``order`` keeps every node alive, so ids stay unique)

    def made(node: Any, _: Any) -> Any:
        return done[id(node)]

    for node in reversed(order):
        if id(node) not in done:
            done[id(node)] = level(node, made)
    return done[id(root)]
