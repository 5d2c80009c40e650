"""Operations on TensorDicts nested 1,000 (and 3,000) levels deep, under the default
recursion limit (issue 21: "no recursion limit"). Each test checks the result at the
deepest level, not just that no exception is raised."""

from __future__ import annotations

import sys

import pytest
import torch

from tensordict import TensorDict, lazy_stack
from tensordict._deep import trampoline

DEPTH = 1_000


@pytest.fixture(autouse=True)
def _default_recursion_limit():
    """Every test here runs under the interpreter's default limit (1,000 frames)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1_000)
    yield
    sys.setrecursionlimit(old)


def chain(depth: int = DEPTH) -> tuple[TensorDict, tuple[str, ...]]:
    """``depth`` nested TensorDicts (batch [4]), each level holding ``x`` (its level number)
    and the next level; the deepest holds ``leaf`` (arange). Returns it and the deepest path."""
    path = tuple(f"l{i}" for i in range(depth))
    td = TensorDict(batch_size=[4])
    td.set(path + ("leaf",), torch.arange(8.0).view(4, 2))
    node = td
    for i, name in enumerate(path):
        node.set("x", torch.full((4,), float(i)))
        node = node.get(name)
    return td, path


def nested_dict(depth: int) -> dict:
    out: dict = {"leaf": torch.arange(8.0).view(4, 2)}
    for i in reversed(range(depth)):
        out = {f"l{i}": out, "x": torch.full((4,), float(i))}
    return out


def leaf(td, path):
    return td.get(path + ("leaf",))


def test_trampoline_runs_a_deep_walk_and_passes_errors_to_the_parent():
    def depth(d):
        if "next" not in d:
            if d.get("boom"):
                raise ValueError("deepest")
            return 1
        try:
            return 1 + (yield (d["next"],))
        except ValueError as err:  # the parent sees its child's error, as with recursion
            raise ValueError(f"{err} <") from None

    d: dict = {}
    for _ in range(5_000):
        d = {"next": d}
    assert trampoline(depth, d) == 5_001
    d = {"boom": True}
    for _ in range(3):
        d = {"next": d}
    with pytest.raises(ValueError, match="^deepest < < <$"):
        trampoline(depth, d)


@pytest.mark.parametrize("depth", [DEPTH, 3_000])
def test_apply(depth):
    td, path = chain(depth)
    out = td.apply(lambda t: t + 1)
    assert torch.equal(leaf(out, path), torch.arange(8.0).view(4, 2) + 1)
    assert torch.equal(out.get(path[:-1] + ("x",)), torch.full((4,), depth - 1.0 + 1))
    assert out.get(path).batch_size == torch.Size([4])
    # filtered results drop the emptied levels all the way up
    assert td.apply(lambda t: None, filter_empty=True) is None


def test_apply_with_others_and_keywords():
    td, path = chain()
    out = td.apply(lambda a, b: a * b, td)
    assert torch.equal(leaf(out, path), torch.arange(8.0).view(4, 2) ** 2)
    out = td.apply(lambda t: t[:, None], batch_size=[4, 1])  # the general walk (keywords)
    assert out.get(path).batch_size == torch.Size([4, 1])
    assert leaf(out, path).shape == (4, 1, 2)
    seen = []
    td.named_apply(lambda k, t: seen.append(k), nested_keys=True, filter_empty=True)
    assert path + ("leaf",) in seen and len(seen) == DEPTH + 1
    td.apply_(lambda t: t.mul_(2))
    assert torch.equal(leaf(td, path), torch.arange(8.0).view(4, 2) * 2)


def test_apply_error_names_the_deep_key():
    td, path = chain()
    with pytest.raises(RuntimeError, match=r"'l998', 'l999', 'leaf'\)"):
        td.apply(lambda t: t.reshape(-1)[:3])


@pytest.mark.parametrize("depth", [DEPTH, 3_000])
def test_indexing(depth):
    td, path = chain(depth)
    first = td[0]
    assert first.get(path).batch_size == torch.Size([])
    assert torch.equal(leaf(first, path), torch.tensor([0.0, 1.0]))
    part = td[1:3]
    assert torch.equal(leaf(part, path), torch.arange(8.0).view(4, 2)[1:3])
    masked = td[torch.tensor([True, False, True, False])]
    assert masked.get(path).batch_size == torch.Size([2])
    assert torch.equal(leaf(masked, path), torch.tensor([[0.0, 1.0], [4.0, 5.0]]))


def test_stack_and_cat():
    td, path = chain()
    stacked = torch.stack([td, td.apply(lambda t: t + 10)], 1)
    assert stacked.get(path).batch_size == torch.Size([4, 2])
    assert torch.equal(leaf(stacked, path)[:, 1], torch.arange(8.0).view(4, 2) + 10)
    catted = torch.cat([td, td], 0)
    assert leaf(catted, path).shape == (8, 2)
    lazy = lazy_stack([td, td], 0)
    assert leaf(lazy, path).shape == (2, 4, 2)


def test_stack_error_from_the_deepest_level():
    td, path = chain()
    other = td.clone()
    other.get(path).rename_key_("leaf", "other")
    with pytest.raises(KeyError):
        torch.stack([td, other], 0)


def test_math():
    td, path = chain()
    assert torch.equal(leaf(td + 1, path), torch.arange(8.0).view(4, 2) + 1)
    assert torch.equal(leaf(td * td, path), torch.arange(8.0).view(4, 2) ** 2)
    copy = td.clone()
    copy += 1
    assert torch.equal(leaf(copy, path), torch.arange(8.0).view(4, 2) + 1)
    assert torch.equal(leaf(td, path), torch.arange(8.0).view(4, 2))  # the clone is deep


def test_repr_is_indented_per_level():
    td, path = chain()
    text = repr(td)
    lines = text.split("\n")
    assert lines[0] == "TensorDict("
    # each level's entries sit 8 spaces right of its parent's
    assert " " * (8 * (DEPTH + 1)) + "leaf: Tensor(shape=torch.Size([4, 2])" in text
    assert text.count("TensorDict(") == DEPTH + 1
    assert lines[-1] == "    is_shared=False)"


def test_to_dict_and_from_dict():
    td, path = chain()
    d = td.to_dict()
    node = d
    for name in path:
        node = node[name]
    assert torch.equal(node["leaf"], torch.arange(8.0).view(4, 2))
    back = TensorDict.from_dict(d, batch_size=[4])
    assert torch.equal(leaf(back, path), torch.arange(8.0).view(4, 2))
    assert (back == td).all()  # noqa: SIM300


@pytest.mark.parametrize("depth", [DEPTH, 3_000])
def test_construction_from_a_nested_dict(depth):
    path = tuple(f"l{i}" for i in range(depth))
    td = TensorDict(nested_dict(depth), batch_size=[4])
    assert torch.equal(leaf(td, path), torch.arange(8.0).view(4, 2))
    assert torch.equal(td.get(path[:-1] + ("x",)), torch.full((4,), depth - 1.0))
    assert list(td.get(path[:-1]).keys()) == [path[-1], "x"]  # the source's order
    td = TensorDict.from_dict(nested_dict(depth), auto_batch_size=True)
    assert td.batch_size == torch.Size([4])
    assert torch.equal(leaf(td, path), torch.arange(8.0).view(4, 2))


def test_construction_error_names_the_deep_key():
    d: dict = {"bad": torch.zeros(3)}
    for i in reversed(range(DEPTH)):
        d = {f"l{i}": d}
    with pytest.raises(RuntimeError, match=r"'l999', 'bad'\)"):
        TensorDict(d, batch_size=[4])


def test_clone_to_keys_and_lock():
    td, path = chain()
    assert torch.equal(leaf(td.clone(), path), leaf(td, path))
    as_double = td.to(torch.float64)
    assert leaf(as_double, path).dtype == torch.float64
    moved = td.to("cpu")
    assert moved.get(path).device == torch.device("cpu")
    keys = list(td.keys(include_nested=True, leaves_only=True))
    assert path + ("leaf",) in keys and len(keys) == DEPTH + 1
    flat = td.flatten_keys(".")
    assert torch.equal(flat.get(".".join(path + ("leaf",))), leaf(td, path))
    td.lock_()
    assert td.get(path).is_locked
    td.unlock_()
    assert not td.get(path).is_locked
    assert not td.is_shared()


@pytest.mark.parametrize("depth", [DEPTH, 3_000])
def test_shape_ops(depth):
    td, path = chain(depth)
    out = td.reshape(2, 2)
    assert out.get(path).batch_size == torch.Size([2, 2])
    assert torch.equal(leaf(out, path), torch.arange(8.0).view(2, 2, 2))
    out = td.unsqueeze(0)
    assert leaf(out, path).shape == (1, 4, 2)
    out = td.unsqueeze(-1).permute(1, 0)
    assert out.get(path).batch_size == torch.Size([1, 4])
    assert torch.equal(leaf(out, path)[0], torch.arange(8.0).view(4, 2))


def test_deep_stack_keeps_the_errors_and_fallbacks_of_each_level():
    td, path = chain()
    # a nested level whose leaves do not stack: the error names that key
    other = td.clone()
    other.set(path + ("leaf",), torch.zeros(4, 3))
    with pytest.raises(RuntimeError, match="cannot stack key 'leaf'"):
        torch.stack([td, other], 0)
    # maybe_dense_stack: that level (and the ones above) become lazy stacks instead
    from tensordict import stack as td_stack

    out = td_stack([td, other], 0, maybe_dense_stack=True)
    assert out.batch_size == torch.Size([2, 4])
    got = out.get(path + ("leaf",), as_list=True)
    assert [t.shape for t in got] == [torch.Size([4, 2]), torch.Size([4, 3])]
    # negative dims are normalised once, at the top
    assert leaf(torch.stack([td, td], -1), path).shape == (4, 2, 2)
    assert leaf(torch.cat([td, td], -1), path).shape == (8, 2)


@pytest.mark.parametrize("depth", [DEPTH, 3_000])
def test_in_place_leaf_ops(depth):
    """zero_/fill_/requires_grad_/detach_ (apply_leaves_) and apply_/named_apply list the
    leaves without recursion, then touch each once."""
    td, path = chain(depth)
    td.apply_(lambda x: x.add_(1))
    assert torch.equal(td.get(path + ("leaf",)), torch.arange(8.0).view(4, 2) + 1)
    assert torch.equal(td.get(path[:-1] + ("x",)), torch.full((4,), float(depth - 1) + 1))
    names = td.named_apply(lambda k, x: x, nested_keys=True).keys(True, True)
    assert path + ("leaf",) in set(names)
    td = td.clone()  # chain()'s deepest leaf is a view, which detach_ refuses
    td.requires_grad_()
    assert td.get(path + ("leaf",)).requires_grad
    td.detach_()
    assert not td.get(path + ("leaf",)).requires_grad
    td.zero_()
    assert not td.get(path + ("leaf",)).any() and not td["x"].any()
    td.fill_(path[0], 3.0)  # every leaf below the first level
    assert bool((td.get(path + ("leaf",)) == 3).all()) and not td["x"].any()


def test_apply_leaves_order_with_lazy_stack_and_tensorclass():
    pytest.importorskip("tensordict.tensorclass")  # td-core alone has no tensorclass
    from tensordict import tensorclass

    @tensorclass
    class Pair:
        u: torch.Tensor

    seen = []
    td = TensorDict(
        {
            "a": torch.zeros(2),
            "s": lazy_stack([TensorDict({"v": torch.zeros(())}, []), TensorDict({"v": torch.zeros(())}, [])]),
            "t": Pair(u=torch.zeros(2, 3), batch_size=[2]),
            "z": torch.zeros(2, 1),
        },
        [2],
    )
    td.apply_leaves_(lambda x: seen.append(tuple(x.shape)) or x.add_(1))
    assert seen == [(2,), (), (), (2, 3), (2, 1)]
    assert bool((td["t"].u == 1).all()) and bool((td["s", "v"] == 1).all())


def test_unbind_split_chunk_and_iteration():
    td, path = chain()
    deepest = torch.arange(8.0).view(4, 2)
    parts = td.unbind(0)
    assert len(parts) == 4 and torch.equal(leaf(parts[2], path), deepest[2])
    assert leaf(parts[2], path).data_ptr() == leaf(td, path)[2].data_ptr()  # views, as unbind gives
    sizes = [p.batch_size[0] for p in td.split([1, 3])]
    assert sizes == [1, 3] and torch.equal(leaf(td.split([1, 3])[1], path), deepest[1:])
    assert [c.batch_size[0] for c in td.chunk(2)] == [2, 2]
    assert [t.batch_size[0] for t in td.tensor_split([1, 1, 3])] == [1, 0, 2, 1]
    rows = list(td)
    assert len(rows) == 4 and torch.equal(leaf(rows[3], path), deepest[3])


def test_select_exclude_and_update_along_a_deep_key():
    td, path = chain()
    deep_key = path + ("leaf",)
    picked = td.select(deep_key)
    assert list(picked.keys(True, True)) == [deep_key]
    dropped = td.exclude(deep_key)
    assert deep_key not in dropped.keys(True, True) and path[:-1] + ("x",) in dropped.keys(True, True)
    other, _ = chain()
    other.set(deep_key, torch.ones(4, 2))
    other.set(path + ("new",), torch.zeros(4))
    td.update(other)
    assert torch.equal(td.get(deep_key), torch.ones(4, 2)) and path + ("new",) in td.keys(True, True)


def test_write_at_index_share_memory_and_filter_empty():
    td, path = chain()
    row = td[1].clone()
    row.set(path + ("leaf",), torch.full((2,), 7.0))
    td[2] = row  # planned with an explicit stack, then written
    assert torch.equal(leaf(td, path)[2], torch.full((2,), 7.0))
    assert torch.equal(leaf(td, path)[1], torch.arange(8.0).view(4, 2)[1])
    td.share_memory_()
    assert leaf(td, path).is_shared() and td.is_locked
    td = TensorDict(batch_size=[])
    td.set(path + ("empty",), TensorDict())
    td.set(path[:10] + ("kept",), torch.zeros(()))
    td.filter_empty_()
    assert list(td.keys(True, True)) == [path[:10] + ("kept",)]


def test_reductions():
    td, path = chain()
    total = td.sum()
    assert torch.equal(leaf(total, path), torch.arange(8.0).sum())
    mean = td.mean(0)
    assert torch.equal(leaf(mean, path), torch.arange(8.0).view(4, 2).mean(0))
    values, indices = td.max(0)
    assert torch.equal(leaf(indices, path), torch.full((2,), 3))
    assert leaf(td.std(0, keepdim=True), path).shape == (1, 2)


def test_pad_out_of_place_and_in_place():
    from tensordict import pad

    td, path = chain()
    padded = pad(td, [1, 0], value=-1.0)
    assert padded.batch_size == (5,)
    assert torch.equal(leaf(padded, path)[0], torch.full((2,), -1.0))
    assert torch.equal(leaf(padded, path)[1:], torch.arange(8.0).view(4, 2))
    deepest = td.get(path)
    same = pad(td, [0, 2], inplace=True)
    assert same is td and td.get(path) is deepest  # nested TensorDicts keep their identity
    assert deepest.batch_size == (6,) and torch.equal(leaf(td, path)[4:], torch.zeros(2, 2))


def test_empty_recurse_namedtuple_filter_and_densify():
    td, path = chain()
    empty = td.empty(recurse=True)
    assert list(empty.keys(True, True)) == []  # no leaves, every level kept
    assert empty.get(path).batch_size == (4,)
    nt = td.to_namedtuple()
    node = nt
    for name in path:
        node = getattr(node, name)
    assert torch.equal(node.leaf, torch.arange(8.0).view(4, 2))
    td.set(path + ("note",), "text")
    filtered = td.filter_non_tensor_data()
    assert (path + ("note",)) not in filtered.keys(True) and (path + ("leaf",)) in filtered.keys(True)
    td.set(path + ("ragged",), lazy_stack([TensorDict(a=torch.zeros(i + 1)) for i in range(4)]))
    dense = td.densify(layout=torch.jagged)
    assert type(dense.get(path + ("ragged",))) is TensorDict
    assert dense.get(path + ("ragged", "a")).is_nested
