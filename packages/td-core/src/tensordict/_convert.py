"""Constructors and conversions: ``from_dict``, ``from_any``, ``from_namedtuple``,
``from_tuple``, ``from_dataclass``, ``from_struct_array``, ``from_pytree`` and the way
back (``to_namedtuple``, ``to_struct_array``, ``to_pytree``, ``tolist``, ``numpy``).

``ConvertMixin`` puts them on every TensorDict; the module-level functions of the same
names (``tensordict.from_dict``, ...) forward to ``TensorDict``. Every constructor
goes through one builder (``_convert_build.py``); struct arrays and ``numpy()`` live in
``_convert_numpy.py`` (NumPy is imported only there, when used), the pytree
conversion in ``_convert_pytree.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from tensordict import _classes, _json
from tensordict._convert_build import (
    _check_options,
    _from_any,
    _from_dataclass,
    _from_dict,
    _from_namedtuple,
    _from_tuple,
    _Opts,
)
from tensordict._convert_pytree import from_pytree_impl, to_pytree_impl
from tensordict._deep import trampoline
from tensordict._host import TensorDictHost

if TYPE_CHECKING:
    from tensordict._base import TensorDictBase

__all__ = [
    "ConvertMixin",
    "from_any",
    "from_dataclass",
    "from_dict",
    "from_namedtuple",
    "from_pytree",
    "from_struct_array",
    "from_tuple",
    "fromkeys",
]

_Tensor = torch.Tensor

#: classes built while ``tensordict._pytree`` was not loaded yet (see ``__init_subclass__``)
_PENDING_PYTREE_CLASSES: list[type] = []


# ---------------------------------------------------------------------- the mixin
class ConvertMixin(TensorDictHost):
    """Mixed into TensorDictBase: constructors (``from_*``) and conversions (``to_*``)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        import sys

        pytree = sys.modules.get("tensordict._pytree")
        if pytree is not None and hasattr(pytree, "register_td_class"):
            pytree.register_td_class(cls)
        else:
            _PENDING_PYTREE_CLASSES.append(cls)

    # -------------------------------------------------------------- constructors
    @classmethod
    def from_dict(
        cls,
        input_dict: Any,
        batch_size: Any = None,
        device: Any = None,
        batch_dims: int | None = None,
        *,
        auto_batch_size: bool | None = None,
        names: Sequence[str] | None = None,
    ) -> TensorDictBase:
        """Builds a TensorDict from a (nested) dict.

        Nested dicts become nested TensorDicts, tuple keys are nested keys. Python
        numbers become tensors broadcast over the batch size, numeric lists become
        tensors, a list of other objects becomes a ``NonTensorStack`` when it spans
        a one-dim batch size (non-tensor data otherwise), and other objects become
        non-tensor data.

        Args:
            input_dict (dict): the entries. A TensorDict is returned as it is (the
                keyword arguments are not applied; use ``auto_batch_size_()``).
            batch_size (torch.Size or sequence of int, optional): the batch size, for
                the nested TensorDicts too. Wins over ``auto_batch_size``.
            device (torch.device, optional): leaves are moved there. Defaults to ``None``.
            batch_dims (int, optional): the maximum number of batch dims of the computed
                batch size (each nested level too). Passing it turns ``auto_batch_size`` on.

        Keyword Args:
            auto_batch_size (bool, optional): compute the batch size as the largest
                leading shape that every entry shares (each nested TensorDict gets its
                own). Defaults to ``None``: ``True`` if ``batch_dims`` is given,
                ``False`` (batch size ``[]``) otherwise.
            names (list of str, optional): names of the batch dims.

        Returns:
            a ``TensorDict``.

        Raises:
            TypeError: ``input_dict`` is not a mapping, a key is not a str or a tuple
                of str, or ``batch_size`` and ``batch_dims`` are both given.
            RuntimeError: a value does not start with ``batch_size`` (key and shapes named).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> data = {"a": torch.zeros(3, 4), "b": {"c": torch.zeros(3, 4, 5)}}
            >>> TensorDict.from_dict(data).batch_size
            torch.Size([])
            >>> td = TensorDict.from_dict(data, auto_batch_size=True)
            >>> td.batch_size, td["b"].batch_size
            (torch.Size([3, 4]), torch.Size([3, 4, 5]))
            >>> TensorDict.from_dict(data, batch_dims=1).batch_size
            torch.Size([3])
        """
        return _from_dict(
            input_dict, batch_size, device, batch_dims, auto_batch_size=auto_batch_size, names=names
        )

    def from_dict_instance(
        self,
        input_dict: Any,
        batch_size: Any = None,
        device: Any = None,
        batch_dims: int | None = None,
        *,
        auto_batch_size: bool | None = None,
        names: Sequence[str] | None = None,
    ) -> TensorDictBase:
        """:meth:`from_dict` that follows the layout of ``self``: a nested dict under a
        key where ``self`` holds a tensor collection (a nested TensorDict, a
        tensorclass) is rebuilt with that entry's own ``from_dict_instance``, so
        tensorclasses come back as instances of their class.

        Args:
            input_dict (dict): the entries (e.g. ``self.to_dict()``).
            batch_size, device, batch_dims: as for :meth:`from_dict` (nested entries
                rebuilt from ``self`` get them too, and ``auto_batch_size``).

        Keyword Args:
            auto_batch_size (bool, optional): as for :meth:`from_dict`.
            names (list of str, optional): names of the batch dims.

        Returns:
            a TensorDict of the class :meth:`from_dict` builds.

        Raises:
            TypeError: ``input_dict`` is not a mapping.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict(a=torch.zeros(3), b={"c": torch.ones(3)}, batch_size=[3])
            >>> out = td.from_dict_instance(td.to_dict(), auto_batch_size=True)
            >>> out.batch_size, out["b", "c"].shape
            (torch.Size([3]), torch.Size([3]))
        """
        if not isinstance(input_dict, Mapping):
            msg = f"from_dict_instance expects a mapping, got {type(input_dict).__name__}."
            raise TypeError(msg)
        source = {}
        for key, value in input_dict.items():
            if isinstance(value, Mapping) and key.__class__ is str:
                current = self._get_raw(key, None)
                rebuild = getattr(current, "from_dict_instance", None)
                if rebuild is not None and (
                    isinstance(current, _classes.TensorDictBase) or getattr(current, "_is_tensorclass", False)
                ):
                    value = rebuild(
                        value, batch_size, device, batch_dims, auto_batch_size=auto_batch_size
                    )
            source[key] = value
        return _from_dict(source, batch_size, device, batch_dims, auto_batch_size=auto_batch_size, names=names)

    @classmethod
    def from_any(
        cls,
        obj: Any,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: Any = None,
        batch_size: Any = None,
    ) -> TensorDictBase:
        """Converts a dict, tuple, named tuple, dataclass, NumPy array or h5py file, recursively.

        Dicts go through :meth:`from_dict`, named tuples through
        :meth:`from_namedtuple`, tuples through :meth:`from_tuple` (keys ``"0"``,
        ``"1"``, ...), dataclass instances through :meth:`from_dataclass`, NumPy
        structured arrays through :meth:`from_struct_array` and h5py files through
        ``from_h5`` (td-h5). A tensor or a tensor collection is returned as it is; a
        numeric list or a NumPy array becomes a tensor, another list a
        ``NonTensorStack``; any other object is returned unchanged.

        Keyword Args:
            auto_batch_size (bool): compute the batch size (the largest leading shape
                the entries share). Exclusive with ``batch_size`` except for a dict,
                where ``batch_size`` wins. Defaults to ``False``.
            batch_dims (int, optional): with ``auto_batch_size``, the maximum number of
                batch dims. Ignored (with a FutureWarning) otherwise.
            device (torch.device, optional): leaves are moved there.
            batch_size (torch.Size, optional): the batch size, for nested levels too.

        Raises:
            TypeError: ``auto_batch_size=True`` together with ``batch_size`` (not for a dict).

        Examples:
            >>> import torch
            >>> from collections import namedtuple
            >>> from tensordict import TensorDict
            >>> Point = namedtuple("Point", ["x", "y"])
            >>> td = TensorDict.from_any({"p": Point(torch.zeros(2), torch.ones(2)), "t": (1, 2)})
            >>> sorted(td.keys(True, True))
            [('p', 'x'), ('p', 'y'), ('t', '0'), ('t', '1')]
        """
        return _from_any(
            obj,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            device=device,
            batch_size=batch_size,
        )

    @classmethod
    def from_namedtuple(
        cls,
        named_tuple: Any,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: Any = None,
        batch_size: Any = None,
    ) -> TensorDictBase:
        """Converts a named tuple to a TensorDict, recursively (fields become keys).

        Nested named tuples, tuples, dicts and dataclasses become nested
        TensorDicts (see :meth:`from_any`).

        Keyword Args:
            auto_batch_size (bool): compute the batch size. Exclusive with ``batch_size``.
            batch_dims (int, optional): with ``auto_batch_size``, the maximum number of batch dims.
            device (torch.device, optional): leaves are moved there.
            batch_size (torch.Size, optional): the batch size, for nested levels too.

        Raises:
            TypeError: ``named_tuple`` is not a named tuple, or conflicting keywords.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> data = TensorDict({"a": torch.zeros(3), "nested": {"s": "zero!"}}, [3])
            >>> nt = data.to_namedtuple()
            >>> TensorDict.from_namedtuple(nt, auto_batch_size=True)["nested"].batch_size
            torch.Size([3])
        """
        return _from_namedtuple(
            named_tuple,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            device=device,
            batch_size=batch_size,
        )

    @classmethod
    def from_tuple(
        cls,
        obj: tuple,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: Any = None,
        batch_size: Any = None,
    ) -> TensorDictBase:
        """Converts a tuple to a TensorDict with keys ``"0"``, ``"1"``, ...

        Each element is converted as by :meth:`from_any` (a nested tuple or dict
        becomes a nested TensorDict, a number a tensor).

        Keyword Args:
            auto_batch_size (bool): compute the batch size. Exclusive with ``batch_size``.
            batch_dims (int, optional): with ``auto_batch_size``, the maximum number of batch dims.
            device (torch.device, optional): leaves are moved there.
            batch_size (torch.Size, optional): the batch size, for nested levels too.

        Raises:
            TypeError: ``obj`` is not a tuple, or conflicting keywords.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict.from_tuple((1, 2, 3))
            >>> list(td.keys()), td["0"]
            (['0', '1', '2'], tensor(1))
        """
        return _from_tuple(
            obj,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            device=device,
            batch_size=batch_size,
        )

    @classmethod
    def from_dataclass(
        cls,
        dataclass: Any,
        *,
        dest_cls: type | None = None,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        as_tensorclass: bool = False,
        device: Any = None,
        batch_size: Any = None,
    ) -> TensorDictBase:
        """Converts a dataclass instance to a TensorDict (fields become keys).

        Field values are converted as by :meth:`from_any`.

        Keyword Args:
            dest_cls (type, optional): with ``as_tensorclass=True``, the tensorclass to build.
            auto_batch_size (bool): compute the batch size. Exclusive with ``batch_size``.
            batch_dims (int, optional): with ``auto_batch_size``, the maximum number of batch dims.
            as_tensorclass (bool): return a tensorclass instead (delegates to
                ``tensordict.tensorclass.from_dataclass``, td-tensorclass). Defaults to ``False``.
            device (torch.device, optional): leaves are moved there.
            batch_size (torch.Size, optional): the batch size.

        Raises:
            TypeError: ``dataclass`` is not a dataclass instance.
            ImportError: ``as_tensorclass=True`` without td-tensorclass installed.

        Examples:
            >>> import dataclasses, torch
            >>> from tensordict import TensorDict
            >>> @dataclasses.dataclass
            ... class Obs:
            ...     pixels: torch.Tensor
            ...     step: int
            >>> td = TensorDict.from_dataclass(Obs(torch.zeros(4, 3), 7), auto_batch_size=True, batch_dims=1)
            >>> td.batch_size, td["step"].tolist()
            (torch.Size([4]), [7, 7, 7, 7])
        """
        return _from_dataclass(
            dataclass,
            dest_cls=dest_cls,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            as_tensorclass=as_tensorclass,
            device=device,
            batch_size=batch_size,
        )

    @classmethod
    def from_struct_array(
        cls,
        struct_array: Any,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: Any = None,
        batch_size: Any = None,
    ) -> TensorDictBase:
        """Converts a NumPy structured array to a TensorDict without copying.

        Each field becomes a key. Numeric and bool fields become tensors that share
        the array's memory (in-place changes to the array show in the TensorDict and
        back); nested structured fields become nested TensorDicts; string fields
        (``U``/``S``) become non-tensor data, one string per element. The batch size
        is the array's shape unless told otherwise. A field whose layout torch
        cannot view (non-native byte order, strides not a multiple of the item size)
        is copied, with a warning.

        Keyword Args:
            auto_batch_size (bool): compute the batch size (may go past the array's
                shape into sub-array fields). Exclusive with ``batch_size``.
            batch_dims (int, optional): with ``auto_batch_size``, the maximum number of batch dims.
            device (torch.device, optional): a device other than the CPU copies the data.
            batch_size (torch.Size, optional): a leading part of the array's shape.

        Raises:
            TypeError: ``struct_array`` is not a structured array, or a field has the
                object (or another non-numeric) dtype.
            RuntimeError: ``batch_size`` is not a leading part of the array's shape.

        Examples:
            >>> import numpy as np
            >>> from tensordict import TensorDict
            >>> x = np.array([("Rex", 9, 81.0), ("Fido", 3, 27.0)],
            ...              dtype=[("name", "U10"), ("age", "i4"), ("weight", "f4")])
            >>> td = TensorDict.from_struct_array(x)
            >>> x["age"] += 1
            >>> td["age"].tolist(), list(td["name"])
            ([10, 4], ['Rex', 'Fido'])
            >>> bool((td.to_struct_array() == x).all())
            True
        """
        from tensordict._convert_numpy import from_struct_array_impl  # numpy features load on use

        auto = _check_options(batch_size, auto_batch_size, batch_dims, "from_struct_array")
        return from_struct_array_impl(
            struct_array, _Opts(batch_size, auto, batch_dims, device, any_mode=False)
        )

    @classmethod
    def from_pytree(
        cls,
        pytree: Any,
        *,
        batch_size: Any = None,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
    ) -> TensorDictBase:
        """Converts a pytree (lists, tuples, named tuples, dicts) to a TensorDict that
        :meth:`to_pytree` converts back.

        Each list, tuple, named tuple and dict becomes a nested TensorDict holding
        its type in a ``"_pytree_type"`` entry; list and tuple elements get the keys
        ``"0"``, ``"1"``, ...; dict keys that are not str are kept in a
        ``"_pytree_keys"`` entry (their values go under ``"_pytree_<i>"``). Tensors
        and tensor collections are kept; Python numbers and NumPy arrays become
        tensors (so they come back as tensors); ``str`` and ``None`` become
        non-tensor data.

        Keyword Args:
            batch_size (torch.Size, optional): the batch size (every level).
            auto_batch_size (bool): compute the batch size. Exclusive with ``batch_size``.
            batch_dims (int, optional): with ``auto_batch_size``, the maximum number of batch dims.

        Raises:
            TypeError: a leaf has a type that cannot be stored (the error is also a
                ``NotImplementedError``), or conflicting keywords.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> tree = {"a": [torch.zeros(2), torch.ones(2)], 3: (torch.zeros(()),)}
            >>> td = TensorDict.from_pytree(tree)
            >>> back = td.to_pytree()
            >>> type(back["a"]), type(back[3]), back["a"][1]
            (<class 'list'>, <class 'tuple'>, tensor([1., 1.]))
        """

        auto = _check_options(batch_size, auto_batch_size, batch_dims, "from_pytree")
        return from_pytree_impl(pytree, _Opts(batch_size, auto, batch_dims, None, any_mode=False))

    # -------------------------------------------------------------- conversions
    def to_pytree(self) -> Any:
        """Rebuilds the pytree that :meth:`from_pytree` converted to this TensorDict.

        A TensorDict without a ``"_pytree_type"`` entry (not made by
        :meth:`from_pytree`) is returned as it is, at the top or nested.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict.from_pytree({"a": [torch.zeros(2), torch.ones(2)]}).to_pytree()
            {'a': [tensor([0., 0.]), tensor([1., 1.])]}
        """

        return to_pytree_impl(self)

    def to_namedtuple(self, dest_cls: type | None = None) -> Any:
        """Converts the TensorDict to a named tuple, recursively.

        Each level becomes a ``GenericDict`` named tuple (a class made per call)
        whose fields are the keys; non-tensor data comes back as its object.

        Args:
            dest_cls (type, optional): the named tuple class of the result. A nested
                TensorDict is converted to ``dest_cls`` too if ``dest_cls`` has exactly
                its keys, and to a ``GenericDict`` otherwise.

        Raises:
            ValueError: a key is not a valid field name (a Python identifier not
                starting with ``_``); rename it first or use :meth:`to_dict`.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> data = TensorDict({"a_tensor": torch.zeros(3),
            ...                    "nested": {"a_tensor": torch.zeros(3), "a_string": "zero!"}}, [3])
            >>> data.to_namedtuple()
            GenericDict(a_tensor=tensor([0., 0., 0.]), nested=GenericDict(a_tensor=tensor([0., 0., 0.]), a_string='zero!'))
        """
        return _to_namedtuple(self, dest_cls)

    def to_struct_array(self) -> Any:
        """Converts the TensorDict to a NumPy structured array (a copy).

        The array's shape is the batch size; each entry is a field whose shape is
        the leaf's feature shape; a nested TensorDict is a nested structured field;
        strings become ``U`` fields of at least 10 characters, bytes ``S`` fields.

        Returns:
            numpy.ndarray: with a structured dtype.

        Raises:
            TypeError: a leaf has no NumPy dtype (bfloat16, or a non-tensor object
                other than str, bytes or a number).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([1, 2, 3]), "b": torch.tensor([4.0, 5.0, 6.0])}, [3])
            >>> print(td.to_struct_array())
            [(1, 4.) (2, 5.) (3, 6.)]
        """
        from tensordict._convert_numpy import to_struct_array_impl  # numpy features load on use

        return to_struct_array_impl(self)

    def numpy(self) -> dict:
        """Converts the TensorDict to a (nested) dict of NumPy arrays.

        Tensors are detached and moved to the CPU (no copy for CPU tensors);
        non-tensor data comes back as its object.

        Raises:
            TypeError: a tensor has a dtype NumPy lacks (bfloat16): cast it first.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> data = TensorDict({"a": {"b": torch.zeros(()), "c": "a string!"}})
            >>> data.numpy()
            {'a': {'b': array(0., dtype=float32), 'c': 'a string!'}}
        """
        from tensordict._convert_numpy import numpy_impl  # numpy features load on use

        return numpy_impl(self)

    def tolist(
        self,
        *,
        convert_nodes: bool = True,
        convert_tensors: bool | str = False,
        tolist_first: bool = False,
        as_linked_list: bool = False,
    ) -> list:
        """The elements of the TensorDict as nested lists, one level per batch dim.

        For batch size ``[2, 3]`` the result is a list of 2 lists of 3 elements,
        each ``td[i, j]`` converted with :meth:`to_dict`. A TensorDict without batch
        dims returns one dict.

        Keyword Args:
            convert_nodes (bool): convert the elements to dicts. ``False`` keeps them as
                TensorDicts. Defaults to ``True``.
            convert_tensors (bool or "numpy"): convert tensors to Python lists
                (``"numpy"``: NumPy arrays) too. Requires ``convert_nodes=True``.
                Defaults to ``False``.
            tolist_first (bool): nested TensorDicts with more batch dims than their
                parent become lists of dicts too. Defaults to ``False``.
            as_linked_list (bool): not supported (raises ``NotImplementedError``).

        Raises:
            TypeError: ``convert_tensors=True`` with ``convert_nodes=False``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.arange(4).view(2, 2)}, [2])
            >>> td.tolist(convert_tensors=True)
            [{'a': [0, 1]}, {'a': [2, 3]}]
        """
        if as_linked_list:
            msg = "tolist(as_linked_list=True) is not supported; index the TensorDict to write elements back."
            raise NotImplementedError(msg)
        if convert_tensors and not convert_nodes:
            msg = "tolist: convert_tensors=True requires convert_nodes=True."
            raise TypeError(msg)
        return _tolist(self, convert_nodes, convert_tensors, tolist_first)

    # -------------------------------------------------------------- JSON
    def to_json(self, path: Any, *, separator: str | None = None, lines: bool = False, **kwargs: Any) -> None:
        """Writes the TensorDict as JSON, one record per entry of the first batch dim.

        Row ``i`` is ``{column: value of self[i]}``: a tensor leaf gives its
        ``tolist()`` row (a number, or a nested list for a leaf with more dims),
        ``NonTensorData`` its value on every row, a ``NonTensorStack`` one value per
        row. Written with the standard-library :mod:`json` module (tensordict 0.15
        goes through pandas; the document is pandas' ``orient="records"`` layout).

        Args:
            path (str, os.PathLike or text file object): where to write.

        Keyword Args:
            separator (str, optional): joins the parts of a nested key into a column
                name (``("obs", "x")`` -> ``"obs.x"`` with ``"."``). Required when the
                TensorDict has nested keys. Defaults to ``None``.
            lines (bool): write JSON Lines (one record per line) instead of one JSON
                array. Defaults to ``False``.
            **kwargs: passed to :func:`json.dumps` (e.g. ``indent=2``).

        Raises:
            ValueError: ``batch_size`` is ``[]``, a nested key is present without
                ``separator``, two keys give the same column name, or a lazy stack holds
                a key only some of its stacked TensorDicts have.
            TypeError: a column holds values that JSON cannot encode (column named).

        Examples:
            >>> import io, json, torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"x": torch.arange(2), "obs": {"y": torch.zeros(2)}}, [2])
            >>> buf = io.StringIO()
            >>> td.to_json(buf, separator=".")
            >>> json.loads(buf.getvalue())
            [{'x': 0, 'obs.y': 0.0}, {'x': 1, 'obs.y': 0.0}]
        """
        _json.to_json(self, path, separator=separator, lines=lines, **kwargs)

    @classmethod
    def from_json(
        cls,
        path: Any,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: Any = None,
        batch_size: Any = None,
        separator: str | None = None,
        dtype: Any = None,
        lines: bool = False,
        **kwargs: Any,
    ) -> TensorDictBase:
        """Reads JSON records into a TensorDict whose first batch dim is the rows.

        The document is a JSON array of records (objects), JSON Lines with
        ``lines=True``, or a dict of columns (``{"a": [1, 2]}``, or pandas' default
        ``{"a": {"0": 1, "1": 2}}``). A column of bools gives a ``torch.bool``
        tensor, of ints ``torch.int64``, of numbers (``null`` as NaN)
        ``torch.float64``, of equal-length numeric lists a tensor with the extra dims;
        any other column (strings, mixed values) a ``NonTensorStack``. A nested JSON
        object gives a nested TensorDict. Read with the standard-library :mod:`json`
        module (tensordict 0.15 goes through pandas).

        Args:
            path (str, os.PathLike or text file object): what to read.

        Keyword Args:
            auto_batch_size (bool): after reading, extend the batch size over the
                leading dims all leaves share (``auto_batch_size_``). Defaults to ``False``.
            batch_dims (int, optional): the number of batch dims ``auto_batch_size``
                keeps (passing it turns it on).
            device (torch.device, optional): where the tensors go. Defaults to ``None``.
            batch_size (torch.Size, optional): the batch size; it must start with the
                number of rows. Defaults to ``[number of rows]``.
            separator (str, optional): splits column names into nested keys
                (``"obs.x"`` -> ``("obs", "x")`` with ``"."``). Defaults to ``None``.
            dtype (torch.dtype, optional): the dtype of every tensor column.
            lines (bool): read JSON Lines. Defaults to ``False``.
            **kwargs: passed to :func:`json.loads`.

        Returns:
            a ``TensorDict`` of ``batch_size`` ``[number of rows]`` (or as asked).

        Raises:
            KeyError: the records do not all have the same keys (a key named).
            TypeError: the document is not a list of records or a dict of columns.
            ValueError: invalid JSON (the line named with ``lines=True``), or columns of
                different lengths.

        Examples:
            >>> import io
            >>> from tensordict import TensorDict
            >>> td = TensorDict.from_json(io.StringIO('[{"a": 1, "b": {"c": 0.5}}, {"a": 2, "b": {"c": 1.5}}]'))
            >>> td.batch_size, td["a"].dtype, td["b", "c"]
            (torch.Size([2]), torch.int64, tensor([0.5000, 1.5000], dtype=torch.float64))
        """
        return _json.from_json(
            path,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            device=device,
            batch_size=batch_size,
            separator=separator,
            dtype=dtype,
            lines=lines,
            **kwargs,
        )


def _element_dict(td: Any, convert_tensors: bool | str, tolist_first: bool) -> dict:
    out = {}
    for key, value in td._items_raw():
        if isinstance(value, _classes.TensorDictBase):
            if tolist_first and value.batch_dims > td.batch_dims:
                out[key] = _tolist(value, True, convert_tensors, True, td.batch_dims)
            else:
                out[key] = _element_dict(value, convert_tensors, tolist_first)
        elif isinstance(value, _Tensor):
            if convert_tensors == "numpy":
                out[key] = value.detach().cpu().numpy()
            else:
                out[key] = value.tolist() if convert_tensors else value
        else:
            out[key] = td._unwrap_leaf(value)
    return out


def _tolist(
    td: Any, convert_nodes: bool, convert_tensors: bool | str, tolist_first: bool, start: int = 0
) -> Any:
    if td.batch_dims <= start:
        return _element_dict(td, convert_tensors, tolist_first) if convert_nodes else td
    return [
        _tolist(sub, convert_nodes, convert_tensors, tolist_first, start)
        for sub in td.unbind(start)
    ]


def _to_namedtuple(td: Any, dest_cls: type | None) -> Any:
    return trampoline(_namedtuple_node, td, dest_cls)


def _namedtuple_node(td: Any, dest_cls: type | None) -> Any:
    """One level of :meth:`to_namedtuple`, as a node generator for
    :func:`~tensordict._deep.trampoline` (nested TensorDicts are yielded: any depth)."""
    import collections

    keys = list(td._keys_raw())
    for key in keys:
        if not key.isidentifier() or key.startswith("_"):
            msg = (
                f"to_namedtuple: key {key!r} is not a valid named tuple field (a Python identifier "
                "not starting with '_'). Rename it with td.rename_key_(...) or use td.to_dict()."
            )
            raise ValueError(msg)
    values = []
    for _, value in td._items_raw():
        if isinstance(value, _classes.TensorDictBase):
            sub_cls = (
                dest_cls
                if dest_cls is not None
                and set(getattr(dest_cls, "_fields", ())) == set(value._keys_raw())
                else None
            )
            values.append((yield (value, sub_cls)))
        elif isinstance(value, _Tensor):
            values.append(value)
        elif value.__class__ is _classes.NonTensorStack:
            values.append(value.tolist())  # a plain list, as tensordict 0.15 (not a linked one)
        else:
            values.append(td._unwrap_leaf(value))
    cls = dest_cls if dest_cls is not None else collections.namedtuple("GenericDict", keys)
    return cls(**dict(zip(keys, values)))


# ---------------------------------------------------------------------- module level
def from_dict(
    input_dict: Any,
    batch_size: Any = None,
    device: Any = None,
    batch_dims: int | None = None,
    *,
    auto_batch_size: bool | None = None,
    names: Sequence[str] | None = None,
) -> Any:
    """Builds a TensorDict from a (nested) dict; see :meth:`TensorDictBase.from_dict`.

    Examples:
        >>> import torch
        >>> from tensordict import from_dict
        >>> from_dict({"a": torch.zeros(3, 4), "b": torch.zeros(3)}, auto_batch_size=True).batch_size
        torch.Size([3])
    """
    return _from_dict(
        input_dict, batch_size, device, batch_dims, auto_batch_size=auto_batch_size, names=names
    )


def from_any(
    obj: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Any = None,
) -> Any:
    """Converts a dict, tuple, dataclass, array or file to a TensorDict; see :meth:`TensorDictBase.from_any`.

    Examples:
        >>> from tensordict import from_any
        >>> from_any((1, 2))["1"]
        tensor(2)
    """
    return _from_any(
        obj,
        auto_batch_size=auto_batch_size,
        batch_dims=batch_dims,
        device=device,
        batch_size=batch_size,
    )


def from_namedtuple(
    named_tuple: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Any = None,
) -> Any:
    """Converts a named tuple to a TensorDict; see :meth:`TensorDictBase.from_namedtuple`.

    Examples:
        >>> import torch
        >>> from collections import namedtuple
        >>> from tensordict import from_namedtuple
        >>> P = namedtuple("P", ["x"])
        >>> from_namedtuple(P(torch.zeros(2)), auto_batch_size=True).batch_size
        torch.Size([2])
    """
    return _from_namedtuple(
        named_tuple,
        auto_batch_size=auto_batch_size,
        batch_dims=batch_dims,
        device=device,
        batch_size=batch_size,
    )


def from_tuple(
    obj: tuple,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Any = None,
) -> Any:
    """Converts a tuple to a TensorDict (keys ``"0"``, ``"1"``, ...); see :meth:`TensorDictBase.from_tuple`.

    Examples:
        >>> from tensordict import from_tuple
        >>> list(from_tuple((1, (2, 3))).keys(True, True))
        ['0', ('1', '0'), ('1', '1')]
    """
    return _from_tuple(
        obj,
        auto_batch_size=auto_batch_size,
        batch_dims=batch_dims,
        device=device,
        batch_size=batch_size,
    )


def from_dataclass(dataclass: Any, **kwargs: Any) -> Any:
    """Converts a dataclass instance to a TensorDict; see :meth:`TensorDictBase.from_dataclass`.

    (``tensordict.from_dataclass`` at the top level is td-tensorclass's, which
    returns a tensorclass.)
    """
    return _from_dataclass(dataclass, **kwargs)


def from_struct_array(
    struct_array: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Any = None,
) -> Any:
    """Converts a NumPy structured array to a TensorDict without copying; see
    :meth:`TensorDictBase.from_struct_array`.

    Examples:
        >>> import numpy as np
        >>> from tensordict import from_struct_array
        >>> x = np.zeros(3, dtype=[("a", "f8"), ("b", "i8")])
        >>> td = from_struct_array(x)
        >>> x["a"] = 1.0
        >>> td["a"]
        tensor([1., 1., 1.], dtype=torch.float64)
    """

    return _classes.TensorDict.from_struct_array(
        struct_array,
        auto_batch_size=auto_batch_size,
        batch_dims=batch_dims,
        device=device,
        batch_size=batch_size,
    )


def from_pytree(
    pytree: Any,
    *,
    batch_size: Any = None,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
) -> Any:
    """Converts a pytree to a TensorDict; see :meth:`TensorDictBase.from_pytree`.

    Examples:
        >>> import torch
        >>> from tensordict import from_pytree
        >>> from_pytree([torch.zeros(3), torch.ones(3)], auto_batch_size=True).batch_size
        torch.Size([3])
    """

    return _classes.TensorDict.from_pytree(
        pytree, batch_size=batch_size, auto_batch_size=auto_batch_size, batch_dims=batch_dims
    )


def fromkeys(keys: Sequence[Any], value: Any = 0) -> Any:
    """A TensorDict (batch size ``[]``) with every key of ``keys`` set to ``value``.

    Examples:
        >>> from tensordict import fromkeys
        >>> list(fromkeys(["a", ("b", "c")], 1).keys(True, True))
        ['a', ('b', 'c')]
    """

    return _classes.TensorDict.fromkeys(keys, value)
