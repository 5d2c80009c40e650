"""Indexing along the batch dims with every torch index form."""

import pytest
import torch

from tensordict import TensorDict


def make():
    return TensorDict(
        {"a": torch.arange(60).view(3, 4, 5), "n": {"b": torch.arange(12).view(3, 4)}, "s": "str"}, [3, 4]
    )


INDICES = [
    0,
    -1,
    slice(1, 3),
    (slice(None), 2),
    (..., 1),
    (None, 0),
    (0, None),
    torch.tensor([2, 0]),
    [0, 2],
    torch.tensor([True, False, True]),
    torch.ones(3, 4, dtype=torch.bool),
    (torch.tensor([0, 1]), torch.tensor([2, 3])),
    (..., slice(None, None, 2)),
    (1, ...),
]


@pytest.mark.parametrize("idx", INDICES, ids=[str(i) for i in range(len(INDICES))])
def test_index_matches_leafwise(idx):
    td = make()
    out = td[idx]
    ref = make()["a"]
    nd = 2
    if isinstance(idx, tuple) and Ellipsis in idx:
        i = idx.index(Ellipsis)
        consumed = sum(1 for x in idx if x is not None and x is not Ellipsis)
        idx_l = idx[:i] + (slice(None),) * (nd - consumed) + idx[i + 1 :]
    else:
        idx_l = idx
    expected = ref[idx_l]
    assert torch.equal(out["a"], expected)
    assert out.batch_size == expected.shape[: expected.ndim - 1]
    assert out["s"] == "str"
    assert out["n"].batch_size == out.batch_size


def test_index_returns_views():
    td = make()
    sub = td[0]
    sub["a"][0] = -1
    assert td["a"][0, 0, 0] == -1


def test_readme_index():
    data = TensorDict({"key 1": torch.ones(3, 4, 5), "key 2": torch.zeros(3, 4, 5, dtype=torch.bool)}, batch_size=[3, 4])
    sub = data[..., :2]
    assert sub.shape == torch.Size([3, 2])
    assert sub["key 1"].shape == torch.Size([3, 2, 5])


def test_index_errors():
    td = make()
    with pytest.raises(IndexError):
        td[3]
    with pytest.raises(IndexError):
        td[0, 0, 0]
    with pytest.raises(IndexError):
        td[torch.tensor([True, False])]
    with pytest.raises(IndexError):
        td[..., ...]


@pytest.mark.parametrize("idx", [0, slice(0, 2), torch.tensor([0, 2]), torch.tensor([True, False, True]), (slice(None), 1)])
def test_setitem_index(idx):
    td = make()
    value = td[idx].clone().apply_leaves_(lambda t: t.zero_())
    td[idx] = value
    ref = make()["a"].clone()
    ref[idx] = 0
    assert torch.equal(td["a"], ref)


def test_setitem_wrong_feature_shape_changes_nothing():
    td = make()
    before = td.clone()
    bad = TensorDict({"a": torch.zeros(2, 4, 5), "n": {"b": torch.zeros(2, 4, 7)}}, [2, 4])
    with pytest.raises(RuntimeError, match="'b'"):
        td[0:2] = bad
    assert (td == before).all()


def test_iter_is_along_dim0():
    td = make()
    assert [t.batch_size for t in td] == [torch.Size([4])] * 3
