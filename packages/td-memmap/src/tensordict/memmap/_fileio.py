"""Bytes between tensors and files: dtype names, sparse allocation, large
sequential writes, and mapping a file as a tensor storage.

Writes go through ``os.pwrite`` on a zero-copy ``memoryview`` of the tensor's
memory (``ctypes`` over ``data_ptr()``), so no numpy and no intermediate copy are
needed; the GIL is released while the kernel copies, so several threads write in
parallel. Files are mapped with ``torch.UntypedStorage.from_file(shared=True)``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

__all__ = [
    "DTYPES",
    "dtype_from_name",
    "dtype_name",
    "map_storage",
    "allocate",
    "write_tensor_jobs",
    "run_jobs",
    "check_file",
    "open_regular",
    "tensor_on",
]

#: dtypes a memory-mapped file can hold: whole bytes per element, no quantizer state.
_DTYPE_NAMES = (
    "bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex32", "complex64", "complex128",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "bits8", "bits16",
)

#: canonical name ("float32") -> dtype, for the names this torch provides. A name
#: read from untrusted metadata can only ever resolve to one of these.
DTYPES: dict[str, torch.dtype] = {
    name: vars(torch)[name] for name in _DTYPE_NAMES if isinstance(vars(torch).get(name), torch.dtype)
}

#: bytes per ``pwrite`` call, and per slice of a non-contiguous tensor
CHUNK = 64 << 20


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> ``"float32"``."""
    return str(dtype).rsplit(".", 1)[-1]


def dtype_from_name(name: Any, where: str) -> torch.dtype:
    """The dtype called ``name``; ``where`` (a file) is named in the error.

    Raises:
        RuntimeError: ``name`` is not the name of a torch dtype.
    """
    if isinstance(name, str):
        dtype = DTYPES.get(name)
        if dtype is not None:
            return dtype
    msg = f"{where}: unknown dtype {name!r} in the metadata (expected one of torch's dtypes, e.g. 'float32')."
    raise RuntimeError(msg)


def check_file(path: str, nbytes: int, *, exact: bool = True) -> None:
    """Checks that ``path`` is a regular file of ``nbytes`` bytes (at least, if not ``exact``).

    Raises:
        FileNotFoundError: the file is missing.
        RuntimeError: the file is not a regular file, or its size differs.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        msg = f"memory-mapped data file {path!r} is missing (expected {nbytes} bytes)."
        raise FileNotFoundError(msg) from None
    if not stat.S_ISREG(st.st_mode):
        msg = f"{path!r} is not a regular file; cannot memory-map it."
        raise RuntimeError(msg)
    if (st.st_size != nbytes) if exact else (st.st_size < nbytes):
        what = "truncated" if st.st_size < nbytes else "resized"
        msg = (
            f"memory-mapped data file {path!r} was {what}: it holds {st.st_size} bytes, the metadata "
            f"expects {'' if exact else 'at least '}{nbytes} bytes. The store is damaged or incomplete; "
            "save it again."
        )
        raise RuntimeError(msg)


def _with_filename(err: OSError, path: str) -> OSError:
    """``err`` with ``path`` as its file name (``os.ftruncate``/``os.pwrite`` errors carry none)."""
    if err.filename is not None or err.errno is None:
        return err
    return OSError(err.errno, err.strerror, path)


def open_regular(path: str, what: str) -> int:
    """Opens ``path`` read-only, refusing anything but a regular file that is not a link.

    The last path component is opened with ``O_NOFOLLOW`` and the open file is
    checked with ``fstat``, so a symbolic link (to a device, ``/proc/self/mem``,
    or a file outside the store) is refused before a single byte is read. Opening
    is non-blocking, so a FIFO cannot hang the caller. The caller closes the fd.

    Args:
        path (str): the file.
        what (str): what the file is, for error messages (e.g. ``"metadata file"``).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        RuntimeError: ``path`` is a symbolic link, not a regular file, or cannot be opened.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            raise OSError(errno.ELOOP, "symbolic link", path)
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.EMLINK):
            msg = (
                f"{what} {path!r} is a symbolic link; td-memmap does not follow links inside a store (they can "
                "lead outside the store, to other files or devices), so it refuses to read it."
            )
        else:
            msg = f"cannot open {what} {path!r}: {err.strerror or err}."
        raise RuntimeError(msg) from None
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        msg = f"{what} {path!r} is not a regular file (a device, FIFO, socket or folder); refusing to read it."
        raise RuntimeError(msg)
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    return fd


def map_storage(path: str, nbytes: int, shared: bool = True) -> torch.UntypedStorage:
    """Maps the first ``nbytes`` bytes of the existing file ``path``.

    ``shared=True``: writes reach the file; ``False``: a private copy-on-write map
    (writes stay in this process, the file is never modified).
    """
    if nbytes == 0:
        return torch.UntypedStorage(0)
    return torch.UntypedStorage.from_file(path, shared, nbytes)  # type: ignore[return-value]


_CPU = torch.device("cpu")


def tensor_on(storage: torch.UntypedStorage, dtype: torch.dtype, shape: Sequence[int],
              offset: int = 0, stride: Sequence[int] | None = None) -> torch.Tensor:
    """A tensor of ``dtype``/``shape`` viewing ``storage`` at element ``offset``."""
    out = torch.empty(0, dtype=dtype, device=_CPU)  # mapped memory is CPU memory, whatever the default device
    if stride is None:
        return out.set_(storage, offset, tuple(shape))  # type: ignore[call-overload]
    return out.set_(storage, offset, tuple(shape), tuple(stride))


def allocate(path: str, nbytes: int, *, existsok: bool) -> None:
    """Creates ``path`` as a sparse file of ``nbytes`` zero bytes (no data written).

    Raises:
        RuntimeError: the file exists and ``existsok`` is False, or ``path`` is a
            symbolic link (never written through).
    """
    flags = os.O_RDWR | os.O_CREAT | (os.O_TRUNC if existsok else os.O_EXCL) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except FileExistsError:
        msg = f"file {path!r} already exists; pass existsok=True to overwrite it."
        raise RuntimeError(msg) from None
    except OSError as err:
        if err.errno == errno.ELOOP or os.path.islink(path):
            msg = (
                f"refusing to write {path!r} through symlink (to {os.readlink(path)!r}): a memory-mapped file is "
                "created or overwritten only at its own path."
            )
            raise RuntimeError(msg) from None
        raise _with_filename(err, path) from err
    try:
        if nbytes:
            os.ftruncate(fd, nbytes)
    except OSError as err:
        raise _with_filename(err, path) from err
    finally:
        os.close(fd)


def _byte_view(tensor: torch.Tensor) -> memoryview:
    """A zero-copy byte view of a contiguous CPU tensor (keep ``tensor`` alive while used)."""
    n = tensor.numel() * tensor.element_size()
    if n == 0:
        return memoryview(b"")
    return memoryview((ctypes.c_char * n).from_address(tensor.data_ptr())).cast("B")


def _pwrite_all(fd: int, view: memoryview, offset: int) -> None:
    pos = 0
    n = len(view)
    while pos < n:
        pos += os.pwrite(fd, view[pos : pos + CHUNK], offset + pos)


def _contiguous_pieces(t: torch.Tensor, offset: int) -> Iterator[tuple[torch.Tensor, int, int]]:
    """Yields ``(piece, byte_offset, nbytes)`` covering ``t`` in C order.

    A contiguous (or small) ``t`` is one piece. Otherwise pieces are slices along
    dim 0 of at most ``CHUNK`` bytes, made contiguous only when written.
    """
    nbytes = t.numel() * t.element_size()
    if t.is_contiguous() or nbytes <= CHUNK or t.ndim == 0:
        yield t, offset, nbytes
        return
    row = nbytes // t.shape[0]
    rows = max(1, CHUNK // max(row, 1))
    for start in range(0, t.shape[0], rows):
        piece = t[start : start + rows]
        if rows == 1 and not piece.is_contiguous() and row > CHUNK:
            yield from _contiguous_pieces(piece[0], offset + start * row)
        else:
            yield piece, offset + start * row, piece.numel() * t.element_size()


def _write_pieces(path: str, pieces: list[tuple[torch.Tensor, int]]) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        for piece, offset in pieces:
            piece = piece.contiguous()
            view = _byte_view(piece)
            try:
                _pwrite_all(fd, view, offset)
            except OSError as err:
                raise _with_filename(err, path) from err
            finally:
                del view
    finally:
        os.close(fd)


def write_tensor_jobs(path: str, tensor: torch.Tensor) -> list[Callable[[], None]]:
    """Creates ``path`` (sized, sparse) and returns the job that writes ``tensor``'s bytes.

    One job per file: writes to one file are serialised by the file system anyway,
    so threads pay off across files, each written front to back in large
    ``pwrite`` calls. The tensor is brought to the CPU first if needed;
    conjugate/negative views are resolved so the bytes on disk are the values. A
    non-contiguous tensor is written in slices made contiguous one at a time, so
    an expanded tensor is never materialised whole.
    """
    if tensor.layout is not torch.strided or tensor.is_nested:
        msg = f"cannot memory-map a {tensor.layout} tensor (only dense, strided tensors are supported)."
        raise TypeError(msg)
    if tensor.device.type == "meta":
        msg = "cannot write a tensor on the 'meta' device (it has no data); use memmap_like() instead."
        raise RuntimeError(msg)
    t = tensor.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.resolve_conj().resolve_neg()
    nbytes = t.numel() * t.element_size()
    allocate(path, nbytes, existsok=True)
    if nbytes == 0:
        return []
    pieces = [(piece, off) for piece, off, _ in _contiguous_pieces(t, 0)]

    def run() -> None:
        _write_pieces(path, pieces)

    return [run]


def run_jobs(jobs: list[Callable[[], None]], num_threads: int) -> None:
    """Runs ``jobs`` (in this thread if ``num_threads <= 1``); re-raises the first error."""
    if num_threads <= 1 or len(jobs) <= 1:
        for job in jobs:
            job()
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(num_threads, len(jobs))) as pool:
        futures = [pool.submit(job) for job in jobs]
        for f in futures:
            f.result()
