"""to / cpu / cuda / dtype casts / pin_memory / share_memory_."""

import pytest
import torch

from tensordict import TensorDict


def make(device=None):
    return TensorDict({"a": torch.zeros(3, 2), "b": {"c": torch.ones(3, dtype=torch.int64)}, "s": "x"}, [3], device=device)


def test_to_device(device):
    td = make().to(device)
    assert td.device.type == device.type
    assert td["a"].device.type == device.type and td["b", "c"].device.type == device.type
    assert td["b"].device.type == device.type
    assert td["s"] == "x"
    back = td.cpu()
    assert back["a"].device.type == "cpu"


def test_non_blocking_values(device):
    td = TensorDict({"a": torch.randn(100, 3)}, [100])
    out = td.to(device, non_blocking=True).to("cpu", non_blocking=True)
    assert torch.equal(out["a"], td["a"])


@pytest.mark.parametrize(
    "meth,dtype",
    [("float", torch.float32), ("double", torch.float64), ("half", torch.float16), ("bfloat16", torch.bfloat16),
     ("int", torch.int32), ("long", torch.int64), ("bool", torch.bool)],
)
def test_dtype_casts(meth, dtype):
    td = getattr(make(), meth)()
    assert td["a"].dtype == dtype and td["b", "c"].dtype == dtype


def test_to_dtype_and_other_td(device):
    td = make()
    assert td.to(torch.float64)["a"].dtype == torch.float64
    other = TensorDict({}, [], device=device)
    assert td.to(other).device.type == device.type


def test_to_same_device_returns_self():
    td = make("cpu")
    assert td.to("cpu") is td


def test_clear_device():
    td = make("cpu")
    td.clear_device_()
    assert td.device is None and td["b"].device is None


def test_share_memory():
    td = make()
    assert not td.is_shared()
    td.share_memory_()
    assert td.is_shared() and td.is_locked


@pytest.mark.skipif(not torch.cuda.is_available(), reason="pin_memory needs CUDA")
def test_pin_memory():
    assert make().pin_memory().is_pinned()


def test_cuda_unavailable_raises_clearly():
    if torch.cuda.is_available():
        pytest.skip("GPU present")
    with pytest.raises((RuntimeError, AssertionError)):
        make().cuda()


@pytest.mark.parametrize("source_device", [None, "cpu"])
def test_to_device_as_context_manager_writes_back(source_device):
    td = TensorDict(x=torch.zeros(3), batch_size=[3], device=source_device)
    with td.to("cpu") as moved:  # a new TensorDict from no device; ``td`` itself from cpu
        assert (moved is td) == (source_device is not None)
        moved["y"] = moved["x"] + 1
        moved["x"] += 2
    assert torch.equal(td["y"], torch.ones(3)) and torch.equal(td["x"], torch.full((3,), 2.0))


def test_to_device_keeps_no_strong_reference_to_the_source():
    import gc
    import weakref

    td = TensorDict(x=torch.zeros(3), batch_size=[3])
    ref = weakref.ref(td)
    moved = td.to("cpu") if td.device is not None else td.to(torch.device("cpu"))
    del td
    gc.collect()
    assert ref() is None  # ``td = td.to(device)`` frees the old copy
    with moved:  # the source is gone: nothing to write back, no error
        moved["z"] = torch.ones(3)
