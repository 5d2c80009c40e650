"""``state_dict`` / ``load_state_dict`` for every TensorDict (``StateDictMixin``).

A TensorDict's state dict is an ``OrderedDict`` that ``torch.save`` writes and
``torch.load`` (also with the default ``weights_only=True``) reads back, so it can sit
in a checkpoint next to a model's ``state_dict()``. Format of one level:

- ``key -> Tensor`` for a tensor leaf (detached unless ``keep_vars=True``);
- ``key -> OrderedDict`` for a nested TensorDict (same format, recursively);
- ``key -> object`` for non-tensor data (the Python object; a ``NonTensorStack`` is
  stored as its nested list);
- ``"__batch_size" -> torch.Size``, ``"__device" -> str | None``, ``"__names" -> list``
  (only for named dims) and ``"__non_tensor" -> {key: "data" | ["stack", shape]}``
  (only when there is non-tensor data): the metadata of the level.

With ``flatten=True`` the levels are merged into one dict with ``"."``-joined keys
(``"sub.x"``, ``"sub.__batch_size"``), like ``nn.Module.state_dict()``; read it back
with ``load_state_dict(..., from_flatten=True)``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import torch

from tensordict import _classes
from tensordict._errors import locked_error
from tensordict._host import TensorDictHost
from tensordict._nontensor import NonTensorData, NonTensorStack

__all__ = ["StateDictMixin"]

_BS = "__batch_size"
_DEVICE = "__device"
_NAMES = "__names"
_NON_TENSOR = "__non_tensor"
_RESERVED = frozenset((_BS, _DEVICE, _NAMES, _NON_TENSOR))


def _leaf_classes() -> tuple:
    return _classes.TensorDictBase, NonTensorData, NonTensorStack


def _nested_state(td: Any, keep_vars: bool, classes: tuple) -> OrderedDict:
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
            out[key] = _nested_state(value, keep_vars, classes)
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
            out[key] = _nested_state(inner, keep_vars, classes)
    out[_BS] = torch.Size(td.batch_size)
    device = td.device
    out[_DEVICE] = None if device is None else str(device)
    if td._has_names():
        out[_NAMES] = list(td.names)
    if non_tensor:
        out[_NON_TENSOR] = non_tensor
    return out


def _flatten_state(nested: Mapping, prefix: str, out: Any) -> None:
    non_tensor = nested.get(_NON_TENSOR, {})
    for key, value in nested.items():
        if key in _RESERVED:
            out[prefix + key] = value
            continue
        if "." in key:
            msg = (
                f"state_dict(flatten=True): key {key!r} contains '.', which would be read back as "
                "a nested key. Use flatten=False, or rename the key."
            )
            raise KeyError(msg)
        if isinstance(value, Mapping) and key not in non_tensor:
            _flatten_state(value, f"{prefix}{key}.", out)
        else:
            out[prefix + key] = value


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
        self, destination: Any = None, prefix: str = "", keep_vars: bool = False, flatten: bool = False
    ) -> OrderedDict:
        """Returns the content of the TensorDict as an ``OrderedDict``, like ``nn.Module.state_dict()``.

        The result holds the tensors (detached unless ``keep_vars``), nested
        ``OrderedDict`` s for nested TensorDicts, the Python objects of non-tensor
        data, and the metadata of every level under the keys ``"__batch_size"``,
        ``"__device"`` (and ``"__names"``, ``"__non_tensor"`` when needed). It only
        holds types that ``torch.load(..., weights_only=True)`` accepts (as long as
        the non-tensor data are plain Python values), so it goes into checkpoints
        next to a model's state dict.

        Args:
            destination (MutableMapping, optional): a mapping to write the entries into,
                and to return. Defaults to ``None`` (a new ``OrderedDict``).
            prefix (str, optional): prepended to every top-level key. Defaults to ``""``.
            keep_vars (bool, optional): keep the tensors attached to autograd.
                Defaults to ``False`` (detached; they still share storage).
            flatten (bool, optional): join nested keys with ``"."`` into one level.
                Defaults to ``False``.

        Returns:
            the state dict (``destination`` if given).

        Raises:
            KeyError: a key is one of the reserved metadata names, or (with
                ``flatten=True``) contains ``"."``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3), "b": {"c": torch.ones(3, 2)}, "s": "hi"}, [3])
            >>> sd = td.state_dict()
            >>> sd["__batch_size"], sd["b"]["c"].shape, sd["s"]
            (torch.Size([3]), torch.Size([3, 2]), 'hi')
            >>> sorted(td.state_dict(flatten=True))
            ['__batch_size', '__device', '__non_tensor', 'a', 'b.__batch_size', 'b.__device', 'b.c', 's']
            >>> td2 = TensorDict({"a": torch.ones(3), "b": {"c": torch.zeros(3, 2)}, "s": "?"}, [3])
            >>> td2.load_state_dict(sd)["s"]
            'hi'
        """
        nested = _nested_state(self, keep_vars, _leaf_classes())
        if destination is None:
            destination = OrderedDict()
        if flatten:
            _flatten_state(nested, prefix, destination)
        else:
            for key, value in nested.items():
                destination[prefix + key] = value
        return destination

    def load_state_dict(
        self, state_dict: Mapping, strict: bool = True, assign: bool = False, from_flatten: bool = False
    ) -> Any:
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
            from_flatten (bool, optional): the state dict has ``"."``-joined keys
                (``state_dict(flatten=True)``). Defaults to ``False``.

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
        if from_flatten:
            state_dict = _unflatten_state(state_dict)
        classes = _leaf_classes()
        ops: list = []
        report: dict = {"missing": [], "unexpected": []}
        _plan_load(self, state_dict, assign, strict, (), ops, report, classes)
        if report["missing"] or report["unexpected"]:
            hint = ""
            if any("." in k for k in report["unexpected"]) and not from_flatten:
                hint = " The state dict looks flat: pass from_flatten=True."
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
