"""The exceptions refjit raises. Every one derives from :class:`refjit.Error`."""

from __future__ import annotations

import builtins
import re


class Error(Exception):
    """A program refjit cannot compile or run, or a wrong use of its API.

    ``code`` is the error's code (``"E1"`` .. ``"E12"``, the misuses of refs and of
    autodiff tabled in docs/api.md, "Errors"), or ``None``.
    """

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.code = code


# "FILE:LINE:COL: error: " at the start of a message about a place in jaxpr text.
_LOCATION = re.compile(r"^(?P<file>.*?):(?P<line>\d+):(?P<col>\d+): error: ")


class _Located(Error):
    """An error about a place in the jaxpr text of a traced function. ``line`` and ``col``
    locate it in ``file`` (the name refjit gave the text: ``<jaxpr of f>``), 0 when the
    error has no place; ``equation`` is that line of the text, when the package knows it."""

    def __init__(self, message: str, file: str = "", line: int = 0, col: int = 0):
        super().__init__(message)
        where = _LOCATION.match(message)
        if where and not line:
            file, line, col = where["file"], int(where["line"]), int(where["col"])
        self.file = file
        self.line = line
        self.col = col
        self.equation: str | None = None

    def __str__(self) -> str:
        if self.equation:
            return f"{self.message}\n    {self.equation.strip()}"
        return self.message


class ParseError(_Located):
    """Jaxpr text refjit cannot read: a primitive or a form it does not support, or text that
    is not a jaxpr. ``refjit.primitives()`` lists the primitives it reads."""


class TypeCheckError(_Located, builtins.TypeError):
    """A shape or dtype mismatch found by a primitive's type rule or the verifier; located
    (``line``, ``col``, ``equation``) when found while reading the traced text."""


class RefError(Error):
    """A misuse of refs or of an autodiff API; ``code`` says which (docs/api.md, "Errors")."""

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message, code)


class ReverseModeError(Error, builtins.ValueError):
    """Reverse mode (grad, vjp) through a loop whose number of iterations is known only when it
    runs (``lax.while_loop``); a ValueError, as JAX's."""


class TraceError(Error):
    """A function refjit cannot trace: its Python code needs the value of a traced array
    (control flow on array values), which a compiled function does not have."""
