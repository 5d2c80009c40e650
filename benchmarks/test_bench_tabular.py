"""Tables and files in and out, next to the same work written by hand.

Each group has a ``_td`` case (tensordict's function) and a ``_dict`` baseline (the
hand-written equivalent on a plain dict of tensors); ``benchmarks/report.py`` prints the
ratios. Targets (issue 30): ``from_arrow`` <= 1.2x of ``torch.from_numpy(col.to_numpy())``
per column, ``to_arrow``/``to_pandas`` <= 1.2x of the hand-written table, and
``to_safetensors``/``from_safetensors`` <= 1.1x of ``safetensors.torch.save_file`` /
``load_file`` on the flattened dict.

Data: 1,000,000 rows of 10 numeric columns (float64, float32, int64, int32 mixed), and for
safetensors a TensorDict of 20 leaves (two levels, 4 MB each, 80 MB in all).
"""

import numpy as np
import pytest
import torch

from tensordict import TensorDict, from_arrow, from_safetensors, to_arrow, to_safetensors

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")
st = pytest.importorskip("safetensors.torch")

ROWS = 1_000_000
DTYPES = [np.float64, np.float32, np.int64, np.int32, np.float64, np.float32, np.int64, np.int32, np.float64, np.float32]


def bench(group):
    return pytest.mark.benchmark(group=group)


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    return pa.table({f"c{i}": (rng.random(ROWS) * 100).astype(dt) for i, dt in enumerate(DTYPES)})


@pytest.fixture(scope="module")
def td(table):
    return from_arrow(table, copy=True)


@bench("tabular: from_arrow, 1M rows x 10 columns")
def test_from_arrow_td(benchmark, table):
    out = benchmark(from_arrow, table)
    assert out.batch_size == torch.Size([ROWS])
    assert out["c0"].data_ptr() == table.column("c0").chunk(0).buffers()[1].address  # zero-copy


@bench("tabular: from_arrow, 1M rows x 10 columns")
def test_from_arrow_dict(benchmark, table):
    def by_hand():
        return {name: torch.from_numpy(col.to_numpy()) for name, col in zip(table.column_names, table.columns)}

    out = benchmark(by_hand)
    assert len(out) == 10


@bench("tabular: to_arrow, 1M rows x 10 columns")
def test_to_arrow_td(benchmark, td):
    out = benchmark(to_arrow, td)
    assert out.num_rows == ROWS


@bench("tabular: to_arrow, 1M rows x 10 columns")
def test_to_arrow_dict(benchmark, td):
    d = td.to_dict()

    def by_hand():
        return pa.table({k: pa.array(v.numpy()) for k, v in d.items()})

    out = benchmark(by_hand)
    assert out.num_rows == ROWS


@bench("tabular: to_pandas, 1M rows x 10 columns")
def test_to_pandas_td(benchmark, td):
    out = benchmark(td.to_pandas)
    assert len(out) == ROWS


@bench("tabular: to_pandas, 1M rows x 10 columns")
def test_to_pandas_dict(benchmark, td):
    d = td.to_dict()

    def by_hand():
        return pd.DataFrame({k: v.numpy() for k, v in d.items()})

    out = benchmark(by_hand)
    assert len(out) == ROWS


# ---------------------------------------------------------------------- safetensors
@pytest.fixture(scope="module")
def weights():
    return TensorDict({f"layer{i}": {f"w{j}": torch.randn(1024, 1024) for j in range(2)} for i in range(10)}, [])


@bench("safetensors: save, 20 leaves of 4 MB")
def test_to_safetensors_td(benchmark, weights, tmp_path):
    benchmark(to_safetensors, weights, tmp_path / "td.safetensors")


@bench("safetensors: save, 20 leaves of 4 MB")
def test_to_safetensors_dict(benchmark, weights, tmp_path):
    flat = {".".join(k): v for k, v in weights.items(True, True)}
    benchmark(st.save_file, flat, str(tmp_path / "d.safetensors"))


@bench("safetensors: load, 20 leaves of 4 MB")
def test_from_safetensors_td(benchmark, weights, tmp_path):
    to_safetensors(weights, tmp_path / "td.safetensors")
    out = benchmark(from_safetensors, tmp_path / "td.safetensors")
    assert torch.equal(out["layer0", "w0"], weights["layer0", "w0"])


@bench("safetensors: load, 20 leaves of 4 MB")
def test_from_safetensors_dict(benchmark, weights, tmp_path):
    st.save_file({".".join(k): v for k, v in weights.items(True, True)}, str(tmp_path / "d.safetensors"))
    out = benchmark(st.load_file, str(tmp_path / "d.safetensors"))
    assert len(out) == 20
