"""The engine of the leaf-wise math: one ``torch._foreach_*`` call over all leaves.

``_binary`` / ``_binary_`` / ``_unary`` / ``_unary_`` / ``_ternary`` flatten a
TensorDict into the list of its tensor leaves (``_apply._flatten_tensors``), line
the other operand up with that list (``_operand``), run the foreach kernel (or a
loop where torch has none, or inside functorch transforms, which have no batching
rule for foreach) and rebuild the tree around the results. ``MathMixin`` in
``_ops.py`` exposes them as methods.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from tensordict import _classes
from tensordict._apply import (
    _NESTED,
    _PART,
    _TC,
    UnionDefault,
    _collect_like,
    _flatten_tensors,
    _other_parts,
    _unflatten_tensors,
)
from tensordict._lock_graph import register_locked_root

_Tensor = torch.Tensor
_peek_interpreter = torch._C._functorch.peek_interpreter_stack
_SCALARS = (int, float, bool, complex)


def _foreach_ok() -> bool:
    """``False`` inside functorch transforms (vmap, grad): foreach has no batching rule."""
    return _peek_interpreter() is None


def _is_td(value: Any) -> bool:
    return isinstance(value, _classes.TensorDictBase)


def _align(other: _Tensor, leaf: _Tensor) -> _Tensor:
    """``other`` lined up with ``leaf``: left-aligned when its shape starts ``leaf``'s."""
    nd = other.ndim
    if nd == leaf.ndim or nd == 0:
        return other
    if nd < leaf.ndim and leaf.shape[:nd] == other.shape:
        return other.reshape(*other.shape, *([1] * (leaf.ndim - nd)))
    return other


def _batch_broadcast_dims(td: Any, other: _Tensor) -> int | None:
    """``td``'s number of batch dims when ``other`` is broadcast against the batch size
    (its shape is not a prefix of it but broadcasts with it), else ``None``."""
    bs = td.batch_size
    nd = other.ndim
    if not bs or not nd or bs[:nd] == other.shape:
        return None
    try:
        torch.broadcast_shapes(other.shape, bs)
    except RuntimeError:
        return None
    return len(bs)


def _rebatch(out: Any, td: Any, *operands: Any) -> Any:
    """Gives ``out`` the batch size of ``td`` broadcast with the operands': tensors lined
    up with the batch dims (``td * torch.ones(2, *td.batch_size)``) and TensorDicts of
    another batch size (``td * other`` with ``other.batch_size == (2, *td.batch_size)``)."""
    new = bs = td.batch_size
    for t in operands:
        if isinstance(t, _Tensor):
            if _batch_broadcast_dims(td, t) is not None:
                new = torch.broadcast_shapes(t.shape, new)
        elif isinstance(t, _classes.TensorDictBase) and t.batch_size != bs:
            try:
                new = torch.broadcast_shapes(t.batch_size, new)
            except RuntimeError:
                continue
    if new != bs:
        try:
            out.batch_size = new
        except (RuntimeError, ValueError):  # the leaves did not broadcast that way: keep it
            pass
    return out


def _as_td(other: Mapping) -> Any:
    return _classes.TensorDict(other, batch_size=[])


def _operand(spec: tuple, leaves: list, other: Any, what: str) -> tuple[Any, bool]:
    """The other operand as ``(scalar, False)`` or ``(list aligned with leaves, True)``.

    Returns ``(NotImplemented, False)`` for a type no op accepts.
    """
    if other.__class__ in _SCALARS:
        return other, False
    if isinstance(other, _Tensor):
        if other.ndim == 0 and leaves and other.device == leaves[0].device:
            return other, False
        nb = _batch_broadcast_dims(spec[0], other)
        if nb is not None:  # lined up with the batch dims (right-aligned), as tensordict 0.15
            return [other.reshape(*other.shape, *([1] * (leaf.ndim - nb))) for leaf in leaves], True
        if not spec[2] and _has_parts(spec):
            parts: list = []
            _split_tensor(spec, other, leaves, parts, 0)
            return parts, True
        return [_align(other, leaf) for leaf in leaves], True
    if _is_td(other):
        out: list = []
        _collect_like(spec, other, out, what)
        return out, True
    if isinstance(other, _SCALARS):
        return other, False
    if isinstance(other, Mapping):
        out = []
        _collect_like(spec, _as_td(other), out, what)
        return out, True
    return NotImplemented, False


def _has_parts(spec: tuple) -> bool:
    """Whether ``spec`` walks a lazy stack through its stacked TensorDicts."""
    for entry in spec[1]:
        if entry.__class__ is str:
            continue
        kind = entry[1]
        if kind == _PART:
            return True
        if (kind == _NESTED and _has_parts(entry[2])) or (kind == _TC and _has_parts(entry[2][1])):
            return True
    return False


def _split_tensor(spec: tuple, other: _Tensor, leaves: list, out: list, pos: int) -> int:
    """Appends ``other`` lined up with each leaf of ``spec`` (``leaves[pos:]``) to ``out``.

    At a lazy stack walked through its stacked TensorDicts, a tensor that covers the
    stack dim (its shape starts with the stack's batch size up to ``stack_dim``) is cut
    along it, one slice per stacked TensorDict, as the leaves were. Returns the next
    leaf position.
    """
    td, entries, _ = spec
    split: tuple[_Tensor, ...] | None = None
    for entry in entries:
        if entry.__class__ is str:
            out.append(_align(other, leaves[pos]))
            pos += 1
        elif entry[1] == _PART:
            if split is None:
                sd = td.stack_dim
                bs = td.batch_size
                covers = other.ndim > sd and other.shape[: sd + 1] == bs[: sd + 1]
                split = other.unbind(sd) if covers else ()
            sub = split[entry[0]] if split else other
            pos = _split_tensor(entry[2], sub, leaves, out, pos)
        elif entry[1] == _NESTED:
            pos = _split_tensor(entry[2], other, leaves, out, pos)
        elif entry[1] == _TC:
            pos = _split_tensor(entry[2][1], other, leaves, out, pos)
    return pos


def _as_tensor_like(value: Any, leaf: _Tensor) -> Any:
    if isinstance(value, _Tensor):
        return value
    return torch.as_tensor(value, device=leaf.device)


# name -> (foreach, foreach_, eager, eager in-place method or None)
_BINARY: dict[str, tuple] = {
    "add": (torch._foreach_add, torch._foreach_add_, torch.add, "add_"),
    "sub": (torch._foreach_sub, torch._foreach_sub_, torch.sub, "sub_"),
    "mul": (torch._foreach_mul, torch._foreach_mul_, torch.mul, "mul_"),
    "div": (torch._foreach_div, torch._foreach_div_, torch.div, "div_"),
    "pow": (torch._foreach_pow, torch._foreach_pow_, torch.pow, "pow_"),
    "maximum": (
        torch._foreach_maximum,
        torch._foreach_maximum_,
        lambda x, y: torch.maximum(x, _as_tensor_like(y, x)),
        None,
    ),
    "minimum": (
        torch._foreach_minimum,
        torch._foreach_minimum_,
        lambda x, y: torch.minimum(x, _as_tensor_like(y, x)),
        None,
    ),
    "clamp_min": (
        torch._foreach_clamp_min,
        torch._foreach_clamp_min_,
        torch.clamp_min,
        "clamp_min_",
    ),
    "clamp_max": (
        torch._foreach_clamp_max,
        torch._foreach_clamp_max_,
        torch.clamp_max,
        "clamp_max_",
    ),
    "floor_divide": (None, None, torch.floor_divide, "floor_divide_"),
    "remainder": (None, None, torch.remainder, "remainder_"),
    "fmod": (None, None, torch.fmod, "fmod_"),
    "bitwise_and": (None, None, torch.bitwise_and, "bitwise_and_"),
    "bitwise_or": (None, None, torch.bitwise_or, "bitwise_or_"),
    "bitwise_xor": (None, None, torch.bitwise_xor, "bitwise_xor_"),
    "logical_and": (
        None,
        None,
        lambda x, y: torch.logical_and(x, _as_tensor_like(y, x)),
        "logical_and_",
    ),
    "logical_or": (
        None,
        None,
        lambda x, y: torch.logical_or(x, _as_tensor_like(y, x)),
        "logical_or_",
    ),
    "logical_xor": (
        None,
        None,
        lambda x, y: torch.logical_xor(x, _as_tensor_like(y, x)),
        "logical_xor_",
    ),
}

# binary ops whose eager form only takes a tensor operand
_TENSOR_OPERAND = frozenset({"maximum", "minimum", "logical_and", "logical_or", "logical_xor"})

# unary ops with a foreach kernel
_UNARY_FOREACH = (
    "abs",
    "acos",
    "asin",
    "atan",
    "ceil",
    "cos",
    "cosh",
    "erf",
    "erfc",
    "exp",
    "expm1",
    "floor",
    "frac",
    "lgamma",
    "log",
    "log10",
    "log1p",
    "log2",
    "neg",
    "reciprocal",
    "round",
    "rsqrt",
    "sigmoid",
    "sign",
    "sin",
    "sinh",
    "sqrt",
    "tan",
    "tanh",
    "trunc",
)
# unary ops that loop (no foreach kernel); the second item says whether an
# in-place variant exists
_UNARY_LOOP = {
    "isnan": False,
    "isfinite": False,
    "isinf": False,
    "isposinf": False,
    "isneginf": False,
    "isreal": False,
    "signbit": False,
    "logical_not": True,
    "bitwise_not": True,
    "relu": True,
    "square": True,
    "exp2": True,
    "sgn": True,
    "digamma": True,
    "logit": True,
    "erfinv": True,
    "deg2rad": True,
    "rad2deg": True,
}


def _binary_method(td: Any, other: Any, name: str, default: Any = None) -> Any:
    """``td.<name>(other)`` of a generated binary op: ``_binary`` or a ``TypeError``.

    ``default`` (with a TensorDict ``other`` whose keys differ): ``"intersection"`` keeps
    the shared keys only; a value stands for the entries missing on either side."""
    if default is not None and isinstance(other, _classes.TensorDictBase):
        fn = getattr(torch, name)

        def pair(x: Any, y: Any) -> Any:  # the default stands in as a tensor like the other side
            ref = x if isinstance(x, torch.Tensor) else y
            x = x if isinstance(x, torch.Tensor) else torch.as_tensor(x, dtype=ref.dtype, device=ref.device)
            y = y if isinstance(y, torch.Tensor) else torch.as_tensor(y, dtype=ref.dtype, device=ref.device)
            return fn(x, y)

        return _with_default(td, other, default, pair)
    out = _binary(td, other, name)
    if out is NotImplemented:
        msg = f"{name}: unsupported operand of type {type(other).__name__}; pass a number, a tensor or a TensorDict."
        raise TypeError(msg)
    return out


def _binary(td: Any, other: Any, name: str, alpha: Any = None, reflected: bool = False) -> Any:
    """Out-of-place binary op on every tensor leaf; ``NotImplemented`` for an unknown operand."""
    leaves: list = []
    spec = _flatten_tensors(td, leaves, True)
    arg, is_list = _operand(spec, leaves, other, name)
    if arg is NotImplemented:
        return NotImplemented
    foreach, _, eager, _ = _BINARY[name]
    if reflected:
        results = _reflected(name, leaves, arg, is_list)
    else:
        results = None
        if foreach is not None and leaves and _foreach_ok():
            try:
                if alpha is None:
                    results = foreach(leaves, arg)
                elif is_list:
                    results = foreach(leaves, arg, alpha=alpha)
                else:
                    results = foreach(leaves, arg * alpha)
            except (RuntimeError, TypeError):
                results = None
        if results is None:
            kw = {} if alpha is None else {"alpha": alpha}
            if is_list:
                results = [eager(x, y, **kw) for x, y in zip(leaves, arg)]
            else:
                results = [eager(x, arg, **kw) for x in leaves]
    out = _unflatten_tensors(spec, results)[0]  # type: ignore[arg-type]
    if is_list:
        _rebatch(out, td, other)
    if not spec[2] and name in _NON_TENSOR_BINARY and not reflected:
        _non_tensor_binary(spec, out, other, _NON_TENSOR_BINARY[name])
    if td._is_locked:  # as tensordict: the result of a locked operand is locked
        out._set_lock_flag(True)
        register_locked_root(out)
    return out


# ops that also combine non-tensor data (``NonTensorData(True) ^ NonTensorData(True)``
# is ``NonTensorData(False)``, as in tensordict); the other ops pass it through
_NON_TENSOR_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "bitwise_or": lambda a, b: a | b,
    "bitwise_xor": lambda a, b: a ^ b,
    "bitwise_and": lambda a, b: a & b,
}


def _non_tensor_binary(spec: tuple, out: Any, other: Any, op: Callable[[Any, Any], Any]) -> None:
    """Replaces, in ``out``, each ``NonTensorData`` passed through by ``spec`` with
    ``op(data, other's data)`` (``other`` a TensorDict with data at the same key, or a scalar)."""
    ntd = _classes.NonTensorData
    entries = spec[1]
    if entries and entries[0].__class__ is tuple and entries[0][1] == _PART:  # a lazy stack
        others = _other_parts(spec[0], other, "non-tensor op") if _is_td(other) else None
        for entry, sub_out in zip(entries, out.tensordicts):
            sub_other = other if others is None else others[entry[0]]
            _non_tensor_binary(entry[2], sub_out, sub_other, op)
        return
    for entry in entries:
        if entry.__class__ is str or entry[1] == _TC:
            continue
        key = entry[0]
        sub_other = other._get_raw(key, None) if _is_td(other) else other
        if entry[1] == _NESTED:
            if sub_other is not None:
                _non_tensor_binary(entry[2], out._get_raw(key), sub_other, op)
            continue
        value = entry[2]
        if value.__class__ is not ntd and not isinstance(value, ntd):
            continue
        if isinstance(sub_other, ntd):
            sub_other = sub_other.data
        elif sub_other is None or _is_td(sub_other) or isinstance(sub_other, _Tensor):
            continue
        try:
            result = op(value.data, sub_other)
        except TypeError as err:
            msg = f"key {key!r}: the non-tensor data {value.data!r} and {sub_other!r} cannot be combined ({err})."
            raise TypeError(msg) from None
        out._set_raw(key, ntd(result, value.batch_size, value.device))


def _reflected(name: str, leaves: list, arg: Any, is_list: bool) -> Sequence[Any]:
    """``other <op> leaf`` for the reflected dunders (``1 - td``, ``2 ** td``, ...)."""
    if not is_list and _foreach_ok() and leaves:
        try:
            if name == "sub":
                return torch._foreach_add(torch._foreach_neg(leaves), arg)
            if name == "pow":
                return torch._foreach_pow(arg, leaves)
            if name == "div" and not isinstance(arg, _Tensor):
                # ``number / tensor`` is ``tensor.reciprocal() * number`` in torch
                out = torch._foreach_reciprocal(leaves)
                torch._foreach_mul_(out, arg)
                return out
        except (RuntimeError, TypeError):
            pass
    eager = _BINARY[name][2]
    if is_list:
        return [eager(y, x) for x, y in zip(leaves, arg)]
    if name == "div" and not isinstance(arg, _Tensor):
        return [x.reciprocal() * arg for x in leaves]
    return [
        eager(_as_tensor_like(arg, x), x) if name in _TENSOR_OPERAND else eager(arg, x)
        for x in leaves
    ]


def _binary_(td: Any, other: Any, name: str, alpha: Any = None) -> Any:
    """In-place binary op on every tensor leaf; returns ``td``."""
    leaves: list = []
    spec = _flatten_tensors(td, leaves, True)
    arg, is_list = _operand(spec, leaves, other, name + "_")
    if arg is NotImplemented:
        msg = f"{name}_: unsupported operand of type {type(other).__name__}; pass a number, a tensor or a TensorDict."
        raise TypeError(msg)
    if not leaves:
        return td
    _, foreach_, _, method = _BINARY[name]
    if foreach_ is not None and _foreach_ok():
        if alpha is None:
            foreach_(leaves, arg)
        elif is_list:
            foreach_(leaves, arg, alpha=alpha)
        else:
            foreach_(leaves, arg * alpha)
        return td
    kw = {} if alpha is None else {"alpha": alpha}
    args = arg if is_list else [arg] * len(leaves)
    needs_tensor = name in _TENSOR_OPERAND
    for x, y in zip(leaves, args):
        if needs_tensor and not isinstance(y, _Tensor):
            y = _as_tensor_like(y, x)
        if method is not None:
            getattr(x, method)(y, **kw)
        else:
            getattr(torch, name)(x, y, out=x)
    return td


def _unary(td: Any, name: str) -> Any:
    leaves: list = []
    spec = _flatten_tensors(td, leaves, True)
    results = None
    if leaves and _foreach_ok():
        try:
            results = getattr(torch, "_foreach_" + name)(leaves)
        except (RuntimeError, TypeError):
            results = None
    if results is None:
        fn = getattr(torch, name)
        results = [fn(x) for x in leaves]
    return _unflatten_tensors(spec, results)[0]


def _unary_(td: Any, name: str) -> Any:
    leaves: list = []
    _flatten_tensors(td, leaves, True)
    if not leaves:
        return td
    if _foreach_ok():
        getattr(torch, "_foreach_" + name + "_")(leaves)
    else:
        for x in leaves:
            getattr(x, name + "_")()
    return td


def _loop(td: Any, fn: Callable) -> Any:
    leaves: list = []
    spec = _flatten_tensors(td, leaves, True)
    return _unflatten_tensors(spec, [fn(x) for x in leaves])[0]


def _loop_(td: Any, fn: Callable) -> Any:
    leaves: list = []
    _flatten_tensors(td, leaves, True)
    for x in leaves:
        fn(x)
    return td


def _check_mask(td: Any, mask: Any, what: str) -> _Tensor:
    if not isinstance(mask, _Tensor):
        mask = torch.as_tensor(mask)
    bs = td.batch_size
    if mask.ndim > len(bs) or mask.shape != bs[: mask.ndim]:
        msg = (
            f"{what}: the mask has shape {tuple(mask.shape)}, expected the batch_size "
            f"{tuple(bs)} (or its leading dims)."
        )
        raise RuntimeError(msg)
    return mask


def _checked(result: Any, other: Any, name: str) -> Any:
    if result is NotImplemented:
        msg = f"{name}: unsupported operand of type {type(other).__name__}; pass a number, a tensor or a TensorDict."
        raise TypeError(msg)
    return result


def _with_default(td: Any, other: Any, default: Any, fn: Callable) -> Any:
    """Binary op with ``default=``: ``"intersection"`` or a fill value for lone entries."""
    if isinstance(default, str):
        if default != "intersection":
            msg = f"default must be 'intersection' or a value, got {default!r}."
            raise ValueError(msg)
        shared = [k for k in td.keys(True, True) if k in other.keys(True, True)]
        return td.select(*shared).apply(fn, other.select(*shared))
    return td.apply(fn, other, default=UnionDefault(default))  # the keys of both


def _ternary(td: Any, name: str, a: Any, b: Any, *, inplace: bool, value: Any = None) -> Any:
    """lerp / addcmul / addcdiv with one foreach kernel (loops inside functorch)."""
    leaves: list = []
    spec = _flatten_tensors(td, leaves, True)
    a_arg, a_list = _operand(spec, leaves, a, name)
    b_arg, b_list = _operand(spec, leaves, b, name)
    if a_arg is NotImplemented or b_arg is NotImplemented:
        msg = f"{name}: operands must be numbers, tensors or TensorDicts."
        raise TypeError(msg)
    if not a_list:
        a_arg = [
            torch.as_tensor(a_arg, dtype=x.dtype, device=x.device).expand_as(x) for x in leaves
        ]
    if name != "lerp" and not b_list:
        b_arg = [
            torch.as_tensor(b_arg, dtype=x.dtype, device=x.device).expand_as(x) for x in leaves
        ]
    extra = (b_arg,) if name == "lerp" else (b_arg, value)
    if leaves and _foreach_ok():
        fe = getattr(torch, "_foreach_" + name + ("_" if inplace else ""))
        if inplace:
            fe(leaves, a_arg, *extra)
            return td
        try:
            results = fe(leaves, a_arg, *extra)
            return _rebatch(_unflatten_tensors(spec, results)[0], td, a, b)
        except (RuntimeError, TypeError):
            pass
    bs = b_arg if b_list or name != "lerp" else [b_arg] * len(leaves)
    if inplace:
        for x, y, z in zip(leaves, a_arg, bs):
            if name == "lerp":
                x.lerp_(y, z)
            else:
                getattr(x, name + "_")(y, z, value=value)
        return td
    if name == "lerp":
        results = [torch.lerp(x, y, z) for x, y, z in zip(leaves, a_arg, bs)]
    else:
        fn = getattr(torch, name)
        results = [fn(x, y, z, value=value) for x, y, z in zip(leaves, a_arg, bs)]
    return _rebatch(_unflatten_tensors(spec, results)[0], td, a, b)
