"""The base class of every ``set_*`` switch of the ``tensordict`` API.

A switch holds one process-wide value (``lazy_legacy()``, ``interaction_type()``,
``list_to_stack()``, ...). Its ``set_<name>(value)`` class is used three ways, as
tensordict documents it:

* a context manager: ``with set_x(value): ...`` sets the value for the block and
  restores the previous one on exit (re-entrant, exceptions included);
* a decorator: ``@set_x(value)`` sets the value for each call of the function (for a
  generator function, while the generator runs, not while its consumer does);
* ``set_x(value).set()`` sets it process-wide until ``.unset()`` on the same object
  restores the value it replaced.

Creating the object changes nothing. Subclasses implement :meth:`ModeSwitch._read`
and :meth:`ModeSwitch._write`; td-nn and the other siblings use this class through
``tensordict.utils.ModeSwitch``.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["ModeSwitch"]

_NOT_SET: Any = object()


class ModeSwitch:
    """Context manager, decorator and ``set()``/``unset()`` for one process-wide value.

    Subclasses store the value to apply in ``self.mode`` and implement ``_read()``
    (the current value) and ``_write(value)``.

    Raises:
        RuntimeError: ``unset()`` without a matching ``set()``, or ``__exit__``
            without ``__enter__``.

    Examples:
        >>> class set_flag(ModeSwitch):
        ...     value = False
        ...     def __init__(self, mode):
        ...         super().__init__()
        ...         self.mode = mode
        ...     def _read(self):
        ...         return set_flag.value
        ...     def _write(self, value):
        ...         set_flag.value = value
        >>> with set_flag(True):
        ...     set_flag.value
        True
        >>> s = set_flag(True)
        >>> s.set(); set_flag.value
        True
        >>> s.unset(); set_flag.value
        False
    """

    mode: Any = None

    def __init__(self) -> None:
        self._stack: list = []
        self._saved: Any = _NOT_SET

    # -- the state hooks -------------------------------------------------------------
    def _read(self) -> Any:
        raise NotImplementedError

    def _write(self, value: Any) -> None:
        raise NotImplementedError

    def _apply(self) -> None:
        """Writes ``self.mode`` (subclasses may skip it, e.g. for a ``None`` mode)."""
        self._write(self.mode)

    # -- context manager -------------------------------------------------------------
    def __enter__(self) -> ModeSwitch:
        self._stack.append(self._read())
        self._apply()
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self._stack:
            if self._saved is not _NOT_SET:  # ``set()`` then ``__exit__``: undo the ``set()``
                self.unset()
                return
            msg = f"{type(self).__name__}.__exit__ called without a matching __enter__."
            raise RuntimeError(msg)
        self._write(self._stack.pop())

    # -- process-wide ----------------------------------------------------------------
    def set(self) -> None:
        """Sets the value process-wide; :meth:`unset` restores the one it replaced."""
        self._saved = self._read()
        self._apply()

    def unset(self) -> None:
        """Restores the value that :meth:`set` replaced.

        Raises:
            RuntimeError: :meth:`set` was not called on this object.
        """
        if self._saved is _NOT_SET:
            msg = f"{type(self).__name__}.unset() called before set()."
            raise RuntimeError(msg)
        saved, self._saved = self._saved, _NOT_SET
        self._write(saved)

    # -- decorator -------------------------------------------------------------------
    def clone(self) -> ModeSwitch:
        """A fresh switch with the same mode (its own enter/exit and set/unset state)."""
        new = copy.copy(self)
        new._stack = []
        new._saved = _NOT_SET
        return new

    def __call__(self, func: Callable) -> Callable:
        if inspect.isclass(func):
            msg = f"{type(self).__name__} decorates functions and methods, not classes ({func!r})."
            raise TypeError(msg)
        if inspect.isgeneratorfunction(func):
            return self._wrap_generator(func)

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.clone():
                return func(*args, **kwargs)

        return wrapper

    def _wrap_generator(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            ctx = self.clone()
            with ctx:
                gen = func(*args, **kwargs)
                try:
                    item = next(gen)
                except StopIteration as stop:
                    return stop.value
            while True:
                try:
                    sent = yield item
                except GeneratorExit:
                    with ctx:
                        gen.close()
                    raise
                except BaseException as err:  # noqa: BLE001 - forwarded into the generator
                    with ctx:
                        try:
                            item = gen.throw(err)
                        except StopIteration as stop:
                            return stop.value
                else:
                    with ctx:
                        try:
                            item = gen.send(sent)
                        except StopIteration as stop:
                            return stop.value

        return wrapper

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.mode!r})"
