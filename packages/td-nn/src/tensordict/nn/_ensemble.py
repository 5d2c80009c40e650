"""``EnsembleModule``: ``num_copies`` independently initialised copies of a TensorDict
module, with stacked parameters, run together under ``torch.vmap``."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from tensordict import TensorDict, TensorDictBase
from tensordict.nn._common import (
    TensorDictModuleBase,
    _handles_kwargs,
    _infer_batch_size_,
    _tensor_call_output,
)
from tensordict.nn._functional import _strip, _swap_params
from tensordict.nn._params import TensorDictParams

__all__ = ["EnsembleModule"]


def _reset(module: nn.Module) -> None:
    for sub in module.modules():
        if sub is not module and isinstance(sub, TensorDictModuleBase):
            continue
        reset = getattr(sub, "reset_parameters", None)
        if callable(reset) and not isinstance(sub, TensorDictModuleBase):
            reset()


def _plain(td: TensorDictBase) -> TensorDict:
    """A plain TensorDict tree holding the same tensors (for ``vmap``)."""
    source = {}
    for key, value in td._items_raw():
        source[key] = _plain(value) if isinstance(value, TensorDictBase) else value
    return TensorDict._new_unsafe(source, td.batch_size, td.device)


class EnsembleModule(TensorDictModuleBase):
    """Runs ``num_copies`` copies of a TensorDict module, each with its own parameters.

    The copies are re-initialised (``reset_parameters``) independently and their
    parameters and buffers are stacked in ``params_td`` (a
    :class:`~tensordict.nn.TensorDictParams` with ``batch_size=[num_copies]``, so the
    optimizer sees them). A call runs the module once per copy under ``torch.vmap``;
    the outputs gain a leading dim of size ``num_copies``.

    Args:
        module (TensorDictModuleBase): the module to replicate. Its own parameters
            are removed (set to ``None``): the ensemble's live in ``params_td``.
        num_copies (int): the number of copies.
        expand_input (bool, optional): if ``True`` (default) the input TensorDict is
            expanded to ``[num_copies, *batch_size]``; if ``False`` it must already
            have that leading dim (one slice per copy).

    Raises:
        TypeError: ``module`` is not an ``nn.Module``.
        ValueError: ``num_copies < 1``.

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> module = TensorDictModule(nn.Linear(2, 3), in_keys=["x"], out_keys=["y"])
        >>> ensemble = EnsembleModule(module, num_copies=4)
        >>> out = ensemble(TensorDict(x=torch.randn(5, 2), batch_size=[5]))
        >>> out["y"].shape, out.batch_size
        (torch.Size([4, 5, 3]), torch.Size([4, 5]))
    """

    def __init__(self, module: nn.Module, num_copies: int, expand_input: bool = True) -> None:
        super().__init__()
        if not isinstance(module, nn.Module):
            msg = f"EnsembleModule: module must be an nn.Module, got {type(module).__name__}."
            raise TypeError(msg)
        if int(num_copies) < 1:
            msg = f"EnsembleModule: num_copies must be >= 1, got {num_copies}."
            raise ValueError(msg)
        self.in_keys = list(getattr(module, "in_keys", []))
        self.out_keys = list(getattr(module, "out_keys", []))
        self.num_copies = int(num_copies)
        self.expand_input = expand_input
        # one slice per copy, each re-initialised by the module's own reset_parameters
        own = TensorDict.from_module(module)
        stacked = own.detach().expand(self.num_copies).clone()
        for i in range(self.num_copies):
            with torch.no_grad(), _swap_params(module, stacked[i]):
                _reset(module)
        for key, value in own.items(True, True):  # parameters stay parameters, buffers buffers
            if isinstance(value, nn.Parameter):
                stacked.set(key, nn.Parameter(stacked.get(key), requires_grad=value.requires_grad))
        self.params_td = TensorDictParams(stacked, no_convert=True)
        _strip(module)
        self.module = module

    def _one(self, tensordict: TensorDictBase, params: TensorDictBase) -> Any:
        with _swap_params(self.module, params):
            return self.module(tensordict)

    @_handles_kwargs
    def forward(self, tensordict: TensorDictBase | None = None, *args: Any, **kwargs: Any) -> TensorDictBase:
        """Runs every copy; returns a TensorDict with batch size ``[num_copies, *batch_size]``.

        Raises:
            RuntimeError: ``expand_input=False`` and the input's first dim is not ``num_copies``.
        """
        if not isinstance(tensordict, TensorDictBase):
            td = self._td_from_call(tensordict, args, kwargs)
            out = _infer_batch_size_(self.forward(td))
            return _tensor_call_output(self, out, tensordict is not None or bool(args))
        if self.expand_input:
            tensordict = tensordict.expand(self.num_copies, *tensordict.batch_size)
        elif not tensordict.batch_size or tensordict.batch_size[0] != self.num_copies:
            msg = (
                f"EnsembleModule(num_copies={self.num_copies}, expand_input=False): the input's leading "
                f"dim must be {self.num_copies}, got batch_size={tuple(tensordict.batch_size)}."
            )
            raise RuntimeError(msg)
        params = _plain(self.params_td)
        return torch.vmap(self._one, (0, 0), randomness="different")(tensordict, params)

    def reset_parameters_recursive(self, parameters: TensorDictBase | None = None) -> TensorDictBase | None:
        """Re-initialises every copy independently (in place in ``params_td``)."""
        target = self.params_td if parameters is None else parameters
        for i in range(self.num_copies):
            with torch.no_grad(), _swap_params(self.module, _plain(target)[i]):
                _reset(self.module)
        return None if parameters is None else parameters

