"""Sphinx configuration for the td-* monorepo site (all distributions installed editable)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import _api_topics  # noqa: E402

# the td-core API is split into one page per topic (docs/api/core/*.rst, written here)
_api_topics.write_pages()

project = "TensorDict td-*"
author = "td-* contributors"
copyright = "2026, td-* contributors (BSD-3-Clause)"
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",
    "sphinx.ext.viewcode",
    "myst_parser",
]
autosummary_generate = True
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}
autodoc_typehints = "none"
autodoc_inherit_docstrings = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False
exclude_patterns = ["_build", "generated"]
html_theme = "alabaster"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_theme_options = {"page_width": "1100px", "sidebar_width": "230px"}
suppress_warnings = ["autosummary.import_cycle"]
doctest_global_setup = """
import torch
from torch import nn
import tensordict
from tensordict import *  # noqa: F403  (every public name, siblings included)
from tensordict.utils import *  # noqa: F403
"""


# ---------------------------------------------------------------------------------------
# Every public name is documented: each name of ``tensordict.__all__`` and of every
# sibling subpackage's ``__all__`` must be a documented Python object (under its own
# module, or under the module it is re-exported from); a missing one is a warning,
# so the ``-W`` build fails.
_PUBLIC_MODULES = [
    "tensordict",
    "tensordict.utils",
    "tensordict.memmap",
    "tensordict.persistent",
    "tensordict.nn",
    "tensordict.nn.fx",
    "tensordict.distributed",
    "tensordict.tensorclass",
    "tensordict.prototype",
]


def _public_names() -> list[tuple[str, str, object]]:
    import importlib
    import sys

    out = []
    for modname in _PUBLIC_MODULES:
        importlib.import_module(modname)
        module = sys.modules[modname]  # not getattr: tensordict.memmap is also a function
        for name in getattr(module, "__all__", []):
            if name != "__version__":
                out.append((modname, name, getattr(module, name)))
    return out


def _check_public_names_documented(app, env) -> None:
    from sphinx.util import logging

    logger = logging.getLogger("tensordict.docs")
    documented = env.get_domain("py").objects  # full name -> entry
    by_name: dict[str, list[str]] = {}
    for full in documented:
        by_name.setdefault(full.rsplit(".", 1)[-1], []).append(full)
    public = _public_names()
    objects = {f"{m}.{n}": obj for m, n, obj in public}
    for modname, name, obj in public:
        full = f"{modname}.{name}"
        if full in documented:
            continue
        # a re-export counts as documented when the same object is documented elsewhere
        if any(objects.get(other) is obj for other in by_name.get(name, ())):
            continue
        logger.warning("public name %s is not documented in docs/api/", full)


def setup(app):
    app.connect("env-check-consistency", _check_public_names_documented)


# myst-parser logs its whole configuration (one line of several hundred characters) on
# every build; keep the build output to what matters.
import logging as _logging  # noqa: E402


class _HideMystConfig(_logging.Filter):
    def filter(self, record: _logging.LogRecord) -> bool:
        return "MdParserConfig(" not in str(record.msg) + str(record.args)


_logging.getLogger("sphinx.myst_parser.sphinx_ext.main").addFilter(_HideMystConfig())
