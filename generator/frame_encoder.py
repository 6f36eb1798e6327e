"""The encoder emitter: the body of each struct's ``encode_to``.

Computed fields (sizes, counts, checksums, switch keys) are worked out from the data fields
into ``v_<name>`` locals, so a value built by hand can never disagree with its own header.
"""

from __future__ import annotations

from typing import Literal, assert_never

from protoframe.generator.bit_codec import value_check, width_checks
from protoframe.generator.case_args import case_call_args, encode_lines, taking
from protoframe.generator.codewriter import bytes_literal, literal
from protoframe.generator.errors import GeneratorBug
from protoframe.generator.expr import Expr
from protoframe.generator.float_codec import encode_float
from protoframe.generator.frame_emit import (
    EmitContext,
    bug,
    call_args,
    fixed_int,
    indent,
    int_read_of,
    raise_lines,
    range_ends,
    range_starts,
    render_expr,
)
from protoframe.generator.frame_ir import (
    BytesField,
    FrameField,
    StructDef,
    SwitchField,
    nested_message,
)
from protoframe.generator.frame_values import encode_array, encode_value
from protoframe.generator.layout_ops import (
    AnyFieldOp,
    Array,
    Bits,
    Blocks,
    BytesOther,
    BytesSized,
    BytesToEnd,
    Checksum,
    Const,
    ConstBytes,
    Envelope,
    IntShape,
    IntType,
    KindOp,
    MaskedBytes,
    Nested,
    NestedOther,
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
    SizeOf,
    SizeRest,
    String,
    SubField,
    Switch,
    Terminated,
    kind_op,
)
from protoframe.generator.layout_plan import LayoutPlan
from protoframe.generator.mask_emit import mask_encode
from protoframe.generator.runtime_modules import CHECKSUMS, ERRORS, MUTF8, PROTOWIRE
from protoframe.generator.varlen_emit import bounded_bytes, lenenc_write, plus
from protoframe.runtime.codec.varlen import lenenc_bytes

# ---------------------------------------------------------------------------------------------
# encoding


class Encoder:
    def __init__(self, ctx: EmitContext, plan: LayoutPlan) -> None:
        self.ctx = ctx
        self.plan = plan
        s = self.s = plan.struct
        self.out: list[str] = []
        self.patches: list[str] = []
        self.params = {p.name for p in s.params}
        self.available: dict[str, str] = {}  # computed field -> expression holding its value
        self.index = "_"
        self.current: FrameField | None = None
        self.buf = "out"  # the bytearray the fields are appended to
        self.tail: FrameField | None = None  # bytes appended after a checksum that covers them
        self.inserts: list[str] = []  # a varint size of the rest, put in after the patches

    def name(self, n: str) -> str:
        if n in self.params:
            return n
        if n == "_index":
            return self.index
        f = self.s.field(n)
        assert f is not None
        if not f.computed:
            return f"self.{n}"
        if n in self.available:
            return self.available[n]
        where = self.current or f
        raise bug(where, f"{n!r} is computed where encoding cannot know it yet; an "
                            "expression used on encode can only name data fields, params, "
                            "count_of fields and computed fields before it")

    def render(self, expr: Expr, f: FrameField, parens: bool = True) -> str:
        self.current = f
        return render_expr(expr, self.s, self.name, f, parens)

    def lines(self) -> list[str]:
        s = self.s
        for f in s.fields:
            if f.size is not None and "." in f.size:
                self.out.append(f"{self.dotted_attr(f.size)} = len(self.{f.name})")
        for f in s.fields:
            if f.count_of is not None:
                target = s.field(f.count_of)
                assert target is not None
                value = f"len(self.{f.count_of})"
                if target.optional:
                    value = f"0 if self.{f.count_of} is None else {value}"
                self.out.append(f"v_{f.name} = {value}")
                self.available[f.name] = f"v_{f.name}"
        self.out += width_checks(self.ctx, self.plan)
        self.out += self.byteless_keys()
        unneeded = self.plan.unneeded_on_encode
        for f in s.fields:
            if not f.wire and f.value is not None and f.name not in unneeded:
                self.out.append(f"v_{f.name} = {self.render(f.value, f, parens=False)}")
                self.available[f.name] = f"v_{f.name}"
                self.out += value_check(self.ctx, self.plan, f.name)
        for op in self.plan.field_ops:
            self.field(op)
        self.out += self.patches
        # A varint size of the rest goes in last, in front of what it measures: the patches
        # above wrote at positions it moves.
        self.out += self.inserts
        return self.out or ["pass"]

    def byteless_keys(self) -> list[str]:
        """A switch key with no bytes of its own (a bit sub-field, a ``derive:`` field) is the
        code of the body's class, known before any field is written."""
        lines: list[str] = []
        for sw in self.s.fields:
            key = self.s.field(sw.switch_on) if isinstance(sw, SwitchField) and sw.switch_on \
                else None
            if isinstance(sw, SwitchField) and key is not None and not key.wire:
                lines.append(f"v_{key.name} = {sw.tables}_CODES[type(self.{sw.name})]")
                self.available[key.name] = f"v_{key.name}"
        return lines

    def dotted_attr(self, ref: str) -> str:
        head, *rest = ref.split(".")
        target = self.s.field(head)
        msg = nested_message(target) if target is not None else None
        if msg is None:
            raise GeneratorBug(f"{ref!r} does not go through a message", str(self.s.location))
        attrs = []
        for part in rest:
            pf = next(x for x in msg.fields if x.proto_name == part)
            attrs.append(pf.py_name)
            if pf.type.message is not None:
                msg = pf.type.message
        return f"self.{head}." + ".".join(attrs)

    def pack(self, how: IntShape, value: str) -> list[str]:
        if how == "lenenc":
            return [lenenc_write(self.ctx, self.buf, value)]
        if how == "varint":
            self.ctx.imports.use(PROTOWIRE, "varint_bytes")
            return [f"{self.buf} += varint_bytes({value})"]
        if how == "bool":
            return [f"{self.buf}.append(1 if {value} else 0)"]
        # A u8 too goes through its Struct rather than bytearray.append: out of range, that
        # raises struct.error, which encode reports as ValueOutOfRangeError as for any width
        # (append's ValueError would escape as it is).
        packer = self.ctx.packer(how.width, how.signed, how.order)
        return [f"{self.buf} += {packer}.pack({value})"]

    def pack_op(self, op: KindOp, value: str) -> list[str]:
        """Append ``value`` as the integer ``op`` reads (a varint bounded by its
        ``max_bytes``)."""
        if isinstance(op, SizeOf | ReadVarint):
            value = plus(value, op.adjust)  # the number counts more than the size
        if isinstance(op, ReadVarint) and op.max_bytes is not None:
            return [f"{self.buf} += {bounded_bytes(self.ctx, value, op.max_bytes)}"]
        return self.pack(int_read_of(op), value)

    def computed_value(self, f: FrameField) -> list[str]:
        """Statements setting ``v_<name>`` for a computed wire integer; [] if patched later."""
        s = self.s
        if f.count_of is not None:
            return []
        if f.size_of is not None and f.size_of != "rest":
            target = self.plan.op(f.size_of)
            return [*self.pre_encode(target), f"v_{f.name} = len(b_{target.name})"]
        if f.is_switch_key:
            sw = next(g for g in s.fields if isinstance(g, SwitchField) and g.switch_on == f.name)
            return [f"v_{f.name} = {sw.tables}_CODES"
                    f"[type(self.{sw.name})]"]
        if f.value is not None:
            return [f"v_{f.name} = {self.render(f.value, f, parens=False)}"]
        raise AssertionError(f.name)

    def field(self, op: AnyFieldOp) -> None:
        s = self.s
        f = op.field
        if any(g.checksum is not None and g.checksum.start == f.name
               and not self.covers_the_rest(g) for g in s.fields):
            self.out.append(f"s_{f.name} = len({self.buf})")
        for g in range_starts(s, f):
            self.out.append(f"s_{g.name} = len({self.buf})")
        self.out += self.one(op)
        for g in range_ends(s, f):
            size = fixed_int(kind_op(self.plan.op(g.name)))
            packer = self.ctx.packer(size.width, size.signed, size.order)
            self.out.append(f"{packer}.pack_into({self.buf}, p_{g.name}, "
                            f"len({self.buf}) - s_{g.name})")

    def covers_the_rest(self, f: FrameField) -> bool:
        """Whether checksum ``f`` can be written after its range, from a buffer of its own.

        True when the range starts at the next field and nothing else in the struct is filled
        in afterwards: then the covered fields are encoded first into ``covered``, and the sum
        is computed over that and written before it, with no placeholder to patch.
        """
        assert f.checksum is not None
        s = self.s
        wire = [g for g in s.fields if g.wire]
        after = wire[wire.index(f) + 1:]
        if not after or after[0].name != f.checksum.start:
            return False
        return not any(g is not f and (g.checksum is not None or g.size_of == "rest"
                                       or g.size_range is not None)
                       for g in s.fields)

    def raw_tail(self) -> FrameField | None:
        """The struct's last field when it is plain bytes running to the end, else None."""
        last = [g for g in self.s.fields if g.wire][-1]
        plain = (isinstance(last, BytesField) and last.size == "rest" and last.when is None
                 and not last.optional and last.prefix is None and last.length is None
                 and last.const is None)
        return last if plain else None

    def one(self, op: AnyFieldOp) -> list[str]:
        s = self.s
        f = op.field
        kind = kind_op(op)
        if f is self.tail:
            return []  # written after the checksum that covers it
        if isinstance(kind, SubField):
            return []  # packed into its integer, checked by ``width_checks``
        if isinstance(kind, Bits):
            if f.computed and not f.is_switch_key:
                return []
            # A stored bit-field (or a switch key): the value: expressions put it on the wire;
            # make sure it survives the trip (fits its bits) by deriving it back.
            self.ctx.imports.use(ERRORS, "EncodeError")
            back = self.render(kind.expr, f, parens=not kind.as_bool)
            back = f"bool({back})" if kind.as_bool else back
            held = self.name(f.name)
            return [f"if {back} != {held}:", *indent(raise_lines(
                "EncodeError", f"{s.name}.{f.name} = {{{held}!r}} does not fit the "
                "bits the spec gives it"))]
        const = const_of(kind)
        if isinstance(kind, ConstBytes):
            return self.write(kind)
        if f.marker:
            return [f"if self.{f.name}:", f"    {self.buf} += {bytes_literal(const_bytes(kind))}"]
        if const is not None:
            self.available[f.name] = str(const)
            return [f"{self.buf} += {bytes_literal(const_bytes(kind))}"]
        if isinstance(kind, Checksum):
            algo = kind.algorithm
            self.ctx.imports.use(CHECKSUMS, algo)
            i = kind.int_type
            packer = self.ctx.packer(i.width, i.signed, i.order)
            if self.covers_the_rest(f):
                self.buf = "covered"
                self.tail = self.raw_tail()
                if self.tail is None:
                    self.patches += [f"out += {packer}.pack({algo}(covered))", "out += covered"]
                    return [f"# {f.name} covers the fields after it: they are encoded first.",
                            "covered = bytearray()"]
                # The trailing bytes (a payload, often large) are summed where they are, never
                # copied into ``covered``: the sum continues from the one over ``covered``.
                data = f"self.{self.tail.name}"
                self.patches += [f"out += {packer}.pack({algo}({data}, {algo}(covered)))",
                                 "out += covered", f"out += {data}"]
                return [f"# {f.name} covers the fields after it: they are encoded first.",
                        "covered = bytearray()"]
            self.patches += [
                f"with memoryview({self.buf}) as view:",
                f"    {packer}.pack_into({self.buf}, p_{f.name}, "
                f"{algo}(view[s_{kind.start}:]))",
            ]
            return [f"p_{f.name} = len({self.buf})", f"{self.buf} += bytes({i.width})"]
        if f.size_of == "rest" and isinstance(kind, ReadVarint):
            size = bounded_bytes(self.ctx, plus(f"len({self.buf}) - p_{f.name}", kind.adjust),
                                 kind.max_bytes)
            self.inserts.append(f"{self.buf}[p_{f.name}:p_{f.name}] = {size}")
            return [f"p_{f.name} = len({self.buf})"]
        if f.size_of == "rest":
            i = fixed_int(kind)
            packer = self.ctx.packer(i.width, i.signed, i.order)
            rest = plus(f"len({self.buf}) - p_{f.name} - {i.width}",
                        kind.adjust if isinstance(kind, SizeRest) else 0)
            self.patches.insert(0, f"{packer}.pack_into({self.buf}, p_{f.name}, {rest})")
            return [f"p_{f.name} = len({self.buf})", f"{self.buf} += bytes({i.width})"]
        if f.size_range is not None:
            width = fixed_int(kind).width
            return [f"p_{f.name} = len({self.buf})", f"{self.buf} += bytes({width})"]
        if f.computed:
            if f.when is not None:
                cond = self.render(f.when, f, parens=False)
                lines = [f"v_{f.name} = {literal(f.default or 0)}", f"if {cond}:"]
                lines += ["    " + x for x in self.computed_value(f)]
                lines += ["    " + x for x in self.pack_op(kind, f"v_{f.name}")]
                self.available[f.name] = f"v_{f.name}"
                return lines
            lines = self.computed_value(f)
            self.available[f.name] = f"v_{f.name}"
            return lines + self.pack_op(kind, f"v_{f.name}")
        body = self.write(kind)
        if f.when is not None:
            self.ctx.imports.use(ERRORS, "EncodeError")
            cond = self.render(f.when, f, parens=False)
            text = f.when.text
            return [f"if {cond}:",
                    f"    if self.{f.name} is None:",
                    *indent(raise_lines("EncodeError", f"{s.name}.{f.name} must be set when {text}",
                                    fmt=False), 2),
                    *indent(body),
                    f"elif self.{f.name} is not None:",
                    *indent(raise_lines("EncodeError", f"{s.name}.{f.name} must be None unless "
                                    f"{text}", fmt=False))]
        if f.optional and not (f.when_remaining and f.default is not None):
            return [f"if self.{f.name} is not None:", *["    " + line for line in body]]
        return body

    def struct_args(self, f: FrameField) -> str:
        return call_args(f.args, self.s, self.name, f)

    def case_args(self, sw: SwitchField, held: StructDef) -> str:
        """The keyword arguments a switch passes to a case struct, without a leading comma."""
        return case_call_args(sw, held, self.s, self.name).lstrip(", ")

    def pre_encode(self, op: AnyFieldOp) -> list[str]:
        """Encode a sized field ahead of its size, into ``b_<name>``."""
        f = op.field
        value = f"self.{f.name}"
        kind = kind_op(op)
        match kind:
            case BytesSized() | BytesToEnd() | BytesOther() | MaskedBytes():
                return [f"b_{f.name} = {value}"]
            case String(encoding=encoding):
                return [f"b_{f.name} = {self.str_bytes(encoding, value)}"]
            case ProtoBody() | Envelope() | ProtoOther() | Nested() | NestedOther():
                call = f"{value}.encode({self.struct_args(f).lstrip(', ')})"
                if f.optional:
                    return [f"b_{f.name} = b\"\" if {value} is None else {call}"]
                return [f"b_{f.name} = {call}"]
            case Switch(field=SwitchField() as sw) if taking(sw):
                return encode_lines(sw, value, lambda a: [f"b_{f.name} = {value}.encode({a})"],
                                    lambda held: self.case_args(sw, held))
            case Switch():
                return [f"b_{f.name} = {value}.encode()"]
            case Array():
                return ["buf = bytearray()", *self.array_write(kind, "buf"), f"b_{f.name} = buf"]
        raise bug(f, f"size_of cannot measure a {kind.word} field")

    def str_bytes(self, encoding: str, value: str) -> str:
        if encoding == "mutf8":
            self.ctx.imports.use(MUTF8, "encode as mutf8_encode")
            return f"mutf8_encode({value})"
        return f"{value}.encode()"

    def array_write(self, op: Array, out: str) -> list[str]:
        if op.item_limits:
            return encode_array(self, op, out)
        f = op.field
        el = op.element
        lines: list[str] = []
        if op.count is not None and not op.count_from_field:
            self.ctx.imports.use(ERRORS, "EncodeError")
            count = self.render(op.count, f)
            lines += [f"if len(self.{f.name}) != {count}:", *indent(raise_lines(
                "EncodeError", f"{self.s.name}.{f.name} has {{len(self.{f.name})}} items; "
                f"{op.count.text} says {{{count}}}"))]
        index = f"i_{f.name}" if op.index_used else ""
        self.index = index or "_"
        item = f"e_{f.name}"
        match el:
            case Nested() | NestedOther():
                one = [f"{item}.encode_to({out}{self.struct_args(f)})"]
            case ReadUuid():
                one = [f"{out} += {item}.bytes"]
            case _:
                saved, self.buf = self.buf, out
                one = self.pack(int_read_of(el), item)
                self.buf = saved
        self.index = "_"
        head = f"for {index}, {item} in enumerate(self.{f.name}):" if index else \
            f"for {item} in self.{f.name}:"
        return [*lines, head, *["    " + x for x in one]]

    def write(self, op: KindOp) -> list[str]:
        """Append the value of ``op``'s field (present, its computed parts worked out)."""
        f = op.field
        value = f"self.{f.name}"
        match op:
            case (ReadInt() | Const() | SizeOf() | SizeRest() | Checksum() | ReadVarint()
                  | ReadBool() | ReadPacked() | ReadLenenc()):
                return self.pack_op(op, value)
            case ReadUuid():
                return [f"{self.buf} += {value}.bytes"]
            case (BytesSized(region=region) | BytesToEnd(region=region)
                  | BytesOther(region=region) | String(region=region)):
                if region.size_written_first:
                    return [f"{self.buf} += b_{f.name}"]
                data = self.str_bytes(op.encoding, value) if isinstance(op, String) else value
                lines = []
                if isinstance(op, String) or region.prefix is not None:
                    lines.append(f"data_{f.name} = {data}")
                    data = f"data_{f.name}"
                if region.length is not None:
                    self.ctx.imports.use(ERRORS, "EncodeError")
                    lines += [f"if len({data}) != {region.length}:", *indent(raise_lines(
                        "EncodeError", f"{self.s.name}.{f.name} must be {region.length} bytes",
                        fmt=False))]
                if region.prefix is not None:
                    lines += self.prefix(region.prefix, f"len({data})")
                lines.append(f"{self.buf} += {data}")
                if region.nullable and region.prefix is not None:
                    return [f"if {value} is None:", *indent(self.prefix(region.prefix, "-1")),
                            "else:", *indent(lines)]
                return lines
            case Switch(field=SwitchField() as sw, region=region) if (
                    taking(sw) and not region.size_written_first):
                def case_args(held: StructDef) -> str:
                    return self.case_args(sw, held)
                if region.prefix is not None:
                    return [*encode_lines(sw, value, lambda a: [
                        f"data_{f.name} = {value}.encode({a})"], case_args),
                        *self.prefix(region.prefix, f"len(data_{f.name})"),
                        f"{self.buf} += data_{f.name}"]
                return encode_lines(sw, value, lambda a: [
                    f"{value}.encode_to({self.buf}{', ' + a if a else ''})"], case_args)
            case (ProtoBody(region=region) | Envelope(region=region) | ProtoOther(region=region)
                  | Nested(region=region) | NestedOther(region=region) | Switch(region=region)):
                if region.size_written_first:
                    return [f"{self.buf} += b_{f.name}"]
                args = self.struct_args(f) if isinstance(op, Nested | NestedOther) else ""
                if region.prefix is not None:
                    return [f"data_{f.name} = {value}.encode({args.lstrip(', ')})",
                            *self.prefix(region.prefix, f"len(data_{f.name})"),
                            f"{self.buf} += data_{f.name}"]
                return [f"{value}.encode_to({self.buf}{args})"]
            case Array(region=region):
                if region.size_written_first:
                    return [f"{self.buf} += b_{f.name}"]
                return self.array_write(op, self.buf)
            case Blocks():
                return self.blocks(op, value)
            case Bits() | SubField():
                raise bug(f, f"{f.name!r}: a derived field has no bytes to write")
            case MaskedBytes():
                return mask_encode(self, op)
            case Terminated() | ConstBytes() | RangedInt():
                return encode_value(self, op)
            case ReadFloat():
                return encode_float(self, op, value)
            case _:
                assert_never(op)

    def blocks(self, op: Blocks, value: str) -> list[str]:
        f = op.field
        ct, lt = op.count_type, op.length_type
        cp = self.ctx.packer(ct.width, ct.signed, ct.order)
        lp = self.ctx.packer(lt.width, lt.signed, lt.order)
        size = op.block_size
        lines = [
            f"content = {value}.encode({self.struct_args(f).lstrip(', ')})",
            f"{self.buf} += {cp}.pack((len(content) + {size - 1}) // {size})",
            f"for i in range(0, len(content), {size}):",
            f"    block = content[i : i + {size}]",
            f"    {self.buf} += {lp}.pack(len(block))",
            f"    {self.buf} += block",
        ]
        if op.max_blocks is not None:
            self.ctx.imports.use(ERRORS, "EncodeError")
            lines[1:1] = [f"if len(content) > {op.max_blocks * size}:", *indent(raise_lines(
                "EncodeError", f"{self.s.name}.{f.name}: {{len(content)}} bytes need "
                f"more than {op.max_blocks} blocks"))]
        return lines

    def prefix(self, prefix: IntType | Literal["varint", "lenenc"], length: str) -> list[str]:
        if prefix == "lenenc":  # None (NULL) for a nullable field's -1
            return [lenenc_write(self.ctx, self.buf, "None" if length == "-1" else length)]
        if prefix == "varint":
            self.ctx.imports.use(PROTOWIRE, "varint_bytes")
            return [f"{self.buf} += varint_bytes({length})"]
        packer = self.ctx.packer(prefix.width, prefix.signed, prefix.order)
        return [f"{self.buf} += {packer}.pack({length})"]


def const_of(op: KindOp) -> int | None:
    """The value a constant integer always has on the wire, if ``op`` is one."""
    match op:
        case Const(value=value):
            return value
        case ReadVarint(const=const) | ReadBool(const=const) | ReadLenenc(const=const):
            return const
    return None


def const_bytes(op: KindOp) -> bytes:
    const = const_of(op)
    if const is None:
        raise bug(op.field, f"{op.name!r} is not a constant")
    if int_read_of(op) == "lenenc":
        return lenenc_bytes(const)
    if int_read_of(op) == "varint":
        out = bytearray()
        v = const
        while v > 0x7F:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        return bytes(out)
    i = fixed_int(op)
    return const.to_bytes(i.width, "little" if i.order == "little" else "big", signed=i.signed)
