"""Modules typed by tensorclasses: ``TensorClassModuleBase[InputClass, OutputClass]``.

A subclass declares its input and output tensorclass types as the two type arguments
and writes ``forward(x: InputClass) -> OutputClass``. :meth:`TensorClassModuleBase.as_td_module`
gives the TensorDict-facing twin: a :class:`~tensordict.nn.TensorDictModuleBase` whose
``in_keys``/``out_keys`` are the leaf fields of the two classes (nested tensorclass
fields become nested keys), for TensorDict pipelines, ``TensorDictSequential`` or export.
"""

from __future__ import annotations

import typing
from typing import Any, Generic, TypeVar

from torch import nn

from tensordict import TensorDictBase, is_tensor_collection
from tensordict.nn._common import TensorDictModuleBase

__all__ = ["TensorClassModuleBase", "TensorClassModuleWrapper"]

InputClass = TypeVar("InputClass")
OutputClass = TypeVar("OutputClass")


def _is_tensorclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and bool(getattr(tp, "_is_tensorclass", False))


def _leaf_keys(cls: type, prefix: tuple = ()) -> list:
    """The leaf keys of a tensorclass type; nested tensorclass fields are opened."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - unresolvable annotations: read them raw
        hints = dict(getattr(cls, "__annotations__", {}))
    keys: list = []
    for name, tp in hints.items():
        if name.startswith("_") or typing.get_origin(tp) is typing.ClassVar:
            continue
        if _is_tensorclass_type(tp):
            keys.extend(_leaf_keys(tp, (*prefix, name)))
        else:
            path = (*prefix, name)
            keys.append(path[0] if len(path) == 1 else path)
    return keys


class TensorClassModuleBase(nn.Module, Generic[InputClass, OutputClass]):
    """An ``nn.Module`` from one tensorclass type to another.

    Subclass it as ``TensorClassModuleBase[In, Out]`` and write ``forward(x: In) -> Out``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorClass
        >>> class Pair(TensorClass):
        ...     a: torch.Tensor
        ...     b: torch.Tensor
        >>> class Sum(TensorClass):
        ...     total: torch.Tensor
        >>> class Add(TensorClassModuleBase[Pair, Sum]):
        ...     def forward(self, x: Pair) -> Sum:
        ...         return Sum(total=x.a + x.b, batch_size=x.batch_size)
        >>> Add()(Pair(a=torch.ones(2), b=torch.ones(2), batch_size=[2])).total
        tensor([2., 2.])
        >>> Add().as_td_module().in_keys
        ['a', 'b']
    """

    _input_class: Any = None
    _output_class: Any = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            if typing.get_origin(base) is TensorClassModuleBase:
                args = typing.get_args(base)
                if len(args) == 2:
                    cls._input_class, cls._output_class = args

    def as_td_module(self) -> TensorDictModuleBase:
        """The module as a :class:`TensorDictModuleBase` reading and writing TensorDicts.

        Returns:
            a module whose ``in_keys`` are the input class's leaf fields and
            ``out_keys`` the output class's (nested tensorclass fields as nested keys).

        Raises:
            ValueError: the input or output type is not a tensorclass.
        """
        return TensorClassModuleWrapper(self)


class TensorClassModuleWrapper(TensorDictModuleBase):
    """A :class:`TensorClassModuleBase` that reads and returns TensorDicts.

    The input TensorDict's ``in_keys`` become the input tensorclass, the module runs,
    and its output tensorclass comes back as a new TensorDict holding only the output
    fields (the input is not written to).

    Args:
        module (TensorClassModuleBase): the module; its input and output types must be
            tensorclasses. It is the ``tc_module`` attribute.

    Raises:
        ValueError: the input or output type is not a tensorclass.

    Examples:
        >>> import torch
        >>> from tensordict import TensorClass, TensorDict
        >>> class In(TensorClass):
        ...     x: torch.Tensor
        >>> class Out(TensorClass):
        ...     y: torch.Tensor
        >>> class AddOne(TensorClassModuleBase[In, Out]):
        ...     def forward(self, data: In) -> Out:
        ...         return Out(y=data.x + 1, batch_size=data.batch_size)
        >>> wrapper = TensorClassModuleWrapper(AddOne())
        >>> wrapper(TensorDict(x=torch.zeros(2), batch_size=[2]))["y"]
        tensor([1., 1.])
    """

    def __init__(self, module: TensorClassModuleBase) -> None:
        super().__init__()
        in_cls, out_cls = module._input_class, module._output_class
        if not (_is_tensorclass_type(in_cls) and _is_tensorclass_type(out_cls)):
            msg = (
                "Only TensorClassModuleBase implementations with both input and output type as TensorClass "
                f"can be converted to a TensorDictModule; {type(module).__name__} has input "
                f"{getattr(in_cls, '__name__', in_cls)} and output {getattr(out_cls, '__name__', out_cls)}."
            )
            raise ValueError(msg)
        self.tc_module = module
        self._in_cls = in_cls
        self.in_keys = _leaf_keys(in_cls)
        self.out_keys = _leaf_keys(out_cls)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        data = self._in_cls.from_tensordict(tensordict.select(*self.in_keys, strict=False))
        out = self.tc_module(data)
        return out.to_tensordict() if is_tensor_collection(out) and not isinstance(out, TensorDictBase) else out
