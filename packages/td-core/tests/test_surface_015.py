"""The rest of tensordict 0.15.3's public surface (issue 31): names, methods and keyword
arguments; each expectation was read from the same snippet run on tensordict 0.15.3."""

import functools
import importlib
import logging

import pytest
import torch

import tensordict
from tensordict import PackLayout, TensorDict, lazy_stack, pad_sequence


@pytest.mark.parametrize(
    "name",
    [
        "TensorCollection", "NonTensorDataBase", "TensorClassModuleBase", "TensorClassModuleWrapper",
        "PackLayout", "KEY_SEPARATOR", "collate", "group_by", "unpad_sequence", "unravel_key_to_tuple",
        "is_bool", "is_floating", "is_integer", "is_inexact",
    ],
)
def test_top_level_names(name):
    if name.startswith("TensorClassModule"):
        pytest.importorskip("tensordict.nn")  # served by td-nn
    assert getattr(tensordict, name) is not None
    assert name in tensordict.__all__


def test_utils_and_nn_names():
    utils = importlib.import_module("tensordict.utils")
    assert utils.KEY_SEPARATOR == "."
    with pytest.warns(DeprecationWarning):
        utils.set_json_backend("json")
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="json"):
        utils.set_json_backend("yaml")
    # the backend chosen is what get_json_backend gives and json_dumps writes with
    assert utils.get_json_backend().__name__ == "json"
    assert utils.json_dumps({"a": [1, 2]}, separators=(",", ":")) == '{"a":[1,2]}'
    pytest.importorskip("tensordict.nn")  # the rest is served by td-nn and td-tensorclass
    pytest.importorskip("tensordict.tensorclass")
    tn = importlib.import_module("tensordict.nn.distributions.truncated_normal")
    assert tn.TruncatedStandardNormal is not None
    assert tensordict.NonTensorDataBase is importlib.import_module("tensordict.tensorclass").NonTensorDataBase


def test_dtype_predicates():
    f, i, b, c = torch.zeros(1), torch.zeros(1, dtype=torch.uint8), torch.zeros(1, dtype=torch.bool), torch.zeros(1, dtype=torch.complex64)
    assert [tensordict.is_floating(x) for x in (f, i, b, c)] == [True, False, False, False]
    assert [tensordict.is_integer("k", x) for x in (f, i, b, c)] == [False, True, False, False]
    assert [tensordict.is_bool(x) for x in (f, i, b, c)] == [False, False, True, False]
    assert [tensordict.is_inexact("k", x) for x in (f, i, b, c)] == [True, False, False, True]
    assert tensordict.unravel_key_to_tuple(("a", ("b", ("c",)))) == ("a", "b", "c")
    assert tensordict.unravel_key_to_tuple(("a", 1)) == ()


def test_timeit_accumulates_and_logs(caplog):
    from tensordict.utils import timeit

    @timeit("surface-step")
    def step():
        return 1

    step()
    with timeit("surface-step"):
        step()
    assert timeit._REG["surface-step"][2] == 3
    with caplog.at_level(logging.INFO, logger="tensordict"):
        timeit.print()
    assert "surface-step took" in caplog.text
    timeit.erase()
    assert timeit._REG["surface-step"] == [0.0, 0.0, 0]


@pytest.mark.parametrize("name", ["float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "complex64", "complex128", "float", "half", "int", "bool"])
def test_dtype_casts(name):
    td = TensorDict(a=torch.zeros(3), b=torch.zeros(3, dtype=torch.long), s="x", n={"z": torch.ones(3)}, batch_size=[3])
    dtype = {"float": torch.float32, "half": torch.float16, "int": torch.int32}.get(name, getattr(torch, name))
    out = getattr(td, name)()
    assert out["a"].dtype == out["b"].dtype == out["n", "z"].dtype == dtype
    assert out["s"] == "x"
    stack = lazy_stack([td[0], td[1]])
    assert getattr(stack, name)()["a"].dtype == dtype


def test_cast_filter_gets_tuple_keys():
    td = TensorDict(a=torch.zeros(3), b=torch.zeros(3, dtype=torch.long), n={"z": torch.ones(3)}, batch_size=[3])
    seen = []
    td.int8(cast_filter=lambda k, v: seen.append(k) or True)
    assert seen == [("a",), ("b",), ("n", "z")]
    out = td.bfloat16(cast_filter=tensordict.is_inexact)
    assert (out["a"].dtype, out["b"].dtype, out["n", "z"].dtype) == (torch.bfloat16, torch.int64, torch.bfloat16)
    out = td.to(torch.float64, cast_filter=lambda k, v: k == ("n", "z"))
    assert (out["a"].dtype, out["n", "z"].dtype) == (torch.float32, torch.float64)


def test_pack_and_unpack():
    td = TensorDict(p=torch.arange(5.0), v=torch.ones(5, 3), n={"z": torch.zeros(5, 2, 2)}, batch_size=[5])
    flat, layout = td.pack()
    assert flat.shape == (5, 8)
    assert layout.keys == (("n", "z"), "p", "v")
    assert layout.offsets == (0, 4, 5) and layout.numel == 8
    assert layout.nested == (("n", torch.Size([]), None),)
    out = layout.unpack(flat)
    assert (out == td).all()
    assert out["n", "z"].data_ptr() == flat.data_ptr()
    assert layout == td.pack()[1] and hash(layout) == hash(td.pack()[1])
    flat0, layout0 = td.pack(0)
    assert flat0.shape == (8, 5) and layout0.dim == -2 and layout0 != layout
    assert (layout0.unpack(flat0) == td).all()
    assert layout.unpack(flat[:2]).batch_size == (2,)
    again, _ = td.pack(layout=layout)
    assert (again == flat).all()
    with pytest.raises(KeyError, match="differ from the keys of the layout"):
        TensorDict(a=torch.zeros(3), batch_size=[3]).pack(layout=layout)
    with pytest.raises(TypeError, match="different dtypes"):
        TensorDict(a=torch.zeros(3), b=torch.zeros(3, dtype=torch.long), batch_size=[3]).pack()
    with pytest.raises(TypeError, match="non-tensor entry 's'"):
        TensorDict(a=torch.zeros(3), s="x", batch_size=[3]).pack()
    assert repr(PackLayout(keys=("a",), shapes=([2],))) == (
        "PackLayout(keys=('a',), shapes=(torch.Size([2]),), dim=-1, nested=(), device=None, cls=None, offsets=(0,), numel=2)"
    )


def test_group_by():
    td = TensorDict(uid=torch.tensor([2, 0, 2, 1, 0]), reward=torch.arange(5.0), s=tensordict.NonTensorStack(*"abaca"), batch_size=[5])
    values, groups = tensordict.group_by(td, "uid")
    assert values.tolist() == [0, 1, 2]
    assert [g["reward"].tolist() for g in groups] == [[1.0, 4.0], [3.0], [0.0, 2.0]]
    values, groups = tensordict.group_by(td, "s")
    assert values == ["a", "b", "c"] and isinstance(groups, tuple)
    assert [g["reward"].tolist() for g in groups] == [[0.0, 2.0, 4.0], [1.0], [3.0]]
    rows = TensorDict(k=torch.tensor([[1, 2], [0, 0], [1, 2]]), r=torch.arange(3), batch_size=[3])
    values, groups = tensordict.group_by(rows, "k")
    assert values.tolist() == [[0, 0], [1, 2]] and [g["r"].tolist() for g in groups] == [[1], [0, 2]]
    with pytest.raises(ValueError, match="first batch dimension"):
        tensordict.group_by(TensorDict(a=torch.zeros(3)), "a")
    with pytest.raises(KeyError, match="no entry 'zz'"):
        tensordict.group_by(td, "zz")
    with pytest.raises(TypeError, match="holds a TensorDict"):
        tensordict.group_by(TensorDict(n={"a": torch.zeros(3)}, batch_size=[3]), "n")


def test_unpad_sequence_inverts_pad_sequence():
    tds = [
        TensorDict({"a": torch.arange(3), "b": torch.zeros(3, 2), "n": {"c": torch.ones(3)}}, batch_size=[3]),
        TensorDict({"a": torch.arange(5), "b": torch.ones(5, 2), "n": {"c": torch.ones(5) * 2}}, batch_size=[5]),
    ]
    padded = pad_sequence(tds, return_mask=True)
    samples = tensordict.unpad_sequence(padded)
    assert type(samples).__name__ == "LazyStackedTensorDict"
    assert [t.batch_size for t in samples.tensordicts] == [torch.Size([3]), torch.Size([5])]
    for got, want in zip(samples.tensordicts, tds):
        assert (got == want).all() and "masks" not in got.keys()
    by_tensor = tensordict.unpad_sequence(padded.exclude("masks"), padded["masks", "a"])
    assert by_tensor.tensordicts[0]["a"].tolist() == [0, 1, 2]
    feature = [TensorDict({"a": torch.zeros(2, 3)}, batch_size=[2]), TensorDict({"a": torch.zeros(2, 5)}, batch_size=[2])]
    out = tensordict.unpad_sequence(pad_sequence(feature, return_mask=True, pad_dim=1), pad_dim=1)
    assert out.tensordicts[0]["a"].shape == (2, 3) and out.tensordicts[0].batch_size == (2,)
    with pytest.raises(ValueError, match="needs a mask"):
        tensordict.unpad_sequence(padded.exclude("masks"))
    with pytest.raises(ValueError, match="has none"):
        tensordict.unpad_sequence(TensorDict(a=torch.zeros(3)))


def test_collate_in_a_dataloader():
    from torch.utils.data import DataLoader

    samples = [(TensorDict(x=torch.randn(3)), i) for i in range(10)]
    td, label = next(iter(DataLoader(samples, batch_size=4, collate_fn=tensordict.collate)))
    assert td.batch_size == (4,) and label.tolist() == [0, 1, 2, 3]
    clouds = [TensorDict(points=torch.randn(n, 3)) for n in (5, 2, 7, 3)]
    batch = next(iter(DataLoader(clouds, batch_size=4, collate_fn=tensordict.collate)))
    assert type(batch).__name__ == "LazyStackedTensorDict" and batch.batch_size == (4,)
    samples = [
        TensorDict(ids=torch.ones(n, dtype=torch.long), labels=torch.ones(n, dtype=torch.long), points=torch.randn(n + 1, 3), score=torch.tensor(float(n)))
        for n in (2, 3)
    ]
    fn = functools.partial(tensordict.collate, pad_keys={"ids": 7, "labels": -100}, nested_keys=["points"], mask_key="mask")
    batch = next(iter(DataLoader(samples, batch_size=2, collate_fn=fn)))
    assert batch["ids"].tolist() == [[1, 1, 7], [1, 1, 1]]
    assert batch["labels"].tolist() == [[1, 1, -100], [1, 1, 1]]
    assert batch["mask", "ids"].tolist() == [[True, True, False], [True, True, True]]
    assert batch["points"].is_nested and batch["score"].tolist() == [2.0, 3.0]
    with pytest.raises(ValueError, match="no pad_keys"):
        tensordict.collate(samples, mask_key="m")


def test_device_predicates_and_floating_point():
    td = TensorDict(a=torch.zeros(3), batch_size=[3])
    assert (td.is_cpu, td.is_cuda, td.is_meta) == (False, False, False)  # no device
    assert TensorDict(device="cpu").is_cpu and TensorDict(a=torch.zeros(3), device="meta").is_meta
    assert td.is_floating_point() and TensorDict().is_floating_point() and TensorDict(s="x").is_floating_point()
    assert not TensorDict(a=torch.zeros(3), n={"b": torch.zeros(2, dtype=torch.long)}).is_floating_point()


def test_mod_and_rsub():
    td = TensorDict(a=torch.full((2,), 10.0), batch_size=[2])
    other = TensorDict(a=torch.ones(2), batch_size=[2])
    assert td.rsub(other)["a"].tolist() == [-9.0, -9.0]
    assert td.rsub(other, alpha=2)["a"].tolist() == [-19.0, -19.0]
    assert td.rsub(torch.tensor([1.0, 2.0]))["a"].tolist() == [-9.0, -8.0]
    assert TensorDict(a=torch.tensor([-3.0, 5.0])).mod(3)["a"].tolist() == [0.0, 2.0]
    assert (td.mod(other) == td % other).all()


def test_non_tensor_items():
    td = TensorDict(a=torch.zeros(2), s="text", nested=TensorDict(t="more"))
    assert [key for key, _ in td.non_tensor_items(include_nested=True)] == ["s", ("nested", "t")]
    assert td.non_tensor_items()[0][1].data == "text" and len(td.non_tensor_items()) == 1


def test_pin_memory_and_record_stream_errors():
    td = TensorDict(a=torch.zeros(3), batch_size=[3])
    if not torch.cuda.is_available():
        with pytest.warns(DeprecationWarning, match="pin_memory_"), pytest.raises(RuntimeError):
            td.pin_memory_()
    with pytest.raises((RuntimeError, TypeError)):
        td.record_stream(None)


def test_lazy_stack_deprecated_hooks_and_valid_keys():
    s = lazy_stack([TensorDict(a=torch.zeros(2), n={"b": torch.zeros(2)}), TensorDict(a=torch.ones(2), n={"b": torch.zeros(2)})])
    with pytest.warns(DeprecationWarning, match="hook_in"):
        assert s.hook_in is None
    with pytest.warns(DeprecationWarning, match="hook_out"):
        assert s.hook_out is None
    with pytest.warns(DeprecationWarning, match="valid_keys"):
        assert list(s.valid_keys(True, True)) == ["a", ("n", "b")]


def test_lazy_stack_data_ptr_has_one_entry_per_tensordict():
    tds = [TensorDict(a=torch.zeros(3), b={"c": torch.zeros(3)}, batch_size=[3]) for _ in range(2)]
    ptrs = lazy_stack(tds).data_ptr()
    assert set(ptrs.keys()) == {"0", "1"} and ptrs.batch_size == () and ptrs.device == torch.device("cpu")
    assert ptrs["1", "b", "c"].item() == tds[1]["b", "c"].data_ptr()
    assert TensorDict(a=torch.zeros(1)).data_ptr().device == torch.device("cpu")


# ---------------------------------------------------------------- silent differences (issue 31)
def test_logsumexp_reduces_the_batch_dims_only():
    td = TensorDict(a=torch.arange(24.0).view(2, 3, 4), batch_size=[2, 3])
    out = td.logsumexp()
    assert out.batch_size == () and out["a"].shape == (4,)
    torch.testing.assert_close(out["a"], td["a"].reshape(6, 4).logsumexp(0))
    assert td.logsumexp(keepdim=True)["a"].shape == (1, 1, 4)
    assert td.logsumexp(1)["a"].shape == (2, 4)
    target = td.logsumexp(1).zero_()
    assert td.logsumexp(1, out=target) is target and (target["a"] != 0).all()


def test_non_tensor_stack_data_of_one_repeated_value():
    NonTensorData, NonTensorStack = tensordict.NonTensorData, tensordict.NonTensorStack
    assert NonTensorStack(NonTensorData("a"), NonTensorData("a")).data == "a"
    assert NonTensorStack(NonTensorStack("a", "a"), NonTensorStack("a", "a")).data == "a"
    assert torch.stack([TensorDict(s="x"), TensorDict(s="x")]).get("s").data == "x"
    with pytest.raises(AttributeError, match="non-unique"):
        NonTensorStack(NonTensorData("a"), NonTensorData("b")).data  # noqa: B018
    assert NonTensorStack(NonTensorData("a"), NonTensorData("b")).tolist() == ["a", "b"]


def test_make_tensordict_keeps_an_empty_batch_size():
    assert tensordict.make_tensordict(a=torch.zeros(3, 4), b=torch.zeros(3, 4, 5)).batch_size == ()
    assert tensordict.make_tensordict({"a": torch.zeros(3, 4)}, batch_size=[3]).batch_size == (3,)
    td = tensordict.make_tensordict({"a": torch.zeros(3), "b": {"c": torch.zeros(3, 4)}}, auto_batch_size=True)
    assert td.batch_size == (3,) and td["b"].batch_size == (3, 4)


def test_non_tensor_data_comparisons_give_bool_tensors():
    NonTensorData, NonTensorStack = tensordict.NonTensorData, tensordict.NonTensorStack
    eq = NonTensorData("a") == NonTensorData("a")
    assert isinstance(eq, torch.Tensor) and eq.dtype == torch.bool and eq.shape == () and eq.item()
    assert (NonTensorData("a", batch_size=[3]) == NonTensorData("a", batch_size=[3])).tolist() == [True] * 3
    assert (NonTensorData("a", batch_size=[2]) != NonTensorData("b", batch_size=[2])).tolist() == [True, True]
    assert (NonTensorData("a") == "a") is False and (NonTensorData("a") != "a") is True
    assert (NonTensorData("a", batch_size=[2]) == NonTensorStack(NonTensorData("a"), NonTensorData("b"))).tolist() == [True, False]
    s1 = NonTensorStack(NonTensorData("a"), NonTensorData("b"))
    s2 = NonTensorStack(NonTensorData("a"), NonTensorData("c"))
    assert (s1 == s2).tolist() == [True, False] and (s1 != s2).tolist() == [False, True]
    assert (s1 == ["a", "b"]) is False
    td = TensorDict(s="a", batch_size=[2])
    assert (td == TensorDict(s="a", batch_size=[2]))["s"].tolist() == [True, True]
    assert (td == TensorDict(s="b", batch_size=[2]))["s"].tolist() == [False, False]


def test_print_directory_tree_logs_and_returns(tmp_path, capsys, caplog):
    from tensordict.utils import print_directory_tree

    (tmp_path / "td").mkdir()  # a memmap folder's shape, without needing td-memmap
    (tmp_path / "td" / "a.memmap").write_bytes(bytes(12))
    (tmp_path / "td" / "meta.json").write_text("{}")
    with caplog.at_level(logging.INFO, logger="tensordict"):
        text = print_directory_tree(tmp_path / "td")
    assert capsys.readouterr().out == ""
    assert text.splitlines()[0].startswith("Directory size: ") and text.splitlines()[1] == "td/"
    assert "    a.memmap" in text.splitlines()
    assert [r.getMessage() for r in caplog.records] == text.splitlines()


# ---------------------------------------------------------------- keyword arguments (issue 31)
def test_reductions_key_transform():
    td = TensorDict(a=torch.arange(6.0).view(2, 3), n={"b": torch.ones(2)}, batch_size=[2])
    suffix = lambda k: k + "_mean" if isinstance(k, str) else k  # noqa: E731
    out = td.mean(key_transform=suffix)
    assert list(out.keys(True, True)) == ["a_mean", ("n_mean", "b_mean")] and out["a_mean"].item() == 2.5
    assert td.sum(0, key_transform=suffix)["a_mean"].tolist() == [3.0, 5.0, 7.0]
    assert set(td.std(key_transform=lambda k: "S_" + k).keys()) == {"S_a", "S_n"}
    nested = td.var(dim=0, key_transform=lambda k: ("x", k))
    assert nested["x", "a"].tolist() == [4.5, 4.5, 4.5] and ("x", "n", "x", "b") in nested.keys(True, True)
    assert td.norm(key_transform=suffix)["n_mean", "b_mean"].item() == pytest.approx(2**0.5)
    assert isinstance(td.mean(key_transform=suffix, reduce=True), torch.Tensor)


def test_lazy_stack_from_dict_stack_dim_name():
    from tensordict import LazyStackedTensorDict

    s = LazyStackedTensorDict.from_dict([{"a": torch.zeros(3)}, {"a": torch.zeros(4)}], stack_dim_name="t")
    assert isinstance(s, LazyStackedTensorDict) and s.batch_size == (2,) and s.names == ["t"]
    assert s[1]["a"].shape == (4,)
    s = LazyStackedTensorDict.from_dict([{"a": torch.zeros(3)}, {"a": torch.ones(3)}], stack_dim_name="agents", batch_size=[3], stack_dim=1)
    assert s.batch_size == (3, 2) and s.names == [None, "agents"] and s["a"][0].tolist() == [0.0, 1.0]
    s = LazyStackedTensorDict.from_dict({"0": {"a": torch.zeros(3)}, "1": {"a": torch.ones(3)}}, auto_batch_size=True)
    assert s.batch_size == (2, 3)
    s = LazyStackedTensorDict.from_dict([{"a": torch.zeros(3)}, {"a": torch.ones(3)}], names=["s", "x"], batch_size=[3])
    assert s.names == ["s", "x"]
    with pytest.raises(ValueError, match="exclusive"):
        LazyStackedTensorDict.from_dict([{"a": torch.zeros(3)}], names=["s"], stack_dim_name="q")


def test_compact_repr_matches_015():
    from tensordict import NonTensorStack, get_printoptions, set_printoptions

    default_compact = get_printoptions()["compact"]  # False here (our verbose default), True on 0.15.3
    td = TensorDict(a=torch.zeros(3, 4), b={"c": torch.zeros(3, dtype=torch.long)}, batch_size=[3])
    wide = TensorDict(
        **{f"key_{i}": torch.zeros(3, 4, dtype=torch.bfloat16) for i in range(3)},
        n={f"x{i}": torch.zeros(3, 2, 2) for i in range(6)}, s="hello", u=torch.zeros(3, dtype=torch.uint8),
        cx=torch.zeros(3, dtype=torch.complex64), batch_size=[3],
    )
    stack = lazy_stack([TensorDict(a=torch.zeros(3), x=torch.zeros(1)), TensorDict(a=torch.zeros(4, dtype=torch.float64), y=torch.zeros(2, dtype=torch.long))])
    with set_printoptions(compact=True):
        assert repr(td) == "TensorDict(batch_size=[3], fields={a: f32[4], b: {c: i64[]}})"
        assert repr(wide) == (
            "TensorDict(batch_size=[3], fields={\n    cx: c64[],\n    key_0: bf16[4],\n    key_1: bf16[4],\n"
            "    key_2: bf16[4],\n    n: {\n        x0: f32[2,2],\n        x1: f32[2,2],\n        x2: f32[2,2],\n"
            "        x3: f32[2,2],\n        x4: f32[2,2],\n        x5: f32[2,2]},\n    s: str,\n    u: u8[]})"
        )
        assert repr(TensorDict(a=torch.zeros(3), device="cpu", batch_size=[3])) == "TensorDict(batch_size=[3], device=cpu, fields={a: f32[]})"
        nested = TensorDict(a=torch.zeros(3, 2), n=TensorDict(b=torch.zeros(3, 2, 5), batch_size=[3, 2]), batch_size=[3])
        assert repr(nested) == "TensorDict(batch_size=[3], fields={a: f32[2], n: [2]{b: f32[5]}})"
        assert repr(stack) == (
            "LazyStackedTensorDict(batch_size=[2], stack_dim=0, fields={\n    a: f64[-1]}, "
            "exclusive_fields={0: {x: f32[1]}, 1: {y: i64[2]}})"
        )
        assert repr(TensorDict(s=NonTensorStack("a", "b"), t=[1, 2], batch_size=[2])) == "TensorDict(batch_size=[2], fields={s: NonTensorStack, t: i64[]})"
        assert repr(TensorDict(a=torch.zeros(3, device="meta"), batch_size=[3])) == "TensorDict(batch_size=[3], fields={a: f32[]@meta})"
        with set_printoptions(show_dtype=False):
            assert repr(td) == "TensorDict(batch_size=[3], fields={a: [4], b: {c: []}})"
        with set_printoptions(show_shape=False):  # a verbose-only option turns compact off
            assert repr(td).startswith("TensorDict(\n    fields={")
    with set_printoptions(compact=True, sort_keys="insertion"):
        assert repr(TensorDict(z=torch.zeros(1), a=torch.zeros(1))) == "TensorDict(batch_size=[], fields={z: f32[1], a: f32[1]})"
    assert repr(td).startswith("TensorDict(\n    fields={") is not default_compact


def test_bytes_counts_duplicates_by_default():
    x = torch.zeros(6)
    td = TensorDict(a=x, b=x, c=torch.zeros(2, 3))
    assert td.bytes() == 72 and td.bytes(count_duplicates=False) == 48
    assert TensorDict(a=torch.zeros(10)[:3]).bytes() == 12  # a view counts its own elements


def test_to_namedtuple_gives_plain_lists_for_stacks():
    td = TensorDict(a=torch.zeros(2), s=tensordict.NonTensorStack("a", "b"), batch_size=[2])
    out = td.to_namedtuple()
    assert type(out.s) is list and out.s == ["a", "b"]
    assert TensorDict(a=torch.zeros(3), s="hello", batch_size=[3]).to_namedtuple().s == "hello"


def test_dense_copies_of_a_lazy_stack_drop_an_unshared_stack_name():
    tds = [TensorDict(a=torch.zeros(3), batch_size=[3]) for _ in range(2)]
    stack = lazy_stack(tds, stack_dim_name="s")
    assert stack.names == ["s", None]
    assert stack.contiguous().names == [None, None] and stack.to_tensordict().names == [None, None]
    assert stack.contiguous().refine_names("s", ...).names == ["s", None]
    assert stack.densify().names == ["s", None]
    named = lazy_stack([TensorDict(a=torch.zeros(3), batch_size=[3], names=["x"]) for _ in range(2)])
    named.names = ["s", "x"]
    assert named.contiguous().names == ["s", "x"]


def test_fromkeys_shares_a_tensor_value():
    td = TensorDict.fromkeys(["a", ("b", "c")], torch.zeros(3))
    assert td["a"] is td["b", "c"] and td.batch_size == ()


def test_to_dtype_as_a_context_manager_writes_back():
    td = TensorDict(x=torch.zeros(3), batch_size=[3])
    with td.to(torch.float64) as td64:
        td64["y"] = td64["x"] + 1
        td64["x"] += 2
    assert (td["x"].dtype, td["y"].dtype) == (torch.float32, torch.float64)
    assert td["x"].tolist() == [2.0, 2.0, 2.0] and td["y"].tolist() == [1.0, 1.0, 1.0]


def test_pad_sequence_left_and_unpad_with_non_tensor_data():
    tds = [
        TensorDict({"a": torch.arange(3), "s": tensordict.NonTensorStack(*"xyz")}, batch_size=[3]),
        TensorDict({"a": torch.arange(5), "s": tensordict.NonTensorStack(*"abcde")}, batch_size=[5]),
    ]
    padded = pad_sequence(tds, return_mask=True, padding_side="left")
    assert padded["a"].tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]]
    assert padded["masks", "a"].tolist() == [[False, False, True, True, True], [True] * 5]
    assert padded["s"] == [[None, None, "x", "y", "z"], ["a", "b", "c", "d", "e"]]
    samples = tensordict.unpad_sequence(padded)
    assert samples[0]["a"].tolist() == [0, 1, 2] and samples.tensordicts[0]["s"] == ["x", "y", "z"]
    with pytest.raises(ValueError, match="padding_side"):
        pad_sequence(tds, padding_side="up")


def test_new_tensor_of_tensor_like_data_gives_a_tensordict():
    import warnings

    td = TensorDict(a=torch.zeros(3), b=torch.zeros(3, dtype=torch.int64), n={"c": torch.zeros(3, 2)}, batch_size=[3])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = td.new_tensor([1, 2])
    assert out.batch_size == (2,) and out["n"].batch_size == (2,)
    assert out["a"].tolist() == [1.0, 2.0] and out["b"].dtype == torch.int64 and out["n", "c"].tolist() == [1.0, 2.0]


def test_linked_list_pickles_as_an_unlinked_copy():
    import pickle

    from tensordict.utils import LinkedList

    td = TensorDict(batch_size=[3])
    td["names"] = ["a", "b", "c"]
    values = td["names"]
    copy = pickle.loads(pickle.dumps(values))
    assert type(copy) is LinkedList and copy == ["a", "b", "c"]
    copy[0] = "z"  # the copy is not linked to the TensorDict
    assert td["names"] == ["a", "b", "c"]
    values[1] = "y"  # the original still is
    assert td.get("names").tolist() == ["a", "y", "c"]
