"""td-core's module graph: a DAG of top-level imports, one binding point for the classes.

Every td-core module imports what it needs at the top of its file. The container
classes that the mixins need (``TensorDictBase``, ``TensorDict``,
``LazyStackedTensorDict``) are read from ``tensordict._classes``, which the defining
modules fill in at import; a mixin never imports them inside a function. A
function-level import of a td-core module is allowed only when it is listed in
``ALLOWED`` below with its reason.

The check is static (``ast``) over td-core's source tree, so it sees modules that no
test imports.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "tensordict"

# (importing module, imported module) -> why it cannot be a top-level import.
ALLOWED: dict[tuple[str, str], str] = {
    ("tensordict._convert", "tensordict._convert_numpy"): (
        "NumPy conversions load on first use, so `import tensordict` stays light "
        "(test_convert.py::test_numpy_imported_lazily)"
    ),
    ("tensordict._convert_build", "tensordict._convert_numpy"): (
        "same, and _convert_numpy builds on _convert_build's helpers (numpy arrays "
        "nested in a dict recurse through both)"
    ),
}
MAX_FUNCTION_LEVEL = 15


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_pkg: bool) -> set[str]:
    """The td-core modules an import statement loads (the package itself included)."""
    out: set[str] = set()
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = module.split(".") if is_pkg else module.split(".")[:-1]
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join([*parts, base] if base else parts)
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    for name in names:
        parts = name.split(".")
        if parts[0] != "tensordict":
            continue
        if len(parts) > 1 and ".".join(parts[:2]) not in MODULES:
            continue  # a sibling distribution's subpackage (tensordict.memmap, ...)
        # ``import tensordict._x.y`` loads every parent package too
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name:
            out.add(name)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return "TYPE_CHECKING" in ast.unparse(test)


def _imports(module: str) -> tuple[set[str], list[tuple[int, str]]]:
    """(td-core modules imported at module level, [(line, module)] imported in functions)."""
    path = MODULES[module]
    is_pkg = path.name == "__init__.py"
    top: set[str] = set()
    nested: list[tuple[int, str]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for sub in child.orelse:  # the ``else:`` branch runs
                    visit(ast.Module(body=[sub], type_ignores=[]), in_function)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                targets = _targets(child, module, is_pkg) - {module}
                if in_function:
                    nested.extend((child.lineno, t) for t in sorted(targets))
                else:
                    top.update(targets)
                continue
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return top, nested


GRAPH = {m: _imports(m) for m in MODULES}


def _find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = dfs(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            found = dfs(node)
            if found:
                return found
    return None


def test_source_tree_found():
    assert "tensordict._base" in MODULES and "tensordict._classes" in MODULES


def test_top_level_imports_form_a_dag():
    # the package ``tensordict`` itself is excluded: every ``from tensordict import _x``
    # runs ``tensordict/__init__.py`` first, which is the graph's root, not an edge back
    edges = {m: {t for t in top if t != "tensordict"} for m, (top, _) in GRAPH.items()}
    cycle = _find_cycle(edges)
    assert cycle is None, "td-core import cycle: " + " -> ".join(cycle or [])


def test_function_level_imports_are_listed():
    unlisted = [
        f"{MODULES[m].name}:{line} imports {target}"
        for m, (_, nested) in GRAPH.items()
        for line, target in nested
        if (m, target) not in ALLOWED
    ]
    assert not unlisted, (
        "function-level imports of td-core modules (read classes from tensordict._classes, "
        "import other modules at the top, or add the pair to ALLOWED with its reason):\n  "
        + "\n  ".join(unlisted)
    )


def test_function_level_imports_stay_few():
    statements = {(m, line) for m, (_, nested) in GRAPH.items() for line, _ in nested}
    assert len(statements) <= MAX_FUNCTION_LEVEL, sorted(statements)
    assert len(ALLOWED) <= MAX_FUNCTION_LEVEL


def test_allow_list_is_not_stale():
    used = {(m, t) for m, (_, nested) in GRAPH.items() for _, t in nested}
    assert set(ALLOWED) <= used, f"entries no longer needed: {sorted(set(ALLOWED) - used)}"


def test_classes_module_is_the_ground_floor():
    top, nested = GRAPH["tensordict._classes"]
    assert top <= {"tensordict"} and not nested


@pytest.mark.parametrize("name", ["TensorDictBase", "TensorDict", "LazyStackedTensorDict"])
def test_classes_are_bound_once_at_import(name):
    import tensordict
    from tensordict import _classes

    public = getattr(tensordict, name)  # loads tensordict._lazy for the lazy-stack class
    assert getattr(_classes, name) is public


def test_lazy_stack_class_loads_on_first_read():
    """``import tensordict`` does not load the lazy-stack modules; reading the class does."""
    code = (
        "import sys, torch, tensordict\n"
        "from tensordict import _classes\n"
        "assert 'tensordict._lazy' not in sys.modules\n"
        "td = tensordict.TensorDict(a=torch.zeros(2), batch_size=[2])\n"
        "s = td.to_lazystack(0)\n"
        "assert type(s) is _classes.LazyStackedTensorDict is tensordict.LazyStackedTensorDict\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_no_late_binding_helpers_left():
    """The four ways the classes used to be late-bound are gone."""
    for module, path in MODULES.items():
        src = path.read_text(encoding="utf-8")
        for marker in (r"_bind_base_class", r"_td_cls\(\)", r"_TDB or _bind", r"\b_CLASSES: list"):
            assert not re.search(marker, src), f"{module} still uses {marker!r}"


def test_mixin_hosts_are_plain_object_at_run_time():
    """The declarations mypy reads (``_host.py``) add nothing to any class at run time."""
    from tensordict import TensorDict, _host
    from tensordict._lazy import LazyStackedTensorDict

    assert _host.TensorDictHost is object and _host.LazyStackHost is object
    for cls in (TensorDict, LazyStackedTensorDict):
        assert not any(base.__module__ == "tensordict._host" for base in cls.__mro__)
