"""Layout tables for the compiled frame codec (``runtime/codec/compiled_frames.py``).

Written from the layout plans (``layout_plan``): a struct gets a table when its plan is
compiled, and each of the plan's operations becomes one row. Which structs those are is the
plan's decision, not this module's.
"""

from __future__ import annotations

from collections.abc import Callable

from protoframe.generator.codewriter import bytes_literal, q
from protoframe.generator.compiled_exprs import Step, guard_program, program
from protoframe.generator.errors import GeneratorBug
from protoframe.generator.expr import Expr
from protoframe.generator.frame_ir import ProtoField, SwitchField
from protoframe.generator.ir import MessageType
from protoframe.generator.layout_ops import (
    Always,
    AnyFieldOp,
    Array,
    Bits,
    Blocks,
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
    KindOp,
    Marker,
    MaskedBytes,
    Nested,
    NestedOther,
    Prefix,
    ProtoBody,
    ProtoOther,
    RangedInt,
    ReadBool,
    ReadFloat,
    ReadInt,
    ReadLenenc,
    ReadPacked,
    ReadUuid,
    ReadVarint,
    Region,
    SizeOf,
    SizeRest,
    String,
    SubField,
    Switch,
    Terminated,
    WithArgs,
    kind_op,
    len_value,
)
from protoframe.generator.layout_plan import (
    LayoutPlan,
    message_size_slot,
    range_end,
    row_programs,
    rule_programs,
)
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
        case SizeRest(int_type=t, adjust=adjust):
            return f"{head}, {q(t.name)}, {adjust or None}, None)"
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
        case ReadFloat(width=width, order=order):
            # The row names the unsigned integer of the number's width and order.
            shape = f"u{width * 8}{'le' if order == 'little' else 'be'}"
            return f"{head}, {q(shape)}, None, None)"
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
    more = _more_rows(op, head, ref)
    if more is not None:
        return more
    raise GeneratorBug(f"{op.name!r}: the plan calls {op.word!r} compiled, but it has no row",
                       str(op.field.location))


def _more_rows(op: FieldOp, head: str, ref: Callable[[MessageType], str]) -> str | None:
    """The rows of the operations issue #21 brought to the compiled codec."""
    match op:
        case ReadUuid():
            return f"{head}, None, None, None)"
        case BytesOther(region=Region(size=str(size))) if op.word == "signed_bytes":
            return f"{head}, None, {q(size)}, None)"
        case Switch(key=key, region=region, directional=directional) if isinstance(
                op.field, SwitchField):
            tables = op.field.tables
            size = q(region.size) if region.size is not None else "None"
            # A directional switch's row has the cases sent to the client, then to the server.
            decoders = f"({tables}_TO_CLIENT, {tables}_TO_SERVER)" if directional \
                else f"{tables}_DECODERS"
            return f"{head}, None, {decoders}, ({q(key)}, {size}, {tables}_CODES))"
        case Computed(inner=ReadInt(int_type=t)) if op.word == "switch_key":
            return f"{head}, {q(t.name)}, None, None)"  # its switch row names it
        case Array(element=Nested(plan=plan)) if op.word == "struct_run":
            return f"{head}, None, {plan.name}, None)"
        case Array(element=Nested(plan=plan), region=Region(size=str(size))) if (
                op.word == "struct_run_sized"):
            return f"{head}, None, {plan.name}, {q(size)})"
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
        case Array(element=Nested(plan=plan)) if op.word == "struct_array":
            return f"{head}, None, {plan.name}, {_count_text(op)})"
        case Array(element=ReadInt(int_type=t)) if op.word == "int_array":
            return f"{head}, {q(t.name)}, None, {_count_text(op)})"
        case Prefix(inner=BytesOther(region=r) | String(region=r) as inner) if (
                op.word in ("lenenc", "lenenc_optional")):
            kind = inner.encoding if isinstance(inner, String) else "bytes"
            return f"{head}, None, {q(kind)}, {r.nullable})"
        case ConstBytes(wire=wire) | FixedLength(inner=ConstBytes(wire=wire)) | Prefix(
                inner=ConstBytes(wire=wire)) if op.word == "const_bytes":
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
        case Marker(inner=Const(int_type=t, value=value)) if op.word == "marker":
            return f"{head}, {q(t.name)}, {value:#x}, None)"
        case Computed(inner=ReadInt(int_type=t)) if op.word == "size_range":
            return f"{head}, {q(t.name)}, {q(range_end(op) or '')}, None)"
    return _tubemq_rows(op, head, ref)


def _tubemq_rows(op: FieldOp, head: str, ref: Callable[[MessageType], str]) -> str | None:
    """The rows TubeMQ's frame brought to the compiled codec (issue #21): blocks, and protobuf
    messages after a length prefix of their own."""
    match op:
        case Blocks(struct=struct, count_type=count, length_type=length):
            limit = "None" if op.max_blocks is None else str(op.max_blocks)
            return (f"{head}, {q(count.name)}, {struct.name}, "
                    f"({q(length.name)}, {op.block_size}, {limit}))")
        case Prefix(inner=ProtoOther(region=Region(prefix=prefix))) if (
                op.word == "proto_prefixed" and isinstance(op.field, ProtoField)
                and op.field.message is not None and prefix is not None):
            name = prefix if isinstance(prefix, str) else prefix.name
            return f"{head}, {q(name)}, {ref(op.field.message)}, None)"
        case Computed(inner=ReadInt(int_type=t)) if op.word == "len_value":
            k, target = len_value(op) or (0, "")
            return f"{head}, {q(t.name)}, {k}, {q(target)})"
        case Condition(inner=ReadInt(int_type=t)) if op.word == "int_when":
            return f"{head}, {q(t.name)}, None, {_guard_program_text(op.expr)})"
        case Prefix(inner=BytesOther() | String() as inner) if (
                op.word == "prefixed_optional" and inner.region.prefix is not None):
            p = inner.region.prefix
            kind = inner.encoding if isinstance(inner, String) else "bytes"
            return f"{head}, {q(p if isinstance(p, str) else p.name)}, {q(kind)}, None)"
        case RangedInt(shape=shape, low=low, high=high, nonzero=nonzero) if (
                op.word == "int_range"):
            name = shape if isinstance(shape, str) else shape.name
            return f"{head}, {q(name)}, ({low}, {high}, {nonzero}), None)"
        case ReadLenenc(const=const, nullable=nullable) if op.word == "lenenc_int":
            return f"{head}, None, {'None' if const is None else hex(const)}, {nullable})"
        case Terminated(text=text, encoding=encoding, terminator=terminator) if (
                op.word == "terminated"):
            kind = encoding if text else "bytes"
            return f"{head}, None, {q(kind)}, {bytes_literal(terminator)})"
        case MaskedBytes(key=key, key_int=key_int, region=Region(size=str(size))) if (
                op.word == "masked_bytes"):
            key_type = q(key_int.name) if key_int is not None else "None"
            sized_by = "None" if size == "rest" else q(size)
            return f"{head}, {key_type}, {q(key)}, ({sized_by}, {op.key_optional}))"
        case Default(inner=ReadBool()) if op.word == "default_bool":
            return f"{head}, None, {op.field.default!r}, None)"
        case Condition(inner=NestedOther(plan=LayoutPlan() as plan)) if (
                op.word == "struct_when"):
            return f"{head}, None, {plan.name}, {_guard_program_text(op.expr)})"
        case Condition(inner=ProtoOther()) if (
                op.word == "proto_prefixed_when" and isinstance(op.field, ProtoField)
                and op.field.message is not None):
            steps = _guard_program_text(op.expr)
            return f"{head}, {q('varint')}, {ref(op.field.message)}, {steps})"
    return None


def _count_text(op: Array) -> str:
    """What counts the items of array ``op``: its ``count_of`` field's name, or the program
    of its count."""
    steps = op.count_program
    if steps is not None:
        return _steps_text(steps)
    return q(op.count.text.strip() if op.count is not None else "")


def _guard_program_text(expr: Expr) -> str:
    """The steps of a guarded row's program, as a tuple of (word, argument) pairs."""
    steps = guard_program(expr) or ()
    text = ", ".join(f"({q(word)}, {q(arg) if isinstance(arg, str) else arg})"
                     for word, arg in steps)
    return f"({text}{',' if len(steps) == 1 else ''})"


def _steps_text(steps: tuple[Step, ...]) -> str:
    """A program's steps as a tuple of (word, argument) pairs."""
    text = ", ".join(f"({q(word)}, {q(arg) if isinstance(arg, str) else arg})"
                     for word, arg in steps)
    return f"({text}{',' if len(steps) == 1 else ''})"


def _program_text(exprs: list[Expr], params: list[str], presence: bool = False) -> str:
    """The table's program running ``exprs`` one after another (leaving a value each): its
    (word, argument) steps, a param by its number; ``presence``: a program run on encode only
    or a guard's (``has`` and ``len`` steps; a guard's of earlier fields)."""
    steps = []
    for expr in exprs:
        for word, arg in program(expr, extended=True, presence=presence) or ():
            if word == "field" and arg in params:
                word, arg = "param", params.index(str(arg))
            steps.append(f"({q(word)}, {q(arg) if isinstance(arg, str) else arg})")
    return f"({', '.join(steps)}{',' if len(steps) == 1 else ''})"


def _tank_rows(op: AnyFieldOp, params: list[str]) -> list[str] | None:
    """The rows of the operations TANK brought (a guard is a row of its own before its
    field's), or None for the others."""
    name = q(op.name)
    f = op.field
    progs = row_programs(op) or []
    if isinstance(op, Condition) and op.word == "guard":
        guard = f"({q('guard')}, None, None, {_program_text([progs[0][0]], params, True)}, " \
                f"{f.value is not None})"
        return [guard, _kind_row(op.inner, op, [e for e, _ in progs[1:]], params)]
    if isinstance(op, Computed) and op.word == "value" or isinstance(op, Bits) and (
            op.word in ("derive", "derived_size")) or isinstance(op, WithArgs) and op.word in (
            "struct_args", "array_args"):
        return [_kind_row(kind_op(op), op, [e for e, _ in progs], params)]
    if op.word == "size_of_struct":
        return [f"({q('size_of_struct')}, {name}, {q('varint')}, {q(f.size_of or '')}, None)"]
    bits = _bits_row(op, params)
    if bits is not None:
        return [bits]
    if isinstance(op, NestedOther) and op.word == "struct_sized" and op.plan is not None:
        return [f"({q('struct_sized')}, {name}, None, {op.plan.name}, {q(op.region.size or '')})"]
    return None


def _bits_row(op: AnyFieldOp, params: list[str]) -> str | None:
    """The row of an integer of bit fields, of one of its parts, or of a derived switch key;
    None for the other operations."""
    name = q(op.name)
    f = op.field
    match op:
        case Computed(inner=ReadPacked(int_type=t, reserved=reserved)) if op.word == "bits":
            return f"({q('bits')}, {name}, {q(t.name)}, {reserved:#x}, None)"
        case SubField(container=container, shift=shift, width=width) if (
                op.word == "bit_field"):
            value = "None" if f.value is None else _program_text([f.value], params, True)
            enum = op.enum if op.enum is not None else "None"
            return (f"({q('bit_field')}, {name}, None, ({q(container)}, {shift}, {width}), "
                    f"({op.as_bool}, {enum}, {value}))")
        case Bits(expr=expr) if op.word == "derived_key":
            return f"({q('derived_key')}, {name}, None, {_program_text([expr], params)}, None)"
    return None


def _kind_row(inner: KindOp, op: AnyFieldOp, progs: list[Expr], params: list[str]) -> str:
    """The row of a field of kind ``inner`` whose programs (value, derivation or arguments)
    are ``progs``."""
    name = q(op.name)
    f = op.field
    # A value: runs on encode only, where has() and len() of a stored field are there.
    joined = _program_text(progs, params, f.value is not None and not isinstance(op, Bits))
    if isinstance(op, Bits):
        return f"({q(op.word)}, {name}, None, {joined}, {op.as_bool})"
    if f.value is not None:
        shape = inner.int_type.name if isinstance(inner, ReadInt) else "varint"
        return f"({q('value')}, {name}, {q(shape)}, {joined}, None)"
    match inner:
        case ReadInt(int_type=t):
            return f"({q('int')}, {name}, {q(t.name)}, None, None)"
        case ReadVarint():
            return f"({q('varint')}, {name}, None, None, None)"
        case BytesOther(region=r) | String(region=r) if r.prefix is not None and (
                r.prefix != "lenenc"):
            kind = inner.encoding if isinstance(inner, String) else "bytes"
            prefix = r.prefix if isinstance(r.prefix, str) else r.prefix.name
            return f"({q('prefixed')}, {name}, {q(prefix)}, {q(kind)}, None)"
        case BytesToEnd():
            return f"({q('bytes')}, {name}, None, None, None)"
        case Terminated(text=text, encoding=encoding, terminator=terminator):
            kind = encoding if text else "bytes"
            return f"({q('terminated')}, {name}, None, {q(kind)}, {bytes_literal(terminator)})"
        case ReadLenenc(const=None, nullable=False):
            return f"({q('lenenc_int')}, {name}, None, None, False)"
        case Array(element=ReadInt(int_type=t)) if inner.count_program is not None:
            return f"({q('int_array')}, {name}, {q(t.name)}, None, {_count_text(inner)})"
        case Nested(plan=plan) | NestedOther(plan=LayoutPlan() as plan) if not f.args:
            return f"({q('struct')}, {name}, None, {plan.name}, None)"
        case Nested(plan=plan) | NestedOther(plan=LayoutPlan() as plan):
            return f"({q('struct_args')}, {name}, None, {plan.name}, {joined})"
        case Array(element=Nested(plan=plan), count=Expr(text=count)):
            count = count.strip()
            # A count_of row's count, a param, or a stored integer the list must match.
            where = (f"({q('param')}, {params.index(count)})" if count in params
                     else f"({q('field')}, {q(count)})" if inner.count_from_field
                     else f"({q('stored')}, {q(count)})")
            return f"({q('array_args')}, {name}, None, {plan.name}, ({where}, {joined}))"
    raise GeneratorBug(f"{op.name!r}: the plan calls {op.word!r} compiled, but it has no row",
                       str(f.location))


def _message_bytes_row(plan: LayoutPlan, op: FieldOp) -> str | None:
    """The row of bytes sized by an integer of an earlier protobuf field of ``plan``: that
    field's name, and the slot of its message holding the size."""
    if not (isinstance(op, BytesOther) and op.word == "message_bytes"):
        return None
    holder, _, attr = str(op.region.size).partition(".")
    proto = plan.op(holder)
    slot = message_size_slot(proto, attr) if isinstance(proto, ProtoBody) else None
    if slot is None:
        raise GeneratorBug(f"{op.name!r}: the plan calls {op.word!r} compiled, but its size is "
                           "not an integer slot of an earlier message", str(op.field.location))
    return f"({q(op.word)}, {q(op.name)}, None, {q(holder)}, {q(slot)})"


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
        params = [p.name for p in plan.struct.params]
        if plan.delimiter is not None:
            entries.append(f"        ({q('delimited')}, None, None, "
                           f"{bytes_literal(plan.delimiter)}, None),")
        # The size_range rows ending at each field: their end rows come after its rows.
        ends = {range_end(op): op.name for op in plan.field_ops if op.word == "size_range"}
        for op in plan.field_ops:
            for row in _tank_rows(op, params) or [_message_bytes_row(plan, op) or _row(op, ref)]:
                entries += fit_tuple_row(row, "        ")
            if op.name in ends:
                entries.append(f"        ({q('size_range_end')}, None, None, "
                               f"{q(ends[op.name])}, None),")
        for steps in rule_programs(plan) or []:
            entries += fit_tuple_row(f"({q('requires')}, None, None, {_steps_text(steps)}, None)",
                                     "        ")
        if plan.skips_trailing:
            entries.append(f"        ({q('skip_trailing')}, None, None, None, None),")
        # A struct taking params says how many (the holder's row passes them).
        entries.append(f"    ), {len(params)})," if params else "    )),")
    if not entries:
        return []
    return ["install_frame_layouts((", *entries, "))"]
