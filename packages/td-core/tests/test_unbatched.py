"""UnbatchedTensor: a leaf kept whole by the batch-dim ops of its TensorDict."""

import math
import warnings

import pytest
import torch

from tensordict import TensorDict, UnbatchedTensor, lazy_stack


def make():
    return TensorDict(u=UnbatchedTensor(torch.randn(7, 2)), b=torch.randn(3, 4), batch_size=(3,))


OPS = [
    ("index", lambda td: td[0]),
    ("slice", lambda td: td[1:]),
    ("mask", lambda td: td[torch.tensor([True, False, True])]),
    ("unbind", lambda td: td.unbind(0)[1]),
    ("split", lambda td: td.split([1, 2])[1]),
    ("chunk", lambda td: td.chunk(2)[0]),
    ("reshape", lambda td: td.reshape(1, 3)),
    ("view", lambda td: td.view(3, 1)),
    ("unsqueeze", lambda td: td.unsqueeze(0)),
    ("permute", lambda td: td.reshape(1, 3).permute(1, 0)),
    ("squeeze", lambda td: td.reshape(1, 3).squeeze()),
    ("unflatten", lambda td: td.unflatten(0, (1, 3))),
    ("flatten", lambda td: td.unflatten(0, (1, 3)).flatten(0, 1)),
    ("gather", lambda td: td.gather(0, torch.tensor([0, 0]))),
    ("expand", lambda td: td.expand(2, 3)),
    ("stack", lambda td: torch.stack([td, td], 1)),
    ("cat", lambda td: torch.cat([td, td])),
]


@pytest.mark.parametrize("name,op", OPS, ids=[o[0] for o in OPS])
def test_batch_ops_keep_it_whole(name, op):
    td = make()
    out = op(td)
    leaf = out.get("u")
    assert isinstance(leaf, UnbatchedTensor)
    assert leaf.data_ptr() == td["u"].data_ptr()
    assert leaf.shape == (7, 2)
    assert leaf.batch_size == out.batch_size


def test_write_skips_batch_check_and_sets_batch_size():
    td = TensorDict(batch_size=[4, 2])
    td["u"] = UnbatchedTensor(torch.zeros(5))
    assert td.get("u").batch_size == (4, 2)
    assert isinstance(td["u"], UnbatchedTensor)
    td.batch_size = [4]
    assert td.get("u").batch_size == (4,)


def test_auto_batch_size_ignores_it():
    td = TensorDict(a=UnbatchedTensor(0), b=torch.randn(2, 3)).auto_batch_size_()
    assert td.batch_size == (2, 3)


def test_value_ops_act_on_the_data():
    td = make()
    assert td.int()["u"].dtype == torch.int32
    assert isinstance(td.int().get("u"), UnbatchedTensor)
    assert (torch.ones_like(td)["u"] == 1).all()
    assert td.apply(lambda x: x * 0).get("u").batch_size == (3,)


def test_stack_warns_on_different_storage():
    td1 = TensorDict(u=UnbatchedTensor(torch.zeros(2)), batch_size=[3])
    td2 = TensorDict(u=UnbatchedTensor(torch.ones(2)), batch_size=[3])
    with pytest.warns(UserWarning, match="different data storage"):
        torch.stack([td1, td2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.stack([td1, td1])


def test_python_conversions_match_tensor():
    for data in (torch.tensor(3), torch.tensor(1.5), torch.tensor([1, 2])):
        ut = UnbatchedTensor(data)
        for fn in (str, bool, int, float, round, math.floor, lambda x: format(x, ".1f")):
            try:
                expected = fn(data)
            except Exception as err:  # noqa: BLE001 - compared with the unbatched result
                with pytest.raises(type(err)):
                    fn(ut)
            else:
                assert fn(ut) == expected
    assert repr(UnbatchedTensor(torch.tensor([1.0]))) == "UnbatchedTensor(tensor([1.]))"
    assert UnbatchedTensor(torch.tensor([1, 2])).tolist() == [1, 2]


def test_lazy_stack_holds_it():
    td = make()
    ls = lazy_stack([td, td])
    assert ls[0].get("u").data_ptr() == td["u"].data_ptr()


def test_vmap_passes_it_through():
    data = torch.randn(7, 11)
    td = TensorDict(a=torch.randn(4, 3, 5), u=UnbatchedTensor(data), batch_size=[4, 3])
    out = torch.vmap(lambda x: x)(td)
    assert out.get("u").data_ptr() == data.data_ptr() and out.get("u").batch_size == (4, 3)
    leaf = torch.vmap(lambda x: x["u"])(td)
    assert isinstance(leaf, UnbatchedTensor) and leaf.batch_size == (4, 3)
    direct = torch.vmap(lambda x: x)(UnbatchedTensor(data, batch_size=[4]))
    assert direct.data_ptr() == data.data_ptr() and direct.batch_size == (4,)


def test_nontensor_update_at_makes_a_stack():
    from tensordict import NonTensorData

    td = TensorDict(val=NonTensorData(0, batch_size=[6]), batch_size=[6])
    td.update_at_(TensorDict(val=NonTensorData(1, batch_size=[3]), batch_size=[3]), slice(1, None, 2))
    assert td.get("val").tolist() == [0, 1] * 3


def test_update_cummin_pad_keep_it():
    from tensordict import pad

    td = make()
    filled = td.empty(recurse=True).update(td)
    assert filled.get("u").data_ptr() == td["u"].data_ptr()
    assert td.cummin(0).values.get("u").shape == (7, 2)
    assert pad(td, [0, 1]).get("u") is td.get("u")


def test_equal_copies_of_an_unbatched_leaf_stack_without_a_warning():
    import warnings

    from tensordict import TensorDict, UnbatchedTensor

    def make(fill: float) -> TensorDict:
        return TensorDict({"x": torch.zeros(2), "u": UnbatchedTensor(torch.full((3, 4), fill))}, [2])

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = torch.cat([make(1.0), make(1.0)])
    assert out.batch_size == (4,) and out.get("u").shape == (3, 4)
    with pytest.warns(UserWarning, match="only the first one is kept"):
        out = torch.stack([make(1.0), make(0.0)])
    assert (out.get("u") == 1).all()
