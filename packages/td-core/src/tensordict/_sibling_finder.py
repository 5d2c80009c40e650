"""A clear error for ``import tensordict.<sibling>`` when that distribution is absent.

``tensordict.nn``, ``tensordict.memmap``, ``tensordict.persistent``,
``tensordict.distributed``, ``tensordict.tensorclass`` and ``tensordict.prototype`` are
shipped by separate distributions. Without one, ``import tensordict.nn`` would fail
with a bare ``No module named 'tensordict.nn'``. :func:`install` appends a finder to
the end of ``sys.meta_path``: it is asked only after every other finder has failed
to find the module, so it costs nothing on the normal import path, and it raises a
``ModuleNotFoundError`` (an ``ImportError``) that names the distribution to install.
"""

from __future__ import annotations

import sys
from typing import Any

from tensordict._seams import SIBLINGS

__all__ = ["MissingSiblingFinder", "install"]


class MissingSiblingFinder:
    """``sys.meta_path`` finder of last resort for the sibling subpackages of ``tensordict``."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        """Returns ``None`` for anything but a missing ``tensordict.<sibling>``.

        Raises:
            ModuleNotFoundError: ``fullname`` is ``tensordict.<sub>`` for a sibling
                subpackage that no finder provides; the message names the distribution.
        """
        if not fullname.startswith("tensordict.") or fullname.count(".") != 1:
            return None
        sub = fullname[len("tensordict.") :]
        dist = SIBLINGS.get(sub)
        if dist is None:
            return None
        # a finder placed after this one (some editable installs append theirs) may have it
        meta_path = sys.meta_path
        after = meta_path[meta_path.index(self) + 1 :] if self in meta_path else []
        for finder in after:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                return spec
        msg = (
            f"No module named {fullname!r}: `tensordict.{sub}` is provided by the `{dist}` "
            f"distribution, which is not installed. Install it with `pip install {dist}` "
            f'(or `pip install "td-core[all]"` for the whole stack).'
        )
        raise ModuleNotFoundError(msg, name=fullname)

    def __repr__(self) -> str:
        return "MissingSiblingFinder()"


def install() -> None:
    """Appends one :class:`MissingSiblingFinder` to ``sys.meta_path`` (once per process)."""
    if not any(isinstance(f, MissingSiblingFinder) for f in sys.meta_path):
        sys.meta_path.append(MissingSiblingFinder())
