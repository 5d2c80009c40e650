"""Error messages shared by the containers. Each names the key and what was expected."""

from __future__ import annotations

from typing import Any


def locked_error(action: str, key: Any = None) -> RuntimeError:
    where = f" (key {key!r})" if key is not None else ""
    msg = (
        "Cannot modify locked TensorDict. For in-place modification, consider using the `set_()` method "
        f"and make sure the key is present. Cannot {action}{where}; otherwise unlock it with "
        "`td.unlock_()` (or `with td.unlock_(): ...`)."
    )
    return RuntimeError(msg)


def missing_key_error(key: Any, keys: Any) -> KeyError:
    shown = sorted(str(k) for k in keys)
    if len(shown) > 20:
        shown = shown[:20] + ["..."]
    msg = f"key {key!r} not found in TensorDict with keys {shown}"
    return KeyError(msg)


def batch_mismatch_error(key: Any, shape: Any, batch_size: Any) -> RuntimeError:
    msg = (
        f"batch dimension mismatch for key {key!r}: expected the value's leading dims to be "
        f"batch_size={tuple(batch_size)}, got shape {tuple(shape)}. Make the leading dims "
        "match, or change the TensorDict's batch_size."
    )
    return RuntimeError(msg)
