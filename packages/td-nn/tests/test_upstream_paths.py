"""td-nn under upstream tensordict's module paths; its switches and compatibility names."""

import importlib

import pytest
import torch
from torch import nn

import tensordict.nn as tdnn
from tensordict import TensorDict

MODULE_NAMES = {
    "tensordict.nn.common": ["TensorDictModuleBase", "TensorDictModule", "dispatch", "WrapModule"],
    "tensordict.nn.probabilistic": [
        "InteractionType",
        "interaction_type",
        "set_interaction_type",
        "ProbabilisticTensorDictModule",
        "ProbabilisticTensorDictSequential",
    ],
    "tensordict.nn.sequence": ["TensorDictSequential"],
    "tensordict.nn.params": ["TensorDictParams"],
    "tensordict.nn.utils": [
        "mappings",
        "expln",
        "biased_softplus",
        "inv_softplus",
        "set_skip_existing",
        "skip_existing",
        "add_custom_mapping",
        "composite_lp_aggregate",
        "set_composite_lp_aggregate",
    ],
    "tensordict.nn.distributions": [
        "CompositeDistribution",
        "NormalParamExtractor",
        "OneHotCategorical",
        "TruncatedNormal",
        "Delta",
        "distributions_maps",
        "continuous",
        "discrete",
    ],
    "tensordict.nn.distributions.continuous": ["NormalParamExtractor", "Delta"],
    "tensordict.nn.distributions.discrete": ["OneHotCategorical", "rand_one_hot"],
    "tensordict.nn.distributions.composite": ["CompositeDistribution"],
    "tensordict.nn.functional_modules": ["make_functional", "get_functional"],
    "tensordict.nn.ensemble": ["EnsembleModule"],
    "tensordict.nn.cudagraphs": ["CudaGraphModule"],
}


@pytest.mark.parametrize("module_name", sorted(MODULE_NAMES))
def test_upstream_module_paths(module_name):
    module = importlib.import_module(module_name)
    for name in MODULE_NAMES[module_name]:
        value = getattr(module, name)
        if hasattr(tdnn, name):
            assert value is getattr(tdnn, name), name
    for name in getattr(module, "__all__", []):
        assert hasattr(module, name), name


def test_distributions_maps():
    from tensordict.nn.distributions import distributions_maps

    assert distributions_maps["normalparamextractor"] is tdnn.NormalParamExtractor
    assert distributions_maps["onehotcategorical"] is tdnn.OneHotCategorical


SWITCHES = [
    (tdnn.set_interaction_type, tdnn.interaction_type, tdnn.InteractionType.RANDOM),
    (tdnn.set_skip_existing, tdnn.skip_existing, True),
    (tdnn.set_composite_lp_aggregate, tdnn.composite_lp_aggregate, True),
]


@pytest.mark.parametrize(("switch", "read", "value"), SWITCHES)
def test_nn_switch_three_ways(switch, read, value):
    before = read()
    assert before != value
    s = switch(value)
    assert read() == before  # creating it changes nothing
    with s:
        assert read() == value
    assert read() == before

    @switch(value)
    def inside():
        return read()

    assert inside() == value
    assert read() == before
    s.set()
    try:
        assert read() == value
    finally:
        s.unset()
    assert read() == before


def test_interaction_type_from_string():
    with tdnn.set_interaction_type("mode"):
        assert tdnn.interaction_type() is tdnn.InteractionType.MODE


def test_skip_existing_none_decorator():
    from tensordict.nn.utils import _set_skip_existing_None

    class Adder(tdnn.TensorDictModuleBase):
        in_keys = ["x"]
        out_keys = ["y"]

        def __init__(self):
            super().__init__()
            self.calls = 0

        @_set_skip_existing_None()
        def forward(self, td):
            self.calls += 1
            td["y"] = td["x"] + 1
            return td

    module = Adder()
    td = TensorDict(x=torch.zeros(2), y=torch.full((2,), 5.0), batch_size=[2])
    module(td)
    assert module.calls == 1 and (td["y"] == 1).all()
    td["y"] = torch.full((2,), 5.0)
    with tdnn.set_skip_existing(True):
        module(td)
    assert module.calls == 1 and (td["y"] == 5).all()


def test_set_dispatch_td_nn_modules():
    from tensordict.nn.utils import _dispatch_td_nn_modules, _set_dispatch_td_nn_modules

    class Double(nn.Module):
        in_keys = ["x"]
        out_keys = ["y"]

        @tdnn.dispatch
        def forward(self, td):
            if isinstance(td, torch.Tensor):
                return ("raw", td)
            td["y"] = td["x"] * 2
            return td

    module = Double()
    assert _dispatch_td_nn_modules()
    assert (module(x=torch.ones(2)) == 2).all()
    with _set_dispatch_td_nn_modules(False):
        assert not _dispatch_td_nn_modules()
        tag, value = module(torch.ones(2))
        assert tag == "raw"
    assert _dispatch_td_nn_modules()


def test_use_generator():
    from tensordict.nn.probabilistic import _use_generator

    gen = torch.Generator().manual_seed(0)
    ref = torch.Generator().manual_seed(0)
    expected = torch.randn(3, generator=ref)
    state = torch.random.get_rng_state()
    with _use_generator(gen):
        drawn = torch.randn(3)
    assert torch.equal(drawn, expected)
    assert torch.equal(torch.random.get_rng_state(), state)  # default stream untouched
    # the generator advanced by what was drawn
    assert torch.equal(torch.randn(3, generator=gen), torch.randn(3, generator=ref))
    with _use_generator(None):
        torch.randn(1)


def test_exclude_td_from_pytree():
    import torch.utils._pytree as pt

    from tensordict.nn.functional_modules import _exclude_td_from_pytree

    td = TensorDict(a=torch.zeros(2), batch_size=[2])
    assert len(pt.tree_leaves(td)) == 1 and pt.tree_leaves(td)[0] is td["a"]
    with _exclude_td_from_pytree():
        assert pt.tree_leaves(td) == [td]
    assert pt.tree_leaves(td)[0] is td["a"]
    excluder = _exclude_td_from_pytree()  # upstream's tests call set()/unset()
    excluder.set()
    try:
        assert pt.tree_leaves(td) == [td]
    finally:
        excluder.unset()
    assert pt.tree_leaves(td)[0] is td["a"]


def test_pytree_registered_tds():
    import warnings

    import tensordict
    from tensordict import LazyStackedTensorDict
    from tensordict.nn import functional_modules

    assert TensorDict in functional_modules.PYTREE_REGISTERED_TDS
    assert functional_modules.PYTREE_REGISTERED_LAZY_TDS == (LazyStackedTensorDict,)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tensordict.PYTREE_REGISTERED_TDS == functional_modules.PYTREE_REGISTERED_TDS
    assert caught and caught[0].category is DeprecationWarning


def test_sequence_initialised_through_module_init_like_upstream_subclasses():
    # TorchRL's SafeSequential computes the keys, then skips TensorDictSequential.__init__
    class SafeSeq(tdnn.TensorDictSequential):
        def __init__(self, *modules, inplace=None):
            self.partial_tolerant = False
            in_keys, out_keys = self._compute_in_and_out_keys(modules)
            super(tdnn.TensorDictSequential, self).__init__(
                module=nn.ModuleList(list(modules)), in_keys=in_keys, out_keys=out_keys, inplace=inplace
            )

    seq = SafeSeq(
        tdnn.TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["h"]),
        tdnn.TensorDictModule(lambda h: h * 2, in_keys=["h"], out_keys=["y"]),
    )
    assert seq.in_keys == ["x"] and seq.out_keys == ["h", "y"]
    td = seq(TensorDict(x=torch.randn(5, 3), batch_size=[5]))
    assert torch.allclose(td["y"], td["h"] * 2)
    assert len(seq) == 2


def test_probabilistic_private_names_read_by_subclasses():
    module = tdnn.ProbabilisticTensorDictModule(
        in_keys=["loc", "scale"], out_keys=["action"], distribution_class=torch.distributions.Normal,
        return_log_prob=True, generator=3,
    )
    assert module._out_keys == module.out_keys
    assert module._in_keys == module.in_keys
    gen, write_back = module._resolve_generator(TensorDict())
    assert isinstance(gen, torch.Generator) and write_back is None
    with pytest.raises(AttributeError):
        module._not_an_attribute  # noqa: B018
