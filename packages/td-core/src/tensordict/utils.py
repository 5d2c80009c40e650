"""Public helpers of the ``tensordict`` API: key utilities and tensor shape helpers."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

# upstream's public helpers of ``tensordict.utils`` (code in the modules named)
from tensordict._assert import assert_allclose_td, assert_close
from tensordict._base import is_tensor_collection
from tensordict._compat_upstream import (  # noqa: F401 - upstream private names, see the module
    _getitem_batch_size,
    _is_non_tensor,
    _is_tensorclass,
    _maybe_correct_neg_dim,
    _shape,
    _unravel_key_to_tuple,
    _zip_strict,
)
from tensordict._helpers import (
    Buffer,
    convert_ellipsis_to_idx,
    implement_for,
    is_namedtuple,
    is_namedtuple_class,
    is_seq_of_nested_key,
    logger,
    print_directory_tree,
    strtobool,
)
from tensordict._keys import NestedKey, unravel_keys
from tensordict._keys import public_unravel_key as unravel_key  # () for a tuple that is no key
from tensordict._keys import public_unravel_key_list as unravel_key_list  # TypeError for a str
from tensordict._leaves import is_leaf_nontensor, is_non_tensor, is_tensorclass
from tensordict._nontensor import LinkedList
from tensordict._options import (
    capture_non_tensor_stack,
    list_to_stack,
    set_capture_non_tensor_stack,
    set_list_to_stack,
)
from tensordict._printoptions import get_printoptions, set_printoptions
from tensordict._repr import parse_tensor_dict_string
from tensordict._stack import lazy_legacy, set_lazy_legacy
from tensordict._switch import ModeSwitch
from tensordict._utils_public import (
    KEY_SEPARATOR,
    get_json_backend,
    is_bool,
    is_floating,
    is_inexact,
    is_integer,
    json_dumps,
    set_json_backend,
    timeit,
    unravel_key_to_tuple,
)

__all__ = [
    "KEY_SEPARATOR",
    "is_bool",
    "is_floating",
    "is_inexact",
    "is_integer",
    "get_json_backend",
    "json_dumps",
    "set_json_backend",
    "timeit",
    "unravel_key_to_tuple",
    "Buffer",
    "LinkedList",
    "ModeSwitch",
    "NestedKey",
    "assert_allclose_td",
    "assert_close",
    "capture_non_tensor_stack",
    "convert_ellipsis_to_idx",
    "get_printoptions",
    "implement_for",
    "is_leaf_nontensor",
    "is_namedtuple",
    "is_namedtuple_class",
    "is_non_tensor",
    "is_seq_of_nested_key",
    "is_tensorclass",
    "lazy_legacy",
    "list_to_stack",
    "logger",
    "parse_tensor_dict_string",
    "print_directory_tree",
    "set_capture_non_tensor_stack",
    "set_lazy_legacy",
    "set_list_to_stack",
    "set_printoptions",
    "strtobool",
    "expand_as_right",
    "expand_right",
    "is_batchedtensor",
    "is_tensor_collection",
    "isin",
    "remove_duplicates",
    "unravel_key",
    "unravel_key_list",
    "unravel_keys",
]


def expand_as_right(tensor: torch.Tensor, dest: torch.Tensor | Any) -> torch.Tensor:
    """Expands ``tensor`` on the right (trailing dims) to ``dest``'s shape.

    ``tensor.shape`` must be a prefix of ``dest.shape``.

    Raises:
        RuntimeError: ``tensor`` has more dims than ``dest`` or its shape is not a prefix.

    Examples:
        >>> import torch
        >>> expand_as_right(torch.zeros(3, 4), torch.zeros(3, 4, 5, 6)).shape
        torch.Size([3, 4, 5, 6])
    """
    shape = dest.batch_size if is_tensor_collection(dest) else dest.shape  # type: ignore[union-attr]
    if tensor.ndim > len(shape):
        msg = f"expand_as_right: tensor of shape {tuple(tensor.shape)} has more dims than {tuple(shape)}."
        raise RuntimeError(msg)
    if tuple(shape[: tensor.ndim]) != tuple(tensor.shape) and any(
        a != b and a != 1 for a, b in zip(tensor.shape, shape)
    ):
        msg = f"expand_as_right: shape {tuple(tensor.shape)} is not a prefix of {tuple(shape)}."
        raise RuntimeError(msg)
    view = tensor.reshape((*tensor.shape, *([1] * (len(shape) - tensor.ndim))))
    return view.expand(shape)


def expand_right(tensor: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """Expands ``tensor`` on the right to ``shape`` (``tensor.shape`` a prefix of it).

    Examples:
        >>> import torch
        >>> expand_right(torch.zeros(3), (3, 2)).shape
        torch.Size([3, 2])
    """
    shape = torch.Size(shape)
    view = tensor.reshape((*tensor.shape, *([1] * (len(shape) - tensor.ndim))))
    return view.expand(shape)


def is_batchedtensor(tensor: torch.Tensor) -> bool:
    """``True`` if ``tensor`` is a functorch batched tensor (inside ``torch.vmap``).

    Examples:
        >>> import torch
        >>> is_batchedtensor(torch.zeros(3))
        False
    """
    if not isinstance(tensor, torch.Tensor):
        return False
    return bool(torch._C._functorch.is_batchedtensor(tensor))


def _rows(tensor: torch.Tensor, dim: int) -> torch.Tensor:
    moved = tensor.movedim(dim, 0)
    return moved.reshape(moved.shape[0], math.prod(moved.shape[1:]))


def _batch_dim(input: Any, dim: int, what: str) -> int:
    ndim = len(input.batch_size)
    if not -ndim <= dim < ndim:
        msg = f"The specified dimension '{dim}' is invalid for {what} TensorDict with batch size '{input.batch_size}'."
        raise ValueError(msg)
    return dim % ndim


def isin(input: Any, reference: Any, key: NestedKey, dim: int = 0) -> torch.Tensor:
    """Which elements of ``input[key]`` along the batch dim ``dim`` also appear in ``reference[key]``.

    An element is the slice of ``input[key]`` at one index of ``dim``; two elements
    match when all their values are equal.

    Args:
        input (TensorDictBase): the TensorDict to test.
        reference (TensorDictBase): the TensorDict to look in; as many batch dims as
            ``input``, the same sizes outside ``dim``.
        key (NestedKey): the key compared; it must hold a tensor in both.
        dim (int): the batch dim along which elements are taken (negative counts
            from the last batch dim). Defaults to 0.

    Returns:
        a bool tensor of shape ``[input.batch_size[dim]]``.

    Raises:
        KeyError: ``key`` is missing from either TensorDict or does not hold a tensor.
        ValueError: the batch sizes have different numbers of dims, or ``dim`` is not
            one of the batch dims.
        RuntimeError: the elements of ``input[key]`` and ``reference[key]`` differ in shape.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> a = TensorDict({"x": torch.tensor([1, 2, 3])}, [3])
        >>> b = TensorDict({"x": torch.tensor([3, 1])}, [2])
        >>> isin(a, b, "x")
        tensor([ True, False,  True])
    """
    x = input.get(key, None)
    if not isinstance(x, torch.Tensor):
        msg = f"Key '{key}' not found in input or not a tensor."
        raise KeyError(msg)
    r = reference.get(key, None)
    if not isinstance(r, torch.Tensor):
        msg = f"Key '{key}' not found in reference or not a tensor."
        raise KeyError(msg)
    if len(input.batch_size) != len(reference.batch_size):
        msg = "The number of dimensions in the batch size of the input and reference must be the same."
        raise ValueError(msg)
    dim = _batch_dim(input, dim, "an input")
    x_shape, r_shape = x.movedim(dim, 0).shape[1:], r.movedim(dim, 0).shape[1:]
    if x_shape != r_shape:
        msg = (
            f"isin: the elements of key {key!r} along dim {dim} have shape {tuple(x_shape)} in input "
            f"and {tuple(r_shape)} in reference; they must be equal."
        )
        raise RuntimeError(msg)
    n = x.shape[dim]
    _, inverse = torch.unique(torch.cat([_rows(x, dim), _rows(r, dim)]), dim=0, return_inverse=True)
    return torch.isin(inverse[:n], inverse[n:])


def remove_duplicates(input: Any, key: NestedKey, dim: int = 0, *, return_indices: bool = False) -> Any:
    """Keeps one element per distinct value of ``input[key]`` along the batch dim ``dim``.

    The elements kept are the first occurrence of each distinct value, ordered as
    ``torch.unique`` sorts the values; every entry of ``input`` is indexed with them.

    Args:
        input (TensorDictBase): the TensorDict to de-duplicate.
        key (NestedKey): the key whose values are compared; it must hold a tensor.
        dim (int): the batch dim along which elements are taken (negative counts
            from the last batch dim). Defaults to 0.

    Keyword Args:
        return_indices (bool): also return, for each element of ``input``, the index
            of its value in the output (``torch.unique``'s inverse indices). Defaults
            to ``False``.

    Returns:
        a TensorDict with ``batch_size[dim]`` the number of distinct values, and
        (``return_indices=True``) the int64 inverse indices, shape ``[input.batch_size[dim]]``.

    Raises:
        KeyError: ``key`` is missing or does not hold a tensor.
        ValueError: ``dim`` is not one of the batch dims.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"x": torch.tensor([5, 3, 5, 1]), "y": torch.arange(4)}, [4])
        >>> out, inverse = remove_duplicates(td, "x", return_indices=True)
        >>> out["x"], out["y"], inverse
        (tensor([1, 3, 5]), tensor([3, 1, 0]), tensor([2, 1, 2, 0]))
    """
    value = input.get(key, None)
    if value is None:
        msg = f"The key '{key}' does not exist in the TensorDict."
        raise KeyError(msg)
    if not isinstance(value, torch.Tensor):
        msg = f"The key '{key}' does not point to a tensor in the TensorDict."
        raise KeyError(msg)
    dim = _batch_dim(input, dim, "a")
    rows = _rows(value, dim)
    n = rows.shape[0]
    unique, inverse = torch.unique(rows, dim=0, return_inverse=True)
    positions = torch.arange(n, device=inverse.device)
    first = torch.full((unique.shape[0],), n, dtype=torch.long, device=inverse.device)
    first = first.scatter_reduce(0, inverse, positions, reduce="amin")
    out = input[(slice(None),) * dim + (first,)]
    if return_indices:
        return out, inverse
    return out


def __getattr__(name: str) -> Any:
    # ``NUMPY_TO_TORCH_DTYPE_DICT`` needs numpy, which ``import tensordict`` never loads
    if name == "NUMPY_TO_TORCH_DTYPE_DICT":
        import numpy as np

        table = {np.dtype(np.bool_): torch.bool}
        for dtype in (
            torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
            torch.float16, torch.float32, torch.float64, torch.complex64, torch.complex128,
        ):
            table[np.dtype(torch.empty((), dtype=dtype).numpy().dtype)] = dtype
        globals()[name] = table
        return table
    msg = f"module 'tensordict.utils' has no attribute {name!r}"
    raise AttributeError(msg)
