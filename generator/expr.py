"""The small expression language of specs (conditions, counts, computed values, guards).

An expression is Python syntax restricted to integer arithmetic, bit operations,
comparisons, boolean logic, ``len(...)``, conditional expressions, (dotted) references to
fields decoded earlier, and presence tests of optional fields (``has(x)``, which is
``x is not None``, and ``x is None``). It is parsed once with ``ast``, checked against the
names in scope, and rendered into generated code with each name replaced by the local variable
that holds it.
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
    ast.Attribute, ast.Call, ast.IfExp, ast.Tuple, ast.List, ast.Is, ast.IsNot,
)


class ExprError(Exception):
    """An expression that is not valid in the spec language; the message says why."""


@dataclass(frozen=True)
class Expr:
    """A parsed, validated expression."""

    text: str
    tree: ast.Expression

    @property
    def presence_names(self) -> list[str]:
        """Names the expression tests for presence (``x is None``, ``has(x)``)."""
        return [node.left.id for node in ast.walk(self.tree)
                if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.Is | ast.IsNot)
                and isinstance(node.left, ast.Name)]

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
    tree = _Presence(source).visit(tree)
    tested: set[int] = set()  # the None of each presence test
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(isinstance(op, ast.Is | ast.IsNot)
                                                 for op in node.ops):
            if not (len(node.ops) == 1 and isinstance(node.left, ast.Name)
                    and isinstance(node.comparators[0], ast.Constant)
                    and node.comparators[0].value is None):
                raise ExprError(f"'is' only tests a field for None (x is None, x is not "
                                f"None) in {source!r}")
            tested.add(id(node.comparators[0]))
        elif isinstance(node, ast.Constant) and node.value is None and id(node) not in tested:
            raise ExprError(f"None is only allowed in 'x is None' or 'x is not None' in "
                            f"{source!r}")
        if not isinstance(node, _ALLOWED):
            raise ExprError(f"{type(node).__name__} is not allowed in expression {source!r}")
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = _char(source, node)
        if isinstance(node, ast.Constant) and not isinstance(node.value, int | None):
            raise ExprError(f"only integer and boolean constants are allowed in {source!r}")
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id == "len" and len(node.args) == 1
            and not node.keywords
        ):
            raise ExprError(f"only len(x) may be called in {source!r}")
    return Expr(source, tree)


class _Presence(ast.NodeTransformer):
    """``has(x)`` as ``x is not None``, the one form the rest of the generator reads."""

    def __init__(self, source: str) -> None:
        self.source = source

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if not (isinstance(node.func, ast.Name) and node.func.id == "has"):
            return self.generic_visit(node)
        if len(node.args) != 1 or node.keywords or not isinstance(node.args[0], ast.Name):
            raise ExprError(f"has() takes one field name, in {self.source!r}")
        test = ast.Compare(left=node.args[0], ops=[ast.IsNot()],
                           comparators=[ast.Constant(value=None)])
        return ast.copy_location(test, node)


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
