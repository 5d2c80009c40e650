"""Lazy seams to the sibling distributions.

td-core never imports a sibling at import time. Methods that need one
(``td.memmap``, ``td.to_h5``, ``td.send``, ``td.map``, ...) import the sibling's
``tensordict.<sub>._td_methods`` module when called and forward to the function of
the same name, passing the TensorDict (or, for class methods, the class) first.
A missing sibling raises ``ImportError`` naming the distribution to install.

Contract for a sibling: ``tensordict/<sub>/_td_methods.py`` defines one function per
name listed in ``_SIBLING_METHODS`` below (published as
``tensordict.ext.SIBLING_METHODS``). ``tools/gen_ops.py`` writes one method per entry,
with the sibling function's docstring, into ``_seams_generated.py``.
"""

from __future__ import annotations

import importlib
from typing import Any

from tensordict._host import TensorDictHost

__all__ = ["SiblingMixin", "import_sibling", "install_hint", "SIBLINGS"]

#: subpackage -> distribution that provides it
SIBLINGS = {
    "memmap": "td-memmap",
    "persistent": "td-h5",
    "nn": "td-nn",
    "distributed": "td-distributed",
    "tensorclass": "td-tensorclass",
    "prototype": "td-tensorclass",
    "store": "td-store",
}


def import_sibling(sub: str, module: str | None = None) -> Any:
    """Imports ``tensordict.<sub>[.<module>]``; ImportError names the distribution if absent."""
    name = f"tensordict.{sub}" + (f".{module}" if module else "")
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name is not None and not (name == err.name or name.startswith(err.name + ".")):
            raise
        dist = SIBLINGS.get(sub, "td-core")
        msg = (
            f"`tensordict.{sub}` is provided by the `{dist}` distribution, which is not "
            f"installed. {install_hint(dist)}"
        )
        raise ImportError(msg) from err


def install_hint(dist: str) -> str:
    """The sentence that tells a user how to install the distribution ``dist``.

    The td-* distributions are not on a package index yet, so the hint gives the command
    that works from a checkout of the repository (with the CPU torch pinned in
    ``constraints.txt``) and says how it will read once they are published.

    Args:
        dist (str): a distribution name such as ``"td-memmap"``.

    Returns:
        str: one sentence, ending with a full stop.

    Examples:
        >>> install_hint("td-h5")[:40]
        'Install it from a checkout of the reposi'
    """
    return (
        "Install it from a checkout of the repository with "
        f"`pip install -c constraints.txt ./packages/{dist}` (once the td-* distributions "
        f"are published: `pip install {dist}`)."
    )


#: (sub, method name, is_classmethod)
_SIBLING_METHODS = [
    ("memmap", "memmap", False),
    ("memmap", "memmap_", False),
    ("memmap", "memmap_like", False),
    ("memmap", "load_memmap", True),
    ("memmap", "load_memmap_", False),
    ("memmap", "memmap_refresh_", False),
    ("memmap", "save", False),
    ("memmap", "dumps", False),
    ("memmap", "load", True),
    ("memmap", "load_", False),
    ("memmap", "is_memmap", False),
    ("memmap", "make_memmap", False),
    ("memmap", "make_memmap_from_storage", False),
    ("memmap", "make_memmap_from_tensor", False),
    ("memmap", "to_safetensors", False),
    ("memmap", "from_safetensors", True),
    ("persistent", "to_h5", False),
    ("persistent", "from_h5", True),
    ("persistent", "to_zarr", False),
    ("persistent", "from_zarr", True),
    ("store", "to_store", False),
    ("distributed", "send", False),
    ("distributed", "recv", False),
    ("distributed", "isend", False),
    ("distributed", "irecv", False),
    ("distributed", "init_remote", False),
    ("distributed", "from_remote_init", True),
    ("distributed", "broadcast", False),
    ("distributed", "all_reduce", False),
    ("distributed", "reduce", False),
    ("distributed", "all_gather", False),
    ("distributed", "gather_and_stack", False),
    ("distributed", "scatter", False),
    ("distributed", "map", False),
    ("distributed", "map_iter", False),
]


def forward_to_sibling(sub: str, name: str, self_or_cls: Any, args: tuple, kwargs: dict) -> Any:
    """Calls ``tensordict.<sub>._td_methods.<name>(self_or_cls, *args, **kwargs)``.

    The generated methods of ``_seams_generated.py`` forward through this; a missing
    distribution raises ``ImportError`` naming it.
    """
    mod = import_sibling(sub, "_td_methods")
    return getattr(mod, name)(self_or_cls, *args, **kwargs)


class SiblingMixin(TensorDictHost):
    """Methods implemented by sibling distributions, imported when first called."""

    @property
    def saved_path(self) -> Any:
        """Folder this TensorDict was memory-mapped to (td-memmap), or ``None``."""
        return getattr(self, "_saved_path", None)
