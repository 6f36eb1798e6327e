"""Values of a route's ``set:`` worked out when the frame is built: ``{expr: <expression>}``.

A routed command's builder (``frame_of_<command>(body, *, <frame fields>)`` in ``machines.py``)
knows two things a constant cannot: the command's ``body`` and the builder's arguments, the
frame's data fields nothing sets (a serial number). An expression over them, in the spec's
expression language, is what a sender writes into the field: ``body.<path>`` through the
body's struct or protobuf fields (by ``.proto`` name), and the arguments by field name. The
expression's type is worked out from the fields it names and must suit the target (an integer
field takes an integer or a bool, a bool field a bool, a string field a string); protobuf
enum targets take constants only (a value name). Decoding does not check these values, as it
does not check constants.

Validation (``check``) and the machines emitter (``render``) resolve names the same way, here.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable

from protoframe.generator.frame_ir import (
    BoolField,
    BytesField,
    FrameField,
    IntField,
    ProtoField,
    StringField,
    StructDef,
    StructField,
    VarintField,
)
from protoframe.generator.ir import Field, MessageType, Presence
from protoframe.generator.spec_ir import Assignment, Route, RoutedCommand

BODY = "body"

_PROTO_INTS = frozenset({"int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32",
                         "fixed64", "sfixed32", "sfixed64", "enum"})


class _Refused(Exception):
    """Why an expression cannot be a ``set:`` value."""


def body_of(route: Route, cmd: RoutedCommand) -> tuple[StructDef | None, MessageType | None]:
    """What ``body`` is in ``cmd``'s builder: the payload's message, or the route's part."""
    if route.payload is not None:
        return None, cmd.message
    return route.part.struct, route.part.message


def check(a: Assignment, route: Route, cmd: RoutedCommand) -> str | None:
    """Why the expression of ``a`` cannot be written into its target by ``cmd``'s builder
    (None when it can)."""
    assert a.expr is not None
    params = {f.name: f for f in cmd.params}
    struct, message = body_of(route, cmd)
    try:
        kind = _kind(a.expr.tree.body, struct, message, params)
    except _Refused as exc:
        return f"set: {a.expr.text!r}: {exc} (in {cmd.name}'s builder)"
    wanted = target_kind(a)
    fits = kind == wanted or wanted == "int" and kind == "bool"
    if not fits:
        return (f"set: {a.expr.text!r} gives {_kind_text(kind)}, but {a.path.text!r} holds "
                f"{_kind_text(wanted)} (in {cmd.name}'s builder)")
    return None


def target_kind(a: Assignment) -> str:
    """What a ``set:`` path's field holds: int, bool, str, or other."""
    last = a.path.last
    if last.proto_field is not None:
        return _proto_kind(last.proto_field)
    return _frame_kind(last.frame_field)


def render(a: Assignment, route: Route, cmd: RoutedCommand,
           params: Callable[[FrameField], str]) -> str:
    """The expression of ``a`` as Python in ``cmd``'s builder (validated by ``check``)."""
    assert a.expr is not None
    struct, message = body_of(route, cmd)
    by_name = {f.name: f for f in cmd.params}
    tree = copy.deepcopy(a.expr.tree)

    class Rewrite(ast.NodeTransformer):
        def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
            chain = _chain(node)
            if chain is None or chain[0] != BODY:
                return self.generic_visit(node)
            new: ast.expr = ast.Name(id=BODY, ctx=ast.Load())
            for attr in _walk(chain[1:], struct, message)[0]:
                new = ast.Attribute(value=new, attr=attr, ctx=ast.Load())
            return new

        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id in by_name:
                return ast.Name(id=params(by_name[node.id]), ctx=ast.Load())
            return node

    return ast.unparse(Rewrite().visit(tree))


def _chain(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; None for anything else."""
    out: list[str] = []
    while isinstance(node, ast.Attribute):
        out.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(out)]


def _walk(chain: list[str], struct: StructDef | None,
          message: MessageType | None) -> tuple[list[str], str]:
    """The Python attributes of ``body.<chain>`` and the kind of what it ends at."""
    attrs: list[str] = []
    kind = "other"
    for name in chain:
        if struct is not None:
            f = struct.field(name)
            if f is None or f.computed:
                raise _Refused(f"{name!r} is not a data field of {struct.name}")
            if f.optional or f.nullable:
                raise _Refused(f"{name!r} may be None")
            attrs.append(name)
            kind = _frame_kind(f)
            struct = f.struct if isinstance(f, StructField) else None
            message = f.message if isinstance(f, ProtoField) else None
        elif message is not None:
            pf = next((x for x in message.fields if x.proto_name == name), None)
            if pf is None:
                raise _Refused(f"{message.proto_name} has no field {name!r}")
            if pf.presence not in (Presence.REQUIRED, Presence.IMPLICIT):
                raise _Refused(f"{message.proto_name}.{name} may be unset")
            attrs.append(pf.py_name)
            kind = _proto_kind(pf)
            struct, message = None, pf.type.message
        else:
            raise _Refused(f"{name!r}: what comes before it has no fields")
    return attrs, kind


def _kind(node: ast.expr, struct: StructDef | None, message: MessageType | None,
          params: dict[str, FrameField]) -> str:
    """The kind of value ``node`` gives: int, bool, str, bytes or other."""
    def kind(n: ast.expr) -> str:
        return _kind(n, struct, message, params)

    match node:
        case ast.Constant(value=bool()):
            return "bool"
        case ast.Constant(value=int()):
            return "int"
        case ast.Attribute():
            chain = _chain(node)
            if chain is None or chain[0] != BODY:
                raise _Refused("only body.<field> paths can be looked into")
            return _walk(chain[1:], struct, message)[1]
        case ast.Name(id=name):
            if name == BODY:
                raise _Refused("body is the whole body; name one of its fields, body.<field>")
            if name not in params:
                raise _Refused(f"{name!r} is neither body.<field> nor an argument of the "
                               f"builder ({', '.join(sorted(params)) or 'it takes none'})")
            return _frame_kind(params[name])
        case ast.Call(args=[arg]):  # len(x), the only call
            if kind(arg) not in ("str", "bytes", "other"):
                raise _Refused("len() takes a string, bytes or a list")
            return "int"
        case ast.UnaryOp(op=ast.Not(), operand=operand):
            kind(operand)
            return "bool"
        case ast.Compare(left=left, comparators=rest):
            for n in [left, *rest]:
                kind(n)
            return "bool"
        case ast.BoolOp(values=values):
            kinds = {kind(n) for n in values}
            return "bool" if kinds == {"bool"} else _or_kind(kinds)
        case ast.Tuple(elts=items) | ast.List(elts=items):  # what ``in`` tests against
            for n in items:
                kind(n)
            return "other"
        case ast.UnaryOp(operand=operand):
            _numeric(kind(operand))
            return "int"
        case ast.BinOp(left=left, right=right):
            _numeric(kind(left))
            _numeric(kind(right))
            return "int"
        case ast.IfExp(body=yes, orelse=no):
            kind(node.test)
            a, b = kind(yes), kind(no)
            if a == b:
                return a
            if {a, b} == {"int", "bool"}:
                return "int"
            raise _Refused(f"its branches give {_kind_text(a)} and {_kind_text(b)}")
    raise _Refused("cannot tell what it gives")


def _or_kind(kinds: set[str]) -> str:
    """What ``a and b`` / ``a or b`` gives: one of its operands."""
    if kinds <= {"int", "bool"}:
        return "int"
    if len(kinds) == 1:
        return kinds.pop()
    raise _Refused(f"its operands give {' and '.join(sorted(_kind_text(k) for k in kinds))}")


def _numeric(kind: str) -> None:
    if kind not in ("int", "bool"):
        raise _Refused(f"arithmetic on {_kind_text(kind)}")


def _frame_kind(f: FrameField | None) -> str:
    if f is not None and f.bit_of is not None and f.bit_of.enum is not None:
        return "other"  # an IntEnum of the spec: set by constants only
    if isinstance(f, IntField | VarintField):
        return "int"
    if isinstance(f, BoolField):
        return "bool"
    if isinstance(f, StringField):
        return "str"
    if isinstance(f, BytesField):
        return "bytes"
    return "other"


def _proto_kind(pf: Field) -> str:
    kind = pf.type.kind
    if kind in _PROTO_INTS - {"enum"}:
        return "int"
    return {"bool": "bool", "string": "str", "bytes": "bytes"}.get(kind, "other")


def _kind_text(kind: str) -> str:
    return {"int": "an integer", "bool": "a bool", "str": "a string",
            "bytes": "bytes"}.get(kind, "a value of another type")
