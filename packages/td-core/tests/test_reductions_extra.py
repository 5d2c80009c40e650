"""quantile, out= on reductions, cummin / cummax, apply(named=...)."""

import pytest
import torch

from tensordict import TensorDict


def make():
    return TensorDict(
        {"a": torch.randn(3, 4, 5), "b": TensorDict({"c": torch.randn(3, 4, 5, 6)}, [3, 4, 5])}, [3, 4]
    )


def test_quantile_forms():
    td = make()
    q = td.quantile(0.5)
    assert q.batch_size == () and torch.allclose(q["a"], td["a"].quantile(0.5))
    assert torch.allclose(td.quantile(0.5, dim=0)["b", "c"], td["b", "c"].quantile(0.5, dim=0))
    assert td.quantile(0.5, dim=0, keepdim=True)["a"].shape == (1, 4, 5)
    assert td.quantile(0.5, dim="feature")["a"].shape == (3, 4)
    expected = td["b", "c"].permute(2, 3, 0, 1).reshape(5, 6, -1).quantile(0.25, dim=-1)
    assert torch.allclose(td.quantile(0.25, dim=(0, 1))["b", "c"], expected)
    assert td.quantile(0.5, dim=(0, 1), keepdim=True)["b", "c"].shape == (1, 1, 5, 6)
    assert td.quantile(torch.tensor([0.25, 0.75]), dim=0)["a"].shape == (2, 4, 5)
    assert td.quantile(0.5, reduce=True).shape == ()
    ints = TensorDict({"i": torch.arange(5)}, [5])
    assert ints.quantile(0.5)["i"] == 2.0


def test_reduction_out():
    td = make()
    out = td.logsumexp(dim=1).empty()
    res = td.logsumexp(dim=1, out=out)
    assert res is out and set(out.keys(True, True)) == {"a", ("b", "c")}
    a = out["a"]
    td.sum(dim=1, out=out)
    assert out["a"] is a and torch.allclose(a, td["a"].sum(1))
    t = torch.empty(())
    assert td.mean(reduce=True, out=t) is t
    mm = td.max(dim=0, return_indices=True)
    res = td.min(dim=0, return_indices=True, out=(mm.values, mm.indices))
    assert torch.equal(res[0]["a"], td["a"].min(0).values)


@pytest.mark.parametrize("name", ["cummin", "cummax"])
def test_cummin_cummax(name):
    td = make()
    r = getattr(td, name)(1)
    assert isinstance(r, getattr(torch.return_types, name))
    ref = getattr(torch, name)(td["b", "c"], 1)
    assert torch.equal(r.values["b", "c"], ref.values) and torch.equal(r.indices["b", "c"], ref.indices)
    assert r.values.batch_size == td.batch_size and r.values["b"].batch_size == (3, 4, 5)
    v = getattr(td, name)(-1, return_indices=False)
    assert torch.equal(v["a"], getattr(torch, name)(td["a"], 1).values)
    with pytest.raises(IndexError):
        getattr(td, name)(2)


def test_apply_named_keywords():
    td = make()
    seen = []
    td.apply(lambda k, x: seen.append(k), named=True, nested_keys=True, num_threads=2)
    assert seen == ["a", ("b", "c")]
    out = td.apply(lambda x: x + 1, num_threads=4, checked=False)
    assert torch.allclose(out["a"], td["a"] + 1)
    assert td._fast_apply(lambda k, x: x * 0, named=True)["a"].abs().sum() == 0
