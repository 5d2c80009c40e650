"""Checked by ``nox -s typecheck`` (listed in the root pyproject's ``[tool.mypy] files``,
with ``tensordict.tensorclass.mypy_plugin`` enabled): classes made with the
``@tensorclass`` decorator take ``batch_size``, ``device`` and ``names`` keywords,
whichever import path the decorator comes from. Not a pytest module (mypy reads it;
``test_typing.py`` runs mypy on failing examples too)."""

from __future__ import annotations

import torch

import tensordict.prototype
from tensordict import TensorClass, tensorclass
from tensordict.tensorclass import tensorclass as tensorclass_from_subpackage


@tensorclass
class Plain:
    x: torch.Tensor
    label: str = "a"


@tensorclass_from_subpackage(autocast=True)
class WithOptions:
    x: torch.Tensor
    count: int = 0


@tensordict.prototype.tensorclass
class FromPrototype:
    x: torch.Tensor


@tensorclass(shadow=True)
class ShadowsDevice:
    x: torch.Tensor
    device: str = "here"  # a field named device replaces the keyword


class Subclassed(TensorClass):
    x: torch.Tensor


def build() -> list[object]:
    """Every constructor form mypy must accept."""
    return [
        Plain(torch.zeros(3), batch_size=[3]),
        Plain(x=torch.zeros(3), label="b", batch_size=[3], device="cpu", names=["n"]),
        WithOptions(x=torch.zeros(2, 4), count=1, batch_size=torch.Size([2])),
        FromPrototype(x=torch.zeros(1), device=torch.device("cpu")),
        ShadowsDevice(torch.zeros(2), device="there", batch_size=[2]),
        Subclassed(x=torch.zeros(2), batch_size=[2], device=None),
    ]


label: str = Plain(torch.zeros(3), batch_size=[3]).label
count: int = WithOptions(x=torch.zeros(2), batch_size=[2]).count
