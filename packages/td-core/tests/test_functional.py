"""tensordict.functional: pad, pad_sequence, merge_tensordicts, make_tensordict,
dense_stack_tds (also at the top level)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

import tensordict
from tensordict import NonTensorStack, TensorDict
from tensordict.functional import (
    dense_stack_tds,
    make_tensordict,
    merge_tensordicts,
    pad,
    pad_sequence,
)


def test_top_level_names():
    for name in ("pad", "pad_sequence", "merge_tensordicts", "make_tensordict", "dense_stack_tds"):
        assert getattr(tensordict, name) is getattr(tensordict.functional, name)


class TestPad:
    def test_doc_example(self):
        td = TensorDict({"a": torch.ones(3, 4, 1), "b": torch.ones(3, 4, 1, 1)}, batch_size=[3, 4])
        padded = pad(td, [0, 1, 0, 2], value=0.0)
        assert padded.batch_size == (4, 6)
        assert padded["a"].shape == (4, 6, 1) and padded["b"].shape == (4, 6, 1, 1)
        assert (
            padded["a"][:3, :4].eq(1).all()
            and padded["a"][3].eq(0).all()
            and padded["a"][:, 4:].eq(0).all()
        )

    def test_value_left_nested_and_dtype(self, device):
        td = TensorDict(
            {"a": torch.arange(3, device=device), "n": {"b": torch.ones(3, 2, device=device)}},
            [3],
            device=device,
        )
        td["n"].batch_size = [3, 2]
        padded = pad(td, [2, 0], value=-1)
        assert padded.batch_size == (5,) and padded["n"].batch_size == (5, 2)
        assert padded["a"].tolist() == [-1, -1, 0, 1, 2]
        assert padded["a"].dtype == torch.int64
        assert padded["n", "b"][:2].eq(-1).all()
        assert padded.device == td.device

    def test_crop(self):
        td = TensorDict({"a": torch.arange(5)}, [5])
        assert pad(td, [-1, -2])["a"].tolist() == [1, 2]

    def test_non_tensor(self):
        td = TensorDict({"t": torch.zeros(3), "s": "meta"}, [3])
        td["n"] = NonTensorStack("a", "b", "c")
        padded = pad(td, [1, 1])
        # padded slots hold None, also for data that was one object for the batch (as tensordict)
        assert padded["s"] == [None, "meta", "meta", "meta", None] and padded._get_raw("s").batch_size == (5,)
        assert pad(td, [0, -1])["s"] == "meta"  # cropping keeps one object
        assert padded["n"] == [None, "a", "b", "c", None]

    def test_bad_pad_size(self):
        td = TensorDict({"a": torch.zeros(3, 4)}, [3])
        with pytest.raises(RuntimeError, match="even length"):
            pad(td, [1])
        with pytest.raises(RuntimeError, match="at most"):
            pad(td, [1, 1, 1, 1])
        with pytest.raises(RuntimeError, match="negative output size"):
            pad(td, [-2, -2])


class TestPadSequence:
    def test_doc_example(self):
        tds = [
            TensorDict({"a": torch.zeros(3, 8), "b": torch.zeros(6, 8)}, batch_size=[]),
            TensorDict({"a": torch.zeros(5, 8), "b": torch.zeros(6, 8)}, batch_size=[]),
        ]
        out = pad_sequence(tds, return_mask=True)
        assert out.batch_size == (2,)
        assert out["a"].shape == (2, 5, 8) and out["b"].shape == (2, 6, 8)
        assert out["masks"].batch_size == (2,)
        assert out["masks", "a"].tolist() == [[True] * 3 + [False] * 2, [True] * 5]
        assert out["masks", "b"].all()

    def test_values_and_padding_value(self):
        tds = [TensorDict({"x": torch.ones(n, 2)}, []) for n in (1, 3)]
        out = pad_sequence(tds, padding_value=-5.0)
        assert out["x"][0, 1:].eq(-5).all() and out["x"][1].eq(1).all()
        assert "masks" not in out.keys()

    def test_pad_a_batch_dim(self):
        tds = [TensorDict({"x": torch.ones(n, 2), "tag": "k"}, [n]) for n in (2, 4)]
        out = pad_sequence(tds, return_mask=("m", "k"))
        assert out.batch_size == (2, 4)
        assert out["m", "k", "x"].tolist() == [[True, True, False, False], [True] * 4]
        assert out["tag"] == [["k", "k", None, None], ["k"] * 4]  # padded slots hold None

    def test_pad_dim_inside_features(self):
        tds = [TensorDict({"x": torch.ones(2, n)}, [2]) for n in (1, 3)]
        out = pad_sequence(tds, pad_dim=1, return_mask=True)
        assert out.batch_size == (2, 2) and out["x"].shape == (2, 2, 3)
        assert out["masks", "x"].shape == (2, 2, 3)
        assert out["masks", "x"][0].tolist() == [[True, False, False]] * 2

    def test_out_and_device(self, device):
        tds = [TensorDict({"x": torch.ones(n)}, []) for n in (1, 2)]
        dest = TensorDict({"x": torch.full((2, 2), 9.0)}, [2])
        res = pad_sequence(tds, out=dest)
        assert res is dest and dest["x"].tolist() == [[1.0, 0.0], [1.0, 1.0]]
        assert pad_sequence(tds, device=device).device == device

    def test_errors(self):
        with pytest.raises(RuntimeError, match="non-empty"):
            pad_sequence([])
        with pytest.raises(KeyError, match="missing"):
            pad_sequence([TensorDict({"a": torch.zeros(1)}), TensorDict({"b": torch.zeros(1)})])
        with pytest.raises(RuntimeError, match="outside pad_dim"):
            pad_sequence(
                [
                    TensorDict({"a": torch.zeros(2, 3)}, [2, 3]),
                    TensorDict({"a": torch.zeros(3, 4)}, [3, 4]),
                ]
            )
        with pytest.raises(ValueError, match="negative pad_dim"):
            pad_sequence([TensorDict({"a": torch.zeros(1)})], pad_dim=-1)


class TestMerge:
    def test_doc_example(self):
        td0 = TensorDict({"a": {"b0": 0}, "c": {"d": {"e": 0}}, "common": 0})
        td1 = TensorDict({"a": {"b1": 1}, "f": {"g": {"h": 1}}, "common": 1})
        td2 = TensorDict({"a": {"b2": 2}, "f": {"g": {"h": 2}}, "common": 2})
        td = merge_tensordicts(td0, td1, td2, callback_exist=lambda *v: torch.stack(list(v)))
        assert set(td.keys(True, True)) == {
            ("a", "b0"),
            ("a", "b1"),
            ("a", "b2"),
            ("c", "d", "e"),
            "common",
            ("f", "g", "h"),
        }
        assert td["common"].tolist() == [0, 1, 2]
        assert td["f", "g", "h"] == 1  # not in every TensorDict: the first value

    def test_callback_dict_and_no_callback(self):
        td0 = TensorDict({"x": torch.tensor(1.0), "y": torch.tensor(1.0)})
        td1 = TensorDict({"x": torch.tensor(2.0), "y": torch.tensor(2.0)})
        td = merge_tensordicts(td0, td1, callback_exist={"x": lambda a, b: a + b})
        assert td["x"] == 3.0 and td["y"] == 1.0
        assert merge_tensordicts(td0, td1)["x"] == 1.0

    def test_batch_size_and_errors(self):
        td0 = TensorDict({"a": torch.zeros(3)}, [3])
        td1 = TensorDict({"b": torch.zeros(4)}, [4])
        with pytest.raises(RuntimeError, match="'b'"):
            merge_tensordicts(td0, td1)
        with pytest.raises(ValueError, match="at least one"):
            merge_tensordicts()


def test_make_tensordict():
    td = make_tensordict(
        {"a": torch.zeros(3, 4), ("n", "b"): torch.zeros(3, 4, 2)}, c=torch.zeros(3), auto_batch_size=True
    )
    assert td.batch_size == (3,) and td["n"].batch_size == (3, 4, 2)
    assert make_tensordict(a=torch.zeros(3, 4)).batch_size == ()  # tensordict 0.15: [] by default
    assert make_tensordict(a=torch.zeros(3, 4), batch_size=[3, 4]).batch_size == (3, 4)


@pytest.mark.skipif(
    importlib.util.find_spec("tensordict._lazy") is None, reason="tensordict._lazy not available"
)
def test_dense_stack_tds():
    tds = [TensorDict({"a": torch.full((2,), float(i))}, [2]) for i in range(3)]
    out = dense_stack_tds(tds)
    assert out.batch_size == (3, 2) and out["a"][:, 0].tolist() == [0.0, 1.0, 2.0]
    out = dense_stack_tds(tds, 1)
    assert out.batch_size == (2, 3)
