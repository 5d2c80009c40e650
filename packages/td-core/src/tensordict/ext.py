"""The API td-core publishes for the sibling distributions (td-memmap, td-h5, td-nn,
td-distributed, td-tensorclass) and for third-party containers built on TensorDict.

A sibling imports from td-core only public names: the top-level ``tensordict`` names,
:mod:`tensordict.utils`, and this module (``tests/test_contracts.py`` at the repo root
fails on an import of a ``tensordict._x`` module or an ``_name``). Every name below is
part of that contract: changing one is a change to every distribution that uses it.

Containers and keys
    :class:`TensorDictBase`, :class:`TensorDict`, :class:`NonTensorData`,
    :class:`NonTensorStack`, ``LazyStackedTensorDict`` (loaded on first use),
    :data:`NestedKey`, :func:`unravel_key`, :func:`is_tensor_collection`,
    :func:`stack`, :func:`cat`, :func:`from_consolidated`.
``NO_DEFAULT``
    The sentinel ``get(key, default=NO_DEFAULT)`` uses for "no default given".
``as_key_tuple(key)``
    A nested key as a flat tuple of str (``"a"`` -> ``("a",)``), without validation.
``KeysView``
    The ``keys()`` view class over a container's storage protocol (``_items_raw``).
``check_names(names, batch_size)``
    Validates dim names as every TensorDict does (length, str or ``None``, unique);
    returns the list, or ``None`` when no dim is named.
``to_device(device)`` / ``to_batch_size(batch_size)``
    The normalisation TensorDict applies to a ``device`` / ``batch_size`` argument.
``same_value(a, b)``
    Equality of two non-tensor payloads as NonTensorStack compares them.
``set_write_hook(stack, hook)``
    ``hook(stack)`` runs after each in-place element write into a ``NonTensorStack``
    (td-memmap persists memory-mapped stacks with it).
``batch_mismatch_error(key, shape, batch_size)``, ``locked_error(what)``, ``missing_key_error(key, keys)``
    The errors TensorDict raises, so a container raises the same type and wording.
``leaf_repr(value)`` / ``fields_repr(td)``
    The pieces of TensorDict's repr.
``trampoline(node, *args)``
    Runs a tree walk written as a generator per node (a nested node is yielded
    as its arguments and its result sent back) with an explicit stack, so nesting of
    any depth works under the default recursion limit (td-memmap's save and load).
``pytree_registered_classes(lazy=False)``
    The TensorDict classes registered as pytree nodes (dense ones, or the lazy stacks).
``import_sibling(sub, attr)``
    Imports ``tensordict.<sub>`` and returns ``attr`` of it; a missing distribution
    raises ``ImportError`` naming what to install.
``register_tensor_collection(cls)``
    Makes :func:`is_tensor_collection` accept instances of ``cls``.
``TD_HANDLED_FUNCTIONS``
    The ``torch`` function -> implementation table behind ``__torch_function__``.
``SIBLING_METHODS``
    The seam table: ``(subpackage, method name, is_classmethod)`` for every
    TensorDictBase method a sibling serves from ``tensordict.<sub>._td_methods``.
``INPLACE_METHODS``
    The names of TensorDictBase's public in-place methods that rewrite tensor leaves
    (leaf-wise math such as ``add_``, ``clamp_``, ``zero_``, and ``apply_``). A
    container whose leaves live elsewhere (td-h5) wraps these to write back.
Consolidated layout (td-distributed sends TensorDicts in this layout)
    ``SKELETON_TENSOR``, ``SKELETON_TD``, ``SKELETON_OTHER``: the entry kinds of a
    skeleton ``(batch_size, device, names, [(key, kind, payload), ...])``;
    ``skeleton(td, leaves)``: the skeleton of ``td``, its tensor leaves appended to
    ``leaves``; ``skeleton_matches(td, skeleton, leaves)``; ``build_from_skeleton(
    skeleton, views, device=None, lock=False)``: ``(td, skeleton)`` whose leaves are
    ``views``; ``CONSOLIDATE_DTYPES`` (dtype name -> ``torch.dtype``); ``layout``,
    ``run_views``, ``leaf_specs``, ``runs_from_specs``, ``copy_leaves``,
    ``ConsolidatedState``, ``unsupported_leaf_error``: the storage planning
    ``consolidate`` itself uses.
Format constants
    ``CONSOLIDATED_MAGIC``, ``CONSOLIDATED_VERSION``, ``CONSOLIDATED_HEADER``,
    ``CONSOLIDATED_ALIGN``, ``CONSOLIDATED_FORMAT``, ``MEMMAP_META``,
    ``MEMMAP_FORMAT``, ``MEMMAP_MEMBER`` (see ``tensordict._formats``).
Memmap type registry
    ``register_memmap_type(name, save_fn, load_fn, cls=None)``,
    ``registered_types()``, ``lookup_memmap_object(obj)``, ``lookup_memmap_name(name,
    where)``, ``MemmapType``: the types other than TensorDicts that a td-memmap store
    may hold (tensorclasses register here; loading never imports a module).

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.ext import build_from_skeleton, skeleton
    >>> td = TensorDict({"a": torch.zeros(2), "b": {"c": torch.ones(2, 3)}}, [2])
    >>> leaves = []
    >>> node = skeleton(td, leaves)
    >>> [tuple(t.shape) for t in leaves]
    [(2,), (2, 3)]
    >>> copy, _ = build_from_skeleton(node, [t + 1 for t in leaves])
    >>> copy["b", "c"].sum().item()
    12.0
    >>> "add_" in INPLACE_METHODS and "apply_" in INPLACE_METHODS
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tensordict import _classes
from tensordict import _consolidate as _cons
from tensordict._apply import ApplyMixin
from tensordict._base import TensorDictBase
from tensordict._classes import _register_tensor_collection as register_tensor_collection
from tensordict._classes import is_tensor_collection
from tensordict._consolidate import _State as ConsolidatedState
from tensordict._consolidate import from_consolidated
from tensordict._deep import trampoline
from tensordict._device import _to_device as to_device
from tensordict._errors import batch_mismatch_error, locked_error, missing_key_error
from tensordict._formats import (
    CONSOLIDATED_ALIGN,
    CONSOLIDATED_FORMAT,
    CONSOLIDATED_HEADER,
    CONSOLIDATED_MAGIC,
    CONSOLIDATED_VERSION,
    MEMMAP_FORMAT,
    MEMMAP_MEMBER,
    MEMMAP_META,
)
from tensordict._keys import NO_DEFAULT, NestedKey, unravel_key
from tensordict._keys import _as_tuple as as_key_tuple
from tensordict._keys import _KeysView as KeysView
from tensordict._memmap_types import MemmapType, register_memmap_type, registered_types
from tensordict._memmap_types import lookup_name as lookup_memmap_name
from tensordict._memmap_types import lookup_object as lookup_memmap_object
from tensordict._names import check_names
from tensordict._nontensor import NonTensorData, NonTensorStack, set_write_hook
from tensordict._nontensor import _same as same_value
from tensordict._ops import MathMixin
from tensordict._pytree import registered_classes as pytree_registered_classes
from tensordict._repr import fields_repr, leaf_repr
from tensordict._seams import _SIBLING_METHODS, import_sibling
from tensordict._stack import cat, stack
from tensordict._td import TensorDict
from tensordict._td import _to_size as to_batch_size
from tensordict._torch_fn import TD_HANDLED_FUNCTIONS

if TYPE_CHECKING:
    import torch

    from tensordict._lazy import LazyStackedTensorDict

__all__ = [
    "CONSOLIDATED_ALIGN",
    "CONSOLIDATED_FORMAT",
    "CONSOLIDATED_HEADER",
    "CONSOLIDATED_MAGIC",
    "CONSOLIDATED_VERSION",
    "CONSOLIDATE_DTYPES",
    "ConsolidatedState",
    "INPLACE_METHODS",
    "KeysView",
    "LazyStackedTensorDict",
    "MEMMAP_FORMAT",
    "MEMMAP_MEMBER",
    "MEMMAP_META",
    "MemmapType",
    "NO_DEFAULT",
    "NestedKey",
    "NonTensorData",
    "NonTensorStack",
    "SIBLING_METHODS",
    "SKELETON_OTHER",
    "SKELETON_TD",
    "SKELETON_TENSOR",
    "TD_HANDLED_FUNCTIONS",
    "TensorDict",
    "TensorDictBase",
    "as_key_tuple",
    "batch_mismatch_error",
    "build_from_skeleton",
    "cat",
    "check_names",
    "copy_leaves",
    "fields_repr",
    "from_consolidated",
    "import_sibling",
    "is_tensor_collection",
    "layout",
    "leaf_repr",
    "leaf_specs",
    "locked_error",
    "lookup_memmap_name",
    "lookup_memmap_object",
    "missing_key_error",
    "pytree_registered_classes",
    "register_memmap_type",
    "register_tensor_collection",
    "registered_types",
    "run_views",
    "runs_from_specs",
    "same_value",
    "set_write_hook",
    "skeleton",
    "skeleton_matches",
    "stack",
    "to_batch_size",
    "to_device",
    "trampoline",
    "unravel_key",
    "unsupported_leaf_error",
]


def _inplace_methods() -> frozenset[str]:
    names: set[str] = set()
    for mixin in (MathMixin, ApplyMixin):
        for klass in mixin.__mro__:
            if klass is object:
                continue
            names.update(n for n in vars(klass) if n.endswith("_") and not n.startswith("_"))
    return frozenset(n for n in names if callable(getattr(TensorDictBase, n, None)))


#: ``(subpackage, method, is_classmethod)`` for every method served by a sibling
SIBLING_METHODS: tuple[tuple[str, str, bool], ...] = tuple(_SIBLING_METHODS)

#: public in-place methods of TensorDictBase that rewrite tensor leaves
INPLACE_METHODS: frozenset[str] = _inplace_methods()

# ---------------------------------------------------------------------- consolidated layout
#: skeleton entry kinds: a tensor leaf (payload: its index in ``leaves``), a nested
#: TensorDict (payload: its skeleton), anything else (payload: the object)
SKELETON_TENSOR, SKELETON_TD, SKELETON_OTHER = _cons._TENSOR, _cons._TD, _cons._OTHER
#: dtype name -> dtype, for the dtypes a consolidated storage may hold
CONSOLIDATE_DTYPES: dict[str, torch.dtype] = _cons._DTYPES
layout = _cons._layout
run_views = _cons._views
leaf_specs = _cons._leaf_specs
runs_from_specs = _cons._runs_from_specs
copy_leaves = _cons._copy
unsupported_leaf_error = _cons._bad_leaf_error


def skeleton(td: TensorDictBase, leaves: list) -> tuple:
    """The skeleton of ``td``: ``(batch_size, device, names, entries)``.

    Each entry is ``(key, kind, payload)``: ``SKELETON_TENSOR`` with the leaf's index
    in ``leaves`` (the leaf is appended to ``leaves``, depth first in key order),
    ``SKELETON_TD`` with the nested TensorDict's skeleton, or ``SKELETON_OTHER`` with
    the non-tensor value.

    Args:
        td (TensorDictBase): the TensorDict to describe.
        leaves (list): receives the tensor leaves.

    Returns:
        the skeleton tuple (holds no tensor).
    """
    return _cons._collect(td, leaves, _classes.TensorDictBase, _classes.TensorDict)[0]


def skeleton_matches(td: TensorDictBase, node: tuple, leaves: list) -> bool:
    """``True`` when ``td`` still has the keys, nesting and leaf objects ``node`` describes.

    Args:
        td (TensorDictBase): the TensorDict to compare.
        node (tuple): a skeleton from :func:`skeleton`.
        leaves (list): the leaves collected with ``node``.
    """
    return _cons._matches(td, node, leaves, _classes.TensorDictBase)


def build_from_skeleton(node: tuple, views: list, device: Any = None, *, lock: bool = False) -> tuple:
    """A TensorDict shaped like ``node`` whose tensor leaves are ``views``.

    Args:
        node (tuple): a skeleton (see :func:`skeleton`).
        views (list of torch.Tensor): one tensor per ``SKELETON_TENSOR`` entry, by index.
        device (torch.device, optional): moves the leaves there (and sets the device).
        lock (bool, optional): locks the result. Defaults to ``False``.

    Returns:
        ``(td, skeleton)``: the TensorDict and the skeleton of the result.
    """
    return _cons._build(node, views, device, _classes.TensorDict, device is not None, lock)


def __getattr__(name: str) -> Any:
    if name == "LazyStackedTensorDict":
        return _classes.LazyStackedTensorDict
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
