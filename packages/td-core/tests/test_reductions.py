"""Reductions: each compared with the same torch reduction applied leaf by leaf."""

import pytest
import torch

from tensordict import NonTensorData, TensorDict


def make_td(device="cpu"):
    g = torch.Generator().manual_seed(1)
    return TensorDict(
        {
            "a": torch.randn(3, 4, generator=g).to(device),
            "b": {
                "c": torch.randn(3, 4, 2, generator=g).to(device),
                "d": TensorDict({"e": torch.randn(3, 4, 5, 6, generator=g).to(device)}, [3, 4, 5]),
            },
            "s": NonTensorData("meta", batch_size=[3, 4]),
        },
        batch_size=[3, 4],
        device=device,
    )


def tensor_items(td):
    return {k: v for k, v in td.items(True, True) if isinstance(v, torch.Tensor)}


def check(out, td, fn, batch_size):
    assert out.batch_size == torch.Size(batch_size)
    for key, value in tensor_items(td).items():
        torch.testing.assert_close(
            out[key], fn(value), equal_nan=True, msg=lambda m, k=key: f"{k}: {m}"
        )
    assert out["s"] == "meta"


REDUCTIONS = {
    "sum": lambda x, dim, keepdim: x.sum(dim=dim, keepdim=keepdim) if dim is not None else x.sum(),
    "nansum": lambda x, dim, keepdim: (
        x.nansum(dim=dim, keepdim=keepdim) if dim is not None else x.nansum()
    ),
    "mean": lambda x, dim, keepdim: (
        x.mean(dim=dim, keepdim=keepdim) if dim is not None else x.mean()
    ),
    "nanmean": lambda x, dim, keepdim: (
        x.nanmean(dim=dim, keepdim=keepdim) if dim is not None else x.nanmean()
    ),
    "std": lambda x, dim, keepdim: x.std(dim=dim, keepdim=keepdim) if dim is not None else x.std(),
    "var": lambda x, dim, keepdim: x.var(dim=dim, keepdim=keepdim) if dim is not None else x.var(),
    "amax": lambda x, dim, keepdim: x.amax(dim=dim if dim is not None else (), keepdim=keepdim),
    "amin": lambda x, dim, keepdim: x.amin(dim=dim if dim is not None else (), keepdim=keepdim),
    "logsumexp": lambda x, dim, keepdim: torch.logsumexp(
        x, dim=dim if dim is not None else tuple(range(x.ndim)), keepdim=keepdim
    ),
    "norm": lambda x, dim, keepdim: torch.linalg.vector_norm(x, dim=dim, keepdim=keepdim),
    "prod": lambda x, dim, keepdim: _prod(x, dim, keepdim),
}


def _prod(x, dim, keepdim):
    if dim is None:
        return x.prod()
    for d in sorted(dim if isinstance(dim, tuple) else (dim,), reverse=True):
        x = x.prod(d, keepdim=keepdim)
    return x


@pytest.mark.parametrize("name", sorted(set(REDUCTIONS) - {"logsumexp"}))  # logsumexp(): batch dims only
def test_reduce_all_elements(device, name):
    td = make_td(device)
    ref = REDUCTIONS[name]
    check(getattr(td, name)(), td, lambda x: ref(x, None, False), [])


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize(
    "dim,keepdim,bs",
    [
        (0, False, [4]),
        (-1, False, [3]),
        ((0, 1), False, []),
        (1, True, [3, 1]),
        ((0, -1), True, [1, 1]),
    ],
)
def test_reduce_batch_dims(device, name, dim, keepdim, bs):
    td = make_td(device)
    ref = REDUCTIONS[name]
    dims = tuple(d % 2 for d in (dim if isinstance(dim, tuple) else (dim,)))
    out = getattr(td, name)(dim=dim, keepdim=keepdim)
    check(out, td, lambda x: ref(x, dims, keepdim), bs)
    # nested TensorDicts keep their own extra batch dims
    nested_bs = list(bs) + [5]
    assert out["b", "d"].batch_size == torch.Size(nested_bs)


@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduce_feature_dims(name):
    td = make_td()
    ref = REDUCTIONS[name]
    out = getattr(td, name)(dim="feature")
    assert out.batch_size == td.batch_size
    torch.testing.assert_close(out["b", "c"], ref(td["b", "c"], (2,), False))
    # nested TensorDict (batch [3, 4, 5]): its own feature dims
    torch.testing.assert_close(out["b", "d", "e"], ref(td["b", "d", "e"], (3,), False))
    # a leaf without feature dims is reduced over nothing
    expected_a = ref(td["a"].unsqueeze(-1), (2,), False)
    torch.testing.assert_close(out["a"], expected_a, equal_nan=True)
    with pytest.raises(ValueError, match="keepdim"):
        getattr(td, name)(dim="feature", keepdim=True)


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduce_true_all(name):
    td = make_td()
    ref = REDUCTIONS[name]
    flat = torch.cat([v.reshape(-1) for v in tensor_items(td).values()])
    torch.testing.assert_close(getattr(td, name)(reduce=True), ref(flat, None, False))
    # dim="feature": the batch shape
    bs = td.batch_size
    feat = torch.cat([v.reshape(*bs, -1) for v in tensor_items(td).values()], dim=-1)
    torch.testing.assert_close(
        getattr(td, name)(dim="feature", reduce=True), ref(feat, (2,), False)
    )


def test_reduce_true_with_dim_concatenates_along_dim():
    td = TensorDict({"a": torch.randn(3, 4), "b": torch.randn(3, 4)}, [3, 4])
    cat = torch.cat([td["a"], td["b"]], dim=0)
    torch.testing.assert_close(td.sum(dim=0, reduce=True), cat.sum(0))
    torch.testing.assert_close(td.mean(dim=(0, 1), reduce=True), cat.mean((0, 1)))
    values, indices = td.max(dim=1, reduce=True)
    torch.testing.assert_close(values, torch.cat([td["a"], td["b"]], dim=1).max(1).values)
    bad = TensorDict({"a": torch.randn(3, 4), "b": torch.randn(3, 4, 2)}, [3, 4])
    with pytest.raises(RuntimeError, match="concatenated along dim 0"):
        bad.sum(dim=0, reduce=True)


def test_max_min_with_indices(device):
    td = make_td(device)
    out = td.max(dim=0)
    assert isinstance(out, torch.return_types.max)
    for key, value in tensor_items(td).items():
        ref = value.max(0)
        torch.testing.assert_close(out.values[key], ref.values)
        torch.testing.assert_close(out.indices[key], ref.indices)
    assert out.values.batch_size == torch.Size([4]) and out.values["s"] == "meta"
    out = td.min(dim=-1, keepdim=True)
    for key, value in tensor_items(td).items():
        torch.testing.assert_close(out.indices[key], value.min(1, keepdim=True).indices)
    vals = td.max(dim=1, return_indices=False)
    torch.testing.assert_close(vals["a"], td["a"].amax(1))
    check(td.max(), td, lambda x: x.max(), [])
    check(td.min(), td, lambda x: x.min(), [])
    torch.testing.assert_close(td.max(reduce=True), max(v.max() for v in tensor_items(td).values()))
    with pytest.raises(ValueError, match="single batch dim"):
        td.max(dim=(0, 1))
    torch.testing.assert_close(torch.max(td, 0).values["a"], td["a"].max(0).values)


def test_dtype_and_correction_keywords():
    td = TensorDict({"i": torch.arange(6).view(2, 3)}, [2, 3])
    out = td.mean(dim=1, dtype=torch.float64)
    assert out["i"].dtype == torch.float64
    torch.testing.assert_close(out["i"], td["i"].double().mean(1))
    assert td.sum(dtype=torch.float32)["i"].dtype == torch.float32
    tf = td.float()
    torch.testing.assert_close(tf.std(dim=0, correction=0)["i"], tf["i"].std(0, correction=0))
    torch.testing.assert_close(tf.var(correction=0)["i"], tf["i"].var(correction=0))


def test_names_follow_the_reduction():
    td = TensorDict({"a": torch.zeros(2, 3, 4)}, [2, 3, 4], names=["x", "y", "z"])
    assert td.sum(dim=1).names == ["x", "z"]
    assert td.sum(dim=1, keepdim=True).names == ["x", "y", "z"]
    assert td.mean(dim="feature").names == ["x", "y", "z"]


def test_bad_dims():
    td = make_td()
    with pytest.raises(IndexError, match="out of range"):
        td.sum(dim=2)
    with pytest.raises(IndexError, match="batch dims"):
        td.mean(dim=-3)
    with pytest.raises(ValueError, match="feature"):
        td.sum(dim="features")
    with pytest.raises(RuntimeError, match="repeats"):
        td.sum(dim=(0, -2))
    with pytest.raises(RuntimeError, match="no tensor leaf"):
        TensorDict({}, [2]).sum(reduce=True)


def test_softmax_cumsum_cumprod(device):
    td = make_td(device)
    for name, fn in [
        ("softmax", lambda x, d: torch.softmax(x, d)),
        ("log_softmax", lambda x, d: torch.log_softmax(x, d)),
        ("cumsum", torch.cumsum),
        ("cumprod", torch.cumprod),
    ]:
        for dim in (0, 1, -1):
            out = getattr(td, name)(dim)
            check(out, td, lambda x, d=dim % 2, f=fn: f(x, d), [3, 4])
    with pytest.raises(IndexError):
        td.softmax(2)
    import torch.nn.functional as F

    torch.testing.assert_close(F.softmax(td, dim=0)["a"], torch.softmax(td["a"], 0))


def test_torch_reduction_functions():
    td = make_td()
    torch.testing.assert_close(torch.sum(td)["a"], td["a"].sum())
    torch.testing.assert_close(torch.mean(td, 1)["b", "c"], td["b", "c"].mean(1))
    torch.testing.assert_close(torch.std(td, dim=0)["a"], td["a"].std(0))
    torch.testing.assert_close(torch.amax(td, dim=(0, 1))["a"], td["a"].amax())
    torch.testing.assert_close(torch.logsumexp(td, 0)["a"], td["a"].logsumexp(0))
    torch.testing.assert_close(torch.cumsum(td, 0)["a"], td["a"].cumsum(0))


def test_nan_reductions():
    td = TensorDict({"a": torch.tensor([[1.0, float("nan")], [3.0, 4.0]])}, [2, 2])
    torch.testing.assert_close(td.nansum(dim=1)["a"], torch.tensor([1.0, 7.0]))
    torch.testing.assert_close(td.nanmean(dim=1)["a"], torch.tensor([1.0, 3.5]))
    assert td.sum(dim=1)["a"].isnan()[0]


def test_all_any_still_return_bool():
    td = TensorDict(
        {"a": torch.ones(2, dtype=torch.bool), "b": {"c": torch.tensor([True, False])}}, [2]
    )
    assert td.all() is False and td.any() is True
    assert isinstance((td == td).all(), bool)


def test_norm_foreach_and_p():
    td = make_td()
    check(td.norm(), td, lambda x: torch.linalg.vector_norm(x), [])
    check(td.norm(p=1), td, lambda x: torch.linalg.vector_norm(x, 1), [])
    flat = torch.cat([v.reshape(-1) for v in tensor_items(td).values()])
    torch.testing.assert_close(td.norm(p=3, reduce=True), torch.linalg.vector_norm(flat, 3))
    torch.testing.assert_close(td.norm(p=float("inf"), reduce=True), flat.abs().max())


def test_reduction_autograd():
    x = torch.randn(3, 2, requires_grad=True)
    td = TensorDict({"x": x}, [3])
    td.mean(dim=0)["x"].sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3, 2), 1 / 3))
