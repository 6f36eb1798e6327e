"""Writes generated Python: indented blocks, literals, tracked imports, fitted lines.

Emitters build statements with a ``CodeWriter`` instead of concatenating strings with
hand-made indentation: ``with w.block("if pos > end:"):`` indents what it holds, ``w.line``
fits a statement to the line limit at the depth it will be printed at (``linefit``'s rules),
and ``w.uses(module, name)`` records an import where the name is emitted, so a module's import
block is rendered once, sorted, from what its code actually uses (no scanning of the text).

Literals follow one policy: strings double-quoted (``q``), bytes as ``\\x`` escapes, error
messages one literal each (``raise_line``), never split mid-phrase.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from protoframe.generator.linefit import INDENT, LIMIT, fit_line


def q(text: str) -> str:
    """A double-quoted Python string literal."""
    return json.dumps(text)


def bytes_literal(data: bytes) -> str:
    return 'b"' + "".join(f"\\x{b:02x}" for b in data) + '"'


def literal(value: object) -> str:
    """``value`` as Python source: strings and bytes by the policy above, the rest by repr."""
    if isinstance(value, str):
        return q(value)
    if isinstance(value, bytes):
        return bytes_literal(value)
    return repr(value)


def docstring(text: str, indent: str, width: int = LIMIT) -> str:
    """A triple-quoted docstring literal for ``text``, indented and wrapped for its block."""
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"').strip()
    room = max(40, width - len(indent))
    lines: list[str] = []
    for raw in text.splitlines() or [""]:
        lead = raw[: len(raw) - len(raw.lstrip())]
        hang = lead + ("    " if lead else "")
        # The first line also carries the opening quotes.
        limit = room - 3 if not lines else room
        lines += textwrap.wrap(raw, width=limit, initial_indent="", subsequent_indent=hang,
                               break_long_words=False, break_on_hyphens=False) or [""]
    if len(lines) == 1 and len(lines[0]) + 6 <= room:
        return f'"""{lines[0]}"""'
    body = "\n".join((indent + line) if line.strip() else "" for line in lines[1:])
    tail = "\n" if len(lines) > 1 else ""
    return f'"""{lines[0]}\n{body}{tail}{indent}"""'


def raise_line(exc: str, message: str, *, fmt: bool = True, extra: str = "",
               suffix: str = "") -> str:
    """``raise exc(message[, extra])[ suffix]`` with the message as one literal.

    ``message`` is an f-string body when ``fmt`` and it holds ``{``; the writer (or
    ``fit_line``) moves the literal to a line of its own when the statement is too long.
    """
    prefix = "f" if fmt and "{" in message else ""
    return f"raise {exc}({prefix}{q(message)}{extra}){suffix}"


class Imports:
    """The names a module's code uses, rendered as one sorted import block.

    Sorted as isort (ruff's ``I`` rules) sorts: sections (standard library, third party,
    protoframe, the generated package's siblings) apart by a blank line; in each, ``import``
    lines before ``from`` lines, one ``from`` line per module, modules in order, names in
    isort's order-by-type (CONSTANTS, Classes, functions); an aliased name on a line of its
    own. ``one_per_line`` names module prefixes whose names are always listed one per line,
    however few (as a formatter keeps a list with a trailing comma).
    """

    def __init__(self, one_per_line: tuple[str, ...] = ()) -> None:
        self._names: dict[str, set[str]] = {}
        self._modules: set[str] = set()
        self._one_per_line = one_per_line

    def use(self, module: str, name: str | None = None) -> None:
        """Record ``from module import name`` (``import module`` when ``name`` is None)."""
        if name is None:
            self._modules.add(module)
        else:
            self._names.setdefault(module, set()).add(name)

    def __contains__(self, module: str) -> bool:
        return module in self._names or module in self._modules

    def names(self, module: str) -> frozenset[str]:
        """The names recorded from ``module``."""
        return frozenset(self._names.get(module, ()))

    def list_one_per_line(self, module: str) -> None:
        """List ``module``'s names one per line from now on, however few."""
        self._one_per_line += (module,)

    def lines(self, limit: int = LIMIT) -> list[str]:
        """The import lines of every section, without the blank lines between sections."""
        return [line for section in self.sections(limit) for line in section]

    def block(self, limit: int = LIMIT) -> list[str]:
        """The import block: each section's lines, a blank line between sections."""
        out: list[str] = []
        for section in self.sections(limit):
            out += ([""] if out else []) + section
        return out

    def sections(self, limit: int = LIMIT) -> list[list[str]]:
        """The non-empty sections, in order, each as its sorted lines."""
        sections: list[list[str]] = [[] for _ in range(4)]
        for m in sorted(self._modules):
            sections[_section(m)].append(f"import {m}")
        for module in sorted(self._names):
            names = sorted(self._names[module], key=isort_key)
            plain = [n for n in names if " as " not in n]
            # The statements of one module in the order of their first names.
            groups = [[n] for n in names if " as " in n] + ([plain] if plain else [])
            for group in sorted(groups, key=lambda g: isort_key(g[0])):
                line = f"from {module} import {', '.join(group)}"
                if group is plain and (len(line) > limit
                                       or module.startswith(self._one_per_line)):
                    line = (f"from {module} import (\n"
                            + "".join(f"{INDENT}{n},\n" for n in plain) + ")")
                sections[_section(module)].append(line)
        return [s for s in sections if s]


def _section(module: str) -> int:
    """isort's section of ``module``: 0 standard library, 1 third party, 2 first party, 3 local."""
    if module.startswith("."):
        return 3
    top = module.split(".")[0]
    if top == "protoframe":
        return 2
    return 0 if top in sys.stdlib_module_names else 1


def isort_key(name: str) -> tuple[int, str]:
    """isort's order-by-type within one import: CONSTANTS, then Classes, then functions."""
    bare = name.split(" as ")[0]
    if bare.isupper() and len(bare) > 1:
        return (0, bare)
    if bare[:1].isupper():
        return (1, bare)
    return (2, bare)


class CodeWriter:
    """Lines of Python at a current depth; ``block`` indents, ``line`` fits to the limit."""

    def __init__(self, depth: int = 0, limit: int = LIMIT) -> None:
        self.lines: list[str] = []
        self.depth = depth
        self.limit = limit
        self.imports = Imports()

    def line(self, *statements: str) -> None:
        """Append each statement at the current depth, fitted to the line limit."""
        lead = INDENT * self.depth
        for statement in statements:
            self.lines += fit_line(lead + statement, self.limit) if statement else [""]

    def extend(self, lines: Iterable[str]) -> None:
        """Append already-formed lines (relative indentation kept) at the current depth."""
        self.line(*lines)

    def raise_(self, exc: str, message: str, *, fmt: bool = True, extra: str = "",
               suffix: str = "") -> None:
        self.line(raise_line(exc, message, fmt=fmt, extra=extra, suffix=suffix))

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        """``header`` (ending in ``:``) and, one level in, what the ``with`` body writes."""
        self.line(header)
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def uses(self, module: str, name: str | None = None) -> None:
        self.imports.use(module, name)

    def text(self) -> str:
        return "\n".join(self.lines)
