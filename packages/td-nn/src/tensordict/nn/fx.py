"""``torch.fx`` tracing of TensorDict modules (prototype).

``torch.fx.symbolic_trace`` cannot trace a module whose input is a TensorDict and
whose behaviour depends on its keys. :func:`symbolic_trace` traces the wrapped
modules instead and stitches their graphs together along the keys: the result is a
:class:`TDGraphModule` whose graph reads the in_keys from its TensorDict input
(``operator.getitem``), calls the traced steps and returns the out_keys, which its
``forward`` writes into the TensorDict.
"""

from __future__ import annotations

import operator
from typing import Any

from torch import fx, nn

from tensordict import NestedKey, TensorDictBase

__all__ = ["TDGraphModule", "symbolic_trace"]


class TDGraphModule(nn.Module):
    """The module :func:`symbolic_trace` returns: an FX graph reading and writing a TensorDict.

    Args:
        graph_module (torch.fx.GraphModule): a graph taking a TensorDict and returning
            a tuple of values, one per out key.
        out_keys (list of NestedKey): where the values are written.
    """

    def __init__(self, graph_module: fx.GraphModule, out_keys: list[NestedKey]) -> None:
        super().__init__()
        self.out_keys = list(out_keys)
        self._gm = graph_module

    @property
    def graph(self) -> fx.Graph:
        """The traced graph."""
        return self._gm.graph

    @property
    def code(self) -> str:
        """The Python code generated from the graph."""
        return self._gm.code

    def forward(self, tensordict: TensorDictBase, tensordict_out: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        """Runs the graph on ``tensordict`` and writes the outputs at ``out_keys``."""
        outputs = self._gm(tensordict, **kwargs)
        dest = tensordict if tensordict_out is None else tensordict_out
        for key, value in zip(self.out_keys, outputs):
            dest.set(key, value)
        return dest


def _steps(module: nn.Module, prefix: str = "") -> list:
    """``(prefix, step)`` pairs: each TensorDictModule and where its wrapped module's
    submodules live in the traced graph (``linear`` for a traced TensorDictModule,
    ``0.module.linear`` for the first step of a traced TensorDictSequential)."""
    from tensordict.nn._module import TensorDictModule
    from tensordict.nn._probabilistic import ProbabilisticTensorDictModule
    from tensordict.nn._sequence import TensorDictSequential

    if isinstance(module, TensorDictSequential):
        out = []
        for i, sub in enumerate(module._modules_list()):
            sub_prefix = f"{prefix}{i}."
            if not isinstance(sub, TensorDictSequential):
                sub_prefix += "module."
            out.extend(_steps(sub, sub_prefix))
        return out
    if isinstance(module, ProbabilisticTensorDictModule) or not isinstance(module, TensorDictModule):
        msg = (
            f"symbolic_trace supports TensorDictModule and TensorDictSequential, got {type(module).__name__}."
        )
        raise TypeError(msg)
    return [(prefix, module)]


def symbolic_trace(td_module: nn.Module) -> TDGraphModule:
    """Traces a ``TensorDictModule`` or a ``TensorDictSequential`` into an FX graph.

    Every step's wrapped module (or function) is traced with
    ``torch.fx.symbolic_trace``; the graphs are joined along the keys.

    Args:
        td_module (TensorDictModule or TensorDictSequential): the module to trace.

    Returns:
        a :class:`TDGraphModule` computing the same outputs.

    Raises:
        TypeError: a step is not a (non-probabilistic) TensorDictModule.

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule, TensorDictSequential
        >>> seq = TensorDictSequential(
        ...     TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["hidden"]),
        ...     TensorDictModule(nn.ReLU(), in_keys=["hidden"], out_keys=["y"]),
        ... )
        >>> graph_module = symbolic_trace(seq)
        >>> td = graph_module(TensorDict(x=torch.ones(2, 3), batch_size=[2]))
        >>> sorted(td.keys())
        ['hidden', 'x', 'y']
        >>> torch.equal(td["y"], seq(TensorDict(x=torch.ones(2, 3), batch_size=[2]))["y"])
        True
    """
    steps = _steps(td_module)
    root: dict = {}  # qualified name -> submodule / parameter / buffer of the traced steps
    graph = fx.Graph()
    td_node = graph.placeholder("tensordict")
    env: dict = {}
    written: list = []

    def read(key: NestedKey) -> fx.Node:
        if key not in env:
            env[key] = graph.call_function(operator.getitem, (td_node, key))
        return env[key]

    for i, (prefix, step) in enumerate(steps):
        inner = step.module
        traced = fx.symbolic_trace(inner)
        for node in traced.graph.nodes:
            if node.op in ("call_module", "get_attr"):
                target = str(node.target)
                attr = traced.get_submodule(target) if node.op == "call_module" else _get_attr(traced, target)
                root[f"{prefix}{target}"] = attr
                node.target = f"{prefix}{node.target}"
        placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"]
        args = [read(k) for k in step.in_keys]
        kwargs_names = step._kwargs
        val_map: dict = {}
        if kwargs_names is None:
            for ph, arg in zip(placeholders, args):
                val_map[ph] = arg
        else:
            by_name = dict(zip(kwargs_names, args))
            for ph in placeholders:
                if ph.target in by_name:
                    val_map[ph] = by_name[ph.target]
        for ph in placeholders:
            if ph not in val_map:
                default = ph.args[0] if ph.args else None
                val_map[ph] = default
        out = graph.graph_copy(traced.graph, val_map)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(outs) != len(step.out_keys_source):
            msg = (
                f"symbolic_trace: step {i} ({type(inner).__name__}) returns {len(outs)} value(s) "
                f"but has {len(step.out_keys_source)} out_keys {step.out_keys_source}."
            )
            raise ValueError(msg)
        for key, node in zip(step.out_keys_source, outs):
            if key == "_" or key not in step.out_keys:
                continue
            env[key] = node
            if key not in written:
                written.append(key)
    out_keys = [k for k in written if k in td_module.out_keys]  # type: ignore[operator]
    graph.output(tuple(env[k] for k in out_keys))
    gm = fx.GraphModule(root, graph)
    return TDGraphModule(gm, out_keys)


def _get_attr(module: nn.Module, target: str) -> Any:
    owner, _, name = target.rpartition(".")
    return getattr(module.get_submodule(owner) if owner else module, name)



