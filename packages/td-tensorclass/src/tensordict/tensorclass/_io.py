"""Constructors, stacking and saving for tensorclasses.

The ``from_*`` class methods build a TensorDict with the TensorDict class method of
the same name (td-core, or the sibling that provides it: ``from_h5`` from td-h5,
``from_remote_init`` from td-distributed) and turn it into an instance with
``from_tensordict``. The memmap family runs through td-memmap on a TensorDict that
also holds the non-tensor fields, so that they are saved and loaded back too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tensordict.ext import NonTensorData, TensorDict, TensorDictBase
from tensordict.tensorclass._storage import _resync, _Slots

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import Self

__all__: list[str] = []


def _td_classmethod(name: str) -> Any:
    try:
        return getattr(TensorDict, name)
    except AttributeError:
        msg = f"TensorDict.{name} is not provided by the installed td-core; it is needed by the tensorclass method {name}."
        raise AttributeError(msg) from None


def _deep_full(obj: Any) -> TensorDict:
    """A TensorDict tree over ``obj``'s fields (leaves shared, not copied): nested
    instances become nested TensorDicts, non-tensor fields ``NonTensorData``."""
    td = obj._tensordict
    bs, device = td.batch_size, td.device
    source: dict = {}
    for key, value in td._items_raw():
        source[key] = _deep_full(value) if isinstance(value, _Slots) else value
    for key, value in obj._non_tensordict.items():
        source[key] = NonTensorData(value, bs, device)
    return TensorDict._new_unsafe(source, bs, device, td.names if td._has_names() else None)


def _call_full(obj: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    """Runs ``TensorDict.<name>`` on the whole field tree (``_deep_full``): the method sees
    nested instances and non-tensor fields; what it rebinds in the tree is written back;
    a TensorDict result with this class's fields comes back as an instance."""
    deep = _deep_full(obj)
    try:
        fn = getattr(deep, name)
    except AttributeError:
        msg = f"{type(obj).__name__}.{name}() runs TensorDict.{name}(), which the installed td-core does not provide."
        raise AttributeError(msg) from None
    out = fn(*args, **kwargs)
    _assign_from(obj, deep)
    if out is deep:
        return obj
    cls = type(obj)
    if isinstance(out, TensorDictBase) and cls._tc_field_set.issuperset(out._keys_raw()):
        return cls.from_tensordict(out)
    return out


def _assign_from(obj: Any, tree: Any) -> None:
    """Writes the entries of ``tree`` (as built by ``_deep_full``) back into ``obj``."""
    td = obj._tensordict
    nt = obj._non_tensordict
    for key, value in tree._items_raw():
        current = td._get_raw(key, None)
        if isinstance(current, _Slots) and isinstance(value, TensorDictBase):
            _assign_from(current, value)
            continue
        if value.__class__ is NonTensorData:
            if current is not None:
                td._del_raw(key)
            nt[key] = value.data
        elif current is not value:
            td._set_raw(key, value)
            nt.pop(key, None)
    _resync(obj)


if TYPE_CHECKING:  # pragma: no cover - the instance layout the mixin reads (type checkers only)
    _MixinBase = _Slots
else:
    _MixinBase = object


class _IOMixin(_MixinBase):
    """Constructors (``from_*``), stacking class methods and the memmap family."""

    __slots__ = ()

    if TYPE_CHECKING:  # pragma: no cover
        _tensordict: Any
        _non_tensordict: dict

        @classmethod
        def from_tensordict(cls, tensordict: Any, non_tensordict: dict | None = None, safe: bool = True) -> Self: ...

    @classmethod
    def _from_result(cls, out: Any) -> Any:
        if isinstance(out, cls):
            return out
        if isinstance(out, TensorDictBase):
            return cls.from_tensordict(out)
        return out

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_dict(cls, input_dict: Any, *args: Any, **kwargs: Any) -> Self:
        """An instance from a dict of fields (``TensorDict.from_dict`` keywords apply:
        ``batch_size``, ``auto_batch_size``, ``batch_dims``, ``device``). Nested dicts
        under fields annotated with a tensorclass become instances of it.

        Raises:
            KeyError: a key of ``input_dict`` is not a field.
        """
        return cls._from_result(_td_classmethod("from_dict")(input_dict, *args, **kwargs))

    def from_dict_instance(
        self,
        input_dict: Any,
        batch_size: Any = None,
        device: Any = None,
        batch_dims: int | None = None,
        *,
        auto_batch_size: bool | None = None,
        names: Any = None,
    ) -> Self:
        """An instance of this class from a dict of fields (e.g. ``obj.to_dict()``), built
        through the constructor (so ``autocast`` applies); a nested dict under a field
        that holds a tensorclass or TensorDict in ``self`` is rebuilt like that value.

        Args:
            input_dict (dict): field values.
            batch_size (torch.Size, optional): the batch size; with ``auto_batch_size``
                the longest leading shape the tensor fields share (at most
                ``batch_dims`` dims) is used instead.
            device (torch.device, optional): device of the new instance.

        Raises:
            KeyError: a key of ``input_dict`` is not a field.

        Examples:
            >>> import torch
            >>> from tensordict.tensorclass import TensorClass
            >>> class P(TensorClass):
            ...     x: torch.Tensor
            ...     tag: str = "a"
            >>> p = P(x=torch.zeros(3), batch_size=[3])
            >>> q = p.from_dict_instance(p.to_dict(), auto_batch_size=True)
            >>> type(q).__name__, q.batch_size, q.tag
            ('P', torch.Size([3]), 'a')
        """
        cls: Any = type(self)  # a tensorclass: its constructor takes the fields
        values = {}
        for key, value in input_dict.items():
            if key not in cls._tc_field_set:
                msg = f"{cls.__name__}.from_dict_instance: {key!r} is not a field (fields: {list(cls._tc_fields)})."
                raise KeyError(msg)
            if isinstance(value, dict):
                current = self.get(key)
                rebuild = getattr(current, "from_dict_instance", None)
                if rebuild is not None:
                    value = rebuild(value, batch_size, device, batch_dims, auto_batch_size=auto_batch_size)
            values[key] = value
        auto = auto_batch_size or (auto_batch_size is None and batch_dims is not None)
        out = cls(**values, batch_size=None if auto else batch_size, device=device)
        if auto:
            out._tensordict.auto_batch_size_(batch_dims)
        if names is not None:
            out.names = names
        return out

    @classmethod
    def from_any(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        """``TensorDict.from_any`` then :meth:`from_tensordict`."""
        return cls._from_result(_td_classmethod("from_any")(obj, *args, **kwargs))

    @classmethod
    def from_tuple(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        """``TensorDict.from_tuple`` then :meth:`from_tensordict`."""
        return cls._from_result(_td_classmethod("from_tuple")(obj, *args, **kwargs))

    @classmethod
    def from_namedtuple(cls, named_tuple: Any, *args: Any, **kwargs: Any) -> Self:
        """``TensorDict.from_namedtuple`` then :meth:`from_tensordict`."""
        return cls._from_result(_td_classmethod("from_namedtuple")(named_tuple, *args, **kwargs))

    @classmethod
    def from_struct_array(cls, struct_array: Any, *args: Any, **kwargs: Any) -> Self:
        """``TensorDict.from_struct_array`` (zero-copy) then :meth:`from_tensordict`."""
        return cls._from_result(_td_classmethod("from_struct_array")(struct_array, *args, **kwargs))

    @classmethod
    def from_pytree(cls, pytree: Any, *args: Any, **kwargs: Any) -> Self:
        """``TensorDict.from_pytree`` then :meth:`from_tensordict` (the entries
        ``from_pytree`` adds to record the pytree's node types are dropped)."""
        td = _td_classmethod("from_pytree")(pytree, *args, **kwargs)
        if isinstance(td, TensorDictBase):
            bookkeeping = [k for k in td.keys() if k.startswith("_") and k not in cls._tc_field_set]
            if bookkeeping:
                td = td.exclude(*bookkeeping)
        return cls._from_result(td)

    @classmethod
    def from_h5(cls, filename: Any, *args: Any, **kwargs: Any) -> Self:
        """An instance over an HDF5 file (td-h5's ``PersistentTensorDict``)."""
        return cls._from_result(_td_classmethod("from_h5")(filename, *args, **kwargs))

    @classmethod
    def from_modules(cls, *modules: Any, **kwargs: Any) -> Self:
        """``TensorDict.from_modules`` then :meth:`from_tensordict`."""
        return cls._from_result(_td_classmethod("from_modules")(*modules, **kwargs))

    @classmethod
    def fromkeys(cls, keys: Sequence[Any], value: Any = 0) -> Self:
        """An instance with every field in ``keys`` set to ``value`` (batch_size ``[]``)."""
        return cls._from_result(_td_classmethod("fromkeys")(keys, value))

    # ------------------------------------------------------------------ stacking
    @classmethod
    def stack(cls, input: Sequence[Any], dim: int = 0, *, out: Any = None, **kwargs: Any) -> Self:
        """Stacks instances along a new batch dim ``dim`` (same as ``torch.stack``).

        Non-tensor fields that are equal stay one value; differing ones become a
        ``NonTensorStack``.

        Examples:
            >>> import torch
            >>> from tensordict.tensorclass import TensorClass
            >>> class P(TensorClass):
            ...     x: torch.Tensor
            >>> P.stack([P(x=torch.zeros(3), batch_size=[3])] * 2, 1).batch_size
            torch.Size([3, 2])
        """
        from tensordict.tensorclass._torch_fn import stack_instances

        return stack_instances(input, dim, out=out, **kwargs)

    @classmethod
    def cat(cls, input: Sequence[Any], dim: int = 0, *, out: Any = None) -> Self:
        """Concatenates instances along batch dim ``dim`` (same as ``torch.cat``)."""
        from tensordict.tensorclass._torch_fn import cat_instances

        return cat_instances(input, dim, out=out)

    @classmethod
    def lazy_stack(cls, input: Sequence[Any], dim: int = 0, *, out: Any = None, **kwargs: Any) -> Self:
        """Stacks instances lazily (a ``LazyStackedTensorDict`` inside)."""
        from tensordict.tensorclass._torch_fn import stack_instances

        return stack_instances(input, dim, out=out, how="lazy_stack", **kwargs)

    @classmethod
    def maybe_dense_stack(cls, input: Sequence[Any], dim: int = 0, *, out: Any = None, **kwargs: Any) -> Self:
        """Stacks densely when the instances' shapes allow it, lazily otherwise."""
        from tensordict.tensorclass._torch_fn import stack_instances

        return stack_instances(input, dim, out=out, how="maybe_dense_stack", **kwargs)

    # ------------------------------------------------------------------ memmap family
    def memmap(
        self,
        prefix: Any = None,
        copy_existing: bool = False,
        *,
        num_threads: int = 0,
        return_early: bool = False,
        share_non_tensor: bool = False,
        existsok: bool = True,
    ) -> Self:
        """Writes every field to memory-mapped files under ``prefix`` (td-memmap) and
        returns a locked instance backed by them.

        The store records the class: ``MyData.load_memmap(prefix)`` and
        ``TensorDict.load_memmap(prefix)`` both give a ``MyData`` back. Non-tensor
        fields are saved too (as JSON when they can be).

        Args:
            prefix (str or Path, optional): the folder; ``None`` uses anonymous
                shared memory.
            copy_existing (bool): copy tensors already memory-mapped elsewhere.

        Raises:
            ImportError: td-memmap is not installed.

        Examples:
            >>> import tempfile, torch
            >>> from tensordict import TensorDict
            >>> from tensordict.tensorclass import TensorClass
            >>> class Sample(TensorClass):
            ...     x: torch.Tensor
            ...     tag: str = "a"
            >>> with tempfile.TemporaryDirectory() as path:
            ...     _ = Sample(x=torch.arange(3), batch_size=[3]).memmap(path)
            ...     back = Sample.load_memmap(path)
            ...     (type(back).__name__, back.x.tolist(), back.tag)
            ('Sample', [0, 1, 2], 'a')
        """
        from tensordict.tensorclass._memmap import save_instance

        return save_instance(
            self,
            "memmap",
            prefix,
            copy_existing,
            num_threads=num_threads,
            return_early=return_early,
            share_non_tensor=share_non_tensor,
            existsok=existsok,
        )

    def memmap_(self, prefix: Any = None, copy_existing: bool = False, **kwargs: Any) -> Self:
        """Like :meth:`memmap`, in place: the fields become memory-mapped; returns ``self``."""
        from tensordict.tensorclass._memmap import save_instance

        if prefix is None:
            prefix = getattr(self._tensordict, "_saved_path", None)
        return save_instance(self, "memmap_", prefix, copy_existing, **kwargs)

    def memmap_like(self, prefix: Any = None, copy_existing: bool = False, **kwargs: Any) -> Self:
        """An instance of memory-mapped, zero-filled fields shaped like these (nothing
        is copied)."""
        from tensordict.tensorclass._memmap import save_instance

        return save_instance(self, "memmap_like", prefix, copy_existing, **kwargs)

    def save(self, prefix: Any = None, *args: Any, **kwargs: Any) -> Self:
        """Saves to disk: a proxy of :meth:`memmap`."""
        from tensordict.tensorclass._memmap import save_instance

        return save_instance(self, "save", prefix, *args, **kwargs)

    def dumps(self, prefix: Any = None, *args: Any, **kwargs: Any) -> Self:
        """Saves to disk: a proxy of :meth:`memmap`."""
        from tensordict.tensorclass._memmap import save_instance

        return save_instance(self, "dumps", prefix, *args, **kwargs)

    def load_memmap_(self, prefix: Any, *args: Any, **kwargs: Any) -> Self:
        """Loads the store at ``prefix`` into this instance (in place); returns ``self``."""
        from tensordict.tensorclass._memmap import load_instance

        return load_instance(type(self), "load_memmap", prefix, *args, out=self, **kwargs)

    def load_(self, prefix: Any, *args: Any, **kwargs: Any) -> Self:
        """Loads the store at ``prefix`` into this instance: a proxy of :meth:`load_memmap_`."""
        return self.load_memmap_(prefix, *args, **kwargs)

    def memmap_refresh_(self) -> Self:
        """Re-reads the instance's folder (``saved_path``), e.g. after another process
        saved it again.

        Raises:
            RuntimeError: the instance was not memory-mapped to a folder.
        """
        from tensordict.tensorclass._memmap import refresh_instance

        return refresh_instance(self)

    @classmethod
    def load_memmap(cls, prefix: Any, device: Any = None, non_blocking: bool = False, *, out: Any = None, **kwargs: Any) -> Self:
        """An instance of this class loaded from a folder written by :meth:`memmap`.

        A folder written from a TensorDict whose keys are fields of this class loads
        too. Keyword arguments of td-memmap's ``load_memmap`` (``allow_pickle``) apply.

        Raises:
            ImportError: td-memmap is not installed.
            FileNotFoundError: no store at ``prefix``.
            TypeError: the folder holds another tensorclass.
            KeyError: the folder holds keys that are not fields of this class.
        """
        from tensordict.tensorclass._memmap import load_instance

        return load_instance(cls, "load_memmap", prefix, device, non_blocking, out=out, **kwargs)

    @classmethod
    def load(cls, prefix: Any, *args: Any, **kwargs: Any) -> Self:
        """Loads an instance saved with :meth:`save`: a proxy of :meth:`load_memmap`."""
        return cls.load_memmap(prefix, *args, **kwargs)

    # ------------------------------------------------------------------ whole-tree writers
    # They see every field, non-tensor ones included (as ``NonTensorData`` leaves), so a
    # ``str`` field is written to the file like a tensor field.
    def consolidate(self, *args: Any, **kwargs: Any) -> Self:
        """:meth:`TensorDict.consolidate` of every field, non-tensor fields included (they
        are written to ``filename`` too); returns an instance of this class."""
        return _call_full(self, "consolidate", *args, **kwargs)

    def to_h5(self, *args: Any, **kwargs: Any) -> Any:
        """Writes every field, non-tensor fields included, to an HDF5 file (td-h5); returns
        an instance of this class over the file."""
        return _call_full(self, "to_h5", *args, **kwargs)

    def to_store(self, *args: Any, **kwargs: Any) -> Any:
        """Uploads every field, non-tensor fields included, to a Redis-protocol server
        (td-store); returns an instance of this class over a ``TensorDictStore``. The
        class's name is stored with the data, so ``TensorDictStore.from_store`` gives an
        instance of it back where the class is imported."""
        from tensordict.tensorclass._registry import tensorclass_name

        kwargs.setdefault("tensorclass", tensorclass_name(type(self)))
        return _call_full(self, "to_store", *args, **kwargs)

    @property
    def _consolidated(self) -> Any:
        # upstream code probes ``hasattr(obj, "_consolidated")`` on consolidated instances
        state = getattr(self._tensordict, "_consolidated", None)
        if state is None:
            msg = f"{type(self).__name__} instance is not consolidated."
            raise AttributeError(msg)
        return state

    # ------------------------------------------------------------------ distributed
    # td-distributed's point-to-point and collective methods see every field (nested
    # instances and non-tensor fields included); received values are written back.
    def init_remote(self, *args: Any, **kwargs: Any) -> None:
        """Sends the instance to a rank that calls :meth:`from_remote_init` (td-distributed).

        The class's registered name travels with the data: a receiver that calls
        ``TensorDict.from_remote_init`` gets an instance of this class when the class
        is registered (defined or imported) in its process."""
        from tensordict.tensorclass._registry import tensorclass_name

        kwargs.setdefault("tensorclass", tensorclass_name(type(self)))
        return _call_full(self, "init_remote", *args, **kwargs)

    def send(self, *args: Any, **kwargs: Any) -> Any:
        """Sends the fields to a rank that calls :meth:`recv` (td-distributed)."""
        return _call_full(self, "send", *args, **kwargs)

    def isend(self, *args: Any, **kwargs: Any) -> Any:
        """Non-blocking :meth:`send` (td-distributed)."""
        return _call_full(self, "isend", *args, **kwargs)

    def recv(self, *args: Any, **kwargs: Any) -> Any:
        """Receives into this instance what another rank :meth:`send` s (td-distributed)."""
        return _call_full(self, "recv", *args, **kwargs)

    def irecv(self, *args: Any, **kwargs: Any) -> Any:
        """Non-blocking :meth:`recv` into this instance's tensors (td-distributed)."""
        return _call_full(self, "irecv", *args, **kwargs)

    @classmethod
    def from_remote_init(cls, *args: Any, **kwargs: Any) -> Self:
        """Receives an instance sent with :meth:`init_remote` (td-distributed)."""
        return cls._from_result(_td_classmethod("from_remote_init")(*args, **kwargs))

