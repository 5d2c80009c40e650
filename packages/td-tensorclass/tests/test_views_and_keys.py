"""Constructor arity, non-tensor keys, selections to a TensorDict, shape ops used as
context managers, gradients through ``torch.autograd.grad`` and ragged reads of a
lazy stack, on tensorclasses."""

import pickle
import warnings
from typing import ClassVar

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict, tensorclass


@tensorclass
class Sample:
    obs: torch.Tensor
    label: str
    extra: torch.Tensor | None = None


class TestConstructorArity:
    def test_classvars_are_not_positional(self):
        @tensorclass
        class WithClassVars:
            a: torch.Tensor
            b: ClassVar[str] = "constant"
            c: torch.Tensor
            d: ClassVar[int] = 42

        obj = WithClassVars(torch.ones(2, 3), torch.zeros(2, 3), batch_size=[2, 3])
        assert obj.b == "constant" and obj.d == 42
        assert (obj.c == 0).all()
        with pytest.raises(TypeError, match="takes 3 positional arguments but 5 were given"):
            WithClassVars(torch.ones(2, 3), "constant", torch.zeros(2, 3), 42, batch_size=[2, 3])

    def test_surplus_positional_with_defaults(self):
        with pytest.raises(TypeError, match="takes from 3 to 4 positional arguments but 5 were given"):
            Sample(torch.zeros(2), "a", torch.zeros(2), "surplus", batch_size=[2])

    def test_signature_hides_the_surplus_catcher(self):
        import inspect

        params = list(inspect.signature(Sample).parameters)
        assert params == ["obs", "label", "extra", "batch_size", "device", "names"]


class TestIsNonTensor:
    def test_fields(self):
        s = Sample(obs=torch.randn(4), label="cat", batch_size=[])
        assert s.is_non_tensor("label")
        assert not s.is_non_tensor("obs")
        assert s.is_non_tensor("extra")  # holds None, kept outside the TensorDict

    def test_unknown_field(self):
        s = Sample(obs=torch.randn(4), label="cat", batch_size=[])
        with pytest.raises(KeyError, match="no field 'nope'"):
            s.is_non_tensor("nope")

    def test_nested_key(self):
        @tensorclass
        class Outer:
            inner: Sample
            meta: TensorDict

        inner = Sample(obs=torch.zeros(3), label="x", batch_size=[3])
        meta = TensorDict(batch_size=[3])
        meta.set_non_tensor("note", "hello")
        outer = Outer(inner=inner, meta=meta, batch_size=[3])
        assert outer.is_non_tensor(("inner", "label"))
        assert not outer.is_non_tensor(("inner", "obs"))
        assert outer.is_non_tensor(("meta", "note"))


class TestSelectAsTensorDict:
    def test_plain_tensordict_without_other_fields(self):
        s = Sample(obs=torch.randn(4), label="cat", extra=torch.ones(1), batch_size=[])
        kept = s.select("obs")
        assert type(kept) is Sample and kept.label is None
        td = s.select("obs", "extra", as_tensordict=True)
        assert type(td) is TensorDict
        assert set(td.keys()) == {"obs", "extra"}
        assert td["obs"] is s.obs

    def test_non_tensor_field_selected(self):
        s = Sample(obs=torch.randn(4), label="cat", batch_size=[])
        td = s.select("label", as_tensordict=True)
        assert td["label"] == "cat"


class TestShapeOpContext:
    def test_in_place_writes_reach_the_source(self):
        s = Sample(obs=torch.ones(3, 4, 5), label="x", batch_size=[3, 4])
        with s.view(-1) as flat:
            assert isinstance(flat, Sample) and flat.batch_size == (12,)
            flat.obs *= 0
        assert (s.obs == 0).all()

    def test_new_field_written_back_and_visible(self):
        s = Sample(obs=torch.ones(3, 4), label="x", batch_size=[3, 4])
        assert s.extra is None
        with s.view(-1) as flat:
            flat.extra = torch.full((12, 2), 7.0)
        assert s.extra is not None
        assert s.extra.shape == (3, 4, 2)
        assert (s.extra == 7).all()
        assert "extra" not in s._non_tensordict  # one home per field

    def test_permute_context(self):
        s = Sample(obs=torch.zeros(2, 3), label="x", batch_size=[2, 3])
        with s.permute(1, 0) as p:
            p.extra = torch.arange(6.0).reshape(3, 2)
        assert s.extra.shape == (2, 3)
        assert (s.extra == torch.arange(6.0).reshape(3, 2).T).all()

    def test_result_still_pickles_without_its_source(self):
        s = Sample(obs=torch.zeros(2, 3), label="x", batch_size=[2, 3])
        flat = s.view(-1)
        clone = pickle.loads(pickle.dumps(flat))
        assert clone.batch_size == (6,)
        assert "_tc_view_source" not in clone.__dict__


class TestAutogradGrad:
    def test_grad_of_selected_fields(self):
        a = Sample(obs=torch.randn(3, requires_grad=True), label="s", extra=torch.randn(3), batch_size=[3])
        b = a * 3
        grads = torch.autograd.grad(b.select("obs"), a.select("obs"), torch.ones_like(b.select("obs")))
        assert type(grads) is Sample
        assert (grads.obs == 3).all()


class TestRaggedReads:
    def test_lazy_stack_reads_do_not_warn(self):
        @tensorclass
        class Ragged:
            X: torch.Tensor
            y: torch.Tensor
            z: str

        stack = LazyStackedTensorDict(
            TensorDict(X=torch.ones(3), y=0, z="a"),
            TensorDict(X=torch.ones(2) * 2, y=0, z="a"),
        )
        obj = Ragged.from_tensordict(stack)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            as_list = obj.get("X", as_list=True)
            nested = obj.get("X", as_nested_tensor=True)
            padded = obj.get("X", as_padded_tensor=True)
        assert [t.shape for t in as_list] == [(3,), (2,)]
        assert nested.is_nested
        assert padded.shape == (2, 3) and padded[1, -1] == 0
