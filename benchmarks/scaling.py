"""The cost-growth table from ``test_bench_scaling.py`` results (pytest-benchmark JSON).

For each operation, the median time at each size and the time per key (or per nesting
level); linear growth keeps the per-key time flat. The last column is the growth factor of
the per-key time from the smallest to the largest size (1.0 = perfectly linear; below 1 the
fixed per-call cost is being amortised). ``--png PATH`` draws a log-log chart for the docs.

    python benchmarks/scaling.py .benchmarks/latest.json [--png docs/_static/scaling.png]
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path


def table(path: str) -> dict[str, dict[int, float]]:
    """``{operation: {size: median seconds}}`` for the ``scale: ...`` groups."""
    data = json.loads(Path(path).read_text())
    out: dict[str, dict[int, float]] = defaultdict(dict)
    for b in data["benchmarks"]:
        group = b.get("group") or ""
        if not group.startswith("scale: "):
            continue
        match = re.search(r"\[(\d+)\]$", b["name"])
        if match:
            out[group.removeprefix("scale: ")][int(match.group(1))] = b["stats"]["median"]
    return {op: dict(sorted(sizes.items())) for op, sizes in sorted(out.items())}


def _fmt(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def render(rows: dict[str, dict[int, float]]) -> str:
    lines = [f"{'operation':42s} {'size':>6s} {'median':>10s} {'per key/level':>14s}"]
    for op, sizes in rows.items():
        per = {n: t / n for n, t in sizes.items()}
        for n, t in sizes.items():
            lines.append(f"{op:42s} {n:>6d} {_fmt(t):>10s} {_fmt(per[n]):>14s}")
        first, last = min(per), max(per)
        lines.append(f"{'':42s} {'':>6s} {'growth of per-key time':>25s} {per[last] / per[first]:.2f}x")
    return "\n".join(lines)


def growth(sizes: dict[int, float], lo: int, hi: int) -> float | None:
    """Growth of the per-key time from ``lo`` to ``hi`` keys (``None`` if either is missing)."""
    if lo not in sizes or hi not in sizes:
        return None
    return (sizes[hi] / hi) / (sizes[lo] / lo)


def render_vs_dict(rows: dict[str, dict[int, float]]) -> str:
    """Per-key growth of each TensorDict case next to its hand-written ``dict:`` counterpart:
    growth that the dict code shows too comes from the interpreter and the memory system,
    not from the container."""
    lines = [f"{'operation':42s} {'TD 1k->10k':>11s} {'dict 1k->10k':>13s} {'TD/dict at 10k':>15s}"]
    for op, sizes in rows.items():
        base = rows.get(f"dict: {op}")
        if base is None:
            continue
        g_td, g_dict = growth(sizes, 1_000, 10_000), growth(base, 1_000, 10_000)
        if g_td is None or g_dict is None:
            continue
        top = max(set(sizes) & set(base))
        lines.append(f"{op:42s} {g_td:10.2f}x {g_dict:12.2f}x {sizes[top] / base[top]:14.2f}x")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json")
    parser.add_argument("--png", default=None)
    args = parser.parse_args()
    rows = table(args.json)
    print(render(rows))
    print()
    print(render_vs_dict(rows))
    if args.png:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (ax_keys, ax_depth) = plt.subplots(1, 2, figsize=(12, 5))
        # a case and its hand-written ``dict:`` counterpart share a colour; the baseline is dashed
        bases = sorted({op.removeprefix("dict: ") for op in rows})
        palette = plt.get_cmap("tab20").colors
        colour = {base: palette[i % len(palette)] for i, base in enumerate(bases)}
        for op, sizes in rows.items():
            ax = ax_depth if op.startswith("depth") else ax_keys
            style = "--" if op.startswith("dict: ") else "-"
            ax.plot(list(sizes), [t * 1e6 for t in sizes.values()], style, marker="o", label=op,
                    color=colour[op.removeprefix("dict: ")])
        for ax, xlabel in ((ax_keys, "number of keys"), (ax_depth, "nesting depth")):
            ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="median time (us)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle("How TensorDict costs grow (a slope of 1 on these log-log axes is linear growth)")
        fig.tight_layout()
        fig.savefig(args.png, dpi=90)


if __name__ == "__main__":
    main()
