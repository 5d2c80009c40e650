"""COMPATIBILITY: private names of upstream ``tensordict.nn`` that downstream code imports.

They are not part of this project's API; real downstream libraries import them at
module load, so they are defined here once and re-exported from the upstream paths.

==============================  ====================================  =====================================
name                            upstream path                         imported by
==============================  ====================================  =====================================
``_set_dispatch_td_nn_modules`` ``tensordict.nn.utils``               TorchRL replay buffers (``data.replay_buffers``)
``_dispatch_td_nn_modules``     ``tensordict.nn.utils``               (its reader)
``_set_skip_existing_None``     ``tensordict.nn.utils``               TorchRL ``modules.tensordict_module.probabilistic``
``_use_generator``              ``tensordict.nn.probabilistic``       TorchRL ``modules.tensordict_module.probabilistic``
``_exclude_td_from_pytree``     ``tensordict.nn.functional_modules``  TorchRL ``objectives.utils`` (``_pseudo_vmap``)
==============================  ====================================  =====================================
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.utils._pytree as _pt

from tensordict import TensorDictBase
from tensordict.nn._common import _DISPATCH_TD_NN_MODULES, set_skip_existing
from tensordict.utils import ModeSwitch

__all__ = [
    "_dispatch_td_nn_modules",
    "_exclude_td_from_pytree",
    "_set_dispatch_td_nn_modules",
    "_set_skip_existing_None",
    "_use_generator",
]


def _dispatch_td_nn_modules() -> bool:
    """Whether ``@dispatch`` builds TensorDicts from tensor arguments (default ``True``)."""
    return _DISPATCH_TD_NN_MODULES[0]


class _set_dispatch_td_nn_modules(ModeSwitch):  # noqa: N801 - upstream's name
    """Turns ``@dispatch`` on or off: context manager, decorator, ``.set()``/``.unset()``.

    Off, a dispatching ``forward`` receives its arguments as they are passed.
    """

    def __init__(self, mode: bool) -> None:
        super().__init__()
        self.mode = bool(mode)

    def _read(self) -> bool:
        return _DISPATCH_TD_NN_MODULES[0]

    def _write(self, value: bool) -> None:
        _DISPATCH_TD_NN_MODULES[0] = value


class _set_skip_existing_None(set_skip_existing):  # noqa: N801 - upstream's name
    """``set_skip_existing(None)``: the decorated ``forward`` checks the skip-existing mode itself."""

    def __init__(self, in_key_attr: str = "in_keys", out_key_attr: str = "out_keys") -> None:
        super().__init__(None, in_key_attr, out_key_attr)


@contextlib.contextmanager
def _use_generator(generator: torch.Generator | None) -> Iterator[None]:
    """Inside the block, the default random generator draws from ``generator``'s stream.

    On exit, ``generator`` has advanced by what was drawn and the default generator
    is back to its own state. ``None`` leaves everything as it is.
    """
    if generator is None:
        yield
        return
    if generator.device.type == "cuda":
        default = torch.cuda.default_generators[generator.device.index or 0]
    else:
        default = torch.default_generator
    saved = default.get_state()
    default.set_state(generator.get_state())
    try:
        yield
    finally:
        generator.set_state(default.get_state())
        default.set_state(saved)


class _exclude_td_from_pytree:  # noqa: N801 - upstream's name
    """Inside the block, TensorDict classes are not pytree nodes (pytree sees them as leaves).

    Usable as ``with _exclude_td_from_pytree(): ...`` or, as upstream's tests do, with
    explicit ``excluder.set()`` / ``excluder.unset()`` calls.
    """

    def __init__(self) -> None:
        self._removed: dict[type, Any] = {}

    def set(self) -> None:
        for cls in list(_pt.SUPPORTED_NODES):
            if isinstance(cls, type) and issubclass(cls, TensorDictBase):
                self._removed[cls] = _pt.SUPPORTED_NODES.pop(cls)

    def unset(self) -> None:
        _pt.SUPPORTED_NODES.update(self._removed)
        self._removed = {}

    def __enter__(self) -> _exclude_td_from_pytree:
        self.set()
        return self

    def __exit__(self, *exc: object) -> None:
        self.unset()
