"""Turns a pytest-benchmark JSON into TensorDict/dict ratios per case.

Each benchmark group holds a ``td`` case and a ``dict`` baseline (test names end in
``_td`` / ``_dict``, or carry ``param`` ids ``td``/``dict``). Prints a table and the
geometric mean per benchmark file; with ``--png PATH`` also draws a bar chart
(matplotlib, used by the docs).
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path


def ratios(path: str) -> dict[str, dict[str, float]]:
    data = json.loads(Path(path).read_text())
    groups: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for b in data["benchmarks"]:
        group = b.get("group") or b["name"]
        module = b["fullname"].split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
        name = b["name"].split("[")[0]
        kind = "td" if name.endswith("_td") else "dict" if name.endswith("_dict") else None
        if kind is None:
            continue
        groups[(module, group)][kind] = b["stats"]["median"]
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for (module, group), t in sorted(groups.items()):
        if "td" in t and "dict" in t and t["dict"] > 0:
            out[module][group] = t["td"] / t["dict"]
    return out


def area(module: str) -> str:
    """The benchmark area of a pytest module name: ``"test_bench_core"`` -> ``"core"``."""
    return module.removeprefix("test_bench_").replace("_", " ")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("json")
    parser.add_argument("--png", default=None)
    args = parser.parse_args()
    table = ratios(args.json)
    for module, cases in table.items():
        print(f"\n{area(module)} ({module}.py)")
        for group, r in cases.items():
            print(f"  {group:45s} {r:6.2f}x")
        gm = math.exp(sum(math.log(r) for r in cases.values()) / len(cases))
        print(f"  {'geometric mean':45s} {gm:6.2f}x")
    if args.png:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        # "test_bench_core" -> "core": the area, not the pytest file name
        labels = [f"{area(m)}: {g}" for m, c in table.items() for g in c]
        values = [r for c in table.values() for r in c.values()]
        fig, ax = plt.subplots(figsize=(9, max(3, 0.25 * len(values))))
        ax.barh(labels, values)
        ax.invert_yaxis()  # first case on top, in the order of the table
        ax.axvline(1.0, color="k", lw=0.8)
        ax.set_xlabel("TensorDict time / hand-written dict time (median; 1.0 = no overhead)")
        ax.set_title("TensorDict overhead per benchmark case")
        fig.tight_layout()
        fig.savefig(args.png, dpi=100)


if __name__ == "__main__":
    main()
