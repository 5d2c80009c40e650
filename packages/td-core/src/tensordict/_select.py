"""Key selection and rewriting (``SelectMixin``): select, exclude, split_keys,
filter_empty_, rename_key_, flatten_keys, unflatten_keys."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import torch

from tensordict import _classes
from tensordict._deep import levels
from tensordict._errors import locked_error, missing_key_error
from tensordict._host import TensorDictHost
from tensordict._keys import _MISSING, NO_DEFAULT, NestedKey, _as_tuple, unravel_key

if TYPE_CHECKING:
    from tensordict._base import TensorDictBase

__all__ = ["SelectMixin"]

_Tensor = torch.Tensor
_new_obj = object.__new__


class SelectMixin(TensorDictHost):
    """Selecting, excluding and renaming keys."""

    # ------------------------------------------------------------------ selection
    def select(
        self, *keys: NestedKey, inplace: bool = False, strict: bool = True, as_tensordict: bool = False
    ) -> TensorDictBase:
        """A TensorDict with only ``keys`` (nested keys select inside sub-TensorDicts).

        Args:
            *keys (NestedKey): the keys to keep (or one list of them).
            inplace (bool, optional): remove the other keys from ``self`` and return
                it. Defaults to ``False``: a new TensorDict sharing the leaves.
            strict (bool, optional): raise on a missing key; ``False`` skips it.
                Defaults to ``True``.
            as_tensordict (bool, optional): accepted for the tensorclass signature (where it
                asks for a plain TensorDict); a TensorDict's selection is one already.
                Defaults to ``False``.

        Returns:
            a TensorDict with the batch size, device and names of ``self``.

        Raises:
            KeyError: a key is missing and ``strict=True``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(()), "b": {"c": torch.zeros(()), "d": torch.zeros(())}})
            >>> list(td.select("a", ("b", "c")).keys(True, True))
            ['a', ('b', 'c')]
        """
        if len(keys) == 1 and isinstance(keys[0], list):
            keys = tuple(keys[0])
        if not inplace and all(k.__class__ is str for k in keys):
            get = self._get_raw
            source = {}
            for key in keys:
                value = get(key, _MISSING)  # type: ignore[arg-type]
                if value is _MISSING:
                    if strict:
                        raise missing_key_error(key, self._keys_raw())
                    continue
                source[key] = value
            return self._new_like(source)
        tree: dict = {}
        for key in keys:
            t = _as_tuple(key)
            node = tree
            for sub in t[:-1]:
                node = node.setdefault(sub, {})
                if node is True:
                    break
            else:
                node[t[-1]] = True
        out = self._select_tree(tree, strict)
        if inplace:
            for key in list(self._keys_raw()):
                if key not in tree:
                    self._del_raw(key)
            for key, value in out._items_raw():
                self._set_raw(key, value)
            return self  # type: ignore[return-value]
        return out

    def _select_tree(self, tree: dict, strict: bool) -> TensorDictBase:
        """The selection of the key tree ``tree`` (``{key: True | subtree}``): by recursion
        (the fastest for the usual few levels), or with an explicit stack past the
        recursion limit (nothing is written, so walking again is safe)."""
        try:
            return _select_rec(self, tree, strict)
        except RecursionError:
            return _select_deep(self, tree, strict)

    def exclude(self, *keys: NestedKey, inplace: bool = False) -> TensorDictBase:
        """A TensorDict without ``keys`` (missing keys are ignored).

        Args:
            *keys (NestedKey): the keys to drop (or one list of them).
            inplace (bool, optional): delete them from ``self`` and return it.
                Defaults to ``False``: a new TensorDict sharing the other leaves.

        Returns:
            a TensorDict with the batch size, device and names of ``self``.

        Raises:
            RuntimeError: ``inplace=True`` on a locked TensorDict.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(()), "b": {"c": torch.zeros(())}})
            >>> list(td.exclude(("b", "c")).keys(True))
            ['a', 'b']
        """
        if len(keys) == 1 and isinstance(keys[0], list):
            keys = tuple(keys[0])
        if not inplace and all(k.__class__ is str for k in keys):
            drop = set(keys)
            return self._new_like({k: v for k, v in self._items_raw() if k not in drop})
        tree: dict = {}
        for key in keys:
            t = _as_tuple(key)
            node = tree
            for sub in t[:-1]:
                nxt = node.setdefault(sub, {})
                if nxt is True:
                    break
                node = nxt
            else:
                node[t[-1]] = True
        if inplace:
            if self.is_locked:
                raise locked_error("exclude keys in place")
            self._exclude_inplace(tree)
            return self  # type: ignore[return-value]
        return self._exclude_tree(tree)

    def _exclude_inplace(self, tree: dict) -> None:
        todo = [(self, tree)]  # an explicit stack: any depth
        while todo:
            td, tree = todo.pop()
            for key, sub in tree.items():
                value = td._get_raw(key, _MISSING)
                if value is _MISSING:
                    continue
                if sub is True:
                    td._del_raw(key)
                elif _is_td(value):
                    todo.append((value, sub))

    def _exclude_tree(self, tree: dict) -> TensorDictBase:
        """``self`` without the key tree ``tree``: by recursion, or with an explicit stack
        past the recursion limit (as :meth:`_select_tree`)."""
        try:
            return _exclude_rec(self, tree)
        except RecursionError:
            return _exclude_deep(self, tree)

    def split_keys(
        self,
        *key_sets: Sequence[NestedKey] | Mapping | Any,
        inplace: bool = False,
        default: Any = None,
        strict: bool = True,
        reproduce_struct: bool = False,
    ) -> tuple[TensorDictBase, ...]:
        """Splits into one TensorDict per key set, plus one with the remaining keys.

        Each key is taken out of the remainder as the key sets are read in order, so a
        key may appear in one key set only.

        Args:
            *key_sets (sequence of NestedKey, dict or callable): one per output: a
                sequence of keys; a dict ``{in_key: out_key}`` that also renames; or a
                predicate ``fn(key, value) -> bool`` called on every remaining leaf with
                its key as a tuple of str (``("a",)``, ``("b", "c")``).
            inplace (bool, optional): the remaining keys stay in ``self``, which is
                returned last. Defaults to ``False``.
            default (object, optional): with ``strict=False``, the value written for a
                missing key (``None``: the key is skipped).
            strict (bool, optional): raise on a missing key. Defaults to ``True``.
            reproduce_struct (bool, optional): every output keeps the nested
                TensorDicts of ``self`` (empty where nothing was taken), and the remainder
                keeps the nested TensorDicts left empty. Defaults to ``False``: empty
                nested TensorDicts are dropped from the remainder.

        Returns:
            a tuple of ``len(key_sets) + 1`` TensorDicts with the batch size of ``self``.

        Raises:
            KeyError: a key is missing (or was taken by an earlier key set) and
                ``strict=True``.
            RuntimeError: ``inplace=True`` and ``self`` is locked.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(()), "b": torch.zeros(()), "c": torch.zeros(())})
            >>> ab, rest = td.split_keys(["a", "b"])
            >>> sorted(ab.keys()), list(rest.keys())
            (['a', 'b'], ['c'])
            >>> big, small = td.split_keys(lambda key, value: key[0] in ("a", "c"))
            >>> sorted(big.keys())
            ['a', 'c']
        """
        if inplace and self.is_locked:
            raise locked_error("split keys in place")
        rest: TensorDictBase = cast("TensorDictBase", self) if inplace else self.copy()
        absent = object()
        outs = []
        for ks in key_sets:
            out = self.empty(recurse=reproduce_struct)
            if callable(ks) and not isinstance(ks, Mapping):
                pairs = [
                    (key, key)
                    for key, value in list(rest.items(True, True))
                    if ks(key if isinstance(key, tuple) else (key,), value)
                ]
            elif isinstance(ks, Mapping):
                pairs = list(ks.items())
            else:
                pairs = [(key, key) for key in ks]
            for src, dst in pairs:
                value = rest.pop(src, absent)
                if value is absent:
                    if strict:
                        raise missing_key_error(src, rest.keys())
                    if default is None:
                        continue
                    value = default
                out.set(dst, value)
            outs.append(out)
        if not reproduce_struct:
            rest.filter_empty_()
        return (*outs, rest)

    def filter_empty_(self) -> TensorDictBase:
        """Removes, in place, every nested TensorDict without leaves. By recursion (the
        fastest for the usual few levels); past the recursion limit the nested TensorDicts
        are listed with an explicit stack and filtered children first. Filtering is
        idempotent, so the second walk may start over what the first one did."""
        try:
            _filter_empty_rec(self)
        except RecursionError:
            _filter_empty_deep(self)
        return self  # type: ignore[return-value]

    def is_empty(self) -> bool:
        """``True`` when the TensorDict holds no leaf (empty sub-TensorDicts do not count)."""
        base = _classes.TensorDictBase
        nested = []
        for _, value in self._items_raw():  # a leaf at the top answers at once
            if not isinstance(value, base):
                return False
            nested.append(value)
        mine, plain = SelectMixin.is_empty, _classes.TensorDict
        while nested:  # an explicit stack: any depth
            td = nested.pop()
            if td.__class__ is not plain and type(td).is_empty is not mine:
                if not td.is_empty():
                    return False
                continue
            for _, value in td._items_raw():
                if not isinstance(value, base):
                    return False
                nested.append(value)
        return True

    def empty(self, recurse: bool = False, *, batch_size: Any = None, device: Any = NO_DEFAULT, names: Any = None) -> TensorDictBase:
        """A TensorDict with the same batch size and device and no keys.

        Args:
            recurse (bool, optional): keep the nested TensorDicts (emptied).
                Defaults to ``False``.

        Keyword Args:
            batch_size (torch.Size, optional): the batch size of the result.
                Defaults to ``self.batch_size``.
            device (torch.device, optional): the device of the result (``None`` for
                no device). Defaults to ``self.device``.
            names (list of str, optional): accepted for compatibility.

        Returns:
            a new, empty :class:`~tensordict.TensorDict`.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3), "b": {"c": torch.zeros(3)}}, [3])
            >>> list(td.empty(recurse=True).keys(True)), td.empty().batch_size
            (['b'], torch.Size([3]))
        """

        source = levels(self, _empty_level, _empty_children) if recurse else {}
        return _classes.TensorDict._new_unsafe(
            source,
            torch.Size(batch_size) if batch_size is not None else self.batch_size,
            self.device if device is NO_DEFAULT else (torch.device(device) if device is not None else None),
        )

    # ------------------------------------------------------------------ key rewriting
    def rename_key_(self, old_key: NestedKey, new_key: NestedKey, safe: bool = False) -> TensorDictBase:
        """Renames ``old_key`` to ``new_key`` in place.

        Args:
            old_key (NestedKey): the key to rename.
            new_key (NestedKey): its new name (may be nested elsewhere).
            safe (bool, optional): refuse to overwrite an existing ``new_key``.
                Defaults to ``False``.

        Returns:
            ``self``.

        Raises:
            KeyError: ``old_key`` is missing, or ``safe=True`` and ``new_key`` exists.
            RuntimeError: the TensorDict is locked.
        """
        if self.is_locked:
            raise locked_error("rename a key", old_key)
        old_key, new_key = unravel_key(old_key), unravel_key(new_key)
        value = self._get_any_raw(old_key)
        if safe and new_key in self.keys(True):
            msg = f"key {new_key!r} already present in TensorDict (safe=True)."
            raise KeyError(msg)
        self.del_(old_key)
        self.set(new_key, value)
        return self  # type: ignore[return-value]

    def rename_keys(self, mapping: Mapping, *, strict: bool = True) -> TensorDictBase:
        """A TensorDict with several keys renamed at once; ``self`` is not modified.

        The result is a new tree of TensorDicts sharing every leaf (tensors and
        non-tensor data) with ``self``, with its batch size, device and names, unlocked.
        Every source is read before any destination is written, so swaps
        (``{"a": "b", "b": "a"}``) and chains (``{"a": "b", "b": "c"}``) work. A nested
        TensorDict that the renaming leaves empty is removed; other empty nested
        TensorDicts are kept. A lazy stack renames the keys of each stacked TensorDict
        (a source only some of them hold is renamed where it is).

        Args:
            mapping (Mapping[NestedKey, NestedKey]): old key -> new key; both may be
                nested, so an entry can move to another nested TensorDict and a whole
                nested TensorDict can be renamed.

        Keyword Args:
            strict (bool): a source missing from the TensorDict raises ``KeyError``;
                with ``False`` it is skipped. Defaults to ``True``.

        Returns:
            a new TensorDict (a lazy stack for a lazy stack) with the batch size of ``self``.

        Raises:
            TypeError: ``mapping`` is not a mapping.
            KeyError: ``strict=True`` and a source key is missing (named).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2), "b": {"c": torch.ones(2)}}, [2])
            >>> out = td.rename_keys({"a": ("b", "a"), ("b", "c"): "c"})
            >>> sorted(out.keys(True, True), key=str)
            [('b', 'a'), 'c']
            >>> out["c"] is td["b", "c"], sorted(td.keys(True, True), key=str)
            (True, [('b', 'c'), 'a'])
        """
        if not isinstance(mapping, Mapping):
            msg = f"rename_keys: mapping must be a mapping of old keys to new keys, got a {type(mapping).__name__}."
            raise TypeError(msg)
        pairs = [(_as_tuple(unravel_key(old)), _as_tuple(unravel_key(new))) for old, new in mapping.items()]
        if isinstance(self, _classes.LazyStackedTensorDict):
            if strict:
                for old, _ in pairs:
                    if not any(_has_key(td, old) for td in self.tensordicts):
                        raise KeyError(f"rename_keys: key {_shown(old)!r} is not in the lazy stack.")
            done = [_renamed(td, pairs, False) for td in self.tensordicts]
            parts = [out for out, _ in done]
            # a nested TensorDict goes only if the renaming empties it in every stacked one
            _prune(parts, {p for _, emptied in done for p in emptied})
            return self._new_lazy(parts)
        out, emptied = _renamed(self, pairs, strict)
        _prune([out], emptied)
        return out

    def flatten_keys(self, separator: str = ".", inplace: bool = False, is_leaf: Any = None) -> TensorDictBase:
        """Flattens nested keys into single keys joined by ``separator``.

        Args:
            separator (str, optional): joins the parts of a nested key. Defaults to ``"."``.
            inplace (bool, optional): replace the keys of ``self`` and return it.
                Defaults to ``False``.
            is_leaf (callable, optional): accepted for compatibility; nested
                TensorDicts are always flattened.

        Returns:
            a TensorDict with the batch size of ``self`` and no nested TensorDict.

        Raises:
            RuntimeError: ``inplace=True`` on a locked TensorDict.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": {"b": torch.zeros(())}})
            >>> list(td.flatten_keys().keys())
            ['a.b']
        """
        source: dict = {}
        if self.__class__ is _classes.TensorDict:
            n = _flatten_store(self._tensordict, source, "", separator, 0)
        else:
            n = self._flatten_into(source, "", separator)
        if n != len(source):
            seen: set = set()
            for key in self.keys(True, True):
                flat = key if isinstance(key, str) else separator.join(key)
                if flat in seen:
                    msg = (
                        f"Flattening keys in tensordict causes keys to collide: {flat!r} is both a "
                        f"flat key and a nested key joined with {separator!r}. Use another separator."
                    )
                    raise KeyError(msg)
                seen.add(flat)
        if inplace:
            if self.is_locked:
                raise locked_error("flatten keys in place")
            for key in list(self._keys_raw()):
                self._del_raw(key)
            for key, value in source.items():
                self._set_raw(key, value)
            return self  # type: ignore[return-value]
        return _like(self, source)

    def _flatten_into(self, source: dict, prefix: str, separator: str) -> int:
        """Writes the flat entries into ``source``; returns how many were written (a
        count above ``len(source)`` means two keys collided). Depth first with an explicit
        stack (no recursion limit on the nesting depth); dense TensorDicts are read
        through their store."""
        n = 0
        td_cls = _classes.TensorDict
        tdb = _classes.TensorDictBase
        stack = [(prefix, iter(self._items_raw()))]
        while stack:
            pre, items = stack[-1]
            for key, value in items:
                cls = value.__class__
                if cls is _Tensor:
                    source[pre + key] = value
                    n += 1
                elif cls is td_cls:
                    store = value._tensordict
                    if store:  # empty nested TensorDicts have no key to give
                        stack.append((pre + key + separator, iter(store.items())))
                        break
                elif isinstance(value, tdb):
                    if value._keys_raw():
                        stack.append((pre + key + separator, iter(value._items_raw())))
                        break
                else:
                    source[pre + key] = value
                    n += 1
            else:
                stack.pop()
        return n

    def unflatten_keys(self, separator: str = ".", inplace: bool = False) -> TensorDictBase:
        """Splits every key on ``separator`` into a nested key (inverse of ``flatten_keys``).

        Args:
            separator (str, optional): the separator to split on. Defaults to ``"."``.
            inplace (bool, optional): replace the keys of ``self`` and return it.
                Defaults to ``False``.

        Returns:
            a TensorDict with the batch size of ``self``.

        Raises:
            KeyError: a key nests under a name that holds a leaf.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a.b": torch.zeros(()), "c": torch.zeros(())})
            >>> list(td.unflatten_keys().keys(True, True))
            [('a', 'b'), 'c']
        """

        bs, dev = self.batch_size, self.device
        tree: dict = {}
        node: Any
        # joined parent name -> its dict node: with a one-char separator, a key costs one
        # ``rpartition`` and one look-up whatever its depth (nodes are created once, and a
        # dict node, once made, is never replaced)
        memo: dict = {}
        single = len(separator) == 1
        for key, value in self._items_raw():
            if value.__class__ is not _Tensor and _is_td(value):
                value = value.unflatten_keys(separator)
            if separator not in key:
                node, last = tree, key
            elif single:
                parent, _, last = key.rpartition(separator)
                node = memo.get(parent)
                if node is None:
                    node = _unflatten_parent(tree, memo, parent, separator, key)
            else:
                *parents, last = key.split(separator)
                node = tree
                for sub in parents:
                    nxt = node.get(sub)
                    if nxt is None:
                        nxt = node[sub] = {}
                    elif _is_td(nxt):  # a nested TensorDict and flat keys under one name
                        nxt = node[sub] = dict(nxt._items_raw())
                    elif nxt.__class__ is not dict:
                        raise _unflatten_collision(key, sub)
                    node = nxt
            if last in node:
                _merge_unflattened(node, last, value, key)
            else:
                node[last] = value
        out = _build_tree(tree, bs, dev)
        if inplace:
            if self.is_locked:
                raise locked_error("unflatten keys in place")
            for key in list(self._keys_raw()):
                self._del_raw(key)
            for key, value in out._items_raw():
                self._set_raw(key, value)
            return self  # type: ignore[return-value]
        return out



#: levels of dense TensorDicts that ``_flatten_store`` walks by recursion (the cheapest per
#: node) before it hands the subtree to the explicit-stack ``_flatten_into``
_RECURSION_DEPTH = 200


def _flatten_store(store: dict, source: dict, pre: str, sep: str, depth: int) -> int:
    """``_flatten_into`` for the store of a dense TensorDict, by recursion."""
    n = 0
    for key, value in store.items():
        cls = value.__class__
        if cls is _Tensor:
            source[pre + key] = value
            n += 1
        elif cls is _classes.TensorDict and depth < _RECURSION_DEPTH:
            sub = value._tensordict
            if sub:  # empty nested TensorDicts have no key to give
                n += _flatten_store(sub, source, pre + key + sep, sep, depth + 1)
        elif isinstance(value, _classes.TensorDictBase):
            if value._keys_raw():
                n += value._flatten_into(source, pre + key + sep, sep)
        else:
            source[pre + key] = value
            n += 1
    return n


def _like(td: Any, source: dict) -> Any:
    """``td._new_like(source)``, built directly for a dense TensorDict."""
    if td.__class__ is not _classes.TensorDict:
        return td._new_like(source)
    out = _new_obj(_classes.TensorDict)
    out._tensordict = source
    out._batch_size = td._batch_size
    out._device = td._device
    out._is_locked = False
    names = td._names
    if names is not None:
        out._names = list(names)
    return out


def _unflatten_collision(key: str, where: str) -> KeyError:
    msg = (
        f"Unflattening key(s) in tensordict will override an existing for unflattened key: "
        f"{key!r} lands on {where!r}, which already holds an entry."
    )
    return KeyError(msg)


def _merge_unflattened(node: dict, last: str, value: Any, key: str) -> None:
    """``node[last] = value``, merging nested entries; raises if a leaf would be overwritten."""
    existing = node.get(last)
    if existing is None:
        node[last] = value
        return
    if (existing.__class__ is dict or _is_td(existing)) and _is_td(value):
        if _is_td(existing):
            existing = node[last] = dict(existing._items_raw())
        for sub, sub_value in value._items_raw():
            _merge_unflattened(existing, sub, sub_value, key)
        return
    raise _unflatten_collision(key, last)


def _unflatten_parent(tree: dict, memo: dict, parent: str, sep: str, key: str) -> dict:
    """The dict node of the joined name ``parent`` (split on the one-char ``sep``), made
    from its nearest known ancestor down and remembered in ``memo`` with the ones made on
    the way. A nested TensorDict met on the way becomes a dict of its entries.

    Raises:
        KeyError: a name on the way holds a leaf (``key`` is the key being unflattened).
    """
    chain = []
    node = None
    p = parent
    while node is None:
        head, found, sub = p.rpartition(sep)
        chain.append((p, sub))
        if found:
            node = memo.get(head)
            p = head
        else:
            node = tree
    for p, sub in reversed(chain):
        nxt = node.get(sub)
        if nxt is None:
            nxt = node[sub] = {}
        elif nxt.__class__ is not dict:
            if not _is_td(nxt):
                raise _unflatten_collision(key, sub)
            nxt = node[sub] = dict(nxt._items_raw())  # a nested TensorDict and flat keys under one name
        memo[p] = nxt
        node = nxt
    return node


def _build_tree(tree: dict, bs: Any, dev: Any) -> Any:
    """Plain nested dicts (made by ``unflatten_keys``, owned by no one) -> TensorDicts of
    batch size ``bs``: each dict becomes the store of its TensorDict, top down with an
    explicit stack (no recursion limit on the depth)."""
    td_cls = _classes.TensorDict
    root = _new_obj(td_cls)
    root._tensordict = tree
    root._batch_size = bs
    root._device = dev
    root._is_locked = False
    todo = [tree]
    while todo:
        node = todo.pop()
        for key, value in node.items():
            if value.__class__ is dict:
                sub = _new_obj(td_cls)
                sub._tensordict = value
                sub._batch_size = bs
                sub._device = dev
                sub._is_locked = False
                node[key] = sub  # a value replaced, no key added: the iteration goes on
                todo.append(value)
    return root


def _empty_level(td: Any, sub: Any) -> dict:
    """The entries of ``td.empty(recurse=True)``: its nested TensorDicts, emptied (run by
    :func:`~tensordict._deep.levels`: any depth). ``sub`` empties a nested TensorDict that
    uses this same ``empty``; a lazy stack or a store uses its own."""
    source = {}
    for key, value in td._items_raw():
        if _is_td(value):
            if type(value).empty is SelectMixin.empty:
                source[key] = _classes.TensorDict._new_unsafe(sub(value, sub), value.batch_size, value.device)
            else:
                source[key] = value.empty(recurse=True)
    return source


def _empty_children(td: Any) -> list:
    return [v for _, v in td._items_raw() if _is_td(v) and type(v).empty is SelectMixin.empty]


def _is_td(value: Any) -> bool:
    return isinstance(value, _classes.TensorDictBase)


def _has_key(td: Any, key: tuple) -> bool:
    """Whether ``td`` holds the nested key ``key`` (a tuple), leaf or node."""
    node = td
    for part in key:
        if not isinstance(node, _classes.TensorDictBase):
            return False
        node = node._get_raw(part, _MISSING)
        if node is _MISSING:
            return False
    return True


def _shown(key: tuple) -> Any:
    return key[0] if len(key) == 1 else key


def _renamed(td: Any, pairs: list, strict: bool) -> tuple[Any, set]:
    """A shallow copy of ``td`` with the ``(old, new)`` tuple-key pairs renamed, and the
    prefixes of the moved sources (nested TensorDicts the renaming may have emptied)."""
    out = td.copy()
    found = []
    for old, new in pairs:
        if not _has_key(out, old):
            if strict:
                raise KeyError(f"rename_keys: key {_shown(old)!r} is not in the TensorDict.")
            continue
        found.append((old, new, out._get_any_raw(_shown(old))))
    for old, _, _ in found:
        if _has_key(out, old):  # a source inside another moved source went with it
            out.del_(_shown(old))
    for _, new, value in found:
        out.set(_shown(new), value)
    return out, {old[:i] for old, _, _ in found for i in range(1, len(old))}


def _prune(outs: list, prefixes: set) -> None:
    """Deletes, deepest first, each prefix that is an empty TensorDict (or absent) in all ``outs``."""
    tdb = _classes.TensorDictBase
    for prefix in sorted(prefixes, key=len, reverse=True):
        nodes = [out._get_any_raw(_shown(prefix)) if _has_key(out, prefix) else None for out in outs]
        if all(n is None or (isinstance(n, tdb) and not n._keys_raw()) for n in nodes):
            for out, node in zip(outs, nodes):
                if node is not None:
                    out.del_(_shown(prefix))


def _select_rec(td: Any, tree: dict, strict: bool) -> Any:
    source = {}
    for key, sub in tree.items():
        value = td._get_raw(key, _MISSING)
        if value is _MISSING:
            if strict:
                raise missing_key_error(key, td._keys_raw())
            continue
        if sub is True:
            source[key] = value
        elif _is_td(value):
            source[key] = _select_rec(value, sub, strict)
        elif strict:
            raise missing_key_error(key, td._keys_raw())
    return td._new_like(source)


def _select_deep(root: Any, tree: dict, strict: bool) -> Any:
    """:func:`_select_rec` with an explicit stack of ``[td, tree items, source, key]``."""
    stack: list = [[root, iter(tree.items()), {}, None]]
    while True:
        frame = stack[-1]
        td, items, source = frame[0], frame[1], frame[2]
        for key, sub in items:
            value = td._get_raw(key, _MISSING)
            if value is _MISSING:
                if strict:
                    raise missing_key_error(key, td._keys_raw())
                continue
            if sub is True:
                source[key] = value
            elif _is_td(value):
                stack.append([value, iter(sub.items()), {}, key])
                break
            elif strict:
                raise missing_key_error(key, td._keys_raw())
        else:
            stack.pop()
            node = td._new_like(source)
            if not stack:
                return node
            stack[-1][2][frame[3]] = node


def _exclude_rec(td: Any, tree: dict) -> Any:
    source = {}
    for key, value in td._items_raw():
        sub = tree.get(key)
        if sub is True:
            continue
        if sub and _is_td(value):
            value = _exclude_rec(value, sub)
        source[key] = value
    return td._new_like(source)


def _exclude_deep(root: Any, tree: dict) -> Any:
    """:func:`_exclude_rec` with an explicit stack of ``[td, items, tree, source, key]``."""
    stack: list = [[root, iter(root._items_raw()), tree, {}, None]]
    while True:
        frame = stack[-1]
        td, items, tree, source = frame[0], frame[1], frame[2], frame[3]
        for key, value in items:
            sub = tree.get(key)
            if sub is True:
                continue
            if sub and _is_td(value):
                stack.append([value, iter(value._items_raw()), sub, {}, key])
                break
            source[key] = value
        else:
            stack.pop()
            node = td._new_like(source)
            if not stack:
                return node
            stack[-1][3][frame[4]] = node


def _filter_empty_rec(td: Any) -> None:
    td_cls = _classes.TensorDict
    for key, value in list(td._items_raw()):
        if value.__class__ is td_cls:
            _filter_empty_rec(value)
            if not value._tensordict:  # its own empty children are gone: empty means no entry
                td._del_raw(key)
        elif value.__class__ is not _Tensor and _is_td(value):
            value.filter_empty_()
            if value.is_empty():
                td._del_raw(key)


def _filter_empty_deep(root: Any) -> None:
    """:func:`_filter_empty_rec` with an explicit stack (any depth)."""
    mine = SelectMixin.filter_empty_
    td_cls = _classes.TensorDict
    nested: list = []  # (parent, key, node, walked here): parents before children
    todo = [root]
    while todo:
        node = todo.pop()
        for key, value in list(node._items_raw()):
            cls = value.__class__
            if cls is _Tensor:
                continue
            if cls is td_cls or _is_td(value):
                walked = cls is td_cls or type(value).filter_empty_ is mine
                nested.append((node, key, value, walked))
                if walked:
                    todo.append(value)
    for parent, key, node, walked in reversed(nested):
        if walked:
            # its nested TensorDicts are filtered already: empty now means no entry left
            empty = not node._tensordict if node.__class__ is td_cls else next(iter(node._keys_raw()), None) is None
        else:
            node.filter_empty_()
            empty = node.is_empty()
        if empty:
            parent._del_raw(key)
