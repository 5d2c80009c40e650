"""``MemoryMappedTensor``: a ``torch.Tensor`` whose storage is a file mapped in
memory, or anonymous shared memory when no file is given.

Design:

- The object *is* a tensor (``torch.Tensor`` subclass sharing the mapped storage),
  so every torch op works on it. Results that are views of the same storage
  (indexing with slices/ints, ``view``, ``permute``, ``unbind``...) come back as
  ``MemoryMappedTensor`` with the same file; results with new storage (arithmetic,
  advanced indexing, ``clone``) are plain tensors.
- Pickling a file-backed tensor (or any view of one) sends the file name, the
  storage size, the dtype, the storage offset, the shape and the strides; never the
  data. The receiver maps the same file. Anonymous tensors are shared through
  ``torch.multiprocessing`` (their storage's file descriptor) and copied by plain
  ``pickle``.
- Small anonymous tensors are carved out of shared-memory slabs, so that creating
  one costs about as much as ``torch.empty`` rather than a ``shm_open`` each.
"""

from __future__ import annotations

import math
import operator
import os
import sys
import threading
import weakref
from multiprocessing.reduction import ForkingPickler
from typing import Any

import torch

from tensordict.memmap._fileio import (
    allocate,
    check_file,
    dtype_from_name,
    dtype_name,
    map_storage,
    run_jobs,
    tensor_on,
    write_tensor_jobs,
)

__all__ = ["MemoryMappedTensor"]

_DisableTF = torch._C.DisableTorchFunctionSubclass
_Tensor = torch.Tensor
_new_tensor = torch.Tensor.__new__
#: memory-mapped and shared memory is CPU memory, whatever the default device (``torch.device`` context)
_CPU = torch.device("cpu")


# --------------------------------------------------------------------------- shared memory
class _Shm:
    """An anonymous shared-memory segment (Linux ``memfd``), mapped lazily.

    Pages are allocated on first write, so a huge ``empty`` costs no RAM. The
    file descriptor is kept so that ``torch.multiprocessing`` can hand the segment
    to another process (the receiver maps the same memory); forked children share
    it too. Where ``memfd_create`` is missing, an anonymous ``mmap`` is used (then
    sharing across processes falls back to torch's own mechanism).
    """

    __slots__ = ("fd", "nbytes", "storage", "__weakref__")

    def __init__(self, nbytes: int, fd: int | None = None) -> None:
        self.nbytes = nbytes
        self.fd = -1
        if fd is None and hasattr(os, "memfd_create"):
            fd = os.memfd_create("tensordict-memmap", os.MFD_CLOEXEC)
            try:
                os.ftruncate(fd, nbytes)
            except BaseException:
                os.close(fd)
                raise
        if fd is not None:
            self.fd = fd
            self.storage = torch.UntypedStorage.from_file(f"/proc/self/fd/{fd}", True, nbytes)
        else:  # pragma: no cover - non-Linux
            import mmap

            buf = mmap.mmap(-1, nbytes)
            self.storage = torch.frombuffer(buf, dtype=torch.uint8).untyped_storage()

    def __del__(self) -> None:
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1


class _SlabPool:
    """Bump allocator over shared-memory slabs for small anonymous tensors.

    A slab lives as long as one tensor cut from it lives (tensors hold it).
    Slabs are never reused, so no tensor can see another's bytes.
    """

    SLAB = 16 << 20
    MAX = 256 << 10
    ALIGN = 64

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slab: _Shm | None = None
        self._pos = 0

    def _forget(self) -> None:
        """In a forked child: the parent keeps allocating from its slab, the child starts a new one.

        The lock is replaced too: another thread of the parent may have held it at the fork.
        """
        self._lock = threading.Lock()
        self._slab = None
        self._pos = 0

    def alloc(self, nbytes: int) -> tuple[_Shm, int]:
        size = (nbytes + self.ALIGN - 1) & -self.ALIGN
        with self._lock:
            slab = self._slab
            pos = self._pos
            if slab is None or pos + size > self.SLAB:
                slab = self._slab = _Shm(self.SLAB)
                pos = 0
            self._pos = pos + size
            return slab, pos


_POOL = _SlabPool()
_SLAB, _SMALL, _ALIGN = _SlabPool.SLAB, _SlabPool.MAX, _SlabPool.ALIGN
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_POOL._forget)

#: element counts of shapes already validated by ``_parse_shape`` (tuples of non-negative
#: ints), so that ``empty``/``zeros``/``from_tensor`` of a shape seen before skip the checks
_NUMELS: dict[tuple, int] = {}
_NUMELS_MAX = 4096


def _remember_shape(shape: tuple) -> None:
    """Records a shape ``_parse_shape`` accepted, for ``empty``'s fast path."""
    if len(_NUMELS) >= _NUMELS_MAX:
        _NUMELS.clear()
    _NUMELS[shape] = math.prod(shape)


def _anonymous(shape: tuple, dtype: torch.dtype) -> tuple[torch.Tensor, _Shm | None]:
    """A zero-filled tensor in shared memory (a plain ``torch.Tensor``) and its segment."""
    itemsize = dtype.itemsize
    nbytes = math.prod(shape) * itemsize
    if nbytes > _MAX_NUMEL:
        msg = f"shape {shape} of {dtype} needs {nbytes} bytes (elements x itemsize), more than memory can address."
        raise ValueError(msg)
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype, device=_CPU), None
    if nbytes <= _SlabPool.MAX:
        shm, pos = _POOL.alloc(nbytes)
        return torch.empty(0, dtype=dtype, device=_CPU).set_(shm.storage, pos // itemsize, shape), shm  # type: ignore[call-overload]
    shm = _Shm(nbytes)
    return torch.empty(0, dtype=dtype, device=_CPU).set_(shm.storage, 0, shape), shm  # type: ignore[call-overload]


# --------------------------------------------------------------------------- helpers
_MAX_NUMEL = (1 << 63) - 1


def _parse_shape(size: tuple, shape: Any = None) -> tuple:
    if shape is not None:
        if size:
            msg = "pass the shape either positionally or as `shape=`, not both."
            raise TypeError(msg)
        size = (shape,)
    elif not size:
        msg = "a shape is required: pass it positionally (`empty(2, 3)` or `empty((2, 3))`) or as `shape=`."
        raise TypeError(msg)
    if len(size) == 1 and not isinstance(size[0], int):
        if isinstance(size[0], torch.Tensor) and size[0].ndim == 0:
            pass
        else:
            try:
                size = tuple(size[0])
            except TypeError:
                msg = f"shape must be a sequence of ints, got {type(size[0]).__name__} {size[0]!r}."
                raise TypeError(msg) from None
    out = []
    for s in size:
        try:
            out.append(operator.index(s))
        except TypeError:
            msg = f"shape must hold ints; got {type(s).__name__} {s!r} in {tuple(size)!r}."
            raise TypeError(msg) from None
    out = tuple(out)  # type: ignore[assignment]
    if any(s < 0 for s in out):
        msg = f"negative dimension in shape {out}."
        raise ValueError(msg)
    if any(s > _MAX_NUMEL for s in out):
        msg = f"shape {out} has a dimension beyond int64 (2**63 - 1)."
        raise ValueError(msg)
    if math.prod(out) > _MAX_NUMEL:
        msg = f"shape {out} has {math.prod(out)} elements, more than a tensor can index (2**63 - 1)."
        raise ValueError(msg)
    _remember_shape(out)  # type: ignore[arg-type]
    return out  # type: ignore[return-value]


def _check_device(device: Any) -> None:
    if device is not None and torch.device(device).type != "cpu":
        msg = (
            f"a MemoryMappedTensor lives in CPU memory (a mapped file or shared memory); got device={device!r}. "
            "Create it on the CPU and move the result with `.to(device)`."
        )
        raise RuntimeError(msg)


def _abs(filename: Any) -> str:
    return os.path.abspath(os.fspath(filename))


def _wrap(tensor: torch.Tensor, filename: str | None, shm: _Shm | None = None) -> MemoryMappedTensor:
    out = _Tensor._make_subclass(MemoryMappedTensor, tensor)
    if filename is not None:
        out._filename = filename
    if shm is not None:
        out._shm = shm
    return out


def _adopt(tensor: torch.Tensor, filename: str | None, shm: _Shm | None = None) -> MemoryMappedTensor:
    """``_wrap`` for a plain tensor made just now by the caller (``tensor_on``): nobody else
    holds it, so its class is changed in place instead of aliasing it a second time."""
    tensor.__class__ = MemoryMappedTensor
    if filename is not None:
        tensor._filename = filename  # type: ignore[attr-defined]
    if shm is not None:
        tensor._shm = shm  # type: ignore[attr-defined]
    return tensor  # type: ignore[return-value]


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    pa = a.untyped_storage().data_ptr()
    return pa != 0 and pa == b.untyped_storage().data_ptr()


def _retype(ret: torch.Tensor, src: MemoryMappedTensor) -> MemoryMappedTensor:
    """``ret``, a new plain tensor viewing ``src``'s memory, as a ``MemoryMappedTensor`` of the same file.

    ``ret`` is made by the op that just returned it (nobody else holds it), so its
    class is changed in place instead of wrapping it in a second tensor. A view of a
    tensor that requires grad is wrapped detached, as before.
    """
    if ret.requires_grad:
        return _wrap(ret, src._filename, src._shm)
    return _adopt(ret, src._filename, src._shm)


def _rewrap(ret: Any, src: MemoryMappedTensor) -> Any:
    cls = ret.__class__
    if cls is _Tensor:
        # a view shares its base's storage: no need to compare storages (two storage objects)
        if ret._is_view() or _same_storage(ret, src):
            return _retype(ret, src)
        return ret
    if cls is tuple or cls is list:  # unbind, split, chunk...: usually every item a view
        filename, shm = src._filename, src._shm
        items = []
        for r in ret:
            if r.__class__ is _Tensor and (r._is_view() or _same_storage(r, src)):
                if r.requires_grad:
                    r = _wrap(r, filename, shm)
                else:  # _adopt, inlined (once per item of an unbind of thousands)
                    r.__class__ = MemoryMappedTensor
                    if filename is not None:
                        r._filename = filename  # type: ignore[attr-defined]
                    if shm is not None:
                        r._shm = shm  # type: ignore[attr-defined]
            items.append(r)
        return cls(items)
    return ret


def _map_file(path: str, dtype: torch.dtype, shape: tuple, shared: bool = True) -> MemoryMappedTensor:
    """Maps ``path`` (already checked) as a ``MemoryMappedTensor`` (``shared=False``: copy-on-write)."""
    nbytes = math.prod(shape) * dtype.itemsize
    with _DisableTF():
        return _adopt(tensor_on(map_storage(path, nbytes, shared), dtype, shape), path)


def _maps_file(t: MemoryMappedTensor, path: str) -> bool:
    """Whether ``t``'s storage is the file ``path`` (same name, or same inode through another name)."""
    if t._filename == path:
        return True
    try:
        return os.path.samefile(t._filename, path)  # type: ignore[arg-type]
    except OSError:
        return False


def _is_whole_file(t: MemoryMappedTensor, path: str) -> bool:
    """``t`` is a contiguous view of every byte of ``path``, from offset 0."""
    with _DisableTF():
        if t.storage_offset() != 0 or not t.is_contiguous():
            return False
        nbytes = t.numel() * t.element_size()
    try:
        return os.stat(path).st_size == nbytes
    except OSError:
        return False


def _mapped_by_live_source(t: torch.Tensor, path: str) -> bool:
    """``t`` (a plain tensor) views memory mapped from ``path`` (e.g. ``MemoryMappedTensor`` made plain)."""
    fname = getattr(t.untyped_storage(), "filename", None)
    if not fname or not os.path.exists(path):
        return False
    try:
        return os.path.samefile(fname, path)
    except OSError:
        return False


def _replace_file(cls: type, path: str, like: torch.Tensor, data: torch.Tensor | None, shape: tuple) -> MemoryMappedTensor:
    """Writes ``data`` (or zeros) to a temporary file beside ``path`` and renames it over ``path``.

    Used when the destination is the file that the source itself maps: truncating
    it in place would zero the source (and the values being copied) or unmap
    memory under it. Tensors mapping the old file keep their bytes.
    """
    folder, base = os.path.split(path)
    tmp = os.path.join(folder, f".{base}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        if data is not None:
            run_jobs(write_tensor_jobs(tmp, data), 1)
        else:
            allocate(tmp, like.numel() * like.element_size(), existsok=True)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return cls.from_filename(path, like.dtype, shape)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- nested tensors
def _is_nested_shape(shape: Any) -> bool:
    return isinstance(shape, torch.Tensor) and shape.ndim == 2


def _nested_layout(sizes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """``(sizes, strides, offsets, numel)`` of contiguous elements of the given shapes, packed in order."""
    sizes = sizes.to(torch.int64)
    if (sizes < 0).any():
        msg = f"negative dimension in the nested shapes {sizes.tolist()}."
        raise ValueError(msg)
    rev = sizes.flip(-1)
    strides = torch.cat([torch.ones_like(rev[:, :1]), rev[:, :-1].cumprod(-1)], -1).flip(-1)
    numels = sizes.prod(-1)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), numels.cumsum(0)[:-1]])
    return sizes, strides, offsets, int(numels.sum())


def _nested_on(cls: type, storage: torch.UntypedStorage, dtype: torch.dtype, sizes: torch.Tensor, byte_offset: int,
               filename: str | None, shm: Any) -> MemoryMappedTensor:
    """A nested (strided-layout) ``MemoryMappedTensor`` of elements of shapes ``sizes`` packed in ``storage``."""
    sizes, strides, offsets, numel = _nested_layout(sizes)
    if byte_offset + numel * dtype.itemsize > storage.nbytes():
        msg = f"nested shapes {sizes.tolist()} of {dtype} need {numel * dtype.itemsize} bytes; the memory holds fewer."
        raise RuntimeError(msg)
    with _DisableTF():
        buf = tensor_on(storage, dtype, (numel,), byte_offset // dtype.itemsize)
        # the element offsets count from the start of the storage, not from buf's offset
        nested = torch._nested_view_from_buffer(buf, sizes, strides, offsets + byte_offset // dtype.itemsize)
        out = _Tensor._make_subclass(cls, nested)  # type: ignore[var-annotated]
    if filename is not None:
        out._filename = filename
    if shm is not None:
        out._shm = shm
    return out


def _nested_empty(cls: type, sizes: torch.Tensor, dtype: torch.dtype, filename: Any, existsok: bool) -> MemoryMappedTensor:
    _, _, _, numel = _nested_layout(sizes)
    if filename is None:
        # a segment of its own (not a slab of the pool): a nested tensor is contiguous
        # (fill_, copy_...) only when its elements start at offset 0 of the storage
        nbytes = numel * dtype.itemsize
        if nbytes == 0:
            with _DisableTF():
                flat, shm = _anonymous((numel,), dtype)
            return _nested_on(cls, flat.untyped_storage(), dtype, sizes, 0, None, shm)
        shm = _Shm(nbytes)
        return _nested_on(cls, shm.storage, dtype, sizes, 0, None, shm)  # type: ignore[arg-type]
    path = _abs(filename)
    allocate(path, numel * dtype.itemsize, existsok=existsok)
    return _nested_on(cls, map_storage(path, numel * dtype.itemsize), dtype, sizes, 0, path, None)


def _nested_from_tensor(cls: type, input: torch.Tensor, filename: Any, existsok: bool) -> MemoryMappedTensor:
    if input.layout is not torch.strided:
        msg = f"cannot memory-map a nested tensor of layout {input.layout}; only torch.strided nested tensors."
        raise TypeError(msg)
    with _DisableTF():
        sizes = input._nested_tensor_size()
        flat = torch.cat([t.reshape(-1) for t in input.unbind()]) if sizes.shape[0] else torch.empty(0, dtype=input.dtype)
    if filename is not None:
        path = _abs(filename)
        if os.path.exists(path) and not existsok:
            msg = f"file {path!r} already exists; pass existsok=True to overwrite it."
            raise RuntimeError(msg)
    out = _nested_empty(cls, sizes, input.dtype, filename, True)
    with _DisableTF():
        buf = torch.empty(0, dtype=input.dtype, device=_CPU).set_(out.untyped_storage(), _plain_offset(out), (flat.numel(),))  # type: ignore[call-overload]
        buf.copy_(flat)
    return out


def _plain_offset(t: torch.Tensor) -> int:
    """The element offset of a (possibly nested) tensor's first element in its storage."""
    if t.is_nested:
        return int(t._nested_tensor_storage_offsets()[0]) if t.size(0) else 0
    return t.storage_offset()  # type: ignore[return-value]


class _Handler:
    """The memory behind an anonymous ``MemoryMappedTensor``: a shared segment and its storage.

    Returned by ``MemoryMappedTensor._handler``; :meth:`MemoryMappedTensor.from_handler`
    maps it again. Pickling sends a copy of the bytes (plain ``pickle``) or the
    segment's file descriptor (``torch.multiprocessing``).
    """

    __slots__ = ("shm", "storage", "offset", "__weakref__")

    def __init__(self, shm: _Shm | None, storage: torch.UntypedStorage, offset: int = 0) -> None:
        self.shm, self.storage, self.offset = shm, storage, offset

    @property
    def nbytes(self) -> int:
        """Bytes of the segment from this handler's offset on."""
        return self.storage.nbytes() - self.offset

    def __repr__(self) -> str:
        return f"{type(self).__name__}(nbytes={self.nbytes})"


#: one handler object per shared segment (so views of a tensor share it)
_HANDLERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


# --------------------------------------------------------------------------- pickling
def _rebuild_from_file(filename: str, nbytes: int, dtype: str, offset: int, shape: tuple, stride: tuple) -> MemoryMappedTensor:
    dt = dtype_from_name(dtype, filename)
    check_file(filename, nbytes, exact=False)
    storage = map_storage(filename, nbytes)
    return _adopt(tensor_on(storage, dt, shape, offset, stride), filename)


def _rebuild_anonymous(tensor: torch.Tensor) -> MemoryMappedTensor:
    """Receiver side of ``torch.multiprocessing``: ``tensor`` already maps the shared storage."""
    return _wrap(tensor, None)


#: segments received in this process, by descriptor: a spawned child gets one descriptor
#: per segment however many tensors of it were sent, so they share one mapping
_RECEIVED: dict[int, Any] = {}


def _rebuild_shm(dupfd: Any, nbytes: int, dtype: str, offset: int, shape: tuple, stride: tuple) -> MemoryMappedTensor:
    """Receiver side of ``torch.multiprocessing`` for a memfd segment: maps the same memory."""
    fd = dupfd.detach()
    ref = _RECEIVED.get(fd)
    shm = ref() if ref is not None else None
    if shm is None or shm.fd != fd or shm.nbytes != nbytes:
        shm = _Shm(nbytes, fd=fd)
        _RECEIVED[fd] = weakref.ref(shm)
    return _adopt(tensor_on(shm.storage, dtype_from_name(dtype, "shared memory"), shape, offset, stride), None, shm)  # type: ignore[arg-type]


def _rebuild_copy(tensor: torch.Tensor) -> MemoryMappedTensor:
    """Receiver side of plain ``pickle`` for an anonymous tensor: a new shared copy."""
    return MemoryMappedTensor.from_tensor(tensor)


def _plain(t: MemoryMappedTensor) -> torch.Tensor:
    with _DisableTF():
        return _Tensor._make_subclass(_Tensor, t)


def _reduce_file(t: MemoryMappedTensor) -> tuple:
    with _DisableTF():
        storage = t.untyped_storage()
        args = (
            t._filename,
            storage.nbytes(),
            dtype_name(t.dtype),
            t.storage_offset(),
            tuple(t.shape),
            tuple(t.stride()),
        )
    return _rebuild_from_file, args


def _reduce_ipc(t: MemoryMappedTensor) -> tuple:
    """Reducer used by ``torch.multiprocessing`` (``ForkingPickler``)."""
    if t._filename is not None:
        return _reduce_file(t)
    shm = t._shm
    if shm is not None and shm.fd >= 0:
        from multiprocessing import context
        from multiprocessing.reduction import DupFd

        with _DisableTF():
            args = (dtype_name(t.dtype), t.storage_offset(), tuple(t.shape), tuple(t.stride()))
        popen = context.get_spawning_popen()
        sent = list(getattr(popen, "_fds", ()))
        if popen is not None and shm.fd in sent:
            # several tensors of one segment sent to a spawned child: pass the descriptor
            # once (a repeated one makes the spawn fail with "bad value(s) in fds_to_keep").
            # A spawn child finds a descriptor by its number, a forkserver child by its
            # position in the list of descriptors sent along
            ref = sent.index(shm.fd) if getattr(popen, "method", None) == "forkserver" else shm.fd
            return _rebuild_shm, (popen.DupFd(ref), shm.nbytes, *args)
        return _rebuild_shm, (DupFd(shm.fd), shm.nbytes, *args)
    return _rebuild_anonymous, (_plain(t),)


# --------------------------------------------------------------------------- the class
class MemoryMappedTensor(torch.Tensor):
    """A tensor stored in a memory-mapped file (or anonymous shared memory).

    Build one with the class methods: :meth:`from_tensor`, :meth:`empty`,
    :meth:`zeros`, :meth:`ones`, :meth:`full` (and their ``*_like`` forms),
    :meth:`from_filename` and :meth:`from_storage`. The constructor wraps an
    existing tensor or storage without copying.

    Creating a file-backed tensor costs no RAM (the file is sparse) and reading
    ``x[:10]`` touches only those rows. Indexing returns a ``MemoryMappedTensor``
    on the same file wherever torch returns a view; other results are plain
    tensors. Pickling (including through ``torch.multiprocessing``) sends the file
    name, offset, shape, strides and dtype, never the data; anonymous tensors are
    shared by file descriptor through ``torch.multiprocessing``.

    Args:
        source (torch.Tensor or torch.UntypedStorage): memory to wrap (not copied).

    Keyword Args:
        dtype (torch.dtype, optional): with a storage source, the element type.
        shape (torch.Size, optional): with a storage source, the shape.
        filename (str or Path, optional): the file backing ``source``, if any.

    Examples:
        >>> import torch, tempfile, os
        >>> with tempfile.TemporaryDirectory() as d:
        ...     t = MemoryMappedTensor.from_tensor(torch.arange(6.0).view(2, 3), filename=os.path.join(d, "x.memmap"))
        ...     row = t[1]
        ...     (type(row).__name__, row.filename == t.filename, row.tolist())
        ('MemoryMappedTensor', True, [3.0, 4.0, 5.0])
        >>> MemoryMappedTensor.zeros(2, 2).filename is None
        True
    """

    _filename: str | None = None
    _shm: _Shm | None = None
    #: read by ``TensorDictBase.is_shared()``: a memory map is not shared memory there,
    #: so a memory-mapped TensorDict reports ``is_shared() == False``, as tensordict 0.15
    _memory_mapped = True

    @staticmethod
    def __new__(cls, source: Any, *, dtype: torch.dtype | None = None, shape: Any = None,
                index: Any = None, device: Any = None, handler: Any = None, filename: Any = None) -> MemoryMappedTensor:
        if device is not None and torch.device(device).type != "cpu":
            msg = (
                f"MemoryMappedTensor(source, device={device!r}): a MemoryMappedTensor lives in CPU memory; create "
                "it on the CPU and move the result with `.to(device)`."
            )
            raise ValueError(msg)
        if isinstance(source, (torch.UntypedStorage, torch.TypedStorage)):
            return cls.from_storage(source, dtype=dtype, shape=shape, index=index, filename=filename)
        if handler is not None:
            return cls.from_handler(handler, dtype=dtype, shape=shape, index=index)
        if isinstance(source, (list, tuple)) or (not isinstance(source, torch.Tensor) and hasattr(source, "__len__")):
            try:
                source = torch.as_tensor(source, dtype=dtype)
            except (TypeError, ValueError, RuntimeError) as err:
                msg = f"MemoryMappedTensor(source): cannot make a tensor of {type(source).__name__}: {err}"
                raise TypeError(msg) from None
        if not isinstance(source, torch.Tensor):
            msg = f"MemoryMappedTensor(source): expected a tensor or an UntypedStorage, got {type(source).__name__}."
            raise TypeError(msg)
        if source.device.type != "cpu":
            msg = f"MemoryMappedTensor(source) wraps CPU memory; got a tensor on {source.device}. Use from_tensor()."
            raise ValueError(msg)
        with _DisableTF():
            out = _wrap(source.detach(), _abs(filename) if filename is not None else getattr(source, "_filename", None),
                        getattr(source, "_shm", None))
            if index is not None:
                out = _wrap(_plain(out)[index], out._filename, out._shm)
        return out

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # noqa: D107 - built in __new__
        pass

    # ------------------------------------------------------------------ torch dispatch
    # Ops run at plain-tensor speed (no Python ``__torch_function__``): their results
    # are plain tensors. The methods that return views (``__getitem__``, ``view``,
    # ``unbind``, ...; see ``_VIEW_METHODS``) are wrapped below so that a view of
    # the file is again a ``MemoryMappedTensor`` (and pickles as a file reference).
    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    # ------------------------------------------------------------------ printing
    def __format__(self, format_spec: str) -> str:
        if self.dim() == 0:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # type: ignore[override]
        with _DisableTF():
            plain = _Tensor._make_subclass(_Tensor, self)
        body = repr(plain)
        return "MemoryMappedTensor" + body[len("tensor"):] if body.startswith("tensor") else body

    # ------------------------------------------------------------------ info
    @property
    def filename(self) -> str | None:
        """Absolute path of the backing file, or ``None`` for anonymous shared memory."""
        return self._filename

    @property
    def _handler(self) -> _Handler | None:
        """The shared-memory segment behind an anonymous tensor (``None`` when file-backed).

        Views of one tensor share the same handler object; pass it to
        :meth:`from_handler` to map the same memory again.
        """
        if self._filename is not None:
            return None
        with _DisableTF():
            storage = self.untyped_storage()
            offset = self.storage_offset() * self.element_size()
        shm = self._shm
        if shm is None:
            return _Handler(None, storage, offset)  # type: ignore[arg-type]
        by_offset = _HANDLERS.get(shm)
        if by_offset is None:
            by_offset = _HANDLERS.setdefault(shm, {})
        handler = by_offset.get(offset)
        if handler is None:
            handler = by_offset.setdefault(offset, _Handler(shm, shm.storage, offset))  # type: ignore[arg-type]
        return handler

    @property
    def handler(self) -> _Handler | None:
        """Same as ``_handler``: the shared-memory segment of an anonymous tensor, ``None`` for a file."""
        return self._handler

    def is_memmap(self) -> bool:
        """Always ``True`` (a :func:`tensordict.is_memmap` counterpart on the instance)."""
        return True

    # ------------------------------------------------------------------ pickling / copying
    def __reduce_ex__(self, protocol: int) -> tuple:  # type: ignore[override]
        if self._filename is not None:
            return _reduce_file(self)
        with _DisableTF():
            data = _Tensor._make_subclass(_Tensor, self).clone()
        return _rebuild_copy, (data,)

    def __deepcopy__(self, memo: dict) -> MemoryMappedTensor:
        """A deep copy does not alias the file: it copies the values into anonymous shared memory."""
        out = MemoryMappedTensor.from_tensor(_plain(self))
        memo[id(self)] = out
        return out

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_tensor(cls, input: torch.Tensor, filename: Any = None, existsok: bool = False, *,
                    copy_existing: bool = False, copy_data: bool = True, shape: Any = None) -> MemoryMappedTensor:
        """Copies ``input`` into a new memory-mapped tensor.

        Args:
            input (torch.Tensor): the values (any device, any strides).
            filename (str or Path, optional): the file to create. Defaults to
                ``None``: anonymous shared memory.
            existsok (bool): overwrite ``filename`` if it exists. Defaults to ``False``.

        Keyword Args:
            copy_existing (bool): if ``input`` is already a ``MemoryMappedTensor`` on
                another file, copy it (``False``: return ``input`` when no ``filename``
                is given). Defaults to ``False``.
            copy_data (bool): write the values; ``False`` only allocates (the file is
                sparse and reads as zeros). Defaults to ``True``.
            shape (torch.Size, optional): the shape of the result if it differs from
                ``input.shape`` (same number of elements).

        Returns:
            MemoryMappedTensor: ``input.shape`` (or ``shape``), ``input.dtype``, on the CPU.

        Raises:
            RuntimeError: ``filename`` exists and ``existsok`` is False.

        Examples:
            >>> t = MemoryMappedTensor.from_tensor(torch.ones(2, 3))
            >>> t.shape, t.is_shared()
            (torch.Size([2, 3]), True)
        """
        if filename is None:
            if (input.__class__ is _Tensor and shape is None and input.layout is torch.strided
                    and not input.is_nested and not input.requires_grad):
                # a plain tensor into anonymous shared memory: the allocation fast path of ``empty``
                out = cls.empty(input.shape, dtype=input.dtype)
                if copy_data and input.numel():
                    with _DisableTF():
                        out.copy_(input)
                return out
            if isinstance(input, MemoryMappedTensor) and not copy_existing:
                return input
        if isinstance(input, torch.Tensor) and input.is_nested:
            return _nested_from_tensor(cls, input, filename, existsok)
        dtensor_mod = sys.modules.get("torch.distributed.tensor")
        if dtensor_mod is not None and isinstance(input, dtensor_mod.DTensor):
            # a distributed tensor: gather its shards (a collective: every rank of its
            # device mesh must gather too, e.g. with ``td.apply(lambda t: t.full_tensor())``)
            input = input.full_tensor()
        if not isinstance(input, torch.Tensor):
            input = torch.as_tensor(input)
        out_shape = tuple(input.shape) if shape is None else _parse_shape((), shape)
        if math.prod(out_shape) != input.numel():
            msg = f"from_tensor: shape {out_shape} has {math.prod(out_shape)} elements, input has {input.numel()}."
            raise RuntimeError(msg)
        if filename is None:
            with _DisableTF():
                data, shm = _anonymous(out_shape, input.dtype)
                if copy_data and data.numel():
                    src = input if shape is None else input.reshape(out_shape)
                    data.copy_(src)
                return _wrap(data, None, shm)
        path = _abs(filename)
        if isinstance(input, MemoryMappedTensor) and input._filename is not None:
            if _maps_file(input, path):
                if _is_whole_file(input, path) and shape is None:
                    return input  # already this file's contents: nothing to copy
                # A view of the destination file: the file cannot be truncated
                # under it. Snapshot the values and replace the file atomically,
                # so ``input`` keeps its bytes (it maps the old inode).
                if os.path.exists(path) and not existsok:
                    msg = f"file {path!r} already exists; pass existsok=True to overwrite it."
                    raise RuntimeError(msg)
                with _DisableTF():
                    snapshot = _plain(input).clone() if copy_data else None
                return _replace_file(cls, path, input, snapshot, out_shape)
            if not copy_existing:
                msg = (
                    f"the tensor is already memory-mapped on {input._filename!r}; pass copy_existing=True to copy "
                    f"it to {path!r}."
                )
                raise RuntimeError(msg)
        if copy_data:
            with _DisableTF():
                if os.path.exists(path) and not existsok:
                    msg = f"file {path!r} already exists; pass existsok=True to overwrite it."
                    raise RuntimeError(msg)
                if _mapped_by_live_source(input, path):
                    return _replace_file(cls, path, input, _plain(input).clone(), out_shape)  # type: ignore[arg-type]
                run_jobs(write_tensor_jobs(path, input), 1)
        else:
            allocate(path, input.numel() * input.element_size(), existsok=existsok)
        return cls.from_filename(path, input.dtype, out_shape)

    @classmethod
    def empty(cls, *size: Any, dtype: torch.dtype | None = None, device: Any = None, filename: Any = None,
              existsok: bool = False, shape: Any = None) -> MemoryMappedTensor:
        """A new memory-mapped tensor of ``shape`` (``empty(2, 3)`` or ``empty((2, 3))``).

        With a ``filename`` the file is created sparse: no RAM and no disk blocks are
        used until values are written, and it reads as zeros. Without one, the tensor
        lives in anonymous shared memory.

        Keyword Args:
            dtype (torch.dtype, optional): defaults to ``torch.get_default_dtype()``.
            device: must be ``None`` or ``"cpu"``.
            filename (str or Path, optional): the file to create.
            existsok (bool): overwrite an existing file. Defaults to ``False``.

        Raises:
            RuntimeError: ``filename`` exists and ``existsok`` is False.
            RuntimeError: ``device`` is not the CPU.
            TypeError: no shape is given, or a dimension is not an int.
            ValueError: a dimension is negative.

        Examples:
            >>> MemoryMappedTensor.empty((1000, 16), dtype=torch.uint8).shape
            torch.Size([1000, 16])
        """
        if filename is None and shape is None and device is None and size:
            # Fast path (this is the per-call cost of ``empty``; ``_SlabPool.alloc`` inlined): a
            # shape validated before (``_NUMELS``), small enough for the slab pool. A tuple equal
            # to a validated one but holding floats or bools is refused by ``set_`` (TypeError)
            # and goes the full path, which raises the documented error.
            shp = size[0] if len(size) == 1 else size
            try:
                numel = _NUMELS[shp]
            except (KeyError, TypeError):  # not seen yet, or not hashable (a list, ...)
                numel = 0
            default = torch.get_default_dtype()
            if dtype is None:
                dtype = default
            itemsize = dtype.itemsize
            nbytes = numel * itemsize
            if 0 < nbytes <= _SMALL:
                pool = _POOL
                lock = pool._lock
                need = (nbytes + _ALIGN - 1) & -_ALIGN
                lock.acquire()
                try:
                    shm = pool._slab
                    pos = pool._pos
                    if shm is None or pos + need > _SLAB:
                        shm = pool._slab = _Shm(_SLAB)
                        pos = 0
                    pool._pos = pos + need
                finally:
                    lock.release()
                # A tensor of its own: its own version counter (a view of one slab-wide tensor
                # would make autograd see a write to any tensor of the slab as a write to all).
                try:
                    if dtype is default:
                        # ``torch.Tensor.__new__(cls)``: an empty CPU ``cls`` of the default dtype
                        out = _new_tensor(cls).set_(shm.storage, pos // itemsize, shp)  # type: ignore[call-overload]
                    else:
                        out = torch.empty(0, dtype=dtype, device=_CPU).set_(shm.storage, pos // itemsize, shp)  # type: ignore[call-overload]
                        if cls is MemoryMappedTensor:
                            out.__class__ = cls  # a fresh tensor nobody else holds: retyped, not aliased
                        else:
                            out = _Tensor._make_subclass(cls, out)
                except TypeError:  # equal to a validated shape, but holding floats or bools
                    pass
                else:
                    out._shm = shm
                    return out
        nested = shape if shape is not None else (size[0] if len(size) == 1 else None)
        if _is_nested_shape(nested):
            _check_device(device)
            return _nested_empty(cls, nested, dtype or torch.get_default_dtype(), filename, existsok)  # type: ignore[arg-type]
        shp = _parse_shape(size, shape)
        _check_device(device)
        if dtype is None:
            dtype = torch.get_default_dtype()
        if filename is None:
            with _DisableTF():
                data, shm = _anonymous(shp, dtype)
                out = _Tensor._make_subclass(cls, data)
            out._shm = shm
            return out
        path = _abs(filename)
        allocate(path, math.prod(shp) * dtype.itemsize, existsok=existsok)
        return cls.from_filename(path, dtype, shp)

    @classmethod
    def empty_nested(cls, *size: Any, dtype: torch.dtype | None = None, device: Any = None, filename: Any = None,
                     existsok: bool = False, shape: Any = None) -> MemoryMappedTensor:
        """:meth:`empty` under tensordict 0.15's name for nested shapes.

        ``shape`` is either a shape, or an int64 tensor of one row per element (the
        element shapes), which gives a nested tensor. The keywords are those of :meth:`empty`.

        Examples:
            >>> import torch
            >>> t = MemoryMappedTensor.empty_nested(torch.tensor([[2, 3], [4, 3]]), dtype=torch.float32)
            >>> [e.shape for e in t.unbind(0)]
            [torch.Size([2, 3]), torch.Size([4, 3])]
        """
        return cls.empty(*size, dtype=dtype, device=device, filename=filename, existsok=existsok, shape=shape)

    @classmethod
    def zeros(cls, *size: Any, dtype: torch.dtype | None = None, device: Any = None, filename: Any = None,
              existsok: bool = False, shape: Any = None) -> MemoryMappedTensor:
        """Like :meth:`empty`; the values are zeros (new files and shared memory start zeroed).

        Examples:
            >>> MemoryMappedTensor.zeros(3).tolist()
            [0.0, 0.0, 0.0]
        """
        return cls.empty(*size, dtype=dtype, device=device, filename=filename, existsok=existsok, shape=shape)

    @classmethod
    def ones(cls, *size: Any, dtype: torch.dtype | None = None, device: Any = None, filename: Any = None,
             existsok: bool = False, shape: Any = None) -> MemoryMappedTensor:
        """Like :meth:`empty`, filled with ones.

        Examples:
            >>> MemoryMappedTensor.ones(2, dtype=torch.int64).tolist()
            [1, 1]
        """
        return cls.full(*size, fill_value=1, dtype=dtype, device=device, filename=filename, existsok=existsok, shape=shape)

    @classmethod
    def full(cls, *size: Any, fill_value: Any, dtype: torch.dtype | None = None, device: Any = None,
             filename: Any = None, existsok: bool = False, shape: Any = None) -> MemoryMappedTensor:
        """Like :meth:`empty`, filled with ``fill_value``.

        Examples:
            >>> MemoryMappedTensor.full((2,), fill_value=7.0).tolist()
            [7.0, 7.0]
        """
        out = cls.empty(*size, dtype=dtype, device=device, filename=filename, existsok=existsok, shape=shape)
        with _DisableTF():
            out.fill_(fill_value)
        return out

    @classmethod
    def empty_like(cls, input: torch.Tensor, *, filename: Any = None, existsok: bool = False) -> MemoryMappedTensor:
        """A new memory-mapped tensor with ``input``'s shape and dtype (values not copied)."""
        return cls.empty(tuple(input.shape), dtype=input.dtype, filename=filename, existsok=existsok)

    @classmethod
    def zeros_like(cls, input: torch.Tensor, *, filename: Any = None, existsok: bool = False) -> MemoryMappedTensor:
        """Zeros with ``input``'s shape and dtype."""
        return cls.zeros(tuple(input.shape), dtype=input.dtype, filename=filename, existsok=existsok)

    @classmethod
    def ones_like(cls, input: torch.Tensor, *, filename: Any = None, existsok: bool = False) -> MemoryMappedTensor:
        """Ones with ``input``'s shape and dtype."""
        return cls.ones(tuple(input.shape), dtype=input.dtype, filename=filename, existsok=existsok)

    @classmethod
    def full_like(cls, input: torch.Tensor, fill_value: Any, *, filename: Any = None,
                  existsok: bool = False) -> MemoryMappedTensor:
        """``fill_value`` with ``input``'s shape and dtype."""
        return cls.full(tuple(input.shape), fill_value=fill_value, dtype=input.dtype, filename=filename, existsok=existsok)

    @classmethod
    def from_filename(
        cls, filename: Any, dtype: torch.dtype, shape: Any, index: Any = None, mode: str | None = None
    ) -> MemoryMappedTensor:
        """Maps an existing file as a tensor of ``dtype`` and ``shape`` (no data is read).

        Args:
            filename (str or Path): the file; it must hold at least
                ``prod(shape) * dtype.itemsize`` bytes.
            dtype (torch.dtype): element type.
            shape (torch.Size or sequence of int): shape.
            index (optional): an index applied to the result (``t[index]``).
            mode (str, optional): ``"r"`` maps the file copy-on-write (in-place writes
                stay in memory); ``"r+"`` maps it shared (writes reach the file).
                Defaults to ``None``: shared if the file is writable, else copy-on-write.

        Raises:
            FileNotFoundError: the file is missing.
            RuntimeError: the file is smaller than the shape and dtype require.
            ValueError: ``mode`` is not ``None``, ``"r"`` or ``"r+"``.
            PermissionError: ``mode="r+"`` and the file is not writable.

        Examples:
            >>> import tempfile, os
            >>> with tempfile.TemporaryDirectory() as d:
            ...     path = os.path.join(d, "x.memmap")
            ...     _ = MemoryMappedTensor.from_tensor(torch.arange(4), filename=path)
            ...     MemoryMappedTensor.from_filename(path, torch.int64, (2, 2)).tolist()
            [[0, 1], [2, 3]]
        """
        if not isinstance(dtype, torch.dtype):
            msg = f"from_filename: dtype must be a torch.dtype (e.g. torch.float32), got {type(dtype).__name__} {dtype!r}."
            raise TypeError(msg)
        path = _abs(filename)
        if mode not in (None, "r", "r+"):
            msg = f"from_filename: mode must be None, 'r' or 'r+', got {mode!r}."
            raise ValueError(msg)
        writable = os.access(path, os.W_OK)
        if mode == "r+" and os.path.exists(path) and not writable:
            msg = f"from_filename(mode='r+'): {path!r} is not writable; use mode='r' for a copy-on-write map."
            raise PermissionError(msg)
        shared = writable if mode is None else mode == "r+"
        if _is_nested_shape(shape):
            numel = _nested_layout(shape)[3]
            check_file(path, numel * dtype.itemsize, exact=False)
            out = _nested_on(cls, map_storage(path, numel * dtype.itemsize, shared), dtype, shape, 0, path, None)
            return out if index is None else out[index]  # type: ignore[return-value]
        shp = _parse_shape((), shape)
        nbytes = math.prod(shp) * dtype.itemsize
        check_file(path, nbytes, exact=False)
        with _DisableTF():
            out = _adopt(tensor_on(map_storage(path, nbytes, shared), dtype, shp), path)
            if index is not None:
                out = _wrap(_plain(out)[index], path)
        return out

    @classmethod
    def from_handler(cls, handler: Any, dtype: torch.dtype | None = None, shape: Any = None,
                     index: Any = None) -> MemoryMappedTensor:
        """Maps the shared memory of an anonymous tensor again (see ``_handler``); no copy.

        Args:
            handler: ``t._handler`` of an anonymous ``MemoryMappedTensor`` (or an
                ``UntypedStorage`` in shared memory).
            dtype (torch.dtype, optional): element type. Defaults to
                ``torch.get_default_dtype()``.
            shape (torch.Size, optional): the shape; a 2-d tensor of per-element
                shapes gives a nested tensor. Defaults to every element, flat.
            index (optional): an index applied to the result.

        Raises:
            TypeError: ``handler`` is not a handler.
            RuntimeError: the memory is smaller than ``shape`` and ``dtype`` need.

        Examples:
            >>> t = MemoryMappedTensor.full((2, 2), fill_value=3.0)
            >>> MemoryMappedTensor.from_handler(t._handler, dtype=torch.float32, shape=(2, 2)).tolist()
            [[3.0, 3.0], [3.0, 3.0]]
        """
        return _from_handler(cls, handler, dtype, shape, index)

    @classmethod
    def from_storage(cls, storage: Any, *, dtype: torch.dtype | None = None, shape: Any = None,
                     index: Any = None, filename: Any = None, handler: Any = None) -> MemoryMappedTensor:
        """Wraps an existing (file-mapped or shared) storage without copying.

        Args:
            storage (torch.UntypedStorage or TypedStorage): the memory.

        Keyword Args:
            dtype (torch.dtype, optional): defaults to the typed storage's dtype, or
                ``torch.get_default_dtype()``.
            shape (optional): defaults to every element of the storage, flat.
            index (optional): an index applied to the result.
            filename (str or Path, optional): the file mapped by ``storage``
                (defaults to the storage's own ``filename`` when it names a file).

        Examples:
            >>> s = torch.UntypedStorage(16).share_memory_()
            >>> MemoryMappedTensor.from_storage(s, dtype=torch.int32, shape=(2, 2)).shape
            torch.Size([2, 2])
        """
        if isinstance(storage, torch.TypedStorage):
            dtype = dtype or storage.dtype
            storage = storage.untyped()
        if dtype is None:
            dtype = torch.get_default_dtype()
        if _is_nested_shape(shape):
            fname = filename if filename is not None else None
            out = _nested_on(cls, storage, dtype, shape, 0, _abs(fname) if fname is not None else None, None)
            return out if index is None else out[index]  # type: ignore[return-value]
        if shape is None:
            shp: tuple = (storage.nbytes() // dtype.itemsize,)
        else:
            shp = _parse_shape((), shape)
        if math.prod(shp) * dtype.itemsize > storage.nbytes():
            msg = f"from_storage: shape {shp} of {dtype} needs {math.prod(shp) * dtype.itemsize} bytes, the storage has {storage.nbytes()}."
            raise RuntimeError(msg)
        if filename is None:
            fname = getattr(storage, "filename", None)
            if fname and not fname.startswith("/proc/") and os.path.isfile(fname):
                filename = fname
        with _DisableTF():
            out = _wrap(tensor_on(storage, dtype, shp), _abs(filename) if filename is not None else None)
            if index is not None:
                out = _wrap(_plain(out)[index], out._filename)
        return out


def _from_handler(cls: type, handler: Any, dtype: torch.dtype | None, shape: Any, index: Any) -> MemoryMappedTensor:
    if isinstance(handler, torch.UntypedStorage):
        handler = _Handler(None, handler, 0)
    if not isinstance(handler, _Handler):
        msg = f"from_handler: expected the `_handler` of an anonymous MemoryMappedTensor, got {type(handler).__name__}."
        raise TypeError(msg)
    if dtype is None:
        dtype = torch.get_default_dtype()
    if isinstance(shape, torch.Tensor) and shape.ndim == 2:
        return _nested_on(cls, handler.storage, dtype, shape, handler.offset, None, handler.shm)
    shp = (handler.nbytes // dtype.itemsize,) if shape is None else _parse_shape((), shape)
    need = math.prod(shp) * dtype.itemsize
    if need > handler.nbytes or handler.offset % dtype.itemsize:
        msg = f"from_handler: shape {shp} of {dtype} needs {need} bytes; the handler holds {handler.nbytes}."
        raise RuntimeError(msg)
    with _DisableTF():
        out = _wrap(tensor_on(handler.storage, dtype, shp, handler.offset // dtype.itemsize), None, handler.shm)
        if index is not None:
            out = _wrap(_plain(out)[index], None, handler.shm)
    return out


#: Tensor methods that may return a view of their input's storage.
_VIEW_METHODS = (
    "__getitem__", "view", "view_as", "reshape", "reshape_as", "permute", "transpose", "t", "narrow",
    "select", "unsqueeze", "squeeze", "flatten", "unflatten", "expand", "expand_as", "unbind", "split",
    "split_with_sizes", "chunk", "tensor_split", "hsplit", "vsplit", "dsplit", "movedim", "moveaxis",
    "swapaxes", "swapdims", "diagonal", "as_strided", "detach", "unfold", "contiguous", "to", "cpu",
    "type_as", "clone", "resolve_conj", "resolve_neg", "view_as_real", "view_as_complex",
)


def _view_method(name: str) -> Any:
    base = getattr(_Tensor, name)

    def method(self: MemoryMappedTensor, *args: Any, **kwargs: Any) -> Any:
        ret = base(self, *args, **kwargs)
        if ret.__class__ is _Tensor and ret._is_view():  # the common case, without _rewrap's checks
            return _retype(ret, self)
        return _rewrap(ret, self)

    method.__name__ = name
    method.__qualname__ = f"MemoryMappedTensor.{name}"
    method.__doc__ = f"``torch.Tensor.{name}``; a result that views this tensor's file is a ``MemoryMappedTensor``."
    return method


for _name in _VIEW_METHODS:
    if hasattr(_Tensor, _name):
        setattr(MemoryMappedTensor, _name, _view_method(_name))
del _name

_tensor_getitem = _Tensor.__getitem__


def _getitem(self: MemoryMappedTensor, index: Any) -> Any:
    ret = _tensor_getitem(self, index)
    if ret.__class__ is _Tensor and ret._is_view():  # ints, slices, None, Ellipsis: a view of the file
        return _retype(ret, self)
    return _rewrap(ret, self)  # advanced indexing: a copy (plain tensor)


_getitem.__name__ = "__getitem__"
_getitem.__qualname__ = "MemoryMappedTensor.__getitem__"
_getitem.__doc__ = MemoryMappedTensor.__getitem__.__doc__
MemoryMappedTensor.__getitem__ = _getitem  # type: ignore[method-assign,assignment]

ForkingPickler.register(MemoryMappedTensor, _reduce_ipc)
