"""safetensors files: structure round trips, tensordict 0.15's layout, hostile files."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import pytest
import torch

from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    TensorDict,
    UnbatchedTensor,
    from_safetensors,
    to_safetensors,
)

st = pytest.importorskip("safetensors.torch")

try:  # td-tensorclass is not a dependency of td-memmap: its cases skip without it
    from tensordict import tensorclass
except ImportError:
    tensorclass = None
needs_tensorclass = pytest.mark.skipif(tensorclass is None, reason="td-tensorclass is not installed")

if tensorclass is not None:

    @tensorclass
    class Pair:
        x: torch.Tensor
        label: str = "none"


def _header(path) -> dict:
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8 : 8 + n])


@needs_tensorclass
def test_round_trip_structure(tmp_path):
    td = TensorDict(
        {
            "w": torch.ones(2, 3),
            "sub": {"b": torch.zeros(2), "s": "hello", "n": NonTensorData(3), "l": NonTensorData([1, "x"])},
            "a.b": torch.arange(2),
            "u": UnbatchedTensor(torch.ones(5)),
            "pair": Pair(x=torch.ones(2), label="p", batch_size=[2]),
            "deep": TensorDict(v=torch.ones(2, 4), batch_size=[2, 4]),
        },
        batch_size=[2],
        names=["row"],
    )
    td["stack"] = LazyStackedTensorDict(TensorDict(a=torch.zeros(3)), TensorDict(a=torch.ones(3)), stack_dim=0)
    path = tmp_path / "td.safetensors"
    td.to_safetensors(path)
    back = TensorDict.from_safetensors(path)
    assert back.batch_size == torch.Size([2]) and back.names == ["row"]
    assert back["sub", "s"] == "hello" and back["sub", "n"] == 3 and back["sub", "l"] == [1, "x"]
    assert isinstance(back.get("u"), UnbatchedTensor)
    assert isinstance(back["pair"], Pair) and back["pair"].label == "p"
    assert back["deep"].batch_size == torch.Size([2, 4])
    assert isinstance(back.get("stack"), LazyStackedTensorDict) and back["stack", "a"].sum() == 3
    assert torch.equal(back["a.b"], td["a.b"]) and torch.equal(back["w"], td["w"])
    assert set(_header(path)) == {"__metadata__", "w", "sub.b", "a.b", "u", "pair.x", "deep.v", "stack.a"}


@needs_tensorclass
def test_top_level_tensorclass_and_device(tmp_path):
    path = tmp_path / "p.safetensors"
    to_safetensors(Pair(x=torch.arange(2), label="t", batch_size=[2]), path)
    back = from_safetensors(path, device="cpu")
    assert isinstance(back, Pair) and back.label == "t" and back.device == torch.device("cpu")


def test_reads_tensordict_015_layout(tmp_path):
    # the metadata tensordict 0.15.3 writes for TensorDict({"w": ones(2, 3), "sub": {"b": zeros(2),
    # "s": "hi"}}, batch_size=[2], names=["b"]) -- keys joined with ".", one JSON document
    meta = {
        "version": 1,
        "root": {
            "batch_size": [2], "names": ["b"],
            "keys": {
                "w": {"tensor": "w"},
                "sub": {"td": {"batch_size": [2], "names": ["b"], "keys": {"b": {"tensor": "sub.b"}, "s": {"non_tensor": "hi"}}}},
            },
        },
    }
    path = tmp_path / "ref.safetensors"
    st.save_file({"w": torch.ones(2, 3), "sub.b": torch.zeros(2)}, str(path), metadata={"tensordict": json.dumps(meta)})
    td = from_safetensors(path)
    assert td.names == ["b"] and td["sub", "s"] == "hi" and td["sub", "b"].shape == torch.Size([2])
    # and what we write has that layout
    to_safetensors(td, tmp_path / "ours.safetensors")
    assert json.loads(_header(tmp_path / "ours.safetensors")["__metadata__"]["tensordict"]) == meta


def test_plain_checkpoint_loads_as_module_layout(tmp_path):
    path = tmp_path / "m.safetensors"
    module = torch.nn.Sequential(torch.nn.Linear(3, 4))
    st.save_file({k: v.detach() for k, v in module.state_dict().items()}, str(path))
    params = from_safetensors(path)
    assert params.batch_size == torch.Size([]) and params["0", "weight"].shape == torch.Size([4, 3])
    params.to_module(module)


def test_loaded_tensors_are_private_to_the_process(tmp_path):
    path = tmp_path / "w.safetensors"
    to_safetensors(TensorDict(a=torch.zeros(3), h=torch.ones(2, dtype=torch.bfloat16)), path)
    before = path.read_bytes()
    td = from_safetensors(path)
    td["a"] += 1  # load_file's tensors are copies: the file keeps its bytes
    assert path.read_bytes() == before and from_safetensors(path)["a"].tolist() == [0.0, 0.0, 0.0]
    assert td["h"].dtype == torch.bfloat16 and td["h"].tolist() == [1.0, 1.0]


def test_shared_memory_is_saved_as_copies(tmp_path):
    # save_file refuses tensors that share memory and non-contiguous ones: both are saved
    base = torch.arange(6.0)
    td = TensorDict(a=base, b=base, c=base[:2], e=base[:0], t=base.view(2, 3).t(), batch_size=[])
    to_safetensors(td, tmp_path / "s.safetensors")
    back = from_safetensors(tmp_path / "s.safetensors")
    assert back["c"].tolist() == [0.0, 1.0] and back["a"].data_ptr() != back["b"].data_ptr()
    assert back["e"].shape == torch.Size([0]) and torch.equal(back["t"], base.view(2, 3).t())
    assert st.load_file(str(tmp_path / "s.safetensors"))["t"].tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]


def test_write_errors_keep_the_earlier_file(tmp_path):
    path = tmp_path / "t.safetensors"
    to_safetensors(TensorDict(a=torch.ones(1)), path)
    before = path.read_bytes()
    with pytest.raises(TypeError, match=r"non-tensor value at \('o',\).*object"):
        to_safetensors(TensorDict(a=torch.ones(1), o=NonTensorData(object())), path)
    with pytest.raises(ValueError, match="safetensors name 'a.b'"):
        to_safetensors(TensorDict({"a.b": torch.ones(1), "a": {"b": torch.ones(1)}}), path)
    with pytest.raises(TypeError, match="non-tensor stack"):
        to_safetensors(TensorDict(s=["a", "b"], batch_size=[2]), path)
    with pytest.raises(TypeError, match="different keys"):
        to_safetensors(LazyStackedTensorDict(TensorDict(a=torch.ones(1)), TensorDict(b=torch.ones(1))), path)
    with pytest.raises(TypeError, match=r"tensor 'z' as safetensors: the format has no torch.complex128"):
        to_safetensors(TensorDict(a=torch.ones(1), z=torch.zeros(1, dtype=torch.complex128)), path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["t.safetensors"]


# ---------------------------------------------------------------------- hostile files
def _raw_file(path, header: dict, data: bytes = b"", declared: int | None = None) -> None:
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text) if declared is None else declared))
        f.write(text)
        f.write(data)


def test_header_declaring_more_bytes_than_the_file(tmp_path):
    path = tmp_path / "short.safetensors"
    _raw_file(path, {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4, declared=10_000)
    with pytest.raises(ValueError, match=r"short\.safetensors.*declares 10000 bytes"):
        from_safetensors(path)


def test_header_of_gigabytes_is_refused_without_reading_it(tmp_path):
    path = tmp_path / "huge.safetensors"
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", 3 << 30))  # declares a 3 GiB header
    with pytest.raises(ValueError, match="declares 3221225472 bytes"):
        from_safetensors(path)
    # a (sparse) file that does hold 200 MB: the declared header is still over the limit
    sparse = tmp_path / "sparse.safetensors"
    with open(sparse, "wb") as f:
        f.write(struct.pack("<Q", 150 << 20))
        f.truncate(200 << 20)
    with pytest.raises(ValueError, match="more than the 104857600 bytes"):
        from_safetensors(sparse)


def test_tensor_past_the_end_and_wrong_size(tmp_path):
    path = tmp_path / "cut.safetensors"
    _raw_file(path, {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8)
    with pytest.raises(ValueError, match=r"cut\.safetensors.*tensor 'w' ends at byte 16.*holds 8"):
        from_safetensors(path)
    bad = tmp_path / "size.safetensors"
    _raw_file(bad, {"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8)
    with pytest.raises(ValueError, match="tensor 'w' 8 bytes, but shape"):
        from_safetensors(bad)
    odd = tmp_path / "dtype.safetensors"
    _raw_file(odd, {"w": {"dtype": "OBJ", "shape": [1], "data_offsets": [0, 1]}}, b"\0")
    with pytest.raises(ValueError, match="unknown dtype 'OBJ'"):
        from_safetensors(odd)
    _raw_file(odd, {"w": {"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4)
    with pytest.raises(ValueError, match=r"tensor 'w' the unknown dtype \['F32'\]"):
        from_safetensors(odd)
    _raw_file(odd, {"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}, b"\0" * 4)
    with pytest.raises(ValueError, match=r"tensor 'w' the invalid data_offsets \[4, 0\]"):
        from_safetensors(odd)


def test_overlapping_tensors(tmp_path):
    path = tmp_path / "overlap.safetensors"
    header = {
        "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
    }
    _raw_file(path, header, b"\0" * 12)
    with pytest.raises(ValueError, match="overlapping tensors: 'a'.*'b'"):
        from_safetensors(path)


def test_bad_metadata_and_unknown_class(tmp_path):
    path = tmp_path / "meta.safetensors"
    st.save_file({"a": torch.ones(2)}, str(path), metadata={"tensordict": "{not json"})
    with pytest.raises(ValueError, match="not valid JSON"):
        from_safetensors(path)
    meta = {"version": 1, "root": {"batch_size": [2], "names": None, "keys": {"a": {"tensor": "missing"}}}}
    st.save_file({"a": torch.ones(2)}, str(path), metadata={"tensordict": json.dumps(meta)})
    with pytest.raises(ValueError, match="tensor 'missing'"):
        from_safetensors(path)
    # a class in a module that is not imported is never imported: no code from the file runs
    meta = {"version": 1, "root": {"batch_size": [2], "names": None, "class": "<class 'os.system'>", "keys": {}}}
    st.save_file({"a": torch.ones(2)}, str(path), metadata={"tensordict": json.dumps(meta)})
    with pytest.raises(RuntimeError, match="Could not find the tensorclass"):
        from_safetensors(path)
    meta["root"]["class"] = "<class 'not_a_module_xyz.Evil'>"
    st.save_file({"a": torch.ones(2)}, str(path), metadata={"tensordict": json.dumps(meta)})
    with pytest.raises(RuntimeError, match="Import the module"):
        from_safetensors(path)
    assert "not_a_module_xyz" not in sys.modules


def test_missing_safetensors_names_the_install_line(tmp_path):
    code = (
        "import importlib.abc, sys, torch, tensordict\n"
        "from tensordict import TensorDict\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'safetensors':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "try:\n"
        "    TensorDict(a=torch.ones(1)).to_safetensors('x.safetensors')\n"
        "except ImportError as err:\n"
        "    print(err)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert "`pip install safetensors`" in res.stdout and "td-memmap[safetensors]" in res.stdout, res.stdout + res.stderr


def test_lazy_stack_saved_when_the_reader_loads_first(tmp_path):
    # td-memmap loaded before any lazy stack exists (the lazy-stack class is bound on first use)
    code = (
        "import json, torch\n"
        "from tensordict import to_safetensors, TensorDict, from_safetensors\n"
        "from tensordict import LazyStackedTensorDict\n"
        "to_safetensors(LazyStackedTensorDict(TensorDict(a=torch.zeros(1)), TensorDict(a=torch.ones(1))), 'l.st')\n"
        "print(type(from_safetensors('l.st')).__name__)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert res.stdout.strip() == "LazyStackedTensorDict", res.stdout + res.stderr
