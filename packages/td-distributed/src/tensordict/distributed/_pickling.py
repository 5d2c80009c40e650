"""Non-tensor values that are not JSON: pickled only when both ends opt in.

Non-tensor data travels as JSON in the metadata. A value JSON cannot hold (a custom
object, a tuple key dict, ...) is refused by default. With ``allow_pickle=True`` on
the sending call it travels pickled (base64 text under the key :data:`MARK`); the
receiving call must pass ``allow_pickle=True`` too, otherwise it refuses the message
without unpickling anything (unpickling runs code chosen by the sender).
"""

from __future__ import annotations

import base64
import contextvars
import functools
import inspect
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["MARK", "pickle_allowed", "pickle_policy", "encode_default", "decode_hook", "with_allow_pickle"]

#: the JSON key that marks a pickled value
MARK = "__tensordict_pickled__"
_ALLOW: contextvars.ContextVar[bool] = contextvars.ContextVar("tensordict_dist_allow_pickle", default=False)


@contextmanager
def pickle_policy(allow: bool) -> Iterator[None]:
    """Within the block, non-JSON values are pickled (sending) / unpickled (receiving) iff ``allow``."""
    token = _ALLOW.set(bool(allow))
    try:
        yield
    finally:
        _ALLOW.reset(token)


def pickle_allowed() -> bool:
    """The policy of the running call (for calls that make further transfer calls)."""
    return _ALLOW.get()


def encode_default(obj: Any) -> Any:
    """``json.dumps(default=...)``: a pickled value with the opt-in, else ``TypeError``."""
    if _ALLOW.get():
        return {MARK: base64.b64encode(pickle.dumps(obj)).decode("ascii")}
    msg = (
        f"Object of type {type(obj).__name__} is not JSON serializable (pass allow_pickle=True on both "
        "the sending and the receiving call to send it pickled)"
    )
    raise TypeError(msg)


def decode_hook(obj: dict) -> Any:
    """``json.loads(object_hook=...)``: unpickles a marked value with the opt-in, else refuses."""
    if MARK not in obj or len(obj) != 1:
        return obj
    from tensordict.distributed._wire import WireError

    if not _ALLOW.get():
        msg = (
            "the sender pickled a non-tensor value; it was not unpickled (that would run code chosen by "
            "the sender). Pass allow_pickle=True to the receiving call if you trust the sender."
        )
        raise WireError(msg)
    try:
        return pickle.loads(base64.b64decode(obj[MARK]))  # noqa: S301 - explicit opt-in on both ends
    except Exception as err:
        raise WireError(f"a pickled non-tensor value could not be unpickled ({err}).") from None


def with_allow_pickle(fn: Any) -> Any:
    """Adds the keyword-only ``allow_pickle=False`` argument to a transfer function: the
    call runs under :func:`pickle_policy` (see the module docstring)."""

    get = _ALLOW.get

    @functools.wraps(fn)
    def wrapper(*args: Any, allow_pickle: bool = False, **kwargs: Any) -> Any:
        if not allow_pickle and not get():  # the policy already in force: nothing to set (hot path)
            return fn(*args, **kwargs)
        with pickle_policy(allow_pickle):
            return fn(*args, **kwargs)

    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    extra = inspect.Parameter("allow_pickle", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=bool)
    if params and params[-1].kind is inspect.Parameter.VAR_KEYWORD:
        params.insert(len(params) - 1, extra)
    else:
        params.append(extra)
    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__doc__ = (fn.__doc__ or "") + (
        "\n    ``allow_pickle`` (bool, keyword): send/accept non-JSON non-tensor values pickled; both "
        "ends must pass ``True``. Defaults to ``False``.\n"
    )
    return wrapper
