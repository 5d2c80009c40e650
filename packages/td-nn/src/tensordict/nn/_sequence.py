"""``TensorDictSequential``: a chain of TensorDict modules, each reading and writing
entries of one TensorDict (so a step can take several inputs, unlike ``nn.Sequential``)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from tensordict import NestedKey, TensorDict, TensorDictBase
from tensordict.nn._common import (
    _NOTSET,
    TensorDictModuleBase,
    _all_present,
    _any_global_hooks,
    _handles_kwargs,
    _infer_batch_size_,
    _missing_in_key_error,
    _normalize_keys,
    _tensor_call_output,
)
from tensordict.nn._module import TensorDictModule, WrapModule

__all__ = ["TensorDictSequential"]

_Tensor = torch.Tensor


def _as_module(obj: Any, owner: str) -> nn.Module:
    if isinstance(obj, nn.Module):
        if not hasattr(obj, "in_keys") or not hasattr(obj, "out_keys"):
            msg = (
                f"{owner}: step {type(obj).__name__} has no in_keys/out_keys; wrap a plain "
                f"nn.Module in TensorDictModule({type(obj).__name__}(...), in_keys=[...], out_keys=[...])."
            )
            raise TypeError(msg)
        return obj
    if isinstance(obj, TensorDictBase) or not callable(obj):
        msg = (
            f"{owner}: every step must be an nn.Module or a callable taking a TensorDict, got "
            f"{type(obj).__name__}."
        )
        raise TypeError(msg)
    return WrapModule(obj)


def _keys_of(module: nn.Module, attr: str) -> list:
    keys = getattr(module, attr, None)
    if keys is None:
        return []
    return [k for k in _normalize_keys(keys, attr) if k != "_"]


def _tracks_keys(module: nn.Module) -> bool:
    """``True`` when the module reads and writes exactly its declared keys."""
    if isinstance(module, TensorDictSequential):
        return module.__dict__.get("_precheck") is not None
    if isinstance(module, TensorDictModule):
        return module.strict
    return bool(getattr(module, "_tracks_keys", False))


def _add_written(out_keys: list, keys: Any) -> None:
    """Appends a step's ``keys`` to the sequence's ``out_keys``, in the order of the last write.

    A key written again by a later step moves to the end (as in tensordict 0.15), so
    ``out_keys`` (and the tensors a keyword call returns) follow the last writer.
    """
    for key in keys:
        if key in out_keys:
            out_keys.remove(key)
        out_keys.append(key)


def _regroup(items: list, depth: int) -> list:
    """Puts selected ``(name, step, chain)`` triples back into their nested sequences
    (from ``depth`` on): consecutive steps of one nested sequence become one new
    sequence of its class holding them. Returns ``(name, module)`` pairs."""
    out: list = []
    i = 0
    while i < len(items):
        name, m, chain = items[i]
        if len(chain) <= depth:
            out.append((name, m))
            i += 1
            continue
        outer_name, outer = chain[depth]
        j = i
        while j < len(items) and len(items[j][2]) > depth and items[j][2][depth][1] is outer:
            j += 1
        inner = [mod for _, mod in _regroup(items[i:j], depth + 1)]
        out.append((outer_name, outer._new_like(inner)))
        i = j
    return out


class TensorDictSequential(TensorDictModule):
    """Runs TensorDict modules one after the other on the same TensorDict.

    Each step reads its ``in_keys`` and writes its ``out_keys``, so any step can use
    the outputs of any earlier one (or other inputs). Plain callables taking and
    returning a TensorDict are wrapped in :class:`~tensordict.nn.WrapModule`.

    Args:
        *modules (TensorDictModuleBase, callable, or one OrderedDict of them): the steps.

    Keyword Args:
        partial_tolerant (bool, optional): if ``True``, a step whose inputs are
            missing is skipped (for a lazy stack, run on the stacked TensorDicts that
            have them) instead of raising. Defaults to ``False``.
        selected_out_keys (list of NestedKey, optional): keep only these outputs
            (see :meth:`select_out_keys`). Defaults to ``None`` (all).
        inplace (bool, optional): ``True``/``None`` (default) writes into the input
            TensorDict; ``False`` runs on a shallow copy and returns it.

    Attributes:
        in_keys: the keys read before any step writes them.
        out_keys: every key written by a step (the selected ones after
            :meth:`select_out_keys`).

    Raises:
        TypeError: a step is neither an ``nn.Module`` nor a callable.

    At call time a missing input raises ``KeyError`` naming the key and the step
    that reads it, before any step runs (the TensorDict is left unchanged).

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> seq = TensorDictSequential(
        ...     TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["hidden"]),
        ...     TensorDictModule(lambda h, m: h * m, in_keys=["hidden", "mask"], out_keys=["y"]),
        ... )
        >>> seq.in_keys, seq.out_keys
        (['x', 'mask'], ['hidden', 'y'])
        >>> td = seq(TensorDict(x=torch.randn(5, 3), mask=torch.ones(5, 4), batch_size=[5]))
        >>> td["y"].shape
        torch.Size([5, 4])
        >>> len(seq.select_subsequence(out_keys=["hidden"]))
        1
    """

    def __init__(
        self,
        *modules: Any,
        partial_tolerant: bool = False,
        selected_out_keys: Sequence[NestedKey] | None = None,
        inplace: bool | None = None,
    ) -> None:
        TensorDictModuleBase.__init__(self)
        owner = type(self).__name__
        if len(modules) == 1 and isinstance(modules[0], Mapping):
            container: nn.Module = nn.ModuleDict(OrderedDict((str(k), _as_module(v, owner)) for k, v in modules[0].items()))
        else:
            container = nn.ModuleList([_as_module(m, owner) for m in modules])
        self.module = container
        self.partial_tolerant = bool(partial_tolerant)
        self.inplace = inplace  # type: ignore[assignment]
        self.strict = True
        self.method = None
        self.method_kwargs = {}
        self.__dict__["_kwargs"] = None
        self.__dict__["_selected"] = None
        self._update_keys()
        if selected_out_keys is not None:
            self.select_out_keys(*selected_out_keys)

    # -------------------------------------------------------------- keys
    def _modules_list(self) -> list[nn.Module]:
        return list(self._fn._modules.values())

    def _update_keys(self) -> None:
        """Recomputes in_keys / out_keys (and the pre-run check) from the steps."""
        in_keys: list = []
        out_keys: list = []
        written: set = set()
        tracked = True
        for m in self._modules_list():
            for key in _keys_of(m, "in_keys"):
                if key not in written and key not in in_keys:
                    in_keys.append(key)
            _add_written(out_keys, _keys_of(m, "out_keys"))
            written.update(_keys_of(m, "out_keys"))
            tracked = tracked and _tracks_keys(m)
        d = self.__dict__
        d["_in_keys"] = in_keys
        d["_out_keys_source"] = out_keys
        selected = d.get("_selected")
        if selected is not None:
            selected = [k for k in selected if k in out_keys]
            d["_selected"] = selected
        d["_out_keys"] = list(selected) if selected is not None else list(out_keys)
        d["_unselected"] = [k for k in out_keys if k not in d["_out_keys"]] if selected is not None else []
        d["_written"] = out_keys
        d["_precheck"] = tuple(in_keys) if tracked and not self.partial_tolerant else None

    def _compute_in_and_out_keys(self, modules: Sequence[nn.Module]) -> tuple[list, list]:
        """``(in_keys, out_keys)`` of a sequence made of ``modules``, as upstream computes them.

        Upstream's subclasses (TorchRL's ``SafeSequential``) call it before the module
        is initialised, then initialise it through ``TensorDictModule.__init__``.
        """
        in_keys: list = []
        out_keys: list = []
        written: set = set()
        for m in modules:
            for key in _keys_of(m, "in_keys"):
                if key not in written and key not in in_keys:
                    in_keys.append(key)
            _add_written(out_keys, _keys_of(m, "out_keys"))
            written.update(_keys_of(m, "out_keys"))
        return in_keys, out_keys

    def _set_out_keys_source(self, keys: list) -> None:
        # Reached only when a subclass initialises the sequence through
        # ``TensorDictModule.__init__(module=nn.ModuleList(...), in_keys, out_keys)``, as
        # upstream's subclasses do: finish the sequence's own set-up from its steps.
        d = self.__dict__
        d.setdefault("partial_tolerant", False)
        d.setdefault("_selected", None)
        d.setdefault("_kwargs", None)
        self._update_keys()

    @property
    def in_keys(self) -> list:
        """The keys read before any step writes them."""
        return self.__dict__["_in_keys"]

    @in_keys.setter
    def in_keys(self, value: Any) -> None:
        msg = "TensorDictSequential.in_keys is computed from its modules and cannot be set."
        raise AttributeError(msg)

    @property
    def out_keys(self) -> list:
        """Every key written by a step (only the selected ones after :meth:`select_out_keys`)."""
        return self.__dict__["_out_keys"]

    @out_keys.setter
    def out_keys(self, value: Any) -> None:
        self.select_out_keys(*_normalize_keys(value, "out_keys", type(self).__name__))

    def select_out_keys(self, *out_keys: NestedKey) -> TensorDictSequential:
        """Keeps only ``out_keys`` in the output: the other written keys are removed
        after the run (unless they were in the input).

        Returns:
            the sequence itself.

        Raises:
            ValueError: a key is not written by any step.
        """
        self.__dict__["_selected"] = self._check_selection(out_keys)
        self._update_keys()
        return self

    def reset_out_keys(self) -> TensorDictSequential:
        """Every written key is kept in the output again."""
        self.__dict__["_selected"] = None
        self._update_keys()
        return self

    # -------------------------------------------------------------- container API
    def __len__(self) -> int:
        return len(self._fn)

    def __iter__(self) -> Iterator[nn.Module]:
        return iter(self._modules_list())

    def __getitem__(self, index: int | slice | str) -> Any:
        if isinstance(index, slice):
            mods = self._modules_list()[index]
            return self._new_like(mods)
        if isinstance(index, str):
            return self._fn[index]
        return self._modules_list()[index]

    def __setitem__(self, index: int | str, module: Any) -> None:
        module = _as_module(module, type(self).__name__)
        if isinstance(self._fn, nn.ModuleDict):
            key = index if isinstance(index, str) else list(self._fn.keys())[index]
            self._fn[key] = module
        else:
            self._fn[index] = module
        self._update_keys()

    def __delitem__(self, index: int | slice | str) -> None:
        if isinstance(self._fn, nn.ModuleDict):
            names = list(self._fn.keys())
            doomed = [index] if isinstance(index, str) else (names[index] if isinstance(index, slice) else [names[index]])
            for name in doomed:
                del self._fn[name]
        else:
            del self._fn[index]
        self._update_keys()

    def append(self, module: Any) -> TensorDictSequential:
        """Adds a step at the end (``nn.Module`` or callable). Returns ``self``."""
        module = _as_module(module, type(self).__name__)
        if isinstance(self._fn, nn.ModuleDict):
            self._fn[str(len(self._fn))] = module
        else:
            self._fn.append(module)
        self._update_keys()
        return self

    def insert(self, index: int, module: Any) -> TensorDictSequential:
        """Inserts a step before ``index``. Returns ``self``."""
        if isinstance(self._fn, nn.ModuleDict):
            msg = "insert() is not available for a TensorDictSequential built from a dict."
            raise TypeError(msg)
        self._fn.insert(index, _as_module(module, type(self).__name__))
        self._update_keys()
        return self

    def _new_like(self, mods: list) -> TensorDictSequential:
        try:
            return type(self)(*mods, partial_tolerant=self.partial_tolerant)
        except (TypeError, ValueError):
            return TensorDictSequential(*mods, partial_tolerant=self.partial_tolerant)

    def select_subsequence(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> TensorDictSequential:
        """Returns the smallest sub-sequence linking ``in_keys`` to ``out_keys``.

        With ``in_keys``, only the steps that depend (directly or through earlier
        steps) on those keys are kept. With ``out_keys``, only the steps needed to
        produce those keys are kept. The steps are shared, not copied.

        Args:
            in_keys (list of NestedKey, optional): the inputs the sub-sequence starts from.
            out_keys (list of NestedKey, optional): the outputs wanted.

        Returns:
            a new sequence of the same class (or a TensorDictSequential).

        Steps of nested (plain) sequences are selected one by one, and the kept ones stay
        in their nested sequence (a nested sequence left with no step is dropped), as
        tensordict 0.15. A step is kept
        when every key it reads is available (``in_keys``, or written by a kept
        earlier step) and something it writes is wanted (``out_keys``, or read by a
        kept later step).

        Raises:
            ValueError: no step is left.

        Examples:
            >>> from tensordict.nn import TensorDictModule as Mod
            >>> seq = TensorDictSequential(
            ...     Mod(lambda a: a + 1, in_keys=["a"], out_keys=["b"]),
            ...     Mod(lambda b: b + 1, in_keys=["b"], out_keys=["c"]),
            ...     Mod(lambda a: a - 1, in_keys=["a"], out_keys=["d"]),
            ... )
            >>> seq.select_subsequence(out_keys=["c"]).out_keys
            ['b', 'c']
            >>> seq.select_subsequence(in_keys=["b"]).out_keys
            ['c']
        """
        owner = type(self).__name__
        flat = self._flat_steps()
        chains = {id(m): chain for _, m, chain in flat}
        steps = [(name, m) for name, m, _ in flat]
        avail = list(self.in_keys) if in_keys is None else _normalize_keys(in_keys, "in_keys", owner)
        wanted = list(self.out_keys) if out_keys is None else _normalize_keys(out_keys, "out_keys", owner)
        # forward: a step stays when everything it reads is available (given or produced)
        kept = []
        for name, m in steps:
            if all(k in avail for k in _keys_of(m, "in_keys")):
                kept.append((name, m))
                avail.extend(_keys_of(m, "out_keys"))
        # backward: a step stays when something it writes is wanted
        needed = list(wanted)
        selected = []
        for name, m in reversed(kept):
            if any(k in needed for k in _keys_of(m, "out_keys")):
                selected.append((name, m))
                needed.extend(_keys_of(m, "in_keys"))
        selected.reverse()
        if not selected:
            msg = (
                f"{owner}.select_subsequence: no step is left after the selection (in_keys={in_keys}, "
                f"out_keys={out_keys}); check that in_keys and out_keys are connected."
            )
            raise ValueError(msg)
        selected = _regroup([(name, m, chains[id(m)]) for name, m in selected], 0)
        names = [name for name, _ in selected]
        if isinstance(self._fn, nn.ModuleDict) and len(set(names)) == len(names):
            mapping = OrderedDict(selected)
            try:
                return type(self)(mapping, partial_tolerant=self.partial_tolerant)
            except (TypeError, ValueError):
                return TensorDictSequential(mapping, partial_tolerant=self.partial_tolerant)
        return self._new_like([m for _, m in selected])

    @property
    def _select_before_return(self) -> bool:
        """Whether :meth:`select_out_keys` is active (the output keeps only those keys)."""
        return self.__dict__.get("_selected") is not None

    def _flat_steps(self, chain: tuple = ()) -> list:
        """``(name, step, chain)`` triples, nested plain sequences opened; ``chain`` holds
        the ``(name, sequence)`` pairs of the nested sequences around the step."""
        fn = self._fn
        items = fn.items() if isinstance(fn, nn.ModuleDict) else ((str(i), m) for i, m in enumerate(fn))
        out = []
        for name, m in items:
            if type(m) is TensorDictSequential and m.__dict__.get("_selected") is None:
                out.extend(m._flat_steps((*chain, (name, m))))
            else:
                out.append((name, m, chain))
        return out

    # -------------------------------------------------------------- forward
    def _run_partial(self, tensordict: TensorDictBase, kwargs: dict) -> TensorDictBase:
        for m in self._modules_list():
            keys = _keys_of(m, "in_keys")
            if keys and not _all_present(tensordict, keys):
                subs = getattr(tensordict, "tensordicts", None)
                if subs is not None:
                    for sub in subs:
                        if _all_present(sub, keys):
                            m(sub, **kwargs)
                continue
            tensordict = m(tensordict, **kwargs)
        return tensordict

    @_handles_kwargs
    def forward(
        self,
        tensordict: TensorDictBase | None = None,
        *args: Any,
        tensordict_out: TensorDictBase | None = None,
        **kwargs: Any,
    ) -> TensorDictBase:
        """Runs every step on ``tensordict`` and returns it.

        Args:
            tensordict (TensorDictBase): the input. Omit it to pass tensors as keywords
                named after ``in_keys``; a new TensorDict is then returned.
            tensordict_out (TensorDictBase, optional): where to write the outputs.
            **kwargs: extra keyword arguments passed to every step.

        Returns:
            the TensorDict holding the outputs.

        Raises:
            KeyError: an input is missing (checked before any step runs).
        """
        if not isinstance(tensordict, TensorDictBase):
            td = self._td_from_call(tensordict, args, kwargs)
            out = _infer_batch_size_(self.forward(td, tensordict_out=tensordict_out))
            return _tensor_call_output(self, out, tensordict is not None or bool(args))
        if self._skips(tensordict):
            return tensordict
        pre = self._precheck
        if pre is not None:
            plain = tensordict.__class__ is TensorDict
            for key in pre:
                if plain and key.__class__ is str:
                    if key not in tensordict._tensordict:
                        raise self._missing(key, tensordict)
                elif tensordict.get(key, _NOTSET) is _NOTSET:
                    raise self._missing(key, tensordict)
        unselected = self._unselected
        present = [k for k in unselected if k in tensordict.keys(True)] if unselected else None
        # with tensordict_out, the input is left as it was (the steps run on a shallow copy)
        td = tensordict if self.inplace is not False and tensordict_out is None else tensordict.copy()  # type: ignore[assignment]
        if self.partial_tolerant:
            td = self._run_partial(td, kwargs)  # type: ignore[assignment]
        elif kwargs or _any_global_hooks():
            for m in self._fn._modules.values():
                td = m(td, **kwargs)
        else:
            td = self._run_steps(td)  # type: ignore[assignment]
        inplace = self.inplace
        if inplace is not None:
            if inplace:
                if td is not tensordict:  # steps that return new TensorDicts: write back
                    tensordict.update(td)
                    td = tensordict  # type: ignore[assignment]
            else:  # a new TensorDict holding what the sequence wrote
                td = td.select(*self.out_keys_source, strict=False)  # type: ignore[assignment]
        if unselected:
            drop = [k for k in unselected if k not in present]  # type: ignore[operator]
            if drop:
                td.exclude(*drop, inplace=True)
        if tensordict_out is not None:
            tensordict_out.update(td.select(*self.out_keys, strict=False))
            return tensordict_out
        return td

    def _run_steps(self, td: TensorDictBase) -> TensorDictBase:
        """Runs the steps with the dispatch of ``nn.Module.__call__``, minus its frames.

        A step with hooks (or compiled) is called normally. A plain TensorDictModule
        step with one str key in and one out (``step._fast``) on a plain TensorDict is
        run inline, with the checks of its own hot path; any other step runs its
        ``forward``.
        """
        plain = td.__class__ is TensorDict and not self._skip_mode()
        for m in self._fn._modules.values():
            if (
                m._forward_hooks
                or m._forward_pre_hooks
                or m._backward_hooks
                or m._backward_pre_hooks
                or m.__dict__.get("_compiled_call_impl") is not None
            ):
                td = m(td)
                plain = plain and td.__class__ is TensorDict
                continue
            fast = m.__dict__.get("_fast") if plain else None
            if fast is None:
                td = m.forward(td)
                plain = plain and td.__class__ is TensorDict
                continue
            fn, in_key, out_key = fast
            store = td._tensordict
            value = store.get(in_key)
            if value.__class__ is not _Tensor:
                td = m.forward(td)  # missing or non-tensor input: the step's own path
                continue
            out = fn(value)
            if out.__class__ is _Tensor and td._device is None and not td._is_locked:
                bs = td._batch_size  # type: ignore[attr-defined]
                if out.shape[: len(bs)] == bs:
                    store[out_key] = out
                    continue
            m._write(td, out)
        return td

    def _build_plan(self) -> None:
        self.__dict__["_fast"] = None  # a sequence has no single-call hot path

    def _missing(self, key: NestedKey, tensordict: TensorDictBase) -> KeyError:
        reader = next((m for m in self._modules_list() if key in _keys_of(m, "in_keys")), None)
        label = f"{type(self).__name__} (step {type(reader).__name__} with in_keys={getattr(reader, 'in_keys', None)})"
        return _missing_in_key_error(label, key, tensordict)


