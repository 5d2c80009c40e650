"""Lazy views: every index form, composition, and the rows read match in-memory indexing."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tensordict import TensorDict
from tensordict.persistent import PersistentTensorDict


def assert_same(view, ref):
    assert isinstance(view, PersistentTensorDict)
    assert view.batch_size == ref.batch_size
    for key in ref.keys(True, True):
        got = view[key]
        assert got.shape == ref[key].shape, key
        assert torch.equal(got, ref[key]), key


@pytest.fixture
def grid(grid_file):
    p = PersistentTensorDict.from_h5(grid_file, mode="r+")
    yield p
    p.close()


INDICES = [
    0,
    -1,
    slice(1, 3),
    slice(None, None, 2),
    slice(3, 1),
    (slice(None), 2),
    (1, slice(0, 5, 3)),
    [3, 0, 3, 1],
    torch.tensor([2, 2, 0]),
    torch.tensor([True, False, True, True]),
    (slice(None), torch.tensor([4, 0, 4])),
    (torch.tensor([1, 3]), 2),
    (0, torch.tensor([3, 1])),
    (..., 1),
    (None, 1),
    (slice(None), None, slice(1, 2)),
    (torch.tensor([0, 1]), torch.tensor([2, 3])),
    torch.tensor([[True, False, True, False, False]] * 4),
    torch.tensor([[0, 1], [3, 3]]),
    (torch.tensor([1, 0]), slice(None), None),
    np.array([1, 2]),
    np.int64(2),
    torch.tensor(3),
    (),
    ...,
]


@pytest.mark.parametrize("index", INDICES, ids=[repr(i)[:40] for i in INDICES])
def test_index_matches_memory(grid, grid_ref, index):
    ref = grid_ref
    assert_same(grid[index], ref[index])


CHAINS = [
    (slice(1, 4), [2, 0, 2]),
    ([3, 1, 2], slice(None, None, 2)),
    (torch.tensor([3, 1, 1]), (slice(None), torch.tensor([4, 0]))),
    ((slice(None), 1), torch.tensor([True, False, False, True])),
    (None, (0, slice(1, 3))),
    ((torch.tensor([0, 1]), torch.tensor([2, 3])), [1, 1, 0]),
    (slice(0, 4, 2), (slice(None), slice(1, 5, 2)), (1, torch.tensor([1, 0]))),
    ((slice(None), [4, 1, 3]), ([2, 0], slice(1, None))),
]


@pytest.mark.parametrize("chain", CHAINS, ids=[str(i) for i in range(len(CHAINS))])
def test_composed_views(grid, grid_ref, chain):
    view, ref = grid, grid_ref
    for index in chain:
        view, ref = view[index], ref[index]
        assert_same(view, ref)


def test_unsorted_repeated_rows_read_in_order(tmp_path):
    data = torch.randn(50, 4)
    with TensorDict(x=data, batch_size=[50]).to_h5(tmp_path / "r.h5") as p:
        idx = torch.tensor([49, 3, 3, 17, 0, 49, 2])
        assert torch.equal(p[idx]["x"], data[idx])
        assert torch.equal(p.get_at("x", idx), data[idx])
        assert p[torch.tensor([], dtype=torch.long)]["x"].shape == torch.Size([0, 4])
        assert p[10:10]["x"].shape == torch.Size([0, 4])


def test_views_are_lazy(grid):
    view = grid[torch.tensor([3, 0])]
    # write through plain h5py after the view exists: the view reads the new values
    grid.file["y"][3] = np.full(5, -7)
    assert view["y"][0].tolist() == [-7] * 5


def test_nested_view_and_group_of_view(grid, grid_ref):
    ref = grid_ref
    sub = grid[1:3]["g"]
    assert isinstance(sub, PersistentTensorDict)
    assert sub.batch_size == torch.Size([2, 5, 3])
    assert torch.equal(sub["z"], ref["g", "z"][1:3])
    assert torch.equal(sub[:, 2, 1]["z"], ref["g", "z"][1:3][:, 2, 1])


def test_lazy_shape_ops(grid, grid_ref):
    ref = grid_ref
    parts = grid.unbind(1)
    assert len(parts) == 5 and all(isinstance(p, PersistentTensorDict) for p in parts)
    assert torch.equal(parts[3]["x"], ref.unbind(1)[3]["x"])
    for got, exp in zip(grid.split([1, 3], 0), ref.split([1, 3], 0)):
        assert_same(got, exp)
    for got, exp in zip(grid.chunk(2, 1), ref.chunk(2, 1)):
        assert_same(got, exp)
    assert_same(grid.narrow(1, 1, 3), ref.narrow(1, 1, 3))
    assert_same(grid.unsqueeze(1), ref.unsqueeze(1))
    assert_same(grid.unsqueeze(-1), ref.unsqueeze(-1))
    assert_same(grid[1:2].squeeze(), ref[1:2].squeeze())
    assert_same(grid[1:2].squeeze(0), ref[1:2].squeeze(0))
    rows = list(grid)
    assert len(rows) == 4 and torch.equal(rows[2]["y"], ref["y"][2])


def test_index_errors(grid):
    with pytest.raises(IndexError, match="out of bounds"):
        grid[4]
    with pytest.raises(IndexError, match="out of bounds"):
        grid[torch.tensor([0, 9])]
    with pytest.raises(IndexError):
        grid[0, 0, 0]
    with pytest.raises(IndexError, match="boolean index"):
        grid[torch.tensor([True, False])]
    with pytest.raises(IndexError):
        grid[torch.tensor([0.5])]


def _index_strategy(size: int):
    ints = st.integers(-size, size - 1)
    slices = st.builds(
        slice,
        st.none() | st.integers(-size - 1, size + 1),
        st.none() | st.integers(-size - 1, size + 1),
        st.none() | st.integers(1, 3),
    )
    lists = st.lists(st.integers(-size, size - 1), min_size=0, max_size=6).map(
        lambda v: torch.tensor(v, dtype=torch.long)
    )
    masks = st.lists(st.booleans(), min_size=size, max_size=size).map(
        lambda v: torch.tensor(v, dtype=torch.bool)
    )
    if size == 0:
        return slices | masks
    return ints | slices | lists | masks


@st.composite
def _chain(draw):
    """A few single-dim index steps on a 2-D batch, each on dim 0 or dim 1."""
    shape = [6, 5]
    steps = []
    for _ in range(draw(st.integers(1, 3))):
        if not shape:
            break
        dim = draw(st.integers(0, len(shape) - 1))
        idx = draw(_index_strategy(shape[dim]))
        full = (slice(None),) * dim + (idx,)
        probe = torch.zeros(shape)[full]
        shape = list(probe.shape)
        steps.append(full)
    return steps


@pytest.fixture(scope="module")
def prop_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("prop") / "p.h5"
    ref = TensorDict(
        a=torch.arange(60.0).view(6, 5, 2), b={"c": torch.arange(30).view(6, 5)}, batch_size=[6, 5]
    )
    ref.to_h5(path).close()
    return path, ref


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_chain())
def test_property_views_match_memory(prop_file, steps):
    path, ref = prop_file
    with PersistentTensorDict.from_h5(path) as p:
        view, exp = p, ref
        for idx in steps:
            view, exp = view[idx], exp[idx]
        assert view.batch_size == exp.batch_size
        assert torch.equal(view["a"], exp["a"])
        assert torch.equal(view["b", "c"], exp["b", "c"])


def test_flat_fallback_multi_dim_read(tmp_path):
    path = tmp_path / "f.h5"
    data = np.arange(3 * 4 * 5 * 2).reshape(3, 4, 5, 2)
    with h5py.File(path, "w") as f:
        f["d"] = data
    ref = torch.from_numpy(data)
    with PersistentTensorDict.from_h5(path, batch_size=[3, 4, 5]) as p:
        idx = (torch.tensor([2, 0, 2]), slice(None), torch.tensor([4, 1, 1]))
        assert torch.equal(p[idx]["d"], ref[idx])
        mask = torch.rand(3, 4, 5) > 0.5
        assert torch.equal(p[mask]["d"], ref[mask])
        assert torch.equal(p[mask][1:]["d"], ref[mask][1:])
