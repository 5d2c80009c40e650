"""Process-wide options of the non-tensor machinery.

* :func:`list_to_stack` / :class:`set_list_to_stack`: whether a Python list written
  into a batched TensorDict becomes a stack of non-tensor data (one element per batch
  entry); when it is ``False`` a list becomes a tensor (``torch.as_tensor``) and only
  a list torch cannot convert (strings, mixed objects) is kept as non-tensor data.
  Unset, it reads as ``True`` (tensordict 0.15.3's default). The constructors
  (``from_dict``, ``from_any``) build a stack from a list of objects either way.
* :func:`capture_non_tensor_stack` / :class:`set_capture_non_tensor_stack`: whether
  stacking equal non-tensor values collapses them into one ``NonTensorData``. Unset,
  it reads as ``False``.

The values start from the environment variables ``LIST_TO_STACK`` and
``CAPTURE_NONTENSOR_STACK`` (``"1"``/``"0"``, ``"true"``/``"false"``) when present.
"""

from __future__ import annotations

import os

from tensordict._switch import ModeSwitch

__all__ = [
    "capture_non_tensor_stack",
    "list_to_stack",
    "set_capture_non_tensor_stack",
    "set_list_to_stack",
]

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _env_flag(name: str) -> bool | None:
    raw = os.environ.get(name)
    if raw is None:
        return None
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    msg = f"Environment variable {name}={raw!r}: expected one of {_TRUE + _FALSE}."
    raise ValueError(msg)


#: one-element cells: ``None`` means "never set" (the documented default applies).
_LIST_TO_STACK: list = [_env_flag("LIST_TO_STACK")]
_CAPTURE_NONTENSOR_STACK: list = [_env_flag("CAPTURE_NONTENSOR_STACK")]


def list_to_stack(allow_none: bool = False) -> bool | None:
    """Whether lists written into a TensorDict become stacks of non-tensor data.

    Args:
        allow_none (bool): return ``None`` when the option was never set, instead of
            the default (``True``, as tensordict 0.15.3: a list spanning a one-dim batch
            becomes a stack; ``False`` gives ``torch.as_tensor`` semantics).

    Returns:
        bool or None: the current setting.

    Examples:
        >>> list_to_stack()
        True
        >>> with set_list_to_stack(False):
        ...     list_to_stack()
        False
    """
    value = _LIST_TO_STACK[0]
    if value is None and not allow_none:
        return True
    return value


class set_list_to_stack(ModeSwitch):  # noqa: N801 - public name of the tensordict API
    """Sets :func:`list_to_stack`: context manager, decorator or ``.set()``/``.unset()``.

    Args:
        mode (bool): ``True`` to turn lists into stacks of non-tensor data.

    Examples:
        >>> switch = set_list_to_stack(False)
        >>> switch.set()
        >>> list_to_stack()
        False
        >>> switch.unset()
        >>> list_to_stack()
        True
    """

    def __init__(self, mode: bool) -> None:
        super().__init__()
        self.mode = bool(mode)

    def _read(self) -> bool | None:
        return _LIST_TO_STACK[0]

    def _write(self, value: bool | None) -> None:
        _LIST_TO_STACK[0] = value


def capture_non_tensor_stack(allow_none: bool = False) -> bool | None:
    """Whether stacking equal non-tensor values gives one ``NonTensorData``.

    Args:
        allow_none (bool): return ``None`` when the option was never set, instead of
            the default (``False``).

    Examples:
        >>> capture_non_tensor_stack()
        False
        >>> capture_non_tensor_stack(allow_none=True) is None
        True
    """
    value = _CAPTURE_NONTENSOR_STACK[0]
    if value is None and not allow_none:
        return False
    return value


class set_capture_non_tensor_stack(ModeSwitch):  # noqa: N801 - public name of the tensordict API
    """Sets :func:`capture_non_tensor_stack`: context manager, decorator or ``.set()``/``.unset()``.

    Args:
        mode (bool): ``True`` to collapse stacks of equal non-tensor values.

    Examples:
        >>> with set_capture_non_tensor_stack(True):
        ...     capture_non_tensor_stack()
        True
    """

    def __init__(self, mode: bool) -> None:
        super().__init__()
        self.mode = bool(mode)

    def _read(self) -> bool | None:
        return _CAPTURE_NONTENSOR_STACK[0]

    def _write(self, value: bool | None) -> None:
        _CAPTURE_NONTENSOR_STACK[0] = value
