"""What the frame emitters share: the emitting context and the helpers both codecs use.

Expressions are rendered twice, once per direction. On decode a field name is the local
``f_<name>`` holding what was read (or derived); on encode a data field is ``self.<name>`` and a
computed field is the local ``v_<name>`` once the encoder has worked it out. Params are keyword
arguments of both methods; ``_index`` is the position of an array element.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from dataclasses import dataclass, field

from protoframe.generator.codewriter import Imports, raise_line
from protoframe.generator.errors import GeneratorBug
from protoframe.generator.expr import Expr
from protoframe.generator.frame_checks import path_attrs
from protoframe.generator.frame_ir import (
    ArrayField,
    BlocksField,
    BoolField,
    BytesField,
    FloatField,
    FrameField,
    IntField,
    ProtoField,
    StringField,
    StructDef,
    StructField,
    SwitchField,
    UuidField,
    VarintField,
    nested_struct,
)
from protoframe.generator.layout_ops import FieldOp, IntShape, IntType, KindOp, int_shape
from protoframe.generator.layout_plan import SpecPlans
from protoframe.generator.runtime_modules import INT24
from protoframe.generator.spec_ir import FrameSpec

_STRUCT_CODES = {(1, False): "B", (2, False): "H", (4, False): "I", (8, False): "Q",
                 (1, True): "b", (2, True): "h", (4, True): "i", (8, True): "q"}


@dataclass
class EmitContext:
    spec: FrameSpec
    plans: SpecPlans  # each struct's layout plan, which both codecs follow
    packers: dict[str, str] = field(default_factory=dict)
    # Every name the module's code uses, declared by the emitter that writes it.
    imports: Imports = field(default_factory=Imports)
    tables: list[str] = field(default_factory=list)  # module-level tables after the classes
    runs: set[str] = field(default_factory=set)  # structs read by decode_run (see _run_structs)

    def packer(self, width: int, signed: bool, order: str) -> str:
        """The module-level codec of a fixed-width integer (a ``Struct``, or an ``Int24``
        with the same methods for the 3-byte widths ``struct`` lacks); ``packers`` maps each
        name to the expression that builds it."""
        endian = "<" if order == "little" else ">"
        name = f"_{'I' if signed else 'U'}{width * 8}{'LE' if order == 'little' else 'BE'}"
        if width == 3:
            self.imports.use(INT24, "Int24")
            self.packers[name] = f'Int24("{endian}", signed={signed})'
        else:
            self.packers[name] = f'Struct("{endian}{_STRUCT_CODES[(width, signed)]}")'
        return name

    def proto_ref(self, path: str, full_name: str) -> str:
        module = self.spec.proto_modules[full_name]
        self.imports.use(".", module)
        return f"{module}.{path}"


def bug(f: FrameField, message: str) -> GeneratorBug:
    # frame_checks has ruled this out before any emitter ran: reaching it is our bug.
    return GeneratorBug(message, str(f.location))


def struct_of(f: StructField | BlocksField) -> StructDef:
    """The struct ``f`` holds, which the builder resolved (or rejected the spec)."""
    if f.struct is None:
        raise bug(f, f"{f.name!r}: unresolved struct")
    return f.struct


def element_of(f: ArrayField) -> FrameField:
    """The element of array ``f``, which the builder resolved (or rejected the spec)."""
    if f.element is None:
        raise bug(f, f"{f.name!r}: array without an element")
    return f.element


def int_read_of(op: KindOp) -> IntShape:
    """How the integer ``op`` reads or writes sits on the wire (the checks made sure it is one:
    an array element, a marker, a value nothing reads)."""
    shape = int_shape(op)
    if shape is None:
        raise bug(op.field, f"{op.name!r} is a {op.word} where an integer is needed")
    return shape


def fixed_int(op: KindOp) -> IntType:
    """The fixed-width integer ``op`` reads or writes (sizes, checksums, ranges, constants)."""
    shape = int_read_of(op)
    if not isinstance(shape, IntType):
        raise bug(op.field, f"{op.name!r} is a {shape} where a fixed-width integer is needed")
    return shape


def proto_of(op: FieldOp) -> ProtoField:
    """The protobuf field a proto operation was lowered from."""
    if not isinstance(op.field, ProtoField):
        raise bug(op.field, f"{op.name!r}: a {op.word} operation on a {op.field.kind} field")
    return op.field


def switch_of(op: FieldOp) -> SwitchField:
    """The switch field a switch operation was lowered from (its names and cases)."""
    if not isinstance(op.field, SwitchField):
        raise bug(op.field, f"{op.name!r}: a {op.word} operation on a {op.field.kind} field")
    return op.field


def int_field(f: FrameField) -> IntField:
    """``f`` as the fixed-width integer the checks made sure it is (sizes, checksums...)."""
    if not isinstance(f, IntField):
        raise bug(f, f"{f.name!r} is a {f.kind} where a fixed-width integer is needed")
    return f


# ---------------------------------------------------------------------------------------------
# expressions


def raise_lines(exc: str, message: str, *, fmt: bool = True, extra: str = "",
           suffix: str = "") -> list[str]:
    """``raise exc(message[, extra])[ suffix]``: the message stays one literal."""
    return [raise_line(exc, message, fmt=fmt, extra=extra, suffix=suffix)]


def offset_expr(base: str, offset: int) -> str:
    """``base + offset``, or ``base`` alone for offset 0."""
    return f"{base} + {offset}" if offset else base


def indent(lines: list[str], depth: int = 1) -> list[str]:
    return ["    " * depth + line for line in lines]


def render_expr(expr: Expr, s: StructDef, resolve: Callable[[str], str], where: FrameField,
            parens: bool = True) -> str:
    """Python source for ``expr``: names through ``resolve``, dotted proto fields by py name."""
    # The parsed tree, not the text: parsing made character literals ('D') their numbers.
    tree = copy.deepcopy(expr.tree)

    class Rewrite(ast.NodeTransformer):
        def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
            chain: list[str] = []
            cur: ast.expr = node
            while isinstance(cur, ast.Attribute):
                chain.append(cur.attr)
                cur = cur.value
            if not isinstance(cur, ast.Name):
                return self.generic_visit(node)
            chain.reverse()
            head = s.field(cur.id)
            new: ast.expr = ast.Name(id=resolve(cur.id), ctx=ast.Load())
            for attr in attr_names(head, chain, expr, where):
                new = ast.Attribute(value=new, attr=attr, ctx=ast.Load())
            return new

        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id == "len":
                return node
            return ast.Name(id=resolve(node.id), ctx=ast.Load())

    text = ast.unparse(Rewrite().visit(tree))
    return f"({text})" if parens else text


def attr_names(head: FrameField | None, chain: list[str], expr: Expr,
                where: FrameField) -> list[str]:
    """Python attribute names for ``head.a.b...`` (frame_checks has ruled out bad paths)."""
    attrs, error = path_attrs(head, chain, expr)
    if error is not None:
        raise bug(where, error)
    return attrs


# ---------------------------------------------------------------------------------------------
# annotations


def annotation(ctx: EmitContext, struct: StructDef, f: FrameField) -> str:
    if f.bit_of is not None and f.bit_of.enum is not None:
        return f.bit_of.enum.name
    match f:
        case IntField() | VarintField():
            return "int"
        case BoolField():
            return "bool"
        case FloatField():
            return "float"
        case UuidField():
            ctx.imports.use("uuid", "UUID")
            return "UUID"
        case BytesField():
            return "bytes"
        case StringField():
            return "str"
        case ProtoField(message=message) if message is not None:
            return ctx.proto_ref(message.py_path, message.full_name)
        case StructField(struct=held) | BlocksField(struct=held) if held is not None:
            return held.name
        case ArrayField(element=element) if element is not None:
            return f"list[{annotation(ctx, struct, element)}]"
        case SwitchField():
            return f.alias
    raise bug(f, f"{f.name!r}: no type for a {f.kind} field")


def has_checksum(s: StructDef, seen: frozenset[str] = frozenset()) -> bool:
    if s.name in seen:
        return False
    for f in s.fields:
        if f.checksum is not None:
            return True
        held = nested_struct(f)
        if held is not None and has_checksum(held, seen | {s.name}):
            return True
    return False


def call_args(args: dict[str, Expr], s: StructDef, resolve: Callable[[str], str],
               where: FrameField) -> str:
    return "".join(f", {name}={render_expr(e, s, resolve, where, False)}"
                   for name, e in args.items())


def range_starts(s: StructDef, f: FrameField) -> list[FrameField]:
    return [g for g in s.fields if g.size_range is not None and g.size_range[0] == f.name]


def range_ends(s: StructDef, f: FrameField) -> list[FrameField]:
    return [g for g in s.fields if g.size_range is not None and g.size_range[1] == f.name]
