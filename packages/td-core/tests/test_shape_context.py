"""Shape ops used as context managers write back on exit; keyword forms of shape ops."""

import pytest
import torch

from tensordict import TensorDict


def make():
    return TensorDict({"a": torch.zeros(4, 3, 2), "b": {"c": torch.ones(4, 3)}}, [4, 3])


OPS = {
    "transpose": lambda td: td.transpose(1, 0),
    "permute": lambda td: td.permute(1, 0),
    "permute-dims": lambda td: td.permute(dims=[1, 0]),
    "view": lambda td: td.view(-1),
    "view-batch_size": lambda td: td.view(batch_size=[2, 6]),
    "reshape": lambda td: td.reshape(3, 4),
    "unsqueeze": lambda td: td.unsqueeze(1),
    "flatten": lambda td: td.flatten(0, 1),
    "unflatten": lambda td: td.unflatten(0, (2, 2)),
    "movedim": lambda td: td.movedim(0, 1),
    "flatten_keys": lambda td: td.flatten_keys(","),
}


@pytest.mark.parametrize("name", list(OPS))
def test_context_writes_back_new_keys_and_changes(name):
    td = make()
    with OPS[name](td) as out:
        out["new"] = torch.full(out.shape, 7.0)
        out["a"] += 1  # in place on a view (or a copy for reshape): reaches td either way
        if name != "flatten_keys":
            out["b", "d"] = torch.arange(out.numel() * 5.0).view(*out.shape, 5)
    assert td["new"].shape == (4, 3) and (td["new"] == 7).all()
    assert (td["a"] == 1).all()
    if name != "flatten_keys":
        assert td["b", "d"].shape == (4, 3, 5)
        # the written-back entry, transformed again, is what was written inside the block
        again = OPS[name](td.select(("b", "d")))
        assert torch.equal(again["b", "d"], torch.arange(60.0).view(*again.shape, 5))


def test_transpose_write_back_values():
    td = make()
    with td.transpose(0, 1) as t:
        t["x"] = torch.arange(12.0).view(3, 4)
    assert torch.equal(td["x"], torch.arange(12.0).view(3, 4).t())
    assert td["x"].is_contiguous()


def test_unflatten_keys_context_and_nested():
    td = make()
    with td.flatten_keys(",") as flat:
        with flat.unflatten_keys(",") as orig:
            orig["n", "x"] = torch.zeros(4, 3)
        assert (flat["n,x"] == 0).all()
    assert (td["n", "x"] == 0).all()


def test_no_write_back_on_exception_or_plain_use():
    td = make()
    with pytest.raises(ValueError):
        with td.transpose(0, 1) as t:
            t["new"] = torch.zeros(3, 4)
            raise ValueError
    assert "new" not in td.keys()
    t = td.transpose(0, 1)
    t["other"] = torch.zeros(3, 4)
    assert "other" not in td.keys()


def test_locked_source_refuses_new_keys():
    td = make().lock_()
    with td.transpose(0, 1) as t:
        assert t.is_locked
        with pytest.raises(RuntimeError):
            t["new"] = torch.zeros(3, 4)
    assert "new" not in td.keys()


def test_squeeze_context():
    td = TensorDict({"a": torch.zeros(4, 1, 3)}, [4, 1, 3])
    with td.squeeze(1) as s:
        assert s.batch_size == (4, 3)
        s["b"] = torch.ones(4, 3)
    assert td["b"].shape == (4, 1, 3)


@pytest.mark.parametrize(
    "op,expected",
    [
        (lambda td: td.reshape(-1, inplace=True), (12,)),
        (lambda td: td.flatten(0, 1, inplace=True), (12,)),
        (lambda td: td.unflatten(0, (2, 2), inplace=True), (2, 2, 3)),
        (lambda td: td.repeat(2, 1, inplace=True), (8, 3)),
        (lambda td: td.repeat_interleave(2, dim=1, inplace=True), (4, 6)),
        (lambda td: td.roll(1, 0, inplace=True), (4, 3)),
        (lambda td: td.gather(1, torch.zeros(4, 2, dtype=torch.long), inplace=True), (4, 2)),
    ],
)
def test_inplace_shape_ops(op, expected):
    td = make()
    out = op(td)
    assert out is td and td.batch_size == expected and td["b"].batch_size == expected
    assert td["a"].shape == (*expected, 2)


def test_view_dtype_with_batch_size():
    td = make()
    out = td.view(torch.uint8, batch_size=[])
    assert out.batch_size == () and out["a"].dtype == torch.uint8 and out["a"].shape == (4, 3, 8)


def test_reshape_of_locked_is_locked():
    td = make().lock_()
    assert td.reshape(-1).is_locked and td.reshape(size=(12,)).batch_size == (12,)


def test_upstream_errors_of_permute_movedim_split_and_in():
    td = TensorDict({"a": torch.zeros(4, 5, 6, 7)}, [4, 5, 6])
    for dims in [(1, 1, 0), (3, 2, 1, 0), (2, -4, 0), (2, 1)]:
        with pytest.raises(ValueError, match="permute"):
            td.permute(*dims)
    with pytest.raises(IndexError):
        td.movedim(0, 5)
    with pytest.raises(RuntimeError, match="repeated dim in source"):
        td.movedim((0, 0), (1, 2))
    with pytest.raises(RuntimeError, match="repeated dim in destination"):
        td.movedim((0, 1), (2, 2))
    with pytest.raises(ValueError, match="same number of elements"):
        td.movedim((0,), (1, 2))
    with pytest.raises(IndexError, match="Incompatible dim"):
        TensorDict({"a": torch.zeros(2)}, []).split(1, 0)
    with pytest.raises(TypeError, match="must be int or list of ints"):
        td.split("1", 0)
    with pytest.raises(RuntimeError, match="sum exactly"):
        td.split([1, 1], 0)
    with pytest.raises(ValueError, match="split_size must be positive, got 0."):
        td.split(0, -1)
    with pytest.raises(RuntimeError, match="NestedKey"):
        0 in td  # noqa: B015
    assert [t.batch_size for t in td.split([1, 3], 0)] == [(1, 5, 6), (3, 5, 6)]
