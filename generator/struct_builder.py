"""Structs and their fields: from the spec's keys to resolved ``FrameField``s.

Sizes, counts, switch keys and checksums are resolved against the fields of the same struct,
and each field is checked against what its kind allows.
"""

from __future__ import annotations

import keyword
from typing import Any

from protoframe.generator.bit_fields import bit_parts
from protoframe.generator.build_context import PathT
from protoframe.generator.case_rules import CaseRules
from protoframe.generator.expr import Expr, parse
from protoframe.generator.frame_ir import (
    INT_TYPES,
    ArrayField,
    BlocksField,
    BoolField,
    BytesField,
    Checksum,
    Compression,
    FloatField,
    FrameField,
    IntField,
    Param,
    ProtoCommand,
    ProtoField,
    StringField,
    StructDef,
    StructField,
    SwitchField,
    UuidField,
    VarintField,
    held_struct,
    raw_indices,
)
from protoframe.generator.ir import Field, Label, MessageType
from protoframe.generator.length_rules import (
    check_header,
    check_varint_rest,
    lenenc_nullable,
    read_adjustment,
    read_lenenc,
    read_max_bytes,
)
from protoframe.generator.literals import LiteralError, integer
from protoframe.generator.mask_rules import check_mask, read_mask
from protoframe.generator.spec_yaml import LocDict, LocList
from protoframe.generator.switch_rules import check_case_args, key_fits
from protoframe.generator.value_rules import ValueRules


class StructBuilder(ValueRules, CaseRules):
    # -- fields -------------------------------------------------------------------------------
    def type_names(self) -> set[str]:
        """The struct and frame type names the spec declares."""
        structs = self.root.get("structs", LocDict())
        frame = self.root.get("frame", LocDict())
        names = set(structs) if isinstance(structs, dict) else set()
        if isinstance(frame, dict) and isinstance(frame.get("name"), str):
            names.add(frame["name"])
        return names

    def params(self, body: LocDict, path: PathT) -> list[Param]:
        out: list[Param] = []
        for name, kind in body.get("params", LocDict()).items():
            ppath = [*path, "params", name]
            if keyword.iskeyword(name) or name.startswith("_") or name in _RESERVED_PARAMS:
                self.error(f"invalid param name {name!r}: a Python keyword, a private name or "
                           "a name the generated methods use", ppath, key=True)
            out.append(Param(name, "bool" if kind == "bool" else "int", self.loc(ppath, True)))
        return out

    def fields(self, raw: LocList, path: PathT) -> list[FrameField]:
        out: list[FrameField] = []
        seen: set[str] = set()
        for i, item in enumerate(raw):
            fpath = [*path, i]
            name = item["name"]
            if keyword.iskeyword(name) or name.startswith("_"):
                self.error(f"invalid identifier {name!r}: a Python keyword or private name",
                           [*fpath, "name"])
            elif name in _ANNOTATION_NAMES or name in self.type_names():
                # A class attribute of that name would be what mypy sees in the annotations
                # of the class's other fields and methods.
                self.error(f"field name {name!r} would hide the type {name} in the generated "
                           "class's annotations; choose another name", [*fpath, "name"])
            if name in seen:
                self.error(f"duplicate field name {name!r}", [*fpath, "name"])
            seen.add(name)
            out.append(self.field(item, fpath))
            if "bits" in item:
                for j, sub in bit_parts(self, out[-1], item, fpath):
                    spath: PathT = [*fpath, "bits", j, "name"]
                    if sub.name in _ANNOTATION_NAMES or sub.name in self.type_names():
                        self.error(f"field name {sub.name!r} would hide the type {sub.name} in "
                                   "the generated class's annotations; choose another name",
                                   spath)
                    if sub.name in seen:
                        self.error(f"duplicate field name {sub.name!r}", spath)
                    seen.add(sub.name)
                    out.append(sub)
        return out

    def field(self, item: LocDict, path: PathT) -> FrameField:
        kind = item["type"]
        name, doc, loc = item["name"], item.get("doc", ""), self.loc([*path, "name"])
        f: FrameField
        if kind in INT_TYPES:
            width, signed = INT_TYPES[kind]
            f = IntField(name=name, doc=doc, location=loc, width=width, signed=signed,
                         order=item.get("order", self.byte_order))
        elif kind in FLOAT_WIDTHS:
            f = FloatField(name=name, doc=doc, location=loc, width=FLOAT_WIDTHS[kind],
                           order=item.get("order", self.byte_order))
        else:
            f = _FIELD_CLASSES[kind](name=name, doc=doc, location=loc)
            if "order" in item:  # an integer array's items are in the spec's byte_order
                self.error(f"order: needs an integer or float field, not {kind}",
                           [*path, "order"])
        if not isinstance(f, BytesField | StringField):  # their const: is read with their bounds
            f.const = self.int_value(item, "const", path,
                                     integral=isinstance(f, IntField | VarintField | BoolField))
        if "value" in item:
            f.value = self.expr(item["value"], [*path, "value"])
            if isinstance(f, FloatField):  # expressions compute integers only
                self.error("value: needs an integer or varint field", [*path, "value"])
        if "derive" in item:
            f.derive = self.expr(item["derive"], [*path, "derive"])
            if kind not in INT_TYPES and kind not in ("varint", "bool"):
                self.error("derive: needs an integer or bool field", [*path, "derive"])
            clash = [k for k in ("when", "when_peek", "when_remaining", "const", "size_of",
                                 "checksum") if k in item]
            if clash:
                self.error(f"derive: cannot be combined with {', '.join(clash)}",
                           [*path, "derive"])
        size_of = item.get("size_of")
        if isinstance(size_of, dict):
            f.size_range = (size_of["from"], size_of["to"])
            size_of = None
        f.size_of = size_of
        read_adjustment(f, item, path, self.error)
        f.count_of = item.get("count_of")
        if "checksum" in item:
            f.checksum = Checksum(item["checksum"]["algorithm"], item["checksum"]["from"])
        if "when" in item:
            f.when = self.expr(item["when"], [*path, "when"])
        if "when_peek" in item:
            equals = self.int_value(item["when_peek"], "equals", [*path, "when_peek"])
            # A wrong equals: was reported; the field's own constant stands in for it so that
            # the marker check below does not report the same mistake again.
            f.when_peek = (item["when_peek"]["type"],
                           equals if equals is not None else f.const or 0)
            if f.const is not None and (not isinstance(f, IntField)
                                        or f.when_peek != (kind, f.const)):
                self.error("a constant with when_peek is a marker: it must peek its own type "
                           "and value", [*path, "when_peek"])
        f.when_remaining = bool(item.get("when_remaining", False))
        f.default = item.get("default")
        if isinstance(f, IntField | VarintField) and isinstance(f.default, str):
            f.default = self.int_value(item, "default", path)
        f.length = item.get("length")
        f.size = item.get("size")
        f.prefix = item.get("prefix")
        read_lenenc(f, item, path, self.error)
        if item.get("nullable") and not lenenc_nullable(f, item, path, self.error):
            self.nullable(f, item, path)
        if isinstance(f, StringField):
            f.encoding = item.get("encoding", "utf8")
        read_max_bytes(f, item, path, self.error)
        read_mask(f, item, path, self.error)
        if "compression" in item:
            c = item["compression"]
            f.compression = Compression(c["codec"], c.get("uncompressed_size"))
        if isinstance(f, ProtoField):
            message = item.get("message")
            if message is None:
                self.error("a proto field needs message: <MessageName>", [*path, "type"])
            else:
                f.message = self.lookup_message(message, [*path, "message"])
            if "dispatch" in item and f.message is not None:
                self.proto_dispatch(f, f.message, item["dispatch"], [*path, "dispatch"])
        if isinstance(f, StructField):
            f.struct = self.lookup_struct(item.get("struct"), [*path, "struct"])
        if isinstance(f, ArrayField):
            if "of" not in item:
                self.error("an array needs of: <Struct or type>", [*path, "type"])
            else:
                f.element = self.element(item["of"], [*path, "of"])
            if "count" in item:
                f.count = self.expr(item["count"], [*path, "count"])
            f.until_end = bool(item.get("until_end", False))
        if "args" in item:
            for param, text in item["args"].items():
                arg = self.expr(text, [*path, "args", param])
                if arg is not None:
                    f.args[param] = arg
        if isinstance(f, SwitchField):
            f.switch_on = item.get("on")
            if f.switch_on is None or "cases" not in item:
                self.error("a switch needs on: <field> and cases", [*path, "type"])
            else:
                f.cases = self.cases(item["cases"], item.get("names", LocDict()), path)
        if isinstance(f, BlocksField):
            f.struct = self.lookup_struct(item.get("struct"), [*path, "struct"])
            f.block_count = item.get("block_count", "u32")
            f.block_length = item.get("block_length", "u32")
            f.block_size = item.get("block_size", 8192)
            f.max_blocks = item.get("max_blocks")
        self.read_value_rules(f, item, path)
        return f

    def element(self, of: str, path: PathT) -> FrameField:
        loc = self.loc(path)
        if of in INT_TYPES:
            width, signed = INT_TYPES[of]
            return IntField(name="item", doc="", location=loc, width=width, signed=signed,
                            order=self.byte_order)
        if of in ("varint", "bool", "uuid"):
            return _FIELD_CLASSES[of](name="item", doc="", location=loc)
        struct = self.lookup_struct(of, path)
        return StructField(name="item", doc="", location=loc, struct=struct)

    def proto_dispatch(self, f: ProtoField, message: MessageType, raw: LocDict,
                       path: PathT) -> None:
        on = next((x for x in message.fields if x.proto_name == raw["on"]), None)
        if on is None or on.type.kind != "enum" or on.type.enum is None:
            self.error(f"{message.proto_name} has no enum field {raw['on']!r} to dispatch on",
                       [*path, "on"])
            return
        f.dispatch_on = on
        by_number = {x.number: x for x in message.fields}
        for value in on.type.enum.values:
            target = by_number.get(value.number)
            if target is None or target.type.kind != "message" or target.type.message is None:
                self.error(f"dispatch: {on.type.enum.proto_name}.{value.proto_name} = "
                           f"{value.number} has no message field numbered {value.number} in "
                           f"{message.proto_name}", [*path, "on"])
                continue
            f.commands.append(ProtoCommand(value.proto_name, value.number, value.py_name,
                                           target, target.type.message))

    def nullable(self, f: FrameField, item: LocDict, path: PathT) -> None:
        """``nullable: true``: a length of -1 in the field's signed prefix stands for None."""
        if not isinstance(f, BytesField | StringField):
            self.error("nullable: needs a bytes or string field", [*path, "nullable"])
        elif f.prefix is None or not INT_TYPES.get(f.prefix, (0, False))[1]:
            self.error("nullable: needs a signed length prefix (prefix: i8, i16 or i32), whose "
                       "-1 stands for None", [*path, "nullable"])
        elif clash := [k for k in ("when", "when_peek", "when_remaining", "default", "length",
                                   "size") if k in item]:
            self.error(f"nullable: cannot be combined with {', '.join(clash)}: its presence "
                       "is in its length prefix", [*path, "nullable"])
        else:
            f.nullable = True

    def int_value(self, item: LocDict, key: str, path: PathT,
                  integral: bool = True) -> int | None:
        """``item[key]`` as an integer (a number, ``"0x0d"`` or ``"'D'"``), None when absent or
        wrong (the error reported at it); ``integral`` False: the field cannot hold one."""
        if key not in item:
            return None
        if not integral:
            self.error(f"{key}: needs an integer, varint or bool field (or, for const:, a bytes "
                       "or string field)", [*path, key])
            return None
        try:
            return integer(item[key])
        except LiteralError as exc:
            self.error(f"{key}: {exc}", [*path, key])
            return None

    # -- references inside a struct -----------------------------------------------------------
    def resolve_struct(self, struct: StructDef, is_frame: bool) -> None:
        path: PathT = ["frame"] if is_frame else ["structs", struct.name]
        names = [f.name for f in struct.fields]
        params = [p.name for p in struct.params]
        for p in struct.params:
            if p.name in names:
                self.error(f"param {p.name!r} has the name of a field", [*path, "params", p.name],
                           key=True)
        raw = raw_indices(struct)
        for i, f in enumerate(struct.fields):
            fpath = [*path, "fields", raw[i]]
            earlier = names[:i]
            later = names[i + 1 :]
            if f.size_range is not None:
                self.resolve_range(struct, f, later, fpath)
            if f.size_of is not None and f.size_of != "rest":
                if f.size_of not in later:
                    self.error(f"size_of: {f.size_of!r} is not a field after {f.name!r}",
                               [*fpath, "size_of"])
                else:
                    target = struct.field(f.size_of)
                    assert target is not None
                    if target.size not in (None, f.name):
                        self.error(f"{target.name} is sized by {target.size!r}, not {f.name!r}",
                                   [*fpath, "size_of"])
                    target.size = f.name
            if f.size_of is not None and not isinstance(f, IntField | VarintField):
                self.error("a size field must be an integer", [*fpath, "type"])
            elif f.size_of == "rest" and isinstance(f, VarintField):
                check_varint_rest(struct, i, f, fpath, self.error)
            if f.size_includes == "header":
                check_header(struct, i, f, fpath, self.error)
            if f.count_of is not None:
                target = struct.field(f.count_of)
                if not isinstance(target, ArrayField) or f.count_of not in later:
                    self.error(f"count_of: {f.count_of!r} is not an array after {f.name!r}",
                               [*fpath, "count_of"])
                else:
                    target.count = parse(f.name)
                    target.count_from_field = True
            if isinstance(f, StringField) and f.length is None and f.size is None and \
                    f.prefix is None and f.terminator is None:
                self.error("a string needs prefix: <u8|u16|u32|varint>, size: <field|rest> or "
                           "a size_of field before it", [*fpath, "type"])
            if isinstance(f, BytesField) and f.length is None and f.size is None and \
                    f.prefix is None and f.terminator is None:
                self.error("bytes need length: N, prefix: <type>, size: <field|rest> or a "
                           "size_of field before them", [*fpath, "type"])
            if isinstance(f, ArrayField) and f.count is None and not f.until_end and \
                    f.terminator is None and "count" not in self.raw_field(path, raw[i]):
                self.error("an array needs count: <expression>, a count_of field or "
                           "until_end: true", [*fpath, "type"])
            if f.checksum is not None and f.checksum.start not in later:
                self.error(f"checksum from: {f.checksum.start!r} is not a field after "
                           f"{f.name!r}", [*fpath, "checksum", "from"])
            if f.checksum is not None and not isinstance(f, IntField):
                # Patched in once what it covers is encoded, in place: a width known up front.
                self.error("a checksum field must be a fixed-width integer (u8 to u64)",
                           [*fpath, "type"])
            if isinstance(f, SwitchField) and f.switch_on is not None and \
                    not f.switch_on.isidentifier():
                self.error(f"switch on: {f.switch_on!r} is not a field name; to switch on an "
                           "expression, declare it as a derive: field before the switch (and "
                           "write the fields it is made of with value: expressions over it)",
                           [*fpath, "on"])
            elif isinstance(f, SwitchField) and f.switch_on is not None:
                key = struct.field(f.switch_on)
                if not isinstance(key, IntField | VarintField) or f.switch_on not in earlier:
                    self.error(f"switch on: {f.switch_on!r} is not an integer field before "
                               f"{f.name!r}", [*fpath, "on"])
                elif isinstance(key, IntField) and key.bits:
                    self.error(f"switch on: {f.switch_on!r} is made of bits: switch on one of "
                               "its parts", [*fpath, "on"])
                elif not key.wire and key.value is not None:
                    self.error(f"switch on: {f.switch_on!r} has a value: of its own, but a "
                               "switch key is the code of the body's class", [*fpath, "on"])
                elif key.nullable:
                    self.error(f"switch on: {f.switch_on!r} is nullable; a switch key is "
                               "always there (its NULL would choose no case)", [*fpath, "on"])
                else:
                    key.is_switch_key = True
                    if key.bit_of is not None:
                        key_fits(self, f, key.bit_of.width, self.raw_field(path, raw[i])["cases"],
                                 fpath)
            if f.when_remaining and any(not g.optional and not g.computed
                                        for g in struct.fields[i + 1 :]):
                self.error("when_remaining fields must come after every required field",
                           [*fpath, "when_remaining"])
            exprs: list[tuple[Expr | None, PathT]] = [
                (f.when, ["when"]), (f.count if isinstance(f, ArrayField) else None, ["count"]),
                (f.value, ["value"]),
                (f.derive, ["derive"])]
            exprs += [(e, ["args", n]) for n, e in f.args.items()]
            for expr, key_path in exprs:
                if expr is None:
                    continue
                key_name = key_path[0]
                for name in expr.names:
                    if name in params or name in earlier:
                        continue
                    if key_name == "value" and name in names:
                        continue
                    if key_name == "args" and name == "_index" and isinstance(f, ArrayField):
                        continue
                    self.error(f"{key_name}: {name!r} does not name a field before "
                               f"{f.name!r} or a param", [*fpath, *key_path])
                for name in expr.presence_names:
                    tested = struct.field(name)
                    never_none = (name in params if tested is None
                                  else not (tested.optional or tested.nullable))
                    if never_none:
                        self.error(f"{key_name}: {name!r} is never None: has() and 'is None' "
                                   "test an optional or nullable field", [*fpath, *key_path])
            if f.derive is not None and not f.computed:
                feeds = [g.name for g in struct.fields
                         if g.value is not None and f.name in g.value.names
                         or g.size == f.name]  # a size: it measures what it sizes
                if not feeds:
                    self.error(f"{f.name!r} is derived on decode but no value: expression puts "
                               "it on the wire", [*fpath, "derive"])
            if f.size is not None and f.size != "rest":
                self.resolve_size(struct, f, earlier, fpath)
            check_mask(struct, f, earlier, fpath, self.error)
            if f.compression is not None:
                for ref, key_name in ((f.compression.codec, "codec"),
                                      (f.compression.uncompressed_size, "uncompressed_size")):
                    if ref is not None and not self.ref_ok(struct, ref, earlier):
                        self.error(f"compression {key_name}: {ref!r} does not name a field "
                                   f"decoded before {f.name!r}",
                                   [*fpath, "compression", key_name])
        self.check_value_rules(struct, path)

    def raw_field(self, path: PathT, i: int) -> LocDict:
        node: Any = self.root
        for step in [*path, "fields", i]:
            node = node[step]
        assert isinstance(node, LocDict)
        return node

    def resolve_range(self, struct: StructDef, f: FrameField, later: list[str],
                      fpath: PathT) -> None:
        assert f.size_range is not None
        start, stop = f.size_range
        for key, name in (("from", start), ("to", stop)):
            if name not in later:
                self.error(f"size_of {key}: {name!r} is not a field after {f.name!r}",
                           [*fpath, "size_of", key])
                return
        if later.index(start) > later.index(stop):
            self.error(f"size_of: {start!r} comes after {stop!r}", [*fpath, "size_of"])
        if not isinstance(f, IntField):
            self.error("a size_of range is patched after encoding, so it needs a fixed-width "
                       "integer", [*fpath, "type"])
        if f.optional:
            self.error("a size_of range cannot be optional", [*fpath, "size_of"])

    def check_uses(self, struct: StructDef) -> None:
        """Args match the params of the struct each field holds; ``trailing: ignore`` fits."""
        path: PathT = ["frame"] if struct.is_frame else ["structs", struct.name]
        raw = raw_indices(struct)
        for i, f in enumerate(struct.fields):
            fpath = [*path, "fields", raw[i]]
            held = held_struct(f)
            cases = f.cases if isinstance(f, SwitchField) else []
            if held is not None:
                wanted = {p.name for p in held.params}
                for name in f.args:
                    if name not in wanted:
                        self.error(f"{held.name} has no param {name!r}", [*fpath, "args", name],
                                   key=True)
                missing = sorted(wanted - set(f.args))
                if missing:
                    self.error(f"{held.name} needs args for {', '.join(missing)}", fpath)
            elif f.args and not isinstance(f, SwitchField):
                self.error("args: only apply to a field holding a struct or a switch",
                           [*fpath, "args"], key=True)
            if not struct.is_frame and any(c.directional for c in cases):
                self.error("cases with to_server/to_client layouts are only possible in the "
                           "frame, whose decoder knows the direction", [*fpath, "cases"])
            if isinstance(f, SwitchField):
                check_case_args(self, f, fpath)
            bounded = bool(f.size or f.prefix or f.length) or isinstance(f, BlocksField)
            last = i == len(struct.fields) - 1
            ignoring = [t for t in ([held] if held is not None else []) +
                        [t for c in cases for t in c.structs] if t.trailing == "ignore"]
            if ignoring and not bounded and (not last or isinstance(f, ArrayField)):
                self.error(f"{ignoring[0].name} ignores trailing bytes, so unsized it would "
                           f"swallow what follows {f.name!r}", fpath)

    def resolve_size(self, struct: StructDef, f: FrameField, earlier: list[str],
                     fpath: PathT) -> None:
        assert f.size is not None
        head = f.size.split(".")[0]
        if head not in earlier:
            self.error(f"size: {f.size!r} does not name a field before {f.name!r} "
                       "(a size must come before what it measures)", [*fpath, "size"])
            return
        if "." in f.size:
            if not self.ref_ok(struct, f.size, earlier):
                self.error(f"size: {f.size!r} is not an integer field of {head!r}",
                           [*fpath, "size"])
            return
        target = struct.field(head)
        assert target is not None
        if not isinstance(target, IntField | VarintField):
            self.error(f"size: {head!r} is not an integer field", [*fpath, "size"])
            return
        if target.bit_of is not None:
            self.error(f"size: {head!r} is a bit sub-field, which encoding cannot fill in as a "
                       "size; give it a value: (len(...)) instead", [*fpath, "size"])
            return
        names = [g.name for g in struct.fields]
        if target.size_of not in (None, f.name) and (target.size_of == "rest"
                                                      or target.size_of in names):
            # A size_of that names nothing was reported already; one mistake, one error.
            self.error(f"{head!r} measures {target.size_of!r}, not {f.name!r}", [*fpath, "size"])
        target.size_of = f.name
        f.size_field = target

    def ref_ok(self, struct: StructDef, ref: str, earlier: list[str]) -> bool:
        """Whether a dotted reference names a field decoded earlier (through proto fields)."""
        parts = ref.split(".")
        if parts[0] not in earlier:
            return False
        f = struct.field(parts[0])
        assert f is not None
        if len(parts) == 1:
            return True
        msg = f.message if isinstance(f, ProtoField) else None
        for i, part in enumerate(parts[1:], start=1):
            if msg is None:
                return False
            pf: Field | None = next((x for x in msg.fields if x.proto_name == part), None)
            if pf is None or pf.label is Label.REPEATED:
                return False
            if i < len(parts) - 1:
                msg = pf.type.message
        return True


# The bytes of each floating-point type (``FloatField``).
FLOAT_WIDTHS = {"f32": 4, "f64": 8}

# The class of each field kind the spec names (the integer types are ``IntField``).
_FIELD_CLASSES: dict[str, type[FrameField]] = {
    "varint": VarintField, "bool": BoolField, "uuid": UuidField, "bytes": BytesField,
    "string": StringField, "proto": ProtoField, "struct": StructField, "array": ArrayField,
    "switch": SwitchField, "blocks": BlocksField,
}

# Types that generated frame classes name in their annotations (field types, method
# signatures): a field of the same name would hide them inside the class body.
_ANNOTATION_NAMES = frozenset({"int", "str", "bytes", "bool", "bytearray", "memoryview", "list",
                               "dict", "tuple", "float", "Self", "UUID", "Any", "Callable"})

# Names the generated encode/decode methods use for their own parameters and locals.
_RESERVED_PARAMS = {"self", "cls", "buf", "pos", "end", "out", "data", "to_server", "obj",
                    "item", "bad", "vend", "content", "parts", "used", "n", "cases", "exc",
                    "decode_body", "view", "block", "actual", "max_size", "i", "frame"}
