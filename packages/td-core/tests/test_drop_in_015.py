"""Behaviours of tensordict 0.15.3 that used to raise or differ here (issue 31).

Each expectation was checked by running the same code on tensordict 0.15.3; the file
uses public names only, so it runs unchanged against either implementation."""

import pytest
import torch

from tensordict import TensorDict
from tensordict.utils import isin, remove_duplicates


def _pair():
    td = TensorDict(
        {"t": torch.tensor([[1, 2, 3], [4, 5, 6], [1, 2, 3], [7, 8, 9]]), "n": {"x": torch.tensor([[0], [1], [0], [3]])}},
        batch_size=[4],
    )
    ref = TensorDict({"t": torch.tensor([[1, 2, 3], [4, 5, 6], [0, 0, 0]]), "n": {"x": torch.tensor([[0], [5], [6]])}}, [3])
    return td, ref


@pytest.mark.parametrize("dim", [0, -1])
def test_isin_dim_counts_batch_dims(dim):
    td, ref = _pair()
    assert isin(td, ref, "t", dim).tolist() == [True, True, True, False]


@pytest.mark.parametrize("dim", [1, -2, 2])
def test_isin_dim_outside_batch(dim):
    td, ref = _pair()
    with pytest.raises(ValueError, match=f"The specified dimension '{dim}' is invalid for an input TensorDict"):
        isin(td, ref, "t", dim)


def test_isin_nested_key_and_errors():
    td, ref = _pair()
    assert isin(td, ref, ("n", "x")).tolist() == [True, False, True, False]
    with pytest.raises(KeyError, match="Key 'n' not found in input or not a tensor"):
        isin(td, ref, "n")  # a nested TensorDict is not a tensor
    with pytest.raises(KeyError, match="Key 'zz' not found in input"):
        isin(td, ref, "zz")
    with pytest.raises(KeyError, match="Key 't' not found in reference"):
        isin(td, TensorDict(batch_size=[3]), "t")
    with pytest.raises(ValueError, match="number of dimensions in the batch size"):
        isin(TensorDict(t=torch.zeros(4, 3)), ref, "t")
    with pytest.raises(RuntimeError):
        isin(td, TensorDict(t=torch.zeros(3, 2), batch_size=[3]), "t")


def test_isin_second_batch_dim():
    td = TensorDict(a=torch.ones(4, 4), batch_size=[4, 4])
    ref = TensorDict(a=torch.ones(4, 4), batch_size=[4, 4])
    td["a"][:, 0] = 2
    assert isin(td, ref, "a", 1).tolist() == [False, True, True, True]
    assert isin(td, ref, "a", -1).tolist() == [False, True, True, True]


def test_remove_duplicates_sorted_first_occurrences_and_inverse():
    td = TensorDict(a=torch.tensor([5, 3, 5, 1, 3]), b=torch.arange(5), batch_size=[5])
    out, inverse = remove_duplicates(td, "a", return_indices=True)
    assert out["a"].tolist() == [1, 3, 5]  # torch.unique's order
    assert out["b"].tolist() == [3, 1, 0]  # the first occurrence of each value
    assert inverse.tolist() == [2, 1, 2, 0, 1]


def test_remove_duplicates_nested_key_and_second_dim():
    td, _ = _pair()
    out = remove_duplicates(td, ("n", "x"))
    assert out.batch_size == (3,) and out["t"].tolist() == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    td2 = TensorDict(a=torch.ones(4, 4), b=torch.ones(4, 4), batch_size=[4, 4])
    assert remove_duplicates(td2, "a", 1).batch_size == (4, 1)
    assert remove_duplicates(td2, "a", -2).batch_size == (1, 4)


def test_remove_duplicates_errors():
    td, _ = _pair()
    with pytest.raises(KeyError, match="The key 'zz' does not exist in the TensorDict"):
        remove_duplicates(td, "zz")
    with pytest.raises(KeyError, match="The key 'n' does not point to a tensor"):
        remove_duplicates(td, "n")
    for dim in (1, -2):
        with pytest.raises(ValueError, match=f"The specified dimension '{dim}' is invalid for a TensorDict"):
            remove_duplicates(td, "t", dim)
    with pytest.raises(ValueError, match="invalid for a TensorDict with batch size"):
        remove_duplicates(TensorDict(a=1), "a")


def test_from_list_of_ragged_samples_is_a_lazy_stack():
    from tensordict import LazyStackedTensorDict

    ragged = [{"a": torch.zeros(3), "b": torch.zeros(2)}, {"a": torch.zeros(4), "b": torch.ones(2)}]
    for out in (TensorDict.from_list(ragged), LazyStackedTensorDict.from_list(ragged)):
        assert isinstance(out, LazyStackedTensorDict) and out.batch_size == (2,)
        assert out[1]["a"].shape == (4,) and out["b"][1].tolist() == [1, 1]
    same = [{"a": torch.zeros(3)}, {"a": torch.ones(3)}]
    assert type(TensorDict.from_list(same)) is TensorDict
    # the lazy class always gives a lazy stack, whatever ``lazy`` says
    assert isinstance(LazyStackedTensorDict.from_list(same, lazy=False), LazyStackedTensorDict)
    nested = TensorDict.from_list([{"n": {"a": torch.zeros(3)}, "b": 0}, {"n": {"a": torch.zeros(4)}, "b": 1}])
    assert type(nested) is TensorDict and isinstance(nested["n"], LazyStackedTensorDict)


def test_get_item_shape_of_ragged_lazy_stack():
    from tensordict import LazyStackedTensorDict

    s = LazyStackedTensorDict(TensorDict(a=torch.zeros(3)), TensorDict(a=torch.zeros(4)))
    assert s.get_item_shape("a") == (2, -1)
    s = LazyStackedTensorDict(
        TensorDict(a=torch.zeros(3, 2), n={"b": torch.zeros(3)}, batch_size=[3]),
        TensorDict(a=torch.zeros(3, 4), n={"b": torch.zeros(3, 5)}, batch_size=[3]),
    )
    assert s.get_item_shape("a") == (2, 3, -1)
    assert s.get_item_shape("n") == (2, 3)
    assert s.get_item_shape(("n", "b")) == (-1,)  # different numbers of dims
    outer = LazyStackedTensorDict(s, s)
    assert outer.get_item_shape("a") == (2, 2, 3, -1) and outer.get_item_shape(("n", "b")) == (2, -1)
    s1 = LazyStackedTensorDict(
        TensorDict(a=torch.zeros(3, 2), batch_size=[3]), TensorDict(a=torch.zeros(3, 4), batch_size=[3]), stack_dim=1
    )
    assert s1.get_item_shape("a") == (3, 2, -1)
    with pytest.raises(KeyError):
        s.get_item_shape("zz")


def test_get_at_missing_entry_gives_none():
    from tensordict import LazyStackedTensorDict

    td = TensorDict(a=torch.zeros(3), n={"b": torch.zeros(3)}, batch_size=[3])
    assert td.get_at("zz", 0) is None
    assert td.get_at(("n", "zz"), 0) is None and td.get_at(("zz", "b"), 0) is None
    assert td.get_at("zz", 0, default=5) == 5
    assert td.get_at(("n", "b"), 1) == 0
    assert LazyStackedTensorDict(TensorDict(a=1), TensorDict(b=1)).get_at("a", 0) is None


@pytest.mark.parametrize("stack_dim", [0, 1])
def test_lazy_stack_keeps_an_unbatched_tensor_whole(stack_dim):
    from tensordict import UnbatchedTensor, lazy_stack

    td = TensorDict(a=torch.zeros(3), u=UnbatchedTensor(torch.ones(5, 2)), batch_size=[3])
    stacked = lazy_stack([td, td], stack_dim)
    value = stacked["u"]
    assert isinstance(value, UnbatchedTensor) and value.shape == (5, 2)
    assert value.batch_size == stacked.batch_size
    assert stacked.get_item_shape("u") == (5, 2)
    dense = stacked.to_tensordict()
    assert isinstance(dense["u"], UnbatchedTensor) and dense["u"].batch_size == stacked.batch_size
    outer = lazy_stack([TensorDict(n=td, batch_size=[3]), TensorDict(n=td, batch_size=[3])])
    assert isinstance(outer["n", "u"], UnbatchedTensor) and outer["n", "u"].shape == (5, 2)


def test_strided_nested_tensor_leaf():
    # a nested tensor of the strided layout has no .shape; tensordict 0.15 shows -1 for ragged dims
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "prototype stage" warning for the strided layout
        nt = torch.nested.nested_tensor([torch.zeros(3, 2), torch.ones(4, 2)])
    td = TensorDict(a=nt, b=torch.zeros(2), batch_size=[2])
    assert "-1" in repr(td) and td["a"].is_nested
    assert td.get_item_shape("a") == (2, -1, 2)
    assert td[1]["a"].shape == (4, 2)
    assert td.apply(lambda x: x * 2)["a"].is_nested
    assert TensorDict(batch_size=[2]).set(("x", "a"), nt)["x", "a"].is_nested
    assert TensorDict.from_dict({"a": nt}, batch_size=[2])["a"].is_nested
    assert TensorDict(batch_size=[2]).update({"a": nt})["a"].is_nested
    assert td.unsqueeze(-1).batch_size == (2, 1)
    with pytest.raises(RuntimeError, match="batch"):
        TensorDict(a=nt, batch_size=[3])


def test_typed_tensordict_field_write_reaches_a_lazy_stack():
    from torch import Tensor

    from tensordict import LazyStackedTensorDict, TypedTensorDict

    class Pair(TypedTensorDict):
        a: Tensor
        b: Tensor

    stack = LazyStackedTensorDict(*[TensorDict(a=torch.zeros(3), b=torch.zeros(2)) for _ in range(4)], stack_dim=0)
    typed = Pair.from_tensordict(stack)
    typed.a = torch.ones(4, 3)
    assert (stack["a"] == 1).all() and (stack.tensordicts[2]["a"] == 1).all()
    assert (typed.a == 1).all()


def test_linked_list_writes_reach_the_stack():
    td = TensorDict(batch_size=[3])
    td["names"] = ["a", "b", "c"]
    values = td["names"]
    values[0] = "z"
    assert td.get("names").tolist() == ["z", "b", "c"] and values.tolist() == ["z", "b", "c"]
    values[1:] = ["x", "y"]
    assert td.get("names").tolist() == ["z", "x", "y"]
    assert values == ["z", "x", "y"]


@pytest.mark.parametrize("build", ["setitem", "constructor", "from_dict"])
def test_nested_lists_spanning_the_batch_are_a_stack(build):
    from tensordict import NonTensorStack

    names = [["a", "b"], ["c", "d"]]
    if build == "setitem":
        td = TensorDict(batch_size=[2, 2])
        td["names"] = names
    elif build == "constructor":
        td = TensorDict({"names": names}, batch_size=[2, 2])
    else:
        td = TensorDict.from_dict({"names": names}, batch_size=[2, 2])
    assert isinstance(td.get("names"), NonTensorStack) and td.get("names").batch_size == (2, 2)
    assert td[1, 0]["names"] == "c"
    values = td["names"]
    assert values.tolist() == names and values[0].tolist() == ["a", "b"]
    values[0][1] = "q"  # nested linked lists write through too
    assert td.get("names").tolist() == [["a", "q"], ["c", "d"]]


def test_non_tensor_data_where():
    from tensordict import NonTensorData, NonTensorStack

    a, b = NonTensorData("a", batch_size=[3]), NonTensorData("b", batch_size=[3])
    mixed = a.where(torch.tensor([True, False, True]), b)
    assert isinstance(mixed, NonTensorStack) and mixed.tolist() == ["a", "b", "a"]
    same = a.where(torch.tensor([True, True, True]), b)
    assert isinstance(same, NonTensorData) and same.tolist() == ["a", "a", "a"]
    assert a.where(torch.tensor([True, False, True]), NonTensorStack("x", "y", "z")).tolist() == ["a", "y", "a"]


def test_metadata_type_error_wording():
    MetaData = pytest.importorskip("tensordict.tensorclass").MetaData  # td-tensorclass

    with pytest.raises(TypeError, match=r"^Expected data of type str, got int$"):
        MetaData[str](1)


def test_tensor_attrs_from_tensor():
    from tensordict import TensorAttrs

    attrs = TensorAttrs.from_tensor(torch.zeros(2, 3), fields=("dtype",))
    assert (attrs.tgt_device, attrs.tgt_dtype, attrs.tgt_shape) == (None, torch.float32, None)
    full = TensorAttrs.from_tensor(torch.zeros(2, 3, dtype=torch.int32))
    assert (full.tgt_device, full.tgt_dtype, full.tgt_shape) == (torch.device("cpu"), torch.int32, (2, 3))
