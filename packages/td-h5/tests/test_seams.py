"""The seam between td-core and td-h5: td-core's table of TensorDictBase methods served
by ``tensordict.persistent`` (``tensordict.ext.SIBLING_METHODS``) and this distribution's
``_td_methods`` module name the same functions."""

from __future__ import annotations

import importlib
import importlib.util
import inspect

from tensordict import TensorDict
from tensordict.ext import SIBLING_METHODS

SUB = "persistent"
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


def test_names_follow_td_core_checks(tmp_path):
    """PersistentTensorDict validates dim names with td-core's rule (``ext.check_names``)."""
    import pytest
    import torch

    from tensordict.persistent import PersistentTensorDict

    td = TensorDict({"a": torch.zeros(2, 3)}, [2, 3])
    h5 = PersistentTensorDict.from_dict(td, filename=str(tmp_path / "f.h5"))
    h5.names = ["x", None]
    assert h5.names == ["x", None]
    with pytest.raises(ValueError, match="unique"):
        h5.names = ["x", "x"]
    with pytest.raises(ValueError):
        h5.names = ["x"]
    h5.close()
