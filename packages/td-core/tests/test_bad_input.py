"""Issue-2 bad-input table: a clear error naming the key, and nothing changed."""

import pytest
import torch

from tensordict import TensorDict


def make():
    return TensorDict({"a": torch.zeros(3, 2), "b": {"c": torch.zeros(3)}}, [3])


def test_leaf_shape_mismatch_on_set_construct_setter():
    td = make()
    with pytest.raises(RuntimeError, match=r"'x'.*\(3,\).*\(4, 2\)"):
        td.set("x", torch.zeros(4, 2))
    with pytest.raises(RuntimeError, match="'x'"):
        td["x"] = torch.zeros(2)
    with pytest.raises(RuntimeError, match="'b'"):
        td["b", "d"] = torch.zeros(5)
    with pytest.raises(RuntimeError, match="'a'"):
        TensorDict({"a": torch.zeros(4)}, [3])
    with pytest.raises(RuntimeError, match="'a'"):
        td.batch_size = [4]
    assert set(td.keys(True)) == {"a", "b", ("b", "c")} and td.batch_size == (3,)


def test_missing_keys():
    td = make()
    assert td.get("zz") is None
    for op in (lambda: td["zz"], lambda: td.set_("zz", torch.zeros(3)), lambda: td.__delitem__("zz"), lambda: td.pop("zz")):
        with pytest.raises(KeyError, match="zz"):
            op()


@pytest.mark.parametrize("key,exc", [(1, TypeError), (None, TypeError), ((), ValueError), (("a", 1), TypeError)])
def test_bad_key_types(key, exc):
    with pytest.raises(exc):
        make().set(key, torch.zeros(3))


def test_update_rolls_back():
    td = make()
    before = td.clone()
    with pytest.raises(RuntimeError, match="'z'"):
        td.update({"x": torch.ones(3), "y": torch.ones(3), "z": torch.ones(4), "a": torch.ones(3, 2)})
    assert set(td.keys(True)) == set(before.keys(True))
    assert (td == before).all()


def test_device_cannot_be_moved():
    td = TensorDict({}, [2], device="meta")
    td["a"] = torch.zeros(2)  # cpu -> meta works
    assert td["a"].device.type == "meta"
    td2 = TensorDict({}, [2], device="cpu")
    with pytest.raises(RuntimeError):
        td2["a"] = torch.zeros(2, device="meta")  # meta has no data to move
    assert "a" not in td2.keys()
