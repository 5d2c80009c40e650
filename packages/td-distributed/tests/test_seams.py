"""The seam between td-core and td-distributed: td-core's table of TensorDictBase methods served
by ``tensordict.distributed`` (``tensordict.ext.SIBLING_METHODS``) and this distribution's
``_td_methods`` module name the same functions."""

from __future__ import annotations

import importlib
import importlib.util
import inspect

from tensordict import TensorDict
from tensordict.ext import SIBLING_METHODS

SUB = "distributed"
TABLE = {name: is_cls for sub, name, is_cls in SIBLING_METHODS if sub == SUB}


def _td_methods():
    if importlib.util.find_spec(f"tensordict.{SUB}._td_methods") is None:
        return None
    return importlib.import_module(f"tensordict.{SUB}._td_methods")


def test_td_methods_match_the_seam_table():
    mod = _td_methods()
    if mod is None:
        # no method of TensorDictBase is served by this distribution
        assert TABLE == {}
        return
    served = set(getattr(mod, "__all__", [n for n, f in vars(mod).items() if inspect.isfunction(f) and not n.startswith("_")]))
    assert served == set(TABLE), (sorted(served - set(TABLE)), sorted(set(TABLE) - served))
    for name, is_cls in TABLE.items():
        fn = getattr(mod, name)
        assert callable(fn), name
        params = list(inspect.signature(fn).parameters.values())
        assert params and params[0].kind in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD), name
        method = inspect.getattr_static(TensorDict, name)
        assert isinstance(method, classmethod) == is_cls, name


def test_methods_show_this_distributions_docstrings():
    """``help(td.<method>)`` shows the real documentation (generated into td-core)."""
    mod = _td_methods()
    for name in TABLE:
        doc = inspect.getdoc(getattr(mod, name))
        if doc:
            assert getattr(TensorDict, name).__doc__.strip().startswith(doc.splitlines()[0]), name
