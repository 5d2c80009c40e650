"""Optional third-party packages (pyarrow, pandas, mosaicml-streaming), imported on use.

``import tensordict`` imports none of them; a table function imports what it needs when
it runs, and a missing package raises ``ImportError`` naming the ``pip install`` line.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["require"]


def require(module: str, feature: str, package: str, extra: str) -> ModuleType:
    """Imports ``module``; if its package is missing, ``ImportError`` says how to install it.

    Args:
        module (str): the module to import (``"pyarrow.parquet"``).
        feature (str): what needs it, for the message (``"TensorDict.to_parquet"``).
        package (str): the name on the package index (``"pyarrow"``).
        extra (str): the td-core extra that declares it (``"arrow"``).

    Raises:
        ImportError: the package is not installed; the message gives both install lines.

    Examples:
        >>> require("json", "an example", "json", "none").__name__
        'json'
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        top = module.split(".")[0]
        if err.name is not None and err.name.split(".")[0] != top:
            raise
        msg = (
            f"{feature} needs the `{package}` package, which is not installed. "
            f'Install it with `pip install {package}` (or `pip install "td-core[{extra}]"`).'
        )
        raise ImportError(msg) from err
