"""TensorAttrs, td.attrs() and per-leaf casting with td.to(attrs)."""

import pickle

import pytest
import torch

from tensordict import TensorAttrs, TensorDict


def _td():
    return TensorDict(
        {"a": torch.zeros(3, 4), "b": torch.ones(3, dtype=torch.int64), "sub": {"c": torch.zeros(3, dtype=torch.int32)}},
        batch_size=[3],
    )


def test_attrs_describe_every_leaf():
    attrs = _td().attrs()
    assert attrs.batch_size == () and attrs.device is None
    a = attrs["a"]
    assert isinstance(a, TensorAttrs)
    assert (a.tgt_device, a.tgt_dtype, a.tgt_shape) == (torch.device("cpu"), torch.float32, torch.Size([3, 4]))
    assert attrs["sub", "c"].tgt_dtype == torch.int32
    only = _td().attrs(fields=("dtype",))["b"]
    assert only.tgt_device is None and only.tgt_shape is None and only.tgt_dtype == torch.int64
    with pytest.raises(ValueError, match="unknown field"):
        _td().attrs(fields=("colour",))
    assert pickle.loads(pickle.dumps(a)) == a


def test_to_attrs_casts_leaf_by_leaf():
    spec = TensorDict(
        {"a": TensorAttrs(tgt_dtype=torch.float64, batch_size=()), "sub": {"c": TensorAttrs(tgt_dtype=torch.int64, batch_size=())}},
        batch_size=[],
    )
    out = _td().to(spec)
    assert out["a"].dtype == torch.float64 and out["sub", "c"].dtype == torch.int64
    assert out["b"].dtype == torch.int64  # not in the spec: passes through
    back = out.to(_td().attrs())
    assert back["a"].dtype == torch.float32 and back["sub", "c"].dtype == torch.int32
    with pytest.raises(TypeError, match="does not accept additional positional"):
        _td().to(spec, "cpu")
    with pytest.raises(NotImplementedError, match="non_blocking_pin"):
        _td().to(spec, non_blocking_pin=True)
