"""TensorDict methods that downstream libraries call, with upstream tensordict's names.

Public: ``entry_class``, ``clear_refs_for_compile_``. (``make_memmap`` and its variants are td-memmap seams.)
Underscored (upstream private, called by TorchRL; see
``tensordict._compat_upstream`` for the policy): ``_get_str``, ``_get_tuple``,
``_stack_onto_``, ``_get_sub_tensordict``, ``_apply_nest``.

============================  ================================================================
method                        called by
============================  ================================================================
``_get_str``                  TorchRL ``envs.utils`` (``step_mdp``), ``envs.common``
``_stack_onto_``              TorchRL ``data.replay_buffers.storages`` (lazy-stack writes)
``_get_sub_tensordict``       TorchRL ``data.replay_buffers.utils``, ``data.datasets``
``_apply_nest``               TorchRL ``objectives.common``, ``data.datasets.openx``
``entry_class``               TorchRL ``envs.utils``
============================  ================================================================
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tensordict._errors import missing_key_error
from tensordict._host import TensorDictHost
from tensordict._keys import _MISSING, NO_DEFAULT, NestedKey, unravel_key

__all__ = ["UpstreamMethodsMixin"]


class UpstreamMethodsMixin(TensorDictHost):
    """Methods of upstream's ``TensorDictBase`` that downstream code calls by name."""

    __slots__ = ()

    # ------------------------------------------------------------------ reading
    def entry_class(self, key: NestedKey) -> type:
        """The class of the value stored under ``key``, without unwrapping or stacking it.

        Args:
            key (NestedKey): the key to look up.

        Returns:
            the type of the stored entry (``torch.Tensor``, a TensorDict class,
            ``NonTensorData``, ...).

        Raises:
            KeyError: ``key`` is missing.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict(a=torch.zeros(2), b={"c": torch.zeros(2)}, batch_size=[2])
            >>> td.entry_class("a").__name__, td.entry_class("b").__name__
            ('Tensor', 'TensorDict')
        """
        return type(self._get_any_raw(key))

    def clear_refs_for_compile_(self) -> Any:
        """Drops what a TensorDict keeps about earlier operations; a no-op here, returns ``self``.

        Upstream tensordict records each TensorDict's last operation with a weak
        reference to its result, which ``torch.compile`` cannot return from a compiled
        function, so code written for it calls this method before returning a
        TensorDict. These TensorDicts keep no such record (the ``with td.lock_():``
        form restores state from the object it is called on), so there is nothing to
        clear: the method exists so that such code runs unchanged, in eager mode and
        under ``torch.compile(fullgraph=True)``.

        Returns:
            ``self`` (same batch_size, device and entries).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict(a=torch.zeros(2), batch_size=[2])
            >>> td.clear_refs_for_compile_() is td
            True
        """
        return self

    def _get_str(self, key: str, default: Any = NO_DEFAULT, **kwargs: Any) -> Any:
        """The stored value under the str ``key`` (non-tensor data not unwrapped)."""
        value = self._get_raw(key, _MISSING)
        if value is _MISSING:
            if default is NO_DEFAULT:
                raise missing_key_error(key, self.keys())
            return default
        return value

    def _get_tuple(self, key: tuple, default: Any = NO_DEFAULT, **kwargs: Any) -> Any:
        """The stored value under the tuple ``key`` (non-tensor data not unwrapped)."""
        key = unravel_key(key)  # type: ignore[assignment]
        if default is NO_DEFAULT:
            return self._get_any_raw(key)
        return self._get_any_raw(key, default)

    def _get_sub_tensordict(self, index: Any) -> Any:
        """A TensorDict whose leaves are views of ``self[index]`` (writes reach ``self``).

        Only basic indices (ints, slices, ``None``, ``Ellipsis``) give views; that is
        how downstream code uses it.
        """
        return self[index]

    # ------------------------------------------------------------------ writing
    def _stack_onto_(self, list_item: Sequence[Any], dim: int) -> Any:
        """Writes ``torch.stack(list_item, dim)`` into ``self`` in place, element by element.

        Raises:
            RuntimeError: ``len(list_item)`` is not ``self.batch_size[dim]``.
        """
        if dim < 0:
            dim += self.batch_dims
        if len(list_item) != self.batch_size[dim]:
            msg = (
                f"_stack_onto_: {len(list_item)} TensorDicts for a dim of size "
                f"{self.batch_size[dim]} (dim={dim}, batch_size={tuple(self.batch_size)})."
            )
            raise RuntimeError(msg)
        prefix = (slice(None),) * dim
        for i, item in enumerate(list_item):
            self[prefix + (i,)] = item
        return self

    def _apply_nest(self, fn: Callable, *others: Any, **kwargs: Any) -> Any:
        """Upstream's internal form of :meth:`apply` (same keyword arguments)."""
        for name in ("checked", "named", "nested_keys", "prefix", "is_leaf", "out"):
            if kwargs.get(name, None) in (None, False, ()):
                kwargs.pop(name, None)
        return self.apply(fn, *others, **kwargs)
