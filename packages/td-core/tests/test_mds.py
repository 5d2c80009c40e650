"""td.to_mds: MosaicML Streaming datasets written from TensorDicts, read back with streaming.

Runs in the ``mds`` nox session (mosaicml-streaming pins an older numpy, so it is kept out of
the other environments); skips where ``streaming`` cannot be imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import warnings

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict


def _import_streaming():
    """``streaming.base`` (MDSWriter, LocalDataset), or the reason it cannot be imported.

    ``import streaming`` also imports its dataset zoo (``streaming.vision``, which needs a
    torchvision built for the installed torch; the index's wheels are CUDA builds that do not
    load with the project's CPU-only torch). When only that fails, the package is loaded
    without its ``__init__`` so that the real writer and reader in ``streaming.base`` run.
    """
    try:
        return importlib.import_module("streaming.base"), None
    except Exception as err:  # noqa: BLE001  (torchvision raises RuntimeError, not ImportError)
        first = err
    spec = importlib.util.find_spec("streaming")
    if spec is None:
        return None, repr(first)
    for name in [m for m in sys.modules if m == "streaming" or m.startswith("streaming.")]:
        del sys.modules[name]
    sys.modules["streaming"] = importlib.util.module_from_spec(spec)
    try:
        return importlib.import_module("streaming.base"), None
    except Exception as err:  # noqa: BLE001
        del sys.modules["streaming"]
        return None, f"{first!r}; streaming.base: {err!r}"


streaming, _WHY = _import_streaming()
pytestmark = pytest.mark.skipif(streaming is None, reason=f"mosaicml-streaming is not importable here: {_WHY}")


def _read(folder) -> list:
    reader = streaming.LocalDataset(local=str(folder))
    return [reader[i] for i in range(len(reader))]


def test_rows_become_samples(tmp_path):
    td = TensorDict(
        obs=torch.arange(6.0).reshape(3, 2), step=torch.arange(3), name=["a", "b", "c"], meta={"k": 1}, batch_size=[3],
    )
    td = td.exclude("meta").set("tag", "run-1")
    td.to_mds(out=str(tmp_path / "ds"))
    samples = _read(tmp_path / "ds")
    assert len(samples) == 3
    assert samples[1]["obs"].tolist() == [2.0, 3.0] and samples[2]["step"] == 2
    assert samples[0]["name"] == "a" and samples[2]["tag"] == "run-1"


def test_compression_columns_and_unbatched(tmp_path):
    td = TensorDict(x=torch.ones(2, 3), label=torch.tensor([0, 1]), batch_size=[2])
    td.to_mds(out=str(tmp_path / "c"), columns={"label": "int64"})
    samples = _read(tmp_path / "c")
    assert samples[1]["label"] == 1 and samples[0]["x"].shape == (3,)
    td.to_mds(out=str(tmp_path / "z"), compression="zstd", size_limit=None)
    index = json.loads((tmp_path / "z" / "index.json").read_text())
    assert index["shards"][0]["compression"].startswith("zstd") and index["shards"][0]["samples"] == 2
    TensorDict(x=torch.ones(3)).to_mds(out=str(tmp_path / "one"))  # no batch dims: one sample
    assert len(_read(tmp_path / "one")) == 1


def test_lazy_stack_of_ragged_rows(tmp_path):
    td = LazyStackedTensorDict(
        TensorDict(a=0, c=torch.zeros(2), d="a string"), TensorDict(a=1, c=torch.zeros(3), d="another string"),
    )
    td.to_mds(out=str(tmp_path / "lazy"))
    samples = _read(tmp_path / "lazy")
    assert [s["c"].shape for s in samples] == [(2,), (3,)] and samples[1]["d"] == "another string"


def test_writer_passed_in(tmp_path):
    writer = streaming.MDSWriter(out=str(tmp_path / "w"), columns={"x": "ndarray"})
    TensorDict(x=torch.zeros(2)).to_mds(out=None, writer=writer)  # no batch dims: left open
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TensorDict(x=torch.ones(2, 2), batch_size=[2]).to_mds(out=None, writer=writer, finish_writer=True)
    assert len(_read(tmp_path / "w")) == 3


def test_bad_input(tmp_path):
    with pytest.raises(ValueError, match="no entries"):
        TensorDict(batch_size=[2]).to_mds(out=str(tmp_path / "e"))
    with pytest.raises(ValueError, match="flatten_keys"):
        TensorDict(n={"x": torch.zeros(2)}, batch_size=[2]).to_mds(out=str(tmp_path / "n"))
    with pytest.raises(TypeError, match="pkl"):
        TensorDict(o=[object(), object()], batch_size=[2]).to_mds(out=str(tmp_path / "o"))
