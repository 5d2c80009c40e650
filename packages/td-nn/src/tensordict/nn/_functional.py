"""The functional API: run a module with parameters passed as a TensorDict.

``make_functional(module)`` returns the module's parameters and buffers as a TensorDict
(keyed like the submodules) and patches ``module.forward`` so that
``module(x, params=params)`` (or ``module(x, params)``) runs with them. The parameters are
swapped in with ``params.to_module(module)`` for the duration of the call, which also
works under ``torch.vmap`` over a stacked parameter TensorDict (model ensembles).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from torch import nn

from tensordict import TensorDict, TensorDictBase

__all__ = ["get_functional", "is_functional", "make_functional", "repopulate_module"]


def _swap_params(module: nn.Module, params: TensorDictBase) -> Any:
    """Context manager: ``params`` replace the module's parameters and buffers inside the block.

    The tensors go in as they are (functional-call semantics: a plain tensor is not
    wrapped into an ``nn.Parameter``).
    """
    return params.to_module(module, preserve_module_state=False)


def _strip(module: nn.Module) -> None:
    for sub in module.modules():
        for name in list(sub._parameters):
            sub._parameters[name] = None
        for name in list(sub._buffers):
            sub._buffers[name] = None


def _split_params(args: tuple, kwargs: dict) -> tuple[TensorDictBase | None, tuple, dict]:
    params = kwargs.pop("params", None)
    if params is None and len(args) >= 2 and isinstance(args[-1], TensorDictBase):
        params = args[-1]
        args = args[:-1]
    return params, args, kwargs


def _decorate(module: nn.Module, name: str) -> None:
    original: Callable = getattr(module, name)
    if getattr(original, "_td_functional", False):
        return

    @functools.wraps(original)
    def functional_call(*args: Any, **kwargs: Any) -> Any:
        params, args, kwargs = _split_params(args, dict(kwargs))
        if params is None:
            return original(*args, **kwargs)
        with _swap_params(module, params):
            return original(*args, **kwargs)

    functional_call._td_functional = True  # type: ignore[attr-defined]
    module.__dict__[name] = functional_call


def make_functional(
    module: nn.Module,
    funs_to_decorate: Sequence[str] | None = None,
    keep_params: bool = False,
    return_params: bool = True,
) -> TensorDictBase | nn.Module:
    """Makes ``module`` callable with its parameters passed as a TensorDict.

    After the call, ``module(*args, params=params)`` (or with ``params`` as the last
    positional argument) runs the module with the tensors of ``params`` in place of
    its own, for that call only. ``torch.vmap(module, (None, 0))(x, stacked_params)``
    then runs an ensemble.

    Args:
        module (nn.Module): the module, modified in place (its ``forward``, and the
            other methods named in ``funs_to_decorate``, are patched on the instance).
        funs_to_decorate (list of str, optional): the methods that accept ``params``.
            Defaults to ``["forward"]``.
        keep_params (bool, optional): if ``False`` (default) the module's own
            parameters and buffers are removed (set to ``None``): the returned
            TensorDict holds them, and the module only runs with ``params``. If
            ``True`` they stay, and calls without ``params`` use them.
        return_params (bool, optional): return the parameters (default) or the module.

    Returns:
        a TensorDict of the parameters and buffers (``params["0", "weight"]`` is
        ``module[0].weight``), or the module if ``return_params=False``.

    Raises:
        TypeError: ``module`` is not an ``nn.Module``.

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 4))
        >>> params = make_functional(model)
        >>> x = torch.randn(10, 3)
        >>> model(x, params=params).shape
        torch.Size([10, 4])
        >>> params_stack = torch.stack([params, params], 0)
        >>> torch.vmap(model, (None, 0))(x, params_stack).shape
        torch.Size([2, 10, 4])
    """
    if not isinstance(module, nn.Module):
        msg = f"make_functional expects an nn.Module, got {type(module).__name__}."
        raise TypeError(msg)
    params = TensorDict.from_module(module)
    for name in funs_to_decorate or ["forward"]:
        if not callable(getattr(module, name, None)):
            msg = f"make_functional: {type(module).__name__} has no method {name!r} to decorate."
            raise AttributeError(msg)
        _decorate(module, name)
    module.__dict__["_is_functional"] = True
    if not keep_params:
        _strip(module)
    return params if return_params else module


def get_functional(
    module: nn.Module,
    funs_to_decorate: Sequence[str] | None = None,
) -> nn.Module:
    """Makes ``module`` functional while keeping its parameters, and returns it.

    ``module(x)`` keeps using its own parameters; ``module(x, params=other)`` uses
    ``other`` for that call.

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> module = get_functional(nn.Linear(2, 1))
        >>> zeros = TensorDict({"weight": torch.zeros(1, 2), "bias": torch.zeros(1)})
        >>> module(torch.ones(2), params=zeros)
        tensor([0.])
    """
    make_functional(module, funs_to_decorate=funs_to_decorate, keep_params=True)
    return module


def is_functional(module: nn.Module) -> bool:
    """``True`` if ``module`` went through :func:`make_functional` / :func:`get_functional`.

    Examples:
        >>> from torch import nn
        >>> is_functional(nn.Linear(2, 2))
        False
    """
    return bool(getattr(module, "__dict__", {}).get("_is_functional", False))


def repopulate_module(model: nn.Module, tensordict: TensorDictBase) -> nn.Module:
    """Writes the tensors of ``tensordict`` back into ``model`` as its parameters/buffers.

    Undoes the stripping of :func:`make_functional` (or loads other values).

    Returns:
        ``model``.

    Raises:
        KeyError: a key of ``tensordict`` is not a parameter/buffer of ``model``.

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> model = nn.Linear(2, 2)
        >>> params = make_functional(model)
        >>> model.weight is None
        True
        >>> _ = repopulate_module(model, params)
        >>> model.weight.shape
        torch.Size([2, 2])
    """
    tensordict.to_module(model, return_swap=False, preserve_module_state=False)
    return model
