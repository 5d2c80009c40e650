"""``CudaGraphModule``: replay a TensorDict module (or a function of tensors) from a
captured CUDA graph, removing the Python and kernel-launch overhead of each call.

Without CUDA the wrapper warns once, when it is built, and every call runs the wrapped
callable directly (the same results, no capture): code written for a GPU runs
unchanged on a CPU-only machine.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch
from torch.utils import _pytree as pytree

from tensordict import NestedKey, TensorDictBase, is_tensor_collection
from tensordict.nn._common import TensorDictModuleBase, _normalize_keys

__all__ = ["CudaGraphModule"]

_VARYING_ERROR = "Varying inputs must be torch.Tensor subclasses."


def _keys_arg(module: Any, name: str, given: Any) -> list | None:
    """The module's own ``in_keys``/``out_keys`` when it has them (a different non-empty
    argument warns), else the argument."""
    own = getattr(module, name, None)
    if own is None:
        return None if given is None else _normalize_keys(given, name)
    own = _normalize_keys(own, name)
    if given and _normalize_keys(given, name) != own:
        warnings.warn(
            f"CudaGraphModule: the wrapped module has {name}={own}; {name}={given!r} is ignored.",
            UserWarning,
            stacklevel=3,
        )
    return own


class CudaGraphModule:
    """Records a function, or a TensorDict module, as a CUDA graph and replays it.

    The first ``warmup - 1`` calls run the callable on a side stream, the next call
    captures it into a graph, and later calls copy their inputs into the graph's
    buffers and replay it with one launch. Inputs must keep their shapes, dtypes and
    device from call to call, the callable must not branch on tensor values, and its
    tensor inputs must not require gradients (read parameters from the enclosing
    scope instead; an optimizer step may run inside the callable).

    - A TensorDict module (a :class:`~tensordict.nn.TensorDictModuleBase`, or any callable
      given ``in_keys``): the ``in_keys`` entries of the input (every leaf when
      ``in_keys=[]``) are copied into the graph's input; when the callable returns its
      input, the entries it wrote are cloned into the caller's TensorDict and that
      TensorDict is returned, otherwise a clone of the output is returned. A missing
      input key raises ``KeyError``, an entry of another shape ``ValueError``.
    - A function of tensors: tensor (and TensorDict) arguments are copied into the
      graph's buffers; other arguments must keep the captured value (``ValueError``
      otherwise); the output is cloned.

    Without CUDA the constructor warns (``UserWarning``) and each call runs the
    callable directly.

    ``CudaGraphModule`` is not an :class:`~torch.nn.Module`, so its parameters are not
    gathered by accident; ``state_dict``/``load_state_dict`` and other attributes are
    those of the wrapped callable.

    Args:
        module (Callable): a function of tensors, or a TensorDict module.
        warmup (int, optional): the call that captures the graph (calls before it run
            on a side stream). Defaults to ``2``.
        in_keys (list of NestedKey, optional): the input keys of a callable that takes a
            TensorDict (``[]``: all leaves). A module's own ``in_keys`` take precedence.
            Defaults to ``None``: the callable takes tensors.
        out_keys (list of NestedKey, optional): the output keys; defaults to the
            module's, or ``[]`` (the entries the callable writes).
        device (torch.device, optional): the CUDA device of the side stream and the
            capture. Defaults to the current CUDA device.

    Raises:
        ValueError: ``warmup`` is not an integer >= 1; later, an input of another shape
            or a changed non-tensor argument.
        KeyError: a TensorDict input lacks one of the captured keys.
        RuntimeError: a tensor input requires gradients at capture time.

    Examples:
        >>> import warnings
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import CudaGraphModule, TensorDictModule
        >>> module = TensorDictModule(torch.nn.Linear(3, 4), in_keys=["x"], out_keys=["y"])
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")  # no CUDA here: runs eagerly
        ...     graphed = CudaGraphModule(module)
        >>> graphed(TensorDict(x=torch.randn(2, 3), batch_size=[2]))["y"].shape
        torch.Size([2, 4])
    """

    def __init__(
        self,
        module: Callable,
        warmup: int = 2,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 1:
            msg = f"CudaGraphModule: warmup must be an integer greater than 0, got {warmup!r}."
            raise ValueError(msg)
        self.module = module
        self._warmup = warmup
        self.in_keys = _keys_arg(module, "in_keys", in_keys)
        out = _keys_arg(module, "out_keys", out_keys)
        self.out_keys = [k for k in (out if out is not None else []) if k != "_"]
        self._is_tensordict_module = isinstance(module, TensorDictModuleBase) or self.in_keys is not None
        self.device = torch.device(device) if device is not None else None
        self._on_cuda = torch.cuda.is_available()
        if not self._on_cuda:
            warnings.warn(
                "CudaGraphModule: CUDA is not available, so no graph is captured and each call "
                "runs the wrapped callable directly.",
                UserWarning,
                stacklevel=2,
            )
        self.counter = 0
        self._graph: torch.cuda.CUDAGraph | None = None
        self._out_matches_in: bool | None = None
        self._selected_keys: list | None = None
        self._static_in: Any = None
        self._static_out: Any = None
        self._captured_keys: list = []
        self._spec: Any = None
        self._constants: list = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or "module" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["module"], name)

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        """The wrapped module's ``state_dict``."""
        return cast(torch.nn.Module, self.module).state_dict(*args, **kwargs)

    def load_state_dict(self, *args: Any, **kwargs: Any) -> Any:
        """Loads into the wrapped module (``module.load_state_dict``)."""
        return cast(torch.nn.Module, self.module).load_state_dict(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self._on_cuda:
            out = self.module(*args, **kwargs)
            if self._is_tensordict_module and args:
                self._out_matches_in = out is args[0]
            return out
        if self._is_tensordict_module and args and is_tensor_collection(args[0]):
            return self._call_td(args[0], *args[1:], **kwargs)
        return self._call_fn(*args, **kwargs)

    # -------------------------------------------------------------- CUDA helpers
    def _side_stream(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        stream = torch.cuda.Stream(device=self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            out = fn(*args, **kwargs)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        return out

    @staticmethod
    def _no_grad_inputs(values: list) -> None:
        for v in values:
            if isinstance(v, torch.Tensor) and v.requires_grad:
                msg = (
                    "CudaGraphModule: an input requires gradients; the captured graph cannot track "
                    "them. Read parameters from the enclosing scope instead of passing them."
                )
                raise RuntimeError(msg)

    def _capture(self, fn: Callable, *args: Any) -> Any:
        self._graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self._graph):
            return fn(*args)

    # -------------------------------------------------------------- TensorDict modules
    def _call_td(self, tensordict: TensorDictBase, *args: Any, **kwargs: Any) -> Any:
        tensordict_out = kwargs.pop("tensordict_out", None)
        if args or kwargs:  # extra arguments: not a fixed graph
            return self.module(tensordict, *args, tensordict_out=tensordict_out, **kwargs)
        self.counter += 1
        if self.counter < self._warmup:
            out = self._side_stream(self.module, tensordict)
            self._out_matches_in = out is tensordict
            return self._to_out(out, tensordict_out)
        if self._graph is None:
            keys = self.in_keys or list(tensordict.keys(True, True))
            self._captured_keys = keys
            self._static_in = tensordict.select(*keys).clone()
            self._no_grad_inputs([self._static_in.get(k) for k in keys])
            before = {id(self._static_in.get(k)) for k in keys}
            self._static_out = self._capture(self.module, self._static_in)
            self._out_matches_in = self._static_out is self._static_in
            if self._out_matches_in:
                self._selected_keys = self.out_keys or [
                    k for k in self._static_out.keys(True, True) if id(self._static_out.get(k)) not in before
                ]
        for key in self._captured_keys:
            src = tensordict.get(key, None)
            if src is None:
                msg = f"CudaGraphModule: the input lacks the key {key!r} that the graph was captured with."
                raise KeyError(msg)
            dest = self._static_in.get(key)
            if src.shape != dest.shape:
                msg = (
                    f"CudaGraphModule: the entry {key!r} has shape {tuple(src.shape)}, but the graph "
                    f"was captured with {tuple(dest.shape)}."
                )
                raise ValueError(msg)
            dest.copy_(src, non_blocking=True)
        cast(torch.cuda.CUDAGraph, self._graph).replay()  # captured above when it was None
        if self._out_matches_in:
            dest_td = tensordict if tensordict_out is None else tensordict_out
            for key in self._selected_keys or ():
                dest_td.set(key, self._static_out.get(key).clone())
            return dest_td
        return self._to_out(self._static_out.clone(), tensordict_out)

    def _to_out(self, out: Any, tensordict_out: Any) -> Any:
        if tensordict_out is None or not isinstance(out, TensorDictBase):
            return out
        keys = self.out_keys or list(out.keys(True, True))
        tensordict_out.update(out.select(*keys, strict=False))
        return tensordict_out

    # -------------------------------------------------------------- functions
    def _call_fn(self, *args: Any, **kwargs: Any) -> Any:
        leaves, spec = pytree.tree_flatten((args, kwargs))
        varying = [isinstance(v, torch.Tensor) or is_tensor_collection(v) for v in leaves]
        self.counter += 1
        if self.counter < self._warmup:
            return self._side_stream(self.module, *args, **kwargs)
        if self._graph is None:
            self._no_grad_inputs(leaves)
            self._spec = spec
            self._constants = [None if var else v for v, var in zip(leaves, varying)]
            self._static_in = [v.clone() if var else v for v, var in zip(leaves, varying)]
            s_args, s_kwargs = pytree.tree_unflatten(self._static_in, spec)
            self._static_out = self._capture(lambda: self.module(*s_args, **s_kwargs))
        elif spec != self._spec:
            msg = f"CudaGraphModule: the arguments' structure changed since the capture ({self._spec} vs {spec})."
            raise ValueError(msg)
        for src, dest, var, const in zip(leaves, self._static_in, varying, self._constants):
            if not var:
                if src is not const and src != const:
                    raise ValueError(_VARYING_ERROR)
                continue
            if src.shape != dest.shape:
                msg = f"CudaGraphModule: an input has shape {tuple(src.shape)}, captured with {tuple(dest.shape)}."
                raise ValueError(msg)
            if isinstance(dest, torch.Tensor):
                dest.copy_(src, non_blocking=True)
            else:
                dest.update_(src)
        cast(torch.cuda.CUDAGraph, self._graph).replay()  # captured above when it was None
        return pytree.tree_map(lambda x: x.clone() if isinstance(x, torch.Tensor) else x, self._static_out)
