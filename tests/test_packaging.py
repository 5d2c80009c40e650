"""Cross-distribution checks: namespace portions, the callable/subpackage guard, seams."""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").is_file())
SUBPACKAGES = {"td-memmap": "memmap", "td-h5": "persistent", "td-nn": "nn",
               "td-distributed": "distributed", "td-tensorclass": "tensorclass", "td-store": "store"}


@pytest.mark.parametrize("pkg", PACKAGES, ids=[p.name for p in PACKAGES])
def test_package_layout(pkg):
    assert (pkg / "README.md").is_file()
    init = pkg / "src" / "tensordict" / "__init__.py"
    if pkg.name == "td-core":
        assert init.is_file()
        body = ast.parse(init.read_text()).body
        first = body[1] if isinstance(body[0], ast.Expr) else body[0]  # after the docstring
        assert "extend_path" in ast.unparse(first) and "__path__" in ast.unparse(first)
    else:
        assert not init.exists(), f"{pkg.name} must not ship tensordict/__init__.py"
        sub = SUBPACKAGES[pkg.name]
        assert (pkg / "src" / "tensordict" / sub / "py.typed").is_file()


@pytest.mark.parametrize("dist,sub", sorted(SUBPACKAGES.items()))
def test_subpackage_name(dist, sub):
    try:
        mod = importlib.import_module(f"tensordict.{sub}")
    except ImportError:
        pytest.skip(f"{dist} not installed")
    assert mod.__name__ == f"tensordict.{sub}"


@pytest.mark.parametrize("name", ["memmap", "tensorclass"])
def test_callable_survives_submodule_import(name):
    code = (
        f"import tensordict.{name}\n"
        f"from tensordict import {name}\n"
        "import types, sys\n"
        f"sys.exit(0 if callable({name}) and not isinstance({name}, types.ModuleType) else 1)\n"
    )
    try:
        importlib.import_module(f"tensordict.{name}")
    except ImportError:
        pytest.skip(f"tensordict.{name} not installed")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_typecheck_covers_every_distribution():
    """``nox -s typecheck`` reads every distribution's src/ and exempts no module."""
    import tomllib

    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    for pkg in PACKAGES:
        assert f"packages/{pkg.name}/src/tensordict" in mypy["files"], pkg.name
        assert f"packages/{pkg.name}/src" in mypy["mypy_path"], pkg.name
    assert mypy["disallow_untyped_defs"] and mypy["check_untyped_defs"] and mypy["warn_unused_ignores"]
    assert not any(o.get("ignore_errors") for o in mypy.get("overrides", []))
