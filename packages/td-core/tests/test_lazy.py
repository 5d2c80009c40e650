"""LazyStackedTensorDict: lazy reads, write-through, heterogeneous stacks, indexing,
shape ops and the TensorDictBase methods, each checked against the dense stack."""

import pickle

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tensordict
from tensordict import (
    LazyStackedTensorDict,
    NonTensorStack,
    TensorDict,
    lazy_legacy,
    lazy_stack,
    maybe_dense_stack,
    set_get_defaults_to_none,
    set_lazy_legacy,
)
from tensordict._lazy import dense_stack_tds


def make_tds(n=3, bs=(4,), device=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [
        TensorDict(
            {
                "a": torch.randn((*bs, 2), generator=g),
                "b": {
                    "c": torch.randn(torch.Size(bs), generator=g),
                    "d": torch.arange(int(torch.Size(bs).numel())).view(bs) + i,
                },
                "s": "text",
            },
            batch_size=bs,
            device=device,
        )
        for i in range(n)
    ]


def assert_same(a, b):
    """Same keys (nested leaves) and equal values."""
    ka = sorted(a.keys(True, True), key=str)
    kb = sorted(b.keys(True, True), key=str)
    assert ka == kb
    assert a.batch_size == b.batch_size
    for k in ka:
        va, vb = a.get(k), b.get(k)
        if isinstance(va, torch.Tensor):
            torch.testing.assert_close(va, vb)
        else:
            assert va == vb


# ---------------------------------------------------------------------- construction
@pytest.mark.parametrize("stack_dim", [0, 1, -1])
def test_batch_size_and_attributes(stack_dim):
    tds = make_tds(3, (4, 5))
    s = LazyStackedTensorDict(*tds, stack_dim=stack_dim)
    expected = torch.stack([torch.zeros(4, 5)] * 3, stack_dim).shape
    assert s.batch_size == expected
    assert s.stack_dim == (stack_dim % 3)
    assert s.tensordicts == tds
    assert all(a is b for a, b in zip(s.tensordicts, tds))
    assert s.device is None


def test_device_common_or_none(device):
    tds = make_tds(2, device=device)
    assert lazy_stack(tds).device == device
    mixed = [tds[0], TensorDict({"a": torch.zeros(4, 2)}, [4])]
    assert lazy_stack(mixed).device is None


def test_torch_stack_dense_by_default_lazy_under_legacy():
    tds = make_tds()
    assert type(torch.stack(tds)) is TensorDict
    assert not lazy_legacy()
    with set_lazy_legacy(True):
        s = torch.stack(tds, 1)
        assert lazy_legacy()
    assert isinstance(s, LazyStackedTensorDict)
    assert s.stack_dim == 1 and s.batch_size == torch.Size([4, 3])

    @set_lazy_legacy(True)
    def build():
        return torch.stack(tds)

    assert isinstance(build(), LazyStackedTensorDict)
    assert not lazy_legacy()


def test_torch_stack_of_lazy_stacks():
    s1, s2 = lazy_stack(make_tds(seed=1)), lazy_stack(make_tds(seed=2))
    dense = torch.stack([s1, s2], 0)
    assert type(dense) is TensorDict and dense.batch_size == torch.Size([2, 3, 4])
    torch.testing.assert_close(dense["a"][1], s2["a"])
    with set_lazy_legacy(True):
        lazy = torch.stack([s1, s2], 0)
    assert isinstance(lazy, LazyStackedTensorDict) and lazy.tensordicts[0] is s1
    torch.testing.assert_close(lazy["b", "c"], dense["b", "c"])


def test_top_level_names():
    assert tensordict.LazyStackedTensorDict is LazyStackedTensorDict
    assert tensordict.lazy_stack is lazy_stack
    assert tensordict.maybe_dense_stack is maybe_dense_stack


def test_build_does_no_per_key_work():
    tds = make_tds()
    s = lazy_stack(tds)
    # values read after building reflect later changes: nothing was stacked at build time
    for td in tds:
        td["late"] = torch.ones(4)
        td["a"].fill_(3.0)
    assert (s["late"] == 1).all()
    assert (s["a"] == 3).all()


# ---------------------------------------------------------------------- bad input
def test_different_batch_sizes_give_minus_one_dims():
    tds = [TensorDict({"a": torch.zeros(3)}, [3]), TensorDict({"a": torch.zeros(4)}, [4])]
    assert lazy_stack(tds).batch_size == (2, -1)
    assert LazyStackedTensorDict(*tds, stack_dim=1).batch_size == (-1, 2)
    assert [t.batch_size for t in lazy_stack(tds).tensordicts] == [(3,), (4,)]
    for build in (
        lambda: lazy_stack(tds, strict_shape=True),
        lambda: LazyStackedTensorDict(*tds, strict_shape=True),
        lambda: lazy_stack([*tds, TensorDict()]),
    ):
        with pytest.raises(RuntimeError, match=r"stacking tensordicts requires.*\(3,\).*\("):
            build()
    with pytest.raises(RuntimeError):
        lazy_stack(tds, -3)
    with set_lazy_legacy(True), pytest.raises(RuntimeError, match=r"\(3,\).*\(4,\)"):
        torch.stack(tds)


def test_bad_elements_and_dims():
    with pytest.raises(TypeError, match="position 1"):
        LazyStackedTensorDict(TensorDict({}, [2]), torch.zeros(2))
    with pytest.raises(IndexError, match="stack_dim=3"):
        LazyStackedTensorDict(*make_tds(2), stack_dim=3)
    with pytest.raises(RuntimeError, match="non-empty"):
        lazy_stack([])
    empty = LazyStackedTensorDict()
    assert empty.batch_size == (0,) and empty.device is None


def test_missing_key_names_indices():
    tds = make_tds(4)
    del tds[1]["a"]
    del tds[3]["a"]
    s = lazy_stack(tds)
    with pytest.raises(KeyError, match=r"\[1, 3\]"):
        s["a"]
    set_get_defaults_to_none(False)
    try:
        with pytest.raises(KeyError, match=r"\[1, 3\]"):
            s.get("a")
    finally:
        set_get_defaults_to_none(True)
    assert s.get("a", None) is None
    with pytest.raises(KeyError, match="'zz' not found"):
        s["zz"]
    del tds[2]["b", "c"]
    with pytest.raises(KeyError, match=r"\[2\]"):
        s["b", "c"]
    with pytest.raises(KeyError, match=r"\[1, 3\]"):
        s.set_("a", torch.zeros(4, 4, 2))


# ---------------------------------------------------------------------- reads and writes
def test_seed_overview_example():
    tensordicts = [
        TensorDict({"a": torch.rand(10), "b": torch.rand(10, 100, 10)}, [10]) for _ in range(3)
    ]
    with set_lazy_legacy(True):
        stacked = torch.stack(tensordicts, 0)  # no stacking happens here
    stacked_a = stacked["a"]
    assert stacked_a.shape == torch.Size([3, 10])
    stacked["a"] = torch.zeros_like(stacked["a"])
    assert (tensordicts[0]["a"] == 0).all()


def test_get_values_match_dense():
    tds = make_tds(3, (4,))
    s, dense = lazy_stack(tds, 1), torch.stack(tds, 1)
    assert_same(s, dense)
    assert s.get("s").tolist() == [["text"] * 3] * 4
    assert isinstance(s["b"], LazyStackedTensorDict)
    assert all(n is td["b"] for n, td in zip(s["b"].tensordicts, tds))


def test_set_writes_through():
    tds = make_tds()
    s = lazy_stack(tds)
    s["new"] = torch.arange(12.0).view(3, 4)
    assert (tds[2]["new"] == torch.arange(8.0, 12.0)).all()
    s["b", "e"] = torch.ones(3, 4, 7)
    assert tds[1]["b", "e"].shape == torch.Size([4, 7])
    s["x", "y"] = torch.ones(3, 4)
    assert (tds[0]["x", "y"] == 1).all()
    s["obj"] = "hello"
    assert tds[1]["obj"] == "hello"
    s["d"] = {"k": torch.zeros(3, 4)}
    assert tds[2]["d", "k"].shape == torch.Size([4])
    with pytest.raises(RuntimeError, match="batch dimension mismatch"):
        s["bad"] = torch.zeros(2, 4)


def test_inplace_writes_keep_storage():
    tds = make_tds()
    s = lazy_stack(tds)
    ptr = tds[1]["a"].data_ptr()
    s.set_("a", torch.ones(3, 4, 2))
    assert tds[1]["a"].data_ptr() == ptr and (tds[1]["a"] == 1).all()
    s.set("a", torch.full((3, 4, 2), 2.0), inplace=True)
    assert tds[1]["a"].data_ptr() == ptr and (tds[1]["a"] == 2).all()
    s.set_("a", 5.0)
    assert (tds[2]["a"] == 5).all()
    s.fill_(("b", "c"), 7)
    assert (tds[0]["b", "c"] == 7).all()
    s.zero_()
    assert (tds[2]["a"] == 0).all() and tds[2]["a"].data_ptr() == tds[2]["a"].data_ptr()
    s.update_({"a": torch.ones(3, 4, 2)})
    assert (tds[0]["a"] == 1).all() and tds[1]["a"].data_ptr() == ptr
    s.apply_(lambda x: x + 1)
    assert (tds[0]["a"] == 2).all() and tds[1]["a"].data_ptr() == ptr


def test_indexed_writes_go_through():
    tds = make_tds(3, (4,))
    s = lazy_stack(tds)
    s[1] = TensorDict({"a": torch.full((4, 2), 9.0)}, [4])
    assert (tds[1]["a"] == 9).all() and not (tds[0]["a"] == 9).any()
    s[:, 1] = TensorDict({"a": torch.full((3, 2), -1.0)}, [3])
    assert all((td["a"][1] == -1).all() for td in tds)
    assert (tds[0]["a"][0] != -1).all()
    s[torch.tensor([0, 2])] = TensorDict({"b": {"c": torch.zeros(2, 4)}}, [2, 4])
    assert (tds[0]["b", "c"] == 0).all() and (tds[2]["b", "c"] == 0).all()
    assert not (tds[1]["b", "c"] == 0).all()
    s[0:2, 3] = {"a": torch.full((2, 2), 4.0)}
    assert (tds[1]["a"][3] == 4).all() and not (tds[2]["a"][3] == 4).all()
    s[2] = 0
    assert (tds[2]["a"] == 0).all()
    s.set_at_("a", 8.0, (slice(None), 0))
    assert all((td["a"][0] == 8).all() for td in tds)
    s.update_at_({"a": torch.full((3, 2), 6.0)}, (slice(None), 1))
    assert all((td["a"][1] == 6).all() for td in tds)


def test_indexed_write_stack_dim_1():
    tds = make_tds(3, (4,))
    s = lazy_stack(tds, 1)  # batch [4, 3]
    s[:, 2] = TensorDict({"a": torch.full((4, 2), 3.0)}, [4])
    assert (tds[2]["a"] == 3).all() and not (tds[1]["a"] == 3).any()
    s[1] = TensorDict({"a": torch.full((3, 2), 5.0)}, [3])
    assert all((td["a"][1] == 5).all() for td in tds)
    # an index mixing elements across the stack dim writes through a dense copy
    s[torch.tensor([0, 1]), torch.tensor([0, 1])] = 0
    assert (tds[0]["a"][0] == 0).all() and (tds[1]["a"][1] == 0).all()


def test_update_writes_through():
    tds = make_tds()
    s = lazy_stack(tds)
    other = lazy_stack(
        [TensorDict({"a": torch.ones(4, 2), "z": torch.ones(4)}, [4]) for _ in range(3)]
    )
    s.update(other)
    assert (tds[0]["a"] == 1).all() and "z" in tds[2].keys()
    s.update(TensorDict({"w": torch.zeros(3, 4)}, [3, 4]))
    assert "w" in tds[1].keys()
    s.update({"b": {"c": torch.full((3, 4), 2.0)}})
    assert (tds[2]["b", "c"] == 2).all()


# ---------------------------------------------------------------------- heterogeneous stacks
def hetero():
    return [
        TensorDict(
            {"a": torch.zeros(2, 3), "shared": {"x": torch.ones(2, 1)}, "only0": torch.zeros(2)},
            [2],
        ),
        TensorDict({"a": torch.ones(2, 5), "shared": {"x": torch.ones(2, 4)}}, [2]),
    ]


def test_heterogeneous_shapes():
    s = lazy_stack(hetero())
    assert s._shape_of("a") == torch.Size([2, 2, -1])
    assert s._shape_of(("shared", "x")) == torch.Size([2, 2, -1])
    with pytest.raises(RuntimeError, match="densify"):
        s["a"]
    with pytest.raises(RuntimeError, match="as_nested_tensor"):
        s.get(("shared", "x"))
    assert [t.shape[-1] for t in s.get("a", as_list=True)] == [3, 5]
    padded = s.get("a", as_padded_tensor=True, padding_value=-1.0)
    assert padded.shape == torch.Size([2, 2, 5]) and (padded[0, :, 3:] == -1).all()
    left = s.get("a", as_padded_tensor=True, padding_side="left")
    assert (left[0, :, :2] == 0).all() and left[1].sum() == 10
    nested = s.get("a", as_nested_tensor=True, layout=torch.jagged)
    assert nested.is_nested
    r = repr(s)
    assert "shape=torch.Size([2, 2, -1])" in r
    # listing keys and membership tests never stack
    assert set(s.keys(True, True)) == {"a", ("shared", "x")}
    assert ("shared", "x") in s.keys(True, True)
    assert "shared" not in s.keys(True, True) and "shared" in s.keys()
    assert ("shared", "y") not in s.keys(True)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype stage")
def test_densify():
    s = lazy_stack(hetero())
    for layout in (torch.jagged, torch.strided):
        d = s.densify(layout=layout)
        assert type(d) is TensorDict and d.batch_size == torch.Size([2, 2])
        assert d["a"].is_nested and d["shared", "x"].is_nested
        torch.testing.assert_close(d["a"].unbind()[1], torch.ones(2, 5))
    homogeneous = lazy_stack(make_tds()).densify()
    assert not homogeneous["a"].is_nested
    with pytest.raises(RuntimeError, match="stack dim is 1"):
        lazy_stack(hetero(), 1).densify()


def test_heterogeneous_keys():
    tds = hetero()
    s = lazy_stack(tds)
    assert list(s.keys()) == ["a", "shared"]
    assert "only0" not in s.keys()
    with pytest.raises(KeyError, match=r"TensorDict\(s\) \[1\]"):
        s["only0"]
    r = repr(s)
    assert "exclusive_fields={\n        0 ->\n            only0: Tensor" in r
    assert r.endswith("stack_dim=0)")


def test_repr_documented_form():
    tds = [TensorDict({"bias": torch.zeros(4), "weight": torch.zeros(4, 3)}) for _ in range(2)]
    expected = (
        "LazyStackedTensorDict(\n"
        "    fields={\n"
        "        bias: Tensor(shape=torch.Size([2, 4]), device=cpu, dtype=torch.float32, is_shared=False),\n"
        "        weight: Tensor(shape=torch.Size([2, 4, 3]), device=cpu, dtype=torch.float32, is_shared=False)},\n"
        "    exclusive_fields={\n"
        "    },\n"
        "    batch_size=torch.Size([2]),\n"
        "    device=None,\n"
        "    is_shared=False,\n"
        "    stack_dim=0)"
    )
    assert repr(lazy_stack(tds)) == expected


# ---------------------------------------------------------------------- indexing
def test_int_and_slice_on_stack_dim_return_originals():
    tds = make_tds(4)
    s = lazy_stack(tds)
    assert s[2] is tds[2] and s[-1] is tds[3]
    sub = s[1:3]
    assert isinstance(sub, LazyStackedTensorDict) and sub.tensordicts == tds[1:3]
    assert all(a is b for a, b in zip(sub.tensordicts, tds[1:3]))
    picked = s[torch.tensor([3, 0])]
    assert picked.tensordicts[0] is tds[3] and picked.batch_size == torch.Size([2, 4])
    masked = s[torch.tensor([True, False, True, False])]
    assert masked.tensordicts[1] is tds[2]
    assert s[[0, 1]].tensordicts[1] is tds[1]
    with pytest.raises(IndexError, match="out of bounds"):
        s[4]
    s2 = lazy_stack(tds, 1)
    assert s2[:, 1] is tds[1]


INDICES = [
    0,
    -1,
    slice(1, 3),
    (slice(None), 1),
    (slice(None), slice(None), 2),
    (1, slice(None), 0),
    (Ellipsis, 1),
    (None, 0),
    (slice(None), None, 1),
    torch.tensor([1, 0]),
    (slice(None), torch.tensor([0, 2, 2])),
    (0, torch.tensor([1, 2])),
    (torch.tensor([0, 1]), torch.tensor([1, 1])),
    (slice(None), torch.tensor([[0, 1], [1, 2]])),
    torch.tensor([[True, False, True], [False, True, True]]),
]


@pytest.mark.parametrize("stack_dim", [0, 1, 2])
@pytest.mark.parametrize("index", INDICES, ids=[str(i) for i in range(len(INDICES))])
def test_index_matches_dense(stack_dim, index):
    member_bs = [2, 3, 3]
    n = member_bs.pop(stack_dim)
    tds = [
        TensorDict(
            {"a": torch.randn(*member_bs, 2), "n": {"c": torch.randn(*member_bs)}}, member_bs
        )
        for _ in range(n)
    ]
    s = lazy_stack(tds, stack_dim)
    dense = torch.stack(tds, stack_dim)
    assert s.batch_size == dense.batch_size == torch.Size([2, 3, 3])
    out = s[index]
    ref = dense[index]
    assert out.batch_size == ref.batch_size
    assert_same(out, ref)


@settings(max_examples=30, deadline=None)
@given(
    stack_dim=st.integers(0, 2),
    parts=st.lists(
        st.one_of(
            st.integers(-2, 1),
            st.sampled_from([slice(None), slice(0, 1), slice(1, None), None, Ellipsis]),
        ),
        max_size=3,
    ),
)
def test_index_property(stack_dim, parts):
    member_bs = [2, 2]
    tds = [TensorDict({"a": torch.randn(*member_bs, 3)}, member_bs) for _ in range(2)]
    s = lazy_stack(tds, stack_dim)
    dense = torch.stack(tds, stack_dim)
    index = tuple(parts)
    try:
        ref = dense[index]
    except IndexError:
        with pytest.raises(IndexError):
            s[index]
        return
    out = s[index]
    assert out.batch_size == ref.batch_size
    torch.testing.assert_close(out["a"], ref["a"])


def test_index_across_stack_dim_views_write_through():
    tds = make_tds(3, (4,))
    s = lazy_stack(tds)
    view = s[:, 1:3]
    assert isinstance(view, LazyStackedTensorDict) and view.batch_size == torch.Size([3, 2])
    view["a"] = torch.zeros(3, 2, 2)  # replaces the key in each indexed copy, not in tds
    view.set_("a", torch.ones(3, 2, 2))
    s[:, 1:3].apply_(lambda x: x.fill_(4))
    assert (tds[0]["a"][1:3] == 4).all()


# ---------------------------------------------------------------------- shape ops
SHAPE_OPS = [
    ("unsqueeze0", lambda t: t.unsqueeze(0)),
    ("unsqueeze-1", lambda t: t.unsqueeze(-1)),
    ("unsqueeze1", lambda t: t.unsqueeze(1)),
    ("squeeze", lambda t: t.unsqueeze(1).squeeze(1)),
    ("squeeze_all", lambda t: t.unsqueeze(0).unsqueeze(-1).squeeze()),
    ("permute", lambda t: t.permute(2, 0, 1)),
    ("transpose", lambda t: t.transpose(0, 2)),
    ("transpose_same", lambda t: t.transpose(1, 1)),
    ("expand", lambda t: t.expand(2, 2, 3, 4)),
    ("flatten01", lambda t: t.flatten(0, 1)),
    ("flatten12", lambda t: t.flatten(1, 2)),
    ("unflatten", lambda t: t.unflatten(2, (2, 2))),
    ("unflatten0", lambda t: t.unflatten(0, (1, 2))),
    ("view", lambda t: t.view(-1)),
    ("reshape", lambda t: t.reshape(6, 4)),
    ("flip", lambda t: t.flip(1)),
    ("roll", lambda t: t.roll(1, 0)),
    ("repeat", lambda t: t.repeat(2, 1, 1)),
    ("narrow", lambda t: t.narrow(2, 1, 2)),
]


@pytest.mark.parametrize("stack_dim", [0, 1, 2])
@pytest.mark.parametrize("name,op", SHAPE_OPS, ids=[n for n, _ in SHAPE_OPS])
def test_shape_ops_match_dense(stack_dim, name, op):
    member_bs = [2, 3, 4]
    del member_bs[stack_dim]
    n = [2, 3, 4][stack_dim]
    tds = [
        TensorDict(
            {"a": torch.randn(*member_bs, 5), "n": {"c": torch.randn(*member_bs)}}, member_bs
        )
        for _ in range(n)
    ]
    s = lazy_stack(tds, stack_dim)
    dense = torch.stack(tds, stack_dim)
    assert s.batch_size == torch.Size([2, 3, 4])
    assert_same(op(s), op(dense))


def test_shape_ops_stay_lazy_and_share_storage():
    tds = make_tds(3, (4,))
    s = lazy_stack(tds)
    u = s.unsqueeze(-1)
    assert isinstance(u, LazyStackedTensorDict) and u.stack_dim == 0
    u["a"].sum()  # readable
    p = lazy_stack(tds, 1).permute(1, 0)
    assert isinstance(p, LazyStackedTensorDict) and p.stack_dim == 0 and p.tensordicts[0] is tds[0]
    t = s.transpose(0, 1)
    assert t.stack_dim == 1 and t.tensordicts[2] is tds[2]
    assert lazy_stack(tds[:1]).squeeze(0) is tds[0]
    e = lazy_stack(tds[:1]).expand(3, 4)
    assert e.batch_size == torch.Size([3, 4]) and all(
        td["a"].data_ptr() == tds[0]["a"].data_ptr() for td in e.tensordicts
    )


def test_unbind_split_chunk():
    tds = make_tds(4, (3,))
    s = lazy_stack(tds)
    parts = s.unbind(0)
    assert all(a is b for a, b in zip(parts, tds))
    assert all(a is b for a, b in zip(torch.unbind(s, 0), tds))
    cols = s.unbind(1)
    assert len(cols) == 3 and isinstance(cols[0], LazyStackedTensorDict)
    torch.testing.assert_close(cols[1]["a"], torch.stack(tds)["a"][:, 1])
    assert [p.batch_size[0] for p in s.split(3)] == [3, 1]
    assert s.split([1, 3])[1].tensordicts[0] is tds[1]
    assert [c.batch_size[0] for c in s.chunk(2)] == [2, 2]
    other = s.split(2, 1)
    assert [o.batch_size for o in other] == [torch.Size([4, 2]), torch.Size([4, 1])]
    assert [list(x.keys()) for x in s] == [list(td.keys()) for td in tds]


# ---------------------------------------------------------------------- conversions
def test_contiguous_and_to_tensordict_are_dense_copies():
    tds = make_tds()
    s = lazy_stack(tds)
    for dense in (s.contiguous(), s.to_tensordict()):
        assert type(dense) is TensorDict and type(dense["b"]) is TensorDict
        assert_same(dense, torch.stack(tds))
        dense["a"].zero_()
        assert not (tds[0]["a"] == 0).all()
    assert type(s._new_like({})) is TensorDict
    assert s._new_like({}).batch_size == s.batch_size


def test_maybe_dense_stack_and_dense_stack_tds():
    tds = make_tds()
    assert type(maybe_dense_stack(tds)) is TensorDict
    with set_lazy_legacy(True):
        assert type(maybe_dense_stack(tds)) is TensorDict
    assert isinstance(maybe_dense_stack(hetero()), LazyStackedTensorDict)
    keys_differ = [TensorDict({"x": torch.zeros(3)}, [3]), TensorDict({"y": torch.zeros(3)}, [3])]
    assert isinstance(maybe_dense_stack(keys_differ), LazyStackedTensorDict)
    s = lazy_stack(tds, 1)
    dense = dense_stack_tds(s)
    assert type(dense) is TensorDict and dense.batch_size == torch.Size([4, 3])
    assert_same(dense, torch.stack(tds, 1))
    nested = [TensorDict({"l": lazy_stack(make_tds(2, (), seed=i))}, []) for i in range(2)]
    out = dense_stack_tds(nested)
    assert type(out) is TensorDict and type(out["l"]) is TensorDict
    assert out["l", "a"].shape == torch.Size([2, 2, 2])


def test_non_tensor_leaves():
    tds = [TensorDict({"s": f"v{i}", "same": "x"}, []) for i in range(3)]
    s = lazy_stack(tds)
    assert s["s"] == ["v0", "v1", "v2"]
    assert s["same"] == ["x", "x", "x"]  # equal values stay a stack (tensordict 0.15)
    assert isinstance(s.get("s"), NonTensorStack)
    assert isinstance(s._get_raw("s"), NonTensorStack)
    s["s"] = "new"
    assert tds[2]["s"] == "new"


# ---------------------------------------------------------------------- TensorDictBase methods
def test_to_and_clone(device):
    tds = make_tds()
    s = lazy_stack(tds)
    moved = s.to(device)
    assert isinstance(moved, LazyStackedTensorDict) and moved.device == device
    assert moved["a"].device.type == device.type
    as_double = s.to(torch.float64)
    assert isinstance(as_double, LazyStackedTensorDict) and as_double["a"].dtype == torch.float64
    c = s.clone()
    assert isinstance(c, LazyStackedTensorDict) and c.stack_dim == s.stack_dim
    assert c.tensordicts[0] is not tds[0]
    assert c.tensordicts[0]["a"].data_ptr() != tds[0]["a"].data_ptr()
    assert_same(c, s)
    shallow = s.clone(recurse=False)
    assert shallow.tensordicts[0]["a"].data_ptr() == tds[0]["a"].data_ptr()


def test_select_exclude_are_lazy():
    tds = make_tds()
    s = lazy_stack(tds)
    sel = s.select("a", ("b", "c"))
    assert isinstance(sel, LazyStackedTensorDict)
    assert set(sel.keys(True, True)) == {"a", ("b", "c")}
    ex = s.exclude("a", ("b", "d"))
    assert isinstance(ex, LazyStackedTensorDict)
    assert set(ex.keys(True)) == {"b", ("b", "c"), "s"}  # "s" (non-tensor) is not a leaf
    del tds[1]["a"]
    with pytest.raises(KeyError, match=r"\[1\]"):
        s.select("a")
    assert list(s.select("a", strict=False).keys()) == []


def test_apply_is_lazy_and_matches_dense():
    tds = make_tds(3, (4,))
    s = lazy_stack(tds, 1)
    out = s.apply(lambda x: x * 2)
    assert isinstance(out, LazyStackedTensorDict) and out.stack_dim == 1
    assert_same(out, torch.stack(tds, 1).apply(lambda x: x * 2))
    summed = s.apply(lambda x, y: x + y, s)
    torch.testing.assert_close(summed["a"], s["a"] * 2)
    dense_other = torch.stack(tds, 1)
    torch.testing.assert_close(s.apply(lambda x, y: x - y, dense_other)["a"], torch.zeros(4, 3, 2))
    named = s.named_apply(lambda k, x: x if k == "a" else None)
    assert set(named.keys(True)) == {"a", "s"}
    reduced = s.apply(lambda x: x[:2], batch_size=[2, 3])
    assert reduced.batch_size == torch.Size([2, 3])
    changed_stack = s.apply(lambda x: x[:, :2], batch_size=[4, 2])
    assert changed_stack.batch_size == torch.Size([4, 2])


def test_apply_on_heterogeneous_stack():
    s = lazy_stack(hetero())
    out = s.apply(lambda x: x + 1)
    assert out._shape_of("a") == torch.Size([2, 2, -1])
    assert (out.tensordicts[1]["a"] == 2).all()


def test_lock_is_empty_comparisons():
    tds = make_tds()
    s = lazy_stack(tds)
    s.lock_()
    assert s.is_locked and all(td.is_locked for td in tds)
    with pytest.raises(RuntimeError, match="locked"):
        s["new"] = torch.zeros(3, 4)
    s.set_("a", torch.zeros(3, 4, 2))
    s.unlock_()
    assert not s.is_locked and not tds[0].is_locked
    with s.lock_():
        assert tds[1].is_locked
    assert not tds[1].is_locked
    assert not s.is_empty()
    assert lazy_stack([TensorDict({}, [2]) for _ in range(2)]).is_empty()
    eq = s == s.clone()
    assert isinstance(eq, LazyStackedTensorDict)
    assert eq.all() and not (s != s.clone()).any()
    assert (s == torch.stack(tds)).all()
    other = s.clone()
    other.tensordicts[1]["a"] += 1
    assert not (s == other).all()
    assert (s < other).any()
    assert (s["a"] == s.contiguous()["a"]).all()
    all_dim = (s == s).all(dim=0)
    assert type(all_dim) is TensorDict and all_dim.batch_size == torch.Size([4])


def test_keys_views_and_misc():
    tds = make_tds()
    s = lazy_stack(tds)
    assert ("b", "c") in s.keys(True)
    assert ("b", "zz") not in s.keys(True)
    assert len(s.keys(True, True)) == 3  # the non-tensor "s" is not a leaf by default
    assert dict(s.items())["a"].shape == torch.Size([3, 4, 2])
    s.rename_key_("a", "aa")
    assert "aa" in tds[0].keys() and "a" not in tds[2].keys()
    del s["aa"]
    assert "aa" not in tds[1].keys()
    assert s.pop(("b", "c")).shape == torch.Size([3, 4])
    assert ("b", "c") not in tds[0].keys(True)
    flat = s.flatten_keys()
    assert isinstance(flat, LazyStackedTensorDict) and "b.d" in flat.keys()
    assert ("b", "d") in flat.unflatten_keys().keys(True)
    s.batch_size = [3, 4]
    with pytest.raises(RuntimeError, match="stack dim"):
        s.batch_size = [4]
    assert len(s) == 3 and s.numel() == 12
    ptrs = s.data_ptr()
    assert ptrs.batch_size == torch.Size([])  # batch_size [] as for any TensorDict (tensordict 0.15)
    s.clear()
    assert all(not list(td.keys()) for td in tds)


def test_pickle_round_trip():
    s = lazy_stack(make_tds(), 1)
    out = pickle.loads(pickle.dumps(s))
    assert isinstance(out, LazyStackedTensorDict) and out.stack_dim == 1
    assert_same(out, s)


# ---------------------------------------------------------------------- math
def test_inplace_math_writes_through():
    tds = [TensorDict({"a": torch.ones(4, 2), "b": {"c": torch.ones(4)}}, [4]) for _ in range(3)]
    s = lazy_stack(tds)
    ptr = tds[0]["a"].data_ptr()
    s += 1
    assert (tds[0]["a"] == 2).all() and tds[0]["a"].data_ptr() == ptr
    s.mul_(torch.arange(3.0))  # a tensor over the stack dim is split along it
    assert (tds[0]["a"] == 0).all() and (tds[2]["a"] == 4).all()
    s.sub_(lazy_stack([td.clone() for td in tds]))
    assert (tds[2]["b", "c"] == 0).all()
    s.masked_fill_(torch.ones(3, 4, dtype=torch.bool), 0.5)
    assert (tds[1]["b", "c"] == 0.5).all()
    s.exp_()
    torch.testing.assert_close(tds[1]["a"], torch.full((4, 2), 0.5).exp())
    s.clamp_(0, 1)
    assert tds[2]["a"].max() <= 1


def test_out_of_place_math_is_lazy():
    tds = make_tds(3, (4,))
    s = lazy_stack(tds, 1)
    dense = torch.stack(tds, 1)
    for op in (
        lambda t: t + 1,
        lambda t: 2 * t - t,
        lambda t: -t,
        lambda t: t.abs(),
        lambda t: t.exp(),
    ):
        out = op(s.exclude("s"))
        assert isinstance(out, LazyStackedTensorDict) and out.stack_dim == 1
        assert_same(out, op(dense.exclude("s")))
    torch.testing.assert_close((s.exclude("s") + dense.exclude("s"))["a"], dense["a"] * 2)
    h = lazy_stack(hetero())
    doubled = h * 2 + 1
    assert doubled._shape_of("a") == torch.Size([2, 2, -1])
    assert (doubled.tensordicts[1]["a"] == 3).all()


def test_from_modules_lazy_repr_matches_documentation():
    modules = [torch.nn.Linear(3, 4) for _ in range(2)]
    params = TensorDict.from_modules(*modules, lazy_stack=True)
    assert isinstance(params, LazyStackedTensorDict)
    assert "bias: Tensor(shape=torch.Size([2, 4])" in repr(params)
    params["weight"].sum().backward()
    assert modules[0].weight.grad is not None


def test_method_forms_on_every_tensordict():
    a = TensorDict(x=torch.zeros(3), batch_size=[3])
    b = TensorDict(y=torch.ones(3), batch_size=[3])
    s = TensorDict.lazy_stack([a, b])
    assert isinstance(s, LazyStackedTensorDict) and s.batch_size == torch.Size([2, 3])
    assert type(TensorDict.maybe_dense_stack([a, a])) is TensorDict
    assert isinstance(TensorDict.maybe_dense_stack([a, b]), LazyStackedTensorDict)
    td = TensorDict({"a": torch.arange(6).view(2, 3)}, batch_size=(2, 3))
    td2 = td.to_lazystack()
    assert isinstance(td2, LazyStackedTensorDict) and td2.stack_dim == 0
    td3 = td2.to_lazystack(1)
    assert td3.stack_dim == 1 and td3.batch_size == torch.Size([2, 3])
    assert (td3["a"] == td["a"]).all()
    td3["a"] = torch.zeros(2, 3, dtype=torch.long)  # views of td: writes reach it
    assert td2.to_lazystack(0) is td2
    inner = lazy_stack([TensorDict(a=torch.zeros(3)), TensorDict(a=torch.ones(4))])
    outer = TensorDict({"inner": inner, "t": torch.zeros(2)}, batch_size=[2])
    dense = outer.densify(layout=torch.jagged)
    assert type(dense["inner"]) is TensorDict and dense["inner", "a"].is_nested
    plain = TensorDict({"t": torch.zeros(2)}, [2])
    assert plain.densify() is plain
