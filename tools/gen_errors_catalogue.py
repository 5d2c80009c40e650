"""Generates ``docs/errors.md``: every bad input the tests try, the error it gets, the message.

Each case is a small function that feeds one bad input to the library and must raise
the error type listed with it. ``tests/test_errors_catalogue.py`` runs every case
(so the catalogue is checked by the test suite) and fails when ``docs/errors.md`` is
not what this script writes.

Usage::

    python tools/gen_errors_catalogue.py           # rewrite docs/errors.md
    python tools/gen_errors_catalogue.py --check   # exit 1 if docs/errors.md is stale

Cases of a distribution that is not installed are skipped (and the file is then not
written: the catalogue covers every distribution).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "errors.md"

#: distribution -> module that must import for its cases to run
DISTS = {
    "td-core": "tensordict",
    "td-memmap": "tensordict.memmap",
    "td-h5": "tensordict.persistent",
    "td-nn": "tensordict.nn",
    "td-tensorclass": "tensordict.tensorclass",
    "td-distributed": "tensordict.distributed",
}


@dataclass
class Case:
    """One bad input: ``fn(tmp)`` must raise ``expected`` (``tmp``: an empty scratch folder)."""

    dist: str
    input: str
    expected: type
    fn: Callable[[Path], object]


CASES: list[Case] = []


def case(dist: str, text: str, expected: type) -> Callable:
    def register(fn: Callable[[Path], object]) -> Callable:
        CASES.append(Case(dist, text, expected, fn))
        return fn

    return register


# ============================================================================ td-core
def _td(**kw):
    import torch

    from tensordict import TensorDict

    return TensorDict({"a": torch.zeros(3, 4), "nested": {"b": torch.ones(3)}}, [3], **kw)


@case("td-core", "`TensorDict({'a': torch.zeros(3)}, batch_size=[4])`", RuntimeError)
def _(tmp):
    import torch

    from tensordict import TensorDict

    return TensorDict({"a": torch.zeros(3)}, batch_size=[4])


@case("td-core", "`TensorDict({1: torch.zeros(3)}, [3])` (a non-str key)", TypeError)
def _(tmp):
    import torch

    from tensordict import TensorDict

    return TensorDict({1: torch.zeros(3)}, [3])


@case("td-core", "`TensorDict({}, batch_size=[-1])`", ValueError)
def _(tmp):
    from tensordict import TensorDict

    return TensorDict({}, batch_size=[-1])


@case("td-core", "`td['missing']`", KeyError)
def _(tmp):
    return _td()["missing"]


@case("td-core", "`td['nested', 'missing']`", KeyError)
def _(tmp):
    return _td()["nested", "missing"]


@case("td-core", "`td['a', 'b']` where `'a'` is a tensor", ValueError)
def _(tmp):
    return _td()["a", "b"]


@case("td-core", "`td.set('c', torch.zeros(2))` with batch_size [3]", RuntimeError)
def _(tmp):
    import torch

    return _td().set("c", torch.zeros(2))


@case("td-core", "`td['c'] = torch.zeros(4, 3)` with batch_size [3]", RuntimeError)
def _(tmp):
    import torch

    td = _td()
    td["c"] = torch.zeros(4, 3)


@case("td-core", "`td.set_('missing', torch.zeros(3))` (in-place write of a missing key)", KeyError)
def _(tmp):
    import torch

    return _td().set_("missing", torch.zeros(3))


@case("td-core", "`td.lock_(); td['new'] = torch.zeros(3)`", RuntimeError)
def _(tmp):
    import torch

    td = _td().lock_()
    td["new"] = torch.zeros(3)


@case("td-core", "`td.lock_(); del td['a']`", RuntimeError)
def _(tmp):
    td = _td().lock_()
    del td["a"]


@case("td-core", "`td.batch_size = [5]` when the leaves start with 3", RuntimeError)
def _(tmp):
    td = _td()
    td.batch_size = [5]


@case("td-core", "`td[5]` with batch_size [3]", IndexError)
def _(tmp):
    return _td()[5]


@case("td-core", "`td[0, 0]` with batch_size [3] (too many indices)", IndexError)
def _(tmp):
    return _td()[0, 0]


@case("td-core", "`td[..., ...]`", IndexError)
def _(tmp):
    return _td()[..., ...]


@case("td-core", "`td[torch.tensor([0.5])]` (a float index tensor)", IndexError)
def _(tmp):
    import torch

    return _td()[torch.tensor([0.5])]


@case("td-core", "`td[torch.tensor([True, False])]` (mask of the wrong length)", IndexError)
def _(tmp):
    import torch

    return _td()[torch.tensor([True, False])]


@case("td-core", "`td.reshape(4)` with batch_size [3]", RuntimeError)
def _(tmp):
    return _td().reshape(4)


@case("td-core", "`td.permute(0, 0)`", ValueError)
def _(tmp):
    return _td().unsqueeze(0).permute(0, 0)


@case("td-core", "`td.unsqueeze(5)` with batch_size [3]", IndexError)
def _(tmp):
    return _td().unsqueeze(5)


@case("td-core", "`td.expand(2)` (fewer dims than the batch size)", RuntimeError)
def _(tmp):
    return _td().unsqueeze(0).expand(2)


@case("td-core", "`td.split([1, 1], 0)` with batch_size [3]", RuntimeError)
def _(tmp):
    return _td().split([1, 1], 0)


@case("td-core", "`torch.stack([td, td_with_other_keys])`", KeyError)
def _(tmp):
    import torch

    from tensordict import TensorDict

    return torch.stack([_td(), TensorDict({"z": torch.zeros(3)}, [3])])


@case("td-core", "`torch.stack([td_bs3, td_bs4])`", RuntimeError)
def _(tmp):
    import torch

    from tensordict import TensorDict

    return torch.stack([TensorDict({"a": torch.zeros(3)}, [3]), TensorDict({"a": torch.zeros(4)}, [4])])


@case("td-core", "`torch.cat([td_bs3, td_bs3x2], 0)` (different number of batch dims)", RuntimeError)
def _(tmp):
    import torch

    from tensordict import TensorDict

    return torch.cat([TensorDict({"a": torch.zeros(3, 2)}, [3]), TensorDict({"a": torch.zeros(3, 2)}, [3, 2])], 0)


@case("td-core", "`td.to('not_a_device')`", RuntimeError)
def _(tmp):
    return _td().to("not_a_device")


@case("td-core", "`td.names = ['x', 'x']` (duplicate dim names)", ValueError)
def _(tmp):
    td = _td().unsqueeze(0)
    td.names = ["x", "x"]


@case("td-core", "`td.names = ['x', 'y']` with one batch dim", ValueError)
def _(tmp):
    td = _td()
    td.names = ["x", "y"]


@case("td-core", "`td.update({'a': torch.zeros(2)})` with batch_size [3]", RuntimeError)
def _(tmp):
    import torch

    return _td().update({"a": torch.zeros(2)})


@case("td-core", "`td.apply(lambda x: x[:1])` (a function that changes the batch dims)", RuntimeError)
def _(tmp):
    return _td().apply(lambda x: x[:1])


@case("td-core", "`td.get(())` (an empty nested key)", ValueError)
def _(tmp):
    return _td().get(())


@case("td-core", "`td.unflatten_keys()` with both `'a'` and `'a.b'` keys", KeyError)
def _(tmp):
    import torch

    from tensordict import TensorDict

    return TensorDict({"a": torch.zeros(3), "a.b": torch.zeros(3)}, [3]).unflatten_keys()


@case("td-core", "`TensorDict.from_dict(3)`", TypeError)
def _(tmp):
    from tensordict import TensorDict

    return TensorDict.from_dict(3)


@case("td-core", "`TensorDict.from_struct_array(np.zeros(3))` (not a structured array)", TypeError)
def _(tmp):
    import numpy as np

    from tensordict import TensorDict

    return TensorDict.from_struct_array(np.zeros(3))


@case("td-core", "`td.to_struct_array()` with a bfloat16 leaf", TypeError)
def _(tmp):
    import torch

    from tensordict import TensorDict

    return TensorDict({"a": torch.zeros(2, dtype=torch.bfloat16)}, [2]).to_struct_array()


@case("td-core", "`td.consolidate()` with a sparse leaf", TypeError)
def _(tmp):
    import torch

    from tensordict import TensorDict

    return TensorDict({"a": torch.eye(3).to_sparse()}, [3]).consolidate()


@case("td-core", "`td.consolidate(filename=...)` with a non-JSON non-tensor value", TypeError)
def _(tmp):
    from tensordict import NonTensorData

    td = _td()
    td["obj"] = NonTensorData(object())
    return td.consolidate(filename=tmp / "c.td")


@case("td-core", "`from_consolidated(path)` of a missing file", FileNotFoundError)
def _(tmp):
    from tensordict import from_consolidated

    return from_consolidated(tmp / "missing.td")


@case("td-core", "`from_consolidated(path)` of a file that is not a consolidated TensorDict", ValueError)
def _(tmp):
    from tensordict import from_consolidated

    (tmp / "x.td").write_bytes(b"PK\x03\x04 not a tensordict")
    return from_consolidated(tmp / "x.td")


@case("td-core", "`from_consolidated(path)` of a truncated file", ValueError)
def _(tmp):
    from tensordict import from_consolidated

    _td().consolidate(filename=tmp / "c.td")
    raw = (tmp / "c.td").read_bytes()
    (tmp / "c.td").write_bytes(raw[: len(raw) - 8])
    return from_consolidated(tmp / "c.td")


@case("td-core", "`from_consolidated(path)` whose metadata names a leaf dtype `object`", ValueError)
def _(tmp):
    from tensordict import from_consolidated

    _td().consolidate(filename=tmp / "c.td")
    raw = (tmp / "c.td").read_bytes().replace(b'"float32"', b'"object!"')
    (tmp / "c.td").write_bytes(raw)
    return from_consolidated(tmp / "c.td")


@case("td-core", "`parse_tensor_dict_string('not a repr')`", ValueError)
def _(tmp):
    from tensordict import parse_tensor_dict_string

    return parse_tensor_dict_string("not a repr")


@case("td-core", "`parse_tensor_dict_string(3)`", TypeError)
def _(tmp):
    from tensordict import parse_tensor_dict_string

    return parse_tensor_dict_string(3)


@case("td-core", "`parse_tensor_dict_string(repr)` with a negative size", ValueError)
def _(tmp):
    from tensordict import parse_tensor_dict_string

    return parse_tensor_dict_string(repr(_td()).replace("[3, 4]", "[-3, 4]"))


@case("td-core", "`lazy_stack([])`", RuntimeError)
def _(tmp):
    from tensordict import lazy_stack

    return lazy_stack([])


@case("td-core", "`lazy_stack([td, td])[:, 0] = other` (write with a mismatched batch size)", RuntimeError)
def _(tmp):
    import torch

    from tensordict import TensorDict, lazy_stack

    s = lazy_stack([_td(), _td()])
    s[:, 0] = TensorDict({"a": torch.zeros(3, 4)}, [3])


@case("td-core", "`TensorDict.from_module('not a module')`", TypeError)
def _(tmp):
    from tensordict import TensorDict

    return TensorDict.from_module("not a module")


@case("td-core", "`td.to_module(nn.Linear(2, 2))` with keys the module lacks", KeyError)
def _(tmp):
    import torch

    from tensordict import TensorDict

    return TensorDict({"nope": torch.zeros(2)}, []).to_module(torch.nn.Linear(2, 2))


@case("td-core", "`td.masked_fill(mask_of_wrong_shape, 0)`", RuntimeError)
def _(tmp):
    import torch

    return _td().masked_fill(torch.tensor([True, False]), 0.0)


@case("td-core", "`td + TensorDict(other keys)`", KeyError)
def _(tmp):
    import torch

    from tensordict import TensorDict

    return TensorDict({"a": torch.zeros(3)}, [3]) + TensorDict({"b": torch.zeros(3)}, [3])


@case("td-core", "`td.load_state_dict({'a': torch.zeros(7)})` (wrong shape)", RuntimeError)
def _(tmp):
    import torch

    from tensordict import TensorDict

    return TensorDict({"a": torch.zeros(3)}, []).load_state_dict({"a": torch.zeros(7)})


# ============================================================================ td-memmap
@case("td-memmap", "`load_memmap(path)` of a path that does not exist", FileNotFoundError)
def _(tmp):
    from tensordict.memmap import load_memmap

    return load_memmap(tmp / "never_saved")


@case("td-memmap", "`load_memmap(path)` whose `meta.json` is not JSON", RuntimeError)
def _(tmp):
    from tensordict.memmap import load_memmap

    _td().memmap(tmp / "s")
    (tmp / "s" / "meta.json").write_text("{not json")
    return load_memmap(tmp / "s")


@case("td-memmap", "`load_memmap(path)` with a data file cut short", RuntimeError)
def _(tmp):
    from tensordict.memmap import load_memmap

    _td().memmap(tmp / "s")
    with open(tmp / "s" / "a.memmap", "r+b") as f:
        f.truncate(5)
    return load_memmap(tmp / "s")


@case("td-memmap", "`load_memmap(path)` whose metadata names a file outside the store", RuntimeError)
def _(tmp):
    from tensordict.memmap import load_memmap

    _td().memmap(tmp / "s")
    meta = json.loads((tmp / "s" / "meta.json").read_text())
    meta["entries"][0]["file"] = "../../etc/passwd"
    (tmp / "s" / "meta.json").write_text(json.dumps(meta))
    return load_memmap(tmp / "s")


@case("td-memmap", "`load_memmap(path)` with a data file that is a link outside the store", RuntimeError)
def _(tmp):
    from tensordict.memmap import load_memmap

    _td().memmap(tmp / "s")
    (tmp / "outside.bin").write_bytes(b"\0" * 48)
    os.remove(tmp / "s" / "a.memmap")
    os.symlink(tmp / "outside.bin", tmp / "s" / "a.memmap")
    return load_memmap(tmp / "s")


@case("td-memmap", "`load_memmap(path)` whose metadata names dtype `'object'`", RuntimeError)
def _(tmp):
    from tensordict.memmap import load_memmap

    _td().memmap(tmp / "s")
    meta = json.loads((tmp / "s" / "meta.json").read_text())
    meta["entries"][0]["dtype"] = "object"
    (tmp / "s" / "meta.json").write_text(json.dumps(meta))
    return load_memmap(tmp / "s")


@case("td-memmap", "`load_memmap(path)` of a store holding a pickled value, without `allow_pickle=True`",
      RuntimeError)
def _(tmp):
    from tensordict import NonTensorData
    from tensordict.memmap import load_memmap

    td = _td()
    td["obj"] = NonTensorData((1, 2))  # a tuple is not JSON-faithful: pickled
    td.memmap(tmp / "s")
    return load_memmap(tmp / "s")


@case("td-memmap", "`load_memmap(path)` of a store whose save was interrupted", RuntimeError)
def _(tmp):
    from tensordict.memmap import load_memmap

    staging = tmp / ".s.td-tmp-999999-dead"
    staging.mkdir()
    (staging / "a.memmap").write_bytes(b"\0" * 8)
    return load_memmap(tmp / "s")


@case("td-memmap", "`td.memmap(prefix)` where `prefix` is an existing file", RuntimeError)
def _(tmp):
    (tmp / "file").write_text("x")
    return _td().memmap(tmp / "file")


@case("td-memmap", "`td.memmap(prefix, existsok=False)` over an earlier store", RuntimeError)
def _(tmp):
    _td().memmap(tmp / "s")
    return _td().memmap(tmp / "s", existsok=False)


@case("td-memmap", "`td.memmap(prefix)` with a non-picklable non-tensor value", TypeError)
def _(tmp):
    from tensordict import NonTensorData

    td = _td()
    td["f"] = NonTensorData(lambda: None)
    return td.memmap(tmp / "s")


@case("td-memmap", "`td.memmap(prefix)` with a sparse tensor", TypeError)
def _(tmp):
    import torch

    from tensordict import TensorDict

    return TensorDict({"a": torch.eye(3).to_sparse()}, [3]).memmap(tmp / "s")


@case("td-memmap", "`MemoryMappedTensor.from_filename(path, dtype, shape)` of a missing file", FileNotFoundError)
def _(tmp):
    import torch

    from tensordict.memmap import MemoryMappedTensor

    return MemoryMappedTensor.from_filename(tmp / "missing.memmap", torch.float32, (3,))


@case("td-memmap", "`memmap_refresh_()` on a TensorDict never saved to a folder", RuntimeError)
def _(tmp):
    return _td().memmap_refresh_()


# ============================================================================ td-h5
def _h5(tmp):
    path = tmp / "d.h5"
    _td().to_h5(path).close()
    return path


@case("td-h5", "`from_h5(path)` of a missing file", FileNotFoundError)
def _(tmp):
    from tensordict.persistent import from_h5

    return from_h5(tmp / "missing.h5")


@case("td-h5", "`from_h5(path)` of a file that is not HDF5", ValueError)
def _(tmp):
    from tensordict.persistent import from_h5

    (tmp / "x.h5").write_bytes(b"hello, not hdf5")
    return from_h5(tmp / "x.h5")


@case("td-h5", "`to_h5(path)` of a lazy stack whose TensorDicts hold different keys", ValueError)
def _(tmp):
    import torch

    from tensordict import TensorDict, lazy_stack

    stack = lazy_stack([TensorDict(a=torch.zeros(2), b=torch.ones(2)), TensorDict(a=torch.ones(2))])
    return stack.to_h5(tmp / "x.h5")


@case("td-h5", "`from_h5(path, mode='q')`", ValueError)
def _(tmp):
    from tensordict.persistent import from_h5

    return from_h5(_h5(tmp), mode="q")


@case("td-h5", "`ptd['new'] = tensor` on a file opened with mode 'r'", RuntimeError)
def _(tmp):
    import torch

    from tensordict.persistent import from_h5

    with from_h5(_h5(tmp)) as ptd:
        ptd["new"] = torch.zeros(3)


@case("td-h5", "`ptd['a/b'] = tensor` (a key with '/')", ValueError)
def _(tmp):
    import torch

    from tensordict.persistent import from_h5

    with from_h5(_h5(tmp), mode="r+") as ptd:
        ptd["a/b"] = torch.zeros(3)


@case("td-h5", "`ptd['_td_batch_size'] = tensor` (a reserved name)", ValueError)
def _(tmp):
    import torch

    from tensordict.persistent import from_h5

    with from_h5(_h5(tmp), mode="r+") as ptd:
        ptd["_td_batch_size"] = torch.zeros(3)


@case("td-h5", "`ptd['a'] = torch.zeros(5, 4)` with batch_size [3]", RuntimeError)
def _(tmp):
    import torch

    from tensordict.persistent import from_h5

    with from_h5(_h5(tmp), mode="r+") as ptd:
        ptd["a"] = torch.zeros(5, 4)


@case("td-h5", "`td.to_h5(path)` with a non-storable non-tensor value", TypeError)
def _(tmp):
    from tensordict import NonTensorData

    td = _td()
    td["obj"] = NonTensorData(object())
    return td.to_h5(tmp / "x.h5")


@case("td-h5", "`ptd['a']` after `ptd.close()`", RuntimeError)
def _(tmp):
    from tensordict.persistent import from_h5

    ptd = from_h5(_h5(tmp))
    ptd.close()
    return ptd["a"]


@case("td-h5", "`from_h5(path, batch_size=[7])` when the datasets start with 3", RuntimeError)
def _(tmp):
    from tensordict.persistent import PersistentTensorDict

    return PersistentTensorDict.from_h5(_h5(tmp), batch_size=[7])


# ============================================================================ td-nn
@case("td-nn", "`TensorDictModule(nn.Linear(3, 4), in_keys=['x'], out_keys=['y', 'y'])`", ValueError)
def _(tmp):
    from torch import nn

    from tensordict.nn import TensorDictModule

    return TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["y", "y"])


@case("td-nn", "`TensorDictModule(nn.Linear(3, 4), in_keys='x', out_keys=3)`", TypeError)
def _(tmp):
    from torch import nn

    from tensordict.nn import TensorDictModule

    return TensorDictModule(nn.Linear(3, 4), in_keys="x", out_keys=3)


@case("td-nn", "`TensorDictModule('not callable', in_keys=['x'], out_keys=['y'])`", TypeError)
def _(tmp):
    from tensordict.nn import TensorDictModule

    return TensorDictModule("not callable", in_keys=["x"], out_keys=["y"])


@case("td-nn", "`module(td)` when `td` lacks an in_key", KeyError)
def _(tmp):
    import torch
    from torch import nn

    from tensordict import TensorDict
    from tensordict.nn import TensorDictModule

    m = TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["y"])
    return m(TensorDict({"z": torch.zeros(2, 3)}, [2]))


@case("td-nn", "`module(td)` where the module returns 1 tensor for 2 out_keys", ValueError)
def _(tmp):
    import torch
    from torch import nn

    from tensordict import TensorDict
    from tensordict.nn import TensorDictModule

    m = TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["y", "z"])
    return m(TensorDict({"x": torch.zeros(2, 3)}, [2]))


@case("td-nn", "`TensorDictModule(nn.Linear(3, 4), in_keys=[1], out_keys=['y'])` (a non-str key)", TypeError)
def _(tmp):
    from torch import nn

    from tensordict.nn import TensorDictModule

    return TensorDictModule(nn.Linear(3, 4), in_keys=[1], out_keys=["y"])


@case("td-nn", "`module(td)` where the module's output does not start with the batch size", RuntimeError)
def _(tmp):
    import torch

    from tensordict import TensorDict
    from tensordict.nn import TensorDictModule

    m = TensorDictModule(lambda x: x.sum(0), in_keys=["x"], out_keys=["y"])
    return m(TensorDict({"x": torch.zeros(2, 5)}, [2]))


@case("td-nn", "`TensorDictParams(3)` (not a TensorDict)", TypeError)
def _(tmp):
    from tensordict.nn import TensorDictParams

    return TensorDictParams(3)


# ============================================================================ td-tensorclass
def _record_cls():
    import torch

    from tensordict import TensorClass

    class Record(TensorClass):
        a: torch.Tensor
        label: str = "x"

    Record.__qualname__ = "Record"
    return Record


@case("td-tensorclass", "`Record(batch_size=[3])` (a field without default is missing)", TypeError)
def _(tmp):
    return _record_cls()(batch_size=[3])


@case("td-tensorclass", "`Record(a=t, b=1, batch_size=[3])` (an unknown field)", TypeError)
def _(tmp):
    import torch

    return _record_cls()(a=torch.zeros(3), b=1, batch_size=[3])


@case("td-tensorclass", "`Record(a=torch.zeros(4), batch_size=[3])`", RuntimeError)
def _(tmp):
    import torch

    return _record_cls()(a=torch.zeros(4), batch_size=[3])


@case("td-tensorclass", "`rec.not_a_field = 1`", AttributeError)
def _(tmp):
    import torch

    rec = _record_cls()(a=torch.zeros(3), batch_size=[3])
    rec.not_a_field = 1


@case("td-tensorclass", "`Record.from_tensordict(TensorDict({'zz': ...}))` (keys that are not fields)", KeyError)
def _(tmp):
    import torch

    from tensordict import TensorDict

    return _record_cls().from_tensordict(TensorDict({"zz": torch.zeros(2)}, [2]))


@case("td-tensorclass", "`Record.from_tensordict({'a': t})` (a dict, not a TensorDict)", TypeError)
def _(tmp):
    import torch

    return _record_cls().from_tensordict({"a": torch.zeros(2)})


@case("td-tensorclass", "`@tensorclass(frozen=True)` instance: `rec.a = t`", AttributeError)
def _(tmp):
    import torch

    from tensordict import tensorclass

    @tensorclass(frozen=True)
    class Frozen:
        a: torch.Tensor

    rec = Frozen(a=torch.zeros(3), batch_size=[3])
    rec.a = torch.ones(3)


# ============================================================================ td-distributed
@case("td-distributed", "`td.send(dst=1)` without `torch.distributed.init_process_group`", RuntimeError)
def _(tmp):
    return _td().send(1)


@case("td-distributed", "`td.all_reduce()` without a process group", RuntimeError)
def _(tmp):
    return _td().all_reduce()


@case("td-distributed", "`td.map(fn, num_workers=0)`", ValueError)
def _(tmp):
    return _td().map(lambda x: x, num_workers=0)


# ============================================================================ hostile inputs (issue 19)
@case("td-core", "`td.set('me', td)` (a TensorDict set into itself, or into one it contains)", ValueError)
def _(tmp):
    td = _td()
    return td.set("me", td)


@case("td-core", "`from_consolidated(path)` where `path` is a folder", FileNotFoundError)
def _(tmp):
    from tensordict import from_consolidated

    return from_consolidated(tmp)


@case("td-core", "`from_consolidated(path)` where `path` is a FIFO", ValueError)
def _(tmp):
    from tensordict import from_consolidated

    os.mkfifo(tmp / "fifo")
    return from_consolidated(tmp / "fifo")


@case("td-core", "`from_consolidated(path)` whose metadata gives a leaf shape beyond int64", ValueError)
def _(tmp):
    import struct

    from tensordict import from_consolidated

    _td().consolidate(filename=tmp / "c.bin")
    raw = (tmp / "c.bin").read_bytes()
    head = struct.Struct("<8sIQ")
    _magic, _version, meta_len = head.unpack(raw[: head.size])
    meta = json.loads(raw[head.size : head.size + meta_len])
    meta["leaves"][0]["shape"] = [2**70]
    new = json.dumps(meta).encode()
    (tmp / "c.bin").write_bytes(head.pack(_magic, _version, len(new)) + new + raw[head.size + meta_len :])
    return from_consolidated(tmp / "c.bin")


@case("td-core", "`parse_tensor_dict_string(s)` with a batch size beyond int64", ValueError)
def _(tmp):
    from tensordict import parse_tensor_dict_string

    return parse_tensor_dict_string(
        "TensorDict(\n    fields={},\n    batch_size=torch.Size([" + str(2**70) + "]),\n    device=None,\n"
        "    is_shared=False)"
    )


def _meta_of(path):
    return json.loads((path / "meta.json").read_text())


@case("td-memmap", "`load_memmap(path)` whose `meta.json` has a batch size beyond int64", RuntimeError)
def _(tmp):
    from tensordict.memmap import load_memmap

    _td().memmap(tmp / "s")
    meta = _meta_of(tmp / "s")
    meta["batch_size"] = [2**70]
    (tmp / "s" / "meta.json").write_text(json.dumps(meta))
    return load_memmap(tmp / "s")


@case("td-memmap", "`load_memmap(path)` whose `meta.json` nests 500 levels deep (valid JSON)", RuntimeError)
def _(tmp):
    from tensordict.memmap import load_memmap

    _td().memmap(tmp / "s")
    (tmp / "s" / "meta.json").write_text("[" * 500 + "]" * 500)
    return load_memmap(tmp / "s")


@case("td-memmap", "`load_memmap(path)` whose metadata names one sub-folder under several keys", RuntimeError)
def _(tmp):
    from tensordict.memmap import load_memmap

    _td().memmap(tmp / "s")
    meta = _meta_of(tmp / "s")
    meta["entries"].append({"key": "again", "kind": "tensordict", "dir": "nested"})
    (tmp / "s" / "meta.json").write_text(json.dumps(meta))
    return load_memmap(tmp / "s")


@case("td-memmap", "`load_memmap(path)` whose registered type has a list as `extra.class`", RuntimeError)
def _(tmp):
    from tensordict.memmap import load_memmap
    from tensordict.tensorclass import tensorclass

    @tensorclass
    class Point:
        x: object

    import torch

    Point(x=torch.zeros(2), batch_size=[2]).memmap(tmp / "s")
    meta = _meta_of(tmp / "s")
    meta["registered"]["extra"]["class"] = ["not", "a", "name"]
    (tmp / "s" / "meta.json").write_text(json.dumps(meta))
    return load_memmap(tmp / "s")


@case("td-memmap", "`MemoryMappedTensor.from_filename(path, dtype='float32', shape=(2,))` (a str dtype)", TypeError)
def _(tmp):
    import torch

    from tensordict import MemoryMappedTensor

    MemoryMappedTensor.from_tensor(torch.zeros(2), filename=tmp / "x.memmap")
    return MemoryMappedTensor.from_filename(tmp / "x.memmap", dtype="float32", shape=(2,))


@case("td-memmap", "`MemoryMappedTensor.from_filename(path, torch.uint8, (0, 2**64))`", ValueError)
def _(tmp):
    import torch

    from tensordict import MemoryMappedTensor

    MemoryMappedTensor.from_tensor(torch.zeros(2), filename=tmp / "x.memmap")
    return MemoryMappedTensor.from_filename(tmp / "x.memmap", torch.uint8, (0, 2**64))


@case("td-memmap", "`MemoryMappedTensor.empty((2.5,))` (a float dimension)", TypeError)
def _(tmp):
    from tensordict import MemoryMappedTensor

    return MemoryMappedTensor.empty((2.5,))


@case("td-memmap", "`MemoryMappedTensor.from_tensor(t, filename=link, existsok=True)` where `link` is a symlink",
      RuntimeError)
def _(tmp):
    import torch

    from tensordict import MemoryMappedTensor

    (tmp / "target").write_bytes(b"unchanged")
    os.symlink(tmp / "target", tmp / "link.memmap")
    return MemoryMappedTensor.from_tensor(torch.zeros(2), filename=tmp / "link.memmap", existsok=True)


@case("td-memmap", "`MemoryMappedTensor.from_tensor(t, filename=other)` where `t` maps another file", RuntimeError)
def _(tmp):
    import torch

    from tensordict import MemoryMappedTensor

    t = MemoryMappedTensor.from_tensor(torch.zeros(2), filename=tmp / "a.memmap")
    return MemoryMappedTensor.from_tensor(t, filename=tmp / "b.memmap")


@case("td-memmap", "`td.save(folder, compression='deflate')` (compression without an archive)", ValueError)
def _(tmp):
    return _td().save(tmp / "plain", compression="deflate")


@case("td-memmap", "`load_memmap(path)` of a `.tdz` file that is not a zip", ValueError)
def _(tmp):
    from tensordict.memmap import load_memmap

    (tmp / "bad.tdz").write_bytes(b"not a zip file")
    return load_memmap(tmp / "bad.tdz")


@case("td-memmap", "`load_memmap(path, subpath='no/such')`", ValueError)
def _(tmp):
    from tensordict.memmap import load_memmap

    _td().memmap(tmp / "s")
    return load_memmap(tmp / "s", subpath="no/such")


@case("td-h5", "`from_h5(path)` whose `_td_batch_size` attribute is beyond int64", ValueError)
def _(tmp):
    import h5py
    import numpy as np

    from tensordict.persistent import PersistentTensorDict

    with h5py.File(tmp / "u.h5", "w") as f:
        f.attrs["_td_batch_size"] = np.array([2**64 - 1], dtype=np.uint64)
        f["x"] = np.arange(3)
    with PersistentTensorDict.from_h5(tmp / "u.h5") as p:
        return p.batch_size


@case("td-h5", "`td.to_h5(path)` while `path` is open for writing (here by h5py in this process)", BlockingIOError)
def _(tmp):
    import h5py

    with h5py.File(tmp / "w.h5", "w") as f:
        f["x"] = [1, 2, 3]
        return _td().to_h5(tmp / "w.h5")


# ============================================================================ running
_TMP_RE = re.compile(r"(/private)?/tmp/[^\s'\"]*?td-errors-[A-Za-z0-9_]+")
_ADDR_RE = re.compile(r"0x[0-9a-fA-F]{6,}")
_PID_RE = re.compile(r"td-tmp-\d+-[0-9a-f]+")
_LAMBDA_RE = re.compile(r"<function [^>]*>")


def normalize(message: str, tmp: str) -> str:
    """Makes a message independent of the run: scratch paths, addresses, pids."""
    message = message.replace(os.path.realpath(tmp), "<tmp>").replace(tmp, "<tmp>")
    message = _TMP_RE.sub("<tmp>", message)
    message = _ADDR_RE.sub("0x…", message)
    message = _PID_RE.sub("td-tmp-<pid>-<id>", message)
    message = _LAMBDA_RE.sub("<function>", message)
    return " ".join(message.split())


@dataclass
class Result:
    case: Case
    error: BaseException | None
    message: str
    skipped: str | None = None

    @property
    def ok(self) -> bool:
        return self.skipped is None and isinstance(self.error, self.case.expected)


def available(dist: str) -> bool:
    try:
        importlib.import_module(DISTS[dist])
    except ImportError:
        return False
    return True


def run_case(c: Case) -> Result:
    """Runs one case in a fresh scratch folder; returns what it raised."""
    if not available(c.dist):
        return Result(c, None, "", skipped=f"{c.dist} is not installed")
    import warnings

    with tempfile.TemporaryDirectory(prefix="td-errors-") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            c.fn(Path(tmp))
        except Exception as err:  # the point: record whatever it raised
            text = err.args[0] if isinstance(err, KeyError) and len(err.args) == 1 else str(err)
            return Result(c, err, normalize(str(text) or repr(err), tmp))
    return Result(c, None, "(no error raised)")


def run_all() -> list[Result]:
    return [run_case(c) for c in CASES]


def error_name(err: BaseException | None) -> str:
    """``KeyError``, or ``FrozenInstanceError (AttributeError)`` for a subclass of a built-in error."""
    if err is None:
        return "(none)"
    cls = type(err)
    builtin = next(k for k in cls.__mro__ if k.__module__ == "builtins")
    if builtin is cls:
        return cls.__name__
    if cls.__name__.startswith("_"):
        return builtin.__name__
    return f"{cls.__name__} ({builtin.__name__})"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(results: list[Result]) -> str:
    lines = [
        "# Error catalogue",
        "",
        "<!-- generated by tools/gen_errors_catalogue.py; do not edit by hand -->",
        "",
        "Every bad input below is tried by the test suite (`tests/test_errors_catalogue.py`),",
        "which checks the error type. Search this page for a message you got to find what",
        "causes it. Paths are shown as `<tmp>`.",
        "",
        f"{len(results)} bad inputs across {len({r.case.dist for r in results})} distributions.",
        "",
    ]
    for dist in DISTS:
        rows = [r for r in results if r.case.dist == dist]
        if not rows:
            continue
        lines += [f"## {dist}", "", "| # | bad input | error | message |", "|---|---|---|---|"]
        for i, r in enumerate(rows, 1):
            name = error_name(r.error)
            message = _cell(r.message).replace("<", "&lt;").replace(">", "&gt;")  # not raw HTML
            lines.append(f"| {i} | {_cell(r.case.input)} | {name} | {message} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/errors.md is stale")
    args = parser.parse_args(argv)
    results = run_all()
    skipped = sorted({r.skipped for r in results if r.skipped})
    if skipped:
        print("cannot build the catalogue: " + "; ".join(skipped), file=sys.stderr)
        return 2
    bad = [r for r in results if not r.ok]
    for r in bad:
        got = type(r.error).__name__ if r.error is not None else "no error"
        print(f"[{r.case.dist}] {r.case.input}: expected {r.case.expected.__name__}, got {got}: {r.message}",
              file=sys.stderr)
    text = render(results)
    if args.check:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT} is stale: run python tools/gen_errors_catalogue.py", file=sys.stderr)
            return 1
        return 1 if bad else 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT} ({len(results)} cases, {len(bad)} with an unexpected error)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
