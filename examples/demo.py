"""End-to-end demo: every td-* distribution at work on real data (handwritten digits).

Runs eight steps on scikit-learn's digits (1,797 real 8x8 images, shipped inside the
package: nothing is downloaded), or on your own HDF5 file with datasets ``images``
(``[N, H, W]`` or ``[N, D]``) and ``labels`` (``[N]`` integers):

1. build one sample as a ``@tensorclass`` and write the dataset to a memory-mapped
   store (``memmap_like``, then filling by index) -- td-tensorclass, td-memmap;
2. preprocess it in place with ``map`` over 2 worker processes -- td-distributed;
3. train a ``TensorDictSequential`` of ``TensorDictModule``s on shuffled mini-batches
   read straight from the memory-mapped store -- td-nn;
4. train an ensemble of 5 models at once with ``TensorDict.from_modules`` + ``torch.vmap``
   -- td-core;
5. checkpoint the parameters with ``memmap``, reload them into a fresh model with
   ``load_memmap`` + ``to_module`` and check the accuracy is unchanged -- td-memmap;
6. export inputs and predictions with ``to_h5``, reopen with plain h5py and with
   ``PersistentTensorDict`` and check they agree -- td-h5;
7. send a batch from one process to another (2 ranks, gloo on 127.0.0.1) and check it
   arrives intact -- td-distributed;
8. print a report (accuracies, sizes on disk, time per stage) and save a PNG with the
   training curves and a grid of misclassified digits.

Exits with status 1 if any check fails (2 for bad arguments or data).

    python examples/demo.py                      # the full run (about 15 s on 2 cores)
    python examples/demo.py --subset 400 --epochs 2 --out /tmp/demo
    python examples/demo.py --data my_digits.h5
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import torch
import torch.multiprocessing as mp
from torch import nn
from tqdm import tqdm

from tensordict import PersistentTensorDict, TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential
from tensordict.testing import free_port

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _demo_data import Digit, load_data  # noqa: E402
from _demo_report import du, print_report, save_figure  # noqa: E402
from _demo_workers import normalise_chunk, send_recv_rank  # noqa: E402


class Checks:
    """Named pass/fail checks; the demo's exit status is 1 if any failed."""

    def __init__(self) -> None:
        self.results: list[tuple[str, bool, str]] = []

    def __call__(self, name: str, ok: bool, detail: str = "") -> bool:
        self.results.append((name, bool(ok), detail))
        if not ok:
            tqdm.write(f"CHECK FAILED: {name}: {detail}")
        return bool(ok)

    @property
    def ok(self) -> bool:
        return all(ok for _, ok, _ in self.results)


TIMES: dict[str, float] = {}
#: progress bars redraw at most every 0.2 s on a terminal, every 10 s in a log file
BAR = {"mininterval": 0.2 if sys.stderr.isatty() else 10.0, "dynamic_ncols": True}


@contextmanager
def stage(name: str):
    tqdm.write(f"\n== {name}")
    start = time.perf_counter()
    try:
        yield
    finally:
        TIMES[name] = time.perf_counter() - start


# ----------------------------------------------------------------------------- model
def make_model(in_features: int, num_classes: int, hidden: int, seed: int) -> TensorDictSequential:
    """An MLP as two TensorDictModules: ``pixels -> hidden -> logits``."""
    torch.manual_seed(seed)
    return TensorDictSequential(
        TensorDictModule(
            nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU()),
            in_keys=["pixels"], out_keys=["hidden"],
        ),
        TensorDictModule(nn.Linear(hidden, num_classes), in_keys=["hidden"], out_keys=["logits"]),
    )


def as_input(batch: Digit) -> TensorDict:
    """The model's input TensorDict (the keys it reads plus the target)."""
    return TensorDict(pixels=batch.pixels, label=batch.label, batch_size=batch.batch_size)


@torch.no_grad()
def accuracy(model: nn.Module, data: TensorDict) -> tuple[float, torch.Tensor]:
    logits = model(data.select("pixels"))["logits"]
    pred = logits.argmax(-1)
    return (pred == data["label"]).float().mean().item(), pred


# ----------------------------------------------------------------------------- steps
def step_store(images: torch.Tensor, labels: torch.Tensor, out: Path) -> Digit:
    n = len(labels)
    one = Digit(image=images[0], label=labels[0], pixels=images[0].flatten(), batch_size=[])
    store = one.expand(n).memmap_like(out / "dataset", existsok=True)  # allocates the files, writes nothing
    chunk = 256
    with tqdm(total=n, desc="1/8 fill memmap store", unit="img", **BAR) as bar:
        for i in range(0, n, chunk):
            j = min(i + chunk, n)
            store[i:j] = Digit(image=images[i:j], label=labels[i:j], pixels=images[i:j].flatten(1), batch_size=[j - i])
            bar.update(j - i)
    return store


def step_preprocess(store: Digit, train_idx: torch.Tensor, out: Path, checks: Checks) -> None:
    raw = store.pixels[train_idx]
    mean, std = raw.mean().item(), raw.std().item()
    expected = (store.pixels[:16].clone() - mean) / std
    # fn returns None: it standardises each chunk in place, in the memory-mapped files
    store.map(partial(normalise_chunk, mean=mean, std=std), dim=0, num_workers=2, chunksize=128, pbar=True)
    reread = TensorDict.load_memmap(out / "dataset")  # a fresh map of the files: a Digit again
    checks("preprocessed in place on disk", type(reread) is Digit and torch.allclose(reread.pixels[:16], expected, atol=1e-5),
           "the standardised pixels read back from the files differ from the expected values")


def train_single(model: nn.Module, store: Digit, train_idx, test: TensorDict, args) -> dict:
    loss_module = TensorDictModule(nn.CrossEntropyLoss(reduction="none"), in_keys=["logits", "label"], out_keys=["loss"])
    optim = torch.optim.Adam(model.parameters(), lr=args.lr)
    steps_total = args.epochs * -(-len(train_idx) // args.batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optim, steps_total, eta_min=args.lr / 20)
    generator = torch.Generator().manual_seed(args.seed)
    curves: dict = {"loss": [], "test_acc": []}
    for epoch in range(args.epochs):
        order = train_idx[torch.randperm(len(train_idx), generator=generator)]
        total, steps = 0.0, 0
        batches = order.split(args.batch_size)
        for idx in tqdm(batches, desc=f"3/8 train epoch {epoch + 1}/{args.epochs}", unit="batch", leave=False, **BAR):
            data = as_input(store[idx])          # reads only these rows from the memory-mapped files
            data = model(data)                   # the generic loop: modules read and write keys
            loss = loss_module(data)["loss"].mean()
            optim.zero_grad()
            loss.backward()
            optim.step()
            schedule.step()
            total, steps = total + loss.item(), steps + 1
        acc, _ = accuracy(model, test)
        curves["loss"].append(total / steps)
        curves["test_acc"].append(acc)
        tqdm.write(f"  epoch {epoch + 1}: loss {total / steps:.4f}, test accuracy {acc:.4f}")
    return curves


def train_ensemble(members: list, store: Digit, train_idx, test: TensorDict, args) -> tuple[dict, TensorDict, object]:
    params = TensorDict.from_modules(*members)              # batch_size [5]: stacked leaf parameters
    skeleton = make_model(test["pixels"].shape[-1], args.num_classes, args.hidden, 0).to("meta")

    def logits_of(p: TensorDict, data: TensorDict) -> torch.Tensor:
        with p.to_module(skeleton):                        # one member's parameters, under vmap
            return skeleton(data.select("pixels"))["logits"]

    ensemble = torch.vmap(logits_of, (0, None))
    leaves = list(params.values(include_nested=True, leaves_only=True))
    optim = torch.optim.Adam(leaves, lr=args.lr)
    steps_total = args.epochs * -(-len(train_idx) // args.batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optim, steps_total, eta_min=args.lr / 20)
    generator = torch.Generator().manual_seed(args.seed + 1)
    curves: dict = {"loss": [], "test_acc": [], "member_acc": []}
    for epoch in range(args.epochs):
        order = train_idx[torch.randperm(len(train_idx), generator=generator)]
        total, steps = 0.0, 0
        for idx in tqdm(order.split(args.batch_size), desc=f"4/8 ensemble epoch {epoch + 1}/{args.epochs}",
                        unit="batch", leave=False, **BAR):
            data = as_input(store[idx])
            logits = ensemble(params, data)                  # [members, batch, classes]
            target = data["label"].expand(logits.shape[0], -1)
            loss = nn.functional.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="none")
            loss = loss.view(logits.shape[:2]).mean(1).sum()  # each member minimises its own loss
            optim.zero_grad()
            loss.backward()
            optim.step()
            schedule.step()
            total, steps = total + loss.item() / logits.shape[0], steps + 1
        member_acc, ens_acc, _ = evaluate_ensemble(ensemble, params, test)
        curves["loss"].append(total / steps)
        curves["test_acc"].append(ens_acc)
        curves["member_acc"].append(member_acc)
        tqdm.write(f"  epoch {epoch + 1}: mean loss {total / steps:.4f}, members "
                   f"{' '.join(f'{a:.3f}' for a in member_acc)}, ensemble {ens_acc:.4f}")
    return curves, params, ensemble


@torch.no_grad()
def evaluate_ensemble(ensemble, params: TensorDict, test: TensorDict) -> tuple[list, float, torch.Tensor]:
    logits = ensemble(params, test)
    member_acc = (logits.argmax(-1) == test["label"]).float().mean(-1).tolist()
    pred = logits.softmax(-1).mean(0).argmax(-1)
    return member_acc, (pred == test["label"]).float().mean().item(), pred


def step_checkpoint(model: nn.Module, test: TensorDict, acc: float, pred: torch.Tensor, args, out: Path,
                    checks: Checks) -> dict:
    params = TensorDict.from_module(model)
    params.memmap(out / "checkpoint", num_threads=2)
    fresh = make_model(test["pixels"].shape[-1], args.num_classes, args.hidden, seed=args.seed + 100)
    before, _ = accuracy(fresh, test)
    loaded = TensorDict.load_memmap(out / "checkpoint")
    loaded.to_module(fresh)
    after, fresh_pred = accuracy(fresh, test)
    checks("checkpoint reload: same accuracy", after == acc, f"{after:.4f} after reload vs {acc:.4f}")
    checks("checkpoint reload: same predictions", torch.equal(fresh_pred, pred), "predictions differ")
    tqdm.write(f"  fresh model {before:.4f} -> after load_memmap + to_module {after:.4f} (trained: {acc:.4f})")
    return {"fresh": before, "reloaded": after}


def step_h5(test: TensorDict, images: torch.Tensor, pred: torch.Tensor, ens_pred: torch.Tensor, out: Path,
            checks: Checks) -> None:
    import h5py

    export = TensorDict(
        inputs={"image": images, "pixels": test["pixels"]},
        label=test["label"], prediction=pred, ensemble_prediction=ens_pred,
        batch_size=test.batch_size,
    )
    path = out / "predictions.h5"
    export.to_h5(str(path), compression="gzip").close()
    with h5py.File(path, "r") as f:
        plain = {name: torch.from_numpy(f[name][()]) for name in ("inputs/image", "inputs/pixels", "label",
                                                                   "prediction", "ensemble_prediction")}
    same_plain = all(torch.equal(plain[k], export.get(tuple(k.split("/")))) for k in plain)
    checks("HDF5 read back with plain h5py", same_plain, "h5py reads different values")
    with PersistentTensorDict.from_h5(str(path), mode="r") as h5:
        same_ptd = (h5.batch_size == export.batch_size) and (h5.to_tensordict() == export).all()
        rows = torch.tensor([0, 5, 3])
        same_rows = torch.equal(h5[rows]["prediction"], export["prediction"][rows])
    checks("HDF5 read back with PersistentTensorDict", bool(same_ptd), "PersistentTensorDict reads different values")
    checks("HDF5 lazy row selection", same_rows, "indexed rows differ")


def step_send(batch: TensorDict, out: Path, checks: Checks) -> dict:
    result_path = out / "send_recv.json"
    result_path.unlink(missing_ok=True)
    port = free_port()
    ctx = mp.start_processes(send_recv_rank, args=(port, batch, str(result_path)), nprocs=2, join=False,
                             start_method="spawn")
    deadline = time.monotonic() + 120
    try:
        while not ctx.join(timeout=0.5):
            if time.monotonic() > deadline:
                raise TimeoutError("the 2-rank send/recv did not finish within 120 s")
    except Exception as err:  # a rank raised, or the deadline passed
        checks("send/recv between 2 ranks", False, f"{type(err).__name__}: {err}")
        return {}
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
                p.join(5)
    result = json.loads(result_path.read_text())
    checks("send/recv between 2 ranks: arrived intact", result["intact"], f"differing keys {result['bad_keys']}")
    nbytes = sum(t.numel() * t.element_size() for t in batch.values(include_nested=True, leaves_only=True))
    tqdm.write(f"  rank 0 -> rank 1: {len(list(batch.keys(True, True)))} leaves, {nbytes} bytes in "
               f"{result['seconds'] * 1e3:.1f} ms, intact={result['intact']}")
    tqdm.write("  (most of this stage is starting two fresh Python processes that import torch and join a "
               "gloo group, as `torchrun` would; the transfer itself is the time above)")
    return {**result, "nbytes": nbytes}


# ----------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=None, help="HDF5 file with datasets 'images' and 'labels' "
                                                     "(default: scikit-learn's digits)")
    parser.add_argument("--epochs", type=int, default=10, help="training epochs (default: 10)")
    parser.add_argument("--subset", type=int, default=None, help="use only N samples (default: all)")
    parser.add_argument("--out", default="demo_out",
                        help="output folder (default: ./demo_out; git ignores it in the repository)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--members", type=int, default=5, help="ensemble size (default: 5)")
    parser.add_argument("--min-accuracy", type=float, default=0.95,
                        help="test accuracy the single model must reach (default: 0.95)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads for training (default: 1, fastest for this small model)")
    args = parser.parse_args(argv)
    if args.epochs < 1 or (args.subset is not None and args.subset < 20) or args.members < 2:
        parser.error("--epochs must be >= 1, --subset >= 20 and --members >= 2")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    checks = Checks()
    t_start = time.perf_counter()

    with stage("1. dataset -> memory-mapped store"):
        try:
            images, labels, source = load_data(args)
        except (ValueError, OSError) as err:  # FileNotFoundError included
            print(f"demo: error: {err}", file=sys.stderr)
            return 2
        args.num_classes = int(labels.max()) + 1
        n = len(labels)
        n_test = max(n // 5, 1)
        test_idx, train_idx = torch.arange(n_test), torch.arange(n_test, n)
        store = step_store(images, labels, out)
        checks("store filled", torch.equal(store.label[:], labels) and torch.equal(store.image[:], images),
               "the memory-mapped store does not hold the dataset")
        tqdm.write(f"  {n} images {list(images.shape[1:])} from {source}: {len(train_idx)} train, {n_test} test; "
                   f"store {du(out / 'dataset')} bytes at {out / 'dataset'}")

    with stage("2. preprocess in place (map, 2 workers)"):
        step_preprocess(store, train_idx, out, checks)

    test = as_input(store[test_idx])
    with stage("3. train TensorDictSequential"):
        model = make_model(test["pixels"].shape[-1], args.num_classes, args.hidden, seed=args.seed)
        curves = train_single(model, store, train_idx, test, args)
        acc, pred = accuracy(model, test)
        checks(f"test accuracy >= {args.min_accuracy:.2f}", acc >= args.min_accuracy, f"got {acc:.4f}")

    with stage(f"4. ensemble of {args.members} (from_modules + vmap)"):
        members = [make_model(test["pixels"].shape[-1], args.num_classes, args.hidden, seed=args.seed + 1 + i)
                   for i in range(args.members)]
        ens_curves, ens_params, ensemble = train_ensemble(members, store, train_idx, test, args)
        member_acc, ens_acc, ens_pred = evaluate_ensemble(ensemble, ens_params, test)
        checks("ensemble members trained", min(member_acc) > 1.5 / args.num_classes,
               f"member accuracies {member_acc}")

    with stage("5. checkpoint with memmap, reload with load_memmap + to_module"):
        reload = step_checkpoint(model, test, acc, pred, args, out, checks)

    with stage("6. export to HDF5 and read back"):
        step_h5(test, store.image[test_idx], pred, ens_pred, out, checks)

    with stage("7. send a batch between 2 ranks (gloo)"):
        rows = slice(0, 64)
        batch = TensorDict(pixels=test["pixels"][rows], label=test["label"][rows], prediction=pred[rows],
                           meta={"row": test_idx[rows], "ensemble_prediction": ens_pred[rows]},
                           batch_size=[len(test_idx[rows])])
        sent = step_send(batch, out, checks)

    with stage("8. report and figure"):
        wrong = (pred != test["label"]).nonzero().flatten()
        png = out / "demo.png"
        title = f"TensorDict demo: {source}, {n} images ({len(train_idx)} train / {n_test} test), {args.epochs} epochs"
        save_figure(png, curves, ens_curves, store.image[test_idx][wrong], test["label"][wrong], pred[wrong],
                    title=title)
        checks("figure written", png.is_file() and png.stat().st_size > 0, str(png))

    summary = {
        "source": source, "samples": n, "train": len(train_idx), "test": n_test, "epochs": args.epochs,
        "accuracy": acc, "member_accuracy": member_acc, "ensemble_accuracy": ens_acc,
        "reload": reload, "send_recv": sent,
        "sizes": {name: du(out / name) for name in ("dataset", "checkpoint", "predictions.h5")},
        "seconds": dict(TIMES), "total_seconds": time.perf_counter() - t_start,
        # a check's detail says what went wrong, so it is kept only for a failed check
        "checks": [{"name": n_, "ok": ok, **({} if ok else {"failure": d})} for n_, ok, d in checks.results],
        "ok": checks.ok, "figure": str(png),
    }
    (out / "report.json").write_text(json.dumps(summary, indent=2))
    print_report(summary, out)
    return 0 if checks.ok else 1


if __name__ == "__main__":
    sys.exit(main())
