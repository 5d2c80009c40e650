"""Worker pools: TensorDict.map / map_iter over real torch.multiprocessing pools."""

from __future__ import annotations

import multiprocessing
import traceback

import _jobs
import pytest
import torch

from tensordict import TensorDict, lazy_stack

try:
    import tensordict.memmap  # noqa: F401

    HAS_MEMMAP = True
except ImportError:
    HAS_MEMMAP = False


def _td(n: int = 20) -> TensorDict:
    return TensorDict(x=torch.arange(float(n)).view(n, 1).expand(n, 2).clone(), label="rows", batch_size=[n])


@pytest.mark.timeout(60)
def test_map_returns_concatenated_results():
    td = _td()
    out = td.map(_jobs.square, num_workers=2)
    assert out.batch_size == td.batch_size
    assert torch.equal(out["y"], td["x"] ** 2)
    # chunk sizes and counts
    assert torch.equal(td.map(_jobs.square, num_workers=2, chunksize=3)["y"], td["x"] ** 2)
    assert torch.equal(td.map(_jobs.square, num_workers=2, num_chunks=7)["y"], td["x"] ** 2)
    # tensors are concatenated too
    assert torch.equal(td.map(_jobs.row_sum, num_workers=2), td["x"].sum(-1))
    # chunksize=0: one call per row, results stacked
    out = td.map(_jobs.row_sum, num_workers=2, chunksize=0)
    assert torch.equal(out, td["x"].sum(-1))


@pytest.mark.timeout(60)
def test_map_in_place_writes_back():
    td = _td()
    before = td["x"].clone()
    res = td.map(_jobs.add_one_inplace, num_workers=2, chunksize=4)
    assert res is td
    assert torch.equal(td["x"], before + 1)
    # a lazy stack is written back through to its members
    lazy = lazy_stack([TensorDict(x=torch.zeros(3)), TensorDict(x=torch.ones(3))])
    lazy.map(_jobs.add_one_inplace, num_workers=2)
    assert lazy.tensordicts[1]["x"].tolist() == [2.0, 2.0, 2.0]


@pytest.mark.timeout(60)
def test_map_chunks_are_shared_not_copied():
    td = _td(8)
    # forked workers read the caller's memory itself (their copy-on-write image): each
    # chunk sits at the address of its rows in the caller's tensor, nothing was copied
    info = td.map(_jobs.report_sharing, num_workers=2, mp_start_method="fork")["info"]
    rows = td["x"]
    assert info[0, 3].item() == rows[0].data_ptr() and info[4, 3].item() == rows[4].data_ptr()
    assert len(set(info[:, 2].tolist())) == 2  # two worker processes did the work
    # workers that do not fork read one shared-memory copy
    info = td.map(_jobs.report_sharing, num_workers=2, mp_start_method="forkserver")["info"]
    assert bool((info[:, 0] == 1).all()), "the workers' chunks are not in shared memory"
    # a user's pool gets the shared copy too (its workers were not forked from this state)
    with multiprocessing.get_context("fork").Pool(2) as pool:
        info = td.map(_jobs.report_sharing, pool=pool, num_chunks=2)["info"]
    assert bool((info[:, 0] == 1).all())


@pytest.mark.timeout(60)
def test_map_in_place_with_forked_workers_and_added_keys():
    td = _td(10)
    td.lock_()
    before = td["x"].clone()
    assert td.map(_jobs.add_one_inplace, num_workers=2, mp_start_method="fork") is td
    assert torch.equal(td["x"], before + 1)
    # shuffled rows (gathered copies) come back to the right rows
    it = td.map_iter(_jobs.add_one_inplace, num_workers=2, chunksize=3, shuffle=True, mp_start_method="fork")
    assert sum(chunk.batch_size[0] for chunk in it) == 10
    assert torch.equal(td["x"], before + 2)
    td.unlock_()
    # an entry fn adds to its chunk stays in the worker (as with shared memory)
    td.map(_jobs.add_key_inplace, num_workers=2, mp_start_method="fork")
    assert "new" not in td.keys() and torch.equal(td["x"], before + 3)


@pytest.mark.timeout(60)
def test_map_along_other_dim_and_out():
    td = TensorDict(x=torch.arange(24.0).view(2, 12), batch_size=[2, 12])
    out = td.map(_jobs.square, dim=1, num_workers=2, chunksize=5)
    assert torch.equal(out["y"], td["x"] ** 2)
    dest = TensorDict(y=torch.zeros(2, 12), batch_size=[2, 12])
    res = td.map(_jobs.square, dim=-1, num_workers=2, out=dest)
    assert res is dest and torch.equal(dest["y"], td["x"] ** 2)


@pytest.mark.timeout(60)
def test_map_worker_exception_surfaces_with_traceback():
    td = _td(100)
    with pytest.raises(ValueError, match="value too large") as info:
        td.map(_jobs.fail_on_big_values, num_workers=2, num_chunks=4)
    text = "".join(traceback.format_exception(info.value))
    assert "fail_on_big_values" in text and "_jobs.py" in text  # the worker's own frames
    assert "worker process" in text


@pytest.mark.timeout(60)
def test_map_iter_yields_in_order_and_writes_back():
    td = _td(10)
    parts = list(td.map_iter(_jobs.row_sum, num_workers=2, chunksize=3))
    assert [p.shape[0] for p in parts] == [3, 3, 3, 1]
    assert torch.equal(torch.cat(parts), td["x"].sum(-1))
    before = td["x"].clone()
    chunks = list(td.map_iter(_jobs.add_one_inplace, num_workers=2, chunksize=5))
    assert len(chunks) == 2 and torch.equal(td["x"], before + 1)
    # shuffled: every row once, in a random order
    rows = torch.cat(list(td.map_iter(_jobs.row_sum, num_workers=2, chunksize=4, shuffle=True,
                                      generator=torch.Generator().manual_seed(0))))
    assert sorted(rows.tolist()) == sorted(td["x"].sum(-1).tolist())
    # closing the iterator early stops the pool
    it = td.map_iter(_jobs.row_sum, num_workers=2, chunksize=1)
    next(it)
    it.close()


@pytest.mark.timeout(60)
def test_map_seeds_workers_from_the_generator():
    td = _td(12)
    a = td.map(_jobs.random_noise, num_workers=2, chunksize=3, generator=torch.Generator().manual_seed(1))
    b = td.map(_jobs.random_noise, num_workers=2, chunksize=3, generator=torch.Generator().manual_seed(1))
    c = td.map(_jobs.random_noise, num_workers=2, chunksize=3, generator=torch.Generator().manual_seed(2))
    assert torch.equal(a["r"], b["r"]) and not torch.equal(a["r"], c["r"])
    assert not torch.equal(a["r"][:3], a["r"][3:6])  # chunks get different seeds


@pytest.mark.timeout(60)
def test_map_pool_options():
    td = _td(8)
    out = td.map(_jobs.thread_count, num_workers=2, worker_threads=1)
    assert bool((out["t"] == 1).all())
    out = td.map(_jobs.square, num_workers=2, chunksize=1, max_tasks_per_child=1)
    assert torch.equal(out["y"], td["x"] ** 2)
    out = td.map(_jobs.square, num_workers=2, index_with_generator=True)
    assert torch.equal(out["y"], td["x"] ** 2)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        out = td.map(_jobs.square, pool=pool, chunksize=2)
        assert torch.equal(out["y"], td["x"] ** 2)
        td.map(_jobs.add_one_inplace, pool=pool)  # the source travels with each task
    assert torch.equal(td["x"], _td(8)["x"] + 1)


@pytest.mark.timeout(90)
def test_map_with_spawn_and_progress_bar(capsys):
    td = _td(6)
    out = td.map(_jobs.square, num_workers=1, mp_start_method="spawn", pbar=True)
    assert torch.equal(out["y"], td["x"] ** 2)
    err = capsys.readouterr().err
    assert "map" in err and "100%" in err
    with pytest.raises(TypeError, match="top level"):
        td.map(lambda chunk: chunk, num_workers=1, mp_start_method="spawn")


@pytest.mark.timeout(90)
def test_map_after_the_parent_used_openmp():
    """Forked workers must not hang in OpenMP regions the parent already used (libgomp)."""
    big = torch.ones(4_000_000)
    (big * 2).sum()  # the parent runs a parallel region
    td = TensorDict(x=torch.randn(64, 100_000), batch_size=[64])
    out = td.map(_jobs.square, num_workers=2)  # fork, one intra-op thread per worker
    assert torch.allclose(out["y"], td["x"] ** 2)
    out = td.map(_jobs.thread_count, num_workers=2, worker_threads=2, num_chunks=2)  # forkserver
    assert bool((out["t"] == 2).all())


@pytest.mark.timeout(60)
def test_map_lambda_with_fork():
    td = _td(6)
    out = td.map(lambda chunk: chunk.apply(lambda t: t * 3), num_workers=2, mp_start_method="fork")
    assert torch.equal(out["x"], td["x"] * 3)


@pytest.mark.timeout(60)
def test_map_dead_worker_is_reported_not_waited_for():
    with pytest.raises(RuntimeError, match="died"):
        _td(4).map(_jobs.die, num_workers=2)


@pytest.mark.timeout(30)
def test_map_argument_errors():
    td = _td(4)
    with pytest.raises(ValueError, match="exclusive"):
        td.map(_jobs.square, chunksize=2, num_chunks=2)
    with pytest.raises(ValueError, match="out of range"):
        td.map(_jobs.square, dim=1)
    with pytest.raises(ValueError, match="no batch dimension"):
        TensorDict(x=torch.zeros(3)).map(_jobs.square)
    with pytest.raises(TypeError, match="callable"):
        td.map(3)
    with pytest.raises(ValueError, match="num_workers"):
        td.map(_jobs.square, num_workers=0)


@pytest.mark.timeout(60)
def test_map_rejects_mixed_none_and_values():
    def sometimes(chunk):
        return None if chunk["x"][0, 0] < 2 else chunk.clone()

    with pytest.raises(RuntimeError, match="None for some chunks"):
        _td(4).map(sometimes, num_workers=2, chunksize=2, mp_start_method="fork")
    with pytest.raises(TypeError, match="must return a TensorDict"):
        _td(4).map(lambda chunk: 3, num_workers=1, mp_start_method="fork")


@pytest.mark.skipif(not HAS_MEMMAP, reason="td-memmap is not installed")
@pytest.mark.timeout(60)
def test_map_over_memory_mapped_data(tmp_path):
    td = _td(8).memmap(str(tmp_path / "data"))
    info = td.map(_jobs.report_sharing, num_workers=2)["info"]
    assert bool((info[:, 1] == 1).all()), "the workers did not read the memory-mapped files"
    td.map(_jobs.add_one_inplace, num_workers=2)
    again = TensorDict.load_memmap(str(tmp_path / "data"))
    assert torch.equal(again["x"], _td(8)["x"] + 1)  # the workers wrote into the files
