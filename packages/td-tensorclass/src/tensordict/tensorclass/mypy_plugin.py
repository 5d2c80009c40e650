"""mypy plugin: ``@tensorclass`` classes accept ``batch_size``, ``device`` and ``names``.

``typing.dataclass_transform`` (which ``tensorclass`` carries) gives a decorated class
the ``__init__`` of its fields only: type checkers then report
``Unexpected keyword argument "batch_size"`` on every construction, although every
tensorclass constructor takes ``batch_size``, ``device`` and ``names`` keywords.
Subclasses of ``TensorClass`` do not need this plugin (the base class declares the
keywords as keyword-only fields, which dataclass-like subclasses inherit); PEP 681
offers a decorator no way to add keywords, hence this plugin for the decorator form.

Enable it in the mypy configuration::

    [tool.mypy]
    plugins = ["tensordict.tensorclass.mypy_plugin"]

It runs mypy's own dataclass transform for the class, then appends the three
keyword-only, optional parameters to the generated ``__init__`` (a class that defines
its own ``__init__`` keeps it). This module imports only mypy: it is loaded by mypy,
never at run time by ``tensordict``.
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.nodes import ARG_NAMED_OPT, Argument, EllipsisExpr, FuncDef, Var
from mypy.plugin import ClassDefContext, Plugin
from mypy.plugins.common import add_method_to_class
from mypy.plugins.dataclasses import dataclass_class_maker_callback
from mypy.types import AnyType, NoneType, TypeOfAny

__all__ = ["TensorclassPlugin", "plugin"]

#: where the decorator is defined, and the public names it is imported under
DECORATORS = frozenset(
    {
        "tensordict.tensorclass._decorator.tensorclass",
        "tensordict.tensorclass.tensorclass",
        "tensordict.prototype.tensorclass",
    }
)
#: the keyword-only constructor parameters every tensorclass takes besides its fields
CONSTRUCTOR_KEYWORDS = ("batch_size", "device", "names")


def _add_constructor_keywords(ctx: ClassDefContext) -> bool:
    if not dataclass_class_maker_callback(ctx):
        return False  # mypy calls again once the field types are known
    info = ctx.cls.info
    sym = info.names.get("__init__")
    if sym is None or not sym.plugin_generated or not isinstance(sym.node, FuncDef):
        return True  # the class defines its own __init__: it is left as written
    current = sym.node.arguments[1:]  # without self
    names = {arg.variable.name for arg in current}
    args = list(current)
    for name in CONSTRUCTOR_KEYWORDS:
        if name in names:  # a field of that name (shadow=True) replaces the keyword
            continue
        typ = AnyType(TypeOfAny.explicit)
        args.append(Argument(Var(name, typ), typ, EllipsisExpr(), ARG_NAMED_OPT))
    if len(args) != len(current):
        add_method_to_class(ctx.api, ctx.cls, "__init__", args=args, return_type=NoneType())
    return True


class TensorclassPlugin(Plugin):
    """Hooks the ``@tensorclass`` decorator (with or without options)."""

    def get_class_decorator_hook_2(self, fullname: str) -> Callable[[ClassDefContext], bool] | None:
        if fullname in DECORATORS:
            return _add_constructor_keywords
        return None


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point: the plugin class (``version`` is mypy's version string)."""
    del version
    return TensorclassPlugin
