"""What the protocol page's sections share: Markdown text helpers and the .proto names.

Table cells, code spans, links to layout anchors, expressions and case values are written
the same way in every section; Mermaid labels go through ``mermaid_text``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from protoframe.generator.expr import Expr
from protoframe.generator.ir import Protocol


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]


class ProtoNames:
    """Message names as the .proto declares them (without the package)."""

    def __init__(self, protocol: Protocol) -> None:
        self.names: dict[str, str] = {}
        for proto in protocol.files:
            prefix = proto.package + "." if proto.package else ""
            for msg in proto.all_messages():
                self.names[msg.full_name] = msg.full_name.removeprefix(prefix)
            for enum in proto.all_enums():
                self.names[enum.full_name] = enum.full_name.removeprefix(prefix)

    def __call__(self, full_name: str) -> str:
        return self.names.get(full_name, full_name)


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def code(text: str) -> str:
    return f"`{text}`"


def expr_text(e: Expr) -> str:
    """An expression as the spec writes it, on one line (canonical form if it has a comment)."""
    if "#" in e.text:
        return ast.unparse(e.tree)
    return " ".join(e.text.split())


def join(items: Iterable[str]) -> str:
    return ", ".join(items)


def link(name: str, anchors: dict[str, str]) -> str:
    return f"[`{name}`](#{anchors[name]})"


def case_value(value: int, width: int, literal: str = "") -> str:
    """A case value in decimal and hex (negative ones as ``width``-byte two's complement); one
    the spec wrote as a character literal as it wrote it, with its hex."""
    if literal:
        shown = f"`` {literal} ``" if "`" in literal else f"`{literal}`"  # '`' in Markdown
        return f"{shown} (`{value:#04x}`)"
    if value >= 0:
        return f"{value} (`{value:#04x}`)"
    if width == 0:
        return str(value)
    return f"{value} (`0x{value & ((1 << 8 * width) - 1):0{2 * width}x}`)"


def mermaid_text(text: str) -> str:
    """Label text Mermaid accepts: its lexers stop at ``;`` and read ``#`` as a comment."""
    return text.replace(";", ",").replace("#", " ")

