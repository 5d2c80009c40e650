"""Step 8 of the demo: the printed report and the PNG (matplotlib, Agg backend)."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import torch

__all__ = ["du", "print_report", "save_figure"]


def du(path: Path) -> int:
    """Bytes of the regular files under ``path`` (or of the file itself); 0 if absent."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            total += os.lstat(os.path.join(folder, name)).st_size
    return total


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)  # pragma: no cover


def print_report(summary: dict, out: Path) -> None:
    """Prints accuracies, sizes on disk, time per stage and the checks."""
    line = "-" * 64
    print(f"\n{line}\nTensorDict demo report: {summary['source']}, {summary['samples']} samples "
          f"({summary['train']} train / {summary['test']} test), {summary['epochs']} epochs\n{line}")
    print(f"{'single model (TensorDictSequential)':44s} {summary['accuracy']:.4f}")
    for i, acc in enumerate(summary["member_accuracy"]):
        print(f"{f'  ensemble member {i}':44s} {acc:.4f}")
    print(f"{'ensemble (mean of softmax, vmap)':44s} {summary['ensemble_accuracy']:.4f}")
    reload = summary["reload"]
    print(f"{'fresh model -> after load_memmap + to_module':44s} {reload['fresh']:.4f} -> {reload['reloaded']:.4f}")
    print(line)
    for name, size in summary["sizes"].items():
        print(f"{'on disk: ' + name:44s} {_size(size):>10s}")
    print(line)
    for name, seconds in summary["seconds"].items():
        print(f"{name:54s} {seconds:7.2f} s")
    print(f"{'total':54s} {summary['total_seconds']:7.2f} s")
    print(line)
    for check in summary["checks"]:
        print(f"[{'PASS' if check['ok'] else 'FAIL'}] {check['name']}" + ("" if check["ok"] else f": {check['failure']}"))
    print(line)
    print(f"figure: {summary['figure']}\nreport: {out / 'report.json'}")
    # the interpreter that ran the demo has tensordict installed, wherever the user is now
    command = f"{shlex.quote(sys.executable)} -m tensordict inspect {shlex.quote(str(out / 'checkpoint'))}"
    print(f"inspect a store without loading it:  {command}")
    print("ALL CHECKS PASSED" if summary["ok"] else "SOME CHECKS FAILED")


def save_figure(path: Path, curves: dict, ens_curves: dict, wrong_images: torch.Tensor,
                wrong_labels: torch.Tensor, wrong_preds: torch.Tensor, max_digits: int = 24,
                title: str = "TensorDict demo") -> None:
    """Training curves (loss, test accuracy) and a grid of misclassified test digits, under ``title``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = min(len(wrong_labels), max_digits)
    rows = max(1, -(-shown // 8))
    fig = plt.figure(figsize=(12, 4.2 + 1.5 * rows), layout="constrained")
    fig.suptitle(title, fontsize=13, fontweight="bold")
    top, bottom = fig.subfigures(2, 1, height_ratios=[4.2, 1.5 * rows])
    epochs = range(1, len(curves["loss"]) + 1)

    ax_loss, ax_acc = top.subplots(1, 2)
    ax_loss.plot(epochs, curves["loss"], marker="o", label="single model")
    ax_loss.plot(epochs, ens_curves["loss"], marker="s", label="ensemble (mean over members)")
    ax_loss.set(title="training loss", xlabel="epoch", ylabel="cross-entropy", yscale="log")
    ax_loss.legend()

    ax_acc.plot(epochs, curves["test_acc"], marker="o", label="single model")
    member = torch.tensor(ens_curves["member_acc"])  # [epochs, members]
    for i in range(member.shape[1]):
        ax_acc.plot(epochs, member[:, i], color="gray", alpha=0.4, lw=1, label="ensemble members" if i == 0 else None)
    ax_acc.plot(epochs, ens_curves["test_acc"], marker="s", label="ensemble")
    ax_acc.set(title="test accuracy", xlabel="epoch", ylabel="accuracy")
    ax_acc.legend()

    count = len(wrong_labels)
    bottom.suptitle(f"{count} misclassified test {'digit' if count == 1 else 'digits'} (true label -> predicted)"
                    + (f", first {shown} shown" if shown < len(wrong_labels) else ""))
    axes = bottom.subplots(rows, 8, squeeze=False)
    for i, ax in enumerate(axes.flat):
        ax.set_axis_off()
        if i < shown:
            ax.imshow(wrong_images[i].numpy(), cmap="gray_r")
            ax.set_title(f"{int(wrong_labels[i])} -> {int(wrong_preds[i])}", fontsize=9, color="crimson")
    fig.savefig(path, dpi=90)
    plt.close(fig)
