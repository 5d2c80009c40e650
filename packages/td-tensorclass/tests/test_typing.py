"""Static typing: mypy sees the constructor and field types of tensorclasses
(``dataclass_transform``) and methods typed ``Self`` (skipped without mypy)."""

import textwrap

import pytest

GOOD = textwrap.dedent(
    """
    from __future__ import annotations

    import torch

    from tensordict.tensorclass import TensorClass, tensorclass


    class Pair(TensorClass):
        a: torch.Tensor
        b: torch.Tensor | None = None
        tag: str = "x"

        def first(self) -> Pair:
            return self[0]


    @tensorclass
    class Decorated:
        x: torch.Tensor
        y: int = 0


    p = Pair(a=torch.zeros(3), batch_size=[3])
    q = Pair(torch.zeros(3), None, "t", batch_size=[3], device="cpu", names=["n"])
    t: str = p.tag
    r: Pair = p.reshape(3, 1)
    s: Pair = p[1:]
    u: Pair = p.to("cpu").clone().first()
    parts: tuple[Pair, ...] = p.unbind(0)
    st: Pair = Pair.stack([p, q], 0)
    ld: Pair = Pair.from_tensordict(p.to_tensordict())
    d = Decorated(x=torch.zeros(2))
    yy: int = d.y
    d2 = Decorated(torch.zeros(2), 1, batch_size=[2], device="cpu", names=["n"])
    """
)

BAD = textwrap.dedent(
    """
    import torch

    from tensordict.tensorclass import TensorClass, tensorclass


    class Pair(TensorClass):
        a: torch.Tensor
        tag: str = "x"


    @tensorclass
    class Decorated:
        x: torch.Tensor


    p = Pair(a=torch.zeros(3), colour=1, batch_size=[3])
    n: int = p.tag
    m: int = p.reshape(3)
    d = Decorated(x=torch.zeros(2), bogus=1)
    d2 = Decorated(torch.zeros(2), torch.zeros(2), device="cpu")
    """
)

CONFIG = textwrap.dedent(
    """
    [mypy]
    follow_imports = silent
    ignore_missing_imports = True
    plugins = tensordict.tensorclass.mypy_plugin

    [mypy-torch.*]
    follow_imports = skip

    [mypy-numpy.*]
    follow_imports = skip
    """
)


@pytest.mark.timeout(300)
def test_mypy_sees_fields_constructor_and_self(tmp_path):
    api = pytest.importorskip("mypy.api")
    (tmp_path / "good_example.py").write_text(GOOD)
    (tmp_path / "bad_example.py").write_text(BAD)
    (tmp_path / "mypy.ini").write_text(CONFIG)
    stdout, stderr, _ = api.run(
        [
            "--config-file",
            str(tmp_path / "mypy.ini"),
            "--no-incremental",
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            str(tmp_path / "good_example.py"),
            str(tmp_path / "bad_example.py"),
        ]
    )
    lines = [line for line in stdout.splitlines() if ": error:" in line]
    assert not [line for line in lines if "good_example.py" in line], stdout + stderr
    bad = "\n".join(line for line in lines if "bad_example.py" in line)
    assert 'Unexpected keyword argument "colour" for "Pair"' in bad, stdout
    assert 'expression has type "str", variable has type "int"' in bad, stdout
    assert 'expression has type "Pair", variable has type "int"' in bad, stdout
    assert 'Unexpected keyword argument "bogus" for "Decorated"' in bad, stdout
    assert 'Too many positional arguments for "Decorated"' in bad, stdout
    assert len(lines) == 5, stdout


DECORATED = textwrap.dedent(
    """
    import torch

    from tensordict import tensorclass


    @tensorclass
    class Decorated:
        x: torch.Tensor


    d = Decorated(x=torch.zeros(2), batch_size=[2], device="cpu", names=["n"])
    reveal_type(Decorated.__init__)
    """
)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("with_plugin", [True, False])
def test_decorator_keywords_come_from_the_plugin(tmp_path, with_plugin):
    api = pytest.importorskip("mypy.api")
    (tmp_path / "decorated.py").write_text(DECORATED)
    config = CONFIG if with_plugin else CONFIG.replace("plugins = tensordict.tensorclass.mypy_plugin\n", "")
    (tmp_path / "mypy.ini").write_text(config)
    stdout, stderr, _ = api.run(
        ["--config-file", str(tmp_path / "mypy.ini"), "--no-incremental", "--cache-dir",
         str(tmp_path / ".mypy_cache"), str(tmp_path / "decorated.py")]
    )
    errors = [line for line in stdout.splitlines() if ": error:" in line]
    if with_plugin:
        assert not errors, stdout + stderr
        assert "batch_size: Any =, device: Any =, names: Any =" in stdout, stdout
    else:  # what the plugin fixes: dataclass_transform alone gives the fields only
        assert 'Unexpected keyword argument "batch_size" for "Decorated"' in stdout, stdout
