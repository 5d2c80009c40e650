"""td-nn names of tensordict 0.15.3 (issue 31): TruncatedStandardNormal, TruncatedNormal(a=, b=)
and TensorClassModuleWrapper; values read from the same calls on tensordict 0.15.3."""

import pytest
import torch

from tensordict import TensorDict
from tensordict.nn import TensorClassModuleBase, TensorClassModuleWrapper
from tensordict.nn.distributions import TruncatedNormal
from tensordict.nn.distributions.truncated_normal import TruncatedStandardNormal


def test_truncated_standard_normal_values():
    dist = TruncatedStandardNormal(a=torch.zeros(2), b=torch.tensor([1.0, 2.0]))
    torch.testing.assert_close(dist.mean, torch.tensor([0.4599, 0.7228]), atol=1e-4, rtol=0)
    torch.testing.assert_close(dist.auc, torch.tensor([0.3413, 0.4772]), atol=1e-4, rtol=0)
    d = TruncatedStandardNormal(torch.tensor([-1.0]), torch.tensor([2.0]))
    for got, want in [
        (d.variance, 0.5198), (d.entropy(), 1.0050), (d.log_prob(torch.tensor([0.5])), -0.8438),
        (d.cdf(torch.tensor([0.5])), 0.6509), (d.icdf(torch.tensor([0.5])), 0.1712),
    ]:
        torch.testing.assert_close(got, torch.tensor([want]), atol=1e-4, rtol=0)
    sample = d.rsample((100,))
    assert ((sample >= -1) & (sample <= 2)).all()
    with pytest.raises(ValueError):
        TruncatedStandardNormal(1.0, 0.0)


def test_truncated_normal_a_b_keywords():
    d = TruncatedNormal(torch.tensor([1.0]), torch.tensor([2.0]), a=torch.tensor([-1.0]), b=torch.tensor([2.0]))
    torch.testing.assert_close(d.mean, torch.tensor([0.5867]), atol=1e-4, rtol=0)
    torch.testing.assert_close(d.variance, torch.tensor([0.6911]), atol=1e-4, rtol=0)
    torch.testing.assert_close(d.log_prob(torch.tensor([0.5])), torch.tensor([-1.0137]), atol=1e-4, rtol=0)
    assert d.a.tolist() == [-1.0] and d.b.tolist() == [0.5]  # standard units
    torch.testing.assert_close(TruncatedNormal(loc=5.0, scale=1.0, a=4.0, b=6.0).mean, torch.tensor(5.0))


def _tensorclass_module():
    """A TensorClassModuleBase subclass over two tensorclasses (needs td-tensorclass)."""
    TensorClass = pytest.importorskip("tensordict.tensorclass").TensorClass

    class _In(TensorClass):
        x: torch.Tensor

    class _Out(TensorClass):
        y: torch.Tensor

    class _AddOne(TensorClassModuleBase[_In, _Out]):
        def forward(self, data: _In) -> _Out:
            return _Out(y=data.x + 1, batch_size=data.batch_size)

    return _AddOne()


def test_tensorclass_module_wrapper():
    module = _tensorclass_module()
    wrapper = module.as_td_module()
    assert isinstance(wrapper, TensorClassModuleWrapper) and wrapper.tc_module is module
    td = TensorDict(x=torch.zeros(3), batch_size=[3])
    out = TensorClassModuleWrapper(module)(td)
    assert list(out.keys()) == ["y"] and out["y"].tolist() == [1.0, 1.0, 1.0]
    assert "y" not in td.keys()


# ---------------------------------------------------------------- silent differences (issue 31)
def test_delta_log_prob_is_inf_at_param():
    from tensordict.nn.distributions import Delta

    assert Delta(torch.zeros(3)).log_prob(torch.zeros(3)).item() == float("inf")
    assert Delta(torch.zeros(3, 2)).log_prob(torch.zeros(3, 2)).tolist() == [float("inf")] * 3
    assert Delta(torch.zeros(3)).log_prob(torch.ones(3)).item() == float("-inf")


def test_one_hot_samples_are_long():
    from tensordict.nn import InteractionType, ProbabilisticTensorDictModule, set_interaction_type
    from tensordict.nn.distributions import OneHotCategorical

    dist = OneHotCategorical(logits=torch.tensor([[0.0, 1.0, 0.0]]))
    assert dist.sample().dtype == torch.long and dist.mode.tolist() == [[0, 1, 0]]
    assert dist.deterministic_sample.dtype == torch.long and dist.rsample().dtype == torch.float32
    assert not OneHotCategorical.has_rsample
    module = ProbabilisticTensorDictModule(
        in_keys=["logits"], out_keys=["x"], distribution_class=OneHotCategorical, return_log_prob=True
    )
    with set_interaction_type(InteractionType.RANDOM):
        td = module(TensorDict(logits=torch.zeros(3, 4), batch_size=[3]))
    assert td["x"].dtype == torch.long
    torch.testing.assert_close(td["x_log_prob"], torch.full((3,), -1.3863), atol=1e-4, rtol=0)


def test_tensordict_params_keeps_only_float16_32_64_as_parameters():
    from tensordict.nn import TensorDictParams

    params = TensorDictParams(
        TensorDict(
            a=torch.zeros(3, dtype=torch.bfloat16), b=torch.zeros(3), c=torch.zeros(3, dtype=torch.float16),
            d=torch.zeros(3, dtype=torch.long), e=torch.zeros(3, dtype=torch.complex64),
        )
    )
    assert sorted(n for n, _ in params.named_parameters()) == ["b", "c"]
    assert sorted(n for n, _ in params.named_buffers()) == ["a", "d", "e"]


def test_select_subsequence_and_skip_existing_match_015():
    from tensordict.nn import TensorDictModule, TensorDictSequential, set_skip_existing

    m1 = TensorDictModule(lambda x: x + 1, in_keys=["a"], out_keys=["b"])
    m2 = TensorDictModule(lambda x: x * 2, in_keys=["b"], out_keys=["c"])
    m3 = TensorDictModule(lambda x: x - 1, in_keys=["c"], out_keys=["d"])
    m4 = TensorDictModule(lambda x: x - 1, in_keys=["a"], out_keys=["e"])
    seq = TensorDictSequential(m1, m2, m3, m4)
    keys = lambda s: [(list(m.in_keys), list(m.out_keys)) for m in s.module]  # noqa: E731
    assert keys(seq.select_subsequence(in_keys=["b"])) == [(["b"], ["c"]), (["c"], ["d"])]
    assert keys(seq.select_subsequence(out_keys=["c"])) == [(["a"], ["b"]), (["b"], ["c"])]
    assert keys(seq.select_subsequence(out_keys=["e"])) == [(["a"], ["e"])]
    with pytest.raises(ValueError):
        seq.select_subsequence(in_keys=["e"])
    calls = []
    module = TensorDictModule(lambda x: calls.append(1) or x + 1, in_keys=["a"], out_keys=["b"])
    td = TensorDict(a=torch.zeros(2), b=torch.ones(2))
    with set_skip_existing(True):
        assert module(td)["b"].tolist() == [1.0, 1.0] and TensorDictSequential(module)(td) is not None
    assert calls == []


def test_skip_existing_decorator_runs_when_an_output_is_an_input(capsys):
    from tensordict.nn import TensorDictModuleBase, set_skip_existing, skip_existing

    with set_skip_existing(["a"]):
        assert skip_existing() == ["a"]
    assert skip_existing() is False

    class Updates(TensorDictModuleBase):
        in_keys = ["out"]
        out_keys = ["out"]

        @set_skip_existing()
        def forward(self, tensordict):
            print("called")
            return tensordict

    class Writes(TensorDictModuleBase):
        in_keys = []
        out_keys = ["out"]

        @set_skip_existing()
        def forward(self, tensordict):
            print("called")
            return tensordict

    Updates()(TensorDict({"out": torch.zeros(())}))
    Writes()(TensorDict({"out": torch.zeros(())}))
    assert capsys.readouterr().out == "called\n"


def test_rand_one_hot_is_long():
    from tensordict.nn import rand_one_hot

    out = rand_one_hot(torch.tensor([0.0, 2.0, 1.0]))
    assert out.dtype == torch.long and out.sum().item() == 1


def test_select_subsequence_keeps_nested_sequences():
    from tensordict.nn import TensorDictModule as Mod
    from tensordict.nn import TensorDictSequential as Seq

    idn = lambda x: x  # noqa: E731
    module = Seq(
        Seq(Mod(idn, in_keys=["a"], out_keys=["b"]), Mod(idn, in_keys=["b"], out_keys=["c"])),
        Seq(Mod(idn, in_keys=["b"], out_keys=["d"]), Mod(idn, in_keys=["d"], out_keys=["e"])),
    )
    sub = module.select_subsequence(in_keys=["b", "d"], out_keys=["e"])
    assert len(sub) == 1 and isinstance(sub[0], Seq) and sub[0].out_keys == ["d", "e"]
    assert sub[0][1] is module[1][1]
