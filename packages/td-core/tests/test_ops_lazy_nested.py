"""Element-wise math and reductions on a TensorDict that holds a lazy stack.

The element-wise ops walk a nested lazy stack through its stacked TensorDicts: every
key is kept (also keys only some stacked TensorDicts hold), the result stays a lazy
stack and in-place ops write into the stacked TensorDicts' own tensors. Reductions and
cumulative ops, which act along batch dims across the stack, refuse a lazy stack with
such keys (a KeyError naming the key) instead of dropping them.
"""

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict


def hetero(stack_dim=0):
    """``{"super": lazy stack of {"a"} and {"a", "b"}}`` with batch ``[3]`` per part."""
    parts = [
        TensorDict({"a": -torch.arange(1.0, 4.0)}, [3]),
        TensorDict({"a": -torch.arange(4.0, 7.0), "b": -torch.full((3, 2), 2.0)}, [3]),
    ]
    stack = LazyStackedTensorDict(*parts, stack_dim=stack_dim)
    return TensorDict({"super": stack, "x": torch.ones(*stack.batch_size[:1])}, stack.batch_size[:1])


def parts_of(td):
    return td["super"].tensordicts


def test_binary_keeps_exclusive_keys_and_stays_lazy():
    td = hetero()
    out = td + td
    assert isinstance(out["super"], LazyStackedTensorDict)
    p0, p1 = parts_of(out)
    assert set(p0.keys()) == {"a"}
    assert set(p1.keys()) == {"a", "b"}
    torch.testing.assert_close(p1["b"], torch.full((3, 2), -4.0))
    assert ((td + td) == td * 2).all()
    # the operand is untouched
    torch.testing.assert_close(parts_of(td)[1]["b"], torch.full((3, 2), -2.0))


@pytest.mark.parametrize("op", ["exp", "abs", "neg", "sigmoid", "square", "isnan"])
def test_unary_keeps_exclusive_keys(op):
    td = hetero()
    out = getattr(td, op)()
    p1 = parts_of(out)[1]
    assert set(p1.keys()) == {"a", "b"}
    torch.testing.assert_close(p1["b"], getattr(torch, op)(parts_of(td)[1]["b"]))


def test_inplace_writes_into_the_stacked_tensordicts():
    td = hetero()
    b = parts_of(td)[1]["b"]
    td.abs_()
    assert (td > 0).all()
    assert parts_of(td)[1]["b"] is b  # written in place, same tensor
    torch.testing.assert_close(b, torch.full((3, 2), 2.0))
    td += hetero()
    torch.testing.assert_close(parts_of(td)[1]["b"], torch.zeros(3, 2))
    torch.testing.assert_close(parts_of(td)[0]["a"], torch.zeros(3))
    td.mul_(2).add_(1)
    torch.testing.assert_close(parts_of(td)[1]["b"], torch.ones(3, 2))


def test_inplace_on_homogeneous_nested_stack_writes_through():
    stack = LazyStackedTensorDict(
        TensorDict({"a": torch.ones(3), "n": {"c": torch.ones(3)}}, [3]),
        TensorDict({"a": torch.ones(3), "n": {"c": torch.ones(3)}}, [3]),
    )
    td = TensorDict({"s": stack}, [2])
    td.mul_(3)
    td += 1
    torch.testing.assert_close(stack.tensordicts[1]["n", "c"], torch.full((3,), 4.0))
    assert td.sum()["s", "a"] == 24


def test_chain_of_ops_matches_upstream_example():
    td = hetero()
    td += hetero()
    assert (td == hetero() * 2).all()
    assert ((td.abs() ** 2).clamp_max(td) == td).all()


def test_binary_with_a_tensor_cut_along_the_stack_dim():
    td = hetero()
    w = torch.tensor([2.0, 3.0])  # one weight per batch element (the stack dim here)
    out = td * w
    p0, p1 = parts_of(out)
    torch.testing.assert_close(p0["a"], parts_of(td)[0]["a"] * 2)
    torch.testing.assert_close(p1["b"], parts_of(td)[1]["b"] * 3)
    torch.testing.assert_close(out["x"], torch.tensor([2.0, 3.0]))


def test_stack_dim_one_and_ternary():
    td = hetero(stack_dim=1)
    assert td["super"].batch_size == (3, 2)
    out = td.lerp(td * 0, 0.5)
    p1 = parts_of(out)[1]
    torch.testing.assert_close(p1["b"], torch.full((3, 2), -1.0))
    td.clamp_min_(-1.5)
    torch.testing.assert_close(parts_of(td)[1]["b"], torch.full((3, 2), -1.5))


def test_mismatched_other_raises_naming_the_key():
    td = hetero()
    other = TensorDict(
        {"super": LazyStackedTensorDict(TensorDict({"a": torch.ones(3)}, [3]), TensorDict({"a": torch.ones(3)}, [3])), "x": torch.ones(2)},
        [2],
    )
    with pytest.raises(KeyError, match="'b'"):
        td + other


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.sum(),
        lambda t: t.sum(0),
        lambda t: t.mean(reduce=True),
        lambda t: t.max(),
        lambda t: t.max(0),
        lambda t: t.norm(),
        lambda t: t.std(0),
        lambda t: t.cumsum(0),
        lambda t: t.cummax(0),
        lambda t: t.all(0),
        lambda t: t.any(0),
    ],
)
def test_reductions_refuse_keys_held_by_some_parts(call):
    td = hetero()
    for target in (td, td["super"]):
        with pytest.raises(KeyError, match="key 'b' is held by stacked TensorDict 1"):
            call(target)


def test_whole_all_any_see_exclusive_keys():
    td = hetero().abs()
    assert td.all()
    parts_of(td)[1]["b"][0, 0] = 0
    assert not td.all()
    assert td.any()


def test_reductions_on_homogeneous_stack_still_work():
    td = hetero().exclude(("super", "b"))
    assert td.sum()["super", "a"] == -21
    torch.testing.assert_close(td.cumsum(0)["super", "a"][1], torch.tensor([-5.0, -7.0, -9.0]))


@pytest.mark.parametrize("op", ["__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"])
def test_comparisons_keep_exclusive_keys(op):
    td = hetero()
    out = getattr(td, op)(hetero() * 2)
    assert isinstance(out["super"], LazyStackedTensorDict)
    assert set(parts_of(out)[1].keys()) == {"a", "b"}
    other = hetero()
    parts_of(other)[1]["b"][0, 0] = 5.0  # only an exclusive key differs
    assert not (td == other).all()
