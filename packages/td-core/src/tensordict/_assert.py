"""Comparison assertions for TensorDicts: ``assert_allclose_td`` and ``assert_close``.

Public through ``tensordict``, ``tensordict.utils`` and ``tensordict.testing``.
"""

from __future__ import annotations

from typing import Any

import torch

from tensordict import _classes
from tensordict._base import is_tensor_collection
from tensordict._nontensor import is_non_tensor

__all__ = ["assert_allclose_td", "assert_close"]


def _equal(a: Any, b: Any) -> bool:
    """``a == b`` as one bool (non-tensor data compares to a bool tensor of its batch shape)."""
    eq = a == b
    return bool(eq.all()) if isinstance(eq, torch.Tensor) else bool(eq)


def _leaf_values(td: Any) -> dict:
    return {key: td.get(key) for key in td.keys()}


def assert_allclose_td(
    actual: Any,
    expected: Any,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = True,
    intersection: bool = False,
    msg: str = "",
) -> bool:
    """Asserts that two TensorDicts hold the same keys and close values, leaf by leaf.

    Tensors are compared with ``torch.testing.assert_close`` (its default tolerances
    for the dtype unless ``rtol``/``atol`` are given); nested TensorDicts recursively;
    non-tensor data with ``==``.

    Args:
        actual (TensorDictBase): the TensorDict to check.
        expected (TensorDictBase): the reference.
        rtol (float, optional): relative tolerance.
        atol (float, optional): absolute tolerance.
        equal_nan (bool): NaNs compare equal. Defaults to ``True``.
        intersection (bool): compare only the keys both hold (at every level) instead
            of requiring equal key sets. Defaults to ``False``.
        msg (str): text appended to the failure message.

    Returns:
        ``True`` when every leaf matches.

    Raises:
        TypeError: an input is not a tensor collection.
        KeyError: the key sets differ (the message lists both).
        AssertionError: a leaf differs (the message names the key and the RMS error).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> a = TensorDict({"x": torch.ones(3), "n": {"y": torch.zeros(3)}}, [3])
        >>> assert_allclose_td(a, a.clone() + 1e-9)
        True
    """
    if not is_tensor_collection(actual) or not is_tensor_collection(expected):
        msg_ = (
            "assert_allclose inputs must be of TensorDict type, got "
            f"{type(actual).__name__} and {type(expected).__name__}."
        )
        raise TypeError(msg_)
    if is_non_tensor(actual) or is_non_tensor(expected):
        if not _equal(actual, expected):
            raise AssertionError(f"non-tensor values differ: {actual!r} != {expected!r}. {msg}".rstrip())
        return True
    lazy_cls = _classes.LazyStackedTensorDict
    if (
        isinstance(actual, lazy_cls)
        and isinstance(expected, lazy_cls)
        and actual.stack_dim == expected.stack_dim
        and len(actual.tensordicts) == len(expected.tensordicts)
    ):
        # stacked TensorDict by stacked TensorDict: heterogeneous stacks have no dense form
        for a, b in zip(actual.tensordicts, expected.tensordicts):
            assert_allclose_td(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan, intersection=intersection, msg=msg)
        return True
    left, right = _leaf_values(actual), _leaf_values(expected)
    if intersection:
        shared = set(left).intersection(right)
        left = {k: v for k, v in left.items() if k in shared}
        right = {k: v for k, v in right.items() if k in shared}
    elif set(left) != set(right):
        keys_msg = (
            f"actual and expected tensordict keys mismatch, got {sorted(left, key=str)} "
            f"and {sorted(right, key=str)} (only in actual: {sorted(set(left) - set(right), key=str)}, "
            f"only in expected: {sorted(set(right) - set(left), key=str)})."
        )
        raise KeyError(keys_msg)
    for key in sorted(left, key=str):
        a, b = left[key], right[key]
        if is_tensor_collection(a) or is_tensor_collection(b):
            assert_allclose_td(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan, intersection=intersection, msg=msg)
            continue
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            if not _equal(a, b):
                raise AssertionError(f"key {key!r} does not match: {a!r} != {b!r}. {msg}".rstrip())
            continue
        if a.shape == b.shape and a.numel():
            rms = (a.double() - b.double()).pow(2).mean().sqrt().item()
            detail = f"key {key!r} does not match, got mse = {rms:4.4f}"
        else:
            detail = f"key {key!r} does not match (shapes {tuple(a.shape)} and {tuple(b.shape)})"
        full = f"{detail}\t{msg}" if msg else detail
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan, msg=full)
    return True


def assert_close(
    actual: Any,
    expected: Any,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = True,
    msg: str = "",
) -> bool:
    """``torch.testing.assert_close`` that also accepts TensorDicts (then :func:`assert_allclose_td`).

    Args:
        actual, expected: tensors or tensor collections.
        rtol, atol (float, optional): tolerances.
        equal_nan (bool): NaNs compare equal. Defaults to ``True``.
        msg (str): text appended to the failure message.

    Returns:
        ``True`` when the inputs match.

    Raises:
        AssertionError: the values differ; KeyError: TensorDict key sets differ.

    Examples:
        >>> import torch
        >>> assert_close(torch.ones(2), torch.ones(2))
        True
    """
    if is_tensor_collection(actual) or is_tensor_collection(expected):
        return assert_allclose_td(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, msg=msg)
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, msg=msg or None)
    return True
