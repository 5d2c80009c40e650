"""Every docstring example of tensordict.nn runs (doctest), and the namespace is wired."""

import doctest
import importlib
import subprocess
import sys

import pytest

MODULES = [
    "tensordict.nn._common",
    "tensordict.nn._module",
    "tensordict.nn._sequence",
    "tensordict.nn._params",
    "tensordict.nn._probabilistic",
    "tensordict.nn._distributions",
    "tensordict.nn._mappings",
    "tensordict.nn._functional",
    "tensordict.nn._ensemble",
    "tensordict.nn._cudagraphs",
    "tensordict.nn.fx",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"


def test_public_names():
    import tensordict.nn as tdnn

    for name in tdnn.__all__:
        assert getattr(tdnn, name) is not None, name
        if not name.startswith("__"):
            obj = getattr(tdnn, name)
            assert getattr(obj, "__doc__", None), f"{name} has no docstring"


@pytest.mark.timeout(60)
def test_import_is_lazy():
    code = (
        "import sys, tensordict; assert 'tensordict.nn' not in sys.modules; "
        "p = tensordict.TensorDictParams; assert 'tensordict.nn' in sys.modules; print(p.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "tensordict.nn._params"


def test_doc_module_paths():
    import tensordict.nn as tdnn
    from tensordict.nn.distributions import NormalParamExtractor
    from tensordict.nn.functional_modules import make_functional

    assert NormalParamExtractor is tdnn.NormalParamExtractor and make_functional is tdnn.make_functional
