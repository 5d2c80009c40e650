"""``TensorDictModule`` (a callable with input and output keys), ``WrapModule`` (a
callable on the whole TensorDict) and ``TensorDictModuleWrapper``.

The forward path of :class:`TensorDictModule` is the hot path of every model built on
this package: the key handling is computed once in ``__init__`` (and when the keys
change) so that a call costs one ``td.get`` per input and one ``td.set`` per output.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from tensordict import NestedKey, TensorDict, TensorDictBase, is_non_tensor
from tensordict.nn._common import (
    _DISPATCH_TD_NN_MODULES,
    _NOTSET,
    TensorDictModuleBase,
    _all_present,
    _ArgumentError,
    _handles_kwargs,
    _infer_batch_size_,
    _missing_in_key_error,
    _missing_input_call_error,
    _module_label,
    _normalize_keys,
    _ReadableKeyError,
    _td_from_values,
    _tensor_call_output,
    _values_from_call,
)
from tensordict.nn._common import _SKIP_EXISTING as _SKIP

__all__ = ["TensorDictModule", "TensorDictModuleWrapper", "WrapModule", "as_tensordict_module"]

_Tensor = torch.Tensor
#: attributes whose change invalidates the precomputed forward plan
_PLAN_ATTRS = frozenset({"module", "inplace", "method", "method_kwargs", "strict"})


def _signature_names(fn: Callable) -> set[str] | None:
    target = fn.forward if isinstance(fn, nn.Module) else fn
    try:
        return set(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        return None


def _parse_dict_in_keys(in_keys: Mapping, out_to_in_map: bool | None, module: Callable, owner: str) -> tuple[list, list]:
    """Returns ``(tensordict keys, keyword names)`` from a dict ``in_keys``."""
    keys = list(in_keys.keys())
    values = list(in_keys.values())
    if out_to_in_map is None:
        if any(isinstance(k, tuple) for k in keys):
            out_to_in_map = False
        elif any(isinstance(v, tuple) for v in values):
            out_to_in_map = True
        else:
            names = _signature_names(module)
            if names is not None and set(keys) <= names and not set(values) <= names:
                out_to_in_map = True
            else:
                out_to_in_map = False
    if out_to_in_map:
        td_keys, kwargs = values, keys
    else:
        td_keys, kwargs = keys, values
    for name in kwargs:
        if not isinstance(name, str):
            msg = f"{owner}: keyword argument names in a dict in_keys must be str, got {name!r}."
            raise TypeError(msg)
    return _normalize_keys(td_keys, "in_keys", owner), list(kwargs)


class TensorDictModule(TensorDictModuleBase):
    """Wraps a callable so that it reads its inputs from, and writes its outputs to, a TensorDict.

    Args:
        module (Callable): an ``nn.Module`` or any callable. It may return one tensor,
            a tuple/list of tensors (one per out key) or a dict / TensorDict holding
            the out keys.
        in_keys (NestedKey, list of NestedKey or dict): the entries read, passed
            positionally in this order. A dict maps tensordict keys to keyword-argument
            names (``{"obs": "x"}`` calls ``module(x=td["obs"])``); see
            ``out_to_in_map``.
        out_keys (NestedKey or list of NestedKey): where the outputs are written, in
            order. ``"_"`` discards the corresponding output.

    Keyword Args:
        inplace (bool or "empty", optional): ``True`` (default) writes into the input
            TensorDict and returns it; ``False`` writes into a new ``TensorDict`` with
            ``batch_size=[]`` and no device; ``"empty"`` into ``tensordict.empty()``.
        out_to_in_map (bool, optional): for a dict ``in_keys``: ``True`` reads it as
            ``{keyword: tensordict key}``, ``False`` as ``{tensordict key: keyword}``.
            Defaults to ``None``: a tuple (nested) key decides, then the callable's
            signature; ``{tensordict key: keyword}`` when it stays ambiguous.
        strict (bool, optional): if ``True``, a missing input raises ``KeyError`` before
            the module runs. If ``False`` (default, as tensordict 0.15), it is passed as
            ``None`` (for modules with optional inputs); if the call then fails with an
            error that mentions ``None``, a ``KeyError`` naming the missing key is raised
            from it (nothing is written either way).
        method (str, optional): call ``module.<method>`` instead of ``module``.
        method_kwargs (dict, optional): extra keyword arguments for every call.

    Raises:
        TypeError: ``module`` is not callable, or a key is not a str / tuple of str.
        ValueError: ``out_keys`` has duplicates.

    At call time, ``module(tensordict)`` raises ``KeyError`` (naming the module and
    the key, the TensorDict left unchanged) for a missing input, ``ValueError`` when
    the number of outputs differs from ``len(out_keys)`` and ``RuntimeError`` when an
    output's leading dims do not match the TensorDict's batch size.

    ``module(input=tensor)`` (keywords named after the in_keys, nested keys joined
    with ``"_"``) or ``module(tensor)`` builds the TensorDict, runs and returns it; its
    batch size is the leading shape shared by the inputs and outputs.

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> module = TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=[("out", "y")])
        >>> td = module(TensorDict(x=torch.randn(5, 3), batch_size=[5]))
        >>> td["out", "y"].shape
        torch.Size([5, 4])
        >>> module(x=torch.randn(5, 3)).batch_size
        torch.Size([5])
    """

    def __init__(
        self,
        module: Callable,
        in_keys: NestedKey | Sequence[NestedKey] | Mapping,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        *,
        inplace: bool | str = True,
        out_to_in_map: bool | None = None,
        strict: bool = False,
        method: str | None = None,
        method_kwargs: dict | None = None,
    ) -> None:
        super().__init__()
        owner = type(self).__name__
        if isinstance(module, (TensorDictBase, type)) or not callable(module):
            what = f"class {module.__name__} (a class)" if isinstance(module, type) else f"of type {type(module).__name__}"
            msg = (
                f"{owner}: Module {what} is not callable as a module: module must be an nn.Module or a "
                "callable (instantiate a class first; wrap tensors in an nn.Module or a function)."
            )
            raise _ArgumentError(msg)
        for what, keys in (("in_keys", in_keys), ("out_keys", out_keys)):
            if keys is None:
                msg = f"{owner}: {what} must be of type list, str or tuples of str, got None."
                raise _ArgumentError(msg)
        if inplace is None:  # upstream's subclasses (TorchRL's SafeSequential) pass None for the default
            inplace = True
        if inplace not in (True, False, "empty"):
            msg = f"{owner}: inplace must be True, False or 'empty', got {inplace!r}."
            raise ValueError(msg)
        if method is not None and not callable(getattr(module, method, None)):
            msg = f"{owner}: method={method!r} is not a callable attribute of {type(module).__name__}."
            raise ValueError(msg)
        self.module = module
        self.inplace = inplace
        self.strict = bool(strict)
        self.method = method
        self.method_kwargs = dict(method_kwargs) if method_kwargs else {}
        if isinstance(in_keys, Mapping):
            keys, kwargs = _parse_dict_in_keys(in_keys, out_to_in_map, module, owner)
            self.__dict__["_in_keys"] = keys
            self.__dict__["_kwargs"] = kwargs
        else:
            if out_to_in_map is not None:
                warnings.warn(
                    "out_to_in_map is not None but is only used when in_key is a dictionary.",
                    UserWarning,
                    stacklevel=2,
                )
            self.__dict__["_in_keys"] = _normalize_keys(in_keys, "in_keys", owner)
            self.__dict__["_kwargs"] = None
        if "_" in self.__dict__["_in_keys"]:
            warnings.warn(
                f'{owner}: the key "_" marks an output to discard; as an input key it reads an entry '
                f'named "_" (in_keys={self.__dict__["_in_keys"]}).',
                UserWarning,
                stacklevel=2,
            )
        self.out_to_in_map = out_to_in_map
        self._set_out_keys_source(_normalize_keys(out_keys, "out_keys", owner))

    # -------------------------------------------------------------- attributes
    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name == "module":
            self.__dict__["_fn"] = value
        if name in _PLAN_ATTRS:
            self._build_plan()

    # -------------------------------------------------------------- pickling
    def __getstate__(self) -> dict:
        """The module's state. A wrapped callable that is not an ``nn.Module`` (a lambda, a
        local function) is pickled with ``cloudpickle``, as tensordict 0.15 does, so the
        module can go to another process (``torch.multiprocessing`` with ``spawn``, a
        collector's workers); ``copy.deepcopy`` keeps the function itself."""
        state = dict(self.__dict__)
        fn = state.get("_fn")
        if fn is not None and not isinstance(fn, nn.Module):
            state["module"] = state["_fn"] = _ByCloudpickle(fn)
        state.pop("_fast", None)  # holds the callable too; rebuilt on load
        return state

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._build_plan()

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("_"):
                raise
            inner = self.__dict__.get("_fn")
            if inner is None:
                raise
            return getattr(inner, name)

    @property
    def in_keys(self) -> list:
        """The entries read, in the order they are passed to the module."""
        return self.__dict__["_in_keys"]

    @in_keys.setter
    def in_keys(self, value: Any) -> None:
        keys = _normalize_keys(value, "in_keys", type(self).__name__)
        kwargs = self.__dict__.get("_kwargs")
        if kwargs is not None and len(kwargs) != len(keys):
            msg = f"{type(self).__name__}: {len(keys)} in_keys given for {len(kwargs)} keyword arguments {kwargs}."
            raise ValueError(msg)
        self.__dict__["_in_keys"] = keys
        self._build_plan()

    @property
    def out_keys(self) -> list:
        """The entries written (only the selected ones after :meth:`select_out_keys`)."""
        return self.__dict__["_out_keys"]

    @out_keys.setter
    def out_keys(self, value: Any) -> None:
        self._set_out_keys_source(_normalize_keys(value, "out_keys", type(self).__name__))

    @property
    def out_keys_source(self) -> list:
        """Every output key of the module, selected or not."""
        return list(self.__dict__["_out_keys_source"])

    def _set_out_keys_source(self, keys: list) -> None:
        named = [k for k in keys if k != "_"]
        if len(set(named)) != len(named):
            dups = sorted({str(k) for k in named if named.count(k) > 1})
            msg = f"{type(self).__name__}: out_keys has duplicated entries {dups} in {keys}."
            raise ValueError(msg)
        self.__dict__["_out_keys_source"] = keys
        self.__dict__["_out_keys"] = list(keys)
        self._build_plan()

    def select_out_keys(self, *out_keys: NestedKey) -> TensorDictModule:  # noqa: D102
        self.__dict__["_out_keys"] = self._check_selection(out_keys)
        self._build_plan()
        return self

    select_out_keys.__doc__ = TensorDictModuleBase.select_out_keys.__doc__

    def reset_out_keys(self) -> TensorDictModule:  # noqa: D102
        self.__dict__["_out_keys"] = list(self.__dict__["_out_keys_source"])
        self._build_plan()
        return self

    reset_out_keys.__doc__ = TensorDictModuleBase.reset_out_keys.__doc__

    def _build_plan(self) -> None:
        """Precomputes what ``forward`` needs: the keys to read and (index, key) to write."""
        d = self.__dict__
        if "_out_keys_source" not in d:
            return
        selected = d["_out_keys"]
        source = d["_out_keys_source"]
        plan = tuple((i, k) for i, k in enumerate(source) if k != "_" and k in selected)
        d["_n_out"] = len(source)
        d["_write_plan"] = plan
        d["_single_key"] = plan[0][1] if len(source) == 1 and plan else None
        d["_written"] = [k for k in source if k != "_"]
        in_keys = d["_in_keys"]
        d["_in_tuple"] = tuple(in_keys)
        d["_in_single"] = in_keys[0] if len(in_keys) == 1 and d.get("_kwargs") is None else None
        single = d["_single_key"]
        fast = None
        if (
            d["_in_single"].__class__ is str
            and single.__class__ is str
            and d.get("inplace") is True
            and d.get("method") is None
            and not d.get("method_kwargs")
            and "_fn" in d
        ):
            fast = (d["_fn"], d["_in_single"], single)
        d["_fast"] = fast

    # -------------------------------------------------------------- forward
    def _label(self) -> str:
        return _module_label(self)

    def _count_error(self, got: int, what: str) -> ValueError:
        msg = (
            f"{self._label()}: the module returned {got} output(s) ({what}) but {self._n_out} "
            f"out_keys were given ({self.out_keys_source}). Make the number of out_keys match "
            "the number of outputs (use '_' to discard an output)."
        )
        return ValueError(msg)

    @staticmethod
    def _skip_mode() -> bool:
        return _SKIP[0]

    def _skips(self, tensordict: TensorDictBase) -> bool:
        """``True`` when skip-existing is on and every written key is already present."""
        return bool(_SKIP[0] and self._written and _all_present(tensordict, self._written))

    def _read(self, tensordict: TensorDictBase, key: NestedKey) -> Any:
        value = tensordict.get(key, _NOTSET)
        if value is _NOTSET:
            if self.strict:
                raise _missing_in_key_error(self._label(), key, tensordict)
            return None
        if value.__class__ is not _Tensor and is_non_tensor(value):
            # non-tensor data reaches the module as its Python value (a str, a list for
            # a stack), as ``td[key]`` gives it
            return tensordict[key]
        return value

    def _set_one(self, dest: TensorDictBase, key: NestedKey, value: Any) -> None:
        try:
            dest.set(key, value)
        except RuntimeError as err:
            msg = f"{self._label()}: cannot write the output {key!r}: {err}"
            raise RuntimeError(msg) from err

    def _write(self, dest: TensorDictBase, out: Any) -> None:
        if isinstance(out, _Tensor):
            if self._n_out != 1:
                raise self._count_error(1, "a single tensor")
            key = self._single_key
            if key is not None:
                self._set_one(dest, key, out)
            return
        if isinstance(out, (tuple, list)):
            if len(out) != self._n_out:
                raise self._count_error(len(out), f"a {type(out).__name__}")
            plan = self._write_plan
            if len(plan) > 1:
                bs = dest.batch_size
                nd = len(bs)
                for i, key in plan:
                    value = out[i]
                    shape = value.shape if isinstance(value, _Tensor) else getattr(value, "batch_size", None)
                    if shape is not None and isinstance(value, (_Tensor, TensorDictBase)) and shape[:nd] != bs:
                        msg = (
                            f"{self._label()}: the output {key!r} has shape {tuple(shape)}, whose leading "
                            f"dims do not match the TensorDict's batch_size={tuple(bs)}. Nothing was written."
                        )
                        raise RuntimeError(msg)
            for i, key in plan:
                self._set_one(dest, key, out[i])
            return
        if isinstance(out, (TensorDictBase, Mapping)):
            values = []
            for _, key in self._write_plan:
                value = out.get(key, _NOTSET) if isinstance(out, TensorDictBase) else out.get(key, _NOTSET)
                if value is _NOTSET:
                    msg = f"{self._label()}: the module returned a {type(out).__name__} without the out_key {key!r}."
                    raise _ReadableKeyError(msg)
                values.append((key, value))
            for key, value in values:
                self._set_one(dest, key, value)
            return
        if out is None and self._n_out == 0:
            return
        if self._n_out != 1:
            raise self._count_error(1, f"a {type(out).__name__}")
        key = self._single_key
        if key is not None:
            self._set_one(dest, key, out)

    @_handles_kwargs
    def forward(
        self,
        tensordict: TensorDictBase | None = None,
        *args: Any,
        tensordict_out: TensorDictBase | None = None,
        **kwargs: Any,
    ) -> TensorDictBase:
        """Reads ``in_keys`` from ``tensordict``, calls the module and writes ``out_keys``.

        Args:
            tensordict (TensorDictBase): the input. Omit it to pass tensors instead
                (``module(x=tensor)``), which returns a new TensorDict.
            *args: extra positional arguments passed to the module after the inputs.
            tensordict_out (TensorDictBase, optional): where to write the outputs.
            **kwargs: extra keyword arguments passed to the module.

        Returns:
            the TensorDict holding the outputs (``tensordict`` itself by default).

        Raises:
            KeyError: an input key is missing (nothing is written).
            ValueError: the number of outputs does not match ``out_keys``.
            RuntimeError: an output's leading dims do not match the batch size.
        """
        fast = self._fast
        if fast is not None and tensordict.__class__ is TensorDict and not (args or kwargs or _SKIP[0]) and tensordict_out is None:
            # Hot path (one str key in, one str key out, plain TensorDict): reads and
            # writes the TensorDict's storage dict directly, with the same checks as
            # ``TensorDict.get`` / ``TensorDict.set``; anything unusual (missing or
            # non-tensor input, locked, batch or device mismatch) takes the general path.
            fn, in_key, out_key = fast
            store = tensordict._tensordict
            value = store.get(in_key)
            if value.__class__ is _Tensor:  # else (missing, non-tensor): the general path
                out = fn(value)
                if out.__class__ is _Tensor and tensordict._device is None and not tensordict._is_locked:
                    bs = tensordict._batch_size
                    if out.shape[: len(bs)] == bs:
                        store[out_key] = out
                        return tensordict
                self._write(tensordict, out)
                return tensordict
        if not isinstance(tensordict, TensorDictBase):
            if getattr(tensordict, "_is_tensorclass", False):
                # a tensorclass: run on its TensorDict, write the outputs through the instance
                out = self.forward(tensordict._tensordict.copy(), *args, **kwargs)  # type: ignore[attr-defined]
                for key in self.out_keys:
                    tensordict.set(key, out.get(key))  # type: ignore[attr-defined]
                return tensordict  # type: ignore[return-value]
            if not _DISPATCH_TD_NN_MODULES[0]:
                msg = f"{type(self).__name__}.forward() missing 1 required positional argument: 'tensordict'"
                raise TypeError(msg)
            positional = (tensordict, *args) if tensordict is not None else args
            extra: tuple[list, dict] = ([], {})
            values = _values_from_call(type(self).__name__, self.in_keys, positional, kwargs, "_", extra)
            if extra[1] and len(values) < len(self.in_keys):
                # an unknown keyword while an input is missing: most likely a misspelt input
                _values_from_call(type(self).__name__, self.in_keys, positional, kwargs, "_")
            td = _td_from_values(values)
            out = _infer_batch_size_(self.forward(td, *extra[0], tensordict_out=tensordict_out, **extra[1]))
            return _tensor_call_output(self, out, bool(positional))
        if self._skips(tensordict):
            return tensordict
        fn = self._fn
        if self.method is not None:
            fn = getattr(fn, self.method)
        if self.method_kwargs:
            kwargs = {**self.method_kwargs, **kwargs}
        key = self._in_single
        inputs = [self._read(tensordict, key)] if key is not None else [self._read(tensordict, k) for k in self._in_tuple]
        names = self._kwargs
        if _any_none(inputs):  # strict=False and an input is missing: the module gets None
            missing = [k for k, v in zip(self._in_tuple, inputs) if v is None and k not in tensordict.keys(True)]
            try:
                out = fn(*inputs, *args, **kwargs) if names is None else fn(*args, **dict(zip(names, inputs)), **kwargs)
            except Exception as err:
                error = _missing_input_call_error(self._label(), missing, tensordict, err)
                if error is None:
                    raise
                raise error from err
            if out is None and missing and self._n_out:
                raise _missing_in_key_error(self._label(), missing[0], tensordict)
        elif names is None:
            out = fn(*inputs, *args, **kwargs)
        else:
            out = fn(*args, **dict(zip(names, inputs)), **kwargs)
        if tensordict_out is not None:
            dest = tensordict_out
        elif self.inplace is True:
            dest = tensordict
        elif self.inplace == "empty":
            dest = tensordict.empty()
        else:
            dest = TensorDict({}, batch_size=[])
        single = self._single_key
        if single is not None and out.__class__ is _Tensor:
            # fast path: one tensor for one key
            try:
                dest.set(single, out)
            except RuntimeError as err:
                msg = f"{self._label()}: cannot write the output {single!r}: {err}"
                raise RuntimeError(msg) from err
            return dest
        self._write(dest, out)
        return dest

    def __repr__(self) -> str:
        inner = repr(self._fn)  # a module's repr, or a callable's (``<function f at 0x...>``)
        inner = inner.replace("\n", "\n    ")
        return (
            f"{type(self).__name__}(\n    module={inner},\n    in_keys={self.in_keys},\n"
            f"    out_keys={self.out_keys})"
        )


def _any_none(values: list) -> bool:
    """Whether an input is ``None`` (``is`` tests: ``None in values`` would compare tensors)."""
    for value in values:
        if value is None:
            return True
    return False


class _ByCloudpickle:
    """Stands for a callable in a :class:`TensorDictModule`'s pickled state: pickled, it
    becomes ``cloudpickle.loads(<bytes>)`` (the callable again on load, in any process);
    deep-copied, it becomes the callable itself (functions are not copied)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __reduce__(self) -> tuple:
        import cloudpickle

        return cloudpickle.loads, (cloudpickle.dumps(self.fn),)

    def __deepcopy__(self, memo: dict) -> Any:
        return self.fn


class WrapModule(TensorDictModuleBase):
    """Wraps a callable that takes and returns a whole TensorDict (e.g. a reshape).

    Useful inside :class:`~tensordict.nn.TensorDictSequential` when a step needs the
    entire TensorDict.

    Args:
        func (Callable[[TensorDictBase], TensorDictBase]): the function.

    Keyword Args:
        inplace (bool, optional): if ``True``, the result is written back into the
            input TensorDict (``td.update(result)``) and the input is returned.
            Defaults to ``False`` (the result is returned).
        in_keys (list of NestedKey, optional): the keys ``func`` reads (informative,
            for TensorDictSequential). Defaults to ``[]``.
        out_keys (list of NestedKey, optional): the keys ``func`` writes (informative).
            Defaults to ``[]``.

    Raises:
        TypeError: ``func`` is not callable.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule, TensorDictSequential
        >>> seq = TensorDictSequential(
        ...     TensorDictModule(lambda x: x * 2, in_keys=["x"], out_keys=["y"]),
        ...     WrapModule(lambda td: td.reshape(-1)),
        ... )
        >>> seq(TensorDict(x=torch.ones(3, 4), batch_size=[3, 4])).shape
        torch.Size([12])
    """

    def __init__(
        self,
        func: Callable[[TensorDictBase], TensorDictBase],
        *,
        inplace: bool = False,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__()
        if not callable(func):
            msg = f"WrapModule: func must be callable, got {type(func).__name__}."
            raise TypeError(msg)
        self.func = func
        self.inplace = inplace
        self.in_keys = _normalize_keys(in_keys, "in_keys", "WrapModule")
        self.out_keys = _normalize_keys(out_keys, "out_keys", "WrapModule")

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Returns ``func(tensordict)`` (written back into ``tensordict`` if ``inplace``)."""
        out = self.func(tensordict)
        if self.inplace and out is not tensordict:
            tensordict.update(out)
            return tensordict
        return out


class TensorDictModuleWrapper(TensorDictModuleBase):
    """Base class to wrap a TensorDict module and extend it.

    Attributes that the wrapper does not define are read from the wrapped module, and
    calling the wrapper runs the wrapped module's ``forward``. Subclass it to add
    behaviour (exploration noise, logging, ...) around an existing module.

    Args:
        td_module (TensorDictModuleBase): the module to wrap.

    Raises:
        TypeError: ``td_module`` is not an ``nn.Module``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> inner = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"])
        >>> wrapper = TensorDictModuleWrapper(inner)
        >>> wrapper.in_keys, wrapper.out_keys
        (['x'], ['y'])
        >>> wrapper(TensorDict(x=torch.zeros(2), batch_size=[2]))["y"]
        tensor([1., 1.])
    """

    def __init__(self, td_module: TensorDictModuleBase) -> None:
        super().__init__()
        if not isinstance(td_module, nn.Module):
            msg = f"TensorDictModuleWrapper: td_module must be an nn.Module, got {type(td_module).__name__}."
            raise TypeError(msg)
        self.td_module = td_module

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("__"):
                raise
            inner = self.__dict__["_modules"].get("td_module")
            if inner is None:
                raise
            return getattr(inner, name)

    @_handles_kwargs
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Runs the wrapped module's ``forward``."""
        return self.td_module.forward(*args, **kwargs)

    def select_out_keys(self, *out_keys: NestedKey) -> TensorDictModuleWrapper:
        """Selects the wrapped module's outputs (see :meth:`TensorDictModuleBase.select_out_keys`); returns ``self``."""
        self.td_module.select_out_keys(*out_keys)
        return self

    def reset_out_keys(self) -> TensorDictModuleWrapper:
        """Undoes :meth:`select_out_keys` on the wrapped module; returns ``self``."""
        self.td_module.reset_out_keys()
        return self


def _outputs_of_tensor_call(out: Any, args: tuple, kwargs: dict, out_keys: list) -> Any:
    """What a decorated function returns: ``out`` for a TensorDict call, the out_keys'
    values (one, or a tuple) for a call with tensors."""
    if not isinstance(out, TensorDictBase) or "tensordict" in kwargs or any(isinstance(a, TensorDictBase) for a in args):
        return out
    values = tuple(out.get(key) for key in out_keys)
    return values[0] if len(values) == 1 else values


def as_tensordict_module(
    in_keys: NestedKey | Sequence[NestedKey], out_keys: NestedKey | Sequence[NestedKey]
) -> Callable[[Callable], Callable]:
    """Decorator: a function (or method) of tensors becomes a function of a TensorDict.

    The decorated function is called as a :class:`TensorDictModule` over the original
    function would be (``self`` comes first for a method, whose first parameter is
    named ``self``):

    - with a TensorDict (positional, or ``tensordict=``), it reads ``in_keys``, passes
      them positionally to the original function, writes the result(s) at ``out_keys``
      (in ``tensordict_out=`` when given) and returns that TensorDict;
    - with tensors, positional in ``in_keys`` order or as keywords named after the
      keys (nested keys joined with ``"_"``), it returns the function's output(s), as
      in tensordict 0.15 (unlike a ``TensorDictModule``'s keyword call, which returns
      the TensorDict here: see ``set_keyword_calls_return_tensors``).

    Args:
        in_keys (NestedKey or list of NestedKey): the entries read, in argument order.
        out_keys (NestedKey or list of NestedKey): where the outputs go.

    Returns:
        the decorator.

    Raises:
        KeyError: an input key is missing from the TensorDict.
        ValueError: the function returns a different number of values than ``out_keys``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> @as_tensordict_module(in_keys="c", out_keys="d")
        ... def add_one(c):
        ...     return c + 1
        >>> add_one(TensorDict(c=torch.zeros(2), batch_size=[2]))["d"]
        tensor([1., 1.])
        >>> add_one(c=torch.zeros(2))
        tensor([1., 1.])
    """
    ins = _normalize_keys(in_keys, "in_keys", "as_tensordict_module")
    outs = _normalize_keys(out_keys, "out_keys", "as_tensordict_module")

    def decorator(func: Callable) -> Callable:
        try:
            params = list(inspect.signature(func).parameters)
        except (TypeError, ValueError):  # pragma: no cover - builtins
            params = []
        if params and params[0] == "self":

            @functools.wraps(func)
            def method_wrapper(owner: Any, *args: Any, **kwargs: Any) -> Any:
                module = TensorDictModule(functools.partial(func, owner), in_keys=ins, out_keys=outs)
                return _outputs_of_tensor_call(module(*args, **kwargs), args, kwargs, outs)

            wrapper = method_wrapper
        else:
            module = TensorDictModule(func, in_keys=ins, out_keys=outs)

            @functools.wraps(func)
            def func_wrapper(*args: Any, **kwargs: Any) -> Any:
                return _outputs_of_tensor_call(module(*args, **kwargs), args, kwargs, outs)

            wrapper = func_wrapper
        wrapper.in_keys = ins  # type: ignore[attr-defined]
        wrapper.out_keys = outs  # type: ignore[attr-defined]
        return wrapper

    return decorator
