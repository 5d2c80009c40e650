"""What the ``repr`` of a TensorDict shows: :class:`set_printoptions` and
:func:`get_printoptions`.

The options are one process-wide dict read by ``_repr.py`` each time a repr is built.
``set_printoptions(...)`` is a :class:`~tensordict._switch.ModeSwitch`: a context
manager, a decorator, or ``.set()`` / ``.unset()`` for a process-wide change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tensordict._switch import ModeSwitch

__all__ = ["get_printoptions", "set_printoptions"]

#: the defaults: the repr of tensordict 0.15.
_DEFAULTS: dict[str, Any] = {
    "show_batch_size": True,
    "show_device": True,
    "show_is_shared": True,
    "show_shape": True,
    "show_dtype": True,
    "show_field_device": True,
    "show_field_is_shared": True,
    "show_grad": False,
    "show_is_contiguous": False,
    "show_is_view": False,
    "show_storage_size": False,
    "plain": False,
    "sort_keys": "alphabetical",
    # tensordict 0.15.3's one-line ``TensorDict(batch_size=[3], fields={a: f32[]})``;
    # the verbose repr stays the default here (docs/design.md)
    "compact": False,
    "html": True,
}

#: options only the verbose repr reads: passing one without ``compact`` turns compact off
_VERBOSE_ONLY = frozenset(
    {
        "show_is_shared", "show_shape", "show_field_device", "show_field_is_shared", "show_grad",
        "show_is_contiguous", "show_is_view", "show_storage_size", "plain",
    }
)

#: ``verbose=False`` turns these off (unless given explicitly in the same call).
_VERBOSE_OFF = (
    "show_device",
    "show_is_shared",
    "show_dtype",
    "show_field_device",
    "show_field_is_shared",
)

_OPTIONS: dict[str, Any] = dict(_DEFAULTS)


def get_printoptions() -> dict[str, Any]:
    """A copy of the options the TensorDict ``repr`` uses now.

    Returns:
        dict: option name -> value (changing it changes nothing; use
        :class:`set_printoptions`).

    Examples:
        >>> get_printoptions()["show_device"]
        True
    """
    return dict(_OPTIONS)


def _options() -> dict[str, Any]:
    """The live option dict (read by ``_repr.py``; never hand it out)."""
    return _OPTIONS


class set_printoptions(ModeSwitch):  # noqa: N801 - public name of the tensordict API
    """Chooses what the ``repr`` of TensorDicts shows.

    Keyword Args:
        show_batch_size, show_device, show_is_shared (bool): the container lines.
        show_shape, show_dtype, show_field_device, show_field_is_shared (bool): the
            parts of each tensor field.
        show_grad, show_is_contiguous, show_is_view, show_storage_size (bool): extra
            parts of each tensor field (off by default).
        plain (bool): show each floating tensor's mean and std instead of its layout.
        compact (bool): tensordict 0.15.3's compact repr, one token per leaf (its dtype
            and feature dims, ``f32[3]``), split over lines past 80 columns. Defaults to
            ``False`` here (0.15.3 defaults to ``True``). A verbose-only option given
            without ``compact`` sets ``compact=False``.
        html (bool): accepted for compatibility (notebook display).
        sort_keys (``"alphabetical"``, ``"insertion"`` or a callable): field order;
            a callable is used as ``sorted(keys, key=sort_keys)``.
        verbose (bool): ``False`` hides devices, sharing and dtypes (options given in
            the same call win); ``True`` changes nothing.

    Raises:
        TypeError: an unknown option name.
        ValueError: ``sort_keys`` is a string other than the two above.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2)}, [2])
        >>> with set_printoptions(show_device=False):  # the container's device line goes
        ...     repr(td).count("device=")
        1
        >>> repr(td).count("device=")
        2
    """

    def __init__(self, **options: Any) -> None:
        super().__init__()
        verbose = options.pop("verbose", None)
        unknown = sorted(set(options) - set(_DEFAULTS))
        if unknown:
            msg = f"Unknown printoptions {unknown}; expected some of {sorted(_DEFAULTS) + ['verbose']}."
            raise TypeError(msg)
        sort_keys = options.get("sort_keys", "alphabetical")
        if isinstance(sort_keys, str) and sort_keys not in ("alphabetical", "insertion"):
            msg = f"sort_keys must be 'alphabetical', 'insertion' or a callable, got {sort_keys!r}."
            raise ValueError(msg)
        if sort_keys is not None and not isinstance(sort_keys, str) and not isinstance(sort_keys, Callable):  # type: ignore[arg-type]
            msg = f"sort_keys must be 'alphabetical', 'insertion' or a callable, got {sort_keys!r}."
            raise ValueError(msg)
        if "compact" not in options and not _VERBOSE_ONLY.isdisjoint(options):
            options["compact"] = False
        if verbose is False:
            for name in _VERBOSE_OFF:
                options.setdefault(name, False)
        self.mode = options

    def _read(self) -> dict[str, Any]:
        return dict(_OPTIONS)

    def _write(self, value: dict[str, Any]) -> None:
        _OPTIONS.update(value)

    def _apply(self) -> None:
        _OPTIONS.update(self.mode)
