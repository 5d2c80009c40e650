"""The fast paths of the constructor, ``lazy_stack``, ``stack`` and ``cat`` give what the
checked paths give.

Each fast path skips work only when its shortcut proves the input is the common case; these
tests feed inputs that look like the common case but are not, and check the result (or the
error) against the general path's.
"""

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict, lazy_stack, maybe_dense_stack


def test_deep_nested_mismatch_names_full_key():
    src = {"a": {"b": {"c": {"d": torch.zeros(3)}}}}
    with pytest.raises(RuntimeError, match=r"\('a', 'b', 'c', 'd'\).*batch_size=\(2,\).*\(3,\)"):
        TensorDict(src, batch_size=[2])


def test_deep_nested_build_keeps_every_level():
    d = {"leaf": torch.zeros(4, 1)}
    for i in reversed(range(30)):
        d = {f"l{i}": d, f"x{i}": torch.full((4,), float(i))}
    td = TensorDict(d, batch_size=[4])
    key = tuple(f"l{i}" for i in range(30)) + ("leaf",)
    assert td[key].shape == (4, 1)
    assert td[tuple(f"l{i}" for i in range(12)) + ("x12",)].eq(12).all()
    assert all(sub.batch_size == (4,) for sub in td.values(include_nested=True) if isinstance(sub, TensorDict))


def test_plain_tensor_check_routes_other_values():
    # one non-tensor value among tensors: it is wrapped, not stored raw
    td = TensorDict({"a": torch.zeros(2), "b": "text", "c": {"d": torch.ones(2)}}, batch_size=[])
    assert td["b"] == "text"
    assert isinstance(td.get("c"), TensorDict)
    # a tuple key among str keys is a nested key
    td = TensorDict({"a": torch.zeros(2), ("n", "x"): torch.ones(2)}, batch_size=[])
    assert td["n", "x"].eq(1).all()
    with pytest.raises(TypeError):
        TensorDict({1: torch.zeros(2)}, batch_size=[])


def test_list_batch_size_goes_through_the_checked_conversion():
    assert TensorDict({}, batch_size=[3, 4]).batch_size == torch.Size([3, 4])
    assert TensorDict({}, batch_size=[]).batch_size == torch.Size([])
    with pytest.raises(ValueError, match="negative"):
        TensorDict({}, batch_size=[-2])
    with pytest.raises(TypeError, match="batch_size"):
        TensorDict({}, batch_size=[[1]])


def _parts(n, bs=(3,)):
    return [TensorDict({"x": torch.full((*bs, 2), float(i))}, batch_size=list(bs)) for i in range(n)]


def test_lazy_stack_fast_path_matches_general_path():
    parts = _parts(5)
    fast = lazy_stack(parts)
    general = LazyStackedTensorDict(*parts, stack_dim=0)
    assert type(fast) is LazyStackedTensorDict
    assert fast.batch_size == general.batch_size == torch.Size([5, 3])
    assert (fast["x"] == general["x"]).all()
    assert fast[2] is parts[2]
    # the result does not follow later changes to the caller's list
    parts.append(_parts(1)[0])
    assert len(fast.tensordicts) == 5


def test_lazy_stack_equal_but_distinct_sizes_and_mixed_parts():
    a = TensorDict({"x": torch.zeros(3)}, batch_size=torch.Size([3]))
    b = TensorDict({"x": torch.ones(3)}, batch_size=torch.Size([3]))
    assert a.batch_size is not b.batch_size
    assert lazy_stack([a, b]).batch_size == (2, 3)
    # a lazy stack part after a dense first part: stacked lazily as the general path does
    inner = lazy_stack(_parts(3, bs=()))
    out = lazy_stack([TensorDict({"x": torch.zeros(3, 2)}, [3]), inner])
    assert out.batch_size == (2, 3)
    # differing batch sizes: -1 where they differ, as upstream
    c = TensorDict({"x": torch.zeros(4)}, batch_size=[4])
    assert lazy_stack([a, c]).batch_size == (2, -1)
    # a value that is not a TensorDict after the first one is refused, naming its position
    with pytest.raises(TypeError, match="position 1"):
        lazy_stack([a, torch.zeros(3)])


def test_stack_and_cat_same_key_count_different_keys():
    a = TensorDict({"x": torch.zeros(2), "y": torch.zeros(2)}, [2])
    b = TensorDict({"x": torch.ones(2), "z": torch.ones(2)}, [2])
    with pytest.raises(KeyError, match=r"TensorDict 1 has different keys.*missing \['y'\], extra \['z'\]"):
        torch.stack([a, b])
    with pytest.raises(KeyError, match=r"cat: TensorDict 1 has different keys"):
        torch.cat([a, b])
    out = maybe_dense_stack([a, b])
    assert type(out) is LazyStackedTensorDict and out[1]["z"].eq(1).all()
    # fewer keys in a later TensorDict
    with pytest.raises(KeyError, match=r"missing \['y'\], extra \[\]"):
        torch.stack([a, TensorDict({"x": torch.zeros(2)}, [2])])


def test_stack_and_cat_results_and_checks():
    parts = [TensorDict({"x": torch.full((2, 3), float(i)), "n": {"y": torch.zeros(2)}}, [2]) for i in range(4)]
    st = torch.stack(parts, 1)
    assert st.batch_size == (2, 4) and st["x"][:, 3].eq(3).all() and st["n", "y"].shape == (2, 4)
    ct = torch.cat(parts, 0)
    assert ct.batch_size == (8,) and ct["x"][6].eq(3).all()
    # equal sizes held by distinct Size objects, and a mismatch named with both sizes
    other = TensorDict({"x": torch.zeros(2, 3), "n": {"y": torch.zeros(2)}}, batch_size=torch.Size([2]))
    assert torch.stack([parts[0], other]).batch_size == (2, 2)
    bad = TensorDict({"x": torch.zeros(3, 3), "n": {"y": torch.zeros(3)}}, [3])
    with pytest.raises(RuntimeError, match=r"same batch_size.*\(2,\).*\(3,\)"):
        torch.stack([parts[0], bad])
    assert torch.cat([parts[0], bad]).batch_size == (5,)
    # the device is kept only when every part has it
    on_cpu = [TensorDict({"x": torch.zeros(2)}, [2], device="cpu") for _ in range(3)]
    assert torch.stack(on_cpu).device == torch.device("cpu")
    assert torch.stack([*on_cpu, TensorDict({"x": torch.zeros(2)}, [2])]).device is None


def test_reshape_view_inferred_shapes_are_remembered_exactly():
    td = TensorDict({"x": torch.arange(24.0).reshape(4, 6, 1)}, [4, 6])
    for _ in range(2):  # the second call reads the remembered shape
        assert td.reshape(-1).batch_size == (24,)
        assert td.view(3, -1).batch_size == (3, 8)
        assert td.reshape(2, 12)["x"].shape == (2, 12, 1)
    # a float equal to a remembered int is still refused, and bad shapes still raise
    with pytest.raises(TypeError):
        td.reshape(24.0)
    with pytest.raises(RuntimeError, match="only one dimension can be inferred"):
        td.reshape(-1, -1)
    with pytest.raises(RuntimeError, match="invalid for a TensorDict of batch_size"):
        td.view(5, -1)
    # the same shape on another batch size infers anew
    other = TensorDict({"x": torch.zeros(2, 3)}, [2, 3])
    assert other.reshape(-1).batch_size == (6,)
