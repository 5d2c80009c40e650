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
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

__all__ = ["trampoline"]


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
