"""set_printoptions / get_printoptions and the repr they drive."""

import pytest
import torch

from tensordict import TensorDict, get_printoptions, lazy_stack, set_printoptions


def make():
    return TensorDict({"c": torch.zeros(3, 4), "a": torch.ones(3)}, [3])


def test_defaults_and_copy():
    opts = get_printoptions()
    opts["show_device"] = False
    assert get_printoptions()["show_device"] is True
    r = repr(make())
    assert "device=cpu, dtype=torch.float32, is_shared=False" in r
    assert r.index("a:") < r.index("c:")


def test_context_manager_restores():
    before = get_printoptions()
    with set_printoptions(show_device=False, show_dtype=False):
        r = repr(make())
        assert "\n    device=" not in r and "dtype=" not in r
        assert "device=cpu" in r and "batch_size=" in r
    assert get_printoptions() == before


def test_decorator_and_global_set():
    @set_printoptions(show_is_shared=False)
    def inner():
        return repr(make())

    assert "\n    is_shared" not in inner()
    assert "\n    is_shared" in repr(make())
    s = set_printoptions(show_batch_size=False)
    s.set()
    try:
        assert "batch_size" not in repr(make())
    finally:
        s.unset()
    assert "batch_size" in repr(make())


def test_extra_fields_and_order():
    td = TensorDict({"b": torch.zeros(4, requires_grad=True)[::2], "a": torch.ones(2)}, [2])
    with set_printoptions(show_grad=True, show_is_view=True, show_is_contiguous=True, show_storage_size=True):
        r = repr(td)
    assert "requires_grad=True" in r and "is_view=True" in r and "is_contiguous=False" in r
    assert "storage_size=16" in r
    with set_printoptions(sort_keys="insertion"):
        r = repr(td)
    assert r.index("b:") < r.index("a:")
    with set_printoptions(sort_keys=lambda k: -ord(k[0])):
        r = repr(td)
    assert r.index("b:") < r.index("a:")
    with set_printoptions(plain=True):
        assert "mean=1" in repr(td)


def test_verbose_false():
    with set_printoptions(verbose=False):
        opts = get_printoptions()
        r = repr(make())
    assert opts["show_device"] is False and opts["show_shape"] is True
    assert "dtype=" not in r and "device=" not in r and "batch_size=" in r
    with set_printoptions(verbose=False, show_dtype=True):
        assert "dtype=" in repr(make())


def test_lazy_stack_respects_options():
    with set_printoptions(show_device=False, show_is_shared=False):
        r = repr(lazy_stack([make(), make()]))
    assert "stack_dim=" in r and "\n    device=" not in r and "\n    is_shared=" not in r


def test_unknown_option():
    with pytest.raises(TypeError, match="Unknown printoptions.*nope"):
        set_printoptions(nope=True)
    with pytest.raises(ValueError, match="sort_keys"):
        set_printoptions(sort_keys="random")
