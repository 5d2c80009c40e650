"""The container classes, bound once: the ground floor of td-core's module graph.

The concern mixins (``_apply.py``, ``_shape.py``, ``_ops.py``, ...) are base classes of
:class:`~tensordict.TensorDictBase`, so they cannot import ``_base.py``, ``_td.py`` or
``_lazy.py`` at the top of their file. They import this module instead and read the
classes from it when a method runs (``_classes.TensorDict(...)``). The modules that
define the classes fill them in once, at the end of their own import:

* ``_base.py``: :class:`TensorDictBase` (and the non-tensor leaf classes, which
  ``_base.py`` imports);
* ``_td.py``: :class:`TensorDict`;
* ``_lazy.py``: :class:`LazyStackedTensorDict`.

``import tensordict`` imports ``_base.py`` and ``_td.py``, so those attributes are set
before user code runs. The lazy-stack modules are not imported by ``import tensordict``
(import time): until they are, ``LazyStackedTensorDict`` here is a stand-in class that no
object is an instance of, and calling it (or reading an attribute such as
``_from_list``) imports ``tensordict._lazy``, which binds the real class here. This
module has no import statement for a td-core module; ``tests/test_architecture.py``
pins that, and that td-core's top-level imports form a DAG.

No module ``__getattr__`` here: it would stop CPython from specialising the attribute
reads (``_classes.TensorDict``) that the hot paths make.

:func:`is_tensor_collection` lives here too: it only asks which class a value has.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tensordict._base import TensorDictBase
    from tensordict._lazy import LazyStackedTensorDict
    from tensordict._legacy_views import _CustomOpTensorDict as CustomOpTensorDict
    from tensordict._nontensor import NonTensorData, NonTensorStack
    from tensordict._td import TensorDict
else:
    TensorDictBase = None  # filled by _base.py
    NonTensorData = None  # filled by _base.py
    NonTensorStack = None  # filled by _base.py
    TensorDict = None  # filled by _td.py
    CustomOpTensorDict = None  # filled by _legacy_views.py (the set_lazy_legacy(True) shape views)

    class _LoadLazyStack(type):
        """Metaclass of the stand-in: calls and attribute reads load ``tensordict._lazy``."""

        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            return _load_lazy_stack()(*args, **kwargs)

        def __getattr__(cls, name: str) -> Any:
            return getattr(_load_lazy_stack(), name)

    class LazyStackedTensorDict(metaclass=_LoadLazyStack):  # replaced by _lazy.py
        """Stand-in until ``tensordict._lazy`` is imported (nothing is an instance of it)."""

__all__ = ["is_tensor_collection"]

# the classes ``is_tensor_collection`` accepts (filled by _base.py, extended by siblings
# through ``tensordict.ext.register_tensor_collection``)
_COLLECTIONS: tuple = ()
_EXTRA_COLLECTIONS: list[type] = []


def _register_tensor_collection(cls: type) -> None:
    """Lets a sibling (e.g. tensorclasses) declare its type a tensor collection."""
    global _COLLECTIONS
    if cls not in _EXTRA_COLLECTIONS:
        _EXTRA_COLLECTIONS.append(cls)
        _COLLECTIONS = (*_COLLECTIONS, cls)


def _bind(**classes: Any) -> None:
    """Called once by ``_base.py``, ``_td.py`` and ``_lazy.py`` with the classes they define."""
    global _COLLECTIONS
    for name, cls in classes.items():
        if name not in (
            "TensorDictBase", "NonTensorData", "NonTensorStack", "TensorDict", "LazyStackedTensorDict",
            "CustomOpTensorDict",
        ):
            msg = f"_classes._bind: unknown class name {name!r}."
            raise ValueError(msg)
        globals()[name] = cls
        if name in ("TensorDictBase", "NonTensorData", "NonTensorStack") and cls not in _COLLECTIONS:
            _COLLECTIONS = (cls, *_COLLECTIONS)


def _load_lazy_stack() -> Any:
    """Imports ``tensordict._lazy`` (which binds the real class here) and returns the class."""
    importlib.import_module("tensordict._lazy")
    return globals()["LazyStackedTensorDict"]


def is_tensor_collection(datatype: Any) -> bool:
    """``True`` if ``datatype`` (an instance or a type) is a tensor collection.

    Tensor collections are TensorDicts of every kind, tensorclasses and non-tensor
    leaves.

    Args:
        datatype (object or type): the value (or its class) to test.

    Returns:
        ``True`` for a tensor collection, ``False`` otherwise.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, is_tensor_collection
        >>> is_tensor_collection(TensorDict({}, []))
        True
        >>> is_tensor_collection(torch.zeros(3))
        False
    """
    cls = datatype if isinstance(datatype, type) else type(datatype)
    if issubclass(cls, _COLLECTIONS):
        return True
    return bool(getattr(cls, "_is_tensorclass", False))
