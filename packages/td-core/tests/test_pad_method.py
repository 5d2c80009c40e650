"""TensorDict.pad and pad(inplace=, safe=)."""

import gc
import weakref

import pytest
import torch

from tensordict import TensorDict, pad


def make():
    return TensorDict(
        {
            "a": torch.arange(12.0).view(3, 4),
            "b": torch.ones(3, 4, 2),
            "nested": TensorDict({"c": torch.ones(3, 4, 5)}, [3, 4]),
        },
        [3, 4],
    )


@pytest.mark.parametrize("pad_size", [[0, 1, 0, 2], [1, 0, 0, 2], [1, 0, 2, 1], [1, 1]])
def test_method_matches_function(pad_size):
    ref = pad(make(), pad_size, value=7.0)
    out = make().pad(pad_size, value=7.0)
    assert out.batch_size == ref.batch_size
    for key in ref.keys(True, True):
        assert torch.equal(out[key], ref[key])


def test_inplace_keeps_identities_and_releases_leaves():
    td = make()
    nested = td["nested"]
    old = weakref.ref(td["b"])
    out = td.pad([0, 1, 0, 2], value=0.0, inplace=True)
    gc.collect()
    assert out is td and td.batch_size == (4, 6)
    assert td["nested"] is nested and nested.batch_size == (4, 6)
    assert td["nested", "c"].shape == (4, 6, 5)
    assert old() is None
    td._check_batch_size()


def test_safe_checks_before_touching_anything():
    td = make()
    a = td["a"]
    with pytest.raises(RuntimeError, match="negative output size"):
        td.pad([-10, 0], inplace=True)
    assert td["a"] is a and td.batch_size == (3, 4)
    with pytest.raises(RuntimeError):
        td.pad([-10, 0], inplace=True, safe=False)


def test_bad_pad_size_is_a_runtime_error():
    with pytest.raises(RuntimeError, match="even length"):
        make().pad([0] * 100)
    with pytest.raises(RuntimeError):
        pad(make(), [0])
