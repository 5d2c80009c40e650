"""Nox sessions for the td-* monorepo.

- ``tests(<dist>, <device>)``: one distribution's tests, with that distribution and the
  in-repo distributions it declares installed as built wheels (so an undeclared import of
  a sibling fails). ``device`` is ``cpu`` or ``cuda``; cuda sessions skip without a GPU.
- ``tests_all(<device>)``: every suite with every distribution installed editable.
- ``mds``: td-core's ``to_mds`` with mosaicml-streaming (which pins an older numpy) alone.
- ``downstream``: TorchRL 0.14.1 (``--no-deps``) on the full stack, ``tests/downstream``.
- ``wheels``: builds every wheel and fails if two ship the same file.
- ``lint`` (ruff), ``typecheck`` (mypy), ``docs`` (Sphinx, warnings as errors), ``bench`` (pytest-benchmark),
  ``bench_chart`` (the docs' chart from the benchmark JSON), ``demo`` (the end-to-end
  example), ``fuzz`` (long property-test profile).

``nox -t tests`` runs the whole test matrix (the README's test command).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import venv
import zipfile
from pathlib import Path

import nox
import tomllib

ROOT = Path(__file__).parent
CONSTRAINTS = ("-c", str(ROOT / "constraints.txt"))  # torch==2.13.0: the local CPU wheel
PYTEST = ("pytest", "--import-mode=importlib", "-q", "-p", "no:cacheprovider")
TEST_DEPS = ("pytest", "pytest-timeout", "hypothesis", "numpy")
DEVICES = ["cpu", "cuda"]
TORCH = "torch==2.13.0"
# One torch install shared by every session (see _install_torch): about 1 GB once instead of
# once per environment.
SHARED_TORCH = ROOT / ".nox" / "_shared-torch"

nox.options.default_venv_backend = "virtualenv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests", "tests_all", "wheels", "lint"]


def _project(path: Path) -> dict:
    return tomllib.loads((path / "pyproject.toml").read_text())["project"]


DISTS = {
    _project(p)["name"]: p
    for p in sorted((ROOT / "packages").iterdir())
    if (p / "pyproject.toml").is_file()
}


def _closure(dist: str) -> list[str]:
    """``dist`` plus every in-repo distribution it depends on, transitively."""
    seen: list[str] = []
    todo = [dist]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.append(name)
        for req in _project(DISTS[name]).get("dependencies", []):
            dep = re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0]
            if dep in DISTS:
                todo.append(dep)
    return seen


def _extra_test_deps(dist: str) -> list[str]:
    """Third-party test-only requirements a package lists in [tool.td] test-deps."""
    data = tomllib.loads((DISTS[dist] / "pyproject.toml").read_text())
    return list(data.get("tool", {}).get("td", {}).get("test-deps", []))


def _system_deps(session: nox.Session, dists: list[str]) -> None:
    """Install the Debian packages the distributions' tests need ([tool.td] system-deps, e.g.
    td-store's ``redis-server``: its tests start their own server) when the command is missing."""
    for dist in dists:
        data = tomllib.loads((DISTS[dist] / "pyproject.toml").read_text())
        for pkg in data.get("tool", {}).get("td", {}).get("system-deps", []):
            if shutil.which(pkg) is not None:
                continue
            if shutil.which("apt-get") is None:
                session.error(f"{dist}'s tests need `{pkg}`, which is missing, and apt-get is not available")
            session.log(f"{pkg} is missing: installing Debian's {pkg} with apt-get (needed by {dist}'s tests)")
            sudo = () if os.geteuid() == 0 else ("sudo",)
            session.run(*sudo, "apt-get", "update", "-qq", external=True)
            session.run(*sudo, "apt-get", "install", "-y", "-qq", "--no-install-recommends", pkg, external=True,
                        env={"DEBIAN_FRONTEND": "noninteractive"})


def _install_torch(session: nox.Session) -> None:
    """Make ``torch==2.13.0`` importable in the session's environment without installing it again.

    torch is installed once into ``.nox/_shared-torch`` (a plain venv, with pip and the project's
    constraints, so it takes the local CPU wheel) and every session's environment gets a ``.pth``
    file that appends that environment's ``site-packages`` to ``sys.path``. The session's own
    packages come first on ``sys.path``; pip sees torch as installed, so a dependency on torch
    (torchrl, ...) installs nothing more. Set ``TD_NOX_SHARED_TORCH=0`` to install torch into each
    environment instead.
    """
    if os.environ.get("TD_NOX_SHARED_TORCH", "1") == "0" or session.venv_backend == "none":
        session.install(*CONSTRAINTS, TORCH)
        return
    py = SHARED_TORCH / "bin" / "python"
    marker = SHARED_TORCH / "torch-installed.txt"
    if not marker.is_file() or marker.read_text().strip() != TORCH:
        start = time.monotonic()
        session.log(f"installing {TORCH} once into {SHARED_TORCH} (shared by every session)")
        if not py.is_file():
            venv.EnvBuilder(with_pip=True, clear=True).create(SHARED_TORCH)
        subprocess.run(
            [str(py), "-m", "pip", "install", "-q", *CONSTRAINTS, TORCH], check=True,
        )
        marker.write_text(TORCH + "\n")
        session.log(f"shared torch ready in {time.monotonic() - start:.0f} s")
    shared_site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    # run_install: this is part of installing, so it runs under --install-only too
    own_site = session.run_install(
        "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        silent=True,
    )
    if own_site is None:  # --no-install on a reused environment: the .pth file is there
        return
    (Path(own_site.strip()) / "_td_shared_torch.pth").write_text(shared_site + "\n")
    version = session.run_install(
        "python", "-W", "ignore", "-c", "import torch; print(torch.__version__)", silent=True,
    )
    session.log(f"torch {version.strip()} from the shared install")


def _skip_without_gpu(session: nox.Session, device: str) -> None:
    """Skip a cuda session before building anything when the machine has no NVIDIA driver."""
    if device == "cuda" and shutil.which("nvidia-smi") is None:
        session.skip("cuda: no GPU on this machine (nvidia-smi not found)")


def _device_env(session: nox.Session, device: str) -> dict:
    if device == "cuda":
        has_gpu = session.run(
            "python", "-c", "import torch,sys; sys.stdout.write(str(torch.cuda.is_available()))",
            silent=True,
        )
        if "True" not in str(has_gpu):
            session.skip("cuda: no GPU on this machine")
    return {"TD_TEST_DEVICE": device}


@nox.session(tags=["tests"])
@nox.parametrize("device", DEVICES, ids=DEVICES)
@nox.parametrize("dist", [nox.param(d, id=d.removeprefix("td-"), tags=[d]) for d in DISTS])
def tests(session: nox.Session, dist: str, device: str) -> None:
    """One distribution's tests against wheels of it and its declared td-* deps."""
    _skip_without_gpu(session, device)
    _system_deps(session, [dist])
    _install_torch(session)
    session.install(*CONSTRAINTS, *TEST_DEPS, *_extra_test_deps(dist))
    closure = [str(DISTS[d]) for d in _closure(dist)]
    session.install(*CONSTRAINTS, *closure)
    # a reused environment already has version 0.1.0: rebuild the wheels from the tree
    session.install(*CONSTRAINTS, "--force-reinstall", "--no-deps", *closure)
    env = _device_env(session, device)
    session.run(*PYTEST, str(DISTS[dist] / "tests"), *session.posargs, env=env)


@nox.session(tags=["tests"])
@nox.parametrize("device", DEVICES, ids=DEVICES)
def tests_all(session: nox.Session, device: str) -> None:
    """Every test suite with every distribution installed editable (includes the demo test)."""
    _skip_without_gpu(session, device)
    _system_deps(session, list(DISTS))
    _install_torch(session)
    extras = [x for d in DISTS for x in _extra_test_deps(d)]
    session.install(*CONSTRAINTS, *TEST_DEPS, *extras, "scikit-learn", "matplotlib", "tqdm")
    session.install(*CONSTRAINTS, *(a for d in DISTS.values() for a in ("-e", str(d))))
    env = _device_env(session, device)
    session.run(*PYTEST, *(str(d / "tests") for d in DISTS.values()), "tests", *session.posargs, env=env)


@nox.session(tags=["tests"])
def mds(session: nox.Session) -> None:
    """td-core's ``to_mds`` against mosaicml-streaming, in an environment of its own.

    mosaicml-streaming pins ``numpy<2.2``, so it is kept out of every other session. Only what
    its MDS writer and reader (``streaming.base``) import is installed (``--no-deps``: its
    cloud-storage clients are not needed). ``import streaming`` also imports its dataset zoo,
    which needs a torchvision built for the installed torch (the index's are CUDA builds, which
    do not load with the project's CPU-only torch): the test loads ``streaming.base`` without it.
    """
    _install_torch(session)
    session.install(
        *CONSTRAINTS, "pytest", "pytest-timeout", "numpy<2.2", "xxhash<4", "zstd", "Brotli", "python-snappy",
        "tqdm", "catalogue", "transformers<5",
    )
    session.install(*CONSTRAINTS, "--no-deps", "mosaicml-streaming==0.13.*")
    core = str(DISTS["td-core"])
    session.install(*CONSTRAINTS, "--force-reinstall", "--no-deps", core)
    session.run(*PYTEST, str(DISTS["td-core"] / "tests" / "test_mds.py"), *session.posargs)


#: TorchRL, the main downstream framework, as a tested client. It pins ``tensordict<0.15``,
#: so it is installed with ``--no-deps``; these are the other requirements it declares.
TORCHRL = "torchrl==0.14.1"
TORCHRL_DEPS = ("pyvers==0.2.3", "hoptorch==0.1.4", "numpy", "packaging", "cloudpickle")


@nox.session(tags=["tests"])
def downstream(session: nox.Session) -> None:
    """TorchRL 0.14.1 on the full stack (all six wheels): ``tests/downstream``."""
    _install_torch(session)
    session.install(*CONSTRAINTS, "pytest", "pytest-timeout", *TORCHRL_DEPS)
    stack = [str(d) for d in DISTS.values()]
    session.install(*CONSTRAINTS, *stack)
    # a reused environment already has version 0.1.0: rebuild the wheels from the tree
    session.install(*CONSTRAINTS, "--force-reinstall", "--no-deps", *stack)
    session.install(*CONSTRAINTS, "--no-deps", TORCHRL)
    # a per-test limit: a hang (TorchRL's MCTS tree once looped here) fails one test, not the session
    session.run(*PYTEST, "--timeout=300", str(ROOT / "tests" / "downstream"), *session.posargs)


@nox.session(tags=["tests"])
def wheels(session: nox.Session) -> None:
    """Build all wheels; fail if two wheels ship the same file (e.g. tensordict/__init__.py)."""
    session.install("build")
    out = Path(session.create_tmp()) / "dist"
    for whl in out.glob("*.whl"):
        whl.unlink()
    for d in DISTS.values():
        session.run("python", "-m", "build", "--wheel", "--outdir", str(out), str(d), silent=True)
    owners: dict[str, str] = {}
    for whl in sorted(out.glob("*.whl")):
        for name in zipfile.ZipFile(whl).namelist():
            if ".dist-info/" in name:
                continue
            if name in owners:
                session.error(f"{name} is shipped by both {owners[name]} and {whl.name}")
            owners[name] = whl.name
    session.log(f"{len(owners)} files in {len(list(out.glob('*.whl')))} wheels, no duplicates")


@nox.session(tags=["tests"])
def lint(session: nox.Session) -> None:
    """ruff over every package, the benchmarks and the examples."""
    session.install("ruff")
    session.run("ruff", "check", "packages", "benchmarks", "examples", "tests", "noxfile.py")


#: mypy's verdict changes between releases (new checks, stale ``type: ignore`` comments),
#: and with the stubs of the packages it reads: all pinned to the versions it was run with
TYPECHECK_DEPS = (
    "mypy==2.4.1", "numpy==2.4.6", "h5py==3.16.0", "hypothesis==6.170.17", "typing_extensions==4.16.0",
)


@nox.session(tags=["tests"])
def typecheck(session: nox.Session) -> None:
    """mypy over every distribution's src/ with the root pyproject's [tool.mypy] settings.

    The third-party packages the sources import are installed so that mypy reads their
    real types (torch from the shared install).
    """
    _install_torch(session)
    session.install(*CONSTRAINTS, *TYPECHECK_DEPS)
    session.run("mypy", "--config-file", str(ROOT / "pyproject.toml"))


@nox.session
def docs(session: nox.Session) -> None:
    """Build the Sphinx site with warnings as errors, and run its doctests."""
    _install_torch(session)
    session.install(*CONSTRAINTS, "sphinx", "numpy", "h5py", "tqdm", "myst-parser")
    session.install(*CONSTRAINTS, *(a for d in DISTS.values() for a in ("-e", str(d))))
    build = str(ROOT / "docs" / "_build")
    session.run("sphinx-build", "-W", "--keep-going", "-b", "html", "docs", f"{build}/html")
    session.run("sphinx-build", "-W", "--keep-going", "-b", "doctest", "docs", f"{build}/doctest")


@nox.session
def bench(session: nox.Session) -> None:
    """pytest-benchmark suites; JSON saved to .benchmarks/latest.json."""
    _install_torch(session)
    extras = [x for d in DISTS for x in _extra_test_deps(d)]  # the file formats' packages (pyarrow, ...)
    session.install(*CONSTRAINTS, "pytest", "pytest-benchmark", "numpy", "h5py", "tqdm", *extras)
    session.install(*CONSTRAINTS, *(a for d in DISTS.values() for a in ("-e", str(d))))
    out = ROOT / ".benchmarks"
    out.mkdir(exist_ok=True)
    session.run(
        *PYTEST, "benchmarks", "--benchmark-only", "--benchmark-min-rounds=5",
        f"--benchmark-json={out / 'latest.json'}", *session.posargs,
    )
    session.run("python", str(ROOT / "benchmarks" / "report.py"), str(out / "latest.json"))
    session.notify("bench_chart")


@nox.session
def bench_chart(session: nox.Session) -> None:
    """The docs' benchmark chart and table from a pytest-benchmark JSON.

    Reads ``.benchmarks/latest.json`` (written by ``nox -s bench``; another JSON can be
    given as the argument) and writes ``docs/_static/benchmarks.png`` (TensorDict/dict
    ratios, one bar per case) and ``docs/_static/benchmarks.txt`` (the same as a table).
    """
    session.install(*CONSTRAINTS, "matplotlib")
    src = Path(session.posargs[0]) if session.posargs else ROOT / ".benchmarks" / "latest.json"
    if not src.is_file():
        session.error(f"{src} does not exist: run `nox -s bench` first")
    static = ROOT / "docs" / "_static"
    static.mkdir(exist_ok=True)
    report = str(ROOT / "benchmarks" / "report.py")
    table = session.run("python", report, str(src), "--png", str(static / "benchmarks.png"), silent=True)
    (static / "benchmarks.txt").write_text(str(table).lstrip("\n"))
    session.log(f"wrote {static / 'benchmarks.png'} and {static / 'benchmarks.txt'}")
    scaling = str(ROOT / "benchmarks" / "scaling.py")
    growth = session.run("python", scaling, str(src), "--png", str(static / "scaling.png"), silent=True)
    (static / "scaling.txt").write_text(str(growth).lstrip("\n"))
    session.log(f"wrote {static / 'scaling.png'} and {static / 'scaling.txt'}")


@nox.session
def demo(session: nox.Session) -> None:
    """The end-to-end demo (the README's main command)."""
    _install_torch(session)
    session.install(*CONSTRAINTS, "numpy", "h5py", "tqdm", "scikit-learn", "matplotlib")
    session.install(*CONSTRAINTS, *(a for d in DISTS.values() for a in ("-e", str(d))))
    session.run("python", str(ROOT / "examples" / "demo.py"), *session.posargs)


@nox.session
def fuzz(session: nox.Session) -> None:
    """Long hypothesis profile of the property tests (local runs)."""
    _install_torch(session)
    session.install(*CONSTRAINTS, *TEST_DEPS, "h5py")
    session.install(*CONSTRAINTS, *(a for d in DISTS.values() for a in ("-e", str(d))))
    env = {"HYPOTHESIS_PROFILE": "fuzz", **os.environ}
    session.run(*PYTEST, "-k", "property or fuzz", *(str(d / "tests") for d in DISTS.values()), env=env)
