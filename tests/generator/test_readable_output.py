"""Every generated module reads as a person would write it: the noise the generator used to
emit (numbered locals, dead checks, error messages split into several literals) cannot come
back unnoticed.

The scan covers the committed ``generated/`` tree, which ``make check`` keeps equal to what the
generator writes, so a regression in any emitter shows here.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from pathlib import Path

import pytest

from tests.support.examples import sweep

GENERATED = Path(__file__).resolve().parents[2] / "generated"
MODULES = sorted(p for p in GENERATED.rglob("*.py") if p.name != "__init__.py")

# ``f1``, ``v12``, ``item3``: a local named by a counter rather than by what it holds.
_NUMBERED = re.compile(r"[a-z]+\d+")
# ``pos + 0``, ``p - 0``: arithmetic with a zero offset.
_ZERO_OFFSET = re.compile(r"\b\w+ [+-] 0\b(?![.xob\d])")
# A region consumed to ``end`` and then checked for bytes left over after it.
_DEAD_END_CHECK = re.compile(r"^(\s*)pos = end\n\1if pos != end:", re.M)
# A length prefix read as an unsigned integer and then tested for being negative.
_UNSIGNED_NEGATIVE = re.compile(r"^(\s*)n = _U\d+(?:BE|LE)\.unpack_from\(.*\n(?:\1.*\n){0,2}"
                                r"\1.*\bn < 0\b", re.M)


@functools.cache
def _tokens(text: str) -> tuple[tokenize.TokenInfo, ...]:
    # Two scans read each module's tokens: tokenizing 90k lines twice is most of their time.
    return tuple(tokenize.generate_tokens(io.StringIO(text).readline))


@functools.cache
def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(GENERATED)) for p in paths]


def _code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside string literals (docstrings included)."""
    in_string: set[int] = set()
    for tok in _tokens(text):
        if tok.type == tokenize.STRING and tok.start[0] != tok.end[0]:
            in_string.update(range(tok.start[0] + 1, tok.end[0] + 1))
    return [(n, line) for n, line in enumerate(text.splitlines(), 1) if n not in in_string]


class _Binds(ast.NodeVisitor):
    """Names bound by assignment or ``for`` inside function bodies, by number."""

    def __init__(self) -> None:
        self.depth = 0
        self.found: set[tuple[int, str]] = set()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Name(self, node: ast.Name) -> None:
        if self.depth and isinstance(node.ctx, ast.Store) and _NUMBERED.fullmatch(node.id):
            self.found.add((node.lineno, node.id))


def _numbered_locals(text: str) -> list[str]:
    """``line: name`` for each name a function body binds by number.

    Class bodies are not scanned: enum members such as Pulsar's ``ProtocolVersion.v1`` are
    the protocol's own names. Walrus targets count too.
    """
    binds = _Binds()
    binds.visit(ast.parse(text))
    return [f"{line}: {name}" for line, name in sorted(binds.found)]


def _string_runs(text: str) -> list[int]:
    """Line numbers where one string literal is followed directly by another.

    Adjacent literals are implicitly concatenated: the generator once split long error
    messages that way, mid-phrase. f-strings tokenize as several tokens from Python 3.12 on,
    so a literal is a STRING token or an FSTRING_START ... FSTRING_END run.
    """
    fstring_start = getattr(tokenize, "FSTRING_START", None)
    fstring_end = getattr(tokenize, "FSTRING_END", None)
    skip = {tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT}
    found: list[int] = []
    previous_was_string = False
    depth = 0
    for tok in _tokens(text):
        if fstring_start is not None and tok.type == fstring_start:
            if depth == 0 and previous_was_string:
                found.append(tok.start[0])
            depth += 1
            continue
        if depth:
            if tok.type == fstring_end:
                depth -= 1
                previous_was_string = depth == 0
            continue
        if tok.type == tokenize.STRING:
            if previous_was_string:
                found.append(tok.start[0])
            previous_was_string = True
        elif tok.type not in skip:
            previous_was_string = False
    return found


def test_the_scan_sees_the_generated_tree() -> None:
    assert len(MODULES) >= 20, MODULES


@pytest.mark.parametrize("path", sweep(MODULES), ids=_ids(MODULES))
def test_no_numbered_locals(path: Path) -> None:
    bad = _numbered_locals(_read(path))
    assert not bad, "\n".join(bad[:20])


@pytest.mark.parametrize("path", sweep(MODULES), ids=_ids(MODULES))
def test_no_zero_offsets(path: Path) -> None:
    text = _read(path)
    bad = [f"{n}: {line.strip()}" for n, line in _code_lines(text)
           if _ZERO_OFFSET.search(line.split("#", 1)[0])]
    assert not bad, "\n".join(bad[:20])


@pytest.mark.parametrize("path", sweep(MODULES), ids=_ids(MODULES))
def test_no_dead_checks(path: Path) -> None:
    text = _read(path)
    bad = [m.group(0) for m in _DEAD_END_CHECK.finditer(text)]
    bad += [m.group(0) for m in _UNSIGNED_NEGATIVE.finditer(text)]
    assert not bad, "\n---\n".join(bad[:10])


@pytest.mark.parametrize("path", sweep(MODULES), ids=_ids(MODULES))
def test_each_message_is_one_literal(path: Path) -> None:
    text = _read(path)
    lines = text.splitlines()
    bad = [f"{n}: {lines[n - 1].strip()}" for n in _string_runs(text)]
    assert not bad, "\n".join(bad[:20])


def test_the_numbered_local_scan() -> None:
    source = ("def f(xs):\n    f1 = 0\n    v12: int = 1\n    for item3 in xs:\n        f_name = 2\n"
              "    return [y4 for y4 in xs]\n\n\nclass E:\n    v0 = 0\n")
    assert _numbered_locals(source) == ["2: f1", "3: v12", "4: item3", "6: y4"]


def test_the_split_literal_scan() -> None:
    split = 'raise E(\n    f"a {x} b "\n    "c"\n)\n'
    assert _string_runs(split) == [3]
    assert _string_runs('raise E(f"a {x} b c")\nx = ["a", "b"]\n') == []


def test_the_dead_check_patterns() -> None:
    assert _DEAD_END_CHECK.search("        pos = end\n        if pos != end:\n")
    assert _UNSIGNED_NEGATIVE.search(
        "    n = _U16BE.unpack_from(buf, pos)[0]\n    pos += 2\n    vend = pos + n\n"
        "    if n < 0 or vend > end:\n")
    assert not _UNSIGNED_NEGATIVE.search(
        "    n = _I32BE.unpack_from(buf, pos)[0]\n    pos += 4\n    if n < 0:\n")
    assert _ZERO_OFFSET.search("unpack_from(buf, pos + 0)[0]")
    assert not _ZERO_OFFSET.search("x = 0x10 + 0.5")
