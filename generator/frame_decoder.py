"""The decoder emitter: the straight-line body of each struct's ``decode_from``.

Fields are read into ``f_<name>`` locals, every computed field checked against what it must
be, and the instance built at the end without the keyword constructor. A ``value:`` field that
nothing on decode reads is stepped over, so every local is read (``LayoutPlan.unread_on_decode``).
"""

from __future__ import annotations

from typing import assert_never

from protoframe.generator.bit_codec import as_enum, reserved_check, unpack
from protoframe.generator.codewriter import literal, q
from protoframe.generator.container_decode import array_field, blocks_field, switch_field
from protoframe.generator.errors import GeneratorBug
from protoframe.generator.expr import Expr
from protoframe.generator.float_codec import decode_float
from protoframe.generator.frame_emit import (
    EmitContext,
    bug,
    call_args,
    fixed_int,
    has_checksum,
    indent,
    int_read_of,
    proto_of,
    raise_lines,
    range_ends,
    range_starts,
    render_expr,
)
from protoframe.generator.frame_ir import (
    INT_TYPES,
    FrameField,
    ProtoField,
    StructDef,
    nested_message,
    nested_struct,
)
from protoframe.generator.frame_values import decode_value
from protoframe.generator.layout_ops import (
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
    FixedLength,
    IntShape,
    IntType,
    KindOp,
    Marker,
    MaskedBytes,
    Nested,
    NestedOther,
    OptionalScalar,
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
)
from protoframe.generator.layout_plan import LayoutPlan
from protoframe.generator.mask_emit import mask_decode
from protoframe.generator.runtime_modules import CHECKSUMS, ERRORS, MUTF8, PROTOWIRE
from protoframe.generator.varlen_emit import adjusted_size, bounded_read, lenenc_read

# ---------------------------------------------------------------------------------------------
# decoding


class Decoder:
    def __init__(self, ctx: EmitContext, plan: LayoutPlan) -> None:
        self.ctx = ctx
        self.plan = plan
        s = self.s = plan.struct
        self.out: list[str] = []
        self.in_range = 0
        self.range_marks: list[int] = []
        # Whether ``end`` is a size the bytes announced (a size_of: rest field was read) rather
        # than the end of the input: overrunning an announced size is a mismatch, overrunning
        # the input is truncation.
        self.bounded = not s.is_frame
        self.params = {p.name for p in s.params}
        self.index = "_"
        self.unread = plan.unread_on_decode

    def where(self, f: FrameField) -> str:
        return q(f"{self.s.name}.{f.name}")

    def name(self, n: str) -> str:
        if n in self.params:
            return n
        if n == "_index":
            return self.index
        return "f_" + n

    def render(self, expr: Expr, f: FrameField, parens: bool = True) -> str:
        return render_expr(expr, self.s, self.name, f, parens)

    def lines(self) -> list[str]:
        s = self.s
        checksum_wrap = any(has_checksum(held) for f in s.fields
                            if (held := nested_struct(f)) is not None)
        if checksum_wrap:
            self.out.append("bad: ChecksumFailure | None = None")
            self.ctx.imports.use(ERRORS, "ChecksumFailure")
        for op in self.plan.field_ops:
            self.field(op)
        # A last field read to ``end`` has left nothing over: no skip, no check.
        at_end = bool(self.out) and self.out[-1] == "pos = end"
        if at_end:
            pass
        elif self.plan.skips_trailing:
            self.out.append("pos = end  # trailing bytes this spec does not know are skipped")
        elif self.plan.reads_to_end:
            self.ctx.imports.use(ERRORS, "SizeMismatchError")
            self.out += ["if pos != end:", *indent(raise_lines(
                "SizeMismatchError",
                f"{s.name}: {{end - pos}} bytes left over after the last field"))]
        # Decoded values skip the keyword constructor: every field is already checked here.
        self.out.append("obj = cls.__new__(cls)")
        self.out += [f"obj.{f.name} = f_{f.name}" for f in s.data_fields]
        for f in s.fields:
            if f.checksum is not None and not self.early_checksum(f):
                self.checksum_check(f)
        if checksum_wrap:
            self.out += ["if bad is not None:", "    raise ChecksumFailure(str(bad), obj, pos)"]
        self.out.append("return obj, pos")
        return self.out

    def early_check(self, f: FrameField) -> list[str]:
        assert f.checksum is not None
        algo = f.checksum.algorithm
        self.ctx.imports.use(CHECKSUMS, algo)
        self.ctx.imports.use(ERRORS, "ChecksumFailure")
        return [
            f"actual = {algo}(memoryview(buf)[pos:end])",
            f"if actual != f_{f.name}:",
            "    raise ChecksumFailure(",
            f"        f\"{self.s.name}.{f.name}: {algo} {{actual:#010x}} != sent "
            f"{{f_{f.name}:#010x}}\", None, end",
            "    )",
        ]

    def checksum_check(self, f: FrameField) -> None:
        assert f.checksum is not None
        algo = f.checksum.algorithm
        self.ctx.imports.use(CHECKSUMS, algo)
        self.ctx.imports.use(ERRORS, "ChecksumFailure")
        start = f"s_{f.checksum.start}"
        self.out += [
            f"actual = {algo}(memoryview(buf)[{start}:pos])",
            f"if actual != f_{f.name}:",
            "    raise ChecksumFailure(",
            f"        f\"{self.s.name}.{f.name}: {algo} {{actual:#010x}} != sent "
            f"{{f_{f.name}:#010x}}\", obj, pos",
            "    )",
        ]

    def need(self, n: str, f: FrameField) -> list[str]:
        return [f"if pos + {n} > end:", *indent(self.overrun(f, f"needs {n} more bytes"))]

    def overrun(self, f: FrameField, detail: str) -> list[str]:
        """The raise for a declared size that runs past the available bytes."""
        if not self.bounded and not self.in_range:
            self.ctx.imports.use(PROTOWIRE, "truncated")
            return [f"raise truncated({self.where(f)})"]
        self.ctx.imports.use(ERRORS, "SizeMismatchError")
        return raise_lines("SizeMismatchError", f"{self.s.name}.{f.name}: {detail}")

    def early_checksum(self, f: FrameField) -> bool:
        """Whether a checksum is verified as soon as it is read (the plan says when it can:
        checking first means corrupt content is never parsed, as the Java client does, and the
        error still reaches the caller as a ``ChecksumFailure``)."""
        return f.name in self.plan.early_checksums

    def field(self, op: AnyFieldOp) -> None:
        s = self.s
        f = op.field
        if any(g.checksum is not None and g.checksum.start == f.name
               and not self.early_checksum(g) for g in s.fields):
            self.out.append(f"s_{f.name} = pos")
        for g in range_starts(s, f):
            self.ctx.imports.use(ERRORS, "SizeMismatchError")
            self.out += [
                f"e_{g.name} = end",
                f"end = pos + f_{g.name}",
                f"if end > e_{g.name}:",
                *indent(raise_lines("SizeMismatchError", f"{s.name}.{g.name}: {{f_{g.name}}} "
                                "bytes run past the end of the enclosing region")),
            ]
            self.in_range += 1
            self.range_marks.append(len(self.out))
        unread = f.name in self.unread
        body = self.skip(op) if unread else self.read(op)
        if self.early_checksum(f):
            body += self.early_check(f)
        if not f.wire:
            self.out += body
        elif f.marker:
            marker = kind_op(op)
            if not isinstance(marker, Const):
                raise bug(f, f"{f.name!r}: a marker that is not a constant integer")
            width = marker.int_type.width
            packer = self.ctx.packer(width, marker.int_type.signed, marker.int_type.order)
            self.out += [f"f_{f.name} = False",
                         f"if pos + {width} <= end and {packer}.unpack_from(buf, pos)[0] == "
                         f"{marker.value:#x}:",
                         f"    f_{f.name} = True",
                         f"    pos += {width}"]
        elif f.when_remaining:
            default = literal(f.default) if f.default is not None else "None"
            if not unread:
                self.out.append(f"f_{f.name} = {default}")
            fixed = f.width_when_present
            self.out.append(f"if end - pos >= {fixed}:" if fixed else "if pos < end:")
            if fixed and body[0].startswith("if pos + ") and "raise truncated" in body[1]:
                body = body[2:]  # the guard above already made sure the bytes are there
            self.out += ["    " + line for line in body]
        elif f.when_peek is not None:
            kind, equals = f.when_peek
            width, signed = INT_TYPES[kind]
            packer = self.ctx.packer(width, signed, self.s_order())
            if not unread:
                self.out.append(f"f_{f.name} = None")
            self.out.append(f"if pos + {width} <= end and {packer}.unpack_from(buf, pos)[0] == "
                            f"{equals:#x}:")
            self.out += ["    " + line for line in body]
        elif f.when is not None:
            cond = self.render(f.when, f, parens=False)
            absent = "None" if not f.computed else literal(f.default or 0)
            if not unread:
                self.out.append(f"f_{f.name} = {absent}")
            self.out.append(f"if {cond}:")
            self.out += ["    " + line for line in body]
        else:
            self.out += body
        for g in range_ends(s, f):
            self.in_range -= 1
            # Running out of bytes inside the range means its declared size is too small.
            mark = self.range_marks.pop()
            self.ctx.imports.use(ERRORS, "TruncatedError")
            self.out[mark:] = [
                "try:", *indent(self.out[mark:]), "except TruncatedError as exc:",
                *indent(raise_lines("SizeMismatchError", f"{s.name}.{g.name}: {{f_{g.name}}} "
                                "bytes declared, too few for the content ({exc})",
                                suffix=" from exc"))]
            self.out += [
                "if pos != end:",
                *indent(raise_lines("SizeMismatchError", f"{s.name}.{g.name}: {{end - pos}} of "
                                f"the {{f_{g.name}}} bytes declared are not used")),
                f"end = e_{g.name}",
            ]

    def s_order(self) -> str:
        return self.ctx.spec.byte_order

    def int_read(self, f: FrameField, target: str, how: IntShape) -> list[str]:
        """Read an integer of ``how`` into ``target`` (``f`` names it in errors)."""
        if how == "lenenc":
            return lenenc_read(self.ctx, self.where(f), target)
        if how == "varint":
            self.ctx.imports.use(PROTOWIRE, "read_varint")
            self.ctx.imports.use(PROTOWIRE, "truncated")
            return ["try:",
                    f"    {target}, pos = read_varint(buf, pos)",
                    "except IndexError:",
                    f"    raise truncated({self.where(f)}) from None",
                    "if pos > end:",
                    f"    raise truncated({self.where(f)})"]
        if how == "bool":
            return [*self.need("1", f), f"{target} = buf[pos] != 0", "pos += 1"]
        if how.width == 1 and not how.signed:
            return [*self.need("1", f), f"{target} = buf[pos]", "pos += 1"]
        packer = self.ctx.packer(how.width, how.signed, how.order)
        return [*self.need(str(how.width), f), f"{target} = {packer}.unpack_from(buf, pos)[0]",
                f"pos += {how.width}"]

    def region_end(self, f: FrameField, region: Region) -> tuple[list[str], str]:
        """Statements computing ``vend``, the end of a sized field's bytes, and its name."""
        self.ctx.imports.use(ERRORS, "SizeMismatchError")
        if region.length is not None:
            return (self.need(str(region.length), f) + [f"vend = pos + {region.length}"],
                    "vend")
        if region.size == "rest":
            return [], "end"
        if region.size is not None:
            ref = "f_" + region.size if "." not in region.size else self.dotted(region.size)
            # A signed size, or one read from a message, may be negative.
            check = "vend > end" if region.size_unsigned else f"{ref} < 0 or vend > end"
            return [f"vend = pos + {ref}", f"if {check}:",
                    *indent(self.overrun(f, f"size {{{ref}}} runs past the end of its "
                                             "region"))], "vend"
        if region.prefix is not None:
            lines = self.int_read(f, "n", region.prefix)
            self.ctx.imports.use(PROTOWIRE, "truncated")
            # An unsigned prefix is never negative.
            signed = isinstance(region.prefix, IntType) and region.prefix.signed
            check = "n < 0 or " if signed else ""
            lines += ["vend = pos + n", f"if {check}vend > end:",
                      f"    raise truncated({self.where(f)})"]
            return lines, "vend"
        return [], "end"

    def dotted(self, ref: str) -> str:
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
        return "f_" + head + "." + ".".join(attrs)

    def skip(self, op: AnyFieldOp) -> list[str]:
        """Step over the bytes of a field whose value nothing reads (none if it has none)."""
        kind = kind_op(op)
        if isinstance(kind, Bits | SubField):
            return []
        how = int_read_of(kind)
        if isinstance(kind, ReadVarint) and kind.max_bytes is not None:
            return bounded_read(self.ctx, self.where(op.field), "_", kind.max_bytes)
        if how == "varint" or how == "lenenc":
            return self.int_read(op.field, "_", how)  # a varint's length is known once read
        width = 1 if how == "bool" else how.width
        return [*self.need(str(width), op.field), f"pos += {width}"]

    def read(self, op: AnyFieldOp) -> list[str]:
        match op:
            case Marker(inner=inner):
                return self.value(inner, check_const=False)  # ``field`` peeks for the marker
            case (OptionalScalar(inner=inner) | Condition(inner=inner) | Computed(inner=inner)
                  | WithArgs(inner=inner) | Prefix(inner=inner) | FixedLength(inner=inner)
                  | Default(inner=inner)):
                return self.value(inner)
            case _:
                return self.value(op)

    def value(self, op: KindOp, check_const: bool = True) -> list[str]:
        """Read the value of ``op``'s field into ``f_<name>``."""
        f = op.field
        target = f"f_{f.name}"
        match op:
            case Bits(expr=expr, as_bool=as_bool):
                derived = self.render(expr, f, parens=False)
                return [f"{target} = bool({derived})" if as_bool else f"{target} = {derived}"]
            case SizeOf(adjust=adjust) | SizeRest(adjust=adjust) | ReadVarint(
                    adjust=adjust) if adjust:
                return adjusted_size(self, op, target)
            case ReadInt(int_type=t) | SizeOf(int_type=t) | Checksum(int_type=t):
                return self.int_read(f, target, t)
            case ReadPacked(int_type=t, reserved=reserved):
                return [*self.int_read(f, target, t),
                        *reserved_check(self.ctx, f"{self.s.name}.{f.name}", target, reserved)]
            case SubField(container=container):
                bits = 8 * fixed_int(kind_op(self.plan.op(container))).width
                return as_enum(self.ctx, op, f"{self.s.name}.{f.name}", target,
                               unpack(op, self.name(container), bits))
            case Const(int_type=t, value=const):
                return [*self.int_read(f, target, t),
                        *(self.const_check(f, target, const) if check_const else [])]
            case SizeRest(int_type=t):
                return [*self.int_read(f, target, t), *self.sets_end(f, target, t.signed)]
            case ReadVarint(const=const, sets_end=sets_end) | ReadBool(const=const,
                                                                       sets_end=sets_end):
                lines = (bounded_read(self.ctx, self.where(f), target, op.max_bytes)
                         if isinstance(op, ReadVarint) and op.max_bytes is not None
                         else self.int_read(f, target, int_read_of(op)))
                if const is not None and check_const:
                    lines += self.const_check(f, target, const)
                if sets_end:
                    lines += self.sets_end(f, target, False)
                return lines
            case ReadLenenc(const=const, nullable=nullable):
                lines = lenenc_read(self.ctx, self.where(f), target, nullable)
                if const is not None and check_const:
                    lines += self.const_check(f, target, const)
                return lines
            case ReadUuid():
                return [*self.need("16", f), f"{target} = UUID(bytes=buf[pos : pos + 16])",
                        "pos += 16"]
            case BytesSized(region=region) | BytesToEnd(region=region) | BytesOther(
                    region=region):
                lines, vend = self.region_end(f, region)
                return self.null_or(f, region, target, "bytes", [
                    *lines, f"{target} = buf[pos:{vend}]", f"pos = {vend}"])
            case String(encoding=encoding, region=region):
                lines, vend = self.region_end(f, region)
                if encoding == "mutf8":
                    self.ctx.imports.use(MUTF8, "decode as mutf8_decode")
                    lines.append(f"{target} = mutf8_decode(buf[pos:{vend}], {self.where(f)})")
                else:
                    self.ctx.imports.use(PROTOWIRE, "decode_str")
                    lines.append(f"{target} = decode_str(buf, pos, {vend}, {self.where(f)})")
                return self.null_or(f, region, target, "str", [*lines, f"pos = {vend}"])
            case ProtoBody(region=region) | Envelope(region=region) | ProtoOther(region=region):
                lines, vend = self.region_end(f, region)
                proto = proto_of(op)
                lines += self.sized_call(f, self.proto_read(proto, target, vend), vend)
                return [*lines, f"pos = {vend}"]
            case Nested(region=region) | NestedOther(region=region):
                lines, vend = (self.region_end(f, region)
                               if (region.size or region.prefix or region.length)
                               else ([], "end"))
                args = call_args(f.args, self.s, self.name, f)
                call = f"{op.struct.name}.decode_from(buf, pos, {vend}{args})"
                return [*lines, *self.struct_call(f, op.struct, target, call, vend)]
            case Array():
                return array_field(self, op, target)
            case Switch():
                return switch_field(self, op, target)
            case Blocks():
                return blocks_field(self, op, target)
            case Terminated() | ConstBytes() | RangedInt():
                return decode_value(self, op, target)
            case MaskedBytes():
                return mask_decode(self, op, target)
            case ReadFloat():
                return decode_float(self, op, target)
            case _:
                assert_never(op)

    def null_or(self, f: FrameField, region: Region, target: str, kind: str,
                read: list[str]) -> list[str]:
        """``read`` (which reads the prefix ``n`` first), or None when ``n`` is -1 in a
        nullable field (``kind``: the value's type)."""
        if not region.nullable:
            return read
        head = self.int_read(f, "n", region.prefix) if region.prefix is not None else []
        if not head or read[: len(head)] != head:
            raise bug(f, f"{f.name!r}: a nullable field's region does not start with its prefix")
        if region.prefix == "lenenc":  # MySQL's NULL (0xfb) rather than -1
            return [*lenenc_read(self.ctx, self.where(f), "n_or_null", nullable=True),
                    "if n_or_null is None:", f"    {target}: {kind} | None = None", "else:",
                    "    n = n_or_null", *indent(read[len(head):])]
        # Annotated where first bound, so that the type checker takes both branches' types.
        return [*head, "if n == -1:", f"    {target}: {kind} | None = None", "else:",
                *indent(read[len(head):])]

    def const_check(self, f: FrameField, target: str, const: int) -> list[str]:
        self.ctx.imports.use(ERRORS, "BadMagicError")
        return [f"if {target} != {const:#x}:", *indent(raise_lines(
            "BadMagicError", f"{self.s.name}.{f.name}: expected {const:#x}, got "
            f"{{{target}:#x}}"))]

    def sets_end(self, f: FrameField, target: str, signed: bool) -> list[str]:
        """The size of the rest just read becomes the end of the region."""
        check = f"{target} < 0 or " if signed else ""
        lines = [f"if {check}pos + {target} > end:",
                 *indent(self.overrun(f, f"{{{target}}} bytes announced, {{end - pos}} there")),
                 f"end = pos + {target}"]
        self.bounded = True  # after the check above, which runs before the end is set
        return lines

    def proto_read(self, f: ProtoField, target: str, vend: str) -> list[str]:
        assert f.message is not None
        ref = self.ctx.proto_ref(f.message.py_path, f.message.full_name)
        if f.dispatch_on is None:
            return [f"{target} = {ref}.decode_from(buf, pos, {vend})"]
        self.ctx.imports.use(ERRORS, "MissingRequiredFieldError")
        self.ctx.imports.use(PROTOWIRE, "unknown_command_type")
        on = f.dispatch_on.proto_name
        return [
            "try:",
            f"    {target} = {ref}.decode_from(buf, pos, {vend})",
            "except MissingRequiredFieldError as exc:",
            f"    if exc.field_name != {q(on)}:",
            "        raise",
            f"    raise unknown_command_type({q(f.message.proto_name + '.' + on)}, buf, pos, "
            f"{vend}, {f.dispatch_on.number}) from exc",
            *self.dispatch_check(f, target),
        ]

    def sized_call(self, f: FrameField, call_lines: list[str], vend: str) -> list[str]:
        """Run a nested decode; inside a declared size, running out is a size mismatch."""
        if vend == "end":
            return call_lines
        self.ctx.imports.use(ERRORS, "TruncatedError")
        self.ctx.imports.use(ERRORS, "SizeMismatchError")
        return ["try:", *indent(call_lines),
                "except TruncatedError as exc:",
                *indent(raise_lines("SizeMismatchError", f"{self.s.name}.{f.name}: declared size "
                                "too small for the content ({exc})", suffix=" from exc"))]

    def struct_call(self, f: FrameField, struct: StructDef, target: str, call: str,
                    vend: str) -> list[str]:
        check = []
        if vend != "end":
            self.ctx.imports.use(ERRORS, "SizeMismatchError")
            check = [f"if pos != {vend}:", *indent(raise_lines(
                "SizeMismatchError", f"{self.s.name}.{f.name}: content does not fill its "
                "declared size", fmt=False))]
        if not has_checksum(struct):
            return [*self.sized_call(f, [f"{target}, pos = {call}"], vend), *check]
        return [
            "try:",
            *["    " + x for x in self.sized_call(f, [f"{target}, pos = {call}"], vend)],
            "except ChecksumFailure as exc:",
            "    bad = exc",
            *self.checksum_value(f, struct, target),
            *check,
        ]

    def checksum_value(self, f: FrameField, struct: StructDef, target: str) -> list[str]:
        """Keep what a nested struct decoded before its checksum failed, if anything."""
        name = struct.name
        if f.optional:
            return [f"    {target} = exc.value if isinstance(exc.value, {name}) "
                    "else None", "    pos = exc.pos"]
        return ["    if not isinstance(exc.value, " + name + "):", "        raise",
                f"    {target}, pos = exc.value, exc.pos"]

    def dispatch_check(self, f: ProtoField, target: str) -> list[str]:
        assert f.dispatch_on is not None and f.message is not None
        self.ctx.imports.use(ERRORS, "MissingBodyError")
        return [
            f"if getattr({target}, _BODY_FIELDS[{target}.{f.dispatch_on.py_name}]) is None:",
            f"    raise MissingBodyError(f\"{f.message.proto_name} of type "
            f"{{{target}.{f.dispatch_on.py_name}.name}} lacks its body field\")",
        ]
