"""Constructors and conversions: from_dict, from_any, from_namedtuple, from_tuple,
from_dataclass, from_struct_array / to_struct_array, numpy(), tolist(), to_namedtuple,
make_tensordict, fromkeys."""

from __future__ import annotations

import collections
import dataclasses
import importlib.util
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tensordict
from tensordict import NonTensorData, NonTensorStack, TensorDict


# ---------------------------------------------------------------------- from_dict
class TestFromDict:
    def test_default_batch_size_is_empty(self):
        td = TensorDict.from_dict({"a": torch.zeros(3, 4), "b": {"c": torch.zeros(3)}})
        assert td.batch_size == torch.Size([])
        assert td["b"].batch_size == torch.Size([])

    def test_auto_batch_size_nested_gets_its_own(self):
        data = {"a": torch.zeros(3, 4), "b": {"c": torch.zeros(3, 4, 5)}}
        td = TensorDict.from_dict(data, auto_batch_size=True)
        assert td.batch_size == (3, 4)
        assert td["b"].batch_size == (3, 4, 5)

    def test_batch_dims_turns_auto_on_and_caps_every_level(self):
        data = {"a": torch.zeros(3, 4), "b": {"c": torch.zeros(3, 4, 5)}}
        td = TensorDict.from_dict(data, batch_dims=1)
        assert td.batch_size == (3,)
        assert td["b"].batch_size == (3,)

    def test_batch_size_wins_over_auto_and_applies_to_nested(self):
        data = {"a": torch.zeros(3, 4), "b": {"c": torch.zeros(3, 4, 5)}}
        td = TensorDict.from_dict(data, batch_size=[3], auto_batch_size=True)
        assert td.batch_size == (3,)
        assert td["b"].batch_size == (3,)

    def test_positional_batch_size_and_device(self, device):
        td = TensorDict.from_dict({"a": torch.zeros(2, 5)}, [2], device)
        assert td.batch_size == (2,)
        assert td.device == device
        assert td["a"].device.type == device.type

    def test_batch_size_and_batch_dims_are_exclusive(self):
        with pytest.raises(ValueError, match="both.*exclusive"):
            TensorDict.from_dict({"a": torch.zeros(2)}, batch_size=[2], batch_dims=1)

    def test_mismatch_names_key_and_shapes(self):
        with pytest.raises(RuntimeError, match="'b'") as err:
            TensorDict.from_dict({"a": torch.zeros(3), "b": torch.zeros(4)}, batch_size=[3])
        assert "4" in str(err.value) and "3" in str(err.value)

    def test_tuple_keys_become_nested(self):
        td = TensorDict.from_dict(
            {("a", "b"): torch.zeros(2), ("a", "c"): torch.ones(2), "d": torch.zeros(2)},
            auto_batch_size=True,
        )
        assert td.batch_size == (2,)
        assert sorted(td.keys(True, True), key=str) == [("a", "b"), ("a", "c"), "d"]

    def test_non_str_key_is_a_type_error(self):
        with pytest.raises(TypeError, match="from_pytree"):
            TensorDict.from_dict({1: torch.zeros(2)})

    def test_not_a_mapping(self):
        with pytest.raises(TypeError, match="list"):
            TensorDict.from_dict([torch.zeros(2)])

    def test_tensordict_input_returned_as_is(self):
        td = TensorDict({"a": torch.zeros(3)}, [])
        assert TensorDict.from_dict(td, auto_batch_size=True) is td

    def test_names(self):
        td = TensorDict.from_dict({"a": torch.zeros(3, 4)}, auto_batch_size=True, names=["x", "y"])
        assert td.names == ["x", "y"]

    def test_numbers_broadcast_over_the_computed_batch(self):
        td = TensorDict.from_dict({"a": torch.zeros(3, 2), "step": 7}, auto_batch_size=True)
        assert td.batch_size == (3, 2)
        assert td["step"].tolist() == [[7, 7], [7, 7], [7, 7]]
        td["step"][0, 0] = 1  # a real tensor, not an expanded view
        assert td["step"][1, 0] == 7

    def test_lists(self):
        td = TensorDict.from_dict(
            {"q": ["x", "y", "z"], "n": [1.0, 2.0, 3.0]}, auto_batch_size=True
        )
        assert td.batch_size == (3,)
        assert torch.equal(td["n"], torch.tensor([1.0, 2.0, 3.0]))
        assert isinstance(td._get_raw("q"), NonTensorStack)
        assert td[1]["q"] == "y"
        flat = TensorDict.from_dict({"q": ["x", "y"]})
        assert flat["q"] == ["x", "y"]

    def test_non_tensor_objects(self):
        td = TensorDict.from_dict(
            {"a": torch.zeros(2), "s": "hello", "none": None}, auto_batch_size=True
        )
        assert td.batch_size == (2,)
        assert td["s"] == "hello"
        assert td["none"] is None

    def test_numpy_values_share_memory(self):
        arr = np.zeros((2, 3), dtype=np.float32)
        td = TensorDict.from_dict({"a": arr}, auto_batch_size=True)
        arr[0, 0] = 5.0
        assert td["a"][0, 0] == 5.0

    def test_to_dict_round_trip(self):
        td = TensorDict({"a": torch.arange(6).view(2, 3), "b": {"c": torch.ones(2)}, "s": "t"}, [2])
        back = TensorDict.from_dict(td.to_dict(), batch_size=[2])
        assert (back == td).all()

    def test_module_level_and_lazy_attribute(self):
        assert tensordict.from_dict is tensordict._convert.from_dict
        td = tensordict.from_dict(
            {"a": torch.zeros(3, 4), "b": torch.zeros(3)}, auto_batch_size=True
        )
        assert td.batch_size == (3,)

    @settings(max_examples=25, deadline=None)
    @given(
        shape=st.lists(st.integers(1, 3), min_size=0, max_size=3),
        extra=st.lists(st.lists(st.integers(1, 3), max_size=2), min_size=1, max_size=4),
    )
    def test_auto_batch_is_longest_shared_prefix(self, shape, extra):
        data = {f"k{i}": torch.zeros((*shape, *e)) for i, e in enumerate(extra)}
        td = TensorDict.from_dict(data, auto_batch_size=True)
        shapes = [v.shape for v in data.values()]
        n = min(len(s) for s in shapes)
        expected = []
        for d in range(n):
            if len({s[d] for s in shapes}) != 1:
                break
            expected.append(shapes[0][d])
        assert list(td.batch_size) == expected
        for key, value in data.items():
            assert td[key] is value


# ---------------------------------------------------------------------- from_any and friends
Point = collections.namedtuple("Point", ["x", "y"])


@dataclasses.dataclass
class Obs:
    pixels: torch.Tensor
    step: int
    meta: dict


class TestFromAny:
    def test_tensor_and_collection_returned_as_is(self):
        t = torch.zeros(3)
        td = TensorDict({}, [])
        assert TensorDict.from_any(t) is t
        assert TensorDict.from_any(td) is td

    def test_recursive(self):
        obj = {
            "p": Point(torch.zeros(2, 3), torch.ones(2)),
            "t": (1, (2, 3)),
            "d": Obs(torch.zeros(2), 3, {"k": torch.zeros(2, 1)}),
        }
        td = TensorDict.from_any(obj, auto_batch_size=True)
        assert td.batch_size == (2,)
        assert torch.equal(td["p", "y"], torch.ones(2))
        # a level made only of scalars follows its parent's batch size
        assert td["t", "1"].batch_size == (2,)
        assert td["t", "1", "0"].tolist() == [2, 2]
        assert td["d", "step"].tolist() == [3, 3]
        assert td["d", "meta", "k"].shape == (2, 1)

    def test_list_and_arrays(self):
        assert torch.equal(TensorDict.from_any([1, 2]), torch.tensor([1, 2]))
        stack = TensorDict.from_any(["a", "b"])
        assert isinstance(stack, NonTensorStack) and stack.tolist() == ["a", "b"]
        assert torch.equal(TensorDict.from_any(np.arange(3)), torch.arange(3))
        x = np.zeros(2, dtype=[("a", "f4")])
        assert TensorDict.from_any(x).batch_size == (2,)

    def test_other_objects_unchanged(self):
        obj = object()
        assert TensorDict.from_any(obj) is obj

    def test_auto_and_batch_size_exclusive(self):
        with pytest.raises(TypeError, match="exclusive"):
            TensorDict.from_any((torch.zeros(2),), auto_batch_size=True, batch_size=[2])
        # for a dict, batch_size wins
        td = TensorDict.from_any({"a": torch.zeros(2, 3)}, auto_batch_size=True, batch_size=[2])
        assert td.batch_size == (2,)

    def test_batch_dims_without_auto_warns(self):
        with pytest.warns(FutureWarning, match="batch_dims"):
            td = TensorDict.from_tuple((torch.zeros(2),), batch_dims=1)
        assert td.batch_size == ()

    def test_return_types_are_tuples(self):
        res = torch.max(torch.zeros(3, 2), 0)
        td = TensorDict.from_any(res, auto_batch_size=True)
        assert sorted(td.keys()) == ["0", "1"]
        assert td.batch_size == (2,)

    def test_module_level(self):
        assert tensordict.from_any((1, 2))["1"] == 2
        assert tensordict.from_tuple((torch.zeros(2),), batch_size=[2]).batch_size == (2,)


class TestNamedTuple:
    def test_doc_example(self):
        data = TensorDict(
            {
                "a_tensor": torch.zeros(3),
                "nested": {"a_tensor": torch.zeros(3), "a_string": "zero!"},
            },
            [3],
        )
        nt = data.to_namedtuple()
        assert repr(nt) == (
            "GenericDict(a_tensor=tensor([0., 0., 0.]), nested=GenericDict(a_tensor=tensor([0., 0., 0.]), "
            "a_string='zero!'))"
        )
        td = TensorDict.from_namedtuple(nt, auto_batch_size=True)
        assert td.batch_size == (3,)
        assert td["nested"].batch_size == (3,)
        assert isinstance(td["nested"]._get_raw("a_string"), NonTensorData)
        assert td["nested", "a_string"] == "zero!"

    def test_explicit_batch_size_and_device(self, device):
        td = TensorDict.from_namedtuple(
            Point(torch.zeros(4, 2), torch.zeros(4)), batch_size=[4], device=device
        )
        assert td.batch_size == (4,)
        assert td["x"].device.type == device.type

    def test_dest_cls(self):
        P2 = collections.namedtuple("P2", ["x", "y"])
        td = TensorDict({"x": torch.zeros(()), "y": {"x": torch.ones(()), "y": torch.zeros(())}})
        nt = td.to_namedtuple(P2)
        assert type(nt) is P2 and type(nt.y) is P2
        assert nt.y.x == 1

    def test_invalid_field_name(self):
        with pytest.raises(ValueError, match="'0'"):
            TensorDict({"0": torch.zeros(())}).to_namedtuple()

    def test_not_a_namedtuple(self):
        with pytest.raises(TypeError, match="named tuple"):
            TensorDict.from_namedtuple((1, 2))

    def test_module_level(self):
        assert tensordict.from_namedtuple(
            Point(torch.zeros(2), torch.zeros(2)), auto_batch_size=True
        ).batch_size == (2,)


class TestFromTuple:
    def test_doc_example(self):
        td = TensorDict.from_tuple((1, 2, 3))
        assert list(td.keys()) == ["0", "1", "2"]
        assert td.batch_size == ()
        assert td["2"].dtype == torch.int64 and td["2"] == 3

    def test_nested_and_auto(self):
        td = TensorDict.from_tuple((torch.zeros(3, 2), {"a": torch.zeros(3)}), auto_batch_size=True)
        assert td.batch_size == (3,)
        assert td["1"].batch_size == (3,)

    def test_not_a_tuple(self):
        with pytest.raises(TypeError, match="tuple"):
            TensorDict.from_tuple([1, 2])


class TestFromDataclass:
    def test_instance(self):
        td = TensorDict.from_dataclass(
            Obs(torch.zeros(4, 3), 7, {"a": torch.zeros(4)}), auto_batch_size=True
        )
        assert td.batch_size == (4,)
        assert td["step"].tolist() == [7] * 4
        assert td["meta"].batch_size == (4,)

    def test_type_is_rejected(self):
        with pytest.raises(TypeError, match="dataclass type"):
            TensorDict.from_dataclass(Obs)
        with pytest.raises(TypeError, match="dataclass instance"):
            TensorDict.from_dataclass({"a": 1})

    def test_as_tensorclass_forwards_to_sibling(self):
        obs = Obs(torch.zeros(4, 3), 7, {})
        if importlib.util.find_spec("tensordict.tensorclass") is None:
            with pytest.raises(ImportError, match="td-tensorclass"):
                TensorDict.from_dataclass(obs, as_tensorclass=True)
        else:
            out = TensorDict.from_dataclass(obs, as_tensorclass=True)
            assert not isinstance(out, TensorDict)
            assert torch.equal(out.pixels, obs.pixels)


# ---------------------------------------------------------------------- struct arrays
class TestStructArray:
    def test_doc_example(self):
        x = np.array(
            [("Rex", 9, 81.0), ("Fido", 3, 27.0)],
            dtype=[("name", "U10"), ("age", "i4"), ("weight", "f4")],
        )
        td = TensorDict.from_struct_array(x)
        x_recon = td.to_struct_array()
        assert (x_recon == x).all()
        assert x_recon.shape == x.shape
        x["age"] += 1
        assert (td["age"] == np.array([10, 4])).all()
        assert td["name"] == ["Rex", "Fido"]

    def test_zero_copy_both_ways(self):
        x = np.zeros((2, 3), dtype=[("a", "f8"), ("b", "i8", (2,))])
        td = TensorDict.from_struct_array(x)
        assert td.batch_size == (2, 3)
        assert td["b"].shape == (2, 3, 2)
        td["a"][1, 2] = 4.0
        td["b"][0, 0, 1] = 9
        assert x["a"][1, 2] == 4.0
        assert x["b"][0, 0, 1] == 9

    def test_nested_and_zero_dim(self):
        dt = np.dtype([("pos", [("x", "f8"), ("y", "f8")]), ("id", "i4")], align=True)
        x = np.zeros(4, dtype=dt)
        td = TensorDict.from_struct_array(x)
        assert td["pos"].batch_size == (4,)
        x["pos"]["y"][2] = 1.5
        assert td["pos", "y"][2] == 1.5
        back = td.to_struct_array()
        assert back.dtype == dt and (back == x).all()
        scalar = np.array(("Rex", 3), dtype=[("name", "U4"), ("age", "i2")])
        td0 = TensorDict.from_struct_array(scalar)
        assert td0.batch_size == () and td0["name"] == "Rex" and td0["age"] == 3
        back0 = td0.to_struct_array()
        assert back0.shape == () and back0["name"] == "Rex"

    def test_batch_size_options(self):
        x = np.zeros((2, 3), dtype=[("a", "f4", (4,)), ("b", "f4", (4, 5))])
        assert TensorDict.from_struct_array(x, batch_size=[2]).batch_size == (2,)
        assert TensorDict.from_struct_array(x, auto_batch_size=True).batch_size == (2, 3, 4)
        assert TensorDict.from_struct_array(x, auto_batch_size=True, batch_dims=1).batch_size == (
            2,
        )
        with pytest.raises(RuntimeError, match=r"\(3,\)|\[3\]"):
            TensorDict.from_struct_array(x, batch_size=[3])

    def test_object_dtype_is_a_type_error(self):
        x = np.array([(1, {"a": 1})], dtype=[("n", "i4"), ("obj", "O")])
        with pytest.raises(TypeError, match="'obj'.*object"):
            TensorDict.from_struct_array(x)

    def test_plain_array_is_a_type_error(self):
        with pytest.raises(TypeError, match="structured"):
            TensorDict.from_struct_array(np.zeros(3))
        with pytest.raises(TypeError, match="structured"):
            TensorDict.from_struct_array([1, 2])

    def test_datetime_field_is_a_type_error(self):
        x = np.zeros(2, dtype=[("t", "M8[s]")])
        with pytest.raises(TypeError, match="'t'"):
            TensorDict.from_struct_array(x)

    def test_unviewable_field_is_copied_with_a_warning(self):
        x = np.zeros(3, dtype=[("a", ">f4"), ("b", "<f4")])
        with pytest.warns(UserWarning, match="'a'.*copied"):
            td = TensorDict.from_struct_array(x)
        x["a"][0] = 1.0
        x["b"][0] = 2.0
        assert td["a"][0] == 0.0  # copied
        assert td["b"][0] == 2.0  # shared
        # a packed layout whose offsets break the item alignment
        packed = np.zeros(2, dtype=[("c", "i1"), ("d", "f8")])
        with pytest.warns(UserWarning, match="'d'.*copied"):
            td = TensorDict.from_struct_array(packed)
        aligned = np.zeros(2, dtype=np.dtype([("c", "i1"), ("d", "f8")], align=True))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            td = TensorDict.from_struct_array(aligned)
        aligned["d"][1] = 3.0
        assert td["d"][1] == 3.0

    def test_device(self, device):
        x = np.zeros(3, dtype=[("a", "f4")])
        td = TensorDict.from_struct_array(x, device=device)
        assert td.device == device and td["a"].device.type == device.type

    def test_to_struct_array_doc_example(self):
        td = TensorDict(
            {"a": torch.tensor([1, 2, 3]), "b": torch.tensor([4.0, 5.0, 6.0])}, batch_size=[3]
        )
        assert str(td.to_struct_array()) == "[(1, 4.) (2, 5.) (3, 6.)]"

    def test_to_struct_array_strings_and_nested_batch(self):
        td = TensorDict({"s": "hi", "n": {"v": torch.zeros(2, 3)}}, [2])
        td["n"].batch_size = [2, 3]
        arr = td.to_struct_array()
        assert arr.shape == (2,)
        assert arr.dtype["s"] == np.dtype("U10")
        assert arr["n"]["v"].shape == (2, 3)
        assert list(arr["s"]) == ["hi", "hi"]
        # and back
        back = TensorDict.from_struct_array(arr)
        assert back["n"].batch_size == (2, 3) and back["s"] == ["hi", "hi"]

    def test_to_struct_array_does_not_share(self):
        td = TensorDict({"a": torch.zeros(3)}, [3])
        arr = td.to_struct_array()
        arr["a"][0] = 1.0
        assert td["a"][0] == 0.0

    def test_to_struct_array_errors(self):
        with pytest.raises(TypeError, match="'a'.*bfloat16"):
            TensorDict({"a": torch.zeros(2, dtype=torch.bfloat16)}, [2]).to_struct_array()
        with pytest.raises(TypeError, match="'o'"):
            TensorDict({"o": object()}, []).to_struct_array()

    def test_module_level(self):
        x = np.zeros(3, dtype=[("a", "f4")])
        td = tensordict.from_struct_array(x)
        x["a"] = 1.0
        assert torch.equal(td["a"], torch.ones(3))


# ---------------------------------------------------------------------- numpy / tolist
class TestNumpyAndTolist:
    def test_numpy_doc_example(self):
        data = TensorDict({"a": {"b": torch.zeros(()), "c": "a string!"}})
        out = data.numpy()
        assert out == {"a": {"b": np.array(0.0, dtype=np.float32), "c": "a string!"}}
        assert isinstance(out["a"]["b"], np.ndarray) and out["a"]["b"].dtype == np.float32

    def test_numpy_shares_cpu_memory_and_detaches(self):
        t = torch.zeros(3, requires_grad=True)
        td = TensorDict({"a": t, "s": NonTensorStack("x", "y", "z")}, [3])
        out = td.numpy()
        with torch.no_grad():
            t[0] = 2.0
        assert out["a"][0] == 2.0
        assert out["s"] == ["x", "y", "z"]

    def test_numpy_bfloat16(self):
        with pytest.raises(TypeError, match="'a'.*bfloat16"):
            TensorDict({"a": torch.zeros(2, dtype=torch.bfloat16)}, [2]).numpy()

    def test_tolist(self):
        td = TensorDict(
            a=torch.arange(24).view(2, 3, 4),
            b=TensorDict(c=torch.arange(12).reshape(2, 3, 2), batch_size=(2, 3, 2)),
            batch_size=(2, 3),
        )
        out = td.tolist()
        assert len(out) == 2 and len(out[0]) == 3
        assert torch.equal(out[1][2]["a"], torch.arange(20, 24))
        assert torch.equal(out[1][2]["b"]["c"], torch.tensor([10, 11]))
        out = td.tolist(convert_tensors=True)
        assert out[0][1] == {"a": [4, 5, 6, 7], "b": {"c": [2, 3]}}
        out = td.tolist(tolist_first=True, convert_tensors=True)
        assert out[0][1]["b"] == [{"c": 2}, {"c": 3}]
        nodes = td.tolist(convert_nodes=False)
        assert isinstance(nodes[0][0], TensorDict) and nodes[0][0].batch_size == ()

    def test_tolist_no_batch_dims_and_errors(self):
        td = TensorDict({"a": torch.zeros(2), "s": "x"})
        assert td.tolist(convert_tensors=True) == {"a": [0.0, 0.0], "s": "x"}
        with pytest.raises(TypeError, match="convert_nodes"):
            td.tolist(convert_tensors=True, convert_nodes=False)
        with pytest.raises(NotImplementedError, match="as_linked_list"):
            td.tolist(as_linked_list=True)


# ---------------------------------------------------------------------- fromkeys / make_tensordict
class TestSmallConstructors:
    def test_fromkeys(self):
        td = tensordict.fromkeys(["a", ("b", "c")], 1)
        assert td["b", "c"] == 1 and td.batch_size == ()

    def test_make_tensordict_computes_batch_size(self):
        td = tensordict.make_tensordict({"a": torch.zeros(3, 4)}, b=torch.zeros(3), auto_batch_size=True)
        assert td.batch_size == (3,)
        assert tensordict.make_tensordict({"a": torch.zeros(3, 4)}, b=torch.zeros(3)).batch_size == ()
        assert (
            tensordict.make_tensordict(a=torch.zeros(3, 4), auto_batch_size=False).batch_size == ()
        )
        assert tensordict.make_tensordict(a=torch.zeros(3, 4), batch_size=[3]).batch_size == (3,)

    def test_make_tensordict_device(self, device):
        td = tensordict.make_tensordict(a=torch.zeros(2), device=device)
        assert td.device == device

    def test_numpy_imported_lazily(self):
        """The modules loaded by ``import tensordict`` import NumPy only inside functions."""
        import ast
        from pathlib import Path

        src = Path(tensordict.__file__).parent
        for name in (
            "_convert.py",
            "_convert_pytree.py",
            "_pytree.py",
            "functional.py",
            "__init__.py",
        ):
            tree = ast.parse((src / name).read_text())
            for node in tree.body:
                if isinstance(node, ast.Import):
                    assert all(a.name.split(".")[0] != "numpy" for a in node.names), name
                if isinstance(node, ast.ImportFrom):
                    assert (node.module or "").split(".")[0] != "numpy", name
                    assert node.module != "tensordict._convert_numpy", name

    def test_no_warning_on_plain_use(self):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            TensorDict.from_dict({"a": torch.zeros(2)}, auto_batch_size=True)
            TensorDict.from_tuple((torch.zeros(2),), auto_batch_size=True, batch_dims=1)
