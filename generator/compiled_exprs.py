"""Conditions the compiled frame codec evaluates itself: a ``when:`` expression over integers,
lowered to a postfix program of ``vocabulary.EXPR_OPS`` words.

The C code evaluates a program on 64-bit integers and gives the whole struct to the Python
code on anything a 64-bit integer cannot do as Python's ints do (an overflow, a negative
shift): where it evaluates, the value is Python's. ``and``, ``or`` and ``not`` are taken for
their truth only, which is all a condition asks of them; both sides of ``and`` and ``or`` are
evaluated, which a program without side effects may do. ``x in (a, b)`` is ``x == a or
x == b``, and ``a < b < c`` is ``a < b and b < c``. An expression with anything else (a
parameter, ``len``, a string, a presence test, ``if``/``else``) has no program and stays with
the Python codec (an integer attribute of an earlier field's message, ``header.status``, has
one for the rows that ask for it); which names a program may read is the plan's business
(``layout_plan.c_links_hold``). ``has(x)`` (``x is not None``) is a step of its own,
``has``, outside the extended programs; which names ``has`` may test is the plan's business too.

``program(expr, extended=True)`` lowers for the rows TANK brought (guards, values, derived
fields, arguments), which give values and not only truths: ``and``/``or`` are ``andv``/``orv``
(one of their values, as Python gives), ``a if c else b`` is ``select`` (both branches
evaluated), and ``_index`` is ``index``. Its names are fields or params; the table writer
(``frame_layouts``) turns a param's name into its number.
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


def program(expr: Expr, extended: bool = False, attributes: bool = False,
            presence: bool = False) -> tuple[Step, ...] | None:
    """The postfix program of ``expr``, or None if it has no program (or one too deep).

    ``attributes``: ``name.attr`` (an attribute of an earlier field's message) is an ``attr``
    step and ``len(name)`` (of earlier bytes) a ``len`` step, which only the guarded rows
    (``guard_program``) evaluate; otherwise such an expression has no program.
    ``presence`` (with ``extended``): ``has(name)`` and ``len(name)`` are ``has`` and ``len``
    steps, for the programs run on encode only (``value:`` of a value or bit field row),
    where every stored field is there, and for a guard's condition (of earlier fields only:
    ``layout_plan.programs_hold``)."""
    try:
        steps = tuple(_Lowering(extended, attributes, presence).lower(expr.tree.body))
    except _NoProgram:
        return None
    return steps if depth(steps) <= MAX_DEPTH else None


def guard_program(expr: Expr) -> tuple[Step, ...] | None:
    """The program of a guarded row's condition: ``attr`` and ``len`` steps allowed."""
    return program(expr, attributes=True)


def depth(steps: tuple[Step, ...], start: int = 0) -> int:
    """The most values ``steps`` hold on the stack at once (``start`` there before)."""
    now = most = start
    for word, _ in steps:
        now += _EFFECT.get(word, -1)
        most = max(most, now)
    return most


# How many values a step adds to the stack (the binary operators, not listed, take one away).
_EFFECT = {"field": 1, "const": 1, "attr": 1, "len": 1, "has": 1, "param": 1, "index": 1, "not": 0,
           "neg": 0, "select": -2}


def _const(node: ast.expr) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and (
            -_LIMIT <= node.value < _LIMIT):
        return int(node.value)
    raise _NoProgram


class _Lowering:
    """Lowers one expression; ``extended`` and ``attributes`` as for :func:`program`."""

    def __init__(self, extended: bool, attributes: bool = False,
                 presence: bool = False) -> None:
        self.extended = extended
        self.attributes = attributes
        self.presence = presence and extended

    def lower(self, node: ast.expr) -> list[Step]:
        lower = self.lower
        match node:
            case ast.Name(id="_index") if self.extended:
                return [("index", None)]
            case ast.Name(id=name) if name != "len" and not name.startswith("_"):
                return [("field", name)]
            # has(x), as the expression parser spells it: x is not None.
            case ast.Compare(left=ast.Name(id=name), ops=[ast.IsNot()],
                             comparators=[ast.Constant(value=None)]) if (
                    not self.extended or self.presence):
                return [("has", name)]
            case ast.Compare(left=ast.Name(id=name), ops=[ast.Is()],
                             comparators=[ast.Constant(value=None)]) if (
                    not self.extended or self.presence):
                return [("has", name), ("not", None)]
            case ast.Attribute(value=ast.Name(id=name), attr=attr) if (
                    self.attributes and name != "len" and not name.startswith("_")
                    and not attr.startswith("_")):
                return [("attr", f"{name}.{attr}")]
            case ast.Call(func=ast.Name(id="len"), args=[ast.Name(id=name)], keywords=[]) if (
                    (self.attributes or self.presence) and not name.startswith("_")):
                return [("len", name)]
            case ast.Constant():
                return [("const", _const(node))]
            case ast.UnaryOp(op=ast.Not(), operand=operand):
                return [*lower(operand), ("not", None)]
            case ast.UnaryOp(op=ast.USub(), operand=operand):
                return [*lower(operand), ("neg", None)]
            case ast.BinOp(left=left, op=op, right=right) if type(op) in _BINARY:
                return [*lower(left), *lower(right), (_BINARY[type(op)], None)]
            case ast.IfExp(body=then, test=test, orelse=orelse) if self.extended:
                return [*lower(then), *lower(test), *lower(orelse), ("select", None)]
            case ast.BoolOp(op=op, values=values):
                word = "and" if isinstance(op, ast.And) else "or"
                if self.extended:
                    word += "v"  # the value Python gives, not only its truth
                out = lower(values[0])
                for value in values[1:]:
                    out += [*lower(value), (word, None)]
                return out
            case ast.Compare(left=left, ops=ops, comparators=comparators):
                return self.compare(left, ops, comparators)
        raise _NoProgram

    def compare(self, left: ast.expr, ops: list[ast.cmpop],
                comparators: list[ast.expr]) -> list[Step]:
        """A comparison (chained ones are joined by ``and``; each part gives 0 or 1, so by
        truth or by value it is the same)."""
        lower = self.lower
        out: list[Step] = []
        for i, (op, right) in enumerate(zip(ops, comparators, strict=True)):
            here = left if i == 0 else comparators[i - 1]
            if type(op) in _COMPARE:
                step = [*lower(here), *lower(right), (_COMPARE[type(op)], None)]
            elif isinstance(op, ast.In | ast.NotIn) and isinstance(right, ast.Tuple | ast.List) \
                    and right.elts:
                step = []
                for k, item in enumerate(right.elts):
                    step += [*lower(here), ("const", _const(item)), ("eq", None)]
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
