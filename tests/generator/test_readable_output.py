"""Every generated module reads as a person would write it: the noise the generator used to
emit (numbered locals, locals never read, dead checks, error messages split into several
literals) cannot come back unnoticed.

The scan covers the committed ``generated/`` tree, which ``make check`` keeps equal to what the
generator writes, so a regression in any emitter shows here.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

from protoframe.generator.build import generate
from protoframe.generator.output import write_files
from protoframe.runtime.errors import SizeMismatchError, TruncatedError
from tests.support.examples import sweep
from tests.support.generate import import_generated

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

# `value:` fields, written on encode and not stored: `n_data` is read again on decode (by the
# conditions), the others are not (`half` has no bytes: decoding would derive it).
VALUE_FIELDS = """\
protocol: vf
structs:
  Item:
    fields:
      - {name: length, type: u16, value: "4 + len(data)"}
      - {name: tag, type: varint, value: "300"}
      - {name: data, type: bytes, prefix: u8}
      - {name: n_data, type: u8, value: "len(data)"}
      - {name: marker, type: u8, value: "9", when: "n_data > 0"}
      - {name: half, type: u8, value: "len(data) >> 1", derive: "n_data >> 1"}
      - {name: extra, type: u8, when: "n_data > 1"}
frame:
  name: Frame
  fields:
    - {name: size, type: u32, size_of: rest}
    - {name: item, type: struct, struct: Item}
"""


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


def _own_nodes(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.AST]:
    """The nodes of ``function``'s own scope: nested functions and classes are not entered."""
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
                          | ast.ClassDef):
            stack.extend(ast.iter_child_nodes(node))


def _unread_locals(text: str) -> list[str]:
    """``line: function: name`` for each name a function binds and never reads.

    A read anywhere in the function counts, nested functions included (a closure reads it);
    ``x += y`` reads ``x``; ``_`` is the name for what is thrown away. Unlike ruff's F841, an
    unused name from tuple unpacking, a ``for`` target or an ``except ... as`` counts too.
    """
    found: list[tuple[int, str, str]] = []
    for function in ast.walk(ast.parse(text)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        bound: dict[str, int] = {}
        declared: set[str] = set()
        for node in _own_nodes(function):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.setdefault(node.id, node.lineno)
            elif isinstance(node, ast.ExceptHandler) and node.name is not None:
                bound.setdefault(node.name, node.lineno)
            elif isinstance(node, ast.Global | ast.Nonlocal):
                declared.update(node.names)
        read = {node.id for node in ast.walk(function)
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load | ast.Del)}
        read |= {node.target.id for node in ast.walk(function)
                 if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name)}
        found += [(line, function.name, name) for name, line in bound.items()
                  if name != "_" and name not in read and name not in declared]
    return [f"{line}: {function}: {name}" for line, function, name in sorted(found)]


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
def test_no_locals_bound_and_never_read(path: Path) -> None:
    bad = _unread_locals(_read(path))
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


def test_the_unread_local_scan() -> None:
    source = (
        "def f(buf, out, xs, *, k, v=0):\n"
        "    f_a, f_b = 1, 2\n"          # f_b is never read
        "    f_c = buf[0]\n"             # never read
        "    out += b'x'\n"              # the parameter, extended in place
        "    for item in xs:\n"          # never read
        "        _ = 3\n"
        "    try:\n"
        "        pass\n"
        "    except ValueError as exc:\n"  # never read
        "        pass\n"
        "    n = 0\n"
        "    def g():\n"
        "        return n\n"              # read by the closure
        "    return f_a, g\n"
        "\n"
        "\n"
        "def h():\n"
        "    global T\n"
        "    T = 1\n"
        "    total = 0\n"
        "    total += 1\n"
        "    return [y for y in range(3)]\n"
    )
    assert _unread_locals(source) == ["2: f: f_b", "3: f: f_c", "5: f: item", "9: f: exc"]


def test_a_value_field_nothing_reads_is_stepped_over(tmp_path: Path) -> None:
    """A ``value:`` field is written on encode and neither stored nor checked on decode: when
    no later expression names it, the decoder skips its bytes instead of binding a local."""
    spec = tmp_path / "specs" / "vf"
    spec.mkdir(parents=True)
    (spec / "vf.yaml").write_text(VALUE_FIELDS)
    out = generate(tmp_path / "specs", "specs", ["vf"])
    assert _unread_locals(out.files["vf/frames.py"]) == []
    write_files(tmp_path / "vfpkg", out.files, out.protocols)
    Item = import_generated(tmp_path, "vf.frames", "vfpkg").Item
    wire = Item(data=b"ab", extra=7).encode()
    # length (u16), tag (varint 300), data (u8 prefix), n_data, marker, extra
    assert wire == b"\x00\x06\xac\x02\x02ab\x02\x09\x07"
    assert Item.decode(wire) == Item(data=b"ab", extra=7)
    # Without data neither the marker nor extra is there; n_data, read again, says so.
    assert Item.decode(b"\x00\x04\xac\x02\x00\x00") == Item(data=b"")
    # A field stepped over still needs its bytes, and says whose they are.
    with pytest.raises(SizeMismatchError, match="Item.length: needs 2 more bytes"):
        Item.decode(b"\x00")
    with pytest.raises(TruncatedError, match="Item.tag"):
        Item.decode(b"\x00\x06\xac")
    with pytest.raises(SizeMismatchError, match="Item.marker: needs 1 more bytes"):
        Item.decode(b"\x00\x06\xac\x02\x02ab\x02")


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
