"""``state_dict`` / ``load_state_dict`` for every TensorDict (``StateDictMixin``).

A TensorDict's state dict is what ``nn.Module.state_dict()`` gives for a module: an
``OrderedDict`` of the tensors (detached unless ``keep_vars=True``) under
``"."``-joined keys (``"b.c"``), with a ``_metadata`` attribute that maps the path of
each level (``""`` for the root, ``"b"``, ``"b.d"``, ...) to that level's metadata:

- ``"batch_size"`` (``torch.Size``) and ``"device"`` (``str`` or ``None``);
- ``"names"`` (only for named dims);
- ``"_non_tensor"``: ``{key: python object}`` for the non-tensor data of the level (a
  ``NonTensorStack`` as its nested list), with ``"_non_tensor_stacks"``:
  ``{key: shape}`` for the stacks;
- ``"_type"``: the class of a nested tensorclass.

Empty nested TensorDicts live in ``_metadata`` only. ``flatten=False`` nests the
tensors in ``OrderedDict`` s instead (``{"a": ..., "b": {"c": ...}}``), with the same
``_metadata`` on the root. ``torch.save`` writes both and ``torch.load`` (also with
the default ``weights_only=True``, for plain non-tensor data) reads them back, so a
TensorDict's state sits in a checkpoint next to a model's.

``load_state_dict`` reads either layout (told apart by its keys, or by
``from_flatten=``), and the layout of earlier versions: nested ``OrderedDict`` s with
``"__batch_size"``/``"__device"``/``"__names"``/``"__non_tensor"`` entries (flat with
``"."``-joined keys too). Internally a state dict is read into that earlier nested
layout, which the loader plans from.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from tensordict import _classes
from tensordict._errors import locked_error
from tensordict._host import TensorDictHost
from tensordict._nontensor import NonTensorData, NonTensorStack

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["StateDictMixin"]

_BS = "__batch_size"
_DEVICE = "__device"
_NAMES = "__names"
_NON_TENSOR = "__non_tensor"
_RESERVED = frozenset((_BS, _DEVICE, _NAMES, _NON_TENSOR))


def _leaf_classes() -> tuple:
    return _classes.TensorDictBase, NonTensorData, NonTensorStack


def _nested_state(td: Any, keep_vars: bool, classes: tuple, types: dict | None = None, path: tuple = ()) -> OrderedDict:
    """The internal nested state of ``td``; ``types`` (if given) gets the class of each
    nested tensorclass, keyed by its ``"."``-joined path."""
    base, nt_data, nt_stack = classes
    out: OrderedDict = OrderedDict()
    non_tensor: dict = {}
    for key, value in td._items_raw():
        if key in _RESERVED:
            msg = f"state_dict: key {key!r} is reserved for the state-dict metadata; rename it first."
            raise KeyError(msg)
        if isinstance(value, torch.Tensor):
            out[key] = value if keep_vars else value.detach()
        elif isinstance(value, base):
            out[key] = _nested_state(value, keep_vars, classes, types, (*path, key))
        elif isinstance(value, nt_stack):
            out[key] = value.tolist()
            non_tensor[key] = ["stack", list(value.batch_size)]
        elif isinstance(value, nt_data):
            out[key] = value.data
            non_tensor[key] = "data"
        else:  # another tensor collection (e.g. a tensorclass): store its TensorDict
            inner = getattr(value, "_tensordict", None)
            if inner is None or not isinstance(inner, base):
                msg = f"state_dict: cannot store key {key!r} holding a {type(value).__name__}."
                raise TypeError(msg)
            if types is not None:
                cls = type(value)
                types[".".join((*path, key))] = f"{cls.__module__}.{cls.__qualname__}"
            out[key] = _nested_state(inner, keep_vars, classes, types, (*path, key))
    out[_BS] = torch.Size(td.batch_size)
    device = td.device
    out[_DEVICE] = None if device is None else str(device)
    if td._has_names():
        out[_NAMES] = list(td.names)
    if non_tensor:
        out[_NON_TENSOR] = non_tensor
    return out


def _unflatten_state(flat: Mapping) -> OrderedDict:
    root: OrderedDict = OrderedDict()
    for name, value in flat.items():
        parts = name.split(".")
        node = root
        for sub in parts[:-1]:
            nxt = node.get(sub)
            if nxt is None:
                nxt = node[sub] = OrderedDict()
            elif not isinstance(nxt, Mapping):
                msg = f"load_state_dict(from_flatten=True): {name!r} nests under {sub!r}, which holds a leaf."
                raise KeyError(msg)
            node = nxt  # type: ignore[assignment]
        node[parts[-1]] = value
    return root


def _public_state(nested: Mapping, path: tuple, meta: OrderedDict, types: dict) -> OrderedDict:
    """The tensors of an internal nested state (``__batch_size``-style entries) as a
    tree of ``OrderedDict`` s; each level's metadata goes into ``meta[path]``."""
    info: dict = {"batch_size": nested[_BS], "device": nested[_DEVICE]}
    if _NAMES in nested:
        info["names"] = nested[_NAMES]
    name = ".".join(path)
    if name in types:
        info["_type"] = types[name]
    meta[name] = info
    markers = nested.get(_NON_TENSOR) or {}
    tree: OrderedDict = OrderedDict()
    for key, value in nested.items():
        if key in _RESERVED:
            continue
        if key in markers:
            info.setdefault("_non_tensor", {})[key] = value
            marker = markers[key]
            if marker != "data":
                info.setdefault("_non_tensor_stacks", {})[key] = list(marker[1])
        elif isinstance(value, Mapping):
            tree[key] = _public_state(value, (*path, key), meta, types)
        else:
            tree[key] = value
    return tree


def _flat_tensors(tree: Mapping, prefix: str, out: Any) -> None:
    for key, value in tree.items():
        if "." in key:
            msg = (
                f"state_dict: key {key!r} contains '.', which would be read back as a nested key. "
                "Use flatten=False, or rename the key."
            )
            raise KeyError(msg)
        if isinstance(value, Mapping):
            _flat_tensors(value, f"{prefix}{key}.", out)
        else:
            out[prefix + key] = value


def _is_legacy(sd: Mapping) -> bool:
    """``True`` for the layout of earlier versions (``"__batch_size"`` entries)."""
    for key in sd:
        if key.rsplit(".", 1)[-1] in _RESERVED:
            return True
    return False


def _internal_state(sd: Mapping, from_flatten: bool | None) -> Mapping:
    """Any accepted state-dict layout as the internal nested one."""
    legacy = _is_legacy(sd)
    has_nested = any(isinstance(v, Mapping) for v in sd.values())
    if from_flatten is None:
        from_flatten = not has_nested and any("." in key for key in sd)
    nested: Mapping = _unflatten_state(sd) if from_flatten else sd
    if legacy:
        return nested
    meta = getattr(sd, "_metadata", None)
    if not meta:
        return nested
    nested = _copy_tree(nested)
    for name, info in meta.items():
        if not isinstance(info, Mapping) or "batch_size" not in info:
            continue  # e.g. nn.Module version entries
        node = nested
        for part in name.split(".") if name else ():
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = OrderedDict()
            elif not isinstance(nxt, Mapping):
                break
            node = nxt  # type: ignore[assignment]
        else:
            node[_BS] = info["batch_size"]
            node[_DEVICE] = info.get("device")
            if info.get("names") is not None:
                node[_NAMES] = info["names"]
            stacks = info.get("_non_tensor_stacks") or {}
            for key, value in (info.get("_non_tensor") or {}).items():
                node[key] = value
                node.setdefault(_NON_TENSOR, {})[key] = ["stack", stacks[key]] if key in stacks else "data"
    return nested


def _copy_tree(tree: Mapping) -> OrderedDict:
    out: OrderedDict = OrderedDict()
    for key, value in tree.items():
        out[key] = _copy_tree(value) if isinstance(value, Mapping) and not isinstance(value, _classes.TensorDictBase) else value
    return out


def _is_empty_state(value: Any) -> bool:
    """``True`` for a nested state without any data (an empty nested TensorDict)."""
    if not isinstance(value, Mapping):
        return False
    return all(key in _RESERVED or _is_empty_state(v) for key, v in value.items())


def _all_same(items: list) -> bool:
    try:
        return all(bool(item == items[0]) for item in items[1:])
    except (TypeError, ValueError, RuntimeError):  # e.g. arrays: no single truth value
        return False


def _split_nested_list(items: Any, dim: int, i: int) -> Any:
    if dim == 0:
        return items[i]
    return [_split_nested_list(sub, dim - 1, i) for sub in items]


def _split_state(sd: Mapping, dim: int, n: int) -> list:
    """An internal nested state of a lazy stack split into the states of its ``n``
    stacked TensorDicts (along batch dim ``dim``)."""
    parts: list = [OrderedDict() for _ in range(n)]
    markers = sd.get(_NON_TENSOR) or {}
    for key, value in sd.items():
        if key == _BS:
            bs = list(torch.Size(value))
            for p in parts:
                p[_BS] = torch.Size(bs[:dim] + bs[dim + 1 :])
        elif key == _NAMES:
            for p in parts:
                p[_NAMES] = list(value[:dim]) + list(value[dim + 1 :])
        elif key == _NON_TENSOR:
            continue
        elif key in _RESERVED:
            for p in parts:
                p[key] = value
        elif key in markers:
            marker = markers[key]
            for i, p in enumerate(parts):
                if marker == "data":
                    p[key] = value
                    p.setdefault(_NON_TENSOR, {})[key] = "data"
                else:
                    shape = list(marker[1])
                    shape = shape[:dim] + shape[dim + 1 :]
                    sub = _split_nested_list(value, dim, i)
                    flat = _unflat_list(sub, shape)
                    if flat and _all_same(flat):  # one value: non-tensor data
                        p[key] = flat[0]
                        p.setdefault(_NON_TENSOR, {})[key] = "data"
                    else:
                        p[key] = sub
                        p.setdefault(_NON_TENSOR, {})[key] = ["stack", shape]
        elif isinstance(value, Mapping):
            for p, sub in zip(parts, _split_state(value, dim, n)):
                p[key] = sub
        elif isinstance(value, torch.Tensor) and not getattr(type(value), "_pass_through", False):
            if value.ndim <= dim or value.shape[dim] != n:
                msg = (
                    f"load_state_dict: key {key!r} of shape {tuple(value.shape)} cannot be split over a lazy "
                    f"stack of {n} TensorDicts along dim {dim}."
                )
                raise RuntimeError(msg)
            for p, sub in zip(parts, value.unbind(dim)):
                p[key] = sub
        else:
            for p in parts:
                p[key] = value
    return parts


def _unflat_list(items: Any, shape: list) -> list:
    if not shape:
        return [items]
    out: list = []
    for sub in items:
        out.extend(_unflat_list(sub, shape[1:]))
    return out


def _non_tensor_value(marker: Any, value: Any, batch_size: torch.Size, device: Any, classes: tuple) -> Any:
    _, nt_data, nt_stack = classes
    if isinstance(marker, (list, tuple)) and marker and marker[0] == "stack":
        shape = torch.Size(marker[1])
        items = _unflat_list(value, list(shape))
        if len(items) != shape.numel():
            msg = f"load_state_dict: a non-tensor stack of shape {tuple(shape)} holds {len(items)} items."
            raise RuntimeError(msg)
        return nt_stack._from_flat(items, shape, device)
    return nt_data(value, batch_size, device)


def _meta(sd: Mapping, path: tuple) -> tuple:
    bs = sd.get(_BS)
    if bs is not None:
        try:
            bs = torch.Size(bs)
        except TypeError:
            msg = f"load_state_dict: invalid batch size {bs!r} at {'.'.join(path) or '<root>'}."
            raise RuntimeError(msg) from None
    device = sd.get(_DEVICE)
    names = sd.get(_NAMES)
    non_tensor = sd.get(_NON_TENSOR) or {}
    return bs, device, names, non_tensor


def _new_from_state(sd: Mapping, path: tuple, classes: tuple) -> Any:
    """A new TensorDict holding a nested state dict (with its batch size and device)."""

    base = classes[0]
    bs, device, names, non_tensor = _meta(sd, path)
    bs = bs if bs is not None else torch.Size(())
    source: dict = {}
    for key, value in sd.items():
        if key in _RESERVED:
            continue
        if key in non_tensor:
            source[key] = _non_tensor_value(non_tensor[key], value, bs, None, classes)
        elif isinstance(value, Mapping) and not isinstance(value, base):
            source[key] = _new_from_state(value, (*path, key), classes)
        else:
            source[key] = value
    out = _classes.TensorDict(source, batch_size=bs, names=names)
    if device is not None and _all_on(out, torch.device(device)):
        out._set_device_tree(torch.device(device))
    return out


def _all_on(td: Any, device: torch.device) -> bool:
    """``True`` if every tensor leaf is on ``device`` (``torch.load(map_location=...)``
    may have put them elsewhere; then the recorded device is not adopted)."""
    return all(t.device == device for t in td._tensor_leaves())


def _plan_load(td: Any, sd: Mapping, assign: bool, strict: bool, path: tuple, ops: list, report: dict, classes: tuple) -> None:
    base = classes[0]
    if isinstance(td, _classes.LazyStackedTensorDict) and td.tensordicts:
        # a lazy stack stores nothing itself: each stacked TensorDict loads its slice
        for part, sub in zip(td.tensordicts, _split_state(sd, td.stack_dim, len(td.tensordicts))):
            _plan_load(part, sub, assign, strict, path, ops, report, classes)
        return
    bs, device, names, non_tensor = _meta(sd, path)
    target_bs = bs if bs is not None else td.batch_size
    node_device = td.device
    data_keys = [k for k in sd if k not in _RESERVED]
    if strict:
        present = set(data_keys)
        for key, value in td._items_raw():
            if key not in present and not (isinstance(value, base) and not list(value.keys(True, True))):
                report["missing"].append(".".join((*path, key)))
    for key in data_keys:
        value = sd[key]
        full = (*path, key)
        existing = td._get_raw(key, None)
        if existing is None and strict:
            if not _is_empty_state(value):  # an empty nested TensorDict is no data to miss
                report["unexpected"].append(".".join(full))
            continue
        if key in non_tensor:
            new = _non_tensor_value(non_tensor[key], value, target_bs, node_device, classes)
            ops.append(("set", td, key, new))
            continue
        if isinstance(value, Mapping) and not isinstance(value, base):
            if isinstance(existing, base):
                _plan_load(existing, value, assign, strict, full, ops, report, classes)
            elif getattr(existing, "_is_tensorclass", False) and isinstance(existing._tensordict, base):
                # a tensorclass (its state is its TensorDict's): load into that TensorDict;
                # if entries get replaced, the instance is rebuilt over it to see them
                start = len(ops)
                _plan_load(existing._tensordict, value, assign, strict, full, ops, report, classes)
                if any(op[0] != "copy" for op in ops[start:]):
                    ops.append(("rebind", td, key, existing))
            elif existing is None or assign:
                new = _new_from_state(value, full, classes)
                if node_device is not None:
                    new = new.to(node_device)
                _check_leading(full, new.batch_size, target_bs)
                ops.append(("set", td, key, new))
            else:
                msg = (
                    f"load_state_dict: key {'.'.join(full)!r} is a nested state dict but the TensorDict "
                    f"holds a {type(existing).__name__} there. Pass assign=True to replace it."
                )
                raise RuntimeError(msg)
            continue
        if isinstance(value, torch.Tensor):
            if not (getattr(type(value), "_pass_through", False) or getattr(type(existing), "_pass_through", False)):
                _check_leading(full, value.shape, target_bs)  # an UnbatchedTensor has no batch dims
            if not assign and isinstance(existing, torch.Tensor):
                if existing.shape != value.shape:
                    msg = (
                        f"load_state_dict: size mismatch for {'.'.join(full)!r}: copying a tensor of shape "
                        f"{tuple(value.shape)} into a tensor of shape {tuple(existing.shape)}. Pass assign=True "
                        "to replace the tensor instead."
                    )
                    raise RuntimeError(msg)
                ops.append(("copy", existing, None, value))
                continue
            if isinstance(existing, base) and not assign:
                msg = (
                    f"load_state_dict: key {'.'.join(full)!r} is a tensor in the state dict but a nested "
                    "TensorDict in the TensorDict. Pass assign=True to replace it."
                )
                raise RuntimeError(msg)
            if node_device is not None and value.device != node_device:
                value = value.to(node_device)
            ops.append(("set", td, key, value))
            continue
        ops.append(("set", td, key, td._convert_value(key, value)))
    if bs is not None and bs != td.batch_size:
        ops.append(("batch", td, None, bs))
    if names is not None:
        ops.append(("names", td, None, names))
    if device is not None and node_device is None and not list(td._keys_raw()):
        ops.append(("device", td, None, torch.device(device)))


def _check_leading(full: tuple, shape: Any, batch_size: torch.Size) -> None:
    if tuple(shape[: len(batch_size)]) != tuple(batch_size):
        msg = (
            f"load_state_dict: batch dimension mismatch for key {'.'.join(full)!r}: expected leading "
            f"dims {tuple(batch_size)}, got shape {tuple(shape)}."
        )
        raise RuntimeError(msg)


class StateDictMixin(TensorDictHost):
    """``state_dict`` / ``load_state_dict`` (mixed into TensorDictBase via ModuleParamsMixin)."""

    def state_dict(
        self, destination: Any = None, prefix: str = "", keep_vars: bool = False, flatten: bool = True
    ) -> OrderedDict:
        """Returns the content of the TensorDict as an ``OrderedDict``, like ``nn.Module.state_dict()``.

        The result holds the tensors (detached unless ``keep_vars``) under
        ``"."``-joined keys, and the metadata of every level (batch size, device,
        names, non-tensor data, empty nested TensorDicts) in its ``_metadata``
        attribute, keyed by the level's path (``""`` for the root); see the module
        documentation for the layout. It holds only types that
        ``torch.load(..., weights_only=True)`` accepts (as long as the non-tensor data
        are plain Python values), so it goes into checkpoints next to a model's.

        Args:
            destination (MutableMapping, optional): a mapping to write the entries into,
                and to return. Defaults to ``None`` (a new ``OrderedDict``).
            prefix (str, optional): prepended to every key (and ``_metadata`` path).
                Defaults to ``""``.
            keep_vars (bool, optional): keep the tensors attached to autograd.
                Defaults to ``False`` (detached; they still share storage).
            flatten (bool, optional): ``"."``-joined keys (default), or nested
                ``OrderedDict`` s with ``flatten=False``.

        Returns:
            the state dict (``destination`` if given).

        Raises:
            KeyError: a key is one of the reserved names of the earlier layout
                (``"__batch_size"``, ...), or (flat layout) contains ``"."``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3), "b": {"c": torch.ones(3, 2)}, "s": "hi"}, [3])
            >>> sd = td.state_dict()
            >>> list(sd), sd._metadata["b"]["batch_size"], sd._metadata[""]["_non_tensor"]
            (['a', 'b.c'], torch.Size([3]), {'s': 'hi'})
            >>> list(td.state_dict(flatten=False)["b"])
            ['c']
            >>> td2 = TensorDict({"a": torch.ones(3), "b": {"c": torch.zeros(3, 2)}, "s": "?"}, [3])
            >>> td2.load_state_dict(sd)["s"]
            'hi'
        """
        types: dict = {}
        nested = _nested_state(self, keep_vars, _leaf_classes(), types)
        meta: OrderedDict = OrderedDict()
        tree = _public_state(nested, (), meta, types)
        if destination is None:
            destination = OrderedDict()
        if flatten:
            _flat_tensors(tree, prefix, destination)
        else:
            for key, value in tree.items():
                destination[prefix + key] = value
        root = prefix[:-1] if prefix.endswith(".") else prefix
        if root:
            meta = OrderedDict((f"{root}.{k}" if k else root, v) for k, v in meta.items())
        existing = getattr(destination, "_metadata", None)
        if isinstance(existing, dict):
            existing.update(meta)
        else:
            try:
                destination._metadata = meta
            except AttributeError:  # a mapping that takes no attribute (e.g. a plain dict)
                pass
        return destination

    def load_state_dict(
        self, state_dict: Mapping, strict: bool = True, assign: bool = False, from_flatten: bool | None = None
    ) -> Self:
        """Loads a state dict made by :meth:`state_dict` into the TensorDict; returns ``self``.

        Everything is checked before anything is written: on error the TensorDict is
        unchanged (except for a batch-size change that fails after the writes, with
        ``strict=False``).

        Args:
            state_dict (Mapping): the state dict (nested, or flat with
                ``from_flatten=True``).
            strict (bool, optional): the keys of the state dict and of the TensorDict
                must be the same at every level (empty nested TensorDicts excepted);
                otherwise a ``RuntimeError`` lists the missing and unexpected keys. With
                ``False``, keys absent from the TensorDict are added and the others are
                kept. Defaults to ``True``.
            assign (bool, optional): replace the tensors with those of the state dict.
                Defaults to ``False``: values are copied in place into the existing
                tensors, which keep their storage, dtype and device (as
                ``nn.Module.load_state_dict``).
            from_flatten (bool, optional): ``True``: the state dict has ``"."``-joined
                keys (``state_dict()``); ``False``: it is nested
                (``state_dict(flatten=False)``). Defaults to ``None``: told apart by
                its keys (flat when no value is a mapping and a key holds a ``"."``).

        Returns:
            ``self``, with the batch size (and dim names) of the state dict. A level
            that had no entries and no device takes the device of the state dict.

        Raises:
            RuntimeError: missing/unexpected keys with ``strict=True``; shape or batch-size
                mismatches; a locked TensorDict would get new entries.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2)}, [2])
            >>> sd = TensorDict({"a": torch.ones(2)}, [2]).state_dict()
            >>> td.load_state_dict(sd)["a"]
            tensor([1., 1.])
        """
        if not isinstance(state_dict, Mapping):
            msg = f"load_state_dict expects a mapping, got {type(state_dict).__name__}."
            raise TypeError(msg)
        state_dict = _internal_state(state_dict, from_flatten)
        classes = _leaf_classes()
        ops: list = []
        report: dict = {"missing": [], "unexpected": []}
        _plan_load(self, state_dict, assign, strict, (), ops, report, classes)
        if report["missing"] or report["unexpected"]:
            hint = ""
            if any("." in k for k in report["unexpected"]) and from_flatten is False:
                hint = " The state dict looks flat: pass from_flatten=True (or leave it to be detected)."
            msg = (
                f"Error(s) in loading state_dict for {type(self).__name__}: missing keys "
                f"{report['missing']}, unexpected keys {report['unexpected']}. Pass strict=False to "
                f"load the matching keys only.{hint}"
            )
            raise RuntimeError(msg)
        for kind, node, key, _ in ops:
            if kind == "set" and node.is_locked:
                raise locked_error("load a state dict that replaces or adds entries", key)
        with torch.no_grad():
            for kind, node, key, value in ops:
                if kind == "copy":
                    node.copy_(value)
                elif kind == "set":
                    node._set_raw(key, value)
                elif kind == "batch":
                    node.batch_size = value
                elif kind == "names":
                    if list(node.names) != list(value):
                        node.names = value
                elif kind == "device":
                    if _all_on(node, value):
                        node._set_device_tree(value)
                elif kind == "rebind":  # a tensorclass whose TensorDict got new entries
                    nt = getattr(value, "_non_tensordict", None)
                    node._set_raw(key, type(value)._from_tensordict(value._tensordict, dict(nt) if nt else None))
        return self
