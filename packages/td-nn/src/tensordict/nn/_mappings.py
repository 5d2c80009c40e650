"""Positive mappings for scale parameters (``"biased_softplus_1.0"``, ``"exp"``, ...),
``NormalParamExtractor`` and ``AddStateIndependentNormalScale``."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

__all__ = [
    "AddStateIndependentNormalScale",
    "NormalParamExtractor",
    "add_custom_mapping",
    "biased_softplus",
    "expln",
    "inv_softplus",
    "mappings",
]


def inv_softplus(bias: float | torch.Tensor) -> float | torch.Tensor:
    """Inverse of softplus: ``x`` such that ``softplus(x) == bias`` (``bias > 0``).

    Examples:
        >>> round(inv_softplus(1.0), 4)
        0.5413
    """
    if isinstance(bias, torch.Tensor):
        return bias.expm1().clamp_min(1e-6).log()
    return math.log(math.expm1(bias))


class biased_softplus(nn.Module):  # noqa: N801 - public name of the tensordict API
    """``softplus(x + b) + min_val`` with ``b`` chosen so that ``f(0) == bias``.

    Args:
        bias (float): the value at ``x = 0`` (``> min_val``).
        min_val (float, optional): the lower bound. Defaults to ``0.01``.

    Raises:
        ValueError: ``bias <= min_val``.

    Examples:
        >>> import torch
        >>> f = biased_softplus(1.0)
        >>> round(float(f(torch.zeros(()))), 4)
        1.0
    """

    def __init__(self, bias: float, min_val: float = 0.01) -> None:
        super().__init__()
        if bias <= min_val:
            msg = f"biased_softplus: bias={bias} must be larger than min_val={min_val}."
            raise ValueError(msg)
        self.bias = inv_softplus(bias - min_val)
        self.min_val = min_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softplus(x + self.bias) + self.min_val


def expln(x: torch.Tensor) -> torch.Tensor:
    """``exp(x)`` for ``x <= 0``, ``log1p(x) + 1`` above: positive, slow growth.

    Examples:
        >>> import torch
        >>> expln(torch.tensor([0.0, 1.0]))
        tensor([1.0000, 1.6931])
    """
    return torch.where(x <= 0, x.clamp_max(0).exp(), x.clamp_min(0).log1p() + 1)


_MAPPINGS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "softplus": F.softplus,
    "exp": torch.exp,
    "relu": torch.relu,
    "abs": torch.abs,
    "expln": expln,
    "none": lambda x: x,
    "biased_softplus": biased_softplus(1.0),
}


def add_custom_mapping(name: str, mapping: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Registers ``mapping`` under ``name`` for :func:`mappings`.

    Raises:
        TypeError: ``mapping`` is not callable.
    """
    if not callable(mapping):
        msg = f"add_custom_mapping: mapping for {name!r} must be callable, got {type(mapping).__name__}."
        raise TypeError(msg)
    _MAPPINGS[name] = mapping


def mappings(key: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The positive mapping named ``key``.

    Known names: ``"softplus"``, ``"exp"``, ``"relu"``, ``"abs"``, ``"expln"``,
    ``"none"``, ``"biased_softplus"`` and ``"biased_softplus_{bias}"`` /
    ``"biased_softplus_{bias}_{min_val}"``, plus those added with
    :func:`add_custom_mapping`.

    Raises:
        NotImplementedError: unknown name.

    Examples:
        >>> import torch
        >>> float(mappings("biased_softplus_2.0")(torch.zeros(())))
        2.0
    """
    if key in _MAPPINGS:
        return _MAPPINGS[key]
    if key.startswith("biased_softplus_"):
        parts = key[len("biased_softplus_") :].split("_")
        try:
            values = [float(p) for p in parts]
        except ValueError:
            values = []
        if len(values) in (1, 2):
            return biased_softplus(*values)
    msg = f"Unknown mapping {key!r}; known mappings are {sorted(_MAPPINGS)} and 'biased_softplus_{{bias}}[_{{min_val}}]'."
    raise NotImplementedError(msg)


class NormalParamExtractor(nn.Module):
    """Splits the last dim of its input into a location and a positive scale.

    Args:
        scale_mapping (str or callable, optional): maps the second half to a positive
            scale. Defaults to ``"biased_softplus_1.0"``.
        scale_lb (float, optional): lower bound of the scale. Defaults to ``1e-4``.

    Inputs: a tensor of shape ``[*B, 2 * D]``, then any number of other values.
    Outputs: ``loc`` and ``scale``, each ``[*B, D]``, followed by the other inputs
    unchanged (a recurrent state, for instance), as in tensordict 0.15.

    Raises:
        RuntimeError: the last dim is odd.

    Examples:
        >>> import torch
        >>> loc, scale = NormalParamExtractor()(torch.zeros(3, 4))
        >>> loc.shape, bool((scale > 0).all())
        (torch.Size([3, 2]), True)
    """

    def __init__(self, scale_mapping: str | Callable = "biased_softplus_1.0", scale_lb: float = 1e-4) -> None:
        super().__init__()
        self.scale_mapping = mappings(scale_mapping) if isinstance(scale_mapping, str) else scale_mapping
        self.scale_lb = scale_lb

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        tensor, *others = tensors
        if tensor.shape[-1] % 2:
            msg = f"NormalParamExtractor: the last dim must be even (loc and scale halves), got shape {tuple(tensor.shape)}."
            raise RuntimeError(msg)
        loc, scale = tensor.chunk(2, -1)
        scale = self.scale_mapping(scale).clamp_min(self.scale_lb)
        if others:
            return (loc, scale, *others)
        return loc, scale


class AddStateIndependentNormalScale(nn.Module):
    """Returns ``(loc, scale)`` where ``scale`` is a learned parameter independent of the input.

    Args:
        scale_shape (torch.Size or int, optional): shape of the scale parameter (the
            trailing dims of ``loc``). Defaults to ``loc``'s last dim on first call.
        scale_mapping (str, optional): positive mapping. Defaults to ``"exp"``.
        scale_lb (float, optional): lower bound. Defaults to ``1e-4``.
        init_value (float, optional): initial value of the raw parameter. Defaults to ``0.0``.

    Examples:
        >>> import torch
        >>> module = AddStateIndependentNormalScale(4)
        >>> loc, scale = module(torch.zeros(3, 4))
        >>> scale.shape
        torch.Size([3, 4])
        >>> loc, scale, hidden = module(torch.zeros(3, 4), "hidden state")  # passed through
        >>> hidden
        'hidden state'
    """

    def __init__(
        self,
        scale_shape: torch.Size | int | tuple | None = None,
        *,
        scale_mapping: str = "exp",
        scale_lb: float = 1e-4,
        init_value: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        if scale_shape is None:
            msg = "AddStateIndependentNormalScale: scale_shape is required."
            raise ValueError(msg)
        if isinstance(scale_shape, int):
            scale_shape = (scale_shape,)
        self.scale = nn.Parameter(torch.full(tuple(scale_shape), float(init_value)))
        self.scale_mapping = mappings(scale_mapping)
        self.scale_lb = scale_lb

    def forward(self, loc: torch.Tensor, *others: Any) -> tuple[Any, ...]:
        """``(loc, scale, *others)``: extra positional inputs (an LSTM's ``(h, c)``) pass
        through after the scale, so the module can follow a module returning a tuple."""
        scale = self.scale_mapping(self.scale).clamp_min(self.scale_lb).expand_as(loc)
        return (loc, scale, *others)
