"""Property tests (hypothesis): TensorDict ops equal the same op applied leaf by leaf,
and the conversions round trip.

Random nested TensorDicts (random keys, depths, batch sizes, dtypes, feature dims,
non-tensor leaves) come from :mod:`tensordict.testing.strategies`; the profile (``ci``:
fixed seed, few examples; ``fuzz``: many) is chosen by ``$HYPOTHESIS_PROFILE``.
"""

from __future__ import annotations

import io
import pickle

import pytest
import torch
import torch.utils._pytree as pytree
from hypothesis import given
from hypothesis import strategies as st

from tensordict import TensorDict, from_consolidated, lazy_stack
from tensordict._base import TensorDictBase
from tensordict._nontensor import NonTensorData, NonTensorStack
from tensordict.testing.strategies import (
    NUMPY_DTYPES,
    assert_td_equal,
    batch_sizes,
    expand_index,
    index_expressions,
    leaf_items,
    register_profiles,
    shape_op_sequences,
    tensordicts,
)

register_profiles()

_STRINGS = st.text("abcdefgh XYZ-_", max_size=6)


def _check_leafwise(out, src, fn, expected_bs):
    """Every leaf (and nested TensorDict, and non-tensor leaf) of ``out`` is ``fn`` of ``src``'s.

    ``fn(x)`` applies the op to the batch dims of ``x`` (the leading dims of ``src``).
    Batch sizes of nested containers and non-tensor leaves are checked by applying
    ``fn`` to an empty tensor of their batch size.
    """
    assert out.batch_size == expected_bs, f"batch_size {out.batch_size} != {expected_bs}"
    out_leaves = dict(leaf_items(out))
    src_leaves = dict(leaf_items(src))
    assert sorted(out_leaves) == sorted(src_leaves)
    for key, leaf in src_leaves.items():
        got = out_leaves[key]
        if isinstance(leaf, torch.Tensor):
            want = fn(leaf)
            assert isinstance(got, torch.Tensor), key
            assert got.dtype == want.dtype, key
            assert got.shape == want.shape, (key, got.shape, want.shape)
            assert torch.equal(got, want), key
        else:
            assert isinstance(got, (NonTensorData, NonTensorStack)), key
            assert got.batch_size == fn(torch.empty(leaf.batch_size)).shape, key
            if isinstance(leaf, NonTensorData) and got.numel():
                assert all(x == leaf.data for x in _flat(got.tolist())), key
    for key, sub in _nested_tds(src):
        got = out.get(key)
        assert isinstance(got, TensorDictBase), key
        assert got.batch_size == fn(torch.empty(sub.batch_size)).shape, (key, got.batch_size)


def _flat(x):
    if isinstance(x, list):
        return [y for item in x for y in _flat(item)]
    return [x]


def _nested_tds(td, prefix=()):
    for key, value in td._items_raw():
        if isinstance(value, TensorDictBase):
            yield (*prefix, key), value
            yield from _nested_tds(value, (*prefix, key))


# ---------------------------------------------------------------------- indexing
@given(st.data())
def test_property_index_equals_leafwise(data):
    td = data.draw(tensordicts())
    idx = data.draw(index_expressions(td.batch_size))
    full = expand_index(idx, td.ndim)
    expected_bs = torch.empty(td.batch_size)[full].shape
    out = td[idx]
    _check_leafwise(out, td, lambda x: x[full], expected_bs)


@given(st.data())
def test_property_setitem_equals_leafwise(data):
    td = data.draw(tensordicts(non_tensor=False))
    idx = data.draw(index_expressions(td.batch_size))
    full = expand_index(idx, td.ndim)
    expected = td.clone()
    for _, leaf in leaf_items(expected):
        leaf[full] = torch.ones((), dtype=leaf.dtype)
    out = td.clone()
    out[idx] = torch.ones_like(td[idx])  # a TensorDict of ones with the indexed shape
    assert_td_equal(out, expected)
    untouched = td.clone()
    untouched[idx] = untouched[idx].clone()  # writing back what was read changes nothing
    assert_td_equal(untouched, td)


# ---------------------------------------------------------------------- shape ops
@given(st.data())
def test_property_shape_op_sequences_equal_leafwise(data):
    td = data.draw(tensordicts(batch_sizes(max_dims=3, max_side=3)))
    ops = data.draw(shape_op_sequences(td.batch_size))
    out = td
    nd_before = [td.ndim]
    for op in ops:
        out = op.td_fn(out)
        nd_before.append(len(op.new_batch))

    def reference(x):
        for op, nd in zip(ops, nd_before):
            x = op.leaf_fn(x, nd)
        return x

    _check_leafwise(out, td, reference, ops[-1].new_batch)


@given(st.data())
def test_property_stack_and_cat_equal_leafwise(data):
    td = data.draw(tensordicts(batch_sizes(min_dims=1, max_dims=2, max_side=3), non_tensor=False))
    n = data.draw(st.integers(1, 3))
    seeds = data.draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n))
    tds = [td] + [td.apply(lambda x, s=s: _like(x, s)) for s in seeds[1:]]
    dim = data.draw(st.integers(-td.ndim - 1, td.ndim))
    stacked = torch.stack(tds, dim)
    pos = dim % (td.ndim + 1)
    keys = [k for k, _ in leaf_items(td)]
    assert sorted(k for k, _ in leaf_items(stacked)) == sorted(keys)
    for key in keys:
        assert torch.equal(stacked.get(key), torch.stack([t.get(key) for t in tds], pos)), key
    cdim = data.draw(st.integers(-td.ndim, td.ndim - 1))
    catted = torch.cat(tds, cdim)
    for key in keys:
        assert torch.equal(catted.get(key), torch.cat([t.get(key) for t in tds], cdim % td.ndim)), key
    assert catted.batch_size == torch.cat([torch.empty(td.batch_size)] * n, cdim).shape


def _like(x, seed):
    gen = torch.Generator().manual_seed(seed)
    if x.dtype is torch.bool:
        return torch.randint(0, 2, x.shape, generator=gen).bool()
    return torch.randint(0, 100, x.shape, generator=gen).to(x.dtype)


@given(st.data())
def test_property_lazy_stack_equals_dense(data):
    td = data.draw(tensordicts(batch_sizes(min_dims=0, max_dims=2, max_side=3), non_tensor=False))
    other = td.apply(lambda x: _like(x, 7))
    dim = data.draw(st.integers(0, td.ndim))
    lazy = lazy_stack([td, other], dim)
    dense = torch.stack([td, other], dim)
    assert lazy.batch_size == dense.batch_size
    assert_td_equal(lazy.to_tensordict(), dense)
    idx = data.draw(index_expressions(dense.batch_size, advanced=False))
    got = lazy[idx]
    got = got.to_tensordict() if hasattr(got, "to_tensordict") else got
    assert_td_equal(got, dense[idx], check_type=False)
    ops = data.draw(shape_op_sequences(dense.batch_size, max_ops=2))
    lazy_out, dense_out = lazy, dense
    for op in ops:
        lazy_out, dense_out = op.td_fn(lazy_out), op.td_fn(dense_out)
    assert_td_equal(lazy_out.to_tensordict(), dense_out, check_type=False)


@given(st.data())
def test_property_apply_equals_leafwise(data):
    td = data.draw(tensordicts())
    out = td.apply(lambda x: x.to(torch.complex128) * 2 + 1)
    _check_leafwise(out, td, lambda x: x.to(torch.complex128) * 2 + 1, td.batch_size)
    out = td.clone()
    assert_td_equal(out, td)
    for (_, a), (_, b) in zip(leaf_items(out), leaf_items(td)):
        if isinstance(a, torch.Tensor) and a.numel():
            assert a.data_ptr() != b.data_ptr()


# ---------------------------------------------------------------------- round trips
@given(tensordicts())
def test_property_pickle_round_trip(td):
    assert_td_equal(pickle.loads(pickle.dumps(td)), td)


@given(tensordicts())
def test_property_torch_save_round_trip(td):
    buf = io.BytesIO()
    torch.save(td, buf)
    buf.seek(0)
    assert_td_equal(torch.load(buf, weights_only=False), td)


@given(tensordicts())
def test_property_pytree_round_trip(td):
    leaves, spec = pytree.tree_flatten(td)
    assert all(isinstance(x, torch.Tensor) for x in leaves)
    assert len(leaves) == sum(isinstance(v, torch.Tensor) for _, v in leaf_items(td))
    assert_td_equal(pytree.tree_unflatten(leaves, spec), td)
    assert_td_equal(pytree.tree_map(lambda x: x, td), td)


@given(tensordicts(min_keys=0, nested_extra_dims=False))
def test_property_flatten_unflatten_keys_round_trip(td):
    flat = td.flatten_keys()
    for key in flat.keys():
        assert isinstance(flat._get_raw(key, None), (torch.Tensor, NonTensorData, NonTensorStack))
    assert sorted(flat.keys()) == sorted(".".join(k) for k, _ in leaf_items(td))
    assert_td_equal(flat.unflatten_keys(), _drop_empty(td))


def _drop_empty(td):
    """``td`` without nested TensorDicts that hold no leaf (flattening cannot keep them)."""
    out = td.empty()
    for key, value in td._items_raw():
        if isinstance(value, TensorDictBase):
            value = _drop_empty(value)
            if not list(value.keys()):
                continue
        out._set_raw(key, value)
    return out


@given(tensordicts())
def test_property_consolidate_then_to_round_trip(td):
    c = td.consolidate()
    assert c.is_consolidated()
    assert_td_equal(c, td, check_type=False)  # no key, leaf or batch size lost
    assert_td_equal(c.to("cpu"), td.to("cpu"), check_type=False)
    for dev in ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",):
        moved = c.to(dev)
        assert_td_equal(moved.to("cpu"), td.to("cpu"), check_type=False)
    # an unlocked copy that gained a key is no longer consolidated and keeps the key
    extra = c.clone().unlock_()
    extra["__new"] = torch.zeros(td.batch_size)
    assert "__new" in extra.to("cpu").keys()


@given(td=tensordicts(non_tensor=_STRINGS))
def test_property_consolidated_file_round_trip(td, tmp_path_factory):
    path = tmp_path_factory.mktemp("consol") / "td.bin"
    td.consolidate(filename=path)
    assert_td_equal(from_consolidated(path), td, check_type=False)


@given(tensordicts(non_tensor=_STRINGS, nested_extra_dims=False))
def test_property_to_dict_from_dict_round_trip(td):
    back = TensorDict.from_dict(td.to_dict(), batch_size=td.batch_size)
    assert_td_equal(back, td)


@given(tensordicts(dtypes=NUMPY_DTYPES, non_tensor=_STRINGS, nested_extra_dims=False, min_keys=1))
def test_property_struct_array_round_trip(td):
    pytest.importorskip("numpy")
    if any(isinstance(v, TensorDictBase) and not list(v.keys()) for _, v in _nested_tds(td)):
        td = _drop_empty(td)
    arr = td.to_struct_array()
    assert tuple(arr.shape) == tuple(td.batch_size)
    back = TensorDict.from_struct_array(arr)
    assert_td_equal(back, td)
