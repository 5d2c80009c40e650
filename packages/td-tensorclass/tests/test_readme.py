"""The seed README's tensorclass example, unchanged, and the documented repr form."""

import re

import torch


def test_readme_example_runs_unchanged(capsys):
    import torch

    from tensordict.prototype import tensorclass

    @tensorclass
    class MyData:
        image: torch.Tensor
        mask: torch.Tensor
        label: torch.Tensor

        def mask_image(self):
            return self.image[self.mask.expand_as(self.image)].view(*self.batch_size, -1)

        def select_label(self, label):
            return self[self.label == label]

    images = torch.randn(100, 3, 64, 64)
    label = torch.randint(10, (100,))
    mask = torch.zeros(1, 64, 64, dtype=torch.bool).bernoulli_().expand(100, 1, 64, 64)

    data = MyData(images, mask, label=label, batch_size=[100])

    print(data.select_label(1))
    print(data.mask_image().shape)
    print(data.reshape(10, 10))

    out = capsys.readouterr().out
    n = int((label == 1).sum())
    expected_first = (
        "MyData(\n"
        f"    image=Tensor(shape=torch.Size([{n}, 3, 64, 64]), device=cpu, dtype=torch.float32, is_shared=False),\n"
        f"    label=Tensor(shape=torch.Size([{n}]), device=cpu, dtype=torch.int64, is_shared=False),\n"
        f"    mask=Tensor(shape=torch.Size([{n}, 1, 64, 64]), device=cpu, dtype=torch.bool, is_shared=False),\n"
        f"    batch_size=torch.Size([{n}]),\n"
        "    device=None,\n"
        "    is_shared=False)\n"
    )
    assert out.startswith(expected_first), out
    k = int(mask[0].sum()) * 3
    assert f"torch.Size([100, {k}])\n" in out
    expected_reshape = (
        "MyData(\n"
        "    image=Tensor(shape=torch.Size([10, 10, 3, 64, 64]), device=cpu, dtype=torch.float32, is_shared=False),\n"
        "    label=Tensor(shape=torch.Size([10, 10]), device=cpu, dtype=torch.int64, is_shared=False),\n"
        "    mask=Tensor(shape=torch.Size([10, 10, 1, 64, 64]), device=cpu, dtype=torch.bool, is_shared=False),\n"
        "    batch_size=torch.Size([10, 10]),\n"
        "    device=None,\n"
        "    is_shared=False)\n"
    )
    assert out.endswith(expected_reshape), out
    sub = data.select_label(1)
    assert type(sub) is MyData
    assert (sub.label == 1).all()


def test_repr_of_non_tensor_none_and_nested_fields():
    from typing import Any

    from tensordict import TensorClass

    class Inner(TensorClass):
        x: torch.Tensor

    class Foo(TensorClass):
        tensor: torch.Tensor
        non_tensor: Any
        inner: Any = None
        nested: Any = None

    foo = Foo(
        tensor=torch.randn(3),
        non_tensor="a string!",
        inner=Inner(x=torch.zeros(3, 2), batch_size=[3]),
        batch_size=[3],
    )
    text = repr(foo)
    assert text == str(foo)
    lines = text.splitlines()
    assert lines[0] == "Foo("
    assert lines[1] == "    inner=Inner("
    assert lines[2].startswith("        x=Tensor(shape=torch.Size([3, 2])")
    assert "    non_tensor=NonTensorData(data=a string!, batch_size=torch.Size([3]), device=None)," in lines
    assert lines[-4:] == ["    nested=None,", "    batch_size=torch.Size([3]),", "    device=None,", "    is_shared=False)"]
    # fields in the TensorDict and non-tensor ones are sorted together, None fields last
    keys = [re.match(r"    (\w+)=", line).group(1) for line in lines if re.match(r"    \w+=", line)]
    assert keys[:3] == ["inner", "non_tensor", "tensor"]
