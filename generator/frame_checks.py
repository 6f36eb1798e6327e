"""The checks on a built frame model that need the whole spec, run before any output exists.

``frame_model`` checks each key as it builds the model (names, references, sizes); what is
left for here are the rules that depend on how fields relate across a struct or a spec: dotted
paths through nested fields, which computed values an encoder can know when it needs them,
how a frame's length is read from its header, what names commands for the machines, guards,
and the names the Spark module gives to every struct. Every rule the emitters rely on is
checked here, so an emitter never finds a spec error: if one does, that is a bug in
protoframe (``GeneratorBug``), never something the user is told to fix in their spec.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from protoframe.generator.errors import SpecError
from protoframe.generator.expr import Expr
from protoframe.generator.frame_ir import (
    ArrayField,
    BlocksField,
    BoolField,
    BytesField,
    FrameField,
    IntField,
    ProtoField,
    StringField,
    StructDef,
    StructField,
    SwitchField,
    VarintField,
    struct_refs,
)
from protoframe.generator.ir import Protocol, SourceLocation
from protoframe.generator.naming import spark_message_key, spark_struct_key, union_key
from protoframe.generator.require_rules import check_requires
from protoframe.generator.spec_ir import FrameSpec

# What ``size_of: <field>`` can measure: fields whose bytes the encoder produces first.
MEASURABLE = (BytesField, StringField, ProtoField, StructField, SwitchField, ArrayField)


def check_frame_spec(spec: FrameSpec) -> list[SpecError]:
    """Every whole-spec rule ``spec`` breaks, in declaration order."""
    errors: list[SpecError] = []
    for s in structs_of(spec):
        errors += _check_paths(s)
        errors += _check_encode_order(s)
        errors += _check_measured(s)
        errors += check_requires(s)
    errors += _check_recursion(spec)
    if frame_length_field(spec.frame) is None and spec.frame.delimiter is None:
        errors.append(_frame_length_error(spec.frame))
    if (spec.machines or spec.requests) and not spec.routes and not any(
            isinstance(f, ProtoField) and f.dispatch_on is not None
            or isinstance(f, SwitchField) for f in spec.frame.fields):
        errors.append(_at(spec.frame.location, "machines and interactions need a frame with a "
                          "dispatch or switch field (or commands: routes) to name commands"))
    errors += _check_guards(spec)
    return errors


def check_protocol(protocol: Protocol, specs: list[FrameSpec], display: str) -> list[SpecError]:
    """Rules across a protocol's .proto files and frame specs: the names in its Spark module."""
    owners: dict[str, str] = {}
    errors: list[SpecError] = []
    named: list[tuple[str, str, SourceLocation | None]] = [
        (spark_message_key(m.py_path), f"message {m.full_name}", m.location)
        for proto in protocol.files for m in proto.all_messages() if not m.is_map_entry]
    for spec in specs:
        for s in structs_of(spec):
            named.append((spark_struct_key(s.name), f"frame struct {s.name}", s.location))
            named += [(union_key(s.name, f.name), f"switch {s.name}.{f.name}", f.location)
                      for f in s.data_fields if isinstance(f, SwitchField)]
    for key, what, loc in named:
        if key in owners and owners[key] != what:
            message = (f"{what} and {owners[key]} would have the same name {key!r} in the "
                       "Spark module; rename one of them")
            errors.append(_at(loc, message) if loc is not None else SpecError(message, display))
        owners[key] = what
    return errors


def structs_of(spec: FrameSpec) -> list[StructDef]:
    """The spec's structs and its frame, in declaration order."""
    return [*spec.structs, spec.frame]


@dataclass(frozen=True)
class LengthField:
    """Where a frame's header says how long the frame is.

    ``kind`` is ``size`` (an integer counting the rest of the frame, or a field of it: then
    ``between`` counts the bytes of the fixed-size fields before and after that field) or
    ``blocks`` (a count of length-prefixed blocks) or ``probe`` (the integer sizing the last
    field, read with the header before it); ``offset`` is the byte position of that field (0
    for ``probe``).
    """

    kind: str
    field: IntField | VarintField | BlocksField
    offset: int
    between: int = 0


def frame_length_field(frame: StructDef) -> LengthField | None:
    """How a reader finds the frame's length from its first bytes, or None if it cannot."""
    offset = 0
    for i, f in enumerate(frame.fields):
        # The fields after the length besides the one it measures: fixed-size fields before
        # it, and after it a trailer of fixed size (AMQP's frame-end octet).
        others = [g for g in frame.fields[i + 1 :] if g.name != f.size_of]
        size_rest = f.size_of == "rest" or (
            f.size_of is not None and len(others) < len(frame.fields) - i - 1
            and all(g.fixed_size is not None for g in others))
        if size_rest and isinstance(f, IntField | VarintField) and _length_kind(f):
            between = sum(g.fixed_size or 0 for g in others) if f.size_of != "rest" else 0
            return LengthField("size", f, offset, between)
        if isinstance(f, BlocksField):
            return LengthField("blocks", f, offset)
        if f.fixed_size is None:
            return probed_length_field(frame)
        offset += f.fixed_size
    return probed_length_field(frame)


def probed_length_field(frame: StructDef) -> LengthField | None:
    """A frame whose last field is sized by an earlier integer (or one derived from several,
    as WebSocket's 7-bit length and its 16- and 64-bit extensions), after fields of a fixed
    size when present (conditional ones included): its header is read as decoding reads it,
    and the frame ends ``size`` bytes after it (``kind`` ``probe``)."""
    *head, last = frame.fields
    if not isinstance(last, BytesField | StringField) or last.size_field is None or \
            last.size is None or "." in last.size or last.optional:
        return None
    size = last.size_field
    if not isinstance(size, IntField) or size.bit_of is not None:
        return None
    for f in head:
        if not f.wire or f.bit_of is not None:
            continue
        if not isinstance(f, IntField | BoolField | BytesField) or f.width_when_present is None \
                or f.size_of not in (None, last.name) or f.checksum is not None or \
                f.when_peek is not None or f.when_remaining or f.default is not None:
            return None
    return LengthField("probe", size, 0)


def _length_kind(f: FrameField) -> bool:
    """Whether ``f`` can hold a frame's length: an integer or a base-128 varint (a MySQL
    length-encoded integer cannot)."""
    return isinstance(f, IntField) or isinstance(f, VarintField) and f.encoding != "lenenc"


def _frame_length_error(frame: StructDef) -> SpecError:
    # Blame the field that is the real cause: a length of the wrong type, a length that does
    # not cover the frame's end, or the variable-size field that hides what follows it.
    for i, f in enumerate(frame.fields):
        if f.size_of is not None and not _length_kind(f):
            kind = "length-encoded integer" if isinstance(f, VarintField) else f.kind
            return _at(f.location, f"the frame's length {f.name!r} is a {kind}: a frame "
                                   "length must be an integer (u8 ... u64, i8 ... i64, u24, "
                                   "i24) or a base-128 varint")
        names = [g.name for g in frame.fields]
        if f.size_of in names and any(
                g.fixed_size is None for g in frame.fields[names.index(f.size_of) + 1 :]):
            return _at(f.location, f"{f.name!r} measures {f.size_of!r}, not the end of the "
                                   "frame: a frame's length field must have size_of: rest or "
                                   "measure the frame's last field (or one followed by "
                                   "fixed-size fields only)")
        if f.size_of is not None:
            later = next(g for g in frame.fields[i + 1 :]
                         if g.fixed_size is None and g.name != f.size_of)
            return _at(later.location, f"{later.name!r} has no fixed size, so the frame length "
                                       f"{f.name!r} cannot tell where the frame ends; use "
                                       "size_of: rest")
        if f.fixed_size is None and not isinstance(f, BlocksField):
            return _at(f.location, f"cannot tell a frame's length from its header: {f.name!r} "
                                   "has no fixed size and comes before any size_of field; the "
                                   "frame needs a size_of field after fixed-size fields only, "
                                   "a blocks field, or a delimiter")
    return _at(frame.location, "cannot tell a frame's length from its header: the frame needs "
                               "a size_of field after fixed-size fields only, a blocks field, "
                               "or a delimiter")


def _at(loc: SourceLocation, message: str) -> SpecError:
    return SpecError(message, loc.path, loc.line, loc.column)


def _exprs(f: FrameField) -> Iterator[Expr]:
    """The expressions written on a field, in the scope of the struct holding it."""
    count = f.count if isinstance(f, ArrayField) else None
    for e in (f.value, f.derive, f.when, count):
        if e is not None:
            yield e
    yield from f.args.values()
    if isinstance(f, ArrayField) and f.element is not None:
        yield from f.element.args.values()


def _chains(expr: Expr) -> Iterator[tuple[str, list[str]]]:
    """``(name, [attr, ...])`` for every dotted reference ``name.attr...`` in ``expr``."""
    inner = {id(n.value) for n in ast.walk(expr.tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(expr.tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            chain: list[str] = []
            cur: ast.expr = node
            while isinstance(cur, ast.Attribute):
                chain.append(cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name):
                yield cur.id, chain[::-1]


def _check_paths(s: StructDef) -> list[SpecError]:
    """Dotted references go through proto fields by their .proto names, struct data fields."""
    errors: list[SpecError] = []
    for f in s.fields:
        for expr in _exprs(f):
            for head_name, chain in _chains(expr):
                _, message = path_attrs(s.field(head_name), chain, expr)
                if message is not None:
                    errors.append(_at(f.location, message))
    return errors


def path_attrs(head: FrameField | None, chain: list[str],
               expr: Expr) -> tuple[list[str], str | None]:
    """The Python attributes of ``head.<chain>`` (proto fields by their Python names, struct
    fields as written), and why the path names nothing (None when it resolves)."""
    out: list[str] = []
    msg = head.message if isinstance(head, ProtoField) else None
    struct = head.struct if isinstance(head, StructField) else None
    for part in chain:
        if msg is not None:
            pf = next((x for x in msg.fields if x.proto_name == part), None)
            if pf is None:
                return out, f"{expr.text!r}: {msg.proto_name} has no field {part!r}"
            out.append(pf.py_name)
            msg, struct = pf.type.message, None
        elif struct is not None:
            sf = struct.field(part)
            if sf is None or sf.computed:
                return out, f"{expr.text!r}: {struct.name} has no data field {part!r}"
            out.append(part)
            msg = sf.message if isinstance(sf, ProtoField) else None
            struct = sf.struct if isinstance(sf, StructField) else None
        else:
            return out, f"{expr.text!r}: cannot look up {part!r} here"
    return out, None


def _check_encode_order(s: StructDef) -> list[SpecError]:
    """An expression evaluated on encode names only what the encoder knows at that point.

    The encoder works out ``count_of`` fields and byte-less ``value:`` fields first, then
    writes the fields in order; a computed field's value is known once it is written. A size
    of a following field is written when that field has been encoded ahead of it, so the
    expressions inside that field are evaluated at the size's turn.
    """
    errors: list[SpecError] = []
    computed = {f.name for f in s.fields if f.computed}
    known = {f.name for f in s.fields if f.count_of is not None}
    # A switch key with no bytes of its own is the body's code, known before anything.
    known |= {f.name for f in s.fields if f.is_switch_key and not f.wire}
    params = {p.name for p in s.params}

    def check(f: FrameField, exprs: list[Expr]) -> None:
        for expr in exprs:
            for n in expr.names:
                if n in computed and n not in known and n not in params:
                    errors.append(_at(f.location, f"{n!r} is computed where encoding cannot "
                                      "know it yet; an expression used on encode can only name "
                                      "data fields, params, count_of fields and computed "
                                      "fields before it"))

    for f in s.fields:
        if not f.wire and f.value is not None:
            check(f, [f.value])
            known.add(f.name)
    for f in s.fields:
        if f.size_of is not None and f.size_of != "rest":
            target = s.field(f.size_of)
            if target is not None:
                check(target, _held_exprs(target))
        if not f.wire:
            # Byte-less fields: a stored bit-field is derived back to check that it fits.
            check(f, [f.derive] if f.derive is not None and not f.computed else [])
            continue
        exprs = [e for e in (f.when,) if e is not None] + _held_exprs(f)
        if f.computed and f.value is not None:
            exprs.append(f.value)
        check(f, exprs)
        if f.computed and f.size_of != "rest" and f.size_range is None and f.checksum is None:
            known.add(f.name)
    return errors


def _held_exprs(f: FrameField) -> list[Expr]:
    """The expressions encoding what ``f`` holds evaluates: an array's count, params' args."""
    out: list[Expr] = []
    if isinstance(f, ArrayField) and f.count is not None and not f.count_from_field:
        out.append(f.count)
    out += f.args.values()
    if isinstance(f, ArrayField) and f.element is not None:
        out += f.element.args.values()
    return out


def _check_measured(s: StructDef) -> list[SpecError]:
    errors = []
    for f in s.fields:
        if f.size_of is not None and f.size_of != "rest":
            target = s.field(f.size_of)
            if target is not None and not isinstance(target, MEASURABLE):
                errors.append(_at(f.location, f"size_of cannot measure {target.name!r}, whose "
                                              f"type is {target.kind}: only bytes, strings, "
                                              "messages, structs, switches and arrays have a "
                                              "size to announce"))
    return errors


def _check_recursion(spec: FrameSpec) -> list[SpecError]:
    """A struct may not hold itself, directly or through others (Spark schemas are finite)."""
    errors: list[SpecError] = []
    state: dict[str, int] = {}  # 1: being visited, 2: done

    def visit(s: StructDef) -> None:
        if state.get(s.name) == 2:
            return
        if state.get(s.name) == 1:
            errors.append(_at(s.location, f"struct {s.name} contains itself; frame structs "
                                          "cannot be recursive"))
            state[s.name] = 2
            return
        state[s.name] = 1
        for f in s.data_fields:
            for dep in struct_refs(f):
                visit(dep)
        state[s.name] = 2

    for s in structs_of(spec):
        visit(s)
    return errors


def _check_guards(spec: FrameSpec) -> list[SpecError]:
    """A guard names fields of the command it is on, or values of that command's enums."""
    errors: list[SpecError] = []
    for m in spec.machines:
        for t in m.transitions:
            command = t.send or t.receive
            if t.when is None or command is None:
                continue
            info = spec.commands.get(command)
            msg = info.body_message if info is not None else None
            if msg is None:
                continue
            fields = {f.proto_name for f in msg.fields}
            values = {v.proto_name for f in msg.fields if f.type.enum is not None
                      for v in f.type.enum.values}
            for n in t.when.names:
                if n not in fields and n not in values:
                    errors.append(_at(t.location, f"guard names {n!r}, which is neither a "
                                                  f"field of {command} nor a value of one of "
                                                  "its enums"))
    return errors
