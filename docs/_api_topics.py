"""Splits the ``TensorDictBase`` API reference into one page per topic.

``TensorDictBase`` carries about 400 public methods. Listing them on one page (what
``autoclass :members: :inherited-members:`` does) gives a page of a megabyte that opens
on ``abs``, ``abs_``, ``absolute``. Instead, each method goes to the topic of the td-core
module that defines it (the container is built from one mixin per concern, so the module
is the concern), with a few name rules for the modules that hold two concerns
(``_convert.py`` holds both constructors and conversions). A method of a module that no
topic names lands on the "Other methods" page, so nothing is left out when a module is
added. Sphinx calls :func:`write_pages` when the build starts; the pages are written to
``docs/api/core/`` (ignored by git) and listed by ``docs/api/core.rst``.
"""

from __future__ import annotations

import inspect
from pathlib import Path

#: (slug, title, intro, defining modules (basename without the leading underscore, prefix match))
TOPICS: list[tuple[str, str, str, tuple[str, ...]]] = [
    ("construction", "Construction and factories",
     "Building a TensorDict: from a dict, a module, a list, a schema, or shaped like an "
     "existing one (``new_zeros``, ``empty``, ``zero_``, ...).",
     ("factor", "convert_build")),
    ("keys", "The dict API: keys, values, copies and locks",
     "Reading and writing entries by (nested) key, listing keys, selecting, excluding, "
     "renaming and flattening them, locking the structure.",
     ("base", "select", "keys", "lock", "update")),
    ("shape", "Indexing and shape",
     "Indexing along the batch dims and every batch-dim shape operation: ``reshape``, "
     "``view``, ``permute``, ``unsqueeze``, ``split``, ``unbind``, named dims, ... Each "
     "acts on the first ``batch_dims`` dims of every leaf.",
     ("shape", "index", "names", "lazy_shape")),
    ("device", "Device, dtype and memory",
     "Moving to a device, casting, pinned and shared memory, gradients.",
     ("device", "grad")),
    ("math", "Leaf-wise math and comparisons",
     "Arithmetic, pointwise functions and comparisons applied to every leaf, through the "
     "``torch._foreach_*`` kernels where one exists; in-place variants end with ``_``.",
     ("ops", "compare", "math", "cum")),
    ("reductions", "Reductions",
     "``sum``, ``mean``, ``std``, ``max``, ... over batch dims, feature dims or every "
     "element, per leaf or reduced to one tensor.",
     ("reduc",)),
    ("apply", "Applying functions",
     "``apply``, ``named_apply`` and friends: one callable over every leaf (or several "
     "TensorDicts' matching leaves), with the output's batch size and device chosen for you.",
     ("apply",)),
    ("conversion", "Conversion",
     "To and from Python and PyTorch structures: dicts, namedtuples, numpy, pytrees, "
     "``nn.Module`` parameters and state dicts; tables (Arrow, pandas, Parquet, CSV, MDS).",
     ("convert", "state_dict", "module_params", "pytree", "tabular")),
    ("storage", "Storage and transfer",
     "Consolidation into one buffer, memory-mapped stores, HDF5 files and sending over "
     "``torch.distributed``. Methods of a sibling distribution say which one provides them.",
     ("consolidate", "seams", "ext")),
    ("lazy", "Lazy stacks",
     "Methods that build or unpack lazy stacks; ``LazyStackedTensorDict`` itself is on this "
     "page too.",
     ("lazy",)),
    ("nontensor", "Non-tensor data",
     "Storing Python objects (strings, configs, metadata) next to tensors: ``set_non_tensor``, "
     "``NonTensorData``, ``NonTensorStack``, ``MetaData``.",
     ("nontensor", "non_tensor")),
]

#: name rules that beat the defining module: (predicate, slug)
NAME_RULES = [
    (lambda n: n.startswith("from_") or n in ("fromkeys", "empty", "empty_like") or n.startswith("new_"),
     "construction"),
    (lambda n: "non_tensor" in n or n.startswith("filter_non"), "nontensor"),
]

OTHER = ("other", "Other methods", "Methods not listed on the topic pages.")


def _module_of(obj: object) -> str:
    for candidate in (obj, getattr(obj, "fget", None), getattr(obj, "__func__", None)):
        module = getattr(candidate, "__module__", None)
        if module:
            return module
    return ""


def _topic_of(name: str, module: str) -> str:
    for predicate, slug in NAME_RULES:
        if predicate(name):
            return slug
    base = module.rsplit(".", 1)[-1].lstrip("_")
    if not module.startswith("tensordict"):
        return OTHER[0]
    for slug, _title, _intro, prefixes in TOPICS:
        if any(base.startswith(p) for p in prefixes):
            return slug
    return OTHER[0]


def methods_by_topic() -> dict[str, list[tuple[str, str]]]:
    """``{slug: [(name, directive), ...]}`` for every public attribute of ``TensorDictBase``."""
    from tensordict import TensorDictBase

    out: dict[str, list[tuple[str, str]]] = {}
    for name, raw in sorted(inspect.getmembers_static(TensorDictBase)):
        if name.startswith("_"):
            continue
        if isinstance(raw, property):
            directive = "autoproperty"
        elif callable(raw) or isinstance(raw, (classmethod, staticmethod)):
            directive = "automethod"
        else:
            directive = "autoattribute"
        module = _module_of(getattr(TensorDictBase, name, raw))
        out.setdefault(_topic_of(name, module), []).append((name, directive))
    return out


def _page(title: str, intro: str, entries: list[tuple[str, str]], extra: str = "") -> str:
    lines = [title, "=" * len(title), "", intro, "", ".. currentmodule:: tensordict", ""]
    if extra:
        lines += [extra, ""]
    if entries:
        lines += [f"``TensorDictBase`` methods ({len(entries)})",
                  "-" * (len(f"``TensorDictBase`` methods ({len(entries)})")), ""]
        for name, directive in entries:
            lines.append(f".. {directive}:: TensorDictBase.{name}")
        lines.append("")
    return "\n".join(lines)


#: classes documented on a topic page, next to its methods
EXTRA = {
    "lazy": ".. autoclass:: LazyStackedTensorDict\n   :members:",
    "nontensor": ".. autoclass:: NonTensorData\n   :members:\n\n.. autoclass:: NonTensorStack\n   :members:",
}


def write_pages(app=None) -> list[str]:
    """Writes ``docs/api/core/<topic>.rst`` and the index they are listed by; returns the slugs."""
    folder = Path(__file__).parent / "api" / "core"
    folder.mkdir(exist_ok=True)
    grouped = methods_by_topic()
    slugs = []
    for slug, title, intro, _prefixes in [*TOPICS, (*OTHER, ())]:
        entries = grouped.get(slug, [])
        if not entries and slug not in EXTRA:
            continue
        text = _page(title, intro, entries, EXTRA.get(slug, ""))
        path = folder / f"{slug}.rst"
        if not path.is_file() or path.read_text() != text:  # keep mtimes: incremental builds
            path.write_text(text)
        slugs.append(slug)
    toc = ["   core/" + s for s in slugs]
    index = "\n".join([".. toctree::", "   :maxdepth: 1", "", *toc, ""])
    target = Path(__file__).parent / "api" / "core_topics.inc"
    if not target.is_file() or target.read_text() != index:
        target.write_text(index)
    return slugs
