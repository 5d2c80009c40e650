"""The live shape views of ``set_lazy_legacy(True)`` (``_legacy_views.py``)."""

from __future__ import annotations

import pickle

import pytest
import torch

from tensordict import TensorDict, lazy_stack, set_lazy_legacy


def _td() -> TensorDict:
    return TensorDict(
        {"a": torch.randn(4, 3, 2, 1, 5), "nested": {"b": torch.randn(4, 3, 2, 1)}},
        batch_size=[4, 3, 2, 1],
    )


@set_lazy_legacy(True)
@pytest.mark.parametrize(
    ("op", "args", "inverse", "inv_args"),
    [
        ("unsqueeze", (0,), "squeeze", (0,)),
        ("unsqueeze", (-1,), "squeeze", (-1,)),
        ("squeeze", (-1,), "unsqueeze", (-1,)),
        ("permute", (3, 1, 0, 2), "permute", (2, 1, 3, 0)),
        ("transpose", (0, 2), "transpose", (2, 0)),
        ("view", (-1,), "view", (4, 3, 2, 1)),
    ],
)
def test_view_writes_reach_the_source_and_inverse_gives_it_back(op, args, inverse, inv_args):
    td = _td()
    view = getattr(td, op)(*args)
    expected_bs = getattr(torch.zeros(td.batch_size), op)(*args).shape
    assert view.batch_size == expected_bs
    assert type(view).__name__.endswith("TensorDict") and type(view) is not TensorDict
    # a replaced tensor (not an in-place write) reaches the source
    view.set("a", torch.ones(*expected_bs, 5))
    assert (td["a"] == 1).all()
    # a new nested key reaches the source, with the source's batch size
    view.set(("new", "leaf"), torch.zeros(expected_bs))
    assert td["new", "leaf"].shape == td.batch_size
    # writes into the source show through the view (nothing is cached)
    td.set("c", torch.full((*td.batch_size, 2), 3.0))
    assert view["c"].shape == (*expected_bs, 2)
    assert (view["c"] == 3).all()
    # in-place writes go through
    view.set_(("nested", "b"), torch.full(expected_bs, 7.0))
    assert (td["nested", "b"] == 7).all()
    assert getattr(view, inverse)(*inv_args) is td
    # the nested entry is a view of the same kind over the source's nested TensorDict
    assert type(view["nested"]) is type(view)
    assert view["nested"]._source is td["nested"]


@set_lazy_legacy(True)
def test_views_of_a_lazy_stack_write_into_the_stacked_tensordicts():
    tds = [TensorDict({"a": torch.zeros(3, 1, 2)}, [3, 1]) for _ in range(2)]
    stack = lazy_stack(tds, 1)
    view = stack.squeeze(-1)
    assert view.batch_size == (3, 2)
    view.set_("a", torch.ones(3, 2, 2))
    assert all((td["a"] == 1).all() for td in tds)
    assert view.unsqueeze(-1) is stack
    assert stack.unsqueeze(0).squeeze(0) is stack


def test_shape_ops_on_a_view_outside_legacy_mode_raise():
    with set_lazy_legacy(True):
        view = _td().permute(3, 2, 1, 0)
    for call in (
        lambda: view.unsqueeze(0),
        lambda: view.squeeze(0),
        lambda: view.permute(0, 1, 2, 3),
        lambda: view.transpose(0, 1),
        lambda: view.movedim(0, 1),
        lambda: view.swapaxes(0, 1),
    ):
        with pytest.raises(RuntimeError, match="Make it dense"):
            call()
    with pytest.raises(RuntimeError, match="Cannot call `view`"):
        view.view(-1)
    # everything else works on the viewed leaves
    assert view.reshape(-1).batch_size == (24,)
    assert view[0].batch_size == (2, 3, 4)
    assert (view.apply(lambda x: x * 0) == 0).all()
    assert view.to_tensordict().batch_size == view.batch_size


def test_in_place_structure_changes_are_refused():
    with set_lazy_legacy(True):
        view = _td().unsqueeze(0)
    with pytest.raises(RuntimeError, match="Cannot call select"):
        view.select("a", inplace=True)
    with pytest.raises(RuntimeError, match="Cannot call exclude"):
        view.flatten_keys(inplace=True)
    with pytest.raises(TypeError, match="Cannot use inplace=True with"):
        view.to(torch.float64, inplace=True)
    with pytest.raises(TypeError, match="Cannot pass batch-size to "):
        view.to(torch.float64, batch_size=[])
    with pytest.raises(RuntimeError, match="Names of a lazy tensordict cannot be modified"):
        view.names = ["a", "b", "c", "d", "e"]
    # exclude(inplace=True) removes the key from the source
    source = view._source
    view.exclude("a", inplace=True)
    assert "a" not in source.keys()


@set_lazy_legacy(True)
def test_transpose_out_of_range_and_trivial_ops():
    td = _td()
    with pytest.raises(ValueError, match="The provided dimensions are incompatible"):
        td.transpose(-5, -6)
    assert td.transpose(1, 1) is td
    assert td.permute(0, 1, 2, 3) is td
    assert td.view(td.batch_size) is td
    assert td.squeeze(0) is td  # dim 0 has size 4


def test_locking_a_view_locks_its_source_and_clone_keeps_the_kind():
    with set_lazy_legacy(True):
        view = _td().permute(3, 2, 1, 0)
    view.lock_()
    assert view._source.is_locked
    with pytest.raises(RuntimeError):
        view.set("z", torch.zeros(view.batch_size))
    with view.unlock_():
        view.set("z", torch.zeros(view.batch_size))
    assert view.is_locked
    clone = view.clone()
    assert type(clone) is type(view)
    assert clone._source is not view._source
    assert (clone == view).all()
    copy = pickle.loads(pickle.dumps(view))
    assert type(copy) is type(view) and (copy == view).all()


def test_plain_shape_ops_stay_dense():
    td = _td()
    for out in (td.unsqueeze(0), td.permute(3, 2, 1, 0), td.transpose(0, 1), td.view(-1), td.squeeze(-1)):
        assert type(out) is TensorDict


@set_lazy_legacy(True)
def test_legacy_permute_errors_and_inferred_view_sizes():
    td = TensorDict({"a": torch.zeros(4, 5, 6)}, [4, 5, 6])
    with pytest.raises(RuntimeError, match="repeated dim"):
        td.permute(1, 1, 0)
    with pytest.raises(RuntimeError, match="3 batch dims"):
        td.permute(3, 2, 1, 0)
    with pytest.raises(IndexError, match="out of range"):
        td.permute(2, 3, 0)
    td = TensorDict({"a": torch.randn(3, 4)}, [3, 4])
    assert td.view(-1).view(-1, 4) is td
    assert td.view(3, -1) is td
    assert td.view(-1, 12).batch_size == (1, 12)


def test_inplace_shape_ops_on_a_lazy_stack_raise_not_implemented():
    stack = lazy_stack([TensorDict({"x": torch.zeros(4)}, [4]) for _ in range(2)], dim=0)
    index = torch.zeros(2, 4, dtype=torch.long)
    for name, call in (
        ("repeat", lambda: stack.repeat(2, 1, inplace=True)),
        ("repeat_interleave", lambda: stack.repeat_interleave(2, dim=1, inplace=True)),
        ("gather", lambda: stack.gather(0, index, inplace=True)),
        ("flatten", lambda: stack.flatten(0, 1, inplace=True)),
        ("unflatten", lambda: stack.unflatten(0, (2, 1), inplace=True)),
    ):
        with pytest.raises(NotImplementedError, match=name):
            call()
    assert stack.batch_size == (2, 4)  # untouched


def test_gather_inplace_argument_checks_and_movedim_identity():
    td = TensorDict({"a": torch.arange(12.0).view(3, 4)}, [3, 4])
    with pytest.raises(NotImplementedError, match="index.ndim"):
        td.gather(0, torch.tensor([0, 1]), inplace=True)
    with pytest.raises(ValueError, match="mutually exclusive"):
        td.gather(0, torch.zeros(3, 4, dtype=torch.long), out=td.clone(), inplace=True)
    assert td.movedim(1, 1) is td
    assert torch.moveaxis(td, 0, 1).batch_size == (4, 3)


def test_lazy_stack_reshape_view_and_unflatten_stay_lazy():
    tds = [TensorDict({"a": torch.arange(6.0).view(2, 3) + 10 * i}, [2, 3]) for i in range(4)]
    stack = lazy_stack(tds, 0)
    flat = stack.reshape(-1)
    assert type(flat) is type(stack) and flat.batch_size == (24,)
    assert torch.equal(flat["a"], stack["a"].reshape(-1))
    kept = stack.reshape(4, 6)  # the stack dim is kept: each TensorDict is reshaped
    assert kept.tensordicts[0].batch_size == (6,)
    kept.tensordicts[0].set_("a", torch.zeros(6))
    assert (tds[0]["a"] == 0).all()  # views of the stacked TensorDicts' tensors
    with pytest.raises(NotImplementedError, match="reshape"):
        stack.reshape(-1, inplace=True)
    stack.lock_()
    assert stack.reshape(-1).is_locked
    stack.unlock_()
    grouped = stack.view(2, 2, 2, 3)
    assert type(grouped[0]) is type(stack) and grouped[1, 0] is tds[2]
    assert grouped.batch_size == (2, 2, 2, 3)
    assert stack.unflatten(0, (2, -1))[1, 1] is tds[3]
    with pytest.raises(TypeError, match="Cannot pass batch-size to "):
        stack.to(torch.float64, batch_size=[])
    assert stack.view(torch.uint8, batch_size=[]).batch_size == ()


def test_a_set_is_not_an_index():
    td = TensorDict({"a": torch.zeros(3, 2)}, [3, 2])
    with pytest.raises(TypeError, match="Invalid index"):
        td[:, {0, 1}]


def test_where_on_a_lazy_stack_splits_the_condition():
    tds = [TensorDict({"a": torch.randn(4, 1, 5), "n": {"b": torch.zeros(4, 1)}}, [4, 1]) for _ in range(2)]
    stack = lazy_stack(tds, 1)
    mask = torch.tensor([[[True], [False]], [[False], [True]], [[True], [True]], [[False], [False]]])
    out = stack.where(mask, stack.empty(), pad=1)
    for value in out.values(True, True):
        assert (value[~mask] == 1).all()
    assert torch.equal(out["a"][mask], stack["a"][mask])
    target = stack.empty()
    assert stack.where(mask, stack.empty(), pad=1, out=target) is target
    with pytest.raises(KeyError, match="not found and no pad value provided"):
        stack.empty().where(mask, stack)


def test_flatten_keys_of_a_lazy_stack_as_a_context_manager_writes_new_keys_back():
    stack = lazy_stack([TensorDict({"a": torch.zeros(3), "n": {"b": torch.zeros(3)}}, [3]) for _ in range(2)], 1)
    with stack.flatten_keys(",") as flat:
        with flat.unflatten_keys(",") as nested:
            nested["new", "data"] = torch.ones(nested.shape)
        assert (flat["new,data"] == 1).all()
    assert (stack["new", "data"] == 1).all()
    assert all((td["new", "data"] == 1).all() for td in stack.tensordicts)

