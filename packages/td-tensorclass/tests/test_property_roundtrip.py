"""Property tests (hypothesis) for tensorclasses: conversions round trip (to/from TensorDict,
pickle, memmap), and indexing, shape-op sequences and stacking equal the same op applied
field by field. (The simpler index/reshape properties live in test_property.py.)

Profiles as in td-core (``$HYPOTHESIS_PROFILE``: ``ci`` fixed seed, ``fuzz`` long).
"""

from __future__ import annotations

import pickle

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("tensordict.tensorclass")

from tensordict import TensorClass, TensorDict  # noqa: E402
from tensordict.testing.strategies import (  # noqa: E402
    assert_td_equal,
    batch_sizes,
    expand_index,
    index_expressions,
    register_profiles,
    shape_op_sequences,
    tensors,
)

register_profiles()


class Inner(TensorClass):
    x: torch.Tensor


class Record(TensorClass):
    a: torch.Tensor
    inner: Inner | None = None
    label: str = "lbl"
    count: int = 0  # numbers become tensors over the batch (documented; nocast=True keeps them)


@st.composite
def records(draw, batch_size=None, with_inner=None):
    bs = draw(batch_size if batch_size is not None else batch_sizes(max_dims=3, max_side=3))
    has_inner = draw(st.booleans()) if with_inner is None else with_inner
    inner = Inner(x=draw(tensors(bs)), batch_size=bs) if has_inner else None
    return Record(
        a=draw(tensors(bs)),
        inner=inner,
        label=draw(st.text("abcdef XYZ_-", max_size=6)),
        count=draw(st.integers(-5, 5)),
        batch_size=bs,
    )


def _same(rec, other, check_device=True):
    assert type(rec) is type(other)
    assert rec.batch_size == other.batch_size
    assert rec.label == other.label
    assert torch.equal(rec.count, other.count)
    assert (rec.inner is None) == (other.inner is None)
    assert_td_equal(rec.to_tensordict(), other.to_tensordict(), check_device=check_device)


@given(rec=records())
def test_property_to_tensordict_from_tensordict_round_trip(rec):
    td = rec.to_tensordict()
    assert type(td) is TensorDict and td.batch_size == rec.batch_size
    back = Record.from_tensordict(td)
    _same(back, rec)
    assert torch.equal(back.a, rec.a) and back.a.dtype == rec.a.dtype


@given(rec=records())
def test_property_pickle_round_trip(rec):
    _same(pickle.loads(pickle.dumps(rec)), rec)


@given(data=st.data())
def test_property_index_equals_fieldwise(data):
    rec = data.draw(records())
    idx = data.draw(index_expressions(rec.batch_size))
    full = expand_index(idx, len(rec.batch_size))
    out = rec[idx]
    assert type(out) is Record
    assert out.batch_size == torch.empty(rec.batch_size)[full].shape
    assert torch.equal(out.a, rec.a[full])
    if rec.inner is not None:
        assert type(out.inner) is Inner
        assert torch.equal(out.inner.x, rec.inner.x[full])
    assert out.label == rec.label
    assert torch.equal(out.count, rec.count[full])


@given(data=st.data())
def test_property_shape_ops_equal_fieldwise(data):
    rec = data.draw(records())
    ops = data.draw(shape_op_sequences(rec.batch_size, max_ops=3))
    out = rec
    nds = [len(rec.batch_size)]
    for op in ops:
        out = op.td_fn(out)
        nds.append(len(op.new_batch))

    def ref(x):
        for op, nd in zip(ops, nds):
            x = op.leaf_fn(x, nd)
        return x

    assert type(out) is Record, ops
    assert out.batch_size == ops[-1].new_batch
    assert torch.equal(out.a, ref(rec.a)), ops
    if rec.inner is not None:
        assert torch.equal(out.inner.x, ref(rec.inner.x)), ops
    assert out.label == rec.label


@given(data=st.data())
def test_property_stack_equals_fieldwise(data):
    rec = data.draw(records(batch_size=batch_sizes(min_dims=0, max_dims=2, max_side=3), with_inner=True))
    other = Record(a=torch.zeros_like(rec.a), inner=Inner(x=torch.ones_like(rec.inner.x), batch_size=rec.batch_size),
                   label=rec.label, count=rec.count, batch_size=rec.batch_size)
    dim = data.draw(st.integers(0, len(rec.batch_size)))
    out = torch.stack([rec, other], dim)
    assert type(out) is Record and type(out.inner) is Inner
    assert torch.equal(out.a, torch.stack([rec.a, other.a], dim))
    assert torch.equal(out.inner.x, torch.stack([rec.inner.x, other.inner.x], dim))
    assert out.label == rec.label
    assert out[(slice(None),) * dim + (0,)].a.equal(rec.a)


@pytest.mark.timeout(120)
@given(rec=records())
def test_property_memmap_round_trip(rec, tmp_path_factory):
    memmap = pytest.importorskip("tensordict.memmap")
    path = tmp_path_factory.mktemp("tc") / "rec"
    mm = rec.memmap(path)
    # memory maps live on the cpu: copies and loads say device=cpu, as tensordict 0.15
    _same(mm, rec, check_device=False)
    assert mm.device == torch.device("cpu")
    loaded = memmap.load_memmap(path)
    _same(loaded, rec, check_device=False)
