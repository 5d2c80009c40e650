"""Only public names cross between distributions.

A sibling distribution (td-memmap, td-h5, td-nn, td-distributed, td-tensorclass, td-store) may
import from td-core, and from another sibling, only public modules and public names:
no ``tensordict._x`` module, no ``tensordict.<other>._y`` module, no ``_name``. What a
sibling needs from td-core is published in ``tensordict.ext`` (the API for sibling
distributions) or ``tensordict.utils``. A module path written as a string (for
``importlib``, or to compare ``__module__``) counts as an import too.

The check is static (``ast``) over every sibling's ``src/``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SIBLINGS = sorted(p for p in (ROOT / "packages").iterdir() if (p / "src" / "tensordict").is_dir() and p.name != "td-core")
_MODULE_STRING = re.compile(r"tensordict(\.\w+)*\.(_\w+)(\.\w+)*")


def _own_subpackages(dist: Path) -> set[str]:
    """``{"tensordict.memmap"}`` etc.: the subpackages a distribution ships."""
    return {f"tensordict.{p.name}" for p in (dist / "src" / "tensordict").iterdir() if p.is_dir() and p.name != "__pycache__"}


def _is_private(dotted: str) -> bool:
    return any(part.startswith("_") and not (part.startswith("__") and part.endswith("__")) for part in dotted.split("."))


def _owner(module: str, own: set[str]) -> bool:
    return any(module == o or module.startswith(o + ".") for o in own)


def _docstring_nodes(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _violations(dist: Path) -> list[str]:
    own = _own_subpackages(dist)
    found: list[str] = []
    for path in sorted((dist / "src").rglob("*.py")):
        rel = path.relative_to(dist.parent)
        parts = path.relative_to(dist / "src").with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstring_nodes(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    name = alias.name
                    if name.startswith("tensordict.") and not _owner(name, own) and _is_private(name):
                        found.append(f"{rel}:{node.lineno}: import {name}")
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    pkg = module.split(".") if is_pkg else module.split(".")[:-1]
                    pkg = pkg[: len(pkg) - (node.level - 1)]
                    base = ".".join([*pkg, base] if base else pkg)
                if not (base == "tensordict" or base.startswith("tensordict.")) or _owner(base, own):
                    continue
                if _is_private(base):
                    names = ", ".join(a.name for a in node.names)
                    found.append(f"{rel}:{node.lineno}: from {base} import {names}")
                    continue
                for alias in node.names:
                    if _is_private(alias.name) and not _owner(f"{base}.{alias.name}", own):
                        found.append(f"{rel}:{node.lineno}: from {base} import {alias.name}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                m = _MODULE_STRING.fullmatch(node.value)
                if m and not _owner(node.value, own):
                    found.append(f"{rel}:{node.lineno}: module path string {node.value!r}")
    return found


@pytest.mark.parametrize("dist", SIBLINGS, ids=[p.name for p in SIBLINGS])
def test_sibling_imports_only_public_names(dist):
    found = _violations(dist)
    assert not found, (
        f"{dist.name} reaches into private names of another distribution "
        "(use tensordict.ext / tensordict.utils / the public package names):\n  " + "\n  ".join(found)
    )


def test_scanner_sees_every_sibling():
    assert {p.name for p in SIBLINGS} == {"td-memmap", "td-h5", "td-nn", "td-distributed", "td-tensorclass", "td-store"}


def test_scanner_catches_private_imports(tmp_path):
    """The scanner flags each kind of private reach (so the real test can fail)."""
    dist = tmp_path / "td-fake"
    sub = dist / "src" / "tensordict" / "fake"
    sub.mkdir(parents=True)
    (sub / "__init__.py").write_text(
        "from tensordict._td import TensorDict\n"
        "from tensordict import _classes\n"
        "from tensordict.utils import _private_helper\n"
        "import tensordict.memmap._registry\n"
        "from tensordict.fake._own import ok\n"
        "from . import _own_too\n"
        "MODULES = ('tensordict._ops',)\n"
    )
    found = _violations(dist)
    assert len(found) == 5, found
