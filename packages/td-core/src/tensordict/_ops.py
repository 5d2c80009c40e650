"""Leaf-wise arithmetic, pointwise math, masking and ``where`` (``MathMixin``).

Every op flattens the TensorDict into the list of its tensor leaves
(``_apply._flatten_tensors``), runs one ``torch._foreach_*`` kernel on the whole
list when torch has one (``td + 1`` is ``torch._foreach_add(leaves, 1)``), and
rebuilds the tree around the results (the engine is in ``_ops_foreach.py``).
Non-tensor entries pass through unchanged. Ops without a foreach kernel (``//``,
``%``, ``isnan``, ...) loop over the same list. Inside ``torch.vmap`` / ``torch.func`` transforms (which have no batching rule for
the foreach kernels) every op loops.

The other operand of a binary op may be a number, a tensor or another TensorDict:

* a TensorDict is matched key by key (same keys, or ``default=``);
* a tensor whose shape is the start of a leaf's shape (typically ``batch_size``) is
  aligned on the left, as :func:`tensordict.utils.expand_as_right` does, so a
  per-sample tensor scales every leaf; any other tensor broadcasts as in torch.

Reductions live in ``_reductions.py`` (``ReductionMixin``, a base of ``MathMixin``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import torch

from tensordict import _classes
from tensordict._apply import UnionDefault
from tensordict._keys import NO_DEFAULT
from tensordict._ops_foreach import (
    _BINARY,
    _UNARY_FOREACH,
    _UNARY_LOOP,
    _align,
    _as_td,
    _binary,
    _binary_,
    _check_mask,
    _checked,
    _is_td,
    _loop,
    _loop_,
    _ternary,
    _unary,
    _unary_,
    _with_default,
)
from tensordict._ops_generated import GeneratedOpsMixin
from tensordict._reductions import ReductionMixin, _torch_reduction_table
from tensordict._shape_context import _become, _refuse_lazy_inplace

if TYPE_CHECKING:
    from typing_extensions import Self

    from tensordict._base import TensorDictBase

__all__ = ["MathMixin"]

_Tensor = torch.Tensor


def _doc_unary(name: str, inplace: bool) -> str:
    if inplace:
        return f"""In-place :meth:`{name}` of every tensor leaf (``torch._foreach_{name}_``).

        Returns:
            ``self``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({{"a": torch.rand(3) + 0.5}}, [3])
            >>> expected = torch.{name}(td["a"])
            >>> torch.allclose(td.{name}_()["a"], expected, equal_nan=True)
            True
        """
    return f"""``torch.{name}`` of every tensor leaf, as one ``torch._foreach_{name}`` call.

        Non-tensor entries pass through unchanged; nested TensorDicts are walked.

        Returns:
            a new TensorDict with the structure and batch size of ``self``; each leaf
            has the shape of the input leaf and the dtype ``torch.{name}`` gives.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({{"a": torch.rand(3) + 0.5, "b": {{"c": torch.rand(3, 2) + 0.5}}}}, [3])
            >>> torch.allclose(td.{name}()["b", "c"], torch.{name}(td["b", "c"]), equal_nan=True)
            True
        """


def _example_values(name: str) -> tuple[str, str]:
    """``(leaf, operand)`` expressions for the generated doctests of op ``name``."""
    if name.startswith("bitwise"):
        return "torch.tensor([[1], [6]])", "3"
    if name.startswith("logical"):
        return "torch.tensor([[True], [False]])", "True"
    if name in ("logit", "erfinv"):
        return "torch.tensor([[0.25], [0.5]])", "0.5"
    return "torch.tensor([[2.0], [3.0]])", "2.0"


def _doc_loop(name: str, inplace: bool) -> str:
    leaf, _ = _example_values(name)
    call = f"{name}_" if inplace else name
    what = f"In-place ``{name}``" if inplace else f"``torch.{name}``"
    ret = (
        "``self``" if inplace else "a new TensorDict with the structure and batch size of ``self``"
    )
    return f"""{what} of every tensor leaf (non-tensor entries pass through).

        Returns:
            {ret}.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({{"a": {leaf}}}, [2])
            >>> expected = torch.{name}(td["a"])
            >>> torch.equal(td.{call}()["a"], expected)
            True
        """


def _doc_binary(name: str, inplace: bool) -> str:
    leaf, arg = _example_values(name)
    fe = (
        " through ``torch._foreach_" + name + ("_" if inplace else "") + "``"
        if _BINARY[name][0]
        else ""
    )
    ret = (
        "``self``" if inplace else "a new TensorDict with the structure and batch size of ``self``"
    )
    return f"""``{name}`` of every tensor leaf with ``other``{" in place" if inplace else ""}{fe}.

        Args:
            other (Number, Tensor or TensorDictBase): a number; a tensor (one whose
                shape is the start of the leaf shapes, e.g. ``batch_size``, is aligned
                on the left; any other broadcasts as in torch); or a TensorDict with
                the same keys, matched key by key.

        Returns:
            {ret}.

        Raises:
            KeyError: ``other`` is a TensorDict whose keys differ.
            RuntimeError: shapes do not broadcast (or, in place, the result dtype
                cannot be cast to a leaf's dtype).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({{"a": {leaf}, "b": {{"c": {leaf}}}}}, [2])
            >>> expected = torch.{name}(td["b", "c"], torch.tensor({arg}))
            >>> torch.equal(td.{name}{"_" if inplace else ""}({arg})["b", "c"], expected)
            True
        """


class MathMixin(GeneratedOpsMixin, ReductionMixin):
    """Mixed into TensorDictBase: leaf-wise arithmetic, pointwise math, masking and
    (through ``ReductionMixin``) reductions."""

    # ------------------------------------------------------------ arithmetic with keywords
    def add(self, other: Any, *, alpha: Any = None, default: Any = None) -> TensorDictBase:
        """``self + alpha * other`` on every tensor leaf (``torch._foreach_add``).

        Args:
            other (Number, Tensor or TensorDictBase): see :meth:`mul`.

        Keyword Args:
            alpha (Number, optional): multiplier of ``other``.
            default (Any, optional): with a TensorDict ``other``, ``"intersection"``
                uses only the shared keys; any other value stands for the entries one
                side lacks. ``None`` (default) requires the same keys.

        Returns:
            a new TensorDict with the structure and batch size of ``self``.

        Raises:
            KeyError: the keys of ``other`` differ and no ``default`` is given.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(2)}, [2])
            >>> td.add(td, alpha=2)["a"]
            tensor([3., 3.])
            >>> (td + torch.tensor([1.0, 2.0]))["a"]
            tensor([2., 3.])
        """
        if default is not None and _is_td(other):
            return _with_default(
                self, other, default, lambda x, y: torch.add(x, y, alpha=alpha or 1)
            )
        return _checked(_binary(self, other, "add", alpha), other, "add")

    def sub(self, other: Any, *, alpha: Any = None, default: Any = None) -> TensorDictBase:
        """``self - alpha * other`` on every tensor leaf (``torch._foreach_sub``).

        Keyword Args:
            alpha (Number, optional): multiplier of ``other``.
            default (Any, optional): see :meth:`add`.

        Returns:
            a new TensorDict with the structure and batch size of ``self``.

        Raises:
            KeyError: the keys of ``other`` differ and no ``default`` is given.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(2)}, [2])
            >>> td.sub(1.0)["a"]
            tensor([0., 0.])
        """
        if default is not None and _is_td(other):
            return _with_default(
                self, other, default, lambda x, y: torch.sub(x, y, alpha=alpha or 1)
            )
        return _checked(_binary(self, other, "sub", alpha), other, "sub")

    def rsub(self, other: Any, *, alpha: Any = None, default: Any = None) -> TensorDictBase:
        """``other - alpha * self`` on every tensor leaf (``other - td`` without ``alpha``).

        Args:
            other (TensorDictBase, Tensor or Number): what the leaves are subtracted from.

        Keyword Args:
            alpha (Number, optional): multiplier of the leaves.
            default (Any, optional): see :meth:`add`.

        Returns:
            a new TensorDict with the structure and batch size of ``self``.

        Raises:
            KeyError: the keys of ``other`` differ and no ``default`` is given.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict(a=torch.full((2,), 10.0), batch_size=[2])
            >>> td.rsub(TensorDict(a=torch.ones(2), batch_size=[2]), alpha=2)["a"]
            tensor([-19., -19.])
        """
        if default is not None and _is_td(other):
            return _with_default(self, other, default, lambda x, y: torch.sub(y, x, alpha=1 if alpha is None else alpha))
        source = self if alpha is None else self.mul(alpha)
        return _checked(_binary(source, other, "sub", reflected=True), other, "rsub")

    def add_(self, other: Any, *, alpha: Any = None) -> Self:
        """In-place :meth:`add` (``torch._foreach_add_``); returns ``self``.

        Args:
            other (Number, Tensor or TensorDictBase): a number, a tensor (aligned on the
                left when its shape starts the leaf shapes) or a TensorDict with the
                same keys.

        Keyword Args:
            alpha (Number, optional): multiplier of ``other``.

        Returns:
            ``self``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(2)}, [2])
            >>> td.add_(1)["a"]
            tensor([2., 2.])
        """
        return _binary_(self, other, "add", alpha)

    def sub_(self, other: Any, *, alpha: Any = None) -> Self:
        """In-place :meth:`sub` (``torch._foreach_sub_``); returns ``self``.

        Args:
            other (Number, Tensor or TensorDictBase): a number, a tensor (aligned on the
                left when its shape starts the leaf shapes) or a TensorDict with the
                same keys.

        Keyword Args:
            alpha (Number, optional): multiplier of ``other``.

        Returns:
            ``self``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(2)}, [2])
            >>> td.sub_(1)["a"]
            tensor([0., 0.])
        """
        return _binary_(self, other, "sub", alpha)

    def mul(self, other: Any, *, default: Any = None) -> TensorDictBase:
        """``self * other`` on every tensor leaf (``torch._foreach_mul``).

        Args:
            other (Number, Tensor or TensorDictBase): a number; a tensor (one whose
                shape is the start of the leaf shapes, e.g. ``batch_size``, is aligned
                on the left; any other broadcasts as in torch); or a TensorDict with the
                same keys, matched key by key.

        Keyword Args:
            default (Any, optional): see :meth:`add`.

        Returns:
            a new TensorDict with the structure and batch size of ``self``.

        Raises:
            KeyError: the keys of ``other`` differ and no ``default`` is given.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(2, 3)}, [2])
            >>> (td * torch.tensor([2.0, 3.0]))["a"]
            tensor([[2., 2., 2.],
                    [3., 3., 3.]])
        """
        if default is not None and _is_td(other):
            return _with_default(self, other, default, torch.mul)
        return _checked(_binary(self, other, "mul"), other, "mul")

    def div(self, other: Any, *, default: Any = None) -> TensorDictBase:
        """``self / other`` (true division) on every tensor leaf (``torch._foreach_div``).

        Keyword Args:
            default (Any, optional): see :meth:`add`.

        Returns:
            a new TensorDict with the structure and batch size of ``self``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([1, 2])}, [2])
            >>> td.div(2)["a"]
            tensor([0.5000, 1.0000])
        """
        if default is not None and _is_td(other):
            return _with_default(self, other, default, torch.div)
        return _checked(_binary(self, other, "div"), other, "div")

    def pow(self, other: Any, *, default: Any = None) -> TensorDictBase:
        """``self ** other`` on every tensor leaf (``torch._foreach_pow``).

        Keyword Args:
            default (Any, optional): see :meth:`add`.

        Returns:
            a new TensorDict with the structure and batch size of ``self``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([2.0, 3.0])}, [2])
            >>> td.pow(2)["a"]
            tensor([4., 9.])
        """
        if default is not None and _is_td(other):
            return _with_default(self, other, default, torch.pow)
        return _checked(_binary(self, other, "pow"), other, "pow")

    # ------------------------------------------------------------ dunders
    def __add__(self, other: Any) -> Any:
        return _binary(self, other, "add")

    def __radd__(self, other: Any) -> Any:
        return _binary(self, other, "add", reflected=True)

    def __iadd__(self, other: Any) -> Any:
        return _binary_(self, other, "add")

    def __sub__(self, other: Any) -> Any:
        return _binary(self, other, "sub")

    def __rsub__(self, other: Any) -> Any:
        return _binary(self, other, "sub", reflected=True)

    def __isub__(self, other: Any) -> Any:
        return _binary_(self, other, "sub")

    def __mul__(self, other: Any) -> Any:
        return _binary(self, other, "mul")

    def __rmul__(self, other: Any) -> Any:
        return _binary(self, other, "mul", reflected=True)

    def __imul__(self, other: Any) -> Any:
        return _binary_(self, other, "mul")

    def __truediv__(self, other: Any) -> Any:
        return _binary(self, other, "div")

    def __rtruediv__(self, other: Any) -> Any:
        return _binary(self, other, "div", reflected=True)

    def __itruediv__(self, other: Any) -> Any:
        return _binary_(self, other, "div")

    def __pow__(self, other: Any) -> Any:
        return _binary(self, other, "pow")

    def __rpow__(self, other: Any) -> Any:
        return _binary(self, other, "pow", reflected=True)

    def __ipow__(self, other: Any) -> Any:
        return _binary_(self, other, "pow")

    def __floordiv__(self, other: Any) -> Any:
        return _binary(self, other, "floor_divide")

    def __rfloordiv__(self, other: Any) -> Any:
        return _binary(self, other, "floor_divide", reflected=True)

    def __ifloordiv__(self, other: Any) -> Any:
        return _binary_(self, other, "floor_divide")

    def __mod__(self, other: Any) -> Any:
        return _binary(self, other, "remainder")

    def __rmod__(self, other: Any) -> Any:
        return _binary(self, other, "remainder", reflected=True)

    def __imod__(self, other: Any) -> Any:
        return _binary_(self, other, "remainder")

    def __and__(self, other: Any) -> Any:
        return _binary(self, other, "bitwise_and")

    def __rand__(self, other: Any) -> Any:
        return _binary(self, other, "bitwise_and", reflected=True)

    def __iand__(self, other: Any) -> Any:
        return _binary_(self, other, "bitwise_and")

    def __or__(self, other: Any) -> Any:
        return _binary(self, other, "bitwise_or")

    def __ror__(self, other: Any) -> Any:
        return _binary(self, other, "bitwise_or", reflected=True)

    def __ior__(self, other: Any) -> Any:
        return _binary_(self, other, "bitwise_or")

    def __xor__(self, other: Any) -> Any:
        return _binary(self, other, "bitwise_xor")

    def __rxor__(self, other: Any) -> Any:
        return _binary(self, other, "bitwise_xor", reflected=True)

    def __ixor__(self, other: Any) -> Any:
        return _binary_(self, other, "bitwise_xor")

    def __neg__(self) -> Any:
        return _unary(self, "neg")

    def __abs__(self) -> Any:
        return _unary(self, "abs")

    def __pos__(self) -> Any:
        return self

    def __invert__(self) -> Any:
        return _loop(self, torch.bitwise_not)

    # ------------------------------------------------------------ several-operand math
    def clamp(self, min: Any = None, max: Any = None) -> TensorDictBase:  # noqa: A002
        """Clamps every tensor leaf to ``[min, max]`` (``_foreach_clamp_min/max``).

        Args:
            min (Number, Tensor or TensorDictBase, optional): lower bound.
            max (Number, Tensor or TensorDictBase, optional): upper bound.

        Returns:
            a new TensorDict with the structure and batch size of ``self``.

        Raises:
            ValueError: neither ``min`` nor ``max`` is given.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([-2.0, 0.5, 3.0])}, [3])
            >>> td.clamp(-1, 1)["a"]
            tensor([-1.0000,  0.5000,  1.0000])
        """
        if min is None and max is None:
            msg = "clamp: at least one of `min` and `max` must be given."
            raise ValueError(msg)
        out = self if min is None else self.clamp_min(min)
        if max is not None:
            out = out.clamp_max(max) if min is None else _binary_(out, max, "clamp_max")
        return out  # type: ignore[return-value]

    def clamp_(self, min: Any = None, max: Any = None) -> Self:  # noqa: A002
        """In-place :meth:`clamp`; returns ``self``.

        Args:
            min (Number, Tensor or TensorDictBase, optional): the lower bound.
            max (Number, Tensor or TensorDictBase, optional): the upper bound.

        Returns:
            ``self``.

        Raises:
            ValueError: neither ``min`` nor ``max`` is given.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([-2.0, 3.0])}, [2])
            >>> td.clamp_(max=0)["a"]
            tensor([-2.,  0.])
        """
        if min is None and max is None:
            msg = "clamp_: at least one of `min` and `max` must be given."
            raise ValueError(msg)
        if min is not None:
            _binary_(self, min, "clamp_min")
        if max is not None:
            _binary_(self, max, "clamp_max")
        return self

    def lerp(self, end: Any, weight: Any) -> TensorDictBase:
        """``self + weight * (end - self)`` on every tensor leaf (``torch._foreach_lerp``).

        Args:
            end (Tensor or TensorDictBase): the end points.
            weight (Number, Tensor or TensorDictBase): the interpolation weight.

        Returns:
            a new TensorDict with the structure and batch size of ``self``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2)}, [2])
            >>> td.lerp(td + 4, 0.25)["a"]
            tensor([1., 1.])
        """
        return _ternary(self, "lerp", end, weight, inplace=False)

    def lerp_(self, end: Any, weight: Any) -> Self:
        """In-place :meth:`lerp` (``torch._foreach_lerp_``); returns ``self``.

        Args:
            end (Tensor or TensorDictBase): the end points.
            weight (Number, Tensor or TensorDictBase): the interpolation weight.

        Returns:
            ``self``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2)}, [2])
            >>> td.lerp_(td + 2, 0.5)["a"]
            tensor([1., 1.])
        """
        return _ternary(self, "lerp", end, weight, inplace=True)

    def addcmul(self, tensor1: Any, tensor2: Any, *, value: Any = 1) -> TensorDictBase:
        """``self + value * tensor1 * tensor2`` on every leaf (``torch._foreach_addcmul``).

        Args:
            tensor1, tensor2 (Tensor or TensorDictBase): the factors.

        Keyword Args:
            value (Number): multiplier of the product. Defaults to 1.

        Returns:
            a new TensorDict with the structure and batch size of ``self``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(2)}, [2])
            >>> td.addcmul(td, td, value=2)["a"]
            tensor([3., 3.])
        """
        return _ternary(self, "addcmul", tensor1, tensor2, inplace=False, value=value)

    def addcmul_(self, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Self:
        """In-place :meth:`addcmul` (``torch._foreach_addcmul_``); returns ``self``.

        Args:
            tensor1, tensor2 (Tensor or TensorDictBase): the factors.

        Keyword Args:
            value (Number): multiplier of the product. Defaults to 1.

        Returns:
            ``self``.
        """
        return _ternary(self, "addcmul", tensor1, tensor2, inplace=True, value=value)

    def addcdiv(self, tensor1: Any, tensor2: Any, *, value: Any = 1) -> TensorDictBase:
        """``self + value * tensor1 / tensor2`` on every leaf (``torch._foreach_addcdiv``).

        Args:
            tensor1, tensor2 (Tensor or TensorDictBase): numerator and denominator.

        Keyword Args:
            value (Number): multiplier of the quotient. Defaults to 1.

        Returns:
            a new TensorDict with the structure and batch size of ``self``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(2)}, [2])
            >>> td.addcdiv(td, td * 4)["a"]
            tensor([1.2500, 1.2500])
        """
        return _ternary(self, "addcdiv", tensor1, tensor2, inplace=False, value=value)

    def addcdiv_(self, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Self:
        """In-place :meth:`addcdiv` (``torch._foreach_addcdiv_``); returns ``self``.

        Args:
            tensor1, tensor2 (Tensor or TensorDictBase): numerator and denominator.

        Keyword Args:
            value (Number): multiplier of the quotient. Defaults to 1.

        Returns:
            ``self``.
        """
        return _ternary(self, "addcdiv", tensor1, tensor2, inplace=True, value=value)

    def round(self, decimals: int = 0) -> TensorDictBase:
        """Rounds every tensor leaf (``torch._foreach_round``; ``decimals`` loops).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([0.4, 1.6])}, [2])
            >>> td.round()["a"]
            tensor([0., 2.])
        """
        if decimals:
            return _loop(self, lambda x: torch.round(x, decimals=decimals))
        return _unary(self, "round")

    def round_(self, decimals: int = 0) -> Self:
        """In-place :meth:`round`; returns ``self``."""
        if decimals:
            return _loop_(self, lambda x: x.round_(decimals=decimals))
        return _unary_(self, "round")

    def nan_to_num(
        self, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
    ) -> TensorDictBase:
        """``torch.nan_to_num`` of every tensor leaf.

        Args:
            nan (float, optional): replaces NaN. Defaults to ``0.0``.
            posinf (float, optional): replaces +inf. Defaults to the dtype's largest value.
            neginf (float, optional): replaces -inf. Defaults to the dtype's smallest value.

        Returns:
            a new TensorDict with the structure and batch size of ``self``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict({"a": torch.tensor([float("nan"), 1.0])}, [2]).nan_to_num()["a"]
            tensor([0., 1.])
        """
        return _loop(self, lambda x: torch.nan_to_num(x, nan, posinf, neginf))

    def nan_to_num_(
        self, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
    ) -> Self:
        """In-place :meth:`nan_to_num`; returns ``self``.

        Args:
            nan (float, optional): replaces NaN. Defaults to ``0.0``.
            posinf (float, optional): replaces +inf. Defaults to the dtype's largest value.
            neginf (float, optional): replaces -inf. Defaults to the dtype's smallest value.

        Returns:
            ``self``.
        """
        return _loop_(self, lambda x: x.nan_to_num_(nan, posinf, neginf))

    # ------------------------------------------------------------ masking and where
    def masked_fill(self, mask: Any, value: Any) -> TensorDictBase:
        """Writes ``value`` where ``mask`` is ``True``, in a copy of every tensor leaf.

        Args:
            mask (Tensor): a bool tensor of shape ``batch_size`` (or its leading dims),
                aligned on the left of every leaf.
            value (Number or Tensor): the fill value.

        Returns:
            a new TensorDict with the structure and batch size of ``self``.

        Raises:
            RuntimeError: ``mask``'s shape is not the start of ``batch_size``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2, 3)}, [2])
            >>> td.masked_fill(torch.tensor([True, False]), 1.0)["a"]
            tensor([[1., 1., 1.],
                    [0., 0., 0.]])
        """
        mask = _check_mask(self, mask, "masked_fill")
        return _loop(self, lambda x: x.masked_fill(_align(mask, x), value))

    def masked_fill_(self, mask: Any, value: Any) -> Self:
        """In-place :meth:`masked_fill`; returns ``self``.

        Args:
            mask (Tensor): a bool tensor of shape ``batch_size`` (or its leading dims).
            value (Number or Tensor): the fill value.

        Returns:
            ``self``.

        Raises:
            RuntimeError: ``mask``'s shape is not the start of ``batch_size``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2)}, [2])
            >>> td.masked_fill_(torch.tensor([False, True]), 5.0)["a"]
            tensor([0., 5.])
        """
        mask = _check_mask(self, mask, "masked_fill_")
        return _loop_(self, lambda x: x.masked_fill_(_align(mask, x), value))

    def masked_select(self, mask: Any, *, inplace: bool = False) -> TensorDictBase:
        """Keeps the batch elements where ``mask`` is ``True``.

        Args:
            mask (Tensor): a bool tensor of shape ``batch_size`` (or its leading dims).

        Keyword Args:
            inplace (bool): make this TensorDict hold the result (its identity kept) and
                return it; a lazy stack raises ``NotImplementedError``. Defaults to ``False``.

        Returns:
            a TensorDict whose masked batch dims are flattened to one dim of size
            ``mask.sum()``; each leaf is ``leaf[mask]``.

        Raises:
            RuntimeError: ``mask``'s shape is not the start of ``batch_size``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.arange(6).view(2, 3)}, [2, 3])
            >>> out = td.masked_select(torch.tensor([[True, False, True], [False, False, True]]))
            >>> out.batch_size, out["a"]
            (torch.Size([3]), tensor([0, 2, 5]))
        """
        if inplace:
            _refuse_lazy_inplace(self, "masked_select")
        mask = _check_mask(self, mask, "masked_select")
        if mask.dtype is not torch.bool:
            mask = mask.bool()
        out = self._index(mask)
        return _become(self, out) if inplace else out

    def where(
        self, condition: Any, other: Any, *, out: Any = None, pad: Any = None, update_batch_size: bool = False
    ) -> TensorDictBase:
        """Picks ``self``'s leaf where ``condition`` holds and ``other``'s elsewhere.

        Args:
            condition (Tensor): a bool tensor of shape ``batch_size`` (or its leading
                dims), aligned on the left of every leaf; or a tensor broadcasting to
                every leaf as in torch.
            other (Number, Tensor or TensorDictBase): the values where ``condition`` is
                ``False``; a TensorDict is matched key by key.

        Keyword Args:
            out (TensorDictBase, optional): written in place and returned.
            pad (Number, optional): stands for the entries that ``self`` or ``other``
                lacks. Without it the keys must match.
            update_batch_size (bool): with a lazy-stack ``out``, write the result with
                ``out.update(result, update_batch_size=True)`` (``out`` gets as many
                members as the result); a dense ``out`` keeps its batch size, as in
                tensordict 0.15.3. Defaults to ``False``.

        Returns:
            a TensorDict with the structure and batch size of ``self`` (or ``out``).

        Raises:
            KeyError: the keys differ and no ``pad`` is given.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(2, 2)}, [2])
            >>> td.where(torch.tensor([True, False]), 0.0)["a"]
            tensor([[1., 1.],
                    [0., 0.]])
            >>> torch.where(torch.tensor([False, True]), td, td * 2)["a"]
            tensor([[2., 2.],
                    [1., 1.]])
        """
        if update_batch_size and isinstance(out, _classes.LazyStackedTensorDict):
            return out.update(self.where(condition, other, pad=pad), update_batch_size=True)
        cond = condition if isinstance(condition, _Tensor) else torch.as_tensor(condition)
        if isinstance(self, _classes.LazyStackedTensorDict) and cond.ndim > self.stack_dim:
            return _lazy_where(self, cond, other, out, pad)

        def pick(x: Any, y: Any) -> _Tensor:
            ref = x if isinstance(x, _Tensor) else y
            return torch.where(_align(cond, ref), x, y)

        if _is_td(other) or isinstance(other, Mapping):
            if not _is_td(other):
                other = _as_td(other)
            default = NO_DEFAULT if pad is None else pad
            if pad is None:  # keys only ``other`` holds are missing from ``self`` too
                own = set(self.keys(True, True))
                for key in other.keys(True, True):
                    if key not in own:
                        msg = f"where: key {key!r} of `other` not found and no pad value provided."
                        raise KeyError(msg)
            try:
                union = default if default is NO_DEFAULT else UnionDefault(default)  # the keys of both
                return self.apply(pick, other, default=union, out=out)
            except KeyError as err:
                if pad is not None:
                    raise
                msg = f"where: {err.args[0] if err.args else err} (key not found and no pad value provided)."
                raise KeyError(msg) from err
        if isinstance(other, _Tensor) and other.ndim:
            return self.apply(lambda x: torch.where(_align(cond, x), x, _align(other, x)), out=out)
        return self.apply(lambda x: torch.where(_align(cond, x), x, other), out=out)

    # torch's other names for the same ops
    true_divide = div
    multiply = mul
    subtract = sub


def _lazy_where(td: Any, cond: _Tensor, other: Any, out: Any, pad: Any) -> Any:
    """``where`` on a lazy stack: each stacked TensorDict with its slice of ``cond`` (and of
    ``other``), stacked lazily again; ``out`` is filled and returned when given."""
    sd = td.stack_dim
    n = len(td.tensordicts)
    conds = cond.unbind(sd) if cond.shape[sd] == n else [cond.squeeze(sd)] * n
    if _is_td(other) and other.batch_dims > sd:
        others = other.unbind(sd)
    elif isinstance(other, _Tensor) and other.ndim > sd and other.shape[sd] == n:
        others = other.unbind(sd)
    else:
        others = [other] * n
    parts = [t.where(c, o, pad=pad) for t, c, o in zip(td.tensordicts, conds, others)]
    result = _classes.LazyStackedTensorDict._from_list(parts, sd)
    if out is None:
        return result
    out.update(result)
    return out


# ---------------------------------------------------------------------- generated methods
# The methods for these tables (and for ``_UNARY_FOREACH`` / ``_UNARY_LOOP``) are written
# into ``_ops_generated.py`` by ``tools/gen_ops.py``; add an entry here and run it.
#: binary ops with an out-of-place and an in-place method
_GENERATED_BINARY = (
    "maximum",
    "minimum",
    "clamp_min",
    "clamp_max",
    "floor_divide",
    "remainder",
    "fmod",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "logical_and",
    "logical_or",
    "logical_xor",
)
#: binary ops whose out-of-place method is hand-written above (only ``name_`` is generated)
_GENERATED_BINARY_INPLACE_ONLY = ("mul", "div", "pow")
#: unary ops of ``_UNARY_FOREACH`` written by hand above
_HAND_WRITTEN = frozenset({"round"})
#: torch's other names for generated ops (alias -> generated method)
_GENERATED_ALIASES = {"true_divide_": "div_", "negative": "neg", "absolute": "abs", "mod": "remainder"}


# ---------------------------------------------------------------------- torch.* on TensorDicts
def _torch_where(condition: Any, input: Any = None, other: Any = None, *, out: Any = None) -> Any:  # noqa: A002
    if input is None and other is None:
        msg = "torch.where(condition) with a TensorDict is not supported; pass `input` and `other`."
        raise TypeError(msg)
    if _is_td(input):
        return input.where(condition, other, out=out)
    if _is_td(other):
        cond = condition if isinstance(condition, _Tensor) else torch.as_tensor(condition)
        return other.where(~cond, input, out=out)
    msg = "torch.where: the condition cannot be a TensorDict."
    raise TypeError(msg)


_REFLECTED = {
    "add": "__radd__",
    "mul": "__rmul__",
    "multiply": "__rmul__",
    "sub": "__rsub__",
    "subtract": "__rsub__",
    "div": "__rtruediv__",
    "true_divide": "__rtruediv__",
    "pow": "__rpow__",
}


def _first_td_method(name: str) -> Callable:
    """``torch.<name>(td, ...)`` -> ``td.<name>(...)``; ``torch.add(tensor, td)`` and the
    other commutable ones go to the reflected dunder."""

    def impl(input: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A002
        kwargs.pop("out", None)
        if not _is_td(input):
            other = args[0] if args else kwargs.pop("other", None)
            reflected = _REFLECTED.get(name)
            if reflected is None or not _is_td(other) or args[1:] or kwargs:
                msg = f"torch.{name}: only the first argument may be a TensorDict here."
                raise TypeError(msg)
            return getattr(other, reflected)(input)
        return getattr(input, name)(*args, **kwargs)

    return impl


def _torch_function_table() -> dict:
    """``torch.fn -> impl`` for the ops of this module (merged by ``_torch_fn``)."""
    table: dict = {torch.where: _torch_where}
    names = [
        "add",
        "sub",
        "mul",
        "div",
        "pow",
        "maximum",
        "minimum",
        "clamp",
        "clamp_min",
        "clamp_max",
        "lerp",
        "addcmul",
        "addcdiv",
        "floor_divide",
        "remainder",
        "fmod",
        "true_divide",
        "multiply",
        "subtract",
        "negative",
        "absolute",
        "masked_fill",
        "masked_select",
        "nan_to_num",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "bitwise_not",
        "logical_and",
        "logical_or",
        "logical_xor",
        "logical_not",
        *_UNARY_FOREACH,
        *_UNARY_LOOP,
    ]
    for name in names:
        fn = getattr(torch, name, None)
        if fn is not None:
            table[fn] = _first_td_method(name)
        inplace = getattr(torch, name + "_", None)
        if inplace is not None and hasattr(MathMixin, name + "_"):
            table[inplace] = _first_td_method(name + "_")
    table.update(_torch_reduction_table())
    return table
