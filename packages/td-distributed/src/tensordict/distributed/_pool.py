"""Worker pools: ``td.map(fn, ...)`` and ``td.map_iter(fn, ...)``.

The TensorDict is split along ``dim`` into chunks and ``fn`` runs on each chunk in
a ``torch.multiprocessing`` pool. The data is never pickled:

- the workers read the chunks from a *source* that all processes map: the
  TensorDict itself when it is memory-mapped (td-memmap; its leaves pickle as file
  names) or already in shared memory, otherwise one consolidated copy of it in
  shared memory (its single storage pickles as one shared-memory handle). A pool
  this module forks needs no source at all for a plain CPU TensorDict: each worker
  reads its copy-on-write image of the caller's memory (nothing is copied up
  front), and a chunk that ``fn`` changes in place travels back like a result.
  With the pool this module creates, the source and ``fn`` are handed to each
  worker once, at start-up (inherited with ``fork``); a task is then only an index.
- a result that ``fn`` returns is written by the worker to a consolidated file in
  ``/dev/shm`` (RAM) and memory-mapped by the caller, which then concatenates the
  results; nothing is streamed through the pool's pipes.
- ``fn`` returning ``None`` means it modified its chunk in place: the chunk is a
  view of the shared source, so the change lands there, and is copied back into
  the TensorDict when the source is a copy.

A worker that raises sends back its traceback; the caller re-raises the same
exception type with the worker's traceback attached (as its ``__cause__`` and, on
Python 3.11+, a note). A worker that dies (killed, segfault) is detected and
reported instead of leaving the caller waiting forever.
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import sys
import tempfile
import threading
import traceback
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.multiprocessing as mp

__all__ = ["map", "map_iter"]

_TENSOR_KEY = "_tensordict_map_tensor"

#: in a worker: token -> (source, fn), set by the pool initializer
_WORKER_STATE: dict = {}


# ---------------------------------------------------------------------- worker side
def _init_worker(token: str, source: Any, fn: Callable, worker_threads: int, inherited: bool = False) -> None:
    if worker_threads:
        torch.set_num_threads(worker_threads)
    _WORKER_STATE[token] = (source, fn, inherited)


def _index(dim: int, spec: Any) -> tuple:
    if isinstance(spec, list):
        spec = torch.tensor(spec, dtype=torch.long)
    return (slice(None),) * dim + (spec,)


def _ship(result: Any, chunk_id: int, outdir: str, kind: str = "td") -> tuple:
    from tensordict.ext import TensorDict, TensorDictBase

    if result is None:
        return ("none", chunk_id)
    if isinstance(result, torch.Tensor):
        kind, td = "tensor", TensorDict({_TENSOR_KEY: result.detach()}, batch_size=[])
    elif isinstance(result, TensorDictBase):
        td = result  # type: ignore[assignment]
    else:
        return ("object", chunk_id, type(result).__name__)
    path = os.path.join(outdir, f"{chunk_id}-{uuid.uuid4().hex}.td")
    try:
        td.consolidate(filename=path)
    except TypeError:
        # a non-JSON non-tensor value: fall back to torch.multiprocessing's shared-memory pickling
        return ("pickled", chunk_id, kind, td)
    return ("file", chunk_id, kind, path)


def _preload_for_fork() -> None:
    """Imports, once in the caller, what every forked worker would otherwise import anew.

    ``numpy.random`` is loaded lazily by numpy 2 (about 10 ms): a worker that seeds it
    (:func:`_seed_worker`) would pay that on every ``map`` call; imported here it is
    inherited by every fork. Only done when the caller already imported numpy.
    """
    if "numpy" in sys.modules and "numpy.random" not in sys.modules:
        import numpy.random  # noqa: F401


def _seed_worker(seed: int) -> None:
    """Seeds torch, and numpy's and Python's global generators when the worker uses them."""
    import random

    torch.manual_seed(seed)
    random.seed(seed)
    np = sys.modules.get("numpy")  # never imported here just for this
    if np is not None:
        np.random.seed(seed % 2**32)


def _run_task(task: tuple) -> tuple:
    token, source, fn, dim, spec, seed, chunk_id, outdir, threads = task
    inherited = False
    try:
        if source is None:
            source, fn, inherited = _WORKER_STATE[token]
        if threads and torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        idx = _index(dim, spec)
        chunk = source[idx]
        if seed is not None:
            _seed_worker(seed)
        result = fn(chunk)
        if result is None and inherited:
            # the source is this process's copy-on-write image of the caller's memory: the
            # in-place changes travel back like a result, and the caller writes them in
            return _ship(chunk, chunk_id, outdir, "inplace")
        if result is None and isinstance(spec, list):
            source[idx] = chunk  # fancy indexing copied the rows: write the in-place changes back
        return _ship(result, chunk_id, outdir)
    except BaseException as err:  # noqa: BLE001 - everything goes back to the caller
        tb = traceback.format_exc()
        try:
            blob = pickle.dumps(err)
        except Exception:  # noqa: BLE001 - unpicklable exception: the text is enough
            blob = None
        return ("error", chunk_id, os.getpid(), type(err).__name__, str(err), tb, blob)


def _forked_worker(token: str, conn: Any, first: int, counter: Any, lock: Any, specs: list, dim: int,
                   base_seed: int, outdir: str, threads: int) -> None:
    """A worker of :class:`_ForkedWorkers`: runs chunk ``first``, then takes the next chunk
    id from the shared counter, runs it (:func:`_run_task`, as a pool worker would) and
    sends each result message back, until no chunk is left; then it exits."""
    if threads:
        torch.set_num_threads(threads)
    i = first
    try:
        while True:
            if i < 0:
                with lock:
                    i = counter.value
                    if i >= len(specs):
                        return
                    counter.value = i + 1
            msg = _run_task((token, None, None, dim, specs[i], base_seed + i, i, outdir, threads))
            conn.send(msg)
            if msg[0] == "error":
                return  # the caller stops the job at this error: no more chunks to run
            i = -1
    finally:
        conn.close()


# ---------------------------------------------------------------------- caller side
class _ForkedWorkers:
    """The processes of a ``map`` whose workers are forked by this module (no user pool,
    no ``max_tasks_per_child``): lighter than a ``multiprocessing.Pool``.

    Each worker is forked with the source and ``fn`` in its memory (nothing is sent at
    start-up), takes chunk ids from a shared counter (so a fast worker takes more
    chunks) and sends each result message through its own pipe; it exits when no chunk
    is left. No thread runs in the caller while the workers compute: the caller waits
    on the pipes and on the processes' sentinels (a worker that dies is reported at
    once) and takes the results in chunk order.
    """

    def __init__(self, ctx: Any, job: _Job) -> None:
        self.op = job.op
        self.procs: list = []
        self.conns: dict = {}  # connection -> process
        # worker w runs chunk w first (every worker gets one), then the counter hands out the rest
        # kept until every worker has exited: the shared heap block of a freed counter would be
        # reused by the next map's counter while a worker of this one may still read it
        self.shared = counter, lock = ctx.RawValue("q", job.num_workers), ctx.Lock()
        _WORKER_STATE[job.token] = (job.source, job.fn, job.inherited)
        try:
            for w in range(job.num_workers):
                recv_end, send_end = ctx.Pipe(duplex=False)
                proc = ctx.Process(
                    target=_forked_worker,
                    args=(job.token, send_end, w, counter, lock, job.specs, job.dim, job.base_seed, job.outdir,
                          job.threads),
                    daemon=True,
                    name="tensordict-map-worker",
                )
                proc.start()
                send_end.close()
                self.procs.append(proc)
                self.conns[recv_end] = proc
        except BaseException:
            self.terminate()
            raise
        finally:
            del _WORKER_STATE[job.token]  # the forked workers have their copy; the caller keeps none

    def messages(self, count: int) -> Iterator[tuple]:
        """Yields the ``count`` result messages in chunk order."""
        from multiprocessing.connection import wait

        pending: dict = {}
        for next_id in range(count):
            while next_id not in pending:
                if not self.conns:
                    msg = f"{self.op}: the worker processes exited before returning chunk {next_id}."
                    raise RuntimeError(msg)
                ready: list[Any] = wait(list(self.conns))
                for conn in ready:
                    try:
                        got = conn.recv()
                    except EOFError:  # the worker closed its pipe: it is done, or it died
                        proc = self.conns.pop(conn)
                        proc.join(5.0)
                        self._check_exit(proc)
                        continue
                    pending[got[1]] = got
            yield pending.pop(next_id)

    def _check_exit(self, proc: Any) -> None:
        code = proc.exitcode
        if code not in (None, 0):
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            msg = (
                f"{self.op}: a worker process (pid {proc.pid}) died ({how}) while running fn; the chunk it held "
                "is lost. Out of memory, a crash in native code or a kill are the usual causes."
            )
            raise RuntimeError(msg)

    def close(self) -> None:
        """Every result is in: the workers exit on their own, joined in the background."""
        for conn in self.conns:
            conn.close()
        procs = self.procs

        def join(shared: tuple = self.shared) -> None:  # holds the counter until the workers are gone
            for proc in procs:
                proc.join()

        threading.Thread(target=join, name="tensordict-map-join", daemon=True).start()

    def terminate(self) -> None:
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()
        for proc in self.procs:
            proc.join()
        for conn in self.conns:
            conn.close()



class _RemoteTraceback(Exception):
    """Carries a worker's formatted traceback (shown as the cause of the re-raised error)."""

    def __init__(self, tb: str) -> None:
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return self.tb


def _raise_worker_error(msg: tuple) -> None:
    _, chunk_id, pid, type_name, text, tb, blob = msg
    err: BaseException | None = None
    if blob is not None:
        try:
            err = pickle.loads(blob)  # our own child process: trusted, like multiprocessing.Pool
        except Exception:  # noqa: BLE001
            err = None
    note = f"raised by map's fn in worker process {pid} on chunk {chunk_id}; worker traceback:\n{tb}"
    if not isinstance(err, BaseException):
        err = RuntimeError(f"map: fn raised {type_name}: {text}\n\nWorker traceback (process {pid}, chunk {chunk_id}):\n{tb}")
        raise err
    if hasattr(err, "add_note"):
        err.add_note(note)
    raise err from _RemoteTraceback(tb)


def _is_memmap(td: Any) -> bool:
    try:
        return bool(td.is_memmap())
    except ImportError:  # td-memmap is not installed: nothing is memory-mapped
        return False


def _inheritable(td: Any) -> bool:
    """Whether forked workers can read ``td`` itself, through their copy-on-write image of
    this process's memory: a plain TensorDict (nested plain TensorDicts and non-tensor data
    allowed) whose leaves are all dense CPU tensors."""
    from tensordict import TensorDict

    if td.__class__ is not TensorDict:
        return False
    stack = [td]
    while stack:
        node = stack.pop()
        for value in node._tensordict.values():
            if isinstance(value, torch.Tensor):
                if value.device.type != "cpu" or value.layout is not torch.strided or value.is_nested:
                    return False
            elif value.__class__ is TensorDict:
                stack.append(value)
            elif not _is_non_tensor(value):
                return False
    return True


def _is_non_tensor(value: Any) -> bool:
    from tensordict.ext import NonTensorData, NonTensorStack

    return isinstance(value, (NonTensorData, NonTensorStack))


def _is_shared(td: Any) -> bool:
    try:
        return bool(td.is_shared())
    except (AttributeError, RuntimeError):
        return False


def _shared_source(td: Any) -> tuple[Any, bool]:
    """``(source, copied)``: what the workers read (and write in place)."""
    if _is_memmap(td):
        return td, False
    try:
        if td.is_shared() and all(t.device.type == "cpu" for t in td._tensor_leaves()):
            return td, False
    except (AttributeError, RuntimeError):
        pass
    members = getattr(td, "tensordicts", None)
    if members:
        # A chunk of a lazy stack stacks a leaf when it is read (a copy), so a worker's
        # in-place change would be lost: when every stacked TensorDict has the same keys,
        # the workers get one dense shared copy, whose changes write_back() puts into the
        # stacked TensorDicts. Heterogeneous stacks stay lazy (a dense copy would hold only
        # the shared keys).
        keys = [set(t.keys(include_nested=True, leaves_only=True)) for t in members]
        if all(k == keys[0] for k in keys[1:]):
            try:
                dense = td.contiguous()
            except (RuntimeError, ValueError, TypeError):  # shapes that do not stack
                dense = None
            if dense is not None:
                dense.share_memory_()
                return dense, True
    try:
        return td.consolidate(share_memory=True), True
    except TypeError:
        copy = td.clone()
        copy.share_memory_()
        return copy, True


def _shm_dir() -> str | None:
    path = "/dev/shm"
    if os.path.isdir(path) and os.access(path, os.W_OK):
        return path
    return None


def _chunk_specs(n: int, num_workers: int, chunksize: int | None, num_chunks: int | None,
                 perm: list | None) -> list:
    """Index specs (``int``, ``slice`` or list of ints) of the chunks, in order."""
    if chunksize is not None and num_chunks is not None:
        msg = "map: chunksize and num_chunks are exclusive: pass one of them but not both."
        raise ValueError(msg)
    if chunksize == 0:
        return [perm[i] if perm is not None else i for i in range(n)]
    if chunksize is not None:
        if not isinstance(chunksize, int) or chunksize < 0:
            raise ValueError(f"map: chunksize must be a non-negative int, got {chunksize!r}.")
        bounds = [(a, min(a + chunksize, n)) for a in range(0, n, chunksize)]
    else:
        k = num_chunks if num_chunks is not None else num_workers
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"map: num_chunks must be a positive int, got {k!r}.")
        k = min(k, n)
        base, extra = divmod(n, k)
        bounds, start = [], 0
        for i in range(k):
            stop = start + base + (1 if i < extra else 0)
            bounds.append((start, stop))
            start = stop
    if perm is not None:
        return [perm[a:b] for a, b in bounds]
    return [slice(a, b) for a, b in bounds]


class _Job:
    """One map/map_iter run: plans the chunks, owns the pool and the result folder."""

    def __init__(self, td: Any, fn: Callable, dim: int, num_workers: int | None, *, shuffle: bool,
                 chunksize: int | None, num_chunks: int | None, pool: Any, generator: Any,
                 max_tasks_per_child: int | None, worker_threads: int, index_with_generator: bool,
                 mp_start_method: str | None, op: str) -> None:
        if not callable(fn):
            raise TypeError(f"{op}: fn must be callable, got {type(fn).__name__}.")
        nd = td.batch_dims
        if nd == 0:
            msg = f"{op}: the TensorDict has no batch dimension to split (batch_size=[]); give it a batch size."
            raise ValueError(msg)
        if not isinstance(dim, int) or not -nd <= dim < nd:
            msg = f"{op}: dim={dim!r} is out of range for a TensorDict with batch_size {tuple(td.batch_size)}."
            raise ValueError(msg)
        self.op = op
        self.td, self.fn = td, fn
        self.dim = dim % nd
        self.n = td.batch_size[self.dim]
        if num_workers is None:
            num_workers = os.cpu_count() or 1
        if not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(f"{op}: num_workers must be a positive int, got {num_workers!r}.")
        perm = None
        if shuffle:
            perm = torch.randperm(self.n, generator=generator).tolist()
        self.stack = chunksize == 0
        self.specs = _chunk_specs(self.n, num_workers, chunksize, num_chunks, perm)
        self.lazy_tasks = index_with_generator
        seed_t = torch.randint(0, 1 << 62, (), generator=generator) if generator is not None else torch.randint(0, 1 << 62, ())
        self.base_seed = int(seed_t)
        self.user_pool = pool
        self.num_workers = min(num_workers, max(1, len(self.specs)))
        self.max_tasks = max_tasks_per_child
        self.threads = worker_threads
        self.method = mp_start_method
        self.source: Any = None
        self.copied = False
        self.token = uuid.uuid4().hex
        self.outdir = ""
        self.pool = None
        self.workers: _ForkedWorkers | None = None
        self.seen: dict = {}
        self.inherited = False

    # -- tasks
    def _tasks(self) -> Iterator[tuple]:
        own = self.user_pool is None
        for i, spec in enumerate(self.specs):
            yield (
                self.token,
                None if own else self.source,
                None if own else self.fn,
                self.dim,
                spec,
                self.base_seed + i,
                i,
                self.outdir,
                self.threads,
            )

    def _start_method(self) -> str | None:
        method = self.method
        if method is None and torch.cuda.is_available() and torch.cuda.is_initialized():
            method = "spawn"  # a forked child cannot use CUDA once the parent initialized it
        if method is None and self.threads != 1 and mp.get_start_method(allow_none=True) in (None, "fork"):
            # a forked child that runs several OpenMP threads after its parent used OpenMP
            # hangs (libgomp); a fork server's children start from a clean process
            if "forkserver" in mp.get_all_start_methods():
                method = "forkserver"
        return method

    def _make_source(self) -> None:
        """The workers' source: ``td`` itself for a pool of ours that forks (each worker reads
        its copy-on-write image of this process's memory: nothing is copied up front), else a
        source every process maps (see :func:`_shared_source`)."""
        if (
            self.user_pool is None
            and mp.get_context(self._start_method()).get_start_method() == "fork"
            and _inheritable(self.td)
            and not _is_memmap(self.td)
            and not _is_shared(self.td)  # shared memory is mapped by every process already
        ):
            self.source, self.copied, self.inherited = self.td, False, True
            return
        self.source, self.copied = _shared_source(self.td)

    def _start_pool(self) -> Any:
        if self.user_pool is not None:
            return self.user_pool
        ctx = mp.get_context(self._start_method())
        if ctx.get_start_method() == "fork":
            _preload_for_fork()
        try:
            pool = ctx.Pool(
                self.num_workers,
                initializer=_init_worker,
                initargs=(self.token, self.source, self.fn, self.threads, self.inherited),
                maxtasksperchild=self.max_tasks,
            )
        except (pickle.PicklingError, AttributeError, TypeError) as err:
            msg = (
                f"{self.op}: fn cannot be sent to '{ctx.get_start_method()}' worker processes ({err}). Define it "
                "at the top level of a module (not a lambda or a local function), or use mp_start_method='fork'."
            )
            raise TypeError(msg) from err
        self.pool = pool  # type: ignore[assignment]
        return pool

    def _check_workers(self, pool: Any) -> None:
        for p in list(getattr(pool, "_pool", []) or []):
            self.seen.setdefault(p.pid, p)
        for pid, p in self.seen.items():
            code = p.exitcode
            if code not in (None, 0):
                how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
                msg = (
                    f"{self.op}: a worker process (pid {pid}) died ({how}) while running fn; the chunk it held "
                    "is lost. Out of memory, a crash in native code or a kill are the usual causes."
                )
                raise RuntimeError(msg)

    def results(self, pbar: bool) -> Iterator[tuple[int, Any]]:
        """Yields ``(chunk_id, result or None)`` in chunk order."""
        bar = None
        if pbar:
            from tqdm import tqdm

            bar = tqdm(total=len(self.specs), desc=self.op)
        ok = False
        try:
            self._make_source()
            self.outdir = tempfile.mkdtemp(prefix="tensordict-map-", dir=_shm_dir())
            for msg in self._messages():
                value = self._load(msg)
                if msg[0] in ("file", "pickled") and msg[2] == "inplace":
                    self._write_inplace(msg[1], value)
                    value = None
                yield msg[1], value
                if bar is not None:
                    bar.update(1)
            ok = True
        finally:
            if bar is not None:
                bar.close()
            self.close(ok)

    def _messages(self) -> Iterator[tuple]:
        """The workers' result messages, in chunk order."""
        ctx = mp.get_context(self._start_method())
        if self.user_pool is None and self.max_tasks is None and ctx.get_start_method() == "fork":
            _preload_for_fork()
            self.workers = _ForkedWorkers(ctx, self)
            yield from self.workers.messages(len(self.specs))
            return
        pool = self._start_pool()
        tasks = self._tasks() if self.lazy_tasks else list(self._tasks())
        it = pool.imap(_run_task, tasks)
        self._check_workers(pool)
        for _ in range(len(self.specs)):
            while True:
                try:
                    msg = it.next(timeout=0.25)
                    break
                except mp.TimeoutError:
                    self._check_workers(pool)
            yield msg

    def _load(self, msg: tuple) -> Any:
        kind = msg[0]
        if kind == "none":
            return None
        if kind == "error":
            _raise_worker_error(msg)
        if kind == "object":
            msg_text = (
                f"{self.op}: fn returned a {msg[2]}; it must return a TensorDict, a tensor, or None "
                "(after modifying its chunk in place)."
            )
            raise TypeError(msg_text)
        if kind == "pickled":
            _, _, what, td = msg
        else:
            from tensordict.ext import from_consolidated

            _, _, what, path = msg
            td = from_consolidated(path)
            os.unlink(path)  # the mapping stays valid; the memory goes when the result does
        return td[_TENSOR_KEY] if what == "tensor" else td

    def _write_inplace(self, chunk_id: int, chunk: Any) -> None:
        """Writes a forked worker's in-place changes to its chunk into the TensorDict."""
        idx = _index(self.dim, self.specs[chunk_id])
        keys = set(self.td.keys(True, True))
        extra = [k for k in chunk.keys(True, True) if k not in keys]
        if extra:
            chunk = chunk.exclude(*extra)  # entries fn added to its chunk stay in the worker, as with shared memory
        with torch.no_grad():
            self.td[idx] = chunk

    def close(self, ok: bool) -> None:
        if self.workers is not None:
            if ok:
                self.workers.close()
            else:
                self.workers.terminate()
            self.workers = None
        if self.pool is not None:
            if ok:
                # every result is in: the idle workers exit on their own, joined in the background
                pool = self.pool
                pool.close()
                threading.Thread(target=pool.join, name="tensordict-map-join", daemon=True).start()
            else:
                self.pool.terminate()
                self.pool.join()
            self.pool = None
        if self.outdir:
            shutil.rmtree(self.outdir, ignore_errors=True)
            self.outdir = ""

    def write_back(self, spec: Any | None) -> None:
        """Copies in-place changes from a copied source into the TensorDict."""
        if not self.copied:
            return
        with torch.no_grad():
            if spec is None:
                self.td.update_(self.source)
            else:
                idx = _index(self.dim, spec)
                self.td[idx] = self.source[idx]


def _join(parts: list, dim: int, stack: bool) -> Any:
    if stack:
        from tensordict import TensorDictBase, maybe_dense_stack

        if parts and isinstance(parts[0], TensorDictBase):
            # results with different keys or shapes (e.g. from a heterogeneous lazy
            # stack) come back as a lazy stack instead of failing
            return maybe_dense_stack(parts, dim)
        return torch.stack(parts, dim)
    return torch.cat(parts, dim)


def map(td: Any, fn: Callable, dim: int = 0, num_workers: int | None = None, *, out: Any = None,
        chunksize: int | None = None, num_chunks: int | None = None, pool: Any = None, generator: Any = None,
        max_tasks_per_child: int | None = None, worker_threads: int = 1, index_with_generator: bool = False,
        pbar: bool = False, mp_start_method: str | None = None) -> Any:
    """Runs ``fn`` on chunks of the TensorDict in worker processes and joins the results.

    The TensorDict is split along ``dim``; each chunk is a view of memory that every
    worker maps (the memory-mapped files of a td-memmap TensorDict, or shared
    memory), so no data is pickled. ``fn`` receives a chunk (a TensorDict with the
    same keys, ``batch_size[dim]`` cut to the chunk) and returns:

    - a TensorDict or a tensor: the results are concatenated along ``dim`` (stacked
      with ``chunksize=0``) into the returned value;
    - ``None``: it modified the chunk in place (``chunk["x"].mul_(2)``,
      ``chunk.apply_(...)``, ``chunk.update_(...)``); the changes are written into
      this TensorDict, which is returned.

    Args:
        fn (Callable[[TensorDictBase], TensorDictBase | Tensor | None]): the function.
            With the ``spawn``/``forkserver`` start methods it must be picklable
            (defined at a module's top level); with ``fork`` any callable works.
        dim (int): the batch dimension to split along. Defaults to ``0``.
        num_workers (int, optional): worker processes. Defaults to ``os.cpu_count()``
            (never more than the number of chunks).

    Keyword Args:
        out (TensorDictBase, optional): write the joined results into this TensorDict.
        chunksize (int, optional): rows per chunk; ``0`` runs ``fn`` on every single
            row (the results are stacked). Exclusive with ``num_chunks``.
        num_chunks (int, optional): number of chunks (even sizes). Defaults to
            ``num_workers``.
        pool (multiprocessing.pool.Pool, optional): an existing pool to use (it is
            not closed); the source then travels with each task, as shared-memory
            handles or file names.
        generator (torch.Generator, optional): seeds the workers: chunk ``i`` runs
            after ``torch.manual_seed(base + i)`` (and numpy's and Python's ``random``
            seeded alike) with ``base`` drawn from it (from
            the global generator when ``None``), so results do not depend on scheduling.
        max_tasks_per_child (int, optional): replace a worker after that many chunks.
        worker_threads (int): ``torch.set_num_threads`` in each worker (``0``: leave
            torch's default). Defaults to ``1``.
        index_with_generator (bool): build the tasks lazily while the pool consumes
            them instead of up front. Defaults to ``False``.
        pbar (bool): show a tqdm progress bar (one tick per chunk). Defaults to ``False``.
        mp_start_method (str, optional): ``"fork"``, ``"spawn"`` or ``"forkserver"``.
            Defaults to torch.multiprocessing's default (``fork`` on Linux), except
            ``spawn`` once CUDA is initialized, and ``forkserver`` instead of ``fork``
            when ``worker_threads != 1``: a forked child that runs OpenMP threads after
            its parent used them hangs (libgomp), one thread per worker is safe.

    Returns:
        the joined results, or this TensorDict when ``fn`` returns ``None``.

    Raises:
        ValueError: ``dim`` is out of range, the TensorDict has no batch dimension,
            ``chunksize``/``num_chunks`` are both given or invalid.
        TypeError: ``fn`` cannot be sent to the workers, or returns something else
            than a TensorDict, a tensor or ``None``.
        RuntimeError: a worker died; some chunks returned ``None`` and others not.
        Exception: the exception ``fn`` raised in a worker, re-raised here with the
            worker's traceback as its cause (and as a note on Python 3.11+).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(x=torch.arange(8.0), batch_size=[8])
        >>> def double(chunk):
        ...     return chunk.apply(lambda t: t * 2)
        >>> td.map(double, num_workers=2, mp_start_method="fork")["x"].tolist()
        [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0]
    """
    job = _Job(td, fn, dim, num_workers, shuffle=False, chunksize=chunksize, num_chunks=num_chunks, pool=pool,
               generator=generator, max_tasks_per_child=max_tasks_per_child, worker_threads=worker_threads,
               index_with_generator=index_with_generator, mp_start_method=mp_start_method, op="map")
    if job.n == 0:
        job.close(True)
        result = fn(td)
        return td if result is None else result
    parts: list = []
    nones = 0
    for chunk_id, value in job.results(pbar):
        if value is None:
            nones += 1
        elif out is not None:
            idx = _index(job.dim, job.specs[chunk_id])
            with torch.no_grad():
                out[idx] = value
        else:
            parts.append(value)
    if nones and (parts or (out is not None and nones != len(job.specs))):
        msg = "map: fn returned None for some chunks and a value for others; it must do one or the other."
        raise RuntimeError(msg)
    if nones:
        job.write_back(None)
        return td
    if out is not None:
        return out
    return _join(parts, job.dim, job.stack)


def map_iter(td: Any, fn: Callable, dim: int = 0, num_workers: int | None = None, *, shuffle: bool = False,
             chunksize: int | None = None, num_chunks: int | None = None, pool: Any = None, generator: Any = None,
             max_tasks_per_child: int | None = None, worker_threads: int = 1, index_with_generator: bool = True,
             pbar: bool = False, mp_start_method: str | None = None) -> Iterator[Any]:
    """Runs ``fn`` on chunks in worker processes and yields each result as it is ready, in order.

    The iterator version of :meth:`map` (same arguments): it can serve as a data
    loader over a (memory-mapped) TensorDict. For a chunk on which ``fn`` returns
    ``None``, the chunk itself is yielded after its in-place changes were written
    into this TensorDict. Closing the iterator early stops the pool.

    Keyword Args:
        shuffle (bool): visit the rows in a random order (drawn from ``generator``):
            chunks are then gathered copies rather than views. Defaults to ``False``.

    Yields:
        one result per chunk (TensorDict or tensor), in chunk order.

    Raises:
        as :meth:`map`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(x=torch.arange(6.0), batch_size=[6])
        >>> def total(chunk):
        ...     return chunk["x"].sum().reshape(1)
        >>> [t.item() for t in td.map_iter(total, num_workers=2, chunksize=3, mp_start_method="fork")]
        [3.0, 12.0]
    """
    job = _Job(td, fn, dim, num_workers, shuffle=shuffle, chunksize=chunksize, num_chunks=num_chunks, pool=pool,
               generator=generator, max_tasks_per_child=max_tasks_per_child, worker_threads=worker_threads,
               index_with_generator=index_with_generator, mp_start_method=mp_start_method, op="map_iter")
    return _iterate(job, pbar)


def _iterate(job: _Job, pbar: bool) -> Iterator[Any]:
    if job.n == 0:
        job.close(True)
        return
    for chunk_id, value in job.results(pbar):
        if value is None:
            spec = job.specs[chunk_id]
            job.write_back(spec)
            yield job.td[_index(job.dim, spec)]
        else:
            yield value
