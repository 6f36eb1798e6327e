"""Conditions the compiled frame codec evaluates itself: a ``when:`` expression over integers,
lowered to a postfix program of ``vocabulary.EXPR_OPS`` words.

The C code evaluates a program on 64-bit integers and gives the whole struct to the Python
code on anything a 64-bit integer cannot do as Python's ints do (an overflow, a negative
shift): where it evaluates, the value is Python's. ``and``, ``or`` and ``not`` are taken for
their truth only, which is all a condition asks of them; both sides of ``and`` and ``or`` are
evaluated, which a program without side effects may do. ``x in (a, b)`` is ``x == a or
x == b``, and ``a < b < c`` is ``a < b and b < c``. An expression with anything else (a
parameter, ``len``, a string, ``if``/``else``) has no program and stays with the Python
codec. ``has(x)`` is a step of its own, ``has``; which names a program may read, and which of
them ``has`` may test, is the plan's business (``layout_plan.c_links_hold``).
"""

from __future__ import annotations

import ast

from protoframe.generator.expr import Expr
from protoframe.runtime.codec import vocabulary

# One step of a program: (word, argument): ("field", name), ("const", value), or an operator
# word with None.
Step = tuple[str, str | int | None]

_BINARY = {ast.BitAnd: "bitand", ast.BitOr: "bitor", ast.BitXor: "bitxor",
           ast.RShift: "rshift", ast.LShift: "lshift", ast.Add: "add", ast.Sub: "sub"}
_COMPARE = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt",
            ast.GtE: "ge"}
_LIMIT = 2**63
# The most values a program may hold at once (the C code's stack).
MAX_DEPTH = vocabulary.EXPR_MAX_DEPTH


class _NoProgram(Exception):
    pass


def program(expr: Expr) -> tuple[Step, ...] | None:
    """The postfix program of ``expr``, or None if it has no program (or one too deep)."""
    try:
        steps = tuple(_lower(expr.tree.body))
    except _NoProgram:
        return None
    return steps if depth(steps) <= MAX_DEPTH else None


def depth(steps: tuple[Step, ...]) -> int:
    """The most values ``steps`` hold on the stack at once."""
    now = most = 0
    for word, _ in steps:
        now += 1 if word in ("field", "const", "has") else 0 if word in ("not", "neg") else -1
        most = max(most, now)
    return most


def _const(node: ast.expr) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and (
            -_LIMIT <= node.value < _LIMIT):
        return int(node.value)
    raise _NoProgram


def _lower(node: ast.expr) -> list[Step]:
    match node:
        case ast.Name(id=name) if name != "len" and not name.startswith("_"):
            return [("field", name)]
        # has(x), as the expression parser spells it: x is not None.
        case ast.Compare(left=ast.Name(id=name), ops=[ast.IsNot()],
                         comparators=[ast.Constant(value=None)]):
            return [("has", name)]
        case ast.Compare(left=ast.Name(id=name), ops=[ast.Is()],
                         comparators=[ast.Constant(value=None)]):
            return [("has", name), ("not", None)]
        case ast.Constant():
            return [("const", _const(node))]
        case ast.UnaryOp(op=ast.Not(), operand=operand):
            return [*_lower(operand), ("not", None)]
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            return [*_lower(operand), ("neg", None)]
        case ast.BinOp(left=left, op=op, right=right) if type(op) in _BINARY:
            return [*_lower(left), *_lower(right), (_BINARY[type(op)], None)]
        case ast.BoolOp(op=op, values=values):
            word = "and" if isinstance(op, ast.And) else "or"
            out = _lower(values[0])
            for value in values[1:]:
                out += [*_lower(value), (word, None)]
            return out
        case ast.Compare(left=left, ops=ops, comparators=comparators):
            return _compare(left, ops, comparators)
    raise _NoProgram


def _compare(left: ast.expr, ops: list[ast.cmpop], comparators: list[ast.expr]) -> list[Step]:
    out: list[Step] = []
    for i, (op, right) in enumerate(zip(ops, comparators, strict=True)):
        here = left if i == 0 else comparators[i - 1]
        if type(op) in _COMPARE:
            step = [*_lower(here), *_lower(right), (_COMPARE[type(op)], None)]
        elif isinstance(op, ast.In | ast.NotIn) and isinstance(right, ast.Tuple | ast.List) \
                and right.elts:
            step = []
            for k, item in enumerate(right.elts):
                step += [*_lower(here), ("const", _const(item)), ("eq", None)]
                if k:
                    step.append(("or", None))
            if isinstance(op, ast.NotIn):
                step.append(("not", None))
        else:
            raise _NoProgram
        out += step
        if i:
            out.append(("and", None))
    return out
