"""The tensorclass reference example: string annotations (``from __future__ import
annotations``) and a field typed with the class itself."""

from __future__ import annotations

from typing import Optional

import torch

from tensordict.prototype import tensorclass


@tensorclass
class MyData:
    floatdata: torch.Tensor
    intdata: torch.Tensor
    non_tensordata: str
    nested: Optional[MyData] = None  # noqa: UP045 - the documented spelling

    def check_nested(self):
        assert self.nested is not None


def test_reference_example():
    data = MyData(
        floatdata=torch.randn(3, 4, 5),
        intdata=torch.randint(10, (3, 4, 1)),
        non_tensordata="test",
        batch_size=[3, 4],
    )
    text = str(data)
    assert text.startswith("MyData(\n    floatdata=Tensor(shape=torch.Size([3, 4, 5]), device=cpu, dtype=torch.float32")
    assert "    non_tensordata=NonTensorData(data=test, batch_size=torch.Size([3, 4]), device=None)," in text
    assert "    nested=None," in text
    data.nested = MyData(
        floatdata=torch.zeros(3, 4, 5), intdata=torch.zeros(3, 4, 1), non_tensordata="inner", batch_size=[3, 4]
    )
    data.check_nested()
    sub = data[1:, 0]
    assert type(sub.nested) is MyData and sub.nested.non_tensordata == "inner"
    assert sub.batch_size == (2,)


def test_nested_tensordict_becomes_the_annotated_class():
    from tensordict import TensorDict

    data = MyData.from_tensordict(
        TensorDict({"floatdata": torch.zeros(2), "intdata": torch.zeros(2), "nested": {"floatdata": torch.ones(2)}}, [2]),
        {"non_tensordata": "outer"},
    )
    assert type(data.nested) is MyData and (data.nested.floatdata == 1).all()
