"""Small behaviours pinned by tensordict 0.15: error wording, comparisons with
non-tensor objects, nested TensorDicts adopting the parent's batch size, ``to(other=)``
and ``repeat_interleave`` without ``dim``."""

import pytest
import torch

from tensordict import TensorDict


def make():
    return TensorDict({"a": torch.zeros(4, 3), "b": {"c": torch.ones(4, 3, dtype=torch.int64)}}, [4, 3])


def test_bool_and_pop_wording():
    td = make()
    with pytest.raises(RuntimeError, match="Converting a tensordict to boolean value is not permitted"):
        bool(td)
    with pytest.raises(KeyError, match="You are trying to pop key .*zz.*Present keys"):
        td.pop("zz")
    assert td.pop("zz", None) is None


def test_compare_with_str_and_none():
    td = make()
    assert (td == "z") is False and (td != "z") is True
    assert (td == None) is False  # noqa: E711
    assert (td == td.clone()).all()


def test_nested_td_adopts_parent_batch_size():
    td = make()
    inner = TensorDict({"x": torch.randn(4, 3, 2)}, [])
    td["inner"] = inner
    assert td["inner"].batch_size == (4, 3) and inner.batch_size == ()
    assert td["inner", "x"] is inner["x"]
    td["part"] = TensorDict({"x": torch.randn(4, 3)}, [4])
    assert td["part"].batch_size == (4, 3)
    with pytest.raises(RuntimeError, match="'bad'"):
        td["bad"] = TensorDict({"x": torch.randn(5)}, [])


def test_to_other_tensordict():
    td = make()
    same = TensorDict({"a": torch.zeros(1, dtype=torch.half)}, [], device="cpu")
    out = td.to(other=same)
    assert out.device == torch.device("cpu") and out["b", "c"].dtype == torch.half
    mixed = TensorDict({"a": torch.zeros(1, dtype=torch.half), "i": torch.zeros(1, dtype=torch.int64)}, [], device="cpu")
    out = td.to(mixed)
    assert out["a"].dtype == torch.float32 and out.device == torch.device("cpu")


def test_repeat_interleave_without_dim():
    td = make()
    out = td.repeat_interleave(2)
    assert out.batch_size == (24,)
    assert torch.equal(out["b", "c"], td["b", "c"].repeat_interleave(2))
    assert td.repeat_interleave(2, dim=1).batch_size == (4, 6)


def test_update_kwargs_and_sorted_views():
    td = TensorDict({"a": torch.zeros(3)}, [3])
    td.update(b=torch.ones(3))
    td.update({"a": torch.full((3,), 2.0), "b": torch.full((3,), 3.0)}, a=torch.full((3,), 7.0))
    assert (td["a"] == 7).all() and (td["b"] == 3).all()
    nested = TensorDict({"z": 0, "a": {"c": 1, "b": 2}})
    assert [k for k, _ in nested.items(True, True, sort=True)] == [("a", "b"), ("a", "c"), "z"]
    assert [v.item() for v in nested.values(True, True, sort=True)] == [2, 1, 0]


def test_contiguous_canonical_and_inplace():
    odd = torch.empty_strided((1, 4, 5), (5, 5, 1)).copy_(torch.arange(20.0).view(1, 4, 5))
    normal = torch.randn(2, 3)
    td = TensorDict({"odd": odd, "normal": normal, "n": {"odd": odd}}, [])
    assert td.contiguous()["odd"].data_ptr() == odd.data_ptr()
    out = td.contiguous(canonical=True)
    assert out["odd"].stride() == (20, 5, 1) and out["n", "odd"].stride() == (20, 5, 1)
    assert torch.equal(out["odd"], odd) and out["normal"].data_ptr() == normal.data_ptr()
    big = torch.arange(20.0).view(4, 5)
    td = TensorDict({"a": big[:, ::2]}, [4, 3])
    assert td.contiguous(inplace=True) is td and td["a"].is_contiguous()


def test_like_functions_take_device():
    td = TensorDict({"a": torch.randn(3, 4), "b": {"c": torch.randint(10, (3, 4, 5))}}, [3])
    assert torch.zeros_like(td).device is None
    out = torch.ones_like(td, device="cpu", dtype=torch.int64)
    assert out.device == torch.device("cpu") and out["b"].device == torch.device("cpu")
    assert out.dtype == torch.int64 and (out == 1).all()


def test_flatten_of_0d_and_none_dims():
    td = TensorDict({"a": torch.zeros(2)})
    for dims in [(None, None), (0, -1), (None, 0), (0, 0)]:
        out = td.flatten(*dims)
        assert out.batch_size == (1,) and out["a"].shape == (1, 2)
    assert make().flatten(None, None).batch_size == (12,)


def test_depth_and_stack_cat_from_tensordict():
    assert TensorDict({"a": {"b": {"c": {"d": 0}, "e": 0}, "f": 0}, "g": 0}).depth == 3
    assert TensorDict({"a": 0}).depth == 0
    td = TensorDict({"a": torch.zeros(3, 4), "b": {"c": torch.ones(3, 4)}}, [3, 4])
    s = td.stack_from_tensordict(dim=1)
    assert s.shape == (3, 2, 4) and (s[:, 0] == 0).all() and (s[:, 1] == 1).all()
    c = td.cat_from_tensordict(dim=-1, sorted=[("b", "c"), "a"])
    assert c.shape == (3, 8) and (c[:, :4] == 1).all()


@pytest.mark.parametrize("sep", [".", ","])
def test_flatten_unflatten_key_collisions(sep):
    t = torch.zeros(3)
    colliding = [
        TensorDict({f"a{sep}b{sep}c": t, "a": {"b": {"c": t}}}),
        TensorDict({f"a{sep}b": t, "a": {"b": t}, "g": {"d": t}}),
    ]
    for td in colliding:
        with pytest.raises(KeyError, match="Flattening keys in tensordict causes keys"):
            td.flatten_keys(sep)
        with pytest.raises(KeyError, match=r"Unflattening key\(s\) in tensordict will override"):
            td.unflatten_keys(sep)
    td = TensorDict({f"a{sep}b": t, "a": {"b": {"c": t}}})
    assert set(td.flatten_keys(sep).keys()) == {f"a{sep}b", f"a{sep}b{sep}c"}
    with pytest.raises(KeyError, match=r"Unflattening key\(s\)"):
        td.unflatten_keys(sep)
    merged = TensorDict({f"a{sep}x": t, "a": {"y": t}}).unflatten_keys(sep)
    assert set(merged.keys(True, True)) == {("a", "x"), ("a", "y")}


def test_flatten_keys_drops_empty_nested():
    td = TensorDict({"a": {}, "b": {"c": torch.zeros(())}, "d": {"e": {}}})
    assert list(td.flatten_keys().keys()) == ["b.c"]


def test_split_keys_predicates_and_emptied_parents():
    td = TensorDict({"a": 0, "b": {"c": 1}, "d": {"e": 2, "f": 3}, "g": 4})
    # tensordict 0.15 calls the predicate with (key as a tuple of str, value) on the leaves
    b, d, rest = td.split_keys(["b"], lambda k, v: k[0] == "d")
    assert set(b.keys()) == {"b"} and set(d.keys(True, True)) == {("d", "e"), ("d", "f")}
    assert set(rest.keys()) == {"a", "g"}
    _, _, same = td.split_keys([("b", "c")], [("d", "e"), ("d", "f")], inplace=True)
    assert same is td and set(td.keys()) == {"a", "g"}
    with pytest.raises(KeyError, match="zz"):
        td.split_keys(["zz"])


def test_pad_sequence_padding_value_per_key():
    from tensordict import pad_sequence

    tds = [TensorDict({"a": torch.ones(n), "b": {"c": torch.ones(n)}, "x": torch.ones(n)}) for n in (2, 3)]
    out = pad_sequence(tds, padding_value={"a": -1.0, ("b", "c"): 5.0})
    assert out["a"][0].tolist() == [1, 1, -1] and out["b", "c"][0].tolist() == [1, 1, 5]
    assert out["x"][0].tolist() == [1, 1, 0]


def test_from_namedtuple_of_torch_return_types():
    x = torch.randn(3, 4)
    td = TensorDict.from_namedtuple(torch.max(x, 1))
    assert set(td.keys()) == {"values", "indices"}
    assert torch.equal(td["indices"], x.argmax(1))


def test_stack_cat_from_list_classmethods():
    parts = [TensorDict({"a": torch.full((3,), float(i))}, [3]) for i in range(2)]
    assert TensorDict.stack(parts, 1).batch_size == (3, 2)
    assert TensorDict.cat(parts).batch_size == (6,)
    td = TensorDict.from_list([{"a": torch.zeros(2), "b": {"c": 1}}, {"a": torch.ones(2), "b": {"c": 2}}])
    assert td.batch_size == (2,) and td["b", "c"].tolist() == [1, 2]
    assert TensorDict.from_list(parts, lazy=True).batch_size == (2, 3)


def test_apply_out_replaces_entries_of_another_dtype_and_filter_empty_inplace():
    td = TensorDict({"a": torch.zeros(3, 4, dtype=torch.long), "b": {"c": torch.ones(3, dtype=torch.long)}}, [3])
    same = torch.zeros(3, 4, dtype=torch.long)
    out = TensorDict({"a": same}, [3])
    td.apply(lambda x: x + 1, out=out)
    assert out["a"] is same and (same == 1).all()
    td.apply(lambda x: x.float(), out=td)
    assert td["a"].dtype == torch.float32 and td["b", "c"].dtype == torch.float32
    assert td._fast_apply(lambda x: None, filter_empty=True, inplace=True) is None
    td["s"] = "text"
    assert td._fast_apply(lambda x: None, filter_empty=True, inplace=True) is td


def test_numpy_values_in_set_and_set_at_():
    np = pytest.importorskip("numpy")
    td = TensorDict({"a": torch.zeros(4, 3)}, [4])
    td.set_("a", np.ones((4, 3)))
    assert (td["a"] == 1).all() and td["a"].dtype == torch.float32
    td.set_at_("a", np.full((3,), 5.0), 2)
    assert (td["a"][2] == 5).all()


def test_transpose_out_of_range_wording_and_check_device():
    td = make()
    with pytest.raises(ValueError, match="dim0 and dim1 must be within the range"):
        td.transpose(-5, -6)
    on_cpu = TensorDict({"a": torch.zeros(2)}, [2], device="cpu")
    on_cpu._check_device()


def test_where_without_pad_names_the_missing_key():
    td = TensorDict({"a": torch.zeros(3)}, [3])
    other = TensorDict({"b": torch.zeros(3)}, [3])
    with pytest.raises(KeyError, match="not found and no pad value provided"):
        td.where(torch.ones(3, dtype=torch.bool), other)
    out = td.where(torch.ones(3, dtype=torch.bool), other, pad=0)
    assert set(out.keys()) == {"a", "b"}


def test_math_on_locked_gives_locked():
    td = TensorDict({"x": torch.zeros(3), "n": {"y": torch.zeros(3)}}, [3]).lock_()
    other = TensorDict({"x": torch.ones(3), "n": {"y": torch.ones(3)}}, [3])
    for out in (td + other, td * 2, td.add(other), td - 1):
        assert out.is_locked and out["n"].is_locked
    assert not (other + 1).is_locked


def test_generated_binary_ops_take_default():
    td0 = TensorDict(a=1.0, b=1.0, c=1.0)
    td1 = TensorDict(b=2.0, c=2.0, d=2.0)
    with pytest.raises(KeyError):
        td0.clamp_max(td1)
    out = td0.clamp_min(td1, default="intersection")
    assert set(out.keys()) == {"b", "c"} and out["b"] == 2
    out = td0.maximum(td1, default=0.0)
    assert set(out.keys()) == {"a", "b", "c", "d"} and out["a"] == 1 and out["d"] == 2


def test_update_in_place_keys_to_update_prefixes_and_kwargs():
    def build(v):
        return TensorDict({"a": {"b": v, "c": {}}, "d": {"e": v, "f": v}}, [])

    for key in ("a", ("a",), ("a", "b"), (("a",), (("b",),))):
        td = build(1)
        td.update_(build(2), keys_to_update=[key])
        assert (td.select("a") == 2).all() and (td.exclude("a") == 1).all()
    td = build(1)
    td.update_(build(2).to_dict(), keys_to_update="d")
    assert (td["d", "e"] == 2).all() and (td["a", "b"] == 1).all()
    with pytest.raises(KeyError):
        TensorDict(a=0).update_(TensorDict(b=1), keys_to_update="b")
    td = TensorDict(a=0, b=0)
    td.update_(a=torch.tensor(5))
    assert td["a"] == 5 and td["b"] == 0


def test_depth_ignores_empty_and_expand_as_td():
    td = TensorDict({"a": {"b": {"c": {}}, "x": 0}})
    assert td.depth == 1
    td0 = TensorDict({"a": torch.ones(3, 1, 4), "b": {"c": torch.ones(3, 2, 1, 4)}}, [3])
    td1 = TensorDict({"a": torch.zeros(2, 3, 5, 4), "b": {"c": torch.zeros(2, 3, 2, 6, 4)}}, [2, 3])
    out = td0.expand_as(td1)
    assert out.batch_size == (2, 3) and out["b", "c"].shape == (2, 3, 2, 6, 4) and (out == 1).all()


def test_source_and_keyword_entries_are_exclusive():
    with pytest.raises(ValueError, match="not both"):
        TensorDict({"b": 2}, a=1)
    assert TensorDict(a=1, b=1, batch_size=[]).batch_size == ()


def test_error_types_for_nested_reads_and_in_place_shape_mismatch():
    td = TensorDict({"a": torch.zeros(())}, [])
    with pytest.raises(ValueError, match="Expected a TensorDictBase instance"):
        td["a", "b"]
    with pytest.raises(ValueError, match="Expected a TensorDictBase instance"):
        td.get(("a", "b"))  # tensordict 0.15.3 raises here too; a default is returned
    assert td.get(("a", "b"), None) is None
    with pytest.raises(ValueError, match="Failed to update 'a'"):
        td.set_("a", torch.randn(2))
    td.set_("a", torch.ones(()))
    assert td["a"] == 1


def test_split_keys_as_tensordict_015():
    # each behaviour below was checked on tensordict 0.15.3
    td = TensorDict({"a": 1, "b": 2, "c": {"d": 3, "e": 4}, "f": {"g": 1}, "h": {}})
    seen = []
    big, rest = td.split_keys(lambda key, value: seen.append(key) or bool(value > 2))
    assert set(seen) == {("a",), ("b",), ("c", "d"), ("c", "e"), ("f", "g")}
    assert big.to_dict() == {"c": {"d": 3, "e": 4}}
    assert set(rest.keys()) == {"a", "b", "f"}  # the empty "h" is dropped from the remainder
    with pytest.raises(TypeError):
        td.split_keys(lambda key: True)  # a one-argument predicate is an error there too
    renamed, rest = td.split_keys({("c", "d"): "x", "a": ("y", "z")})
    assert renamed.to_dict() == {"x": 3, "y": {"z": 1}} and rest["c"].to_dict() == {"e": 4}
    with pytest.raises(KeyError, match="not found"):
        td.split_keys(["a"], ["a"])  # a key taken by an earlier set is gone
    part, rest = td.split_keys(["a", "zz"], strict=False)
    assert part.to_dict() == {"a": 1}
    part, rest = td.split_keys(["a", "zz"], strict=False, default=0)
    assert part.to_dict() == {"a": 1, "zz": 0}
    part, rest = td.split_keys(["a"], reproduce_struct=True)
    assert set(part.keys()) == {"a", "c", "f", "h"} and part["c"].is_empty()
    assert rest["h"].is_empty()
    _, rest = td.split_keys([("f", "g")], reproduce_struct=True)
    assert "f" in rest.keys() and rest["f"].is_empty()
    locked = td.clone().lock_()
    with pytest.raises(RuntimeError, match="locked"):
        locked.split_keys(["a"], inplace=True)
    assert set(locked.split_keys(["a"])[1].keys()) == {"b", "c", "f"}
