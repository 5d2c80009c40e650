"""``tensordict._C``: the nested-key helpers that upstream once compiled, in Python.

Downstream code (TorchRL's tests, older scripts) still writes
``from tensordict._C import unravel_keys``. Importing this module warns (a
``DeprecationWarning``, as tensordict 0.15.3 does) and points to the public names.

* ``unravel_key`` / ``unravel_keys``: :func:`tensordict.unravel_key` (one key).
* ``unravel_key_list``: :func:`tensordict.unravel_key_list`.
* ``_unravel_key_to_tuple``: :func:`tensordict.unravel_key_to_tuple`.

Examples:
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", DeprecationWarning)
    ...     from tensordict._C import unravel_keys
    >>> unravel_keys(("a", ("b",)))
    ('a', 'b')
"""

from __future__ import annotations

import warnings

from tensordict._compat_upstream import _unravel_key_to_tuple
from tensordict._keys import public_unravel_key as unravel_key
from tensordict._keys import public_unravel_key_list as unravel_key_list

__all__ = ["_unravel_key_to_tuple", "unravel_key", "unravel_key_list", "unravel_keys"]

#: ``unravel_keys`` takes one key, as in tensordict 0.15.3 (``tensordict.utils.unravel_keys`` takes several).
unravel_keys = unravel_key


def warn_deprecated() -> None:
    """Warns that ``tensordict._C`` goes away, naming the replacements."""
    warnings.warn(
        "tensordict._C is deprecated and will be removed in TensorDict 0.17. Use tensordict.unravel_key "
        "(also for unravel_keys), tensordict.unravel_key_list and tensordict.unravel_key_to_tuple "
        "(for _unravel_key_to_tuple) instead.",
        DeprecationWarning,
        stacklevel=3,
    )


warn_deprecated()
