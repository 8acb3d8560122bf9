"""The exceptions refjit raises. Every one derives from :class:`refjit.Error`."""

from __future__ import annotations

import builtins


class Error(Exception):
    """A program refjit cannot compile or run, or a wrong use of its API.

    ``code`` is the error's code (``"E1"`` .. ``"E12"``, the misuses of refs and of
    autodiff tabled in docs/api.md, "Errors"), or ``None``.
    """

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.code = code


class ParseError(Error):
    """Jaxpr text refjit cannot read. ``line`` and ``col`` locate the offending token in
    ``file`` (the name refjit gave the traced function's text); ``equation`` is that line of
    the text, when the package knows it."""

    def __init__(self, message: str, file: str = "", line: int = 0, col: int = 0):
        super().__init__(message)
        self.file = file
        self.line = line
        self.col = col
        self.equation: str | None = None

    def __str__(self) -> str:
        if self.equation:
            return f"{self.message}\n    {self.equation.strip()}"
        return self.message


class TypeCheckError(Error, builtins.TypeError):
    """A shape or dtype mismatch found by a primitive's type rule or the verifier."""


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
