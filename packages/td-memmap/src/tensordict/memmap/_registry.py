"""Types other than TensorDict and LazyStackedTensorDict that a store may hold.

The registry itself lives in td-core (:mod:`tensordict.ext`), so a distribution can
register its types without importing td-memmap (tensorclasses register when they are
defined). Loading never imports a module or resolves a class named in metadata: a
stored ``"registered": {"name": ...}`` is looked up in this registry and nowhere else.
See :func:`tensordict.ext.register_memmap_type` for the ``save_fn``/``load_fn`` protocol.
"""

from __future__ import annotations

from tensordict.ext import MemmapType, register_memmap_type, registered_types
from tensordict.ext import lookup_memmap_name as lookup_name
from tensordict.ext import lookup_memmap_object as lookup_object

__all__ = ["MemmapType", "register_memmap_type", "registered_types", "lookup_object", "lookup_name"]
