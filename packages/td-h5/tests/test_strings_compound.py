"""Strings come back as tensordict gives them; compound (struct) datasets read as
nested TensorDicts (issue 18, td-h5)."""

from __future__ import annotations

import h5py
import numpy as np
import torch

from tensordict import NonTensorData, NonTensorStack, TensorDict
from tensordict.persistent import PersistentTensorDict


def test_str_in_bytes_out_as_tensordict(tmp_path):
    td = TensorDict({"a": 0, "c": "a string!", ("d", "e"): "another string!"}, []).expand(10)
    h5td = PersistentTensorDict.from_dict(td, filename=tmp_path / "f.h5")
    assert h5td["c"] == b"a string!"
    assert h5td.get("c").batch_size == (10,)
    assert h5td["d", "e"] == b"another string!"
    h5td.set("f", NonTensorData(1, batch_size=[10]))
    assert h5td["f"] == 1
    h5td.close()


def test_bytes_round_trip_exactly_even_with_nul(tmp_path):
    td = TensorDict({"raw": b"\x00ab\x00", "plain": b"xyz", "utf8": "héllo"}, [])
    with td.to_h5(tmp_path / "b.h5") as p:
        assert p["raw"] == b"\x00ab\x00"
        assert p["plain"] == b"xyz"
        assert p["utf8"] == "héllo".encode()


def test_strings_other_tools_write_as_str_stay_str(tmp_path):
    path = tmp_path / "o.h5"
    with h5py.File(path, "w") as f:
        f.attrs["title"] = "a vlen str"
        f.attrs["fixed"] = np.bytes_(b"fixed bytes")
        f["names"] = np.array(["x", "yy", "zzz"], dtype=h5py.string_dtype())
    with PersistentTensorDict.from_h5(path) as p:
        assert p["title"] == "a vlen str"
        assert p["fixed"] == b"fixed bytes"
        assert p["names"] == ["x", "yy", "zzz"]


def test_string_stack_round_trips_as_str(tmp_path):
    td = TensorDict(a=torch.arange(3), batch_size=[3])
    td.set("names", NonTensorStack("x", "y", "z"))
    with td.to_h5(tmp_path / "s.h5") as p:
        assert p["names"] == ["x", "y", "z"]


def test_compound_dataset_is_a_nested_tensordict(tmp_path):
    dt = np.dtype([("a", "i4"), ("b", "f8", (3,)), ("c", [("x", "u1"), ("y", "f4")]), ("s", "S4")])
    arr = np.zeros(5, dtype=dt)
    arr["a"] = np.arange(5)
    arr["b"] = 1.5
    arr["c"]["y"] = np.arange(5) * 2
    arr["s"] = b"ab"
    path = tmp_path / "c.h5"
    with h5py.File(path, "w") as f:
        f["rec"] = arr
        f["v"] = np.arange(5)
    with PersistentTensorDict.from_h5(path) as p:
        rec = p["rec"]
        assert isinstance(rec, TensorDict) and rec.batch_size == (5,)
        assert rec["a"].dtype == torch.int32 and rec["a"].tolist() == [0, 1, 2, 3, 4]
        assert rec["b"].shape == (5, 3) and rec["b"].dtype == torch.float64
        assert rec["c", "y"].tolist() == [0.0, 2.0, 4.0, 6.0, 8.0] and rec["c", "x"].dtype == torch.uint8
        assert rec["s"] == ["ab"] * 5
        assert p[1:3]["rec", "a"].tolist() == [1, 2]
        assert p[torch.tensor([4, 0])]["rec", "c", "y"].tolist() == [8.0, 0.0]
