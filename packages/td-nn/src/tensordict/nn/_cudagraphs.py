"""``CudaGraphModule``: replay a TensorDict module (or a tensor function) from a captured
CUDA graph, removing the Python and kernel-launch overhead of each call."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from tensordict import NestedKey, TensorDictBase
from tensordict.nn._common import _normalize_keys

__all__ = ["CudaGraphModule"]


class CudaGraphModule:
    """Wraps a callable so that, after ``warmup`` eager calls, it replays a CUDA graph.

    For a TensorDict module, a call copies the ``in_keys`` of the input into static
    buffers, replays the graph and writes the ``out_keys`` (cloned) into the input
    TensorDict. For a function of tensors, it copies the arguments and returns clones
    of the outputs. Inputs must keep the same keys, shapes, dtypes and device from
    call to call, and the function must not branch on tensor values.

    On CPU (or without CUDA) the callable simply runs eagerly.

    Args:
        module (Callable): a TensorDict module or a function of tensors.
        warmup (int, optional): eager calls before capturing. Defaults to ``2``.
        in_keys (list of NestedKey, optional): the inputs (default: ``module.in_keys``).
        out_keys (list of NestedKey, optional): the outputs (default: ``module.out_keys``).
        device (torch.device, optional): the device of the graph. Defaults to the inputs'.

    Raises:
        ValueError: ``warmup < 1``.
        RuntimeError: a later call has different shapes/keys than the captured one.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> module = TensorDictModule(torch.nn.Linear(3, 4), in_keys=["x"], out_keys=["y"])
        >>> graphed = CudaGraphModule(module)
        >>> graphed(TensorDict(x=torch.randn(2, 3), batch_size=[2]))["y"].shape  # CPU: eager
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
        if not isinstance(warmup, int) or warmup < 1:
            msg = f"CudaGraphModule: warmup must be an integer >= 1, got {warmup!r}."
            raise ValueError(msg)
        self.module = module
        self.warmup = warmup
        self.in_keys = _normalize_keys(in_keys if in_keys is not None else getattr(module, "in_keys", None), "in_keys")
        self.out_keys = _normalize_keys(out_keys if out_keys is not None else getattr(module, "out_keys", None), "out_keys")
        self.out_keys = [k for k in self.out_keys if k != "_"]
        self.device = torch.device(device) if device is not None else None
        self.counter = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self._static_in: Any = None
        self._static_out: Any = None
        self._signature: Any = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.__dict__["module"], name)

    @staticmethod
    def _sig(values: list) -> tuple:
        return tuple((tuple(v.shape), v.dtype, v.device) for v in values)

    def _use_graph(self, tensors: list) -> bool:
        if not torch.cuda.is_available():
            return False
        dev = self.device or (tensors[0].device if tensors else None)
        return dev is not None and dev.type == "cuda"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if args and isinstance(args[0], TensorDictBase):
            return self._call_td(args[0], *args[1:], **kwargs)
        return self._call_tensors(*args, **kwargs)

    # -------------------------------------------------------------- TensorDict inputs
    def _call_td(self, tensordict: TensorDictBase, *args: Any, **kwargs: Any) -> TensorDictBase:
        keys = self.in_keys or [k for k in tensordict.keys(True, True)]
        inputs = [tensordict.get(k) for k in keys]
        if not self._use_graph(inputs) or args or kwargs:
            return self.module(tensordict, *args, **kwargs)
        if self.counter < self.warmup:
            self.counter += 1
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                out = self.module(tensordict)
            torch.cuda.current_stream().wait_stream(stream)
            return out
        sig = self._sig(inputs)
        if self.graph is None:
            self._signature = sig
            self._static_in = tensordict.select(*keys).clone()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self._static_out = self.module(self._static_in)
        elif sig != self._signature:
            msg = (
                "CudaGraphModule: the inputs changed since the graph was captured "
                f"(captured {self._signature}, got {sig}). Keep keys, shapes, dtypes and device fixed."
            )
            raise RuntimeError(msg)
        else:
            for key, src in zip(keys, inputs):
                self._static_in.get(key).copy_(src, non_blocking=True)
        self.graph.replay()
        out_keys = self.out_keys or [k for k in self._static_out.keys(True, True) if k not in keys]
        for key in out_keys:
            tensordict.set(key, self._static_out.get(key).clone())
        return tensordict

    # -------------------------------------------------------------- tensor inputs
    def _call_tensors(self, *args: Any, **kwargs: Any) -> Any:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if kwargs or not self._use_graph(tensors) or len(tensors) != len(args):
            return self.module(*args, **kwargs)
        if self.counter < self.warmup:
            self.counter += 1
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                out = self.module(*args)
            torch.cuda.current_stream().wait_stream(stream)
            return out
        sig = self._sig(tensors)
        if self.graph is None:
            self._signature = sig
            self._static_in = [t.clone() for t in tensors]
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self._static_out = self.module(*self._static_in)
        elif sig != self._signature:
            msg = (
                "CudaGraphModule: the inputs changed since the graph was captured "
                f"(captured {self._signature}, got {sig}). Keep shapes, dtypes and device fixed."
            )
            raise RuntimeError(msg)
        for dest, src in zip(self._static_in, tensors):
            dest.copy_(src, non_blocking=True)
        self.graph.replay()
        out = self._static_out
        if isinstance(out, torch.Tensor):
            return out.clone()
        if isinstance(out, (tuple, list)):
            return type(out)(o.clone() if isinstance(o, torch.Tensor) else o for o in out)
        return out

