"""Sphinx configuration for the td-* monorepo site (all distributions installed editable)."""

project = "TensorDict (td-*)"
author = "td-* contributors"
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
suppress_warnings = ["autosummary.import_cycle"]
doctest_global_setup = """
import torch
from torch import nn
import tensordict
from tensordict import *  # noqa: F403  (every public name, siblings included)
from tensordict.utils import *  # noqa: F403
"""
