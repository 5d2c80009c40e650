"""Lazy stacks and non-tensor data: get_nestedtensor, contiguous(canonical=),
new_*(empty_lazy=), factories over NonTensorStack leaves."""

from __future__ import annotations

import pytest
import torch

from tensordict import LazyStackedTensorDict, NonTensorStack, TensorDict, lazy_stack


def _ragged(stack_dim: int = 0) -> LazyStackedTensorDict:
    tds = [TensorDict(a=torch.zeros(3, 2), b=torch.ones(3, 1), batch_size=[3]) for _ in range(2)]
    tds[1]["a"] = torch.ones(3, 5)
    return lazy_stack(tds, stack_dim)


class TestGetNestedTensor:
    def test_ragged_leaf(self) -> None:
        s = _ragged()
        with pytest.raises(RuntimeError, match="Failed to stack tensors within a tensordict"):
            s.get("a")
        nt = s.get_nestedtensor("a")
        assert nt.is_nested
        parts = nt.unbind(0)
        assert [p.shape for p in parts] == [torch.Size([3, 2]), torch.Size([3, 5])]
        assert (parts[1] == 1).all()

    def test_jagged_layout(self) -> None:
        s = lazy_stack([TensorDict(a=torch.zeros(2)), TensorDict(a=torch.ones(4))])
        nt = s.get_nestedtensor("a", layout=torch.jagged)
        assert nt.layout == torch.jagged
        assert nt.unbind(0)[1].shape == torch.Size([4])

    def test_default_for_missing_key(self) -> None:
        s = _ragged()
        assert s.get_nestedtensor("missing", None) is None
        with pytest.raises(KeyError):
            s.get_nestedtensor("missing")

    def test_stack_dim_not_zero(self) -> None:
        s = _ragged(stack_dim=1)
        with pytest.raises(RuntimeError, match="can only be called when the stack_dim is 0"):
            s.get_nestedtensor("a")


class TestContiguousCanonical:
    @pytest.mark.parametrize("canonical", [False, True])
    def test_keeps_non_tensor_stack(self, canonical: bool) -> None:
        s = lazy_stack([TensorDict(q=f"s{i}", x=torch.zeros(())) for i in range(3)])
        dense = s.contiguous(canonical=canonical)
        assert not isinstance(dense, LazyStackedTensorDict)
        assert isinstance(dense.get("q"), NonTensorStack)
        assert dense.get("q").tolist() == ["s0", "s1", "s2"]
        assert dense[1]["q"] == "s1"

    def test_inplace_is_refused(self) -> None:
        s = lazy_stack([TensorDict(a=torch.zeros(3), batch_size=[3]) for _ in range(2)])
        with pytest.raises(NotImplementedError, match="contiguous"):
            s.contiguous(inplace=True)


class TestEmptyLazy:
    def test_nested_lazy_stack_is_emptied(self) -> None:
        td = TensorDict(
            dense=torch.randn(1, 6),
            sparse=LazyStackedTensorDict(
                *[TensorDict(x=torch.ones(1), batch_size=[1]) for _ in range(6)], stack_dim=1
            ),
            batch_size=[1, 6],
        )
        for size in [(6, 1), (1, 6, 1), (1, 40, 1)]:
            out = td.new_empty(size, empty_lazy=True)
            assert out["dense"].shape == torch.Size(size)
            sparse = out["sparse"]
            assert isinstance(sparse, LazyStackedTensorDict)
            assert sparse.batch_size == torch.Size(size)
            assert sparse.is_empty()
        # without the flag the lazy stack gives a dense leaf
        dense = td.new_zeros((6, 1))
        assert not isinstance(dense["sparse"], LazyStackedTensorDict)
        assert (dense["sparse", "x"] == 0).all()

    def test_non_tensor_stack_leaf(self) -> None:
        td = TensorDict(a=NonTensorStack("u", "v").unsqueeze(-1), batch_size=[2])
        for make in (td.new_empty, td.new_zeros, td.new_ones):
            out = make((5,), empty_lazy=True).get("a")
            assert isinstance(out, NonTensorStack)
            assert out.batch_size == torch.Size([5, 1])
            assert out.tolist() == [["u"]] * 5

    def test_factories_on_non_tensor_stack_never_read_a_made_up_index(self) -> None:
        td = TensorDict(a=NonTensorStack("u"), batch_size=[1])
        assert td.new_ones(3).get("a").tolist() == ["u"] * 3
        assert td.new_full((4,), 7).get("a").tolist() == ["u"] * 4
        assert td.new_empty(2).get("a").tolist() == ["u"] * 2

    def test_fill_by_masked_write(self) -> None:
        inner = TensorDict(b=NonTensorStack("a", "b", "c").unsqueeze(-1), batch_size=[3])
        td = TensorDict(a=inner, batch_size=[3]).to_lazystack()
        out = td.new_zeros((4,), empty_lazy=True)
        assert isinstance(out, LazyStackedTensorDict)
        assert out.batch_size == torch.Size([4])
        out[torch.tensor([True, True, False, True])] = td
        assert out.get(("a", "b")).tolist() == [["a"], ["b"], ["a"], ["c"]]

    def test_elements_are_distinct(self) -> None:
        td = lazy_stack([TensorDict(sub=TensorDict(y=torch.zeros(2), z="q")) for _ in range(2)])
        out = td.new_empty(3, empty_lazy=True)
        assert len({id(t) for t in out.tensordicts}) == 3
        out[0]["sub", "w"] = torch.ones(())
        assert "w" not in out[1]["sub"].keys()
        assert out[2]["sub", "z"] == "q"


class TestNonTensorBitwise:
    def test_non_tensor_data_operators(self) -> None:
        from tensordict import NonTensorData

        t = NonTensorData(True, batch_size=[2])
        assert (t ^ t).data is False
        assert (t | NonTensorData(False)).data is True
        assert (t & False).data is False
        assert (t ^ t).batch_size == torch.Size([2])

    def test_tensordict_xor_or_combine_non_tensor_leaves(self) -> None:
        from tensordict import NonTensorData

        td = TensorDict({"x": torch.ones((), dtype=torch.bool), "n": {"flag": NonTensorData(True), "k": NonTensorData(6)}})
        assert (td ^ td).get_non_tensor(("n", "flag")) is False
        assert (td | td).get_non_tensor(("n", "flag")) is True
        assert (td ^ td).get_non_tensor(("n", "k")) == 0
        assert not (td ^ td)["x"]
        # other ops pass non-tensor data through unchanged
        assert (td.exclude("x") + 1).get_non_tensor(("n", "k")) == 6

    def test_uncombinable_data_names_the_key(self) -> None:
        td = TensorDict(s="text", x=torch.zeros((), dtype=torch.bool))
        with pytest.raises(TypeError, match="'s'"):
            td | td


class TestNonTensorDataSetitem:
    def test_write_reaches_the_stack(self) -> None:
        s = NonTensorStack("a", "b")
        s[1][True] = NonTensorStack("z")
        assert s.tolist() == ["a", "z"]
        s[0][...] = "y"
        assert s.tolist() == ["y", "z"]

    def test_partial_write_of_another_object_raises(self) -> None:
        from tensordict import NonTensorData

        d = NonTensorData("a", batch_size=[3])
        d[:2] = "a"  # the same object: fine
        with pytest.raises(RuntimeError, match="one object for the whole batch"):
            d[:2] = "b"
        d[:] = "b"
        assert d.data == "b"

    def test_stack_holding_different_objects_raises(self) -> None:
        from tensordict import NonTensorData

        d = NonTensorData("a", batch_size=[2])
        with pytest.raises(RuntimeError, match="different objects"):
            d[:] = NonTensorStack("x", "y")

    def test_setitem_through_an_unsqueezed_index(self) -> None:
        s = NonTensorStack("0", "1")
        s[:, None] = NonTensorStack(NonTensorStack("2", "3"), stack_dim=1)
        assert s.tolist() == ["2", "3"]


class TestDenseStackOfHeterogeneousLazy:
    @pytest.mark.parametrize("dim", [0, 1, 2, 3])
    @pytest.mark.parametrize("inner_dim", [0, 1, 2])
    def test_inner_stacks_stay_lazy(self, dim: int, inner_dim: int) -> None:
        from tensordict import dense_stack_tds

        bs = (2, 3)
        a = TensorDict(x=torch.zeros(*bs, 3), batch_size=bs)
        b = TensorDict(x=torch.zeros(*bs, 4), y=torch.zeros(*bs, 1), batch_size=bs)
        inner = lazy_stack([a, b], inner_dim)
        outer0 = TensorDict(lazy=inner, batch_size=inner.batch_size)
        outer1 = outer0.clone().apply_(lambda t: t + 1)
        out = dense_stack_tds(lazy_stack([outer0, outer1], dim))
        assert type(out) is TensorDict
        got = out["lazy"]
        assert isinstance(got, LazyStackedTensorDict)
        assert got.stack_dim == (inner_dim if dim > inner_dim else inner_dim + 1)
        assert "y" not in got.tensordicts[0].keys()
        assert "y" in got.tensordicts[1].keys()
        for i in range(2):
            assert (out[(slice(None),) * dim + (i,)] == i).all()


class TestPadNonTensor:
    def test_non_tensor_data_grows_into_a_stack(self) -> None:
        from tensordict import NonTensorData, pad

        td = TensorDict(meta=NonTensorData("m", batch_size=[3]), x=torch.ones(3), batch_size=[3])
        assert pad(td, [0, 2]).get("meta").tolist() == ["m", "m", "m", None, None]
        # cropping only keeps one object
        assert isinstance(pad(td, [0, -1]).get("meta"), NonTensorData)

    def test_inplace_keeps_the_stack_object(self) -> None:
        from tensordict import pad

        td = TensorDict(x=torch.arange(3.0), s=NonTensorStack("a", "b", "c"), batch_size=[3])
        s = td.get("s")
        assert pad(td, [1, 0], inplace=True) is td
        assert td.get("s") is s
        assert s.tolist() == [None, "a", "b", "c"]

    def test_top_level_stack_and_data(self) -> None:
        from tensordict import NonTensorData, pad

        s = NonTensorStack("a", "b")
        assert pad(s, [1, 1]).tolist() == [None, "a", "b", None]
        assert pad(s, [0, 1], inplace=True) is s
        assert s.tolist() == ["a", "b", None]
        with pytest.raises(RuntimeError, match="cannot preserve the identity"):
            pad(NonTensorData("a", batch_size=[2]), [0, 1], inplace=True)

    def test_inplace_lazy_stack_keeps_its_tensordicts(self) -> None:
        from tensordict import pad

        tds = [TensorDict(x=torch.ones(4) * i, s=NonTensorStack(*"wxyz"), batch_size=[4]) for i in range(2)]
        lst = lazy_stack(tds)
        out = pad(lst, [1, 0, 0, 2], value=7.0, inplace=True)
        assert out is lst
        assert out.batch_size == torch.Size([3, 6])
        assert out.tensordicts[1] is tds[0] and out.tensordicts[2] is tds[1]
        assert tds[1]["x"].tolist() == [1, 1, 1, 1, 7, 7]
        assert out.get("s").tolist()[0] == [None] * 6
        assert out.get("s").tolist()[2] == ["w", "x", "y", "z", None, None]


class TestLazyUpdateKwargsAndMaybeDense:
    def test_update_kwargs(self) -> None:
        s = lazy_stack([TensorDict(a=torch.zeros(())) for _ in range(3)])
        s.update(b=torch.ones(3))
        assert (s["b"] == 1).all() and (s.tensordicts[2]["b"] == 1)
        s.update_(a=torch.ones(3))
        assert (s["a"] == 1).all()
        with pytest.raises(KeyError, match="was not found"):
            s.update_(c=torch.ones(3))

    def test_maybe_dense_stack_of_different_batch_sizes_is_lazy(self) -> None:
        from tensordict import maybe_dense_stack

        a = TensorDict(x=torch.zeros(2, 3), batch_size=[2, 3])
        b = TensorDict(x=torch.zeros(2, 4), batch_size=[2, 4])
        out = maybe_dense_stack([a, b], 2)
        assert isinstance(out, LazyStackedTensorDict)
        assert out.batch_size == torch.Size([2, -1, 2])
        with pytest.raises(RuntimeError, match="same batch_size"):
            torch.stack([a, b])


def _write_threes(td: TensorDict) -> None:
    from tensordict import NonTensorData

    td[1::2] = TensorDict({"val": NonTensorData(data=3, batch_size=[5])}, [5])


class TestSharedNonTensorStack:
    def _td(self) -> TensorDict:
        from tensordict import NonTensorData

        td = TensorDict({"val": NonTensorData(data=0, batch_size=[10])}, [10])
        td[1::2] = TensorDict({"val": NonTensorData(data=1, batch_size=[5])}, [5])
        return td

    def test_share_memory_moves_the_objects(self) -> None:
        td = self._td()
        stack = td.get("val")
        td.share_memory_()
        assert td.get("val") is stack and stack.is_shared()
        assert stack.tolist() == [0, 1] * 5
        td.update_at_(TensorDict({"val": NonTensorStack(*[2] * 5)}, [5]), slice(1, None, 2))
        assert td.get("val").tolist() == [0, 2] * 5

    def test_a_pickled_copy_writes_into_the_same_memory(self) -> None:
        from multiprocessing.reduction import ForkingPickler

        import torch.multiprocessing  # noqa: F401 - registers the shared-tensor reductions

        td = self._td().share_memory_()
        copy = ForkingPickler.loads(ForkingPickler.dumps(td))
        _write_threes(copy)
        assert td.get("val").tolist() == [0, 3] * 5

    def test_a_forked_worker_writes_reach_the_parent(self) -> None:
        import torch.multiprocessing as mp

        td = self._td().share_memory_()
        proc = mp.get_context("fork").Process(target=_write_threes, args=(td,))
        proc.start()
        proc.join(60)
        assert proc.exitcode == 0
        assert td.get("val").tolist() == [0, 3] * 5

    def test_unshared_stack_pickles_as_a_list(self) -> None:
        import pickle

        s = NonTensorStack("a", "b")
        back = pickle.loads(pickle.dumps(s))
        assert not back.is_shared() and back.tolist() == ["a", "b"]

    def test_too_large_object_raises(self) -> None:
        s = NonTensorStack("a", "b").share_memory_()
        with pytest.raises(RuntimeError, match="slots hold"):
            s[0] = "x" * 10_000
        assert s.tolist() == ["a", "b"]


def test_auto_batch_size_refuses_a_locked_tensordict() -> None:
    td = TensorDict(a=torch.zeros(3, 4)).lock_()
    with pytest.raises(RuntimeError, match="locked"):
        td.auto_batch_size_()
    assert td.batch_size == torch.Size([])
    assert td.unlock_().auto_batch_size_().batch_size == torch.Size([3, 4])


class TestLazyListWritesAndMixedBatch:
    def test_list_is_split_over_the_stack(self) -> None:
        s = LazyStackedTensorDict(TensorDict(), TensorDict())
        s["a"] = ["0", "1"]
        assert s[0]["a"] == "0" and s[1]["a"] == "1"
        s["b"] = [torch.full((2,), 2.0), torch.ones(1)]
        assert s.get("b", as_padded_tensor=True).tolist() == [[2, 2], [1, 0]]

    def test_nested_list_follows_the_batch_positions(self) -> None:
        s = lazy_stack([lazy_stack([TensorDict() for _ in range(2)]) for _ in range(3)], 1)
        sizes = [[1, 2, 3], [4, 5, 6]]
        s["a"] = [[torch.ones(sizes[i][j]) for j in range(3)] for i in range(2)]
        assert [[s[i, j]["a"].shape[0] for j in range(3)] for i in range(2)] == sizes

    def test_list_of_another_length_is_one_value(self) -> None:
        s = lazy_stack([TensorDict(), TensorDict()])
        s["c"] = ["x", "y", "z"]
        assert s[0]["c"] == ["x", "y", "z"] and s[1]["c"] == ["x", "y", "z"]

    def test_index_of_mixed_batch_sizes_keeps_minus_one(self) -> None:
        s = LazyStackedTensorDict(TensorDict(batch_size=[3, 4]), TensorDict(batch_size=[3, 5]), stack_dim=1)
        assert s.shape == torch.Size([3, 2, -1])
        assert s[0].shape == torch.Size([2, -1])
        assert s[:, :, :2].shape == torch.Size([3, 2, 2])
        assert s[:, 0, :].shape == torch.Size([3, 4])


class TestMaybeDenseStackOfLazyStacks:
    def _pair(self) -> tuple:
        from tensordict import maybe_dense_stack

        td0 = TensorDict(a=torch.zeros(3), b=torch.zeros(4), s="x")
        td1 = TensorDict(b=torch.zeros(5), a=torch.zeros(3), s="x")
        return maybe_dense_stack([td0, td1]), td0, td1

    def test_same_keys_give_dense_parts(self) -> None:
        from tensordict import maybe_dense_stack

        a, _, _ = self._pair()
        b = a.clone()
        out = maybe_dense_stack([a, b])
        assert isinstance(out, LazyStackedTensorDict) and out.stack_dim == 1
        assert all(type(t) is TensorDict for t in out.tensordicts)
        assert out.tensordicts[1]["b"].shape == (2, 5)

    def test_different_keys_keep_every_part_lazy(self) -> None:
        from tensordict import maybe_dense_stack

        a, td0, _ = self._pair()
        b = a.clone()
        del td0["a"]  # now a's keys differ from b's
        out = maybe_dense_stack([a, b])
        assert all(isinstance(t, LazyStackedTensorDict) for t in out.tensordicts)

    def test_keys_of_a_nested_heterogeneous_stack_stack_no_leaf(self) -> None:
        s = lazy_stack([TensorDict(x=torch.zeros(3), y={"z": torch.zeros(2)}), TensorDict(x=torch.zeros(4), y={"z": torch.zeros(2)})])
        td = TensorDict(a=s, b=torch.zeros(()))
        assert list(td.keys(True)) == [("a", "x"), ("a", "y", "z"), ("a", "y"), "a", "b"]  # as tensordict 0.15
        assert len(td.keys(True, True)) == 3


def _record_write(stack: NonTensorStack) -> None:
    _WRITES.append(stack.tolist())


_WRITES: list = []


class TestWriteHook:
    def test_hook_runs_after_element_writes(self) -> None:
        from tensordict.ext import set_write_hook

        _WRITES.clear()
        td = TensorDict(s=NonTensorStack("a", "b", "c"), batch_size=[3])
        set_write_hook(td.get("s"), _record_write)
        td[1:] = TensorDict(s=NonTensorStack("y", "z"), batch_size=[2])
        assert _WRITES == [["a", "y", "z"]]
        set_write_hook(td.get("s"), None)
        td[0] = TensorDict(s="q")
        assert len(_WRITES) == 1

    def test_hook_travels_with_pickle_not_with_copies(self) -> None:
        import pickle

        from tensordict.ext import set_write_hook

        _WRITES.clear()
        s = set_write_hook(NonTensorStack("a", "b"), _record_write)
        back = pickle.loads(pickle.dumps(s))
        back[0] = "x"
        assert _WRITES == [["x", "b"]]
        s.clone()[0] = "no hook"
        assert len(_WRITES) == 1
