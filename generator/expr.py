"""The small expression language of specs (conditions, counts, computed values, guards).

An expression is Python syntax restricted to integer arithmetic, bit operations,
comparisons, boolean logic, ``len(...)``, conditional expressions and (dotted) references to
fields decoded earlier. It is parsed once with ``ast``, checked against the names in scope, and
rendered into generated code with each name replaced by the local variable that holds it.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from protoframe.generator.literals import LiteralError, char_code, is_char_literal

_ALLOWED = (
    ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.BinOp, ast.Add, ast.Sub, ast.Mult,
    ast.FloorDiv, ast.Mod, ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift,
    ast.UnaryOp, ast.Not, ast.USub, ast.Invert, ast.Compare, ast.Eq, ast.NotEq, ast.Lt,
    ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn, ast.Name, ast.Load, ast.Constant,
    ast.Attribute, ast.Call, ast.IfExp, ast.Tuple, ast.List,
)


class ExprError(Exception):
    """An expression that is not valid in the spec language; the message says why."""


@dataclass(frozen=True)
class Expr:
    """A parsed, validated expression."""

    text: str
    tree: ast.Expression

    @property
    def names(self) -> list[str]:
        """Top-level names the expression refers to, in order of appearance."""
        seen: list[str] = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and node.id not in seen and node.id != "len":
                seen.append(node.id)
        return seen

    def render(self, resolve: Callable[[str], str], parens: bool = True) -> str:
        """Python source for the expression, each name replaced by ``resolve(name)``."""
        tree = _Rename(resolve).visit(_copy(self.tree))
        text = ast.unparse(tree)
        return f"({text})" if parens else text


def parse(text: str | int | bool) -> Expr:
    """Parse and check an expression; raise ``ExprError`` when it leaves the language."""
    source = str(text).strip()
    try:
        with warnings.catch_warnings():
            # Python warns of an escape it does not know ('\q'); _char reports it instead.
            warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
            tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"invalid expression {source!r}: {exc.msg}") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise ExprError(f"{type(node).__name__} is not allowed in expression {source!r}")
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = _char(source, node)
        if isinstance(node, ast.Constant) and not isinstance(node.value, int):
            raise ExprError(f"only integer and boolean constants are allowed in {source!r}")
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id == "len" and len(node.args) == 1
            and not node.keywords
        ):
            raise ExprError(f"only len(x) may be called in {source!r}")
    return Expr(source, tree)


def _char(source: str, node: ast.Constant) -> int:
    """The byte a character literal in an expression stands for (as written, not as Python
    reads it: ``'\\u00e9'`` and ``"D"`` are not literals of the spec language)."""
    written = ast.get_source_segment(source, node) or ""
    if not is_char_literal(written):
        raise ExprError(f"strings are not allowed in {source!r}; a character literal ('D') "
                        "stands for its byte")
    try:
        return char_code(written)
    except LiteralError as exc:
        raise ExprError(f"{exc}, in {source!r}") from None


def _copy(tree: ast.Expression) -> ast.Expression:
    return ast.parse(ast.unparse(tree), mode="eval")


class _Rename(ast.NodeTransformer):
    def __init__(self, resolve: Callable[[str], str]) -> None:
        self.resolve = resolve

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == "len":
            return node
        return ast.copy_location(ast.Name(id=self.resolve(node.id), ctx=ast.Load()), node)
