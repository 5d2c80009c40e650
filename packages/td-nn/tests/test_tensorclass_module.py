"""TensorClassModuleBase: modules typed by tensorclasses, and their TensorDict twin."""

import pytest
import torch

pytest.importorskip("tensordict.tensorclass", reason="needs td-tensorclass")

from tensordict import TensorClass  # noqa: E402
from tensordict.nn import TensorClassModuleBase, TensorDictSequential  # noqa: E402


class Pair(TensorClass):
    a: torch.Tensor
    b: torch.Tensor


class SumDiff(TensorClass):
    total: torch.Tensor
    diff: torch.Tensor


class Both(TensorClass):
    pair: Pair
    result: SumDiff


class AddSub(TensorClassModuleBase[Pair, SumDiff]):
    def forward(self, x: Pair) -> SumDiff:
        return SumDiff(total=x.a + x.b, diff=x.a - x.b, batch_size=x.batch_size)


class Nested(TensorClassModuleBase[Pair, Both]):
    def __init__(self):
        super().__init__()
        self.inner = AddSub()

    def forward(self, x: Pair) -> Both:
        return Both(pair=x, result=self.inner(x), batch_size=x.batch_size)


@pytest.mark.parametrize("batch_size", [[], [3], [2, 3]])
def test_forward_keeps_batch_size(batch_size):
    x = Pair(a=torch.randn(batch_size), b=torch.randn(batch_size), batch_size=batch_size)
    out = AddSub()(x)
    assert isinstance(out, SumDiff) and out.batch_size == torch.Size(batch_size)
    torch.testing.assert_close(out.total, x.a + x.b)


def test_as_td_module_keys_and_call():
    td_module = Nested().as_td_module()
    assert td_module.in_keys == ["a", "b"]
    assert set(td_module.out_keys) == {("pair", "a"), ("pair", "b"), ("result", "total"), ("result", "diff")}
    td = Pair(a=torch.tensor(10.0), b=torch.tensor(5.0), batch_size=[]).to_tensordict()
    out = TensorDictSequential(td_module)(td)
    assert out["result", "total"] == 15 and out["result", "diff"] == 5


def test_non_tensorclass_types_cannot_convert():
    class Plain(TensorClassModuleBase[torch.Tensor, torch.Tensor]):
        def forward(self, x):
            return x + 1

    with pytest.raises(ValueError, match="both input and output type as TensorClass"):
        Plain().as_td_module()


def test_docstring_examples():
    import doctest

    import tensordict.nn._tensorclass_module as module

    assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0


def test_tensordict_module_on_a_tensorclass():
    from torch import nn

    from tensordict import tensorclass
    from tensordict.nn import TensorDictModule

    @tensorclass
    class Data:
        inputs: torch.Tensor
        outputs: torch.Tensor = None

    data = Data(inputs=torch.randn(3, 3), batch_size=[3])
    assert TensorDictModule(nn.Linear(3, 4), in_keys=["inputs"], out_keys=["outputs"])(data) is data
    assert data.outputs.shape == (3, 4) and data.batch_size == (3,)
