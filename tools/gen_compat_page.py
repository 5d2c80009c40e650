"""Writes docs/compatibility.md: how much of upstream tensordict's test suite passes here.

Reads one or more result JSONs of the conformance harness (``shared/conformance/run
--out FILE``) and the tensordict 0.15.3 reference run. Several JSONs can be given, e.g. one
per file run separately; each test's outcome comes from the newest run that has it. The
per-file figures are kept in ``docs/_static/conformance-summary.json``, so the page can be
rewritten without running the suite again (``--summary``).

    python tools/gen_compat_page.py RESULTS.json [MORE.json ...]
    python tools/gen_compat_page.py --summary      # rewrite the page from the kept summary

The figure per file is the harness's "public-API conformance": of the tests that pass on
tensordict 0.15.3 and use only public names, how many pass here.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "compatibility.md"
SUMMARY = ROOT / "docs" / "_static" / "conformance-summary.json"
DESIGN = ROOT / "docs" / "design.md"

#: upstream test file -> (area, distribution)
AREAS = {
    "test/tensordict/test_methods.py": ("TensorDict methods, every container kind", "td-core"),
    "test/tensordict/test_generic.py": ("TensorDict basics", "td-core"),
    "test/tensordict/test_misc.py": ("Utilities and helpers", "td-core"),
    "test/tensordict/test_errors.py": ("Error messages", "td-core"),
    "test/tensordict/test_repr.py": ("repr", "td-core"),
    "test/tensordict/test_lazy.py": ("Lazy stacks", "td-core"),
    "test/tensordict/test_nontensor.py": ("Non-tensor data", "td-core"),
    "test/tensordict/test_nameddims.py": ("Named dims", "td-core"),
    "test/tensordict/test_mp.py": ("Multiprocessing", "td-core, td-distributed"),
    "test/tensordict/test_tabular.py": ("Tables: Arrow, pandas, Parquet, CSV, JSON", "td-core"),
    "test/nn/test_nn.py": ("Modules", "td-nn"),
    "test/nn/test_functorch.py": ("functorch / vmap", "td-core, td-nn"),
    "test/tensorclass/test_tensorclass.py": ("tensorclass", "td-tensorclass"),
    "test/memmap/test_memmap.py": ("Memory-mapped tensors and stores", "td-memmap"),
    "test/memmap/test_h5.py": ("HDF5", "td-h5"),
    "test/distributed/test_distributed.py": ("torch.distributed", "td-distributed"),
    "test/compile/test_compile.py": ("torch.compile, torch.export, CUDA graphs", "td-core, td-nn, td-tensorclass"),
    "test/nn/test_fx.py": ("torch.fx tracing of modules", "td-nn"),
    "test/tensorclass/test_compatibility.py": ("tensorclass compatibility", "td-tensorclass"),
    "test/tensorclass/test_typedtensordict.py": ("TypedTensorDict", "td-tensorclass"),
    "test/memmap/test_td_memmap_split.py": ("memmap of split TensorDicts", "td-memmap"),
    "test/memmap/test_zarr.py": ("Zarr", "td-h5"),
    "test/store/test_store.py": ("Redis-protocol stores", "td-store"),
    "test/store/test_store_utils_split.py": ("store utilities", "td-store"),
    "test/utils/test_utils.py": ("tensordict.utils", "td-core"),
    "test/utils/test_utils_key_json_split.py": ("tensordict.utils: keys and JSON", "td-core"),
    "test/utils/test_utils_options_split.py": ("tensordict.utils: option switches", "td-core"),
    "test/distributed/test_ucxx.py": ("UCX transport", "td-distributed"),
}

#: upstream test files the harness runs whose public-API tests cannot be measured here, and why
NOT_MEASURED = {
    "test/distributed/test_ucxx.py": (
        "no public-API test passes on 0.15.3 either: its 14 passing tests import the private "
        "module `tensordict._ucxx` (counted apart) and its other 6 skip on both sides for want "
        "of the `ucxx` package (one of them also needs CUDA)"
    ),
    "test/store/test_store_utils_split.py": (
        "its 3 passing tests on 0.15.3 use private helpers only (counted apart)"
    ),
    "test/utils/test_utils_options_split.py": (
        "its 3 passing tests on 0.15.3 use private helpers only (counted apart)"
    ),
}


def summarise(paths: list[Path], reference: Path) -> dict:
    """Per-file public-API conformance from harness result JSONs, test by test.

    A test's outcome is taken from the newest run that has it (runs restricted with
    ``-k`` count for the tests they ran); a reference-passing public test that no run
    has is counted as not passing.
    """
    ref = json.loads(reference.read_text())["tests"]
    wanted = {t for t, r in ref.items() if r["outcome"] == "passed" and not r.get("private")}
    latest: dict[str, tuple[str, str]] = {}  # test -> (created, outcome)
    runs: dict[str, set[str]] = {}  # file -> dates of the runs that measured it
    torch_version = None
    for path in paths:
        data = json.loads(path.read_text())
        created = data.get("created", "")
        torch_version = data.get("environment", {}).get("torch") or torch_version
        for test, result in data.get("tests", {}).items():
            if test in latest and latest[test][0] > created:
                continue
            latest[test] = (created, result["outcome"])
            runs.setdefault(test.split("::", 1)[0], set()).add(created[:10])
    files: dict[str, dict] = {}
    for test in wanted:
        name = test.split("::", 1)[0]
        if name not in runs:
            continue
        entry = files.setdefault(name, {"passed": 0, "of": 0})
        entry["of"] += 1
        entry["passed"] += latest.get(test, ("", ""))[1] == "passed"
    for name, entry in files.items():
        entry["measured"] = max(runs[name])
        entry["torch"] = torch_version
    return {"files": dict(sorted(files.items()))}


def _departures() -> str:
    """The departures table of docs/design.md, as it stands."""
    text = DESIGN.read_text() if DESIGN.is_file() else ""
    match = re.search(r"## Departures[^\n]*\n(.*?)(?=\n## |\Z)", text, re.S)
    return match.group(1).strip() if match else "(docs/design.md has no departures section)"


def render(summary: dict) -> str:
    files = summary["files"]
    passed = sum(f["passed"] for f in files.values())
    total = sum(f["of"] for f in files.values())
    overall = f"{passed:,} of {total:,} ({100 * passed / total:.1f}%)" if total else "not measured"
    lines = [
        "# Compatibility with tensordict 0.15",
        "",
        "Code written for the `tensordict` API is meant to run unchanged here. This page "
        "measures how far that holds: upstream tensordict's own test suite is run against this "
        "project, and each test that passes on tensordict 0.15.3 and uses only public names is "
        "counted (the harness and its reference run are described in the repository's "
        "`shared/conformance/README.md`). Generated by `tools/gen_compat_page.py` from the "
        "harness's JSON; do not edit by hand.",
        "",
        f"**Overall: {overall} of the public-API tests that pass on tensordict 0.15.3 pass here.**",
        "",
        "| area | upstream test file | distribution | passing here / on 0.15.3 | share |",
        "|---|---|---|---:|---:|",
    ]
    for name, (area, dist) in AREAS.items():
        f = files.get(name)
        if name in NOT_MEASURED and not (f and f["of"]):
            lines.append(f"| {area} | `{name}` | {dist} | no public-API test (see below) | - |")
            continue
        if f is None:
            lines.append(f"| {area} | `{name}` | {dist} | not measured | - |")
            continue
        share = f"{100 * f['passed'] / f['of']:.1f}%" if f["of"] else "-"
        lines.append(f"| {area} | `{name}` | {dist} | {f['passed']:,} / {f['of']:,} | {share} |")
    for name, f in files.items():
        if name not in AREAS:
            share = f"{100 * f['passed'] / f['of']:.1f}%" if f["of"] else "-"
            lines.append(f"| other | `{name}` | - | {f['passed']:,} / {f['of']:,} | {share} |")
    dates = sorted({f["measured"][:10] for f in files.values() if f.get("measured")})
    lines += [
        "",
        f"Measured on {', '.join(dates) or 'an unknown date'} with torch "
        f"{next(iter({f['torch'] for f in files.values()}), '?')} on 2 CPU cores; CUDA-only "
        "tests are not counted. Each test's outcome is the one of the newest harness run that "
        "ran it (files were run one at a time while the code changed, so a figure can lag the "
        "code by a few tests; rerun the harness and this script for exact figures). The "
        f"harness runs {len(AREAS)} upstream test files; CUDA-only tests skip on this machine "
        "on both sides and are not counted.",
        "",
        "Files with no public-API test to measure:",
        "",
        *(f"- `{name}`: {why}." for name, why in NOT_MEASURED.items()),
        "",
        "## Downstream frameworks",
        "",
        "TorchRL 0.14.1 runs on the full stack: `nox -s downstream` installs it next to the "
        "distributions and runs our tests of its components (`tests/downstream/`): replay buffers "
        "and storages (ragged lazy stacks included), probabilistic actors, gSDE and "
        "Ornstein-Uhlenbeck exploration, composite and non-tensor specs, environments with "
        "transforms, batched and heterogeneous envs, the MCTS tree, tensorclass actions, GAE, a "
        "data collector, and the PPO, SAC, DDPG, IQL, DQN and CQL losses with their value "
        "estimators (loss values checked against the ones TorchRL gives on tensordict 0.15.3).",
        "",
        "## Departures",
        "",
        "Every place where this project deliberately behaves differently from tensordict 0.15, "
        "with its reason (from [the design notes](design.md)):",
        "",
        _departures(),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="*", type=Path, help="harness result JSONs")
    parser.add_argument("--summary", action="store_true", help="rewrite the page from the kept summary")
    parser.add_argument("--reference", type=Path, default=ROOT.parent / "shared" / "conformance"
                        / "reference-tensordict-0.15.3.json", help="the reference run's JSON")
    args = parser.parse_args()
    if args.summary or not args.results:
        summary = json.loads(SUMMARY.read_text())
    else:
        summary = summarise(args.results, args.reference)
        SUMMARY.write_text(json.dumps(summary, indent=1) + "\n")
    PAGE.write_text(render(summary))
    print(f"wrote {PAGE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
