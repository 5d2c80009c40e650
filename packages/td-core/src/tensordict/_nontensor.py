"""Non-tensor leaves: ``NonTensorData`` (one Python object for the whole batch) and
``NonTensorStack`` (one object per batch element).

Both carry a ``batch_size`` so they follow every batch operation of the TensorDict
that holds them. Shape operations are computed on an index tensor
(``torch.arange(numel).view(batch_size)``): whatever torch does to that tensor is
done to the objects, so every torch index form and shape op is supported with one
code path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from tensordict._nontensor_shared import SharedItems
from tensordict._options import capture_non_tensor_stack

__all__ = ["LinkedList", "NonTensorData", "NonTensorStack", "is_non_tensor"]


class LinkedList(list):
    """The list ``td[key]`` returns for a ``NonTensorStack`` leaf (a ``list`` subclass).

    It is linked to the stack it was read from: an item written into it
    (``values[i] = x``, ``values[i:j] = [...]`` of the same length) is written into the
    stack too, along its first dim, as in tensordict 0.15.

    Examples:
        >>> LinkedList(["a", "b"])
        LinkedList(['a', 'b'])
        >>> LinkedList(["a", "b"]) == ["a", "b"]
        True
        >>> from tensordict import TensorDict
        >>> td = TensorDict(batch_size=[3])
        >>> td["names"] = ["a", "b", "c"]
        >>> values = td["names"]
        >>> values[0] = "z"
        >>> td.get("names").tolist(), values.tolist()
        (['z', 'b', 'c'], ['z', 'b', 'c'])
    """

    __slots__ = ("_prefix", "_stack")

    def __init__(self, items: Any = (), stack: Any = None, prefix: tuple = ()) -> None:
        super().__init__(items)
        self._stack = stack  # the NonTensorStack written through, and where this list sits in it
        self._prefix = prefix

    def __reduce__(self) -> tuple:
        # a pickled (or deep-copied) list holds the items, not the link: the stack it would
        # write to on the other side is a copy anyway, and a shared or memory-mapped stack
        # must not travel inside a value read from it
        return (LinkedList, (list(self),))

    @classmethod
    def _of_stack(cls, stack: Any) -> LinkedList:
        """The linked list of ``stack``'s items: nested linked lists for each batch dim."""

        def build(items: list, prefix: tuple, depth: int) -> LinkedList:
            if depth > 1:
                items = [build(item, (*prefix, i), depth - 1) for i, item in enumerate(items)]
            return cls(items, stack, prefix)

        return build(stack.tolist(), (), len(stack.batch_size))

    def __setitem__(self, index: Any, value: Any) -> None:
        stack, prefix = self._stack, self._prefix
        if isinstance(index, slice):
            positions = range(*index.indices(len(self)))
            value = list(value)
            list.__setitem__(self, index, value)
            if stack is not None and len(positions) == len(value):
                for i, item in zip(positions, value):
                    stack[prefix + (i,)] = item
            return
        list.__setitem__(self, index, value)
        if stack is not None:
            stack[prefix + (index,)] = value

    def tolist(self) -> list:
        """A plain ``list`` of the items (nested lists for a stack of more than one dim)."""
        return [item.tolist() if isinstance(item, LinkedList) else item for item in self]

    def __repr__(self) -> str:
        return f"LinkedList({list.__repr__(self)})"

    __str__ = __repr__


def nested_list_items(value: list, batch_size: torch.Size) -> list | None:
    """The items of nested lists whose sizes are ``batch_size`` level by level (row-major),
    or ``None`` when the lists do not have that shape."""
    level = [value]
    for size in batch_size:
        if not all(isinstance(item, list) and len(item) == size for item in level):
            return None
        level = [item for sub in level for item in sub]
    return level


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        eq = a == b
        if isinstance(eq, bool):
            return eq
        if isinstance(eq, torch.Tensor):
            return bool(eq.all())
        return bool(eq)
    except Exception:
        return False


def _shape_of_index(batch_size: torch.Size, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Size:
    probe = torch.zeros((), dtype=torch.uint8).expand(batch_size)
    return fn(probe).shape


def _index_on_cpu(index: Any) -> Any:
    """``index`` with its tensors on the CPU: the shape probe of a non-tensor leaf is a CPU
    tensor, and a mask or index tensor on an accelerator cannot index it."""
    if isinstance(index, torch.Tensor):
        return index if index.device.type == "cpu" else index.cpu()
    if isinstance(index, tuple):
        return tuple(_index_on_cpu(i) for i in index)
    if isinstance(index, list) and any(isinstance(i, torch.Tensor) for i in index):
        return [_index_on_cpu(i) for i in index]
    return index


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", repr(tp))


_TYPED_CLASSES: dict = {}


def _typed_class(cls: type, data_type: Any) -> type:
    key = (cls, data_type)
    typed = _TYPED_CLASSES.get(key)
    if typed is None:
        name = f"{cls.__name__}[{_type_name(data_type)}]"
        typed = type(cls)(name, (cls,), {"__slots__": (), "_data_type": data_type, "__module__": cls.__module__})
        _TYPED_CLASSES[key] = typed
    return typed


def _shape_arg(shape: tuple) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (list, tuple, torch.Size)):
        return tuple(shape[0])
    return tuple(shape)


def _adds_stack_dim(fn: Any, out: torch.Tensor) -> bool:
    """Whether a batch-dim op on a ``NonTensorData`` makes it a ``NonTensorStack``, as in
    tensordict 0.15: ``unsqueeze`` (its function is marked ``_unsqueezes``) and ``expand``
    (a broadcast: a zero stride in ``out``, the op applied to a tensor of the batch size)
    do; ``repeat``, ``repeat_interleave``, ``unflatten``, ``reshape`` and the other ops keep
    one object with the new batch size."""
    return getattr(fn, "_unsqueezes", False) or (out.numel() > 1 and 0 in out.stride())


class _NonTensorShapeOps:
    """Batch-dim shape ops shared by ``NonTensorData`` and ``NonTensorStack``.

    Each op is applied to the index tensor of the leaf (``_apply_index``): whatever
    torch does to the index tensor is done to the objects.
    """

    __slots__ = ()

    if TYPE_CHECKING:  # what the shape ops read from NonTensorData / NonTensorStack
        @property
        def batch_size(self) -> torch.Size: ...
        @property
        def device(self) -> torch.device | None: ...
        def to(self, *args: Any, **kwargs: Any) -> Any: ...
        def clone(self, recurse: bool = True) -> Any: ...
        def numel(self) -> int: ...
        def __setitem__(self, index: Any, value: Any) -> None: ...

    def _apply_index(self, fn: Callable[[torch.Tensor], Any], grow: bool = False, member: bool = False) -> Any:  # pragma: no cover
        raise NotImplementedError

    def view(self, *shape: Any) -> Any:
        return self._apply_index(lambda t: t.view(_shape_arg(shape)))

    def reshape(self, *shape: Any) -> Any:
        return self._apply_index(lambda t: t.reshape(_shape_arg(shape)))

    def flatten(self, start_dim: int | None = None, end_dim: int | None = None) -> Any:
        start = 0 if start_dim is None else start_dim
        end = -1 if end_dim is None else end_dim
        return self._apply_index(lambda t: t.flatten(start, end))

    def unflatten(self, dim: int, sizes: Sequence[int]) -> Any:
        return self._apply_index(lambda t: t.unflatten(dim, sizes))

    def unsqueeze(self, dim: int) -> Any:
        return self._apply_index(lambda t: t.unsqueeze(dim), grow=True)

    def squeeze(self, dim: int | None = None) -> Any:
        return self._apply_index(lambda t: t.squeeze() if dim is None else t.squeeze(dim), member=True)

    def permute(self, *dims: Any) -> Any:
        return self._apply_index(lambda t: t.permute(_shape_arg(dims)))

    def transpose(self, dim0: int, dim1: int) -> Any:
        return self._apply_index(lambda t: t.transpose(dim0, dim1))

    def expand(self, *shape: Any) -> Any:
        return self._apply_index(lambda t: t.expand(_shape_arg(shape)), grow=True)

    def expand_as(self, other: Any) -> Any:
        return self.expand(other.shape)

    def repeat(self, *repeats: Any) -> Any:
        return self._apply_index(lambda t: t.repeat(_shape_arg(repeats)))

    def repeat_interleave(self, repeats: Any, dim: int | None = None, *, output_size: int | None = None) -> Any:
        return self._apply_index(lambda t: t.repeat_interleave(repeats, dim=dim, output_size=output_size))

    def flip(self, dims: Any) -> Any:
        return self._apply_index(lambda t: t.flip(dims))

    def roll(self, shifts: Any, dims: Any = None) -> Any:
        return self._apply_index(lambda t: t.roll(shifts, dims))

    def gather(self, dim: int, index: torch.Tensor) -> Any:
        return self._apply_index(lambda t: t.gather(dim, index))

    def masked_select(self, mask: torch.Tensor) -> Any:
        return self._apply_index(lambda t: t[mask])

    def unbind(self, dim: int = 0) -> tuple:
        n = self.batch_size[dim]
        return tuple(self._apply_index(lambda t, i=i: t.select(dim, i)) for i in range(n))  # type: ignore[misc]

    def split(self, split_size: Any, dim: int = 0) -> tuple:
        probe = torch.zeros(self.batch_size, dtype=torch.uint8)
        sizes = [p.shape[dim] for p in probe.split(split_size, dim)]
        out, start = [], 0
        for size in sizes:
            out.append(self._apply_index(lambda t, s=start, n=size: t.narrow(dim, s, n)))  # type: ignore[misc]
            start += size
        return tuple(out)

    def chunk(self, chunks: int, dim: int = 0) -> tuple:
        probe = torch.zeros(self.batch_size, dtype=torch.uint8)
        sizes = [p.shape[dim] for p in probe.chunk(chunks, dim)]
        return self.split(sizes, dim)

    def contiguous(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def is_contiguous(self) -> bool:
        return True

    def size(self, dim: int | None = None) -> Any:
        return self.batch_size if dim is None else self.batch_size[dim]

    def dim(self) -> int:
        return len(self.batch_size)

    def __len__(self) -> int:
        bs = self.batch_size
        return bs[0] if bs else 0

    def cpu(self) -> Any:
        return self.to("cpu")

    def cuda(self, device: Any = None) -> Any:
        return self.to("cuda" if device is None else torch.device("cuda", device) if isinstance(device, int) else device)

    def copy(self) -> Any:
        return self.clone(recurse=False)

    def detach(self) -> Any:
        return self

    def is_empty(self) -> bool:
        return False

    def is_shared(self) -> bool:
        return False

    def is_memmap(self) -> bool:
        return False

    def lock_(self) -> Any:
        return self

    def unlock_(self) -> Any:
        return self

    @property
    def is_locked(self) -> bool:
        return False

    def keys(self, *args: Any, **kwargs: Any) -> list:
        """Non-tensor leaves hold no keys (as an empty tensor collection)."""
        return []

    def values(self, *args: Any, **kwargs: Any) -> list:
        return []

    @property
    def dtype(self) -> None:
        """``None``: a non-tensor leaf has no tensor dtype (TorchRL's spec checks compare it)."""
        return None

    def get(self, key: Any, default: Any = None) -> Any:
        """``NonTensorData.get("data")`` is the object held; any other key gives ``default``.

        As tensordict 0.15.3 reads a non-tensor leaf as a TensorDict with one
        ``"data"`` entry (a ``NonTensorStack`` holds none at its top level).

        Examples:
            >>> NonTensorData("hi").get("data"), NonTensorData("hi").get("other")
            ('hi', None)
        """
        if key == "data" and isinstance(self, NonTensorData):
            return self.data
        return default

    def items(self, *args: Any, **kwargs: Any) -> list:
        return []

    @property
    def names(self) -> list:
        """Names of the batch dims (set by the TensorDict that holds the leaf)."""
        names = getattr(self, "_names", None)
        if names is None or len(names) != len(self.batch_size):
            return [None] * len(self.batch_size)
        return list(names)

    @names.setter
    def names(self, value: Any) -> None:
        self._names = None if value is None else list(value)  # type: ignore[misc]

    def maybe_to_stack(self) -> Any:
        """This leaf as a ``NonTensorStack`` (one object per batch element)."""
        if isinstance(self, NonTensorStack):
            return self
        return NonTensorStack._from_flat([self.data] * self.numel(), self.batch_size, self.device)

    def update(self, other: Any, *args: Any, inplace: bool = False, **kwargs: Any) -> Any:
        """Replaces the content with ``other``'s (``NonTensorData``, ``NonTensorStack`` or object).

        Raises:
            ValueError: ``self`` is a ``NonTensorData`` and ``other`` a ``NonTensorStack``
                (turn ``self`` into a stack first with :meth:`maybe_to_stack`).
        """
        if isinstance(self, NonTensorData):
            if isinstance(other, NonTensorStack):
                msg = (
                    "Cannot update a NonTensorDataBase object with a NonTensorStack. Call "
                    "`non_tensor_data.maybe_to_stack()` before calling update()."
                )
                raise ValueError(msg)
            self.data = other.data if isinstance(other, NonTensorData) else other  # type: ignore[has-type]
            return self
        self[...] = other
        return self

    def update_(self, other: Any, *args: Any, **kwargs: Any) -> Any:
        return self.update(other, inplace=True)

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in (torch.stack, torch.cat, torch.concat, torch.concatenate):
            parts = list(args[0]) if args else list(kwargs.pop("tensors"))
            dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
            if not all(isinstance(p, (NonTensorData, NonTensorStack)) for p in parts):
                return NotImplemented
            if func is torch.stack:
                return _stack_non_tensor(parts, dim)
            return _cat_non_tensor(parts, dim)
        if func is torch.unbind:
            return args[0].unbind(*args[1:], **kwargs)
        return NotImplemented


class NonTensorData(_NonTensorShapeOps):
    """A non-tensor value (str, number, any object) stored as a TensorDict leaf.

    The same object stands for every element of ``batch_size``.

    Args:
        data (Any): the object.
        batch_size (torch.Size or sequence of int, optional): defaults to ``[]``.
        device (torch.device, optional): informative only; defaults to ``None``.

    Examples:
        >>> d = NonTensorData("hello", batch_size=[3])
        >>> d[0].data
        'hello'
        >>> d.batch_size
        torch.Size([3])
    """

    # ``_owner``: ``(stack, position)`` when read from a NonTensorStack element, so that
    # a write into this object (``stack[0][...] = v``) reaches the stack
    __slots__ = ("data", "_batch_size", "_device", "_names", "_owner")

    #: the data type a ``NonTensorData[T]`` / ``MetaData[T]`` class checks (``None``: any)
    _data_type: Any = None
    #: in-place writes into a TensorDict set ``.data`` on this leaf instead of replacing it
    #: (td-memmap's shared values, ``memmap(share_non_tensor=True)``)
    _writes_in_place: bool = False

    def __init__(
        self, data: Any = None, batch_size: Sequence[int] | None = None, device: Any = None, names: Any = None
    ) -> None:
        if isinstance(data, NonTensorData):
            data = data.data
        expected = self._data_type
        if expected is not None and not isinstance(data, expected):
            msg = f"Expected data of type {_type_name(expected)}, got {type(data).__name__}"
            raise TypeError(msg)
        self.data = data
        self._batch_size = torch.Size(batch_size) if batch_size is not None else torch.Size(())
        self._device = torch.device(device) if device is not None else None

    def __class_getitem__(cls, data_type: Any) -> type:
        """``NonTensorData[int]`` / ``MetaData[str]``: a subclass that checks the data type.

        The class is cached, so ``isinstance(x, MetaData[int])`` works across calls.
        """
        return _typed_class(cls, data_type)

    # shape -------------------------------------------------------------
    @property
    def batch_size(self) -> torch.Size:
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: Sequence[int]) -> None:
        self._batch_size = torch.Size(value)

    shape = batch_size

    @property
    def device(self) -> torch.device | None:
        return self._device

    @property
    def batch_dims(self) -> int:
        return len(self._batch_size)

    ndim = batch_dims

    def numel(self) -> int:
        return self._batch_size.numel()

    def tolist(self) -> Any:
        """The data repeated over the batch, as nested lists (the object for ``[]``)."""
        def build(dims: tuple) -> Any:
            if not dims:
                return self.data
            return [build(dims[1:]) for _ in range(dims[0])]

        return build(tuple(self._batch_size))

    def where(
        self, condition: torch.Tensor, other: Any, *, out: Any = None, pad: Any = None, update_batch_size: bool = False
    ) -> NonTensorData | NonTensorStack:
        """Element ``i`` is ``self.data`` where ``condition[i]`` else ``other[i]``.

        Args:
            condition (torch.Tensor): bool tensor broadcastable to ``batch_size``.
            other (NonTensorStack, NonTensorData or object): values where ``condition`` is false.
            out (NonTensorStack, optional): written in place and returned when given.
            pad, update_batch_size: ignored, as for :meth:`NonTensorStack.where`.

        Returns:
            a ``NonTensorData`` of ``self.data`` when ``condition`` holds everywhere,
            else a :class:`NonTensorStack` with ``self``'s batch size.

        Examples:
            >>> import torch
            >>> a = NonTensorData("a", batch_size=[3])
            >>> a.where(torch.tensor([True, False, True]), NonTensorData("b", batch_size=[3])).tolist()
            ['a', 'b', 'a']
        """
        condition = torch.as_tensor(condition).to(torch.bool)
        if out is None and bool(condition.all()):
            return NonTensorData(self.data, self._batch_size, self._device)
        stack = NonTensorStack._from_flat([self.data] * self.numel(), self._batch_size, self._device)
        return stack.where(condition, other, out=out)

    # batch operations --------------------------------------------------
    #: ``True`` for leaves that stay one object through every batch op (``MetaData``)
    _keeps_whole = False

    def _rebuild(self, batch_size: Sequence[int]) -> NonTensorData:
        return type(self)(self.data, batch_size, self._device)

    def _reshaped(self, shape: torch.Size, grow: bool) -> Any:
        if grow and not self._keeps_whole:
            return NonTensorStack._from_flat([self.data] * shape.numel(), shape, self._device)
        return self._rebuild(shape)

    def _apply_index(self, fn: Callable[[torch.Tensor], Any], grow: bool = False, member: bool = False) -> Any:
        shape = fn(torch.zeros(self._batch_size, dtype=torch.uint8)).shape
        return self._reshaped(shape, grow)

    def _batch_transform(self, fn: Callable[[torch.Tensor, int], torch.Tensor], nd: int) -> Any:
        out = fn(torch.zeros(self._batch_size, dtype=torch.uint8), nd)
        return self._reshaped(out.shape, _adds_stack_dim(fn, out))

    def __getitem__(self, index: Any) -> NonTensorData:
        index = _index_on_cpu(index)
        shape = _shape_of_index(self._batch_size, lambda t: t[index])
        return self._rebuild(shape)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calls the stored object (a function stored as non-tensor data)."""
        return self.data(*args, **kwargs)

    def clone(self, recurse: bool = True) -> NonTensorData:
        return self._rebuild(self._batch_size)

    def to(self, device: Any = None, *args: Any, **kwargs: Any) -> NonTensorData:
        if isinstance(device, (str, torch.device, int)):
            return type(self)(self.data, self._batch_size, device)
        return self

    def _with_batch(self, batch_size: Sequence[int]) -> NonTensorData:
        return self._rebuild(batch_size)

    def __eq__(self, other: object) -> Any:
        """Against non-tensor data: a bool tensor of the (broadcast) batch shape, ``True``
        where the objects are equal; against anything else ``False`` (tensordict 0.15)."""
        if isinstance(other, NonTensorStack):
            return other.__eq__(self)
        if isinstance(other, NonTensorData):
            shape = torch.broadcast_shapes(self._batch_size, other._batch_size)
            return torch.full(shape, _same(self.data, other.data), dtype=torch.bool)
        return False

    def __ne__(self, other: object) -> Any:
        eq = self.__eq__(other)
        return ~eq if isinstance(eq, torch.Tensor) else not eq

    def __setitem__(self, index: Any, value: Any) -> None:
        """Writes ``value`` (an object, or non-tensor data holding one value) into the
        positions ``index`` selects; since a ``NonTensorData`` holds one object for the
        whole batch, the write must cover every position or bring the same object.

        Raises:
            RuntimeError: ``value`` holds different objects, or covers part of the batch
                with another object (build a :class:`NonTensorStack` for that).
        """
        index = _index_on_cpu(index)
        shape = _shape_of_index(self._batch_size, lambda t: t[index])
        if isinstance(value, NonTensorStack):
            items = value._items
            if not items or any(not _same(items[0], v) for v in items[1:]):
                msg = f"cannot write a NonTensorStack holding different objects into a NonTensorData (batch_size {tuple(self._batch_size)}); write into a NonTensorStack instead."
                raise RuntimeError(msg)
            data = items[0]
        elif isinstance(value, NonTensorData):
            data = value.data
        else:
            data = value
        if shape.numel() != self._batch_size.numel() and not _same(data, self.data):
            msg = (
                f"cannot write {data!r} into part ({tuple(shape)}) of a NonTensorData of batch_size "
                f"{tuple(self._batch_size)} holding {self.data!r}: it holds one object for the whole batch. "
                "Use a NonTensorStack for per-element objects."
            )
            raise RuntimeError(msg)
        self.data = data
        owner = getattr(self, "_owner", None)
        if owner is not None:
            owner[0]._items[owner[1]] = data

    def _combine(self, other: Any, op: Callable[[Any, Any], Any]) -> Any:
        if isinstance(other, NonTensorData):
            other = other.data
        elif isinstance(other, (_NonTensorShapeOps, torch.Tensor)) or hasattr(other, "_items_raw"):
            return NotImplemented
        return NonTensorData(op(self.data, other), self._batch_size, self._device)

    def __or__(self, other: Any) -> Any:
        """``NonTensorData(a) | b`` is ``NonTensorData(a | b)`` (``b`` unwrapped when non-tensor data)."""
        return self._combine(other, lambda a, b: a | b)

    def __xor__(self, other: Any) -> Any:
        """``NonTensorData(a) ^ b`` is ``NonTensorData(a ^ b)``."""
        return self._combine(other, lambda a, b: a ^ b)

    def __and__(self, other: Any) -> Any:
        """``NonTensorData(a) & b`` is ``NonTensorData(a & b)``."""
        return self._combine(other, lambda a, b: a & b)

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple:
        cls = type(self)
        if cls._data_type is not None:
            return (_rebuild_typed, (cls.__mro__[1], cls._data_type, self.data, tuple(self._batch_size), self._device))
        return (cls, (self.data, tuple(self._batch_size), self._device))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(data={self.data}, batch_size={self._batch_size}, device={self._device})"


def _rebuild_typed(base: type, data_type: Any, data: Any, batch_size: tuple, device: Any) -> NonTensorData:
    return _typed_class(base, data_type)(data, batch_size, device)


class NonTensorStack(_NonTensorShapeOps):
    """Non-tensor leaf holding one object per batch element.

    Built when TensorDicts whose non-tensor values differ are stacked or
    concatenated. ``tolist()`` returns nested lists shaped like ``batch_size``.

    Args:
        *items (Any or NonTensorData): the objects along the first batch dim.
        stack_dim (int, optional): where the new dim goes. Defaults to ``0``.

    Examples:
        >>> s = NonTensorStack("a", "b", "c")
        >>> s.tolist()
        ['a', 'b', 'c']
        >>> s[1].data
        'b'
    """

    # ``_hook``: called with the stack after each in-place element write (see
    # :func:`set_write_hook`); unset on most stacks, read with ``getattr``
    __slots__ = ("_items", "_batch_size", "_device", "_names", "_hook")
    _hook: Any

    def __init__(self, *items: Any, stack_dim: int = 0, batch_size: Any = None, device: Any = None) -> None:
        parts = [it if isinstance(it, (NonTensorData, NonTensorStack)) else NonTensorData(it) for it in items]
        if parts:
            stacked = _stack_non_tensor(parts, stack_dim, collapse=False)
            self._items, self._batch_size, self._device = stacked._items, stacked._batch_size, stacked._device  # type: ignore[has-type, union-attr]
        else:
            self._items, self._batch_size, self._device = [], torch.Size([0]), None
        if device is not None:
            self._device = torch.device(device)
        if batch_size is not None and torch.Size(batch_size) != self._batch_size:
            msg = f"NonTensorStack: batch_size {tuple(batch_size)} does not match the stacked items {tuple(self._batch_size)}."
            raise RuntimeError(msg)

    @classmethod
    def from_list(cls, non_tensors: list, device: Any = None) -> NonTensorStack:
        """Builds a stack from (nested) lists; the nesting gives ``batch_size``.

        Args:
            non_tensors (list): a list (of lists ...) of objects or ``NonTensorData``.
            device (torch.device, optional): the device attribute of the stack.

        Examples:
            >>> s = NonTensorStack.from_list([["a", "b"], ["c", "d"]])
            >>> s.batch_size
            torch.Size([2, 2])
        """
        shape: list = []
        level: Any = non_tensors
        while isinstance(level, list):
            shape.append(len(level))
            if not level:
                break
            level = level[0]
        items: list = []

        def walk(obj: Any, depth: int) -> None:
            if depth == len(shape):
                items.append(obj.data if isinstance(obj, NonTensorData) else obj)
                return
            if not isinstance(obj, list) or len(obj) != shape[depth]:
                msg = f"NonTensorStack.from_list: ragged nested lists (expected {shape[depth]} items at depth {depth})."
                raise ValueError(msg)
            for sub in obj:
                walk(sub, depth + 1)

        walk(non_tensors, 0)
        return cls._from_flat(items, shape, None if device is None else torch.device(device))

    @classmethod
    def _from_flat(cls, items: list, batch_size: Sequence[int], device: Any = None) -> NonTensorStack:
        obj = cls.__new__(cls)
        obj._items = items
        obj._batch_size = torch.Size(batch_size)
        obj._device = device
        return obj

    @property
    def batch_size(self) -> torch.Size:
        return self._batch_size

    shape = batch_size

    @property
    def device(self) -> torch.device | None:
        return self._device

    @property
    def batch_dims(self) -> int:
        return len(self._batch_size)

    ndim = batch_dims

    def numel(self) -> int:
        return self._batch_size.numel()

    def tolist(self) -> Any:
        """The objects as nested lists shaped like ``batch_size``."""
        items = iter(self._items)

        def build(dims: tuple) -> Any:
            if not dims:
                return next(items)
            return [build(dims[1:]) for _ in range(dims[0])]

        return build(tuple(self._batch_size))

    @property
    def data(self) -> Any:
        """The one object the stack holds everywhere (as tensordict 0.15).

        Raises:
            AttributeError: the objects differ (use :meth:`tolist`).
        """
        items = self._items
        if items:
            first = items[0]
            if all(_same(first, item) for item in items[1:]):
                return first
        msg = "Cannot get the non-unique data of a NonTensorStack. Use .tolist() instead."
        raise AttributeError(msg)

    def _index_tensor(self) -> torch.Tensor:
        return torch.arange(len(self._items)).view(self._batch_size)

    def _from_index(self, idx: torch.Tensor, member: bool = False) -> NonTensorStack | NonTensorData:
        """The leaf holding the objects at ``idx`` (positions in ``_items``). ``member``: the
        op took one slice of the first dim (``stack[i]``) or squeezed a size-1 dim, which in
        tensordict 0.15 gives back a stacked member: a result holding one object throughout
        is then that object as ``NonTensorData`` (``td.unsqueeze(0).squeeze(0)`` and
        ``torch.stack(tds)[i]`` give back the ``NonTensorData`` they started from)."""
        flat = idx.reshape(-1).tolist()
        items = [self._items[i] for i in flat]
        if idx.ndim == 0:
            out = NonTensorData(items[0], (), self._device)
            out._owner = (self, flat[0])  # type: ignore[attr-defined]
            return out
        if member and items:
            first = items[0]
            for item in items:
                if item is not first:
                    break
            else:
                return NonTensorData(first, idx.shape, self._device)
        return NonTensorStack._from_flat(items, idx.shape, self._device)

    def _batch_transform(self, fn: Callable[[torch.Tensor, int], torch.Tensor], nd: int) -> Any:
        idx = fn(self._index_tensor(), nd)
        if hasattr(fn, "_factory_size"):
            # ``new_zeros`` & co: every element repeats the first object (the index the
            # factory made up would point anywhere)
            idx = torch.zeros(idx.shape, dtype=torch.long)
        return self._from_index(idx, getattr(fn, "_squeezes", False))

    def _apply_index(self, fn: Callable[[torch.Tensor], Any], grow: bool = False, member: bool = False) -> Any:
        return self._from_index(fn(self._index_tensor()), member)

    def __getitem__(self, index: Any) -> Any:
        first = index[0] if index.__class__ is tuple and index else index
        member = first.__class__ is int and len(self._batch_size) > 1
        return self._from_index(self._index_tensor()[index], member)

    def where(
        self, condition: torch.Tensor, other: Any, *, out: Any = None, pad: Any = None, update_batch_size: bool = False
    ) -> NonTensorStack:
        """Element ``i`` is ``self[i]`` where ``condition[i]`` else ``other[i]``.

        Args:
            condition (torch.Tensor): bool tensor broadcastable to ``batch_size``.
            other (NonTensorStack, NonTensorData or object): values where ``condition`` is false.
            out (NonTensorStack, optional): written in place and returned when given.
            pad: ignored (no key can be missing in a non-tensor leaf).
            update_batch_size: ignored (the result has ``self``'s batch size).
        """
        n = len(self._items)
        if isinstance(other, NonTensorStack):
            other_items, other_idx = other._items, other._index_tensor()
        else:
            value = other.data if isinstance(other, NonTensorData) else other
            other_items, other_idx = [value], torch.zeros(self._batch_size, dtype=torch.long)
        idx = torch.where(condition.to(torch.bool), self._index_tensor(), other_idx + n)
        pool = list(self._items) + list(other_items)
        result = NonTensorStack._from_flat([pool[i] for i in idx.reshape(-1).tolist()], idx.shape, self._device)
        if out is not None:
            out._items, out._batch_size = result._items, result._batch_size
            return out
        return result

    def __setitem__(self, index: Any, value: Any) -> None:
        idx = self._index_tensor()[index].reshape(-1).tolist()
        if isinstance(value, NonTensorStack):
            values = value._items
        elif isinstance(value, NonTensorData):
            values = [value.data] * len(idx)
        else:
            values = [value] * len(idx)
        if len(values) != len(idx):
            msg = f"Cannot write {len(values)} non-tensor values into {len(idx)} positions."
            raise RuntimeError(msg)
        for i, v in zip(idx, values):
            self._items[i] = v
        hook = getattr(self, "_hook", None)
        if hook is not None:
            hook(self)

    def clone(self, recurse: bool = True) -> NonTensorStack:
        return NonTensorStack._from_flat(list(self._items), self._batch_size, self._device)

    def to(self, device: Any = None, *args: Any, **kwargs: Any) -> NonTensorStack:
        if isinstance(device, (str, torch.device, int)):
            return NonTensorStack._from_flat(self._items, self._batch_size, torch.device(device))
        return self

    def _with_batch(self, batch_size: Sequence[int]) -> NonTensorStack:
        return NonTensorStack._from_flat(self._items, batch_size, self._device)

    def __eq__(self, other: object) -> Any:
        """Against non-tensor data: a bool tensor of the (broadcast) batch shape comparing
        the objects element by element; against anything else ``False`` (tensordict 0.15)."""
        if not isinstance(other, (NonTensorStack, NonTensorData)):
            return False
        shape = torch.broadcast_shapes(self._batch_size, other._batch_size)
        mine = self._index_tensor().expand(shape).reshape(-1).tolist()
        if isinstance(other, NonTensorData):
            flags = [_same(self._items[i], other.data) for i in mine]
        else:
            theirs = other._index_tensor().expand(shape).reshape(-1).tolist()
            flags = [_same(self._items[i], other._items[j]) for i, j in zip(mine, theirs)]
        return torch.tensor(flags, dtype=torch.bool).reshape(shape)

    def __ne__(self, other: object) -> Any:
        eq = self.__eq__(other)
        return ~eq if isinstance(eq, torch.Tensor) else not eq

    __hash__ = None  # type: ignore[assignment]

    def share_memory_(self) -> NonTensorStack:
        """Moves the objects to shared memory, in place: a process that receives this
        stack through ``torch.multiprocessing`` writes into the same objects.

        Each object gets a slot of twice its pickled size (at least 256 bytes);
        writing a larger object later raises ``RuntimeError``.

        Returns:
            ``self``.

        Examples:
            >>> s = NonTensorStack("a", "b").share_memory_()
            >>> s.is_shared()
            True
            >>> s[1] = "c"
            >>> s.tolist()
            ['a', 'c']
        """
        if not isinstance(self._items, SharedItems):
            self._items = SharedItems.from_items(self._items)
        return self

    def is_shared(self) -> bool:
        """``True`` after :meth:`share_memory_`."""
        return isinstance(self._items, SharedItems)

    def __reduce__(self) -> tuple:
        items = self._items
        if not isinstance(items, SharedItems):  # a shared store travels as its shared tensors
            items = list(items)
        hook = getattr(self, "_hook", None)
        if hook is not None:  # the write hook travels too (it must be picklable)
            return (_rebuild_hooked, (items, tuple(self._batch_size), self._device, hook))
        return (NonTensorStack._from_flat, (items, tuple(self._batch_size), self._device))

    def __repr__(self) -> str:
        return f"NonTensorStack({self.tolist()!r}, batch_size={self._batch_size}, device={self._device})"


def _rebuild_hooked(items: Any, batch_size: tuple, device: Any, hook: Any) -> NonTensorStack:
    out = NonTensorStack._from_flat(items, batch_size, device)
    out._hook = hook
    return out


def set_write_hook(stack: NonTensorStack, hook: Callable[[NonTensorStack], None] | None) -> NonTensorStack:
    """Makes ``hook(stack)`` run after each in-place element write into ``stack``
    (``stack[idx] = ...``, also through a TensorDict: ``td[idx] = other``).

    Sibling-facing (re-exported by :mod:`tensordict.ext`): td-memmap persists the
    writes into a memory-mapped TensorDict's stacks with it. The hook travels with
    the stack when it is pickled (it must be picklable); copies made by shape ops or
    ``clone`` do not carry it.

    Args:
        stack (NonTensorStack): the stack.
        hook (callable or None): ``None`` removes the hook.

    Returns:
        ``stack``.

    Examples:
        >>> seen = []
        >>> s = set_write_hook(NonTensorStack("a", "b"), lambda st: seen.append(st.tolist()))
        >>> s[0] = "z"
        >>> seen
        [['z', 'b']]
    """
    stack._hook = hook
    return stack


def is_non_tensor(value: Any) -> bool:
    """``True`` for a ``NonTensorData`` or ``NonTensorStack`` (instance or class)."""
    cls = value if isinstance(value, type) else type(value)
    return issubclass(cls, (NonTensorData, NonTensorStack))


def _parts_index(parts: Sequence[NonTensorData | NonTensorStack]) -> tuple[list, list[torch.Tensor]]:
    items: list = []
    idx = []
    for p in parts:
        n = p.numel()
        if isinstance(p, NonTensorData):
            base = len(items)
            items.append(p.data)
            idx.append(torch.full(tuple(p.batch_size), base, dtype=torch.long))
        else:
            idx.append(torch.arange(len(items), len(items) + n).view(p.batch_size))
            items.extend(p._items)
    return items, idx


def _stack_non_tensor(parts: Sequence[Any], dim: int, collapse: bool = True) -> NonTensorData | NonTensorStack:
    """Stacks non-tensor leaves.

    Equal ``MetaData`` stay one ``MetaData``; equal ``NonTensorData`` collapse to one
    ``NonTensorData`` only under ``set_capture_non_tensor_stack(True)``; anything else
    gives a ``NonTensorStack``.
    """
    if collapse and all(isinstance(p, NonTensorData) for p in parts):
        head = parts[0]
        whole = all(p._keeps_whole for p in parts)
        # an empty result has no element to tell apart: equal values stay one object
        if whole or capture_non_tensor_stack() or not head.batch_size.numel():
            first = head.data
            if all(_same(first, p.data) for p in parts[1:]):
                bs = list(head.batch_size)
                d = dim if dim >= 0 else dim + len(bs) + 1
                bs.insert(d, len(parts))
                return head._rebuild(bs) if whole else NonTensorData(first, bs, head.device)
    items, idx = _parts_index(parts)
    stacked = torch.stack(idx, dim)
    flat = stacked.reshape(-1).tolist()
    return NonTensorStack._from_flat([items[i] for i in flat], stacked.shape, parts[0].device)


def _cat_non_tensor(parts: Sequence[Any], dim: int) -> NonTensorData | NonTensorStack:
    if all(isinstance(p, NonTensorData) for p in parts):
        first = parts[0].data
        if all(_same(first, p.data) for p in parts[1:]):
            bs = list(parts[0].batch_size)
            bs[dim] = sum(p.batch_size[dim] for p in parts)
            return NonTensorData(first, bs, parts[0].device)
    items, idx = _parts_index(parts)
    cat = torch.cat(idx, dim)
    flat = cat.reshape(-1).tolist()
    return NonTensorStack._from_flat([items[i] for i in flat], cat.shape, parts[0].device)
