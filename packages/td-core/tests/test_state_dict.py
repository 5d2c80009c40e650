"""TensorDict.state_dict / load_state_dict, alone and in torch.save checkpoints."""

from collections import OrderedDict

import pytest
import torch
from torch import nn

from tensordict import NonTensorData, NonTensorStack, TensorDict


def make(device=None):
    td = TensorDict(
        {"a": torch.arange(6.0).view(3, 2), "b": {"c": torch.ones(3, dtype=torch.int64), "d": {"e": torch.zeros(3, 1)}}},
        batch_size=[3],
        device=device,
    )
    td["text"] = "hello"
    td["b", "tag"] = NonTensorStack("x", "y", "z")
    return td


def zeros_like_td(td):
    out = td.clone()
    out.apply_leaves_(torch.Tensor.zero_)
    out["text"] = "?"
    out["b", "tag"] = NonTensorStack("?", "?", "?")
    return out


def assert_same(a, b):
    assert a.batch_size == b.batch_size
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, torch.Tensor):
            assert torch.equal(va.cpu(), vb.cpu()), key
        else:
            assert va == vb, key


@pytest.mark.parametrize("flatten", [False, True])
def test_round_trip(flatten, device):
    td = make(device)
    sd = td.state_dict(flatten=flatten)
    assert isinstance(sd, OrderedDict)
    target = zeros_like_td(td)
    out = target.load_state_dict(sd, from_flatten=flatten)
    assert out is target
    assert_same(target, td)
    assert target["b", "c"].device.type == torch.device(device).type


def test_format_flat_with_metadata_and_nested():
    td = make()
    sd = td.state_dict()
    assert list(sd) == ["a", "b.c", "b.d.e"]  # tensors only, "."-joined keys
    meta = sd._metadata
    assert meta[""] == {"batch_size": torch.Size([3]), "device": None, "_non_tensor": {"text": "hello"}}
    assert meta["b"]["_non_tensor"] == {"tag": ["x", "y", "z"]}
    assert meta["b"]["_non_tensor_stacks"] == {"tag": [3]}
    assert meta["b.d"]["batch_size"] == torch.Size([3])
    nested = td.state_dict(flatten=False)
    assert list(nested) == ["a", "b"]
    assert isinstance(nested["b"], OrderedDict) and nested["b"]["d"]["e"].shape == (3, 1)
    assert nested._metadata == meta


@pytest.mark.parametrize("flatten", [True, False])
def test_layout_is_detected_without_from_flatten(flatten):
    td = make()
    sd = td.state_dict(flatten=flatten)
    target = zeros_like_td(td)
    target.load_state_dict(sd)
    assert_same(target, td)


def test_earlier_layout_still_loads():
    legacy = OrderedDict(a=torch.ones(2), n=OrderedDict(b=torch.ones(2), __batch_size=torch.Size([2]), __device=None))
    legacy["__batch_size"] = torch.Size([2])
    legacy["__device"] = None
    td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(2)}}, [2])
    td.load_state_dict(legacy)
    assert (td["a"] == 1).all() and (td["n", "b"] == 1).all()
    flat = OrderedDict([("a", torch.full((2,), 2.0)), ("n.b", torch.full((2,), 2.0)), ("n.__batch_size", torch.Size([2]))])
    td.load_state_dict(flat, from_flatten=True)
    assert (td["n", "b"] == 2).all()


def test_empty_nested_tensordicts_are_not_missing_nor_unexpected():
    data = TensorDict({"a": {"b": {"c": {}}}, "d": 1}, [])
    data.load_state_dict(TensorDict({"d": 0}, []).state_dict(), strict=True)
    assert data["d"] == 0
    data = TensorDict({"d": 0}, [])
    data.load_state_dict(TensorDict({"a": {"b": {"c": {}}}, "d": 1}, []).state_dict(), strict=True)
    assert data["d"] == 1
    # an empty nested TensorDict round-trips through _metadata
    empty = TensorDict()
    empty.load_state_dict(TensorDict({"a": {"b": {}}}, []).state_dict(), strict=False)
    assert isinstance(empty["a", "b"], TensorDict)


def test_tensorclass_level_records_its_type():
    pytest.importorskip("tensordict.tensorclass")  # a sibling distribution
    from tensordict import tensorclass

    @tensorclass
    class Point:
        x: torch.Tensor

    td = TensorDict({"p": Point(x=torch.zeros(2), batch_size=[2])}, [2])
    sd = td.state_dict()
    assert list(sd) == ["p.x"]
    assert sd._metadata["p"]["_type"].endswith("Point")


def test_keep_vars_prefix_destination():
    p = nn.Parameter(torch.ones(2))
    td = TensorDict({"w": p})
    assert td.state_dict()["w"].requires_grad is False
    assert td.state_dict()["w"].data_ptr() == p.data_ptr()
    assert td.state_dict(keep_vars=True)["w"] is p
    dest = OrderedDict(other=1)
    out = td.state_dict(destination=dest, prefix="td.")
    assert out is dest and "td.w" in dest and dest["other"] == 1
    assert dest._metadata["td"]["batch_size"] == torch.Size([])


def test_torch_save_next_to_a_model_weights_only(tmp_path):
    model = nn.Linear(3, 2)
    td = make()
    path = tmp_path / "ckpt.pt"
    torch.save({"model": model.state_dict(), "data": td.state_dict()}, path)
    ckpt = torch.load(path, weights_only=True)
    model2 = nn.Linear(3, 2)
    model2.load_state_dict(ckpt["model"])
    assert torch.equal(model2.weight, model.weight)
    target = zeros_like_td(td)
    target.load_state_dict(ckpt["data"])
    assert_same(target, td)


def test_load_into_empty_tensordict_adopts_metadata(device):
    td = TensorDict({"a": torch.ones(4, 2), "n": {"b": torch.zeros(4)}}, [4], device=device, names=["time"])
    empty = TensorDict()
    empty.load_state_dict(td.state_dict(), strict=False)
    assert empty.batch_size == torch.Size([4])
    assert empty.device == td.device
    assert empty.names == ["time"]
    assert empty["n"].batch_size == torch.Size([4])
    assert_same(empty, td)


def test_strict_reports_missing_and_unexpected():
    td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(2)}}, [2])
    sd = TensorDict({"a": torch.ones(2), "n": {"c": torch.ones(2)}}, [2]).state_dict()
    with pytest.raises(RuntimeError) as err:
        td.load_state_dict(sd)
    assert "n.b" in str(err.value) and "n.c" in str(err.value)
    assert (td["a"] == 0).all()  # nothing written
    td.load_state_dict(sd, strict=False)
    assert (td["a"] == 1).all() and (td["n", "c"] == 1).all() and (td["n", "b"] == 0).all()


def test_flat_state_dict_read_as_nested_hints():
    td = TensorDict({"n": {"b": torch.zeros(2)}}, [2])
    with pytest.raises(RuntimeError, match="from_flatten=True"):
        td.load_state_dict(td.state_dict(flatten=True), from_flatten=False)


def test_in_place_vs_assign():
    a = torch.zeros(2, 3)
    td = TensorDict({"a": a}, [2])
    new = torch.ones(2, 3, dtype=torch.float64)
    td.load_state_dict({"a": new, "__batch_size": torch.Size([2])})
    assert td["a"] is a and a.dtype == torch.float32 and (a == 1).all()
    td.load_state_dict({"a": new}, assign=True)
    assert td["a"] is new


def test_shape_mismatch_leaves_td_unchanged():
    td = TensorDict({"a": torch.zeros(2, 3), "b": torch.zeros(2)}, [2])
    sd = {"a": torch.ones(2, 3), "b": torch.ones(2, 5)}
    with pytest.raises(RuntimeError, match="size mismatch for 'b'"):
        td.load_state_dict(sd)
    assert (td["a"] == 0).all()
    with pytest.raises(RuntimeError, match="batch dimension mismatch"):
        td.load_state_dict({"a": torch.ones(2, 3), "b": torch.ones(2), "__batch_size": torch.Size([3])}, assign=True)
    assert (td["a"] == 0).all()


def test_locked_tensordict():
    td = TensorDict({"a": torch.zeros(2)}, [2]).lock_()
    td.load_state_dict({"a": torch.ones(2)})
    assert (td["a"] == 1).all()
    with pytest.raises(RuntimeError, match="locked"):
        td.load_state_dict({"a": torch.ones(2), "b": torch.ones(2)}, strict=False)
    assert "b" not in td.keys()


def test_parameters_load_in_place():
    model = nn.Linear(2, 2)
    params = TensorDict.from_module(model)
    sd = params.detach().clone().zero_().state_dict()
    params.load_state_dict(sd)
    assert (model.weight == 0).all() and model.weight.requires_grad


def test_reserved_and_dotted_keys():
    with pytest.raises(KeyError, match="reserved"):
        TensorDict({"__batch_size": torch.zeros(())}).state_dict()
    td = TensorDict({"a.b": torch.zeros(())})
    with pytest.raises(KeyError, match="flatten=False"):
        td.state_dict(flatten=True)
    assert "a.b" in td.state_dict(flatten=False)


def test_bad_input():
    td = TensorDict({"a": torch.zeros(2)}, [2])
    with pytest.raises(TypeError):
        td.load_state_dict([("a", torch.zeros(2))])
    with pytest.raises(RuntimeError, match="nested"):
        td.load_state_dict({"a": {"x": torch.zeros(2)}})


def test_non_tensor_types_survive():
    td = TensorDict({"cfg": NonTensorData({"lr": 0.1, "layers": [1, 2]})})
    sd = td.state_dict()
    out = TensorDict({"cfg": NonTensorData(None)})
    out.load_state_dict(sd)
    assert out["cfg"] == {"lr": 0.1, "layers": [1, 2]}


def test_lazy_stack_state_dict():
    lazy = pytest.importorskip("tensordict._lazy")
    ls = lazy.lazy_stack([TensorDict({"a": torch.zeros(2)}, [2]), TensorDict({"a": torch.ones(2)}, [2])], 0)
    sd = ls.state_dict()
    assert sd._metadata[""]["batch_size"] == torch.Size([2, 2])
    out = TensorDict()
    out.load_state_dict(sd, strict=False)
    assert torch.equal(out["a"], ls["a"])


@pytest.mark.parametrize("stack_dim", [0, 1])
def test_load_into_lazy_stack_writes_the_stacked_tensordicts(stack_dim):
    from tensordict import lazy_stack

    parts = [TensorDict({"a": torch.zeros(3), "s": "x"}, [3]) for _ in range(2)]
    ls = lazy_stack(parts, stack_dim)
    src = lazy_stack([TensorDict({"a": torch.randn(3), "s": "y"}, [3]) for _ in range(2)], stack_dim)
    ls.load_state_dict(src.state_dict())
    assert torch.equal(ls["a"], src["a"])
    assert torch.equal(parts[1]["a"], src.tensordicts[1]["a"])
    assert parts[0]["s"] == "y"
