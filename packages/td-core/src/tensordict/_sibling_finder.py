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

from tensordict._seams import SIBLINGS, install_hint

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
        if _probing():
            return None  # importlib.util.find_spec(...) answers None, as for any missing module
        msg = (
            f"No module named {fullname!r}: `tensordict.{sub}` is provided by the `{dist}` "
            f"distribution, which is not installed. {install_hint(dist)}"
        )
        raise ModuleNotFoundError(msg, name=fullname)

    def __repr__(self) -> str:
        return "MissingSiblingFinder()"


def _probing() -> bool:
    """``True`` when the lookup comes from ``importlib.util.find_spec`` (a probe, not an import).

    ``find_spec(name) is None`` is the usual way to ask whether an optional module is
    installed; it must keep answering ``None``. Only an ``import`` statement (or
    ``importlib.import_module``) gets the error that names the distribution.
    """
    frame = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return False
        if frame.f_code.co_name == "find_spec" and frame.f_globals.get("__name__") == "importlib.util":
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def install() -> None:
    """Appends one :class:`MissingSiblingFinder` to ``sys.meta_path`` (once per process)."""
    if not any(isinstance(f, MissingSiblingFinder) for f in sys.meta_path):
        sys.meta_path.append(MissingSiblingFinder())
