"""Layout tables for the compiled frame codec (``runtime/codec/compiled_frames.py``).

Written from the layout plans (``layout_plan``): a struct gets a table when its plan is
compiled, and each of the plan's operations becomes one row. Which structs those are is the
plan's decision, not this module's.
"""

from __future__ import annotations

from collections.abc import Callable

from protoframe.generator.codewriter import bytes_literal, q
from protoframe.generator.compiled_exprs import program
from protoframe.generator.errors import GeneratorBug
from protoframe.generator.expr import Expr
from protoframe.generator.frame_ir import SwitchField
from protoframe.generator.ir import MessageType
from protoframe.generator.layout_ops import (
    Always,
    Array,
    BytesOther,
    BytesSized,
    BytesToEnd,
    Checksum,
    Computed,
    Condition,
    Const,
    ConstBytes,
    Default,
    Envelope,
    FieldOp,
    FixedLength,
    IfPeek,
    IfRemaining,
    Nested,
    Prefix,
    ProtoBody,
    ReadBool,
    ReadInt,
    ReadUuid,
    ReadVarint,
    Region,
    SizeOf,
    SizeRest,
    String,
    Switch,
)
from protoframe.generator.layout_plan import LayoutPlan
from protoframe.generator.linefit import fit_tuple_row


def _row(op: FieldOp, ref: Callable[[MessageType], str]) -> str:
    """``op``'s row of the table, its word quoted as the vocabulary spells it."""
    name = q(op.name)
    head = f"({q(str(op.word))}, {name}"
    match op:
        case ReadInt(int_type=t):
            return f"{head}, {q(t.name)}, None, None)"
        case Const(int_type=t, value=value):
            return f"{head}, {q(t.name)}, {value:#x}, None)"
        case Checksum(int_type=t, algorithm=algorithm):
            return f"{head}, {q(t.name)}, {q(algorithm)}, None)"
        case SizeRest(int_type=t):
            return f"{head}, {q(t.name)}, None, None)"
        case SizeOf(int_type=t, target=target):
            return f"{head}, {q(t.name)}, {q(target)}, None)"
        case ProtoBody(message=message, size=size):
            return f"{head}, None, {ref(message)}, {q(size)})"
        case Envelope(message=message, size=size, dispatch=dispatch, present=present):
            envelope = (f"({q(size)}, {q(dispatch)}, _BODY_FIELDS, "
                        f"{q(present) if present else 'None'})")
            return f"{head}, None, {ref(message)}, {envelope})"
        case BytesToEnd():
            return f"{head}, None, None, None)"
        case BytesSized(size=size):
            return f"{head}, None, {q(size)}, None)"
        case Nested(plan=plan, when=when):
            match when:
                case IfPeek(int_type=t, equals=equals):
                    presence = f"({q(t.name)}, {equals:#x})"
                case IfRemaining():
                    presence = q("remaining")
                case Always():
                    presence = "None"
            return f"{head}, None, {plan.name}, {presence})"
    more = _more_rows(op, head)
    if more is not None:
        return more
    raise GeneratorBug(f"{op.name!r}: the plan calls {op.word!r} compiled, but it has no row",
                       str(op.field.location))


def _more_rows(op: FieldOp, head: str) -> str | None:
    """The rows of the operations issue #21 brought to the compiled codec."""
    match op:
        case ReadUuid():
            return f"{head}, None, None, None)"
        case BytesOther(region=Region(size=str(size))) if op.word == "signed_bytes":
            return f"{head}, None, {q(size)}, None)"
        case Switch(key=key, region=region) if isinstance(op.field, SwitchField):
            tables = op.field.tables
            size = q(region.size) if region.size is not None else "None"
            return f"{head}, None, {tables}_DECODERS, ({q(key)}, {size}, {tables}_CODES))"
        case Computed(inner=ReadInt(int_type=t)) if op.word == "switch_key":
            return f"{head}, {q(t.name)}, None, None)"  # its switch row names it
        case Array(element=Nested(plan=plan)) if op.word == "struct_run":
            return f"{head}, None, {plan.name}, None)"
        case Prefix(inner=inner) if op.word in ("prefixed", "prefixed_default"):
            prefix = inner.region.prefix if isinstance(inner, BytesOther | String) else None
            if prefix is None or prefix == "lenenc":  # not "prefixed": see Prefix.word
                return None
            kind = inner.encoding if isinstance(inner, String) else "bytes"
            name = prefix if prefix == "varint" else prefix.name
            default = op.field.default
            extra = q(default) if op.word == "prefixed_default" and isinstance(default, str) \
                else "None"
            return f"{head}, {q(name)}, {q(kind)}, {extra})"
        case Condition(inner=ReadInt(int_type=t), expr=expr) if op.word == "condition":
            steps = program(expr) or ()
            text = ", ".join(f"({q(word)}, {q(arg) if isinstance(arg, str) else arg})"
                             for word, arg in steps)
            return f"{head}, {q(t.name)}, ({text}{',' if len(steps) == 1 else ''}), None)"
        case ReadVarint() | ReadBool():
            return f"{head}, None, None, None)"
        case Computed(inner=ReadInt(int_type=t)) if op.word == "count_of":
            return f"{head}, {q(t.name)}, {q(op.field.count_of or '')}, None)"
        case Array(element=Nested(plan=plan), count=Expr(text=count)) if (
                op.word == "struct_array"):
            return f"{head}, None, {plan.name}, {q(count.strip())})"
        case Prefix(inner=BytesOther(region=r) | String(region=r) as inner) if (
                op.word == "lenenc"):
            kind = inner.encoding if isinstance(inner, String) else "bytes"
            return f"{head}, None, {q(kind)}, {r.nullable})"
        case ConstBytes(wire=wire) | FixedLength(inner=ConstBytes(wire=wire)) if (
                op.word == "const_bytes"):
            return f"{head}, None, {bytes_literal(wire)}, None)"
        case FixedLength(inner=BytesOther() | String() as inner, length=length) if (
                op.word == "fixed"):
            kind = inner.encoding if isinstance(inner, String) else "bytes"
            return f"{head}, None, {q(kind)}, {length})"
        case Condition(inner=Array(element=Nested(plan=plan)), expr=expr) if (
                op.word == "struct_run_when"):
            steps = program(expr) or ()
            text = ", ".join(f"({q(word)}, {q(arg) if isinstance(arg, str) else arg})"
                             for word, arg in steps)
            return f"{head}, None, {plan.name}, ({text}{',' if len(steps) == 1 else ''}))"
        case String() if op.word == "text_rest":
            return f"{head}, None, None, None)"
        case Default(inner=ReadInt(int_type=t)) if isinstance(op.field.default, int):
            return f"{head}, {q(t.name)}, {op.field.default}, None)"
    return None


def layout_lines(plans: list[LayoutPlan], ref: Callable[[MessageType], str]) -> list[str]:
    """The ``install_frame_layouts(...)`` call for the compiled plans.

    ``plans`` are in dependency order (nested ones first); ``ref`` gives the expression naming
    a protobuf message's class in the frames module.
    """
    entries: list[str] = []
    for plan in plans:
        if not plan.compiled:
            continue
        entries.append(f"    ({plan.name}, {plan.check_end}, (")
        for op in plan.field_ops:
            entries += fit_tuple_row(_row(op, ref), "        ")
        if plan.skips_trailing:
            entries.append(f"        ({q('skip_trailing')}, None, None, None, None),")
        entries.append("    )),")
    if not entries:
        return []
    return ["install_frame_layouts((", *entries, "))"]
