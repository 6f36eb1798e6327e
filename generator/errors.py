"""Errors the generator reports to its user.

Every problem with the input is a ``SpecError``: the CLI prints it as ``file:line:column:
message`` and exits with status 2 without touching the output directory.
"""

from __future__ import annotations


class SpecError(Exception):
    """A problem in a spec or .proto file, with the place it was found when known."""

    def __init__(
        self, message: str, path: str | None = None, line: int = 0, column: int = 0
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line
        self.column = column

    def __str__(self) -> str:
        if self.path is None:
            return self.message
        if self.line:
            return f"{self.path}:{self.line}:{self.column}: {self.message}"
        return f"{self.path}: {self.message}"


class SpecErrors(Exception):
    """Several spec errors found in one pass, reported together."""

    def __init__(self, errors: list[SpecError]) -> None:
        super().__init__("\n".join(str(e) for e in errors))
        self.errors = errors


class GeneratorBug(Exception):
    """The generator produced a module that does not compile: a bug in protoframe, not in the
    spec. Nothing is written; the CLI exits with status 3 naming the spec that triggered it."""

    def __init__(self, message: str, source: str) -> None:
        super().__init__(f"{source}: {message}")
        self.message = message
        self.source = source
