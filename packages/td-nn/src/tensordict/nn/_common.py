"""Shared machinery of the ``tensordict.nn`` modules.

- :class:`TensorDictModuleBase`: the parent of every module that reads and writes
  TensorDicts (``in_keys`` / ``out_keys``, ``select_out_keys``, keyword-tensor calls).
- :class:`dispatch`: lets a ``forward(tensordict)`` be called with keyword tensors.
- :func:`skip_existing` / :class:`set_skip_existing`: skip a module whose outputs are
  already in the TensorDict.
- small key helpers shared by the other files of the package.
"""

from __future__ import annotations

import functools
import inspect
import types
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from tensordict import NestedKey, TensorDict, TensorDictBase
from tensordict.ext import unravel_key  # the strict one: raises on a tuple that is no key
from tensordict.functional import make_tensordict as _make_tensordict
from tensordict.utils import ModeSwitch

__all__ = [
    "TensorDictModuleBase",
    "dispatch",
    "make_tensordict",
    "set_skip_existing",
    "skip_existing",
]


class _NotSet:
    """Sentinel for a missing entry (``td.get(key, _NOTSET) is _NOTSET``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<not set>"


_NOTSET: Any = _NotSet()

# ---------------------------------------------------------------------------- keys


class _ArgumentError(TypeError, ValueError):
    """A constructor argument of the wrong type: a ``TypeError`` (this project's convention)
    that is also the ``ValueError`` tensordict 0.15 raises, so either ``except`` catches it."""


def _normalize_keys(keys: Any, what: str, owner: str = "module") -> list[NestedKey]:
    """A list of unravelled keys from a key, a list of keys or ``None``.

    Raises:
        TypeError: (also a ``ValueError``) an entry is not a str or a (nested) tuple of str.
    """
    if keys is None:
        return []
    if isinstance(keys, str):
        return [keys]
    if isinstance(keys, (list, tuple)) or (isinstance(keys, Sequence) and not isinstance(keys, bytes)):
        out = []
        for key in keys:
            try:
                out.append(unravel_key(key))
            except (TypeError, ValueError) as err:
                msg = (
                    f"{owner}: {what} must be of type list, str or tuples of str: every entry must be a "
                    f"str or a tuple of str (a nested key), got {key!r} of type {type(key).__name__} in "
                    f"{what}={list(keys)!r}."
                )
                raise _ArgumentError(msg) from err
        return out
    msg = (
        f"{owner}: {what} must be of type list, str or tuples of str (a key, or a list or tuple of "
        f"keys), got {type(keys).__name__} ({keys!r})."
    )
    raise _ArgumentError(msg)


def _key_to_name(key: NestedKey, separator: str = "_") -> str:
    """``("a", "b")`` -> ``"a_b"``: the keyword-argument name of a nested key."""
    return key if isinstance(key, str) else separator.join(key)  # type: ignore[arg-type]


class _ReadableKeyError(KeyError):
    """A ``KeyError`` whose message prints as written (``KeyError`` quotes and escapes it)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _missing_in_key_error(owner: str, key: NestedKey, tensordict: TensorDictBase) -> KeyError:
    keys = sorted(str(k) for k in tensordict.keys(include_nested=True, leaves_only=True))
    if len(keys) > 20:
        keys = keys[:20] + ["..."]
    msg = (
        "Some tensors that are necessary for the module call may not have not been found in the "
        f"input tensordict: {owner} reads the key {key!r}, which is missing from the input TensorDict "
        f"(batch_size={tuple(tensordict.batch_size)}, keys {keys}). The TensorDict was "
        "left unchanged. Add the entry to the input, or change the module's in_keys."
    )
    return _ReadableKeyError(msg)


class _MissingInputTypeError(_ReadableKeyError, TypeError):
    """A missing input (``KeyError``) that made the module's call fail with ``TypeError``:
    caught as either, so code written for tensordict 0.15 (which lets that
    ``TypeError`` through) and code that expects a ``KeyError`` both work."""


def _missing_input_call_error(owner: str, missing: list, tensordict: TensorDictBase, err: Exception) -> Exception | None:
    """The error for a module call that failed with ``err`` while the inputs ``missing`` were
    passed as ``None`` (``strict=False``), or ``None`` to let ``err`` through (it does not
    look related to them)."""
    if not missing:
        return None
    text = str(err)
    if "None" not in text and not isinstance(err, TypeError):
        return None
    base = str(_missing_in_key_error(owner, missing[0], tensordict))
    msg = base.replace(
        "The TensorDict was left unchanged.",
        f"It was passed as None and the call failed ({type(err).__name__}: {text}); the TensorDict "
        "was left unchanged.",
    )
    return (_MissingInputTypeError if isinstance(err, TypeError) else _ReadableKeyError)(msg)


def _module_label(module: nn.Module) -> str:
    """``"TensorDictModule(Linear)"`` style label for error messages."""
    inner = module._modules.get("module") if isinstance(module, nn.Module) else None
    if inner is None:
        fn = getattr(module, "module", None)
        inner_name = getattr(fn, "__name__", None) if fn is not None else None
    else:
        inner_name = type(inner).__name__
    if inner_name:
        return f"{type(module).__name__}({inner_name}, in_keys={getattr(module, 'in_keys', None)}, out_keys={getattr(module, 'out_keys', None)})"
    return f"{type(module).__name__}(in_keys={getattr(module, 'in_keys', None)}, out_keys={getattr(module, 'out_keys', None)})"


# ---------------------------------------------------------------------------- batch size


def _leaf_shapes(td: TensorDictBase, out: list) -> None:
    for _, value in td._items_raw():
        if isinstance(value, torch.Tensor):
            out.append(value.shape)
        elif isinstance(value, TensorDictBase):
            _leaf_shapes(value, out)


def _infer_batch_size_(td: TensorDictBase) -> TensorDictBase:
    """Sets ``td.batch_size`` to the leading dims shared by every tensor leaf (nested ones too)."""
    shapes: list = []
    _leaf_shapes(td, shapes)
    if not shapes:
        return td
    common = list(shapes[0])
    for shape in shapes[1:]:
        n = 0
        for a, b in zip(common, shape):
            if a != b:
                break
            n += 1
        del common[n:]
    if len(common) > len(td.batch_size):
        td.batch_size = torch.Size(common)
    return td


# ``tensordict.nn.make_tensordict`` is ``tensordict.make_tensordict`` (as tensordict 0.15)
make_tensordict = _make_tensordict


# ---------------------------------------------------------------------------- skip existing

_SKIP_EXISTING = [False]


def skip_existing() -> bool:
    """Returns whether modules skip their computation when their outputs already exist.

    Examples:
        >>> skip_existing()
        False
    """
    return _SKIP_EXISTING[0]


class set_skip_existing(ModeSwitch):  # noqa: N801 - public name of the tensordict API
    """Context manager / decorator: modules skip their work when their ``out_keys`` exist.

    Inside ``with set_skip_existing(True):``, a :class:`TensorDictModule` (or a
    sequence, or a probabilistic module) called on a TensorDict that already holds
    every one of its ``out_keys`` returns the TensorDict unchanged, without running.

    Used as a decorator of a ``forward(self, tensordict, ...)`` method with
    ``mode=None``, the decorated method performs that check itself and otherwise
    runs normally; with ``mode=True``/``False`` the mode is set for the duration of
    the call.

    Args:
        mode (bool or None, optional): the mode to set. Defaults to ``True``.
        in_key_attr (str, optional): attribute with the input keys. Defaults to ``"in_keys"``.
        out_key_attr (str, optional): attribute with the output keys. Defaults to ``"out_keys"``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> module = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"])
        >>> td = TensorDict(x=torch.zeros(()), y=torch.zeros(()))
        >>> with set_skip_existing(True):
        ...     _ = module(td)
        >>> td["y"]
        tensor(0.)
    """

    def __init__(self, mode: bool | None = True, in_key_attr: str = "in_keys", out_key_attr: str = "out_keys") -> None:
        super().__init__()
        self.mode = mode
        self.in_key_attr = in_key_attr
        self.out_key_attr = out_key_attr

    def _read(self) -> bool:
        return _SKIP_EXISTING[0]

    def _write(self, value: bool) -> None:
        _SKIP_EXISTING[0] = value

    def _apply(self) -> None:
        if self.mode is not None:  # ``None`` leaves the mode as it is
            _SKIP_EXISTING[0] = self.mode  # kept as given: ``skip_existing()`` returns it (0.15)

    def __enter__(self) -> set_skip_existing:
        if self.mode is None:
            msg = (
                "It seems you are using set_skip_existing as a context manager with ``None`` input. "
                "This behaviour is not allowed: set_skip_existing(None) only decorates forward methods."
            )
            raise RuntimeError(msg)
        return super().__enter__()  # type: ignore[return-value]

    def __call__(self, func: Callable) -> Callable:
        out_attr, in_attr = self.out_key_attr, self.in_key_attr
        mode = self.mode
        scoped = super().__call__(func) if mode is not None else func

        @functools.wraps(func)
        def checked(*args: Any, **kwargs: Any) -> Any:
            # a ``forward(self, tensordict, ...)``: skip when every out_key is present
            # (under the decorator's own mode, or the global one for ``None``)
            skip = _SKIP_EXISTING[0] if mode is None else bool(mode)
            if skip and len(args) >= 2 and isinstance(args[0], nn.Module) and isinstance(args[1], TensorDictBase):
                inputs = set(getattr(args[0], in_attr, ()) or ())
                # an output that is also an input is updated by the method: it still runs
                keys = [k for k in getattr(args[0], out_attr, ()) if k not in inputs]
                if keys and all(k in args[1].keys(True) for k in keys):
                    return args[1]
            return scoped(*args, **kwargs)

        return checked


def _all_present(tensordict: TensorDictBase, keys: Iterable[NestedKey]) -> bool:
    view = tensordict.keys(True)
    return all(k in view for k in keys)


# ---------------------------------------------------------------------------- dispatch


def _values_from_call(
    owner: str,
    in_keys: Sequence[NestedKey],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    separator: str,
    extra: tuple[list, dict] | None = None,
) -> dict:
    """Maps positional and keyword tensors to ``in_keys``; raises on duplicates/unknowns.

    With ``extra=(args_list, kwargs_dict)``, positional values beyond the in_keys and
    keywords that name no in_key are collected there (passed on to the module) instead.
    """
    if extra is not None:
        n_kw = sum(1 for key in in_keys if _key_to_name(key, separator) in kwargs)
        n_pos = max(len(in_keys) - n_kw, 0)
        extra[0].extend(args[n_pos:])
        args = args[:n_pos]
    if len(args) > len(in_keys):
        msg = (
            f"{owner}: got {len(args)} positional inputs but the module reads only "
            f"{len(in_keys)} keys ({list(in_keys)})."
        )
        raise TypeError(msg)
    values: dict = dict(zip(in_keys, args))
    names: dict = {}
    for key in in_keys:
        names[_key_to_name(key, separator)] = key
        if isinstance(key, str):
            names.setdefault(key, key)
    for name, value in kwargs.items():
        key = names.get(name)  # type: ignore[assignment]
        if key is None and extra is not None:
            extra[1][name] = value
            continue
        if key is None:
            msg = (
                f"{owner}: unexpected keyword argument {name!r}. The module reads "
                f"{list(in_keys)}; pass them as keywords {sorted(names)} (nested keys are "
                f"joined with {separator!r}) or as positional arguments in that order."
            )
            raise TypeError(msg)
        if key in values:
            msg = (
                f"Duplicated argument in args and kwargs: {name!r} names the key {key!r}, which was also "
                f"passed positionally ({owner})."
            )
            raise RuntimeError(msg)
        values[key] = value
    return values


def _td_from_values(values: Mapping[NestedKey, Any]) -> TensorDict:
    td = TensorDict({}, batch_size=[])
    for key, value in values.items():
        td.set(key, value)
    return td


#: whether ``@dispatch`` builds TensorDicts from tensor arguments; switched off by
#: ``tensordict.nn.utils._set_dispatch_td_nn_modules(False)`` (TorchRL's replay buffers
#: do so when they hold plain tensors).
_DISPATCH_TD_NN_MODULES = [True]


class dispatch:  # noqa: N801 - public name of the tensordict API
    """Lets a function that expects a TensorDict be called with keyword tensors.

    The decorated ``forward(self, tensordict)`` keeps working with a TensorDict. Called
    with tensors instead (positional, in ``in_keys`` order, or keywords named after the
    keys, nested keys joined with ``separator``), it builds the TensorDict, runs, and
    returns the entries at ``dest``: one tensor for a single key, a tuple otherwise.

    Args:
        separator (str, optional): joins the parts of a nested key into a keyword
            name. Defaults to ``"_"``.
        source (str or list of keys, optional): the attribute holding the input keys,
            or the keys themselves. Defaults to ``"in_keys"``.
        dest (str or list of keys, optional): the attribute holding the output keys,
            or the keys themselves. Defaults to ``"out_keys"``.
        auto_batch_size (bool, optional): give the built TensorDict the batch size
            shared by the inputs (otherwise ``[]``). Defaults to ``True``.

    Raises:
        TypeError: an unknown keyword, or too many positional inputs.
        RuntimeError: the same key passed twice.

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> class MyModule(nn.Module):
        ...     in_keys = [("a", "c"), "d"]
        ...     out_keys = ["b"]
        ...
        ...     @dispatch
        ...     def forward(self, tensordict):
        ...         tensordict["b"] = tensordict["a", "c"] + tensordict["d"]
        ...         return tensordict
        >>> MyModule()(a_c=torch.zeros(2, 3), d=torch.ones(2, 3)).shape
        torch.Size([2, 3])
    """

    def __new__(cls, func: Callable | None = None, **kwargs: Any) -> Any:
        self = super().__new__(cls)
        if func is not None and callable(func) and not isinstance(func, str):
            self.__init__(**kwargs)  # type: ignore[misc]
            return self(func)
        return self

    def __init__(
        self,
        separator: str = "_",
        source: str | Sequence[NestedKey] = "in_keys",
        dest: str | Sequence[NestedKey] = "out_keys",
        auto_batch_size: bool = True,
    ) -> None:
        self.separator = separator
        self.source = source
        self.dest = dest
        self.auto_batch_size = auto_batch_size

    def __call__(self, func: Callable) -> Callable:
        try:
            params = list(inspect.signature(func).parameters)
        except (TypeError, ValueError):  # pragma: no cover - builtins
            params = []
        is_method = bool(params) and params[0] == "self"
        source, dest, separator, auto_bs = self.source, self.dest, self.separator, self.auto_batch_size

        def keys_of(owner: Any, spec: Any) -> list:
            if isinstance(spec, str):
                return _normalize_keys(getattr(owner, spec), spec)
            return _normalize_keys(list(spec), "keys")

        def run(owner: Any, call: Callable, args: tuple, kwargs: dict) -> Any:
            if args and isinstance(args[0], TensorDictBase) or any(isinstance(v, TensorDictBase) for v in kwargs.values()):
                return call(*args, **kwargs)
            if not _DISPATCH_TD_NN_MODULES[0]:  # turned off (upstream's ``_set_dispatch_td_nn_modules``)
                return call(*args, **kwargs)
            name = type(owner).__name__ if owner is not None else getattr(func, "__name__", "function")
            in_keys = keys_of(owner, source)
            extra: tuple[list, dict] = ([], {})
            values = _values_from_call(name, in_keys, args, kwargs, separator, extra)
            td = _td_from_values(values)
            if auto_bs:
                _infer_batch_size_(td)
            out = call(td, *extra[0], **extra[1])
            out_keys = keys_of(owner, dest)
            if not isinstance(out, TensorDictBase):
                return out
            result = tuple(out.get(k) for k in out_keys)
            return result[0] if len(result) == 1 else result

        if is_method:

            @functools.wraps(func)
            def method_wrapper(_self: Any, *args: Any, **kwargs: Any) -> Any:
                return run(_self, lambda *a, **k: func(_self, *a, **k), args, kwargs)

            method_wrapper._td_handles_kwargs = True  # type: ignore[attr-defined]
            return method_wrapper

        @functools.wraps(func)
        def func_wrapper(*args: Any, **kwargs: Any) -> Any:
            return run(None, func, args, kwargs)

        func_wrapper._td_handles_kwargs = True  # type: ignore[attr-defined]
        return func_wrapper


def _handles_kwargs(func: Callable) -> Callable:
    """Marks a forward that builds the TensorDict from keyword tensors itself."""
    func._td_handles_kwargs = True  # type: ignore[attr-defined]
    return func


def _wrap_forward(fwd: Callable) -> Callable:
    """Gives a subclass's ``forward(tensordict)`` the keyword-tensor call of the API."""

    @functools.wraps(fwd)
    def forward(self: Any, tensordict: Any = None, *args: Any, **kwargs: Any) -> Any:
        if isinstance(tensordict, TensorDictBase):
            return fwd(self, tensordict, *args, **kwargs)
        if tensordict is None and any(isinstance(v, TensorDictBase) for v in kwargs.values()):
            return fwd(self, *args, **kwargs)
        td = self._td_from_call(tensordict, args, kwargs)
        out = fwd(self, td)
        if isinstance(out, TensorDictBase):
            _infer_batch_size_(out)
        return _tensor_call_output(self, out, tensordict is not None or bool(args))

    forward._td_handles_kwargs = True  # type: ignore[attr-defined]
    return forward


# ---------------------------------------------------------------------------- base class


def _instance_keys(name: str, declared: Any) -> property:
    """A property holding keys declared as a class attribute in ``self._<name>``."""
    private = "_" + name

    def fget(self: Any) -> list:
        keys = self.__dict__.get(private)
        if keys is None:
            keys = self.__dict__[private] = _normalize_keys(declared, name, type(self).__name__)
        return keys

    def fset(self: Any, value: Any) -> None:
        self.__dict__[private] = _normalize_keys(value, name, type(self).__name__)

    return property(fget, fset, doc=f"The module's {name} (declared on the class).")


#: whether keyword-tensor calls (``module(x=tensor)``) return the ``out_keys`` tensors,
#: as tensordict 0.15 does, instead of the TensorDict the seeds' overview shows.
#: Switched by :class:`set_keyword_calls_return_tensors` or, for a whole process, the
#: environment variable ``TD_NN_KEYWORD_CALLS_RETURN_TENSORS=1``.
_KEYWORD_CALLS_RETURN_TENSORS = [
    __import__("os").environ.get("TD_NN_KEYWORD_CALLS_RETURN_TENSORS", "0").lower() in ("1", "true", "yes")
]


def keyword_calls_return_tensors() -> bool:
    """Whether ``module(x=tensor)`` returns the output tensors (tensordict 0.15) or a TensorDict.

    Defaults to ``False``: a keyword call returns the TensorDict (the behaviour the
    project's overview documents); calls with positional tensors return the tensors
    either way. See :class:`set_keyword_calls_return_tensors`.

    Examples:
        >>> keyword_calls_return_tensors()
        False
    """
    return _KEYWORD_CALLS_RETURN_TENSORS[0]


class set_keyword_calls_return_tensors(ModeSwitch):  # noqa: N801 - switch naming of the tensordict API
    """Makes keyword-tensor calls return tensors, as in tensordict 0.15.

    A context manager, a decorator, or ``set_keyword_calls_return_tensors(True).set()``
    for the whole process (the environment variable
    ``TD_NN_KEYWORD_CALLS_RETURN_TENSORS=1`` sets it at import). With it on,
    ``module(x=tensor)`` returns the tensor at the single out_key (a tuple for several
    out_keys) instead of the TensorDict.

    Args:
        mode (bool, optional): defaults to ``True``.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> mod = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"])
        >>> with set_keyword_calls_return_tensors(True):
        ...     mod(x=torch.zeros(2))
        tensor([1., 1.])
        >>> mod(x=torch.zeros(2))["y"]
        tensor([1., 1.])
    """

    def __init__(self, mode: bool = True) -> None:
        super().__init__()
        self.mode = bool(mode)

    def _read(self) -> bool:
        return _KEYWORD_CALLS_RETURN_TENSORS[0]

    def _write(self, value: bool) -> None:
        _KEYWORD_CALLS_RETURN_TENSORS[0] = value


def _tensor_call_output(module: Any, out: Any, positional: bool) -> Any:
    """What a call with tensors returns: the out_keys' tensors for positional calls (and
    keyword calls under :class:`set_keyword_calls_return_tensors`), else the TensorDict."""
    if not isinstance(out, TensorDictBase) or not (positional or _KEYWORD_CALLS_RETURN_TENSORS[0]):
        return out
    values = tuple(out.get(key) for key in module.out_keys)
    return values[0] if len(values) == 1 else values

def _global_hooks_check() -> bool:
    return bool(_global_forward_hooks or _global_forward_pre_hooks or _global_backward_hooks or _global_backward_pre_hooks)  # type: ignore[name-defined]  # noqa: F821


#: ``True`` when a global ``nn.Module`` hook is registered. The function runs with
#: ``torch.nn.modules.module``'s globals, so that under ``torch.compile`` it reads the hook
#: dicts through the same source as ``nn.Module.__call__`` (no extra aliasing guards).
_any_global_hooks = types.FunctionType(_global_hooks_check.__code__, nn.modules.module.__dict__, "_any_global_hooks")


class TensorDictModuleBase(nn.Module):
    """Parent class of the modules that read and write TensorDicts.

    A subclass declares ``in_keys`` (the entries it reads) and ``out_keys`` (the
    entries it writes), and its ``forward`` follows
    ``tensordict_out = module.forward(tensordict_in)``.

    Every subclass may also be called with tensors instead of a TensorDict:
    ``module(x=tensor)`` (keywords named after the in_keys, nested keys joined with
    ``"_"``) or ``module(tensor)`` (positional, in in_keys order) builds a
    TensorDict, runs the module and returns the TensorDict, whose batch size is the
    leading shape shared by its entries.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> class AddOne(TensorDictModuleBase):
        ...     in_keys = ["x"]
        ...     out_keys = ["y"]
        ...
        ...     def forward(self, tensordict):
        ...         tensordict["y"] = tensordict["x"] + 1
        ...         return tensordict
        >>> AddOne()(x=torch.zeros(3))["y"]
        tensor([1., 1., 1.])
    """

    in_keys: list
    out_keys: list

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("in_keys", "out_keys"):
            declared = cls.__dict__.get(name)
            if isinstance(declared, (list, tuple, str)):
                # keys declared on the class become per-instance lists ``self._in_keys`` /
                # ``self._out_keys`` (so select_out_keys on one instance leaves others alone)
                setattr(cls, name, _instance_keys(name, declared))
        fwd = cls.__dict__.get("forward")
        if fwd is not None and callable(fwd) and not getattr(fwd, "_td_handles_kwargs", False):
            cls.forward = _wrap_forward(fwd)

    @property
    def device(self) -> torch.device:
        """Deprecated: the device of the module's first parameter or buffer (``cpu`` without any).

        A value assigned to ``self.device`` (as some subclasses do) is returned as is.
        """
        own = self.__dict__.get("_device_attr", _NOTSET)
        if own is not _NOTSET:
            return own
        warnings.warn(
            "TensorDictModuleBase.device is deprecated and will be removed in TensorDict 0.17; "
            "read the device of the module's parameters instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        for tensor in self.parameters():
            return tensor.device
        for tensor in self.buffers():  # type: ignore[assignment]
            return tensor.device
        return torch.device("cpu")

    @device.setter
    def device(self, value: Any) -> None:
        self.__dict__["_device_attr"] = value

    def __setattr__(self, name: str, value: Any) -> None:
        if (name == "in_keys" or name == "out_keys") and isinstance(value, (list, tuple)):
            value = _normalize_keys(value, name, type(self).__name__)  # ("b",) -> "b"
        super().__setattr__(name, value)

    def __repr__(self) -> str:
        """``ClassName(child=..., in_keys=[...], out_keys=[...])``, one entry per line: the
        child modules (``named_children``), the keys, then the fields of
        :meth:`_repr_fields`. Plain attributes are not listed."""
        fields = [f"{name}={child!r}" for name, child in self.named_children()]
        fields.append(f"in_keys={getattr(self, 'in_keys', [])}")
        fields.append(f"out_keys={getattr(self, 'out_keys', [])}")
        fields.extend(f"{name}={value}" for name, value in self._repr_fields())
        body = ",\n".join("    " + field.replace("\n", "\n    ") for field in fields)
        return f"{type(self).__name__}(\n{body})"

    def _repr_fields(self) -> list:
        """``(name, value)`` pairs a subclass adds to its repr after the keys."""
        return []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Same dispatch as ``nn.Module.__call__`` (which runs when any hook is registered,
        # globally or on this module, or when the module was compiled), one frame shorter.
        if (
            self._forward_hooks
            or self._forward_pre_hooks
            or self._backward_hooks
            or self._backward_pre_hooks
            or self.__dict__.get("_compiled_call_impl") is not None
            or _any_global_hooks()
        ):
            return nn.Module.__call__(self, *args, **kwargs)
        return self.forward(*args, **kwargs)

    # -------------------------------------------------------------- calls with tensors
    def _td_from_call(self, first: Any, args: tuple, kwargs: dict) -> TensorDict:
        positional = (first, *args) if first is not None else tuple(args)
        in_keys = _normalize_keys(getattr(self, "in_keys", []), "in_keys", type(self).__name__)
        values = _values_from_call(type(self).__name__, in_keys, positional, kwargs, "_")
        return _td_from_values(values)

    # -------------------------------------------------------------- out keys selection
    @staticmethod
    def is_tdmodule_compatible(module: Any) -> bool:
        """``True`` if ``module`` has ``in_keys`` and ``out_keys`` attributes.

        Examples:
            >>> from torch import nn
            >>> TensorDictModuleBase.is_tdmodule_compatible(nn.Linear(2, 2))
            False
        """
        return hasattr(module, "in_keys") and hasattr(module, "out_keys")

    @property
    def out_keys_source(self) -> list:
        """The ``out_keys`` before any :meth:`select_out_keys`."""
        src = self.__dict__.get("_out_keys_source_generic")
        return list(src) if src is not None else list(self.out_keys)

    def _check_selection(self, out_keys: tuple) -> list:
        for key in out_keys:
            if not isinstance(key, (str, tuple)):
                msg = (
                    f"{type(self).__name__}.select_out_keys: key should be a str or a tuple of str "
                    f"(a nested key), got {type(key).__name__} ({key!r}); pass several keys unpacked: "
                    "select_out_keys(*keys)."
                )
                raise ValueError(msg)
        selected = _normalize_keys(list(out_keys), "out_keys", type(self).__name__)
        available = self.out_keys_source
        for key in selected:
            if key not in available:
                msg = (
                    f"Can't select non existent key {key!r}: {type(self).__name__}.select_out_keys "
                    f"accepts the module's out_keys {available}."
                )
                raise ValueError(msg)
        return selected

    def select_out_keys(self, *out_keys: NestedKey) -> TensorDictModuleBase:
        """Keeps only ``out_keys`` in the output; the other outputs are not written.

        Args:
            *out_keys (NestedKey): a subset of the module's ``out_keys``.

        Returns:
            the module itself (modified in place).

        Raises:
            ValueError: a key is not one of the module's ``out_keys``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> from tensordict.nn import TensorDictModule
            >>> mod = TensorDictModule(lambda x, y: (x + 2, y + 2), in_keys=["a", "b"], out_keys=["c", "d"])
            >>> _ = mod.select_out_keys("d")
            >>> sorted(mod(TensorDict(a=torch.zeros(()), b=torch.zeros(()))).keys())
            ['a', 'b', 'd']
            >>> _ = mod.reset_out_keys()
            >>> mod.out_keys
            ['c', 'd']
        """
        selected = self._check_selection(out_keys)
        if "_out_keys_source_generic" not in self.__dict__:
            self.__dict__["_out_keys_source_generic"] = list(self.out_keys)
            self.__dict__["_selection_handles"] = (
                self.register_forward_pre_hook(_record_present, with_kwargs=True),
                self.register_forward_hook(_drop_unselected, with_kwargs=True),
            )
        self.out_keys = selected
        return self

    def reset_out_keys(self) -> TensorDictModuleBase:
        """Undoes :meth:`select_out_keys`: every output is written again.

        Returns:
            the module itself.
        """
        src = self.__dict__.pop("_out_keys_source_generic", None)
        if src is not None:
            for handle in self.__dict__.pop("_selection_handles", ()):
                handle.remove()
            self.out_keys = src
        return self

    # -------------------------------------------------------------- parameters
    def reset_parameters_recursive(self, parameters: TensorDictBase | None = None) -> TensorDictBase | None:
        """Calls ``reset_parameters()`` on every submodule that has one.

        Args:
            parameters (TensorDictBase, optional): if given, the parameters (as from
                ``TensorDict.from_module(self)``) are re-initialised in place instead of
                the module's own.

        Returns:
            ``parameters`` (re-initialised), or ``None``.

        Examples:
            >>> import torch
            >>> from tensordict.nn import TensorDictModule
            >>> mod = TensorDictModule(torch.nn.Linear(2, 2), in_keys=["x"], out_keys=["y"])
            >>> _ = mod.reset_parameters_recursive()
        """
        if parameters is None:
            found = False
            for sub in self.modules():
                if sub is not self and hasattr(sub, "reset_parameters") and not isinstance(sub, TensorDictModuleBase):
                    sub.reset_parameters()  # type: ignore[operator]
                    found = True
            if not found:
                warnings.warn(
                    "reset_parameters_recursive was called without the parameters argument and did not find "
                    f"any parameters to reset (no submodule of {type(self).__name__} has reset_parameters).",
                    UserWarning,
                    stacklevel=2,
                )
            return None
        from tensordict.nn._functional import _swap_params

        if parameters.batch_dims:
            msg = (
                f"{type(self).__name__}.reset_parameters_recursive: the parameters must have batch_size=[] "
                f"(one set of parameters), got batch_size={list(parameters.batch_size)}; reset a stack "
                "one slice at a time (or use EnsembleModule)."
            )
            raise RuntimeError(msg)
        with _swap_params(self, parameters):
            self.reset_parameters_recursive()
        return parameters


def _record_present(module: TensorDictModuleBase, args: tuple, kwargs: dict) -> None:
    td = args[0] if args else kwargs.get("tensordict")
    src = module.__dict__.get("_out_keys_source_generic")
    if isinstance(td, TensorDictBase) and src is not None:
        view = td.keys(True)
        module.__dict__["_present_before"] = [k for k in src if k in view]
    else:
        module.__dict__["_present_before"] = []


def _drop_unselected(module: TensorDictModuleBase, args: tuple, kwargs: dict, output: Any) -> Any:
    src = module.__dict__.get("_out_keys_source_generic")
    if src is None or not isinstance(output, TensorDictBase):
        return output
    keep = set(module.out_keys) | set(module.__dict__.pop("_present_before", []))
    drop = [k for k in src if k not in keep]
    if drop:
        output.exclude(*drop, inplace=True)
    return output
