"""The one line-length policy of generated Python, used by the code writer.

Long protocol names (``supports_get_partitioned_metadata_without_auto_creation``) make some
generated lines longer than the project's line limit. Rather than depend on an external
formatter whose output changes between versions, the generator applies one small, fixed rule
set: break inside the outermost brackets, one argument per line if needed, or wrap an
expression in parentheses. String literals are never split: an error message stays one
literal, moved to a line of its own when it does not fit.

``fit_line`` fits one statement whose indentation is known (the code writer's lines, a view's
lines at the depth its template prints them), ``fit_marked`` marks what it cannot shorten, and
``Lines`` collects statements fitted so; the other ``fit_*`` functions are the shapes particular
emitters ask for, kept beside the rules so that the limit and the style live in one module.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable

LIMIT = 100
INDENT = "    "


def fit_line(line: str, limit: int = LIMIT) -> list[str]:
    """``line`` (indentation included) as one or more lines no longer than ``limit``.

    A line that cannot be broken safely stays whole: a long line is a lint finding, a broken
    one a SyntaxError.
    """
    if len(line) <= limit or line.lstrip().startswith("#"):
        return [line]
    wrapped = _wrap_line(line, limit)
    return wrapped if _brackets("".join(wrapped)) == _brackets(line) is not None else [line]


def _brackets(text: str) -> tuple[str, str] | None:
    """What ``text`` leaves open: (the closing brackets it begins with that close nothing of
    its own, the opening brackets still open at its end); None if a bracket closes one of
    another kind. A wrap must leave the same, or the lines around it stop matching: counting
    alone took ``x = (`` / ``StructType([`` / ``)`` for the ``x = StructType([`` it came from.
    """
    closes, opened = "", []
    for _, ch, _ in _scan(text):
        if ch in "([{":
            opened.append(ch)
        elif not opened:
            closes += ch
        elif opened.pop() != _PAIRS[ch]:
            return None
    return closes, "".join(opened)


_PAIRS = {")": "(", "]": "[", "}": "{"}


def fit_marked(line: str, limit: int = LIMIT) -> list[str]:
    """``fit_line``, with each resulting code line still over ``limit`` marked ``# noqa: E501``.

    What no rule can shorten (a message, which is never split; a long name) is marked where it
    is written, so the lint passes and the exception is visible.
    """
    return [out + "  # noqa: E501" if len(out) > limit and "# noqa" not in out
            and not out.lstrip().startswith("#") else out for out in fit_line(line, limit)]


class Lines:
    """Lines of generated code: statements fitted as they are added, docstrings kept whole."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.in_doc = False  # inside a docstring an emitter's lines carry

    def code(self, *statements: str) -> None:
        for statement in statements:
            # A view's line may hold a statement already broken at its own depth.
            for part in statement.split("\n"):
                quotes = part.count('"""')
                self.lines += [part] if self.in_doc or quotes else fit_marked(part)
                if quotes % 2 == 1:
                    self.in_doc = not self.in_doc

    def raw(self, *text: str) -> None:
        self.lines += text

    def text(self) -> str:
        return "\n".join(self.lines)


def fit_all(statements: Iterable[str]) -> list[str]:
    """``statements``, each written with its indentation, fitted one after another."""
    out = Lines()
    out.code(*statements)
    return out.lines


def _wrap_line(line: str, limit: int, depth: int = 0) -> list[str]:
    out: list[str] = []
    for piece in _wrap_once(line, limit):
        # A piece ending in an opening bracket is the head of a wrapped line: wrapping it again
        # would separate the bracket from its contents.
        if len(piece) > limit and piece != line and depth < 4 and piece[-1] not in "([{":
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
        if len(parts) <= 1:
            if len(one) <= limit:
                lines = [one]
            elif _takes_trailing_comma(body, start, inner.strip()):
                lines = [one + ","]
            else:
                # A comprehension breaks before its `for`; anything else stays whole.
                lines = [inner_indent + x for x in _split_comprehension(inner.strip())]
        else:
            lines = [inner_indent + p.strip() + "," for p in parts if p.strip()]
        return [indent + head, *lines, indent + tail]
    if _brackets(body) != ("", ""):
        # Part of a statement that goes on over other lines (``x = StructType([``): each rule
        # below would add or split at brackets whose partners are on those lines.
        return [line]
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
        value, comma = body[eq + 1 :].strip(), ""
        if value.endswith(",") and len(_split_commas(value)) == 1:
            # A parameter or keyword argument: its comma belongs after the parentheses.
            value, comma = value[:-1].rstrip(), ","
        values = [value]
        if len(inner_indent + value) > limit:
            values = _split_conditional(value) or values
        return [indent + body[:eq] + "= (", *[inner_indent + v for v in values],
                indent + ")" + comma]
    colon = _entry_colon(body)
    if colon is not None:
        # A dict entry: the key on its own line (a long dotted name without spaces, which the
        # line limit does not count), the value below it.
        return [indent + body[: colon + 1], inner_indent + body[colon + 1 :].strip()]
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
                if not body[pos + 1 : pos2].strip():
                    break  # an empty pair: nothing to break inside it
                rest = body[pos2 + 1 :].strip()
                if rest in ("", ":", ",") or rest.startswith(("->", "from ")) or _opens(rest):
                    return pos, pos2
                break
    return None


def _opens(rest: str) -> bool:
    """``rest`` is ``= {`` (or ``[``, ``(``): the line opens a value continued below it, so
    the only place to break it is inside the brackets before the ``=``."""
    return len(rest) >= 2 and rest[0] == "=" and rest[1:].strip() in ("(", "[", "{")


def _split_commas(inner: str) -> list[str]:
    if any(word == "for" for _, word in _top_level_words(inner)):
        # A comprehension's commas are its target's (``for k, v in ...``), not a list's.
        return [inner]
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


def _takes_trailing_comma(body: str, start: int, inner: str) -> bool:
    """Whether one element between the brackets at ``start`` may have a comma after it.

    Only in a call's arguments and in a list, set or dict display: after a parenthesized
    expression it makes a tuple, in a subscript it changes the key, and after a
    comprehension it is a syntax error.
    """
    if _split_comprehension(inner) != [inner]:
        return False
    head = body[:start].rstrip()
    word = head.split(" ")[-1] if head else ""
    follows_value = bool(head) and (head[-1].isalnum() or head[-1] in "_)]") \
        and not keyword.iskeyword(word)
    return follows_value if body[start] == "(" else not follows_value


def _split_comprehension(inner: str) -> list[str]:
    """``x for y in z [if c]`` as ``x`` / ``for y in z [if c]``; anything else unchanged."""
    cut = next((pos for pos, word in _top_level_words(inner) if word == "for"), None)
    if cut is None or cut == 0:
        return [inner]
    return [inner[:cut].strip(), inner[cut:].strip()]


def _split_conditional(value: str) -> list[str] | None:
    """``a if c else b`` as three lines, ``a`` / ``if c`` / ``else b``; None for other values.

    Only for a value the caller has put in parentheses, where the line breaks are allowed.
    """
    cut = [(pos, word) for pos, word in _top_level_words(value) if word in ("if", "else")]
    if [word for _, word in cut] != ["if", "else"]:
        return None
    (at_if, _), (at_else, _) = cut
    return [value[:at_if].strip(), value[at_if:at_else].strip(), value[at_else:].strip()]


def _top_level_words(text: str) -> list[tuple[int, str]]:
    """(position, word) of each space-delimited word outside brackets and strings."""
    return [(i, text[i:].split(" ", 1)[0]) for i in _top_level(text)
            if text[i] != " " and (i == 0 or text[i - 1] == " ")]


def _entry_colon(body: str) -> int | None:
    """Index of the ``:`` of a ``key: value,`` dict entry, outside brackets and strings.

    Only a line ending in a comma qualifies: it sits inside brackets, so breaking it after
    the colon needs no parentheses (a statement-level ``name: T`` does not end in one).
    """
    if not body.endswith(",") or _assignment(body) is not None:
        return None
    if body.split(" ", 1)[0] in ("lambda", "case"):
        return None
    colon = next((i for i in _top_level(body) if body[i] == ":"), None)
    return colon if colon is not None and body[colon + 1 : colon + 2] == " " else None


def _top_level(text: str) -> list[int]:
    """Positions of the characters outside brackets and string literals (quotes excluded)."""
    out: list[int] = []
    depth = 0
    quote = ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0:
            out.append(i)
    return out


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


# ---------------------------------------------------------------------------------------------
# shapes particular emitters ask for

_CONDITIONAL_APPEND = re.compile(r"^(\s*)(\w+)\.append\((.+) if (.+) else (.+)\)$")


def fit_appends(lines: list[str], indent: int, limit: int = LIMIT) -> list[str]:
    """Fit ``x.append(a if c else b)`` where it would be too long.

    The argument goes on a line of its own, or its three parts on three lines, which compile
    to the same code; only when even that is too long does it become an if statement.
    ``indent`` is the depth (in columns) the lines will be printed at.
    """
    out: list[str] = []
    for line in lines:
        match = _CONDITIONAL_APPEND.match(line)
        if match is None or indent + len(line) <= limit:
            out.append(line)
            continue
        lead, target, then, cond, other = match.groups()
        argument = f"{lead}{INDENT}{then} if {cond} else {other}"
        if indent + len(argument) <= limit:
            out += [f"{lead}{target}.append(", argument, f"{lead})"]
            continue
        parts = [f"{lead}{INDENT}{then}", f"{lead}{INDENT}if {cond}", f"{lead}{INDENT}else {other}"]
        if all(indent + len(p) <= limit for p in parts):
            out += [f"{lead}{target}.append(", *parts, f"{lead})"]
            continue
        out += [f"{lead}if {cond}:", f"{lead}    {target}.append({then})", f"{lead}else:",
                f"{lead}    {target}.append({other})"]
    return out


def fit_expression(indent: str, head: str, expr: str, tail: str,
                   limit: int = LIMIT) -> list[str]:
    """``head expr tail`` on one line, or ``expr`` on a line of its own in parentheses.

    ``head`` ends where an expression may start (after ``=``, ``: `` or ``return``); the
    parentheses only group, so they change nothing.
    """
    one = f"{indent}{head}{expr}{tail}"
    if len(one) <= limit:
        return [one]
    call = _call_parts(expr)
    if call is not None:  # f(a, b) -> one argument per line
        callee, args = call
        lines = [f"{indent}{head}{callee}(", *[f"{indent}    {a}," for a in args],
                 f"{indent}){tail}"]
        if all(len(line) <= limit for line in lines):
            return lines
    inner = [expr]
    if len(indent) + 4 + len(expr) > limit and " if " in expr and " else " in expr:
        value, rest = expr.split(" if ", 1)
        test, other = rest.split(" else ", 1)
        inner = [value, f"if {test}", f"else {other}"]
    return [f"{indent}{head}(", *[f"{indent}    {x}" for x in inner], f"{indent}){tail}"]


def _call_parts(expr: str) -> tuple[str, list[str]] | None:
    """``expr`` as (callee, top-level arguments) when it is one call, else None."""
    match = re.match(r"[A-Za-z_][A-Za-z0-9_.]*\(", expr)
    if match is None or not expr.endswith(")"):
        return None
    args: list[str] = []
    depth, start, quote, escaped = 0, match.end(), "", False
    for i in range(match.end() - 1, len(expr)):
        ch = expr[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0 and i != len(expr) - 1:
                return None  # the call ends before the expression does
        elif ch == "," and depth == 1:
            args.append(expr[start:i].strip())
            start = i + 1
    args.append(expr[start:-1].strip())
    return expr[: match.end() - 1], [a for a in args if a]


def fit_tuple_row(row: str, indent: str, limit: int = LIMIT) -> list[str]:
    """``row`` (a parenthesized tuple) as a line ending in a comma, or one item a line."""
    line = f"{indent}{row},"
    if len(line) <= limit:
        return [line]
    items, depth, start = [], 0, 1
    for i, ch in enumerate(row):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 1:
            items.append(row[start:i].strip())
            start = i + 1
    items.append(row[start:-1].strip())
    return [f"{indent}(", *[f"{indent}{INDENT}{item}," for item in items], f"{indent}),"]
