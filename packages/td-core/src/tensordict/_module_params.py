"""Parameters and buffers of ``nn.Module``s as TensorDicts (``ModuleParamsMixin``).

- ``from_module(module)`` reads the parameters and buffers of a module into a tree of
  TensorDicts that mirrors the submodules: ``module.layers[0].weight`` is the entry
  ``("layers", "0", "weight")``. The leaves are the module's own tensors, not copies.
- ``from_modules(*modules)`` stacks the trees of several modules of the same structure
  (model ensembles): by default into new leaf parameters with a leading batch dim, so
  gradients flow to the stacked parameters; with ``lazy_stack=True`` into a
  ``LazyStackedTensorDict`` of the originals.
- ``td.to_module(module)`` puts the TensorDict's tensors into the module, by swapping
  the entries of ``module._parameters`` / ``module._buffers`` as
  ``torch.func.functional_call`` does (a plain tensor is not wrapped into a
  Parameter, so ``torch.vmap`` over a stacked parameter TensorDict works), and
  returns the previous values. Used as a context manager, that returned TensorDict
  puts the previous values back on exit.

The state-dict methods (``state_dict`` / ``load_state_dict``) live in
``_state_dict.py`` and are mixed in here.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import nn

from tensordict import _classes
from tensordict._seams import import_sibling
from tensordict._stack import stack
from tensordict._state_dict import StateDictMixin

__all__ = ["ModuleParamsMixin", "from_module", "from_modules"]



# ---------------------------------------------------------------------- reading
def _module_tree(module: nn.Module, td_cls: Any) -> Any:
    """The parameter/buffer tree of ``module`` (leaves are the module's own tensors)."""
    source: dict = {}
    for name, param in module._parameters.items():
        if param is not None:
            source[name] = param
    for name, buf in module._buffers.items():
        if buf is not None:
            source[name] = buf
    for name, sub in module._modules.items():
        if isinstance(sub, _classes.TensorDictBase):  # a TensorDictParams: kept itself, as upstream
            source[name] = sub
        elif sub is not None:
            source[name] = _module_tree(sub, td_cls)
    return td_cls._new_unsafe(source, torch.Size(()), None)


def _state_dict_tree(module: nn.Module) -> Any:
    """The module's ``state_dict()`` unflattened into the tree of its submodules."""
    return _state_dict_swap(module.state_dict())


def _check_module(module: Any, what: str = "module") -> None:
    if not isinstance(module, nn.Module):
        msg = f"from_module expects a torch.nn.Module as {what}, got {type(module).__name__}."
        raise TypeError(msg)


def _as_params(td: Any, lock: bool) -> Any:
    params_cls = import_sibling("nn").TensorDictParams
    return params_cls(td, no_convert=True, lock=lock)


def from_module(
    module: nn.Module,
    as_module: bool = False,
    lock: bool = True,
    use_state_dict: bool = False,
    filter_empty: bool = True,
) -> Any:
    """Returns a TensorDict of the parameters and buffers of ``module``.

    The leaves are the module's own parameters and buffers (not copies): an in-place
    change to a leaf changes the module. Submodules become nested TensorDicts, so
    ``module.layers[0].weight`` is the entry ``("layers", "0", "weight")``. Every
    level has ``batch_size=[]`` and ``device=None``. Submodules without parameters
    (``nn.ReLU()``) are left out unless ``filter_empty=False`` (then they appear as
    empty TensorDicts). Write the values back, or swap other
    values in, with :meth:`~tensordict.TensorDictBase.to_module`.

    Args:
        module (nn.Module): the module to read.
        as_module (bool, optional): return a ``tensordict.nn.TensorDictParams`` (needs
            the ``td-nn`` distribution), which can be stored in an ``nn.Module``.
            Defaults to ``False``.
        lock (bool, optional): lock the result. Defaults to ``True``.
        use_state_dict (bool, optional): read ``module.state_dict()`` instead, so that
            state-dict hooks run; the leaves are then the (detached) tensors of the
            state dict. Defaults to ``False``.
        filter_empty (bool, optional): leave out the submodules without parameters or
            buffers. Defaults to ``True``.

    Returns:
        a ``TensorDict`` (or ``TensorDictParams`` with ``as_module=True``).

    Raises:
        TypeError: ``module`` is not an ``nn.Module``.
        ImportError: ``as_module=True`` and ``td-nn`` is not installed.

    Examples:
        >>> from torch import nn
        >>> from tensordict import from_module
        >>> module = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
        >>> params = from_module(module)
        >>> params["0", "weight"].shape
        torch.Size([4, 3])
        >>> params["0", "weight"] is module[0].weight
        True
        >>> params.is_locked
        True
    """
    _check_module(module)
    td = _state_dict_tree(module) if use_state_dict else _module_tree(module, _classes.TensorDict)
    if filter_empty:
        td.filter_empty_()
    if as_module:
        return _as_params(td, lock)
    if lock:
        td._set_lock_flag(True)
    return td


def _stack_leaves(values: list, expand_identical: bool) -> torch.Tensor:
    first = values[0]
    n = len(values)
    is_param = any(isinstance(v, nn.Parameter) for v in values)
    requires_grad = any(v.requires_grad for v in values)
    if expand_identical and all(v is first for v in values[1:]):
        # one tensor shared by every module: an expanded view of it (no copy, not a new
        # Parameter), so gradients flow back to the shared tensor itself
        return first.expand(n, *first.shape)
    else:
        shapes = {tuple(v.shape) for v in values}
        if len(shapes) > 1:
            msg = (
                f"from_modules: cannot stack parameters of shapes {sorted(shapes)}. "
                "Pass modules of the same structure, or use lazy_stack=True."
            )
            raise RuntimeError(msg)
        with torch.no_grad():
            stacked = torch.stack([v.detach() for v in values], 0)
    if is_param:
        return nn.Parameter(stacked, requires_grad=requires_grad)
    return stacked


def _stack_trees(tds: list, expand_identical: bool, path: tuple) -> Any:
    td_cls = _classes.TensorDict
    base = _classes.TensorDictBase
    n = len(tds)
    first = tds[0]
    keys = list(first._keys_raw())
    for i, other in enumerate(tds[1:], 1):
        other_keys = list(other._keys_raw())
        if set(other_keys) != set(keys):
            missing = sorted(set(keys) - set(other_keys))
            extra = sorted(set(other_keys) - set(keys))
            where = ".".join(path) or "<root>"
            msg = (
                f"from_modules: module {i} differs from module 0 at {where!r}: it lacks {missing} "
                f"and has extra {extra}. Pass modules of the same structure, or use lazy_stack=True."
            )
            raise RuntimeError(msg)
    source: dict = {}
    for key in keys:
        values = [td._get_raw(key) for td in tds]
        if isinstance(values[0], base):
            source[key] = _stack_trees(values, expand_identical, (*path, key))
        elif isinstance(values[0], torch.Tensor):
            source[key] = _stack_leaves(values, expand_identical)
        else:
            source[key] = stack([td.select(key) for td in tds], 0)._get_raw(key)
    return td_cls._new_unsafe(source, torch.Size((n,)), None)


def from_modules(
    *modules: nn.Module,
    as_module: bool = False,
    lock: bool = True,
    use_state_dict: bool = False,
    lazy_stack: bool = False,
    expand_identical: bool = False,
) -> Any:
    """Stacks the parameters and buffers of several modules (for ensembles and ``vmap``).

    Every module must have the same structure (same submodule names, parameter names
    and shapes) unless ``lazy_stack=True``. The result has ``batch_size=[len(modules)]``
    at every level; leaf ``("0", "weight")`` has shape ``[len(modules), *weight.shape]``.

    With the default ``lazy_stack=False`` the stacked values are new tensors: stacked
    parameters are new leaf ``nn.Parameter``s, so gradients computed through them
    (e.g. under ``torch.vmap`` with :meth:`to_module`) go to the stacked parameters,
    not to the original modules. Pass the result to the optimizer.

    Args:
        *modules (nn.Module): the modules to read.

    Keyword Args:
        as_module (bool, optional): return a ``tensordict.nn.TensorDictParams`` (needs
            ``td-nn``). Cannot be combined with ``lazy_stack``. Defaults to ``False``.
        lock (bool, optional): lock the result. Defaults to ``True``.
        use_state_dict (bool, optional): read each ``module.state_dict()`` (state-dict
            hooks run). Defaults to ``False``.
        lazy_stack (bool, optional): return a ``LazyStackedTensorDict`` whose
            TensorDicts hold the original parameters: gradients then reach the
            original modules. Defaults to ``False``.
        expand_identical (bool, optional): when the same tensor object appears at a key
            in every module (shared parameter), store an expanded view of it instead
            of ``n`` copies (a view, not a new parameter: gradients reach the shared
            tensor). Ignored with
            ``lazy_stack=True``. Defaults to ``False``.

    Returns:
        a ``TensorDict``, ``LazyStackedTensorDict`` or ``TensorDictParams``.

    Raises:
        ValueError: no module was given.
        RuntimeError: the modules differ in structure or shapes (and ``lazy_stack=False``);
            ``as_module`` and ``lazy_stack`` are both set; ``lazy_stack`` with lazy
            (uninitialized) modules.

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> from tensordict import from_modules
        >>> modules = [nn.Linear(3, 4) for _ in range(2)]
        >>> params = from_modules(*modules)
        >>> params["weight"].shape, params.batch_size
        (torch.Size([2, 4, 3]), torch.Size([2]))
        >>> bool((params["weight"][1] == modules[1].weight).all())
        True
    """
    if len(modules) == 1 and isinstance(modules[0], (list, tuple)):
        modules = tuple(modules[0])
    if not modules:
        msg = "from_modules needs at least one module."
        raise ValueError(msg)
    for i, module in enumerate(modules):
        _check_module(module, f"modules[{i}]")
    if lazy_stack and any(
        isinstance(p, nn.parameter.UninitializedTensorMixin)  # type: ignore[attr-defined]
        for m in modules
        for p in (*m.parameters(), *m.buffers())
    ):
        # tensordict 0.15's wording (sic), then ours
        msg = (
            "lasy_stack=True is not compatible with lazy modules. A lazy stack keeps each module's own "
            "tensors, and an uninitialized parameter has no shape to stack yet: run the modules once first."
        )
        raise RuntimeError(msg)
    if as_module and lazy_stack:
        msg = (
            "from_modules: using a LazyStackedTensorDict within a TensorDictParams isn't permitted "
            "(as_module=True and lazy_stack=True cannot be combined)."
        )
        raise RuntimeError(msg)
    tds = [from_module(m, lock=False, use_state_dict=use_state_dict, filter_empty=False) for m in modules]
    if lazy_stack:
        out = _classes.LazyStackedTensorDict(*tds, stack_dim=0)
        if lock:
            out.lock_()
        return out
    out = _stack_trees(tds, expand_identical, ())
    if as_module:
        return _as_params(out, lock)
    if lock:
        out._set_lock_flag(True)
    return out


# ---------------------------------------------------------------------- writing
def _names_of(module: nn.Module) -> list:
    names = [n for n, _ in module.named_parameters(remove_duplicate=False)]
    names += [n for n, _ in module.named_buffers(remove_duplicate=False)]
    return sorted(set(names))


def _mismatch_error(td: Any, module: nn.Module, extra: list) -> KeyError:
    td_keys = {".".join(k) if isinstance(k, tuple) else k for k in td.keys(True, True)}
    missing = [n for n in _names_of(module) if n not in td_keys]
    shown_extra = [".".join(k) for k in extra]
    msg = (
        f"to_module: the TensorDict has keys that are not parameters or buffers of the "
        f"{type(module).__name__}: extra keys {shown_extra}; parameters/buffers of the module "
        f"that the TensorDict lacks: missing keys {missing}. The module was left unchanged. "
        "Use the names of `module.named_parameters()` / `module.named_buffers()` (one nested "
        "level per submodule, as `TensorDict.from_module(module)` gives them), or call "
        "to_module on the matching submodule."
    )
    return KeyError(msg)


_Tensor = torch.Tensor
_Parameter = nn.Parameter
_EMPTY = torch.Size(())


def _plan(td: Any, module: nn.Module, path: tuple, plan: list, extra: list, td_cls: Any, base: Any) -> Any:
    """Validates ``td`` against ``module`` and lists the swaps, touching nothing.

    Each plan entry is ``(storage dict, name, new value, swap source dict)``. Returns the
    (still empty) TensorDict of previous values for this level, whose source dict the
    caller fills once the swaps are done.
    """
    src: dict = {}
    params = module._parameters
    buffers = module._buffers
    items = td._tensordict.items() if td.__class__ is td_cls else td._items_raw()
    for key, value in items:
        cls = value.__class__
        if cls is dict:
            # a plain dict of parameters (TorchRL's SAC builds its target parameters with
            # ``TensorDict._new_unsafe({"module": {"0": ..., "1": ...}})``): a nested level
            value = td_cls(value, batch_size=_EMPTY)
        if cls is _Tensor or cls is _Parameter or isinstance(value, _Tensor):
            if key in params:
                plan.append((params, key, value, src, module))
            elif key in buffers:
                plan.append((buffers, key, value, src, module))
            elif isinstance(module.__dict__.get(key), _Tensor):
                # a plain attribute left by a ``preserve_module_state=False`` swap
                plan.append((module.__dict__, key, value, src, module))
            else:
                extra.append((*path, key))
                continue
            src[key] = None  # placeholder: keeps the key order
        elif isinstance(value, base):
            sub = module._modules.get(key)
            if sub is None:
                leaf_keys = [k if isinstance(k, tuple) else (k,) for k in value.keys(True, True)]
                extra.extend((*path, key, *k) for k in leaf_keys or [()])
                continue
            src[key] = _plan(value, sub, (*path, key), plan, extra, td_cls, base)
        else:
            msg = (
                f"to_module: key {'.'.join((*path, key))!r} holds a {type(value).__name__}, "
                "not a tensor: only tensors can be written into a module."
            )
            raise TypeError(msg)
    return td_cls._new_unsafe(src, _EMPTY, None)


class ModuleParamsMixin(StateDictMixin):
    """Mixed into TensorDictBase: parameters of nn.Modules (from_module, to_module, state_dict)."""

    @classmethod
    def from_module(
        cls,
        module: nn.Module,
        as_module: bool = False,
        lock: bool | None = None,
        use_state_dict: bool = False,
        filter_empty: bool = True,
    ) -> Any:
        """Returns a tensordict of the parameters and buffers of ``module``.

        Same as :func:`tensordict.from_module`. The leaves are the module's own
        parameters and buffers (not copies); submodules become nested TensorDicts
        (``module.layers[0].weight`` is ``("layers", "0", "weight")``).

        Args:
            module (nn.Module): the module to read.
            as_module (bool, optional): return a ``tensordict.nn.TensorDictParams``.
                Defaults to ``False``.
            lock (bool, optional): lock the result. Defaults to ``None``, which is
                ``False`` for ``TensorDict.from_module`` and ``True`` for the other
                classes (``TensorDictBase.from_module``).
            use_state_dict (bool, optional): read ``module.state_dict()`` (hooks run).
                Defaults to ``False``.
            filter_empty (bool, optional): leave out submodules without parameters or
                buffers. Defaults to ``True``.

        Returns:
            a ``TensorDict`` (whatever class this is called on), or a
            ``TensorDictParams`` with ``as_module=True``.

        Raises:
            TypeError: ``module`` is not an ``nn.Module``.

        Examples:
            >>> import torch
            >>> from torch import nn
            >>> from tensordict import TensorDict
            >>> module = nn.Linear(3, 4)
            >>> params = TensorDict.from_module(module).clone()
            >>> _ = params.zero_()
            >>> with params.to_module(module):
            ...     y = module(torch.ones(3))
            >>> y
            tensor([0., 0., 0., 0.], grad_fn=<ViewBackward0>)
            >>> bool(module.weight.abs().sum() > 0)  # restored
            True
        """
        if lock is None:
            lock = cls is not _classes.TensorDict
        return from_module(
            module, as_module=as_module, lock=lock, use_state_dict=use_state_dict, filter_empty=filter_empty
        )

    @classmethod
    def from_modules(
        cls,
        *modules: nn.Module,
        as_module: bool = False,
        lock: bool = True,
        use_state_dict: bool = False,
        lazy_stack: bool = False,
        expand_identical: bool = False,
    ) -> Any:
        """Stacks the parameters and buffers of several modules; see :func:`tensordict.from_modules`.

        Args:
            *modules (nn.Module): modules with the same parameter and buffer structure.
            as_module (bool, optional): return a ``TensorDictParams`` (needs td-nn).
            lock (bool, optional): lock the result. Defaults to ``True``.
            use_state_dict (bool, optional): read ``state_dict()`` instead of the parameters
                and buffers.
            lazy_stack (bool, optional): stack lazily (the modules' own tensors stay leaves).
            expand_identical (bool, optional): a tensor shared by every module is expanded
                instead of copied.

        Examples:
            >>> import torch
            >>> from torch import nn
            >>> from tensordict import TensorDict
            >>> empty_module = nn.Linear(3, 4, device="meta")
            >>> modules = [nn.Linear(3, 4) for _ in range(2)]
            >>> params = TensorDict.from_modules(*modules)
            >>> def exec_module(params, x):
            ...     with params.to_module(empty_module):
            ...         return empty_module(x)
            >>> y = torch.vmap(exec_module, (0, None))(params, torch.randn(3))
            >>> y.shape
            torch.Size([2, 4])
        """
        return from_modules(
            *modules,
            as_module=as_module,
            lock=lock,
            use_state_dict=use_state_dict,
            lazy_stack=lazy_stack,
            expand_identical=expand_identical,
        )

    def to_module(
        self,
        module: nn.Module,
        *,
        inplace: bool | None = None,
        return_swap: bool = True,
        swap_dest: Any = None,
        use_state_dict: bool = False,
        non_blocking: bool = False,
        memo: Any = None,
        preserve_module_state: bool = True,
    ) -> Any:
        """Writes the tensors of the TensorDict into the parameters and buffers of ``module``.

        Keys are matched to the module's attributes by name, one nested level per
        submodule, as :meth:`from_module` gives them: ``("layers", "0", "weight")`` is
        ``module.layers[0].weight``. A TensorDict may hold a subset of the module's
        parameters (the others are left as they are), but every key must name a
        parameter or buffer of the module: otherwise a ``KeyError`` names the extra
        and the missing keys and the module is left unchanged (everything is
        checked before anything is written).

        By default the leaves replace the module's tensors (the entries of
        ``module._parameters`` / ``module._buffers`` are swapped, as
        ``torch.func.functional_call`` does; a plain tensor is not wrapped into an
        ``nn.Parameter``), so this works under ``torch.vmap`` over a stacked
        parameter TensorDict and gradients flow to the TensorDict's tensors.

        The returned TensorDict holds the previous values. Used as a context manager
        it puts them back on exit, also when the block raises::

            with params.to_module(module):
                y = module(x)

        Args:
            module (nn.Module): the module to write into.

        Keyword Args:
            inplace (bool, optional): copy the values into the module's existing
                tensors (which keep their identity and storage) instead of swapping.
                Defaults to ``None`` (same as ``False``).
            return_swap (bool, optional): return the previous values (as a TensorDict
                usable as a context manager). If ``False``, returns ``None``.
                Defaults to ``True``.
            swap_dest (TensorDictBase, optional): a TensorDict to write the previous
                values into, and to return. Defaults to ``None`` (a new one).
            use_state_dict (bool, optional): load through ``module.load_state_dict``
                so that the module's state-dict hooks run (values are copied in
                place). Cannot be combined with ``inplace``. Defaults to ``False``.
            non_blocking (bool, optional): non-blocking copies (in-place modes).
            memo: deprecated and ignored.
            preserve_module_state (bool, optional): keep what the module registers
                (swap modes). A plain tensor that carries no autograd history and
                replaces an ``nn.Parameter`` is wrapped in one (with the parameter's
                ``requires_grad``), and an ``nn.Parameter`` written into a buffer slot
                stays a buffer, so ``state_dict()`` and ``named_parameters()`` are
                unchanged. Tensors with autograd history or batched by ``torch.vmap``
                are swapped in as they are, so gradients reach them. With ``False``,
                each attribute is deleted and set again with ``setattr`` (a plain
                tensor then becomes a plain attribute, out of ``state_dict()``).
                Defaults to ``True``.

        Returns:
            a ``TensorDict`` of the previous parameters and buffers (``batch_size=[]``),
            or ``None`` with ``return_swap=False``.

        Raises:
            KeyError: a key is not a parameter/buffer (or submodule) of ``module``.
            TypeError: a leaf is not a tensor.
            ValueError: ``inplace`` and ``use_state_dict`` are both set.

        Examples:
            >>> import torch
            >>> from torch import nn
            >>> from tensordict import TensorDict
            >>> module = nn.Linear(2, 1)
            >>> zeros = TensorDict({"weight": torch.zeros(1, 2), "bias": torch.zeros(1)})
            >>> with zeros.to_module(module):
            ...     module(torch.ones(2)).detach()
            tensor([0.])
            >>> isinstance(module.weight, nn.Parameter)
            True
        """
        if memo is not None:
            warnings.warn("to_module: `memo` is deprecated and ignored.", DeprecationWarning, stacklevel=2)
        if not isinstance(module, nn.Module):
            msg = f"to_module expects a torch.nn.Module, got {type(module).__name__}."
            raise TypeError(msg)
        if use_state_dict:
            if inplace:
                msg = "to_module: inplace=True cannot be combined with use_state_dict=True."
                raise ValueError(msg)
            swap = self._to_module_state_dict(module, return_swap, non_blocking)
        else:
            swap = self._to_module_swap(module, bool(inplace), return_swap, non_blocking, preserve_module_state)
        if swap is None:
            return None
        if swap_dest is not None:
            restore = swap._lock_stack.pop()
            swap_dest.update(swap, ignore_lock=True)
            swap_dest._push_op(restore)
            return swap_dest
        return swap

    def _to_module_swap(
        self, module: nn.Module, inplace: bool, return_swap: bool, non_blocking: bool, preserve: bool = True
    ) -> Any:
        plan: list = []
        extra: list = []
        td_cls = _classes.TensorDict
        swap = _plan(self, module, (), plan, extra, td_cls, _classes.TensorDictBase)
        if extra:
            raise _mismatch_error(self, module, extra)
        has_none = False
        if inplace:
            saved = []
            with torch.no_grad():
                for store, name, value, src, _ in plan:
                    dest = store[name]
                    if dest is None:
                        store[name] = value
                        saved.append((store, name, None, True))
                        has_none = True
                        continue
                    old = dest.clone() if return_swap else dest
                    dest.copy_(value, non_blocking=non_blocking)
                    saved.append((store, name, old, False))
                    src[name] = old
            if not return_swap:
                return None

            def restore() -> None:
                with torch.no_grad():
                    for store, name, old, replaced in reversed(saved):  # shared modules: first value last
                        if replaced:
                            store[name] = old
                        else:
                            store[name].copy_(old, non_blocking=non_blocking)

        elif not preserve:
            olds = []
            seen: dict = {}  # a module reached through two paths is swapped once
            orders: dict = {}  # delattr/setattr moves a name to the end: restore the order on exit
            for store, name, value, src, owner in plan:
                if id(store) not in orders:
                    orders[id(store)] = (store, list(store))
                first = seen.setdefault((id(owner), name), (store, store.get(name)))
                old = first[1]
                if old is None:
                    has_none = True
                olds.append(first)
                src[name] = old
                if isinstance(owner, _classes.TensorDictBase):
                    # a TensorDictParams inside the module (TorchRL's MultiAgentMLP): its
                    # entries stay in its stores, where reading it back finds them
                    store[name] = value
                    continue
                if hasattr(owner, name):
                    delattr(owner, name)
                setattr(owner, name, value)
            if not return_swap:
                return None

            def restore() -> None:
                for (_, name, _, _, owner), (store, old) in reversed(list(zip(plan, olds))):
                    if not isinstance(owner, _classes.TensorDictBase) and hasattr(owner, name):
                        delattr(owner, name)
                    store[name] = old
                for store, order in orders.values():
                    entries = {k: store[k] for k in order if k in store}
                    entries.update(store)
                    store.clear()
                    store.update(entries)

        else:
            olds = []
            append = olds.append
            for store, name, value, src, owner in plan:
                old = store[name]
                append(old)
                src[name] = old
                if store is owner.__dict__:  # a plain attribute: set it as setattr does
                    delattr(owner, name)
                    setattr(owner, name, value)
                    continue
                if old is None:
                    has_none = True
                elif value.__class__ is not old.__class__:
                    value = _same_kind(old, value)
                store[name] = value
            if not return_swap:
                return None

            def restore() -> None:
                for (store, name, _, _, owner), old in reversed(list(zip(plan, olds))):
                    if store is owner.__dict__ and hasattr(owner, name):
                        delattr(owner, name)
                    store[name] = old

        if has_none:  # a slot that held None (e.g. ``bias=False``) has no previous value
            _drop_none(swap)
        swap._push_op(("callback", restore))
        return swap

    def _to_module_state_dict(self, module: nn.Module, return_swap: bool, non_blocking: bool) -> Any:
        flat = {}
        for key, value in self.items(True, True):
            flat[".".join(key) if isinstance(key, tuple) else key] = value
        own = module.state_dict(keep_vars=True)
        extra = [k for k in flat if k not in own]
        if extra:
            raise _mismatch_error(self, module, [tuple(k.split(".")) for k in extra])
        old = None
        if return_swap:
            old = {k: (v.detach().clone() if isinstance(v, torch.Tensor) else v) for k, v in own.items() if k in flat}
        module.load_state_dict(flat, strict=False)
        if old is None:
            return None
        swap = _state_dict_swap(old)

        def restore() -> None:
            module.load_state_dict(old, strict=False)

        swap._push_op(("callback", restore))
        return swap


def _same_kind(old: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """``value`` registered as ``old`` was (see ``to_module(preserve_module_state=True)``)."""
    if isinstance(old, _Parameter):
        if (
            not isinstance(value, _Parameter)
            and value.grad_fn is None
            and not value.requires_grad
            and not torch._C._functorch.is_functorch_wrapped_tensor(value)
        ):
            return _Parameter(value, requires_grad=old.requires_grad)
        return value
    if isinstance(value, _Parameter):
        return value.view_as(value)  # a buffer slot keeps a plain tensor (autograd intact)
    return value


def _drop_none(td: Any) -> None:
    for key, value in list(td._items_raw()):
        if value is None:
            td._del_raw(key)
        elif not isinstance(value, torch.Tensor):
            _drop_none(value)


def _state_dict_swap(flat: dict) -> Any:
    """A flat ``{"sub.name": value}`` state dict unflattened into a TensorDict tree."""
    td_cls = _classes.TensorDict
    root = td_cls._new_unsafe({}, torch.Size(()), None)
    for name, value in flat.items():
        parts = name.split(".")
        node = root
        for sub in parts[:-1]:
            node = node._create_nested(sub)  # type: ignore[assignment]
        if isinstance(value, torch.Tensor):
            node._set_raw(parts[-1], value)
        else:
            node._set_str(parts[-1], value, False)
    return root
