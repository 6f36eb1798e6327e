"""The Python view of a frame spec: classes, straight-line codecs and the frame-length probe.

Each struct becomes a slots dataclass holding only its data fields; computed fields (constants,
sizes, counts, checksums, switch keys) are derived on encode and checked on decode, so a value
built by hand can never disagree with its own header.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from generator.errors import SpecError, SpecErrors
from generator.frame_ir import CommandInfo, FrameField, FrameSpec, StructDef
from generator.pyview import bytes_literal, docstring, q

_STRUCT_CODES = {(1, False): "B", (2, False): "H", (4, False): "I", (8, False): "Q",
                 (1, True): "b", (2, True): "h", (4, True): "i", (8, True): "q"}


@dataclass
class ClassView:
    name: str
    doc: str
    fields: list[tuple[str, str]]  # (name, "annotation[ = default]")
    encode_lines: list[str]
    decode_lines: list[str]
    decode_params: str
    extra_lines: list[str]


@dataclass
class FramesModuleView:
    source: str
    module_doc: str
    imports: list[str]
    runtime_imports: list[str]
    local_imports: list[str]
    constants: list[str]
    aliases: list[str]
    classes: list[ClassView]
    frame_name: str
    length_lines: list[str]
    max_frame_size: int
    stream_params: str
    stream_args: str
    command_table: list[str]
    exports: list[str]


@dataclass
class _Ctx:
    spec: FrameSpec
    packers: dict[str, str] = field(default_factory=dict)
    proto_modules: set[str] = field(default_factory=set)
    uses: set[str] = field(default_factory=set)

    def packer(self, width: int, signed: bool, order: str) -> str:
        code = ("<" if order == "little" else ">") + _STRUCT_CODES[(width, signed)]
        name = f"_{'I' if signed else 'U'}{width * 8}{'LE' if order == 'little' else 'BE'}"
        self.packers[name] = code
        return name

    def proto_ref(self, path: str, full_name: str) -> str:
        module = self.spec.proto_modules[full_name]
        self.proto_modules.add(module)
        return f"{module}.{path}"


def build_frames_module(spec: FrameSpec) -> FramesModuleView:
    ctx = _Ctx(spec)
    errors: list[SpecError] = []
    classes: list[ClassView] = []
    aliases: list[str] = []
    ordered = _dependency_order(spec)
    for struct in ordered:
        try:
            classes.append(_class_view(ctx, struct, aliases))
        except SpecError as exc:
            errors.append(exc)
    length_lines = _length_lines(ctx, spec.frame, errors)
    if errors:
        raise SpecErrors(errors)
    directional = any(c.to_server is not c.to_client for f in spec.frame.fields for c in f.cases)
    command_table = _command_table(ctx, spec)
    imports = ["from struct import Struct"]
    if "UUID" in ctx.uses:
        imports.append("from uuid import UUID")
    runtime: dict[str, list[str]] = {}
    for use in sorted(ctx.uses - {"UUID"}):
        module, name = use.split(":")
        runtime.setdefault(module, []).append(name)
    runtime_imports = []
    for m, names in sorted(runtime.items()):
        line = f"from runtime.{m} import {', '.join(names)}"
        if len(line) > 100:
            line = f"from runtime.{m} import (\n" + "".join(f"    {n},\n" for n in names) + ")"
        runtime_imports.append(line)
    runtime_imports.append("from runtime.stream import FrameStream")
    doc = spec.doc or f"Frames of the {spec.protocol} protocol."
    return FramesModuleView(
        source=spec.path,
        module_doc=docstring(f"{doc}\n\nFrame layouts and codecs generated from {spec.path}.", ""),
        imports=imports,
        runtime_imports=sorted(runtime_imports),
        local_imports=[f"from . import {m}" for m in sorted(ctx.proto_modules)],
        constants=[f'{name} = Struct("{code}")' for name, code in sorted(ctx.packers.items())],
        aliases=aliases,
        classes=classes,
        frame_name=spec.frame.name,
        length_lines=length_lines,
        max_frame_size=spec.max_frame_size,
        stream_params=", to_server: bool = False" if directional else "",
        stream_args=", to_server=to_server" if directional else "",
        command_table=command_table,
        exports=sorted([c.name for c in classes] + ["StreamDecoder", "frame_length"]),
    )


def _dependency_order(spec: FrameSpec) -> list[StructDef]:
    """Structs before the structs that contain them, so class bodies read top-down."""
    out: list[StructDef] = []
    seen: set[str] = set()

    def visit(s: StructDef) -> None:
        if s.name in seen:
            return
        seen.add(s.name)
        for f in s.fields:
            for dep in _struct_deps(f):
                visit(dep)
        out.append(s)

    for s in spec.structs:
        visit(s)
    visit(spec.frame)
    return out


def _struct_deps(f: FrameField) -> list[StructDef]:
    deps = [f.struct] if f.struct is not None else []
    if f.element is not None and f.element.struct is not None:
        deps.append(f.element.struct)
    for c in f.cases:
        deps += c.structs
    return deps


# ---------------------------------------------------------------------------------------------
# annotations


def _ann(ctx: _Ctx, struct: StructDef, f: FrameField) -> str:
    if f.kind in ("int", "varint"):
        return "int"
    if f.kind == "bool":
        return "bool"
    if f.kind == "uuid":
        ctx.uses.add("UUID")
        return "UUID"
    if f.kind == "bytes":
        return "bytes"
    if f.kind == "string":
        return "str"
    if f.kind == "proto":
        assert f.message is not None
        return ctx.proto_ref(f.message.py_path, f.message.full_name)
    if f.kind in ("struct", "blocks"):
        assert f.struct is not None
        return f.struct.name
    if f.kind == "array":
        assert f.element is not None
        return f"list[{_ann(ctx, struct, f.element)}]"
    if f.kind == "switch":
        return _alias_name(struct, f)
    raise AssertionError(f.kind)


def _alias_name(struct: StructDef, f: FrameField) -> str:
    return struct.name + "".join(p.capitalize() for p in f.name.split("_"))


def _has_checksum(s: StructDef, seen: frozenset[str] = frozenset()) -> bool:
    if s.name in seen:
        return False
    for f in s.fields:
        if f.checksum is not None:
            return True
        if f.kind in ("struct", "blocks") and f.struct is not None and \
                _has_checksum(f.struct, seen | {s.name}):
            return True
    return False


def _class_view(ctx: _Ctx, s: StructDef, aliases: list[str]) -> ClassView:
    fields: list[tuple[str, str]] = []
    for f in s.data_fields:
        ann = _ann(ctx, s, f)
        if f.kind == "switch":
            members = sorted({c.name for case in f.cases for c in case.structs})
            alias = f"{_alias_name(s, f)} = " + " | ".join(members)
            if len(alias) > 100:
                alias = f"{_alias_name(s, f)} = (\n    " + "\n    | ".join(members) + "\n)"
            aliases.append(alias)
        if f.when_remaining and f.default is not None:
            fields.append((f.name, f"{ann} = {_literal(f.default)}"))
        elif f.optional:
            fields.append((f.name, f"{ann} | None = None"))
        else:
            fields.append((f.name, ann))
    doc_lines = [s.doc or f"The {s.name} layout."]
    documented = [f for f in s.data_fields if f.doc]
    if documented:
        doc_lines += ["", "Attributes:"] + [f"    {f.name}: {f.doc}" for f in documented]
    directional = s.is_frame and any(c.to_server is not c.to_client
                                     for f in s.fields for c in f.cases)
    params = "buf: bytes, pos: int, end: int" + (", to_server: bool = False"
                                                 if directional else "")
    return ClassView(
        name=s.name,
        doc=docstring("\n".join(doc_lines), "    "),
        fields=fields,
        encode_lines=_Encoder(ctx, s).lines(),
        decode_lines=_Decoder(ctx, s).lines(),
        decode_params=params,
        extra_lines=_extras(ctx, s),
    )


def _literal(value: object) -> str:
    return q(value) if isinstance(value, str) else repr(value)


# ---------------------------------------------------------------------------------------------
# decoding


class _Decoder:
    def __init__(self, ctx: _Ctx, s: StructDef) -> None:
        self.ctx = ctx
        self.s = s
        self.out: list[str] = []
        self.consumes_rest = False

    def where(self, f: FrameField) -> str:
        return q(f"{self.s.name}.{f.name}")

    def lines(self) -> list[str]:
        s = self.s
        checksum_wrap = any(f.kind in ("struct", "blocks") and f.struct is not None
                            and _has_checksum(f.struct) for f in s.fields)
        if checksum_wrap:
            self.out.append("bad: ChecksumFailure | None = None")
            self.ctx.uses.add("errors:ChecksumFailure")
        for f in s.fields:
            self.field(f)
        if self.consumes_rest:
            self.ctx.uses.add("errors:SizeMismatchError")
            self.out += ["if pos != end:",
                         f"    raise SizeMismatchError(f\"{s.name}: {{end - pos}} bytes left "
                         "over after the last field\")"]
        args = ", ".join(f"{f.name}=f_{f.name}" for f in s.data_fields)
        self.out.append(f"obj = cls({args})")
        for f in s.fields:
            if f.checksum is not None:
                self.checksum_check(f)
        if checksum_wrap:
            self.out += ["if bad is not None:", "    raise ChecksumFailure(str(bad), obj, pos)"]
        self.out.append("return obj, pos")
        return self.out

    def checksum_check(self, f: FrameField) -> None:
        assert f.checksum is not None
        algo = f.checksum.algorithm
        self.ctx.uses.add(f"checksums:{algo}")
        self.ctx.uses.add("errors:ChecksumFailure")
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
        self.ctx.uses.add("protowire:truncated")
        return [f"if pos + {n} > end:", f"    raise truncated({self.where(f)})"]

    def field(self, f: FrameField) -> None:
        s = self.s
        if any(g.checksum is not None and g.checksum.start == f.name for g in s.fields):
            self.out.append(f"s_{f.name} = pos")
        body = self.read(f)
        if f.when_remaining:
            self.consumes_rest = True
            default = _literal(f.default) if f.default is not None else "None"
            self.out.append(f"f_{f.name} = {default}")
            self.out.append("if pos < end:")
            self.out += ["    " + line for line in body]
        elif f.when_peek is not None:
            kind, equals = f.when_peek
            from generator.frame_ir import INT_TYPES

            width, signed = INT_TYPES[kind]
            packer = self.ctx.packer(width, signed, self.s_order())
            self.out.append(f"f_{f.name} = None")
            self.out.append(f"if pos + {width} <= end and {packer}.unpack_from(buf, pos)[0] == "
                            f"{equals:#x}:")
            self.out += ["    " + line for line in body]
        elif f.when is not None:
            cond = f.when.render(lambda n: f"f_{n}")
            self.out.append(f"f_{f.name} = None")
            self.out.append(f"if {cond}:")
            self.out += ["    " + line for line in body]
        else:
            self.out += body

    def s_order(self) -> str:
        return self.ctx.spec.byte_order

    def int_read(self, f: FrameField, target: str) -> list[str]:
        if f.kind == "varint":
            self.ctx.uses.add("protowire:read_varint")
            self.ctx.uses.add("protowire:truncated")
            return [f"{target}, pos = read_varint(buf, pos)", "if pos > end:",
                    f"    raise truncated({self.where(f)})"]
        if f.kind == "bool":
            return [*self.need("1", f), f"{target} = buf[pos] != 0", "pos += 1"]
        if f.width == 1 and not f.signed:
            return [*self.need("1", f), f"{target} = buf[pos]", "pos += 1"]
        packer = self.ctx.packer(f.width, f.signed, f.order)
        return [*self.need(str(f.width), f), f"{target} = {packer}.unpack_from(buf, pos)[0]",
                f"pos += {f.width}"]

    def region_end(self, f: FrameField) -> tuple[list[str], str]:
        """Statements computing ``vend``, the end of a sized field's bytes, and its name."""
        self.ctx.uses.add("errors:SizeMismatchError")
        if f.length is not None:
            return self.need(str(f.length), f) + [f"vend = pos + {f.length}"], "vend"
        if f.size == "rest":
            self.consumes_rest = True
            return [], "end"
        if f.size is not None:
            ref = "f_" + f.size if "." not in f.size else self.dotted(f.size)
            return [f"vend = pos + {ref}", "if vend > end:",
                    f"    raise SizeMismatchError(f\"{self.s.name}.{f.name}: size {{{ref}}} "
                    "runs past the end of its frame\")"], "vend"
        if f.prefix is not None:
            fake = FrameField(name=f.name, kind="varint" if f.prefix == "varint" else "int",
                              doc="", location=f.location, order=self.s_order())
            if f.prefix != "varint":
                from generator.frame_ir import INT_TYPES

                fake.width, fake.signed = INT_TYPES[f.prefix]
            lines = self.int_read(fake, "n")
            self.ctx.uses.add("protowire:truncated")
            lines += ["vend = pos + n", "if n < 0 or vend > end:",
                      f"    raise truncated({self.where(f)})"]
            return lines, "vend"
        self.consumes_rest = True
        return [], "end"

    def dotted(self, ref: str) -> str:
        head, *rest = ref.split(".")
        target = self.s.field(head)
        assert target is not None and target.message is not None
        msg = target.message
        attrs = []
        for part in rest:
            pf = next(x for x in msg.fields if x.proto_name == part)
            attrs.append(pf.py_name)
            if pf.type.message is not None:
                msg = pf.type.message
        return "f_" + head + "." + ".".join(attrs)

    def read(self, f: FrameField) -> list[str]:
        target = f"f_{f.name}"
        if f.kind in ("int", "varint", "bool"):
            lines = self.int_read(f, target)
            if f.const is not None:
                self.ctx.uses.add("errors:BadMagicError")
                lines += [f"if {target} != {f.const:#x}:",
                          f"    raise BadMagicError(f\"{self.s.name}.{f.name}: expected "
                          f"{f.const:#x}, got {{{target}:#x}}\")"]
            if f.size_of == "rest":
                self.ctx.uses.add("protowire:truncated")
                lines += [f"if pos + {target} > end:", f"    raise truncated({self.where(f)})",
                          f"end = pos + {target}"]
                self.consumes_rest = True
            return lines
        if f.kind == "uuid":
            return [*self.need("16", f), f"{target} = UUID(bytes=buf[pos : pos + 16])",
                    "pos += 16"]
        if f.kind in ("bytes", "string", "proto"):
            lines, vend = self.region_end(f)
            if f.kind == "bytes":
                lines.append(f"{target} = buf[pos:{vend}]")
            elif f.kind == "string":
                if f.encoding == "mutf8":
                    self.ctx.uses.add("mutf8:decode as mutf8_decode")
                    lines.append(f"{target} = mutf8_decode(buf[pos:{vend}], {self.where(f)})")
                else:
                    self.ctx.uses.add("protowire:decode_str")
                    lines.append(f"{target} = decode_str(buf, pos, {vend}, {self.where(f)})")
            else:
                assert f.message is not None
                ref = self.ctx.proto_ref(f.message.py_path, f.message.full_name)
                if f.dispatch_on is not None:
                    self.ctx.uses.add("errors:MissingRequiredFieldError")
                    self.ctx.uses.add("errors:UnknownCommandError")
                    on = f.dispatch_on.proto_name
                    lines += [
                        "try:",
                        f"    {target} = {ref}.decode_from(buf, pos, {vend})",
                        "except MissingRequiredFieldError as exc:",
                        f"    if exc.field_name != {q(on)}:",
                        "        raise",
                        f"    raise UnknownCommandError(\"{f.message.proto_name}.{on} is missing "
                        "or not a known command type\") from exc",
                    ]
                    lines += self.dispatch_check(f, target)
                else:
                    lines.append(f"{target} = {ref}.decode_from(buf, pos, {vend})")
            lines.append(f"pos = {vend}")
            return lines
        if f.kind == "struct":
            assert f.struct is not None
            lines, vend = self.region_end(f) if (f.size or f.prefix or f.length) else ([], "end")
            call = f"{f.struct.name}.decode_from(buf, pos, {vend})"
            lines += self.struct_call(f, target, call, vend)
            return lines
        if f.kind == "array":
            return self.array(f, target)
        if f.kind == "switch":
            return self.switch(f, target)
        if f.kind == "blocks":
            return self.blocks(f, target)
        raise AssertionError(f.kind)

    def struct_call(self, f: FrameField, target: str, call: str, vend: str) -> list[str]:
        assert f.struct is not None
        check = []
        if vend != "end":
            self.ctx.uses.add("errors:SizeMismatchError")
            check = [f"if pos != {vend}:",
                     f"    raise SizeMismatchError(\"{self.s.name}.{f.name}: content does not "
                     "fill its declared size\")"]
        if not _has_checksum(f.struct):
            return [f"{target}, pos = {call}", *check]
        return [
            "try:",
            f"    {target}, pos = {call}",
            "except ChecksumFailure as exc:",
            "    bad = exc",
            f"    assert isinstance(exc.value, {f.struct.name})",
            f"    {target}, pos = exc.value, exc.pos",
            *check,
        ]

    def dispatch_check(self, f: FrameField, target: str) -> list[str]:
        assert f.dispatch_on is not None and f.message is not None
        self.ctx.uses.add("errors:MissingBodyError")
        return [
            f"if getattr({target}, _BODY_FIELDS[{target}.{f.dispatch_on.py_name}]) is None:",
            f"    raise MissingBodyError(f\"{f.message.proto_name} of type "
            f"{{{target}.{f.dispatch_on.py_name}.name}} lacks its body field\")",
        ]

    def array(self, f: FrameField, target: str) -> list[str]:
        assert f.element is not None
        el = f.element
        item_ann = _ann(self.ctx, self.s, el)
        lines = [f"{target}: list[{item_ann}] = []"]
        if el.kind == "struct":
            assert el.struct is not None
            one = [f"item, pos = {el.struct.name}.decode_from(buf, pos, end)",
                   f"{target}.append(item)"]
        else:
            one = [*self.int_read(el, "item"), f"{target}.append(item)"] if el.kind != "uuid" \
                else [*self.need("16", el), f"{target}.append(UUID(bytes=buf[pos : pos + 16]))",
                      "pos += 16"]
        if f.until_end:
            self.consumes_rest = True
            lines.append("while pos < end:")
        else:
            assert f.count is not None
            count = f.count.render(lambda n: f"f_{n}")
            lines.append(f"for _ in range({count}):")
        lines += ["    " + x for x in one]
        return lines

    def switch(self, f: FrameField, target: str) -> list[str]:
        self.ctx.uses.add("errors:UnknownCommandError")
        lines, vend = self.region_end(f) if (f.size or f.prefix) else ([], "end")
        key = f"f_{f.switch_on}"
        table = _case_table(self.s, f, "to_client")
        directional = any(c.to_server is not c.to_client for c in f.cases)
        if directional:
            lines.append(f"cases = {_case_table(self.s, f, 'to_server')} if to_server else "
                         f"{table}")
        else:
            lines.append(f"cases = {table}")
        lines += [
            f"decode_body = cases.get({key})",
            "if decode_body is None:",
            f"    raise UnknownCommandError(f\"{self.s.name}.{f.switch_on}: no layout for "
            f"{{{key}}}\")",
            f"{target}, pos = decode_body(buf, pos, {vend})",
        ]
        if vend != "end":
            self.ctx.uses.add("errors:SizeMismatchError")
            lines += [f"if pos != {vend}:",
                      f"    raise SizeMismatchError(f\"{self.s.name}.{f.name}: body used {{pos}} "
                      f"of {{{vend}}} bytes\")"]
        return lines

    def blocks(self, f: FrameField, target: str) -> list[str]:
        assert f.struct is not None
        from generator.frame_ir import INT_TYPES

        cw, cs = INT_TYPES[f.block_count]
        lw, ls = INT_TYPES[f.block_length]
        cp = self.ctx.packer(cw, cs, self.s_order())
        lp = self.ctx.packer(lw, ls, self.s_order())
        self.ctx.uses.add("errors:SizeMismatchError")
        self.ctx.uses.add("protowire:truncated")
        lines = [*self.need(str(cw), f), f"count = {cp}.unpack_from(buf, pos)[0]", f"pos += {cw}"]
        if f.max_blocks is not None:
            lines += [f"if count > {f.max_blocks}:",
                      f"    raise SizeMismatchError(f\"{self.s.name}.{f.name}: {{count}} blocks, "
                      f"more than {f.max_blocks}\")"]
        lines += [
            "parts: list[bytes] = []",
            "for _ in range(count):",
            *["    " + x for x in self.need(str(lw), f)],
            f"    n = {lp}.unpack_from(buf, pos)[0]",
            f"    pos += {lw}",
            f"    if n > {f.block_size} or pos + n > end:",
            f"        raise SizeMismatchError(f\"{self.s.name}.{f.name}: block of {{n}} bytes "
            "does not fit\")",
            "    parts.append(buf[pos : pos + n])",
            "    pos += n",
            "content = b\"\".join(parts)",
            f"{target}, used = {f.struct.name}.decode_from(content, 0, len(content))",
        ]
        return lines


def _case_table(s: StructDef, f: FrameField, direction: str) -> str:
    entries = []
    for c in f.cases:
        struct = getattr(c, direction) or c.structs[0]
        entries.append(f"{c.value}: {struct.name}.decode_from")
    name = f"_{s.name.upper()}_{f.name.upper()}_{direction.upper()}"
    del name
    return "{" + ", ".join(entries) + "}"


# ---------------------------------------------------------------------------------------------
# encoding


class _Encoder:
    def __init__(self, ctx: _Ctx, s: StructDef) -> None:
        self.ctx = ctx
        self.s = s
        self.out: list[str] = []
        self.patches: list[str] = []

    def lines(self) -> list[str]:
        s = self.s
        for f in s.fields:
            if f.size is not None and "." in f.size:
                self.out.append(f"{self.dotted_attr(f.size)} = len(self.{f.name})")
        for f in s.fields:
            self.field(f)
        self.out += self.patches
        return self.out or ["pass"]

    def dotted_attr(self, ref: str) -> str:
        head, *rest = ref.split(".")
        target = self.s.field(head)
        assert target is not None and target.message is not None
        msg = target.message
        attrs = []
        for part in rest:
            pf = next(x for x in msg.fields if x.proto_name == part)
            attrs.append(pf.py_name)
            if pf.type.message is not None:
                msg = pf.type.message
        return f"self.{head}." + ".".join(attrs)

    def pack(self, f: FrameField, value: str) -> list[str]:
        if f.kind == "varint":
            self.ctx.uses.add("protowire:varint_bytes")
            return [f"out += varint_bytes({value})"]
        if f.kind == "bool":
            return [f"out.append(1 if {value} else 0)"]
        if f.width == 1 and not f.signed:
            return [f"out.append({value})"]
        packer = self.ctx.packer(f.width, f.signed, f.order)
        return [f"out += {packer}.pack({value})"]

    def field(self, f: FrameField) -> None:
        s = self.s
        if any(g.checksum is not None and g.checksum.start == f.name for g in s.fields):
            self.out.append(f"s_{f.name} = len(out)")
        if f.const is not None:
            data = _const_bytes(f)
            self.out.append(f"out += {bytes_literal(data)}")
            return
        if f.checksum is not None:
            algo = f.checksum.algorithm
            self.ctx.uses.add(f"checksums:{algo}")
            packer = self.ctx.packer(f.width, f.signed, f.order)
            self.out += [f"p_{f.name} = len(out)", f"out += bytes({f.width})"]
            self.patches += [
                "with memoryview(out) as view:",
                f"    {packer}.pack_into(out, p_{f.name}, {algo}(view[s_{f.checksum.start}:]))",
            ]
            return
        if f.size_of == "rest":
            packer = self.ctx.packer(f.width, f.signed, f.order)
            self.out += [f"p_{f.name} = len(out)", f"out += bytes({f.width})"]
            self.patches.insert(0, f"{packer}.pack_into(out, p_{f.name}, "
                                   f"len(out) - p_{f.name} - {f.width})")
            return
        if f.size_of is not None:
            target = s.field(f.size_of)
            assert target is not None
            self.out += self.pre_encode(target)
            self.out += self.pack(f, f"len(b_{target.name})")
            return
        if f.count_of is not None:
            self.out += self.pack(f, f"len(self.{f.count_of})")
            return
        if f.is_switch_key:
            sw = next(g for g in s.fields if g.switch_on == f.name)
            self.out += self.pack(f, f"_{s.name.upper()}_{sw.name.upper()}_CODES"
                                     f"[type(self.{sw.name})]")
            return
        if f.value is not None:
            expr = f.value.render(lambda n: f"self.{n}")
            self.out += self.pack(f, expr)
            return
        body = self.write(f)
        if f.optional:
            self.out.append(f"if self.{f.name} is not None:")
            self.out += ["    " + line for line in body]
        else:
            self.out += body

    def pre_encode(self, f: FrameField) -> list[str]:
        """Encode a sized field ahead of its size, into ``b_<name>``."""
        value = f"self.{f.name}"
        if f.kind == "bytes":
            return [f"b_{f.name} = {value}"]
        if f.kind == "string":
            return [f"b_{f.name} = {self.str_bytes(f, value)}"]
        if f.kind in ("proto", "struct"):
            if f.optional:
                return [f"b_{f.name} = b\"\" if {value} is None else {value}.encode()"]
            return [f"b_{f.name} = {value}.encode()"]
        if f.kind == "switch":
            return [f"b_{f.name} = {value}.encode()"]
        if f.kind == "array":
            return ["buf = bytearray()", f"for item in {value}:",
                    *["    " + x.replace("out", "buf") for x in self.item(f)], f"b_{f.name} = buf"]
        raise SpecError(f"size_of cannot measure a {f.kind} field", f.location.path,
                        f.location.line, f.location.column)

    def str_bytes(self, f: FrameField, value: str) -> str:
        if f.encoding == "mutf8":
            self.ctx.uses.add("mutf8:encode as mutf8_encode")
            return f"mutf8_encode({value})"
        return f"{value}.encode()"

    def item(self, f: FrameField) -> list[str]:
        assert f.element is not None
        el = f.element
        if el.kind == "struct":
            return ["item.encode_to(out)"]
        if el.kind == "uuid":
            return ["out += item.bytes"]
        return self.pack(el, "item")

    def write(self, f: FrameField) -> list[str]:
        value = f"self.{f.name}"
        if f.kind in ("int", "varint", "bool"):
            return self.pack(f, value)
        if f.kind == "uuid":
            return [f"out += {value}.bytes"]
        sized = f.size_field is not None
        if f.kind in ("bytes", "string"):
            data = value if f.kind == "bytes" else self.str_bytes(f, value)
            if sized:
                return [f"out += b_{f.name}"]
            lines = []
            if f.kind == "string" or f.prefix is not None:
                lines.append(f"data_{f.name} = {data}")
                data = f"data_{f.name}"
            if f.length is not None:
                self.ctx.uses.add("errors:EncodeError")
                lines += [f"if len({data}) != {f.length}:",
                          f"    raise EncodeError(\"{self.s.name}.{f.name} must be "
                          f"{f.length} bytes\")"]
            if f.prefix is not None:
                lines += self.prefix(f, f"len({data})")
            return [*lines, f"out += {data}"]
        if f.kind in ("proto", "struct", "switch"):
            if sized:
                return [f"out += b_{f.name}"]
            if f.prefix is not None:
                return [f"data_{f.name} = {value}.encode()", *self.prefix(f, f"len(data_{f.name})"),
                        f"out += data_{f.name}"]
            return [f"{value}.encode_to(out)"]
        if f.kind == "array":
            if sized:
                return [f"out += b_{f.name}"]
            return [f"for item in {value}:", *["    " + x for x in self.item(f)]]
        if f.kind == "blocks":
            from generator.frame_ir import INT_TYPES

            cw, cs = INT_TYPES[f.block_count]
            lw, ls = INT_TYPES[f.block_length]
            cp = self.ctx.packer(cw, cs, self.ctx.spec.byte_order)
            lp = self.ctx.packer(lw, ls, self.ctx.spec.byte_order)
            size = f.block_size
            return [
                f"content = {value}.encode()",
                f"out += {cp}.pack((len(content) + {size - 1}) // {size})",
                f"for i in range(0, len(content), {size}):",
                f"    block = content[i : i + {size}]",
                f"    out += {lp}.pack(len(block))",
                "    out += block",
            ]
        raise AssertionError(f.kind)

    def prefix(self, f: FrameField, length: str) -> list[str]:
        assert f.prefix is not None
        if f.prefix == "varint":
            self.ctx.uses.add("protowire:varint_bytes")
            return [f"out += varint_bytes({length})"]
        from generator.frame_ir import INT_TYPES

        width, signed = INT_TYPES[f.prefix]
        return [f"out += {self.ctx.packer(width, signed, self.ctx.spec.byte_order)}"
                f".pack({length})"]


def _const_bytes(f: FrameField) -> bytes:
    assert f.const is not None
    if f.kind == "varint":
        out = bytearray()
        v = f.const
        while v > 0x7F:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        return bytes(out)
    return f.const.to_bytes(f.width, "little" if f.order == "little" else "big",
                            signed=f.signed)


def _extras(ctx: _Ctx, s: StructDef) -> list[str]:
    """Extra members: code tables for switches, decompression helpers."""
    lines: list[str] = []
    for f in s.fields:
        if f.compression is not None:
            lines += _decompress_method(ctx, s, f)
    return lines


def _decompress_method(ctx: _Ctx, s: StructDef, f: FrameField) -> list[str]:
    assert f.compression is not None
    ctx.uses.add("compression:decompress")
    codec = _attr_path(s, f.compression.codec)
    size = _attr_path(s, f.compression.uncompressed_size) if f.compression.uncompressed_size \
        else f"len(self.{f.name})"
    return [
        "",
        f"def decompressed_{f.name}(self, max_size: int = {ctx.spec.max_frame_size}) -> bytes:",
        "    " + docstring(f"The {f.name} bytes decompressed with the codec the frame names.",
                          "    "),
        f"    return decompress({codec}.name, self.{f.name}, {size}, max_size=max_size)",
    ]


def _attr_path(s: StructDef, ref: str) -> str:
    head, *rest = ref.split(".")
    target = s.field(head)
    assert target is not None
    msg = target.message
    attrs = [head]
    for part in rest:
        assert msg is not None
        pf = next(x for x in msg.fields if x.proto_name == part)
        attrs.append(pf.py_name)
        msg = pf.type.message
    return "self." + ".".join(attrs)


# ---------------------------------------------------------------------------------------------
# frame length probe and command tables


def _length_lines(ctx: _Ctx, frame: StructDef, errors: list[SpecError]) -> list[str]:
    """Body of ``frame_length(buf, pos, end, limit)``: the frame size once the header is in."""
    offset = 0
    for i, f in enumerate(frame.fields):
        size_rest = f.size_of == "rest" or (
            f.size_of is not None and f.size_of == frame.fields[-1].name
            and all(g.fixed_size is not None for g in frame.fields[i + 1 : -1]))
        if size_rest and f.kind == "int":
            between = sum(g.fixed_size or 0 for g in frame.fields[i + 1 : -1]) \
                if f.size_of != "rest" else 0
            header = offset + f.width
            packer = ctx.packer(f.width, f.signed, f.order)
            ctx.uses.add("errors:FrameTooLargeError")
            ctx.uses.add("errors:SizeMismatchError")
            return [
                f"if end - pos < {header}:",
                "    return None",
                f"size: int = {header + between} + {packer}.unpack_from(buf, pos + {offset})[0]",
                f"if size < {header + between}:",
                "    raise SizeMismatchError(f\"negative frame length {size}\")",
                "if size > limit:",
                "    raise FrameTooLargeError(f\"frame of {size} bytes is over the "
                "{limit}-byte limit\")",
                "return size",
            ]
        if f.kind == "blocks":
            from generator.frame_ir import INT_TYPES

            cw, cs = INT_TYPES[f.block_count]
            lw, ls = INT_TYPES[f.block_length]
            cp = ctx.packer(cw, cs, ctx.spec.byte_order)
            lp = ctx.packer(lw, ls, ctx.spec.byte_order)
            ctx.uses.add("errors:FrameTooLargeError")
            return [
                f"p = pos + {offset}",
                f"if end - p < {cw}:",
                "    return None",
                f"count: int = {cp}.unpack_from(buf, p)[0]",
                f"p += {cw}",
                f"if count * {lw} > limit:",
                "    raise FrameTooLargeError(f\"{count} blocks cannot fit in {limit} bytes\")",
                "for _ in range(count):",
                f"    if end - p < {lw}:",
                "        return None",
                f"    p += {lw} + {lp}.unpack_from(buf, p)[0]",
                "    if p - pos > limit:",
                "        raise FrameTooLargeError(f\"frame over the {limit}-byte limit\")",
                "if p > end:",
                "    return None",
                "return p - pos",
            ]
        if f.fixed_size is None:
            break
        offset += f.fixed_size
    loc = frame.location
    errors.append(SpecError("cannot tell a frame's length from its header: the frame needs a "
                            "size_of field after fixed-size fields only, or a blocks field",
                            loc.path, loc.line, loc.column))
    return []


def _command_table(ctx: _Ctx, spec: FrameSpec) -> list[str]:
    lines: list[str] = []
    for f in spec.frame.fields:
        if f.dispatch_on is not None and f.message is not None:
            enum = f.dispatch_on.type.enum
            assert enum is not None
            enum_ref = ctx.proto_ref(enum.py_path, enum.full_name)
            # Which field of the envelope holds the body, for each command type.
            lines.append(f"_Type = {enum_ref}")
            lines.append(f"_BODY_FIELDS: dict[{enum_ref}, str] = {{")
            lines += [f"    _Type.{c.enum_member}: {q(c.field.py_name)},"
                      for c in f.commands]
            lines.append("}")
    for s in [*spec.structs, spec.frame]:
        for f in s.fields:
            if f.kind == "switch":
                name = f"_{s.name.upper()}_{f.name.upper()}_CODES"
                lines.append(f"{name}: dict[type[{_alias_name(s, f)}], int] = {{")
                seen: set[str] = set()
                for c in f.cases:
                    for st in c.structs:
                        if st.name not in seen:
                            seen.add(st.name)
                            lines.append(f"    {st.name}: {c.value},")
                lines.append("}")
    return lines


def command_infos(spec: FrameSpec) -> list[CommandInfo]:
    return list(spec.commands.values())
