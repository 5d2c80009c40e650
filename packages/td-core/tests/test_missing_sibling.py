"""``import tensordict.<sibling>`` without the sibling's distribution names the distribution.

Absence is simulated in a fresh interpreter by dropping the siblings' folders from
``sys.path`` before ``import tensordict`` (editable installs), and is real in the
per-distribution wheel session of td-core, where no sibling is installed.
"""

import subprocess
import sys

SIBLINGS = {
    "nn": "td-nn",
    "memmap": "td-memmap",
    "persistent": "td-h5",
    "distributed": "td-distributed",
    "tensorclass": "td-tensorclass",
    "prototype": "td-tensorclass",
}

_CHILD = r"""
import json, os, sys
sys.path = [p for p in sys.path
            if not any(os.sep + f"td-{d}" + os.sep in p + os.sep
                       for d in ("nn", "memmap", "h5", "distributed", "tensorclass"))]
import tensordict
result = {}
for sub in %r:
    core_dirs = [p for p in tensordict.__path__ if os.path.isdir(os.path.join(p, sub))]
    if core_dirs:  # installed into the same folder as td-core: cannot be hidden here
        result[sub] = "present"
        continue
    import importlib.util
    if importlib.util.find_spec("tensordict." + sub) is not None:  # a probe answers None
        result[sub] = "probe found it"
        continue
    try:
        __import__("tensordict." + sub)
    except ModuleNotFoundError as err:
        result[sub] = ["ModuleNotFoundError", str(err), err.name]
    except ImportError as err:
        result[sub] = ["ImportError", str(err), None]
    else:
        result[sub] = "imported"
print(json.dumps(result))
"""


def _run(code: str) -> dict:
    import json

    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_import_missing_sibling_names_distribution():
    result = _run(_CHILD % (list(SIBLINGS),))
    hidden = {sub: r for sub, r in result.items() if r != "present"}
    assert hidden, f"no sibling could be hidden: {result}"
    for sub, outcome in hidden.items():
        assert outcome != "imported", f"tensordict.{sub} imported although its folder was removed"
        assert outcome != "probe found it", f"importlib.util.find_spec found the missing tensordict.{sub}"
        kind, message, name = outcome
        assert kind == "ModuleNotFoundError"  # an ImportError subclass, as for any missing module
        assert name == f"tensordict.{sub}"
        assert SIBLINGS[sub] in message, message
        assert f"pip install {SIBLINGS[sub]}" in message


def test_missing_sibling_submodule_and_from_import():
    code = _CHILD.split("result = {}")[0] + (
        "if any(os.path.isdir(os.path.join(p, 'nn')) for p in tensordict.__path__):\n"
        "    print('{}'); sys.exit(0)\n"
        "out = {}\n"
        "for stmt in ('import tensordict.nn.common', 'from tensordict.nn import TensorDictModule'):\n"
        "    try:\n"
        "        exec(stmt)\n"
        "    except ImportError as err:\n"
        "        out[stmt] = str(err)\n"
        "print(json.dumps(out))\n"
    )
    out = _run(code)
    for message in out.values():
        assert "td-nn" in message


def test_finder_does_not_hide_other_errors():
    from tensordict._sibling_finder import MissingSiblingFinder

    finder = MissingSiblingFinder()
    assert finder.find_spec("tensordict.not_a_sibling") is None
    assert finder.find_spec("tensordict.nn.something") is None
    assert finder.find_spec("numpy") is None
    assert sum(isinstance(f, MissingSiblingFinder) for f in sys.meta_path) == 1
