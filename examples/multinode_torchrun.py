"""TensorDicts across machines with torchrun: a memory-mapped dataset on a shared file system.

One machine, two processes::

    torchrun --nproc_per_node=2 examples/multinode_torchrun.py

Two machines (run on each, ``--node_rank=0`` on the first, ``1`` on the second;
``HOST`` is the first machine's address, reachable from the second, ``PORT`` a
free TCP port there, and ``--data`` a folder both machines mount)::

    torchrun --nnodes=2 --nproc_per_node=2 --node_rank=0 \\
        --master_addr HOST --master_port PORT \\
        examples/multinode_torchrun.py --data /shared/td-dataset

What it does, on every rank:

1. global rank 0 writes a dataset once, as a memory-mapped TensorDict
   (``td.memmap(folder)``, td-memmap); the others wait at a barrier, then every
   rank maps the same folder with ``TensorDict.load_memmap`` (no copy, nothing read
   until used). On several machines the folder must be on a shared file system
   (NFS, Lustre, ...): the data is shared through it, never sent over the network;
2. each rank takes its shard of rows and preprocesses it with ``shard.map(...)``
   in a pool of worker processes reading the memory map;
3. the ranks combine per-shard statistics with ``all_reduce``, share a config with
   ``broadcast``, pass a TensorDict around the ring with ``send``/``recv``, and
   gather one summary per rank with ``gather_and_stack``;
4. rank 0 sends a freshly built TensorDict to every other rank with
   ``init_remote``, which they receive without a template (``from_remote_init``).

Needs ``td-core``, ``td-distributed`` and ``td-memmap`` (``pip install "td-distributed[memmap]"``).
"""

from __future__ import annotations

import argparse
import datetime
import os
import tempfile

import torch
import torch.distributed as dist

from tensordict import TensorDict

ROWS = 20_000
FEATURES = 8


def normalize(chunk: TensorDict) -> TensorDict:
    """Worker-side preprocessing of one chunk of rows (runs in a map worker process)."""
    obs = chunk["obs"]
    return TensorDict(
        obs=(obs - obs.mean(-1, keepdim=True)) / (obs.std(-1, keepdim=True) + 1e-6),
        reward=chunk["reward"].clamp(-1, 1),
        batch_size=chunk.batch_size,
    )


def make_dataset(folder: str) -> None:
    gen = torch.Generator().manual_seed(0)
    data = TensorDict(
        obs=torch.randn(ROWS, FEATURES, generator=gen),
        reward=torch.randn(ROWS, generator=gen) * 2,
        episode={"id": torch.arange(ROWS) // 100},
        batch_size=[ROWS],
    )
    data.memmap(folder)  # crash-safe: readers see a complete store or none


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "td-torchrun-example"),
                        help="dataset folder, on a file system every node mounts")
    parser.add_argument("--workers", type=int, default=2, help="map worker processes per rank")
    parser.add_argument("--timeout", type=float, default=120.0, help="process-group timeout, seconds")
    args = parser.parse_args()

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    # torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)

    # 1. one writer, every rank maps the shared folder
    if rank == 0 and not os.path.exists(os.path.join(args.data, "meta.json")):
        make_dataset(args.data)
    dist.barrier()
    data = TensorDict.load_memmap(args.data)
    shard = data[rank::world]  # a view of this rank's rows; still nothing read

    # 2. preprocess the shard in worker processes that read the memory map directly
    clean = shard.map(normalize, num_workers=args.workers, chunksize=2_000)

    # 3a. all_reduce: global statistics from per-rank partial sums (one flat buffer per dtype)
    stats = TensorDict(
        count=torch.tensor(float(clean.batch_size[0])),
        reward_sum=clean["reward"].sum(),
        obs_sq=(clean["obs"] ** 2).sum(0),
        batch_size=[],
    ).to(device)
    stats.all_reduce()
    # 3b. broadcast: rank 0's config reaches everyone (an empty TensorDict receives it)
    config = TensorDict(lr=torch.tensor(3e-4), tag="run-42", batch_size=[]) if rank == 0 else TensorDict()
    config = config.to(device).broadcast(0)
    # 3c. send/recv around the ring: each rank receives its left neighbour's first rows
    ring = clean[:4].to_tensordict().to(device)
    incoming = ring.clone()
    if world > 1:
        right, left = (rank + 1) % world, (rank - 1) % world
        works = ring.isend(right, return_early=True)  # post the send, then receive: no deadlock
        incoming.recv(left)
        for w in works:
            w.wait()
    # 3d. gather_and_stack: one summary row per rank on rank 0
    summary = TensorDict(rank=torch.tensor(rank), rows=torch.tensor(clean.batch_size[0]), batch_size=[]).to(device)
    gathered = summary.gather_and_stack(0)

    # 4. init_remote / from_remote_init: the receivers need no template
    if rank == 0:
        weights = TensorDict(layer={"w": torch.randn(FEATURES, 4), "b": torch.zeros(4)}, step=7, batch_size=[])
        for r in range(1, world):
            weights.init_remote(r)
    else:
        weights = TensorDict.from_remote_init(0)

    mean_reward = (stats["reward_sum"] / stats["count"]).item()
    print(
        f"[rank {rank}/{world}] shard {tuple(shard.batch_size)} -> clean {tuple(clean.batch_size)}; "
        f"global rows {int(stats['count'].item())}, mean clipped reward {mean_reward:+.4f}; "
        f"config tag {config['tag']!r}; from the left: obs[0,0]={incoming['obs'][0, 0].item():+.3f}; "
        f"weights step {weights['step']}",
        flush=True,
    )
    if rank == 0:
        assert int(stats["count"].item()) == ROWS
        print(f"[rank 0] summaries: ranks {gathered['rank'].tolist()}, rows {gathered['rows'].tolist()}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
