"""Untrusted input (hypothesis fuzz): corrupted consolidated files and TensorDict reprs.

``from_consolidated`` and ``parse_tensor_dict_string`` read data that may come from
anywhere. Whatever they are fed (truncated files, flipped bytes, metadata JSON with
hostile values, hostile key names, random text, pickled payloads), each must either
return a well-formed TensorDict or raise its documented error: never crash the
interpreter, hang (the ``timeout`` marks), write next to the file, or execute code.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import struct
import sys

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tensordict import TensorDict, from_consolidated, parse_tensor_dict_string
from tensordict._base import TensorDictBase
from tensordict.testing.strategies import leaf_items, register_profiles, tensordicts

register_profiles()

_HEADER = struct.Struct("<8sIQ")
_STRINGS = st.text("abc xyz-_", max_size=5)

#: what ``from_consolidated`` documents (``FileNotFoundError`` is an ``OSError``)
CONSOLIDATED_ERRORS = (ValueError, FileNotFoundError)
#: what ``parse_tensor_dict_string`` documents
PARSE_ERRORS = (ValueError, TypeError)


# ---------------------------------------------------------------------- hostile values
HOSTILE_KEYS = [
    "", ".", "..", "../outside", "/etc/passwd", "a/b", "a.b", "\x00", "k\x00ey", " ", "\n",
    "é", "🔑", "a" * 4096, "__class__", "__proto__", "_tensordict", "batch_size",
]

_json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
    st.sampled_from(["float32", "int64", "bool", "object", "torch.float32", "str", "../x", "cuda:99",
                     "meta", "cpu", "tensor", "td", "data", "stack", "pickle", ""]),
    st.sampled_from(HOSTILE_KEYS),
    st.sampled_from([-1, 0, 1, 2**31, 2**63 - 1, 2**63, 2**64, -(2**63)]),
)
_json_values = st.recursive(
    _json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=12,
)


def _paths(obj, prefix=()):
    """Every path (tuple of keys / indices) into a JSON tree."""
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


def _replace(obj, path, value):
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(obj, dict):
        out = dict(obj)
    else:
        out = list(obj)
    out[head] = _replace(obj[head], rest, value)
    return out


def _file_bytes(meta: dict, data: bytes) -> bytes:
    meta_bytes = json.dumps(meta).encode("utf-8")
    head = _HEADER.size + len(meta_bytes)
    pad = -(-head // 64) * 64 - head
    return _HEADER.pack(b"TDCONSOL", 1, len(meta_bytes)) + meta_bytes + b"\0" * pad + data


def _split_file(raw: bytes) -> tuple[dict, bytes]:
    _, _, meta_len = _HEADER.unpack(raw[: _HEADER.size])
    meta = json.loads(raw[_HEADER.size : _HEADER.size + meta_len])
    head = _HEADER.size + meta_len
    return meta, raw[-(-head // 64) * 64 :]


def _load_or_documented_error(path):
    """``from_consolidated(path)``: a well-formed TensorDict, or ``None`` after a documented error."""
    folder = os.path.dirname(path)
    before = sorted(os.listdir(folder))
    try:
        td = from_consolidated(path)
    except CONSOLIDATED_ERRORS as err:
        assert str(err), "the error must say what is wrong"
        td = None
    assert sorted(os.listdir(folder)) == before, "loading must not create or remove files"
    if td is not None:
        _check_well_formed(td)
    return td


def _check_well_formed(td):
    """Every leaf starts with its container's batch size; reading every value works."""
    assert isinstance(td, TensorDictBase)
    for key, value in td._items_raw():
        if isinstance(value, TensorDictBase):
            assert value.batch_size[: td.ndim] == td.batch_size, key
            _check_well_formed(value)
        elif isinstance(value, torch.Tensor):
            assert value.shape[: td.ndim] == td.batch_size, key
            assert td.device is None or value.device == td.device, f"{key}: on {value.device}, td.device is {td.device}"
            value.sum() if value.dtype is not torch.bool else value.any()  # touches every byte
        else:
            assert value.batch_size[: td.ndim] == td.batch_size, key
    repr(td)


@pytest.fixture(scope="module")
def sample_files(tmp_path_factory):
    """A few valid consolidated files (bytes) of different shapes."""
    folder = tmp_path_factory.mktemp("valid")
    out = []
    tds = [
        TensorDict({"a": torch.arange(6.0).view(3, 2), "b": {"c": torch.arange(3), "s": "text"}}, [3]),
        TensorDict({"x": torch.ones(2, 2, dtype=torch.float16), "m": torch.tensor([[True], [False]]),
                    "n": {"o": {"p": torch.zeros(2, 1, 4, dtype=torch.int8)}}}, [2], names=["t"]),
        TensorDict({}, [4]),
    ]
    for i, td in enumerate(tds):
        path = folder / f"f{i}.td"
        td.consolidate(filename=path)
        out.append(path.read_bytes())
    return out


# ---------------------------------------------------------------------- from_consolidated
@pytest.mark.timeout(120)
@given(data=st.data())
def test_fuzz_consolidated_truncated(data, sample_files, tmp_path_factory):
    raw = data.draw(st.sampled_from(sample_files))
    cut = data.draw(st.integers(0, len(raw) - 1))
    path = tmp_path_factory.mktemp("trunc") / "t.td"
    path.write_bytes(raw[:cut])
    td = _load_or_documented_error(str(path))
    # only zero-padding or the end of a zero-byte storage may be cut without notice
    if td is not None:
        assert all(b == 0 for b in raw[cut:]), "a truncated file loaded"


@pytest.mark.timeout(120)
@given(data=st.data())
def test_fuzz_consolidated_flipped_bytes(data, sample_files, tmp_path_factory):
    raw = bytearray(data.draw(st.sampled_from(sample_files)))
    meta, _ = _split_file(bytes(raw))
    meta_end = _HEADER.size + len(json.dumps(meta))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, meta_end - 1))  # header and metadata: the parts a reader trusts
        raw[pos] = data.draw(st.integers(0, 255))
    path = tmp_path_factory.mktemp("flip") / "f.td"
    path.write_bytes(bytes(raw))
    _load_or_documented_error(str(path))


@pytest.mark.timeout(120)
@given(data=st.data())
def test_fuzz_consolidated_hostile_metadata(data, sample_files, tmp_path_factory):
    meta, payload = _split_file(data.draw(st.sampled_from(sample_files)))
    for _ in range(data.draw(st.integers(1, 3))):
        target = data.draw(st.sampled_from(list(_paths(meta))))
        meta = _replace(meta, target, data.draw(_json_values))
    path = tmp_path_factory.mktemp("meta") / "m.td"
    path.write_bytes(_file_bytes(meta, payload) if isinstance(meta, dict) or data.draw(st.booleans())
                     else _file_bytes({}, payload))
    _load_or_documented_error(str(path))


@pytest.mark.timeout(120)
@given(td=tensordicts(non_tensor=_STRINGS, max_keys=3), key=st.sampled_from(HOSTILE_KEYS))
def test_fuzz_consolidated_hostile_keys_round_trip(td, key, tmp_path_factory):
    """A hostile key name is just a key: written and read back as is, nothing else touched."""
    td = td.clone()
    td.set(key, torch.zeros(td.batch_size))
    folder = tmp_path_factory.mktemp("keys")
    td.consolidate(filename=folder / "k.td")
    assert sorted(os.listdir(folder)) == ["k.td"]
    back = from_consolidated(folder / "k.td")
    assert key in back.keys()
    assert sorted(back.keys()) == sorted(td.keys())
    assert sorted(os.listdir(folder)) == ["k.td"]


@pytest.mark.timeout(120)
@given(blob=st.binary(max_size=256))
def test_fuzz_consolidated_random_bytes(blob, tmp_path_factory):
    path = tmp_path_factory.mktemp("rand") / "r.td"
    path.write_bytes(blob)
    assert _load_or_documented_error(str(path)) is None


def test_consolidated_deep_nesting_is_rejected(tmp_path):
    depth = 5000  # written by hand: json.dumps itself cannot go this deep
    empty = '{"batch_size": [], "device": null, "names": null, "entries": []}'
    root = '{"batch_size": [], "device": null, "names": null, "entries": [["k", "td", ' * depth + empty + "]]}" * depth
    meta = ('{"format": "tensordict.consolidated", "version": 1, "nbytes": 0, "leaves": [], "root": ' + root + "}").encode()
    pad = -(-(_HEADER.size + len(meta)) // 64) * 64 - _HEADER.size - len(meta)
    path = tmp_path / "deep.td"
    path.write_bytes(_HEADER.pack(b"TDCONSOL", 1, len(meta)) + meta + b"\0" * pad)
    with pytest.raises(ValueError):
        from_consolidated(path)


def test_consolidated_symlink_and_missing(tmp_path):
    with pytest.raises(FileNotFoundError):
        from_consolidated(tmp_path / "absent.td")
    with pytest.raises(FileNotFoundError):
        from_consolidated(tmp_path)  # a folder is not a file
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError):
        from_consolidated(tmp_path / "dangling")


class _Marker:
    """Unpickling this creates the marker file (``open(path, "w")``)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize("where", ["data", "metadata_value", "entry_kind", "whole_file", "leaf_dtype"])
def test_consolidated_never_unpickles(tmp_path, where):
    marker = tmp_path / "executed"
    payload = pickle.dumps(_Marker(marker))
    assert not marker.exists()
    b64 = base64.b64encode(payload).decode()
    meta = {"format": "tensordict.consolidated", "version": 1, "nbytes": len(payload),
            "leaves": [{"dtype": "uint8", "shape": [len(payload)], "offset": 0}],
            "root": {"batch_size": [], "device": None, "names": None, "entries": [["a", "tensor", 0]]}}
    if where == "metadata_value":
        meta["root"]["entries"].append(["p", "data", b64])
    elif where == "entry_kind":
        meta["root"]["entries"].append(["p", "pickle", b64])
    elif where == "leaf_dtype":
        meta["leaves"][0]["dtype"] = "object"
    raw = payload if where == "whole_file" else _file_bytes(meta, payload)
    path = tmp_path / "p.td"
    path.write_bytes(raw)
    try:
        td = from_consolidated(path)
    except CONSOLIDATED_ERRORS:
        td = None
    if td is not None:
        repr(td)
        td.to_dict()
        td.clone()
    assert not marker.exists(), f"a pickled payload ({where}) was executed"
    if where in ("entry_kind", "whole_file", "leaf_dtype"):
        assert td is None


# ---------------------------------------------------------------------- parse_tensor_dict_string
def _parse_or_documented_error(text):
    try:
        td = parse_tensor_dict_string(text)
    except PARSE_ERRORS as err:
        assert str(err)
        return None
    _check_well_formed(td)
    return td


@pytest.mark.timeout(120)
@given(text=st.text(max_size=200))
def test_fuzz_parse_random_text(text):
    _parse_or_documented_error(text)


_REPR_ALPHABET = "(){}[],:=\n .-0123456789abcdefTensorDictSizebatch_devicedtypetorch"


@pytest.mark.timeout(120)
@given(data=st.data())
def test_fuzz_parse_mutated_repr(data):
    td = data.draw(tensordicts(max_keys=3, non_tensor=_STRINGS, batch_size=st.lists(st.integers(0, 3), max_size=2)))
    text = repr(td)
    parsed = _parse_or_documented_error(text)
    assert parsed is not None
    assert sorted(k for k, _ in leaf_items(parsed)) == sorted(k for k, _ in leaf_items(td))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(text)))
        j = data.draw(st.integers(i, min(len(text), i + 8)))
        text = text[:i] + data.draw(st.text(_REPR_ALPHABET, max_size=6)) + text[j:]
    _parse_or_documented_error(text)


@pytest.mark.parametrize(
    "field",
    [
        "Tensor(shape=torch.Size([-1]), device=cpu, dtype=torch.float32, is_shared=False)",
        "Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.load, is_shared=False)",
        "Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.Tensor, is_shared=False)",
        "Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.__builtins__, is_shared=False)",
        "Tensor(shape=torch.Size([3]), device=__import__('os'), dtype=torch.float32, is_shared=False)",
        "Tensor(shape=torch.Size([3]), device=cuda:99999, dtype=torch.float32, is_shared=False)",
        "Tensor(shape=torch.Size([3]), device=nodevice, dtype=torch.float32, is_shared=False)",
        "Tensor(shape=torch.Size([2]), device=cpu, dtype=torch.float32, is_shared=False)",
        "Tensor(shape=torch.Size([3, 99999999999999999999]), device=cpu, dtype=torch.float32, is_shared=False)",
    ],
)
def test_parse_hostile_fields(field):
    text = (
        "TensorDict(\n    fields={\n        a: " + field + "},\n    batch_size=torch.Size([3]),\n"
        "    device=None,\n    is_shared=False)"
    )
    td = _parse_or_documented_error(text)
    if td is not None:
        assert td["a"].shape[:1] == (3,)


def test_parse_deep_nesting_is_a_value_error():
    depth = sys.getrecursionlimit() * 2
    text = "TensorDict(\n    fields={\n        k: " * depth
    with pytest.raises(ValueError):
        parse_tensor_dict_string(text)


@pytest.mark.parametrize("value", [None, b"TensorDict(", 3, ["TensorDict("]])
def test_parse_non_string(value):
    with pytest.raises(TypeError):
        parse_tensor_dict_string(value)
