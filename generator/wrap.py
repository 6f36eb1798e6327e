"""Wraps over-long lines of generated Python the way a person would.

Long protocol names (``supports_get_partitioned_metadata_without_auto_creation``) make some
generated lines longer than the project's line limit. Rather than depend on an external
formatter whose output changes between versions, the generator applies this small, fixed
rule set after rendering: break inside the outermost brackets, one argument per line if
needed, or wrap an expression in parentheses.
"""

from __future__ import annotations

LIMIT = 100


def wrap_source(text: str, limit: int = LIMIT) -> str:
    """Return ``text`` with every code line longer than ``limit`` broken up."""
    out: list[str] = []
    in_doc = False
    for line in text.split("\n"):
        quotes = line.count('"""')
        if in_doc or quotes or len(line) <= limit or line.lstrip().startswith("#"):
            if quotes % 2 == 1:
                in_doc = not in_doc
            out.append(line)
            continue
        out.extend(_wrap_line(line, limit))
    return "\n".join(out)


def _wrap_line(line: str, limit: int, depth: int = 0) -> list[str]:
    out: list[str] = []
    for piece in _wrap_once(line, limit):
        if len(piece) > limit and piece != line and depth < 4:
            out.extend(_wrap_line(piece, limit, depth + 1))
        else:
            out.append(piece)
    return out


def _wrap_once(line: str, limit: int) -> list[str]:
    indent = line[: len(line) - len(line.lstrip())]
    body = line.strip()
    inner_indent = indent + "    "
    span = _outer_brackets(body)
    if span is not None:
        start, end = span
        head, inner, tail = body[: start + 1], body[start + 1 : end], body[end:]
        parts = _split_commas(inner)
        one = inner_indent + inner.strip()
        if len(one) <= limit and len(parts) <= 1:
            lines = [one]
        else:
            lines = [inner_indent + p.strip() + "," for p in parts if p.strip()]
        return [indent + head, *lines, indent + tail]
    parts = _split_commas(body.rstrip(","))
    statement = body.endswith(":") or body.split(" ", 1)[0] in (
        "for", "if", "elif", "while", "with", "def", "class", "return", "raise", "assert", "del",
        "import", "from", "yield", "lambda")
    if len(parts) > 1 and _assignment(body) is None and not statement:
        # A continuation line holding several arguments: one per line.
        return [indent + p.strip() + "," for p in parts]
    for prefix in ("return ", "raise "):
        if body.startswith(prefix):
            return [indent + prefix + "(", inner_indent + body[len(prefix):], indent + ")"]
    eq = _assignment(body)
    if eq is not None:
        return [indent + body[:eq] + "= (", inner_indent + body[eq + 1 :].strip(), indent + ")"]
    return [line]


def _scan(text: str) -> list[tuple[int, str, int]]:
    """(position, bracket character, depth before it) for brackets outside string literals."""
    found: list[tuple[int, str, int]] = []
    depth = 0
    quote = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            found.append((i, ch, depth))
            depth += 1
        elif ch in ")]}":
            depth -= 1
            found.append((i, ch, depth))
        i += 1
    return found


def _outer_brackets(body: str) -> tuple[int, int] | None:
    """The first depth-0 bracket pair that closes at the end of the line (before ``:``)."""
    brackets = _scan(body)
    for i, (pos, ch, depth) in enumerate(brackets):
        if depth != 0 or ch not in "([{":
            continue
        for pos2, ch2, depth2 in brackets[i + 1 :]:
            if depth2 == 0 and ch2 in ")]}":
                rest = body[pos2 + 1 :].strip()
                if rest in ("", ":", ",") or rest.startswith(("->", "from ")):
                    return pos, pos2
                break
    return None


def _split_commas(inner: str) -> list[str]:
    depth = 0
    quote = ""
    parts: list[str] = []
    start = 0
    i = 0
    while i < len(inner):
        ch = inner[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
        i += 1
    parts.append(inner[start:])
    return [p for p in parts if p.strip()]


def _assignment(body: str) -> int | None:
    """Index of the ``=`` of a simple assignment, outside brackets and strings."""
    depth = 0
    quote = ""
    for i, ch in enumerate(body):
        if quote:
            if ch == quote:
                quote = ""
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "=" and depth == 0 and body[i - 1] not in "=!<>+-*/" and body[i + 1] != "=":
            return i
    return None
