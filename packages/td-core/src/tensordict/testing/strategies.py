"""Hypothesis strategies and profiles for the property and fuzz tests of every td-* package.

``tensordict.testing.strategies``: public so that the sibling distributions' test suites
(and users testing code built on TensorDicts) can use it. Importing it needs
``hypothesis`` (a test requirement, not a runtime one); nothing else in ``tensordict``
imports this module, ``import tensordict.testing`` included.

Profiles (``register_profiles()``, picked by the ``HYPOTHESIS_PROFILE`` environment
variable, default ``"ci"``):

- ``ci``: derandomized (fixed seed), ``max_examples`` small enough that the whole
  property suite runs in well under a minute; no example database.
- ``fuzz``: many random examples, for ``nox -s fuzz``.

Strategies:

- :func:`tensordicts`: random nested ``TensorDict``\\ s (random keys, depth, batch
  size, dtypes, feature dims, non-tensor leaves).
- :func:`index_expressions`: a random valid index into a given batch size (ints,
  slices with steps, ``None``, ``Ellipsis``, bool masks, index tensors and lists).
- :func:`shape_op_sequences`: random sequences of batch-dim shape ops (``reshape``,
  ``permute``, ``unsqueeze``, ...), each with its leaf-by-leaf reference.

Helpers: :func:`leaf_items` (every leaf with its nested key), :func:`assert_td_equal`.
"""

from __future__ import annotations

import math
import os
import string
from collections.abc import Callable, Sequence
from typing import Any

import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from tensordict._base import TensorDictBase
from tensordict._nontensor import NonTensorData, NonTensorStack
from tensordict._td import TensorDict

__all__ = [
    "CI_MAX_EXAMPLES",
    "DTYPES",
    "NUMPY_DTYPES",
    "ShapeOp",
    "assert_td_equal",
    "batch_sizes",
    "expand_index",
    "index_expressions",
    "key_names",
    "leaf_items",
    "register_profiles",
    "shape_op_sequences",
    "tensordicts",
    "tensors",
]

#: examples per property test in the ``ci`` profile
CI_MAX_EXAMPLES = 20
FUZZ_MAX_EXAMPLES = 1000

#: dtypes the random leaves use
DTYPES = (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64,
    torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
)
#: the subset NumPy can hold (struct arrays)
NUMPY_DTYPES = tuple(d for d in DTYPES if d is not torch.bfloat16)

_KEY_ALPHABET = string.ascii_lowercase + string.digits + "_"


def register_profiles(load: bool = True) -> str:
    """Registers the ``ci`` and ``fuzz`` profiles; loads ``$HYPOTHESIS_PROFILE`` (default ``ci``).

    Returns:
        str: the name of the profile loaded (or that would be loaded).

    Raises:
        ValueError: ``HYPOTHESIS_PROFILE`` names another profile.
    """
    common: dict[str, Any] = {
        "deadline": None,
        "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large,
                                  HealthCheck.function_scoped_fixture],
    }
    settings.register_profile(
        "ci", max_examples=CI_MAX_EXAMPLES, derandomize=True, database=None,
        print_blob=True, **common,
    )
    settings.register_profile("fuzz", max_examples=FUZZ_MAX_EXAMPLES, print_blob=True, **common)
    name = os.environ.get("HYPOTHESIS_PROFILE", "ci") or "ci"
    if name not in ("ci", "fuzz"):
        msg = f"HYPOTHESIS_PROFILE={name!r}: expected 'ci' or 'fuzz'."
        raise ValueError(msg)
    if load:
        settings.load_profile(name)
    return name


# ---------------------------------------------------------------------- building blocks
def key_names(alphabet: str = _KEY_ALPHABET, max_size: int = 6) -> st.SearchStrategy[str]:
    """Plain key names (no ``"."``, so ``flatten_keys`` round trips)."""
    return st.text(alphabet=alphabet, min_size=1, max_size=max_size)


def batch_sizes(min_dims: int = 0, max_dims: int = 3, min_side: int = 0, max_side: int = 4) -> st.SearchStrategy[torch.Size]:
    """A ``torch.Size`` with ``min_dims..max_dims`` dims of ``min_side..max_side`` each."""
    return st.lists(st.integers(min_side, max_side), min_size=min_dims, max_size=max_dims).map(torch.Size)


def _make_tensor(shape: Sequence[int], dtype: torch.dtype, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    if dtype is torch.bool:
        return torch.randint(0, 2, tuple(shape), generator=gen).bool()
    if dtype.is_floating_point or dtype.is_complex:
        return (torch.randn(tuple(shape), generator=gen) * 10).to(dtype)
    lo, hi = (0, 255) if dtype is torch.uint8 else (-100, 100)
    return torch.randint(lo, hi, tuple(shape), generator=gen).to(dtype)


@st.composite
def tensors(draw: Any, batch_size: Sequence[int], dtypes: Sequence[torch.dtype] = DTYPES, feature_dims: int = 2) -> torch.Tensor:
    """A tensor of shape ``(*batch_size, *feature)`` (0..``feature_dims`` extra dims of 1..3) and random dtype."""
    feat = draw(st.lists(st.integers(1, 3), max_size=feature_dims))
    dtype = draw(st.sampled_from(list(dtypes)))
    return _make_tensor((*batch_size, *feat), dtype, draw(st.integers(0, 2**31 - 1)))


def _non_tensor_values() -> st.SearchStrategy[Any]:
    return st.one_of(st.text(string.ascii_letters + " -_", max_size=8), st.integers(-1000, 1000))


@st.composite
def _td_source(
    draw: Any,
    batch_size: torch.Size,
    depth: int,
    max_keys: int,
    dtypes: Sequence[torch.dtype],
    feature_dims: int,
    non_tensor: st.SearchStrategy[Any] | None,
    nested_extra_dims: bool,
    min_keys: int,
) -> dict:
    """The source dict of one level (nested levels built as TensorDicts)."""

    keys = draw(st.lists(key_names(), min_size=min_keys, max_size=max_keys, unique=True))
    kinds = ["tensor"] * 3 + (["td"] if depth > 0 else []) + (["data"] if non_tensor is not None else [])
    source: dict = {}
    for key in keys:
        kind = draw(st.sampled_from(kinds))
        if kind == "tensor":
            source[key] = draw(tensors(batch_size, dtypes, feature_dims))
        elif kind == "data":
            source[key] = NonTensorData(draw(non_tensor), batch_size=batch_size)
        else:
            extra = draw(st.lists(st.integers(1, 3), max_size=1)) if nested_extra_dims else []
            sub_bs = torch.Size((*batch_size, *extra))
            sub = draw(_td_source(sub_bs, depth - 1, max_keys, dtypes, feature_dims, non_tensor,
                                  nested_extra_dims, 1))
            source[key] = TensorDict(sub, batch_size=sub_bs)
    return source


@st.composite
def tensordicts(
    draw: Any,
    batch_size: torch.Size | st.SearchStrategy[torch.Size] | None = None,
    *,
    max_depth: int = 2,
    max_keys: int = 4,
    min_keys: int = 0,
    dtypes: Sequence[torch.dtype] = DTYPES,
    feature_dims: int = 2,
    non_tensor: bool | st.SearchStrategy[Any] = True,
    nested_extra_dims: bool = True,
) -> Any:
    """A random nested ``TensorDict``.

    Args:
        batch_size: a fixed ``torch.Size``, a strategy of them, or ``None`` for
            :func:`batch_sizes` (0-3 dims of 0-4).

    Keyword Args:
        max_depth (int): nesting levels below the root.
        max_keys (int): keys per level.
        min_keys (int): keys at the root (nested levels have at least one key).
        dtypes: dtypes of the tensor leaves.
        feature_dims (int): most trailing (non-batch) dims of a tensor leaf.
        non_tensor (bool or strategy): include ``NonTensorData`` leaves (``True``: short
            strings and ints; a strategy: its values; ``False``: none).
        nested_extra_dims (bool): nested TensorDicts may have one batch dim more than
            their parent.
    """

    if batch_size is None:
        batch_size = batch_sizes()
    if isinstance(batch_size, st.SearchStrategy):
        batch_size = draw(batch_size)
    batch_size = torch.Size(batch_size)  # type: ignore[arg-type]
    if non_tensor is True:
        values: st.SearchStrategy[Any] | None = _non_tensor_values()
    elif non_tensor is False:
        values = None
    else:
        values = non_tensor
    source = draw(_td_source(batch_size, max_depth, max_keys, dtypes, feature_dims, values,
                             nested_extra_dims, min_keys))
    return TensorDict(source, batch_size=batch_size)


# ---------------------------------------------------------------------- index expressions
@st.composite
def index_expressions(draw: Any, batch_size: Sequence[int], *, advanced: bool = True) -> Any:
    """A random index valid for a tensor whose leading dims are ``batch_size``.

    Mixes ints, slices (negative bounds, steps > 1), ``None``, one ``Ellipsis``, and,
    with ``advanced``, at most one advanced index (a bool mask over one or more dims,
    a ``long`` tensor or a list of ints, possibly with repeats). Returns a single
    index or a tuple.
    """
    shape = list(batch_size)
    parts: list = []
    dim = 0
    used_ellipsis = False
    used_advanced = False
    n_parts = draw(st.integers(1, len(shape) + 2))
    for _ in range(n_parts):
        choices = ["none"]
        if not used_ellipsis:
            choices.append("ellipsis")
        if dim < len(shape):
            choices += ["slice", "slice"]
            if shape[dim] > 0:
                choices.append("int")
            if advanced and not used_advanced:
                choices += ["mask", "tensor", "list"]
        kind = draw(st.sampled_from(choices))
        if kind == "none":
            parts.append(None)
        elif kind == "ellipsis":
            parts.append(Ellipsis)
            used_ellipsis = True
            # the dims the Ellipsis stands for are consumed from the end: index the rest
            # as if the ellipsis took everything we do not index afterwards
            rest = draw(st.integers(0, len(shape) - dim))
            dim = len(shape) - rest
        elif kind == "int":
            n = shape[dim]
            parts.append(draw(st.integers(-n, n - 1)))
            dim += 1
        elif kind == "slice":
            n = shape[dim]
            start = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            stop = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            step = draw(st.one_of(st.none(), st.integers(1, 3)))
            parts.append(slice(start, stop, step))
            dim += 1
        elif kind == "mask":
            span = draw(st.integers(1, len(shape) - dim))
            mshape = shape[dim : dim + span]
            seed = draw(st.integers(0, 2**31 - 1))
            parts.append(_make_tensor(mshape, torch.bool, seed))
            dim += span
            used_advanced = True
        else:
            n = shape[dim]
            if n == 0:
                values: list = []
            else:
                values = draw(st.lists(st.integers(-n, n - 1), max_size=4))
            parts.append(torch.tensor(values, dtype=torch.long) if kind == "tensor" else values)
            dim += 1
            used_advanced = True
        if dim >= len(shape) and used_ellipsis and draw(st.booleans()):
            break
    if used_ellipsis:
        # what follows an Ellipsis is right-aligned: cover every dim it left to us
        parts.extend([slice(None)] * (len(shape) - dim))
    # a list alone is not the same as a tuple (torch reads [1, 2] as one advanced index)
    if len(parts) == 1 and not isinstance(parts[0], list) and draw(st.booleans()):
        return parts[0]
    return tuple(parts)


def expand_index(idx: Any, ndim: int) -> tuple:
    """``idx`` as a tuple with its ``Ellipsis`` spelled out as ``slice(None)`` over ``ndim`` dims.

    The result indexes only the first ``ndim`` dims, whatever the tensor's rank: the
    leaf-by-leaf reference of ``td[idx]`` is ``leaf[expand_index(idx, td.ndim)]``.
    """
    parts = idx if isinstance(idx, tuple) else (idx,)
    used = 0
    for p in parts:
        if p is None or p is Ellipsis:
            continue
        if isinstance(p, torch.Tensor) and p.dtype is torch.bool:
            used += max(p.ndim, 1)
        else:
            used += 1
    out: list = []
    for p in parts:
        if p is Ellipsis:
            out.extend([slice(None)] * (ndim - used))
        else:
            out.append(p)
    return tuple(out)


# ---------------------------------------------------------------------- shape ops
class ShapeOp:
    """One batch-dim shape op: ``td_fn(td)`` and its leaf reference ``leaf_fn(leaf, nd)``.

    ``nd`` is the number of batch dims of the TensorDict the op is applied to; a leaf
    (at any depth) has those as its leading dims. ``new_batch`` is the batch size after.
    """

    def __init__(self, name: str, td_fn: Callable, leaf_fn: Callable, new_batch: torch.Size) -> None:
        self.name = name
        self.td_fn = td_fn
        self.leaf_fn = leaf_fn
        self.new_batch = new_batch

    def __repr__(self) -> str:
        return self.name


def _factor_pairs(n: int) -> list[tuple[int, int]]:
    return [(a, n // a) for a in range(1, n + 1) if n % a == 0] if n > 0 else [(0, 1), (1, 0)]


@st.composite
def _shape_op(draw: Any, bs: torch.Size) -> ShapeOp:
    nd = len(bs)
    names = ["unsqueeze", "reshape", "flatten_all"]
    if nd >= 1:
        names += ["permute", "flip", "unflatten", "expand_new", "repeat", "unbind", "narrow"]
    if nd >= 2:
        names += ["transpose", "flatten", "movedim"]
    if any(s == 1 for s in bs):
        names += ["squeeze_dim", "squeeze_all", "expand_one"]
    name = draw(st.sampled_from(names))

    def rest(leaf: torch.Tensor, k: int) -> tuple:
        return tuple(leaf.shape[k:])

    if name == "unsqueeze":
        d = draw(st.integers(-nd - 1, nd))
        pos = d if d >= 0 else d + nd + 1
        return ShapeOp(f"unsqueeze({d})", lambda td: td.unsqueeze(d), lambda x, k: x.unsqueeze(pos),
                       torch.Size((*bs[:pos], 1, *bs[pos:])))
    if name == "reshape":
        numel = math.prod(bs)
        a, b = draw(st.sampled_from(_factor_pairs(numel)))
        new = torch.Size((a, b))
        use_minus = draw(st.booleans()) and numel > 0
        arg = (a, -1) if use_minus else (a, b)
        return ShapeOp(f"reshape{arg}", lambda td: td.reshape(*arg), lambda x, k: x.reshape(*new, *rest(x, k)), new)
    if name == "flatten_all":
        new = torch.Size((math.prod(bs),))
        return ShapeOp("reshape(-1)", lambda td: td.reshape(-1), lambda x, k: x.reshape(*new, *rest(x, k)), new)
    if name == "permute":
        perm = draw(st.permutations(range(nd)))
        return ShapeOp(f"permute{tuple(perm)}", lambda td: td.permute(*perm),
                       lambda x, k: x.permute(*perm, *range(k, x.ndim)), torch.Size(bs[p] for p in perm))
    if name == "flip":
        dims = draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True))
        return ShapeOp(f"flip({dims})", lambda td: td.flip(dims), lambda x, k: x.flip(dims), bs)
    if name == "unflatten":
        d = draw(st.integers(0, nd - 1))
        a, b = draw(st.sampled_from(_factor_pairs(bs[d])))
        new = torch.Size((*bs[:d], a, b, *bs[d + 1 :]))
        return ShapeOp(f"unflatten({d}, ({a}, {b}))", lambda td: td.unflatten(d, (a, b)),
                       lambda x, k: x.unflatten(d, (a, b)), new)
    if name == "expand_new":
        n = draw(st.integers(1, 3))
        new = torch.Size((n, *bs))
        return ShapeOp(f"expand{tuple(new)}", lambda td: td.expand(*new),
                       lambda x, k: x.expand(*new, *rest(x, k)), new)
    if name == "expand_one":
        d = draw(st.sampled_from([i for i, s in enumerate(bs) if s == 1]))
        n = draw(st.integers(0, 3))
        new = torch.Size((*bs[:d], n, *bs[d + 1 :]))
        return ShapeOp(f"expand{tuple(new)}", lambda td: td.expand(new),
                       lambda x, k: x.expand(*new, *rest(x, k)), new)
    if name == "repeat":
        reps = draw(st.lists(st.integers(1, 2), min_size=nd, max_size=nd))
        new = torch.Size(s * r for s, r in zip(bs, reps))
        return ShapeOp(f"repeat{tuple(reps)}", lambda td: td.repeat(*reps),
                       lambda x, k: x.repeat(*reps, *([1] * (x.ndim - k))), new)
    if name == "unbind":
        d = draw(st.integers(0, nd - 1))
        if bs[d] == 0:
            return ShapeOp(f"narrow({d}, 0, 0)", lambda td: td.narrow(d, 0, 0), lambda x, k: x.narrow(d, 0, 0), bs)
        i = draw(st.integers(0, bs[d] - 1))
        new = torch.Size((*bs[:d], *bs[d + 1 :]))
        return ShapeOp(f"unbind({d})[{i}]", lambda td: td.unbind(d)[i], lambda x, k: x.unbind(d)[i], new)
    if name == "narrow":
        d = draw(st.integers(0, nd - 1))
        start = draw(st.integers(0, bs[d]))
        length = draw(st.integers(0, bs[d] - start))
        new = torch.Size((*bs[:d], length, *bs[d + 1 :]))
        return ShapeOp(f"narrow({d}, {start}, {length})", lambda td: td.narrow(d, start, length),
                       lambda x, k: x.narrow(d, start, length), new)
    if name == "transpose":
        a = draw(st.integers(-nd, nd - 1))
        b = draw(st.integers(-nd, nd - 1))
        pa, pb = a % nd, b % nd
        swapped = list(bs)
        swapped[pa], swapped[pb] = swapped[pb], swapped[pa]
        return ShapeOp(f"transpose({a}, {b})", lambda td: td.transpose(a, b),
                       lambda x, k: x.transpose(pa, pb), torch.Size(swapped))
    if name == "movedim":
        a = draw(st.integers(0, nd - 1))
        b = draw(st.integers(0, nd - 1))
        order = list(range(nd))
        order.insert(b, order.pop(a))
        return ShapeOp(f"movedim({a}, {b})", lambda td: td.movedim(a, b),
                       lambda x, k: x.movedim(a, b), torch.Size(bs[i] for i in order))
    if name == "flatten":
        a = draw(st.integers(0, nd - 2))
        b = draw(st.integers(a + 1, nd - 1))
        new = torch.Size((*bs[:a], math.prod(bs[a : b + 1]), *bs[b + 1 :]))
        return ShapeOp(f"flatten({a}, {b})", lambda td: td.flatten(a, b), lambda x, k: x.flatten(a, b), new)
    if name == "squeeze_dim":
        d = draw(st.sampled_from([i for i, s in enumerate(bs) if s == 1]))
        new = torch.Size((*bs[:d], *bs[d + 1 :]))
        return ShapeOp(f"squeeze({d})", lambda td: td.squeeze(d), lambda x, k: x.squeeze(d), new)
    # squeeze_all: every batch dim of size 1 (feature dims are left alone)
    ones = [i for i, s in enumerate(bs) if s == 1]
    new = torch.Size(s for s in bs if s != 1)
    return ShapeOp("squeeze()", lambda td: td.squeeze(),
                   lambda x, k: x.squeeze(ones) if ones else x, new)


@st.composite
def shape_op_sequences(draw: Any, batch_size: torch.Size, max_ops: int = 4) -> list[ShapeOp]:
    """1..``max_ops`` shape ops, each valid for the batch size the previous one leaves."""
    ops = []
    bs = torch.Size(batch_size)
    for _ in range(draw(st.integers(1, max_ops))):
        op = draw(_shape_op(bs))
        ops.append(op)
        bs = op.new_batch
    return ops


# ---------------------------------------------------------------------- comparison
def leaf_items(td: Any) -> list[tuple[tuple, Any]]:
    """``[(nested key tuple, raw leaf)]`` over every leaf at every depth, in key order."""
    out: list[tuple[tuple, Any]] = []
    for key, value in td._items_raw():
        if isinstance(value, TensorDictBase):
            out.extend(((key, *k), v) for k, v in leaf_items(value))
        else:
            out.append(((key,), value))
    return out


def assert_td_equal(a: Any, b: Any, *, check_type: bool = True, check_device: bool = True,
                    check_nested_batch: bool = True, path: tuple = ()) -> None:
    """Asserts that two TensorDicts hold the same tree: keys, batch sizes, dtypes, values.

    Tensors must match exactly (dtype, shape, values, NaN in the same places);
    non-tensor leaves must have the same data and batch size.

    Raises:
        AssertionError: naming the first differing key.
    """

    where = ".".join(path) or "<root>"
    if check_type:
        assert type(a) is type(b), f"{where}: type {type(a).__name__} != {type(b).__name__}"
    assert a.batch_size == b.batch_size, f"{where}: batch_size {a.batch_size} != {b.batch_size}"
    if check_device:
        assert a.device == b.device, f"{where}: device {a.device} != {b.device}"
    ka, kb = sorted(a.keys()), sorted(b.keys())
    assert ka == kb, f"{where}: keys {ka} != {kb}"
    for key in ka:
        va, vb = a._get_raw(key, None), b._get_raw(key, None)
        sub = (*path, key)
        name = ".".join(sub)
        if isinstance(va, TensorDictBase) or isinstance(vb, TensorDictBase):
            assert isinstance(va, TensorDictBase) and isinstance(vb, TensorDictBase), f"{name}: {type(va)} vs {type(vb)}"
            if not check_nested_batch:
                assert va.batch_size[: a.ndim] == vb.batch_size[: b.ndim]
            assert_td_equal(va, vb, check_type=check_type, check_device=check_device,
                            check_nested_batch=check_nested_batch, path=sub)
        elif isinstance(va, torch.Tensor):
            assert isinstance(vb, torch.Tensor), f"{name}: tensor vs {type(vb).__name__}"
            assert va.dtype == vb.dtype, f"{name}: dtype {va.dtype} != {vb.dtype}"
            assert va.shape == vb.shape, f"{name}: shape {tuple(va.shape)} != {tuple(vb.shape)}"
            ca, cb = va.detach().cpu(), vb.detach().cpu()
            if ca.is_floating_point() or ca.is_complex():
                assert torch.equal(ca.isnan(), cb.isnan()), f"{name}: NaN positions differ"
                ca, cb = ca.nan_to_num(0.0), cb.nan_to_num(0.0)
            assert torch.equal(ca, cb), f"{name}: values differ"
        else:
            assert isinstance(va, (NonTensorData, NonTensorStack)) == isinstance(vb, (NonTensorData, NonTensorStack)), (
                f"{name}: {type(va).__name__} vs {type(vb).__name__}"
            )
            if isinstance(va, (NonTensorData, NonTensorStack)):
                assert va.batch_size == vb.batch_size, f"{name}: non-tensor batch_size {va.batch_size} != {vb.batch_size}"
                assert va.tolist() == vb.tolist(), f"{name}: non-tensor data {va.tolist()!r} != {vb.tolist()!r}"
            else:
                assert va == vb, f"{name}: {va!r} != {vb!r}"
