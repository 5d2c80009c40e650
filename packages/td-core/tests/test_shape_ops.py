"""Shape ops over the batch dims; compared with the same op on each leaf."""

import pytest
import torch

from tensordict import TensorDict, cat, set_capture_non_tensor_stack, stack


def make():
    return TensorDict(
        {"a": torch.randn(2, 3, 4, 5), "n": {"b": torch.randn(2, 3, 4)}, "s": "str"}, [2, 3, 4]
    )


CASES = [
    ("view", lambda td: td.view(6, 4), lambda t: t.view(6, 4, *t.shape[3:])),
    ("view-1", lambda td: td.view(-1), lambda t: t.view(-1, *t.shape[3:])),
    ("reshape", lambda td: td.reshape(4, 6), lambda t: t.reshape(4, 6, *t.shape[3:])),
    ("permute", lambda td: td.permute(2, 0, 1), lambda t: t.permute(2, 0, 1, *range(3, t.ndim))),
    ("transpose", lambda td: td.transpose(0, 2), lambda t: t.transpose(0, 2)),
    ("unsqueeze", lambda td: td.unsqueeze(1), lambda t: t.unsqueeze(1)),
    ("unsqueeze-1", lambda td: td.unsqueeze(-1), lambda t: t.unsqueeze(3)),
    ("expand", lambda td: td.expand(5, 2, 3, 4), lambda t: t.expand(5, *t.shape)),
    ("flatten", lambda td: td.flatten(0, 1), lambda t: t.flatten(0, 1)),
    ("flatten-all", lambda td: td.flatten(), lambda t: t.flatten(0, 2)),
    ("unflatten", lambda td: td.unflatten(1, (3, 1)), lambda t: t.unflatten(1, (3, 1))),
    ("repeat", lambda td: td.repeat(2, 1, 1), lambda t: t.repeat(2, *([1] * (t.ndim - 1)))),
    ("repeat_interleave", lambda td: td.repeat_interleave(2, dim=1), lambda t: t.repeat_interleave(2, 1)),
    ("flip", lambda td: td.flip(1), lambda t: t.flip(1)),
    ("roll", lambda td: td.roll(1, 2), lambda t: t.roll(1, 2)),
    ("narrow", lambda td: td.narrow(2, 1, 2), lambda t: t.narrow(2, 1, 2)),
    ("movedim", lambda td: td.movedim(0, 2), lambda t: t.movedim(0, 2)),
    ("torch.permute", lambda td: torch.permute(td, (1, 0, 2)), lambda t: t.permute(1, 0, 2, *range(3, t.ndim))),
    ("torch.flatten", lambda td: torch.flatten(td, 0, 1), lambda t: t.flatten(0, 1)),
    ("torch.unsqueeze", lambda td: torch.unsqueeze(td, 0), lambda t: t.unsqueeze(0)),
]


@pytest.mark.parametrize("name,td_op,leaf_op", CASES, ids=[c[0] for c in CASES])
def test_shape_op(name, td_op, leaf_op):
    td = make()
    out = td_op(td)
    assert torch.equal(out["a"], leaf_op(td["a"]))
    assert torch.equal(out["n", "b"], leaf_op(td["n", "b"]))
    # ops that add batch elements (unsqueeze, expand, repeat) may turn the leaf into a
    # NonTensorStack of copies, as tensordict does; every element is still the object
    assert out.get("s").batch_size == out.batch_size
    assert set(_flat(out.get("s").tolist())) == {"str"}
    assert out.batch_size == leaf_op(td["n", "b"]).shape


def _flat(obj):
    return [x for sub in obj for x in _flat(sub)] if isinstance(obj, list) else [obj]


def test_view_is_view():
    td = make()
    v = td.view(-1)
    v["a"][0] = 0
    assert (td["a"][0, 0, 0] == 0).all()


def test_squeeze():
    td = TensorDict({"a": torch.zeros(1, 3, 1, 2)}, [1, 3, 1])
    assert td.squeeze().batch_size == (3,)
    assert td.squeeze(0).batch_size == (3, 1)
    assert td.squeeze(1).batch_size == (1, 3, 1)
    assert torch.squeeze(td, 2)["a"].shape == (1, 3, 2)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unbind_split_chunk(dim):
    td = make()
    parts = td.unbind(dim)
    ref = td["a"].unbind(dim if dim >= 0 else 2)
    assert len(parts) == len(ref) and all(torch.equal(p["a"], r) for p, r in zip(parts, ref))
    sp = td.split(1, dim)
    assert all(torch.equal(p["a"], r) for p, r in zip(sp, td["a"].split(1, dim if dim >= 0 else 2)))
    ch = td.chunk(2, dim)
    assert all(torch.equal(p["a"], r) for p, r in zip(ch, td["a"].chunk(2, dim if dim >= 0 else 2)))
    ts = td.tensor_split(2, dim)
    assert len(ts) == 2
    assert [p.batch_size for p in torch.unbind(td, 0)] == [torch.Size([3, 4])] * 2
    assert len(torch.split(td, [1, 1], 0)) == 2


def test_split_sizes_mismatch():
    with pytest.raises(RuntimeError, match="sum exactly"):
        make().split([1, 5], 0)


def test_gather():
    td = TensorDict({"a": torch.arange(12).view(3, 4), "b": torch.arange(24).view(3, 4, 2)}, [3, 4])
    idx = torch.tensor([[0, 1], [2, 3], [1, 1]])
    out = td.gather(1, idx)
    assert torch.equal(out["a"], torch.gather(td["a"], 1, idx))
    assert out["b"].shape == (3, 2, 2)
    assert torch.equal(torch.gather(td, 1, idx)["a"], out["a"])


def test_expand_as():
    td = TensorDict({"a": torch.zeros(3, 2)}, [3])
    assert td.expand_as(torch.zeros(4, 3)).batch_size == (4, 3)


def test_stack_cat():
    tds = [TensorDict({"key 1": torch.ones(3, 4, 5), "key 2": torch.zeros(3, 4, 5, dtype=torch.bool)}, [3, 4]) for _ in range(2)]
    st = torch.stack(tds, 1)
    assert st.shape == torch.Size([3, 2, 4]) and st["key 1"].shape == torch.Size([3, 2, 4, 5])
    ct = torch.cat(tds, 0)
    assert ct.shape == torch.Size([6, 4]) and ct["key 1"].shape == torch.Size([6, 4, 5])
    assert stack(tds).batch_size == (2, 3, 4) and cat(tds, 1).batch_size == (3, 8)


def test_stack_non_tensor():
    a = TensorDict({"x": torch.zeros(()), "s": "a"}, [])
    b = TensorDict({"x": torch.zeros(()), "s": "b"}, [])
    c = TensorDict({"x": torch.zeros(()), "s": "a"}, [])
    st = torch.stack([a, b])
    assert st["s"] == ["a", "b"]
    assert st[1]["s"] == "b"
    same = torch.stack([a, c])
    assert same["s"] == ["a", "a"]  # equal values stack too (tensordict 0.15)
    with set_capture_non_tensor_stack(True):
        assert torch.stack([a, c])["s"] == "a"


def test_stack_errors():
    a = TensorDict({"x": torch.zeros(3)}, [3])
    b = TensorDict({"x": torch.zeros(4)}, [4])
    with pytest.raises(RuntimeError, match=r"\(3,\).*\(4,\)"):
        torch.stack([a, b])
    with pytest.raises(RuntimeError):
        torch.stack([])
    with pytest.raises(KeyError):
        torch.stack([a, TensorDict({"y": torch.zeros(3)}, [3])])


def test_bad_view_and_permute():
    td = make()
    before = td.clone()
    with pytest.raises(RuntimeError, match="invalid"):
        td.view(5, 5)
    with pytest.raises(RuntimeError):
        td.reshape(7)
    with pytest.raises(ValueError):  # tensordict 0.15: ValueError
        td.permute(0, 0, 1)
    with pytest.raises(ValueError):
        td.permute(0, 1)
    assert (td == before).all()
