"""get / set / set_ / update / pop / select / exclude / key rewriting."""

import pytest
import torch

from tensordict import TensorDict, get_defaults_to_none, set_get_defaults_to_none


def make():
    return TensorDict({"a": torch.zeros(3, 2), "b": {"c": torch.ones(3)}}, [3])


def test_get_default_and_missing():
    td = make()
    assert td.get("zz", None) is None
    assert td.get(("b", "zz"), 1) == 1
    # tensordict 0.15: get() of a missing key gives None, td[missing] raises
    assert get_defaults_to_none() is True
    assert td.get("zz") is None
    assert td.get(("b", "zz")) is None
    with pytest.raises(ValueError):  # through the leaf "a": tensordict 0.15.3 raises, as td[key]
        td.get(("a", "zz"))
    with pytest.raises(KeyError, match="zz"):
        td["zz"]
    with pytest.raises(KeyError, match="zz"):
        td["b", "zz"]
    try:
        set_get_defaults_to_none(False)
        assert get_defaults_to_none() is False
        with pytest.raises(KeyError, match="zz"):
            td.get("zz")
        with pytest.raises(KeyError, match="zz"):
            td.get(("b", "zz"))
        set_get_defaults_to_none(None)
        assert get_defaults_to_none() is False
    finally:
        set_get_defaults_to_none(True)


def test_set_inplace():
    td = make()
    a = td["a"]
    td.set("a", torch.ones(3, 2), inplace=True)
    assert td["a"] is a and (a == 1).all()
    td.set("new", torch.ones(3), inplace=True)  # creates a missing key
    assert "new" in td.keys()


def test_set_():
    td = make()
    a = td["a"]
    td.set_("a", torch.full((3, 2), 2.0))
    assert (a == 2).all()
    with pytest.raises(KeyError):
        td.set_("zz", torch.zeros(3))


def test_set_at_get_at():
    td = make()
    td.set_at_("a", torch.tensor([5.0, 5.0]), 1)
    assert td.get_at("a", 1).tolist() == [5.0, 5.0]
    assert td.get_at("zz", 0, "d") == "d"


def test_setdefault():
    td = make()
    v = td.setdefault("x", torch.zeros(3))
    assert v.shape == (3,)
    assert td.setdefault("x", torch.ones(3)).sum() == 0


def test_pop_popitem_del_clear():
    td = make()
    v = td.pop("a")
    assert v.shape == (3, 2) and "a" not in td.keys()
    assert td.pop("zz", 7) == 7
    with pytest.raises(KeyError):
        td.pop("zz")
    td["x"] = torch.zeros(3)
    k, _ = td.popitem()
    assert k == "x"
    del td["b", "c"]
    assert ("b", "c") not in td.keys(True)
    with pytest.raises(KeyError):
        del td["zz"]
    td.clear()
    assert len(list(td.keys())) == 0


def test_update_and_update_():
    td = make()
    td.update({"b": {"d": torch.zeros(3)}, "e": torch.zeros(3)})
    assert set(td["b"].keys()) == {"c", "d"}
    td.update_({"a": torch.ones(3, 2)})
    assert (td["a"] == 1).all()
    with pytest.raises(KeyError):
        td.update_({"zz": torch.ones(3)})
    td.update(TensorDict({"a": torch.full((3, 2), 3.0)}, [3]), keys_to_update=["a"])
    assert (td["a"] == 3).all()


def test_copy_clone():
    td = make()
    c = td.copy()
    assert c["a"] is td["a"]
    c2 = td.clone()
    assert c2["a"].data_ptr() != td["a"].data_ptr()
    assert (c2 == td).all()


def test_select_exclude():
    td = make()
    s = td.select("a", ("b", "c"))
    assert set(s.keys(True, True)) == {"a", ("b", "c")}
    with pytest.raises(KeyError):
        td.select("zz")
    assert set(td.select("a", "zz", strict=False).keys()) == {"a"}
    e = td.exclude(("b", "c"))
    assert set(e.keys(True)) == {"a", "b"}
    td.select("a", inplace=True)
    assert list(td.keys()) == ["a"]


def test_flatten_unflatten_keys():
    td = TensorDict({"a": {"b": {"c": torch.zeros(2)}}, "d": torch.zeros(2)}, [2])
    f = td.flatten_keys(".")
    assert set(f.keys()) == {"a.b.c", "d"}
    u = f.unflatten_keys(".")
    assert set(u.keys(True, True)) == {("a", "b", "c"), "d"}
    td.flatten_keys("/", inplace=True)
    assert "a/b/c" in td.keys()


def test_rename_key():
    td = make()
    td.rename_key_("a", ("x", "y"))
    assert ("x", "y") in td.keys(True)
    with pytest.raises(KeyError):
        td.rename_key_("zz", "q")
    with pytest.raises(KeyError):
        td.rename_key_(("x", "y"), "b", safe=True)


def test_filter_empty_split_keys():
    td = TensorDict({"a": torch.zeros(2), "e": {"f": {}}, "b": torch.zeros(2)}, [2])
    td.filter_empty_()
    assert "e" not in td.keys()
    x, rest = td.split_keys(["a"])
    assert list(x.keys()) == ["a"] and list(rest.keys()) == ["b"]


def test_lazy_preallocation_any_order():
    n = 6
    td = TensorDict({}, batch_size=[n])
    for i in torch.randperm(n).tolist():
        td[i] = TensorDict({"a": torch.full((3,), float(i)), "b": {"c": torch.zeros(2)}}, [])
    assert td["a"].shape == (n, 3) and td["b", "c"].shape == (n, 2)
    assert td["a"][:, 0].tolist() == [float(i) for i in range(n)]


def test_preallocation_from_dict():
    td = TensorDict({}, batch_size=[4])
    td[1:3] = {"a": torch.ones(2, 5)}
    assert td["a"].shape == (4, 5) and td["a"][1:3].sum() == 10


def test_setitem_index_writes():
    td = make()
    td[0] = TensorDict({"a": torch.ones(2), "b": {"c": torch.tensor(5.0)}}, [])
    assert td["a"][0].tolist() == [1.0, 1.0] and td["b", "c"][0] == 5
    td[1:] = 0
    assert td["a"][1:].sum() == 0
