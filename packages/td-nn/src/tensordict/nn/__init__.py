"""``tensordict.nn``: ``nn.Module``s that read and write TensorDicts.

Provided by the ``td-nn`` distribution. Every module declares the keys it reads
(``in_keys``) and writes (``out_keys``), so one generic loop
(``data = model(data); loss = loss_module(data)``) serves every task.
"""

from tensordict.nn._common import (
    TensorDictModuleBase,
    dispatch,
    keyword_calls_return_tensors,
    make_tensordict,
    set_keyword_calls_return_tensors,
    set_skip_existing,
    skip_existing,
)
from tensordict.nn._cudagraphs import CudaGraphModule
from tensordict.nn._distributions import (
    CompositeDistribution,
    Delta,
    OneHotCategorical,
    ReparamGradientStrategy,
    TruncatedNormal,
    composite_lp_aggregate,
    rand_one_hot,
    set_composite_lp_aggregate,
)
from tensordict.nn._ensemble import EnsembleModule
from tensordict.nn._functional import (
    get_functional,
    is_functional,
    make_functional,
    repopulate_module,
)
from tensordict.nn._mappings import (
    AddStateIndependentNormalScale,
    NormalParamExtractor,
    add_custom_mapping,
    biased_softplus,
    expln,
    inv_softplus,
    mappings,
)
from tensordict.nn._module import (
    TensorDictModule,
    TensorDictModuleWrapper,
    WrapModule,
    as_tensordict_module,
)
from tensordict.nn._params import TensorDictParams
from tensordict.nn._probabilistic import (
    InteractionType,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    interaction_type,
    set_interaction_type,
)
from tensordict.nn._sequence import TensorDictSequential
from tensordict.nn._tensorclass_module import TensorClassModuleBase, TensorClassModuleWrapper
from tensordict.nn._version import __version__

__all__ = [
    # modules
    "TensorDictModuleBase",
    "TensorDictModule",
    "TensorDictModuleWrapper",
    "TensorDictSequential",
    "WrapModule",
    "as_tensordict_module",
    "TensorDictParams",
    "TensorClassModuleBase",
    "TensorClassModuleWrapper",
    "EnsembleModule",
    "CudaGraphModule",
    # probabilistic
    "ProbabilisticTensorDictModule",
    "ProbabilisticTensorDictSequential",
    "InteractionType",
    "interaction_type",
    "set_interaction_type",
    # distributions and helpers
    "CompositeDistribution",
    "Delta",
    "NormalParamExtractor",
    "AddStateIndependentNormalScale",
    "OneHotCategorical",
    "ReparamGradientStrategy",
    "TruncatedNormal",
    "composite_lp_aggregate",
    "set_composite_lp_aggregate",
    "rand_one_hot",
    "mappings",
    "add_custom_mapping",
    "biased_softplus",
    "inv_softplus",
    "expln",
    # functional
    "make_functional",
    "get_functional",
    "is_functional",
    "repopulate_module",
    # utilities
    "dispatch",
    "make_tensordict",
    "keyword_calls_return_tensors",
    "set_keyword_calls_return_tensors",
    "set_skip_existing",
    "skip_existing",
    "__version__",
]
