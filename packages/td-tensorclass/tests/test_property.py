"""Property tests: a tensorclass operation equals the same operation on each field."""

import pytest
import torch

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tensordict import TensorClass  # noqa: E402


class Pair(TensorClass):
    a: torch.Tensor
    b: torch.Tensor


shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3)


@st.composite
def pair_and_index(draw):
    bs = draw(shapes)
    pair = Pair(a=torch.randn(*bs, 2), b=torch.randn(*bs), batch_size=bs)
    kind = draw(st.sampled_from(["int", "slice", "tensor", "mask"]))
    n = bs[0]
    if kind == "int":
        index = draw(st.integers(-n, n - 1))
    elif kind == "slice":
        start = draw(st.integers(0, n))
        index = slice(start, draw(st.integers(start, n)), draw(st.integers(1, 2)))
    elif kind == "tensor":
        index = torch.tensor(draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=5)))
    else:
        index = torch.tensor(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    return pair, index


@settings(max_examples=40, deadline=None)
@given(pair_and_index())
def test_property_indexing_matches_fields(case):
    pair, index = case
    out = pair[index]
    assert type(out) is Pair
    assert torch.equal(out.a, pair.a[index]) and torch.equal(out.b, pair.b[index])
    assert out.batch_size == pair.b[index].shape


@settings(max_examples=30, deadline=None)
@given(shapes, st.randoms(use_true_random=False))
def test_property_reshape_permute_match_fields(bs, rnd):
    pair = Pair(a=torch.randn(*bs, 2), b=torch.randn(*bs), batch_size=bs)
    flat = pair.reshape(-1)
    assert torch.equal(flat.a, pair.a.reshape(-1, 2)) and torch.equal(flat.b, pair.b.reshape(-1))
    dims = list(range(len(bs)))
    rnd.shuffle(dims)
    perm = pair.permute(*dims)
    assert torch.equal(perm.b, pair.b.permute(*dims))
    assert torch.equal(perm.a, pair.a.permute(*dims, len(bs)))
    stacked = torch.stack([pair, pair + 1], -1)
    assert torch.equal(stacked.b, torch.stack([pair.b, pair.b + 1], -1))
