"""The Python view of a frame spec: classes, straight-line codecs and the frame-length probe.

Each struct becomes a slots dataclass holding only its data fields; computed fields (constants,
sizes, counts, checksums, switch keys, ``value:`` expressions) are derived on encode and checked
on decode, so a value built by hand can never disagree with its own header.

Expressions are rendered twice, once per direction. On decode a field name is the local
``f_<name>`` holding what was read (or derived); on encode a data field is ``self.<name>`` and a
computed field is the local ``v_<name>`` once the encoder has worked it out. Params are keyword
arguments of both methods; ``_index`` is the position of an array element.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from protoframe.generator.codewriter import bytes_literal, docstring, q, raise_line
from protoframe.generator.errors import GeneratorBug
from protoframe.generator.expr import Expr
from protoframe.generator.frame_checks import frame_length_field, path_attrs
from protoframe.generator.frame_ir import (
    INT_TYPES,
    ArrayField,
    BlocksField,
    BoolField,
    BytesField,
    FrameField,
    FrameSpec,
    IntField,
    ProtoField,
    StringField,
    StructDef,
    StructField,
    SwitchField,
    UuidField,
    VarintField,
    held_struct,
    nested_message,
    nested_struct,
)
from protoframe.generator.frame_layouts import layout_lines

_STRUCT_CODES = {(1, False): "B", (2, False): "H", (4, False): "I", (8, False): "Q",
                 (1, True): "b", (2, True): "h", (4, True): "i", (8, True): "q"}


@dataclass
class ClassView:
    name: str
    doc: str
    fields: list[tuple[str, str]]  # (name, "annotation[ = default]")
    encode_lines: list[str]
    decode_lines: list[str]
    decode_params: str  # parameters of decode_from after cls
    extra_lines: list[str]
    encode_params: str = ""  # keyword parameters of encode/encode_to after self (", *, ...")
    encode_args: str = ""  # how encode() passes them on to encode_to
    decode_kw: str = ""  # keyword parameters of decode after data
    decode_args: str = ""  # how decode() passes them on to decode_from
    run_lines: list[str] = field(default_factory=list)  # decode_run's body, when it has one
    check_end: bool = False  # decoding rejects bytes left after the last field
    early_checksums: frozenset[str] = frozenset()  # checksums verified as soon as they are read


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
    stream_doc: str = ""
    layout_lines: list[str] = field(default_factory=list)  # install_frame_layouts(...)


@dataclass
class _Ctx:
    spec: FrameSpec
    packers: dict[str, str] = field(default_factory=dict)
    proto_modules: set[str] = field(default_factory=set)
    uses: set[str] = field(default_factory=set)
    tables: list[str] = field(default_factory=list)  # module-level tables after the classes
    runs: set[str] = field(default_factory=set)  # structs read by decode_run (see _run_structs)

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
    classes: list[ClassView] = []
    aliases: list[str] = []
    ordered = _dependency_order(spec)
    ctx.runs = _run_structs(ordered)
    for struct in ordered:
        classes.append(_class_view(ctx, struct, aliases))
    length_lines = _length_lines(ctx, spec.frame)
    directional = _directional(spec.frame)
    command_table = _command_table(ctx, spec) + ctx.tables
    layouts = layout_lines(
        [s for s in ordered if not _directional(s)],
        {c.name: (c.check_end, c.early_checksums) for c in classes},
        lambda m: ctx.proto_ref(m.py_path, m.full_name), spec.byte_order)
    if layouts:
        ctx.uses.add("compiled_frames:install_frame_layouts")
    imports = ["from dataclasses import dataclass", "from struct import Struct",
               "from struct import error as struct_error", "from typing import Self"]
    if "Callable" in ctx.uses:
        imports.append("from collections.abc import Callable")
    if "UUID" in ctx.uses:
        imports.append("from uuid import UUID")
    imports.sort(key=lambda line: line.split()[1])
    ctx.uses.add("errors:ValueOutOfRangeError")
    ctx.uses.add("errors:SizeMismatchError")
    runtime: dict[str, list[str]] = {}
    for use in sorted(ctx.uses - {"UUID", "Callable"}):
        module, name = use.split(":")
        runtime.setdefault(module, []).append(name)
    runtime_imports = []
    for key, names in sorted(runtime.items()):
        # Uses name a module of the codec layer, or the errors every layer shares.
        m = key if key == "errors" else f"codec.{key}"
        plain = [n for n in names if " as " not in n]
        # isort keeps each aliased import on its own line.
        runtime_imports += [f"from protoframe.runtime.{m} import {n}"
                            for n in names if " as " in n]
        if not plain:
            continue
        line = f"from protoframe.runtime.{m} import {', '.join(plain)}"
        if len(line) > 100:
            line = (f"from protoframe.runtime.{m} import (\n"
                    + "".join(f"    {n},\n" for n in plain) + ")")
        runtime_imports.append(line)
    runtime_imports.append("from protoframe.runtime.codec.stream import FrameStream")
    doc = spec.doc.strip() or f"Frames of the {spec.protocol} protocol."
    stream_doc = ("Incremental decoder: ``feed(data)`` returns every "
                  f"{spec.frame.name} the bytes complete.")
    if directional:
        stream_doc += ("\n\nLayouts differ by direction: pass ``to_server=True`` to decode "
                       "what a client sends (the server's side), False for what it receives.")
    return FramesModuleView(
        source=spec.path,
        module_doc=docstring(f"{doc}\n\nFrame layouts and codecs generated from {spec.path}.", ""),
        imports=imports,
        runtime_imports=sorted(runtime_imports),
        local_imports=_local_imports(ctx.proto_modules, spec),
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
        stream_doc=docstring(stream_doc, "    "),
        layout_lines=layouts,
    )


def _directional(s: StructDef) -> bool:
    return s.is_frame and any(c.directional for f in s.fields if isinstance(f, SwitchField)
                              for c in f.cases)


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
    own = nested_struct(f)
    deps = [own] if own is not None else []
    element = held_struct(f.element) if isinstance(f, ArrayField) and f.element else None
    if element is not None:
        deps.append(element)
    for c in f.cases if isinstance(f, SwitchField) else []:
        deps += c.structs
    return deps


def _error(f: FrameField, message: str) -> GeneratorBug:
    # frame_checks has ruled this out before any emitter ran: reaching it is our bug.
    return GeneratorBug(message, str(f.location))


def _struct(f: StructField | BlocksField) -> StructDef:
    """The struct ``f`` holds, which the builder resolved (or rejected the spec)."""
    if f.struct is None:
        raise _error(f, f"{f.name!r}: unresolved struct")
    return f.struct


def _element(f: ArrayField) -> FrameField:
    """The element of array ``f``, which the builder resolved (or rejected the spec)."""
    if f.element is None:
        raise _error(f, f"{f.name!r}: array without an element")
    return f.element


def _int(f: FrameField) -> IntField:
    """``f`` as the fixed-width integer the checks made sure it is (sizes, checksums...)."""
    if not isinstance(f, IntField):
        raise _error(f, f"{f.name!r} is a {f.kind} where a fixed-width integer is needed")
    return f


# ---------------------------------------------------------------------------------------------
# expressions


def _raise(exc: str, message: str, *, fmt: bool = True, extra: str = "",
           suffix: str = "") -> list[str]:
    """``raise exc(message[, extra])[ suffix]``: the message stays one literal."""
    return [raise_line(exc, message, fmt=fmt, extra=extra, suffix=suffix)]


def _at(base: str, offset: int) -> str:
    """``base + offset``, or ``base`` alone for offset 0."""
    return f"{base} + {offset}" if offset else base


def _indent(lines: list[str], depth: int = 1) -> list[str]:
    return ["    " * depth + line for line in lines]


def _render(expr: Expr, s: StructDef, resolve: Callable[[str], str], where: FrameField,
            parens: bool = True) -> str:
    """Python source for ``expr``: names through ``resolve``, dotted proto fields by py name."""
    tree = ast.parse(expr.text, mode="eval")

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
            for attr in _attr_names(head, chain, expr, where):
                new = ast.Attribute(value=new, attr=attr, ctx=ast.Load())
            return new

        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id == "len":
                return node
            return ast.Name(id=resolve(node.id), ctx=ast.Load())

    text = ast.unparse(Rewrite().visit(tree))
    return f"({text})" if parens else text


def _attr_names(head: FrameField | None, chain: list[str], expr: Expr,
                where: FrameField) -> list[str]:
    """Python attribute names for ``head.a.b...`` (frame_checks has ruled out bad paths)."""
    attrs, error = path_attrs(head, chain, expr)
    if error is not None:
        raise _error(where, error)
    return attrs


# ---------------------------------------------------------------------------------------------
# annotations


def _ann(ctx: _Ctx, struct: StructDef, f: FrameField) -> str:
    match f:
        case IntField() | VarintField():
            return "int"
        case BoolField():
            return "bool"
        case UuidField():
            ctx.uses.add("UUID")
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
            return f"list[{_ann(ctx, struct, element)}]"
        case SwitchField():
            return f.alias
    raise _error(f, f"{f.name!r}: no type for a {f.kind} field")


def _has_checksum(s: StructDef, seen: frozenset[str] = frozenset()) -> bool:
    if s.name in seen:
        return False
    for f in s.fields:
        if f.checksum is not None:
            return True
        held = nested_struct(f)
        if held is not None and _has_checksum(held, seen | {s.name}):
            return True
    return False


def _run_structs(structs: list[StructDef]) -> set[str]:
    """Structs that arrays read to their region's end, element after element, with no args.

    Each gets a ``decode_run`` classmethod holding its decoder in a loop: one call per array
    instead of one per element, which is most of the per-element cost of a Pulsar batch.
    """
    runs: set[str] = set()
    for s in structs:
        for f in s.fields:
            if not isinstance(f, ArrayField) or not f.until_end or f.args:
                continue
            el = held_struct(f.element) if isinstance(f.element, StructField) else None
            if el is not None and not el.params and not _directional(el):
                runs.add(el.name)
    return runs


def _run_lines(decode_lines: list[str]) -> list[str]:
    """``decode_from``'s body as a loop that collects values until ``end``."""
    assert decode_lines[-1] == "return obj, pos"
    assert not any(line.lstrip().startswith("return ") for line in decode_lines[:-1])
    return ["items: list[Self] = []", "while pos < end:",
            *["    " + line if line else "" for line in decode_lines[:-1]],
            "    items.append(obj)", "return items, pos"]


def _class_view(ctx: _Ctx, s: StructDef, aliases: list[str]) -> ClassView:
    fields: list[tuple[str, str]] = []
    for f in s.data_fields:
        ann = _ann(ctx, s, f)
        if isinstance(f, SwitchField):
            members = sorted({c.name for case in f.cases for c in case.structs})
            alias = f"{f.alias} = " + " | ".join(members)
            if len(alias) > 100:
                alias = f"{f.alias} = (\n    " + "\n    | ".join(members) + "\n)"
            aliases.append(alias)
        if f.marker:
            fields.append((f.name, "bool = False"))
        elif f.when_remaining and f.default is not None:
            fields.append((f.name, f"{ann} = {_literal(f.default)}"))
        elif f.optional:
            fields.append((f.name, f"{ann} | None = None"))
        else:
            fields.append((f.name, ann))
    doc_lines = [s.doc or f"The {s.name} layout."]
    documented = [f for f in s.data_fields if f.doc]
    if documented:
        doc_lines += ["", "Attributes:"] + [f"    {f.name}: {f.doc}" for f in documented]
    if s.params:
        doc_lines += ["", "Encoding and decoding need the params "
                      + ", ".join(f"``{p.name}``" for p in s.params)
                      + ", which the enclosing layout passes."]
    params = "buf: bytes, pos: int, end: int"
    kw = ""
    if s.params:
        kw = ", *, " + ", ".join(f"{p.name}: {p.kind}" for p in s.params)
    elif _directional(s):
        kw = ", to_server: bool = False"
    args = "".join(f", {p.name}={p.name}" for p in s.params)
    if _directional(s):
        args = ", to_server=to_server"
    decoder = _Decoder(ctx, s)
    decode_lines = decoder.lines()
    return ClassView(
        name=s.name,
        doc=docstring("\n".join(doc_lines), "    "),
        fields=fields,
        encode_lines=_Encoder(ctx, s).lines(),
        decode_lines=decode_lines,
        run_lines=_run_lines(decode_lines) if s.name in ctx.runs else [],
        decode_params=params + kw,
        extra_lines=_extras(ctx, s),
        encode_params=", *, " + ", ".join(f"{p.name}: {p.kind}" for p in s.params)
        if s.params else "",
        encode_args="".join(f", {p.name}={p.name}" for p in s.params),
        decode_kw=kw,
        decode_args=args,
        check_end=decoder.consumes_rest and s.trailing != "ignore",
        early_checksums=frozenset(f.name for f in s.fields if decoder.early_checksum(f)),
    )


def _literal(value: object) -> str:
    return q(value) if isinstance(value, str) else repr(value)


def _call_args(args: dict[str, Expr], s: StructDef, resolve: Callable[[str], str],
               where: FrameField) -> str:
    return "".join(f", {name}={_render(e, s, resolve, where, False)}"
                   for name, e in args.items())


def _range_starts(s: StructDef, f: FrameField) -> list[FrameField]:
    return [g for g in s.fields if g.size_range is not None and g.size_range[0] == f.name]


def _range_ends(s: StructDef, f: FrameField) -> list[FrameField]:
    return [g for g in s.fields if g.size_range is not None and g.size_range[1] == f.name]


# ---------------------------------------------------------------------------------------------
# decoding


class _Decoder:
    def __init__(self, ctx: _Ctx, s: StructDef) -> None:
        self.ctx = ctx
        self.s = s
        self.out: list[str] = []
        self.consumes_rest = False
        self.in_range = 0
        self.range_marks: list[int] = []
        # Whether ``end`` is a size the bytes announced (a size_of: rest field was read) rather
        # than the end of the input: overrunning an announced size is a mismatch, overrunning
        # the input is truncation.
        self.bounded = not s.is_frame
        self.params = {p.name for p in s.params}
        self.index = "_"

    def where(self, f: FrameField) -> str:
        return q(f"{self.s.name}.{f.name}")

    def name(self, n: str) -> str:
        if n in self.params:
            return n
        if n == "_index":
            return self.index
        return "f_" + n

    def render(self, expr: Expr, f: FrameField, parens: bool = True) -> str:
        return _render(expr, self.s, self.name, f, parens)

    def lines(self) -> list[str]:
        s = self.s
        checksum_wrap = any(_has_checksum(held) for f in s.fields
                            if (held := nested_struct(f)) is not None)
        if checksum_wrap:
            self.out.append("bad: ChecksumFailure | None = None")
            self.ctx.uses.add("errors:ChecksumFailure")
        for f in s.fields:
            self.field(f)
        # A last field read to ``end`` has left nothing over: no skip, no check.
        at_end = bool(self.out) and self.out[-1] == "pos = end"
        if at_end:
            pass
        elif s.trailing == "ignore":
            self.out.append("pos = end  # trailing bytes this spec does not know are skipped")
        elif self.consumes_rest:
            self.ctx.uses.add("errors:SizeMismatchError")
            self.out += ["if pos != end:", *_indent(_raise(
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
        self.ctx.uses.add(f"checksums:{algo}")
        self.ctx.uses.add("errors:ChecksumFailure")
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
        return [f"if pos + {n} > end:", *_indent(self.overrun(f, f"needs {n} more bytes"))]

    def overrun(self, f: FrameField, detail: str) -> list[str]:
        """The raise for a declared size that runs past the available bytes."""
        if not self.bounded and not self.in_range:
            self.ctx.uses.add("protowire:truncated")
            return [f"raise truncated({self.where(f)})"]
        self.ctx.uses.add("errors:SizeMismatchError")
        return _raise("SizeMismatchError", f"{self.s.name}.{f.name}: {detail}")

    def early_checksum(self, f: FrameField) -> bool:
        """Whether a checksum can be verified as soon as it is read.

        It can when its range starts right after it and runs to the end of a struct that
        fills its region; checking first means corrupt content is never parsed, as the Java
        client does, and the error still reaches the caller as a ``ChecksumFailure``.
        """
        if f.checksum is None or not self.consumes_to_end():
            return False
        names = [g.name for g in self.s.fields]
        i = names.index(f.name)
        return i + 1 < len(names) and names[i + 1] == f.checksum.start

    def consumes_to_end(self) -> bool:
        return any(g.size == "rest" or isinstance(g, ArrayField) and g.until_end
                   or g.when_remaining or g.size_of == "rest"
                   for g in self.s.fields)

    def field(self, f: FrameField) -> None:
        s = self.s
        if any(g.checksum is not None and g.checksum.start == f.name
               and not self.early_checksum(g) for g in s.fields):
            self.out.append(f"s_{f.name} = pos")
        for g in _range_starts(s, f):
            self.ctx.uses.add("errors:SizeMismatchError")
            self.out += [
                f"e_{g.name} = end",
                f"end = pos + f_{g.name}",
                f"if end > e_{g.name}:",
                *_indent(_raise("SizeMismatchError", f"{s.name}.{g.name}: {{f_{g.name}}} "
                                "bytes run past the end of the enclosing region")),
            ]
            self.in_range += 1
            self.range_marks.append(len(self.out))
        body = self.read(f)
        if self.early_checksum(f):
            body += self.early_check(f)
        if not f.wire:
            self.out += body
        elif f.marker:
            assert f.const is not None
            marker = _int(f)
            width = marker.width
            packer = self.ctx.packer(width, marker.signed, marker.order)
            self.out += [f"f_{f.name} = False",
                         f"if pos + {width} <= end and {packer}.unpack_from(buf, pos)[0] == "
                         f"{f.const:#x}:",
                         f"    f_{f.name} = True",
                         f"    pos += {width}"]
        elif f.when_remaining:
            if not self.in_range:
                self.consumes_rest = True
            default = _literal(f.default) if f.default is not None else "None"
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
            self.out.append(f"f_{f.name} = None")
            self.out.append(f"if pos + {width} <= end and {packer}.unpack_from(buf, pos)[0] == "
                            f"{equals:#x}:")
            self.out += ["    " + line for line in body]
        elif f.when is not None:
            cond = self.render(f.when, f, parens=False)
            absent = "None" if not f.computed else _literal(f.default or 0)
            self.out.append(f"f_{f.name} = {absent}")
            self.out.append(f"if {cond}:")
            self.out += ["    " + line for line in body]
        else:
            self.out += body
        for g in _range_ends(s, f):
            self.in_range -= 1
            # Running out of bytes inside the range means its declared size is too small.
            mark = self.range_marks.pop()
            self.ctx.uses.add("errors:TruncatedError")
            self.out[mark:] = [
                "try:", *_indent(self.out[mark:]), "except TruncatedError as exc:",
                *_indent(_raise("SizeMismatchError", f"{s.name}.{g.name}: {{f_{g.name}}} "
                                "bytes declared, too few for the content ({exc})",
                                suffix=" from exc"))]
            self.out += [
                "if pos != end:",
                *_indent(_raise("SizeMismatchError", f"{s.name}.{g.name}: {{end - pos}} of "
                                f"the {{f_{g.name}}} bytes declared are not used")),
                f"end = e_{g.name}",
            ]

    def s_order(self) -> str:
        return self.ctx.spec.byte_order

    def int_read(self, f: FrameField, target: str) -> list[str]:
        if isinstance(f, VarintField):
            self.ctx.uses.add("protowire:read_varint")
            self.ctx.uses.add("protowire:truncated")
            return ["try:",
                    f"    {target}, pos = read_varint(buf, pos)",
                    "except IndexError:",
                    f"    raise truncated({self.where(f)}) from None",
                    "if pos > end:",
                    f"    raise truncated({self.where(f)})"]
        if isinstance(f, BoolField):
            return [*self.need("1", f), f"{target} = buf[pos] != 0", "pos += 1"]
        i = _int(f)
        if i.width == 1 and not i.signed:
            return [*self.need("1", f), f"{target} = buf[pos]", "pos += 1"]
        packer = self.ctx.packer(i.width, i.signed, i.order)
        return [*self.need(str(i.width), f), f"{target} = {packer}.unpack_from(buf, pos)[0]",
                f"pos += {i.width}"]

    def region_end(self, f: FrameField) -> tuple[list[str], str]:
        """Statements computing ``vend``, the end of a sized field's bytes, and its name."""
        self.ctx.uses.add("errors:SizeMismatchError")
        if f.length is not None:
            return self.need(str(f.length), f) + [f"vend = pos + {f.length}"], "vend"
        if f.size == "rest":
            if not self.in_range:
                self.consumes_rest = True
            return [], "end"
        if f.size is not None:
            ref = "f_" + f.size if "." not in f.size else self.dotted(f.size)
            check = "vend > end"
            if not isinstance(f.size_field, IntField | VarintField) or \
                    isinstance(f.size_field, IntField) and f.size_field.signed:  # or a proto field
                check = f"{ref} < 0 or vend > end"
            return [f"vend = pos + {ref}", f"if {check}:",
                    *_indent(self.overrun(f, f"size {{{ref}}} runs past the end of its "
                                             "region"))], "vend"
        if f.prefix is not None:
            fake: IntField | VarintField
            if f.prefix == "varint":
                fake = VarintField(name=f.name, doc="", location=f.location)
            else:
                width, signed = INT_TYPES[f.prefix]
                fake = IntField(name=f.name, doc="", location=f.location, width=width,
                                signed=signed, order=self.s_order())
            lines = self.int_read(fake, "n")
            self.ctx.uses.add("protowire:truncated")
            # An unsigned prefix is never negative.
            check = "n < 0 or " if isinstance(fake, IntField) and fake.signed else ""
            lines += ["vend = pos + n", f"if {check}vend > end:",
                      f"    raise truncated({self.where(f)})"]
            return lines, "vend"
        if not self.in_range:
            self.consumes_rest = True
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

    def read(self, f: FrameField) -> list[str]:
        target = f"f_{f.name}"
        if f.derive is not None:
            if isinstance(f, BoolField):
                return [f"{target} = bool({self.render(f.derive, f, parens=False)})"]
            return [f"{target} = {self.render(f.derive, f, parens=False)}"]
        if isinstance(f, IntField | VarintField | BoolField):
            lines = self.int_read(f, target)
            if f.const is not None and not f.marker:
                self.ctx.uses.add("errors:BadMagicError")
                lines += [f"if {target} != {f.const:#x}:", *_indent(_raise(
                    "BadMagicError", f"{self.s.name}.{f.name}: expected {f.const:#x}, got "
                    f"{{{target}:#x}}"))]
            if f.size_of == "rest":
                check = f"{target} < 0 or " if isinstance(f, IntField) and f.signed else ""
                lines += [f"if {check}pos + {target} > end:",
                          *_indent(self.overrun(f, f"{{{target}}} bytes announced, "
                                                   "{end - pos} there")),
                          f"end = pos + {target}"]
                self.consumes_rest = True
                self.bounded = True
            return lines
        if isinstance(f, UuidField):
            return [*self.need("16", f), f"{target} = UUID(bytes=buf[pos : pos + 16])",
                    "pos += 16"]
        if isinstance(f, BytesField | StringField | ProtoField):
            lines, vend = self.region_end(f)
            if isinstance(f, BytesField):
                lines.append(f"{target} = buf[pos:{vend}]")
            elif isinstance(f, StringField):
                if f.encoding == "mutf8":
                    self.ctx.uses.add("mutf8:decode as mutf8_decode")
                    lines.append(f"{target} = mutf8_decode(buf[pos:{vend}], {self.where(f)})")
                else:
                    self.ctx.uses.add("protowire:decode_str")
                    lines.append(f"{target} = decode_str(buf, pos, {vend}, {self.where(f)})")
            else:
                lines += self.sized_call(f, self.proto_read(f, target, vend), vend)
            lines.append(f"pos = {vend}")
            return lines
        if isinstance(f, StructField):
            lines, vend = self.region_end(f) if (f.size or f.prefix or f.length) else ([], "end")
            args = _call_args(f.args, self.s, self.name, f)
            call = f"{_struct(f).name}.decode_from(buf, pos, {vend}{args})"
            lines += self.struct_call(f, target, call, vend)
            return lines
        if isinstance(f, ArrayField):
            return self.array(f, target)
        if isinstance(f, SwitchField):
            return self.switch(f, target)
        if isinstance(f, BlocksField):
            return self.blocks(f, target)
        raise _error(f, f"{f.name!r}: no decoder for a {f.kind} field")

    def proto_read(self, f: ProtoField, target: str, vend: str) -> list[str]:
        assert f.message is not None
        ref = self.ctx.proto_ref(f.message.py_path, f.message.full_name)
        if f.dispatch_on is None:
            return [f"{target} = {ref}.decode_from(buf, pos, {vend})"]
        self.ctx.uses.add("errors:MissingRequiredFieldError")
        self.ctx.uses.add("errors:UnknownCommandError")
        on = f.dispatch_on.proto_name
        return [
            "try:",
            f"    {target} = {ref}.decode_from(buf, pos, {vend})",
            "except MissingRequiredFieldError as exc:",
            f"    if exc.field_name != {q(on)}:",
            "        raise",
            f"    raise UnknownCommandError(\"{f.message.proto_name}.{on} is missing "
            "or not a known command type\") from exc",
            *self.dispatch_check(f, target),
        ]

    def sized_call(self, f: FrameField, call_lines: list[str], vend: str) -> list[str]:
        """Run a nested decode; inside a declared size, running out is a size mismatch."""
        if vend == "end":
            return call_lines
        self.ctx.uses.add("errors:TruncatedError")
        self.ctx.uses.add("errors:SizeMismatchError")
        return ["try:", *_indent(call_lines),
                "except TruncatedError as exc:",
                *_indent(_raise("SizeMismatchError", f"{self.s.name}.{f.name}: declared size "
                                "too small for the content ({exc})", suffix=" from exc"))]

    def struct_call(self, f: StructField, target: str, call: str, vend: str) -> list[str]:
        check = []
        if vend != "end":
            self.ctx.uses.add("errors:SizeMismatchError")
            check = [f"if pos != {vend}:", *_indent(_raise(
                "SizeMismatchError", f"{self.s.name}.{f.name}: content does not fill its "
                "declared size", fmt=False))]
        if not _has_checksum(_struct(f)):
            return [*self.sized_call(f, [f"{target}, pos = {call}"], vend), *check]
        return [
            "try:",
            *["    " + x for x in self.sized_call(f, [f"{target}, pos = {call}"], vend)],
            "except ChecksumFailure as exc:",
            "    bad = exc",
            *self.checksum_value(f, target),
            *check,
        ]

    def checksum_value(self, f: StructField, target: str) -> list[str]:
        """Keep what a nested struct decoded before its checksum failed, if anything."""
        name = _struct(f).name
        if f.optional:
            return [f"    {target} = exc.value if isinstance(exc.value, {name}) "
                    "else None", "    pos = exc.pos"]
        return ["    if not isinstance(exc.value, " + name + "):", "        raise",
                f"    {target}, pos = exc.value, exc.pos"]

    def dispatch_check(self, f: ProtoField, target: str) -> list[str]:
        assert f.dispatch_on is not None and f.message is not None
        self.ctx.uses.add("errors:MissingBodyError")
        return [
            f"if getattr({target}, _BODY_FIELDS[{target}.{f.dispatch_on.py_name}]) is None:",
            f"    raise MissingBodyError(f\"{f.message.proto_name} of type "
            f"{{{target}.{f.dispatch_on.py_name}.name}} lacks its body field\")",
        ]

    def array(self, f: ArrayField, target: str) -> list[str]:
        el = _element(f)
        item_ann = _ann(self.ctx, self.s, el)
        index = f"i_{f.name}" if any("_index" in e.names for e in f.args.values()) else "_"
        self.index = index
        items = f"a_{f.name}"
        # Named for the field: two arrays of one struct may hold different element types.
        item = f"e_{f.name}"
        lines = [f"{items}: list[{item_ann}] = []"]
        if f.until_end and isinstance(el, StructField) and el.struct is not None \
                and el.struct.name in self.ctx.runs:
            if not self.in_range:
                self.consumes_rest = True
            return [f"{target}, pos = {el.struct.name}.decode_run(buf, pos, end)"]
        if isinstance(el, StructField):
            args = _call_args(f.args, self.s, self.name, f)
            one = [f"{item}, pos = {_struct(el).name}.decode_from(buf, pos, end{args})",
                   f"{items}.append({item})"]
        elif isinstance(el, UuidField):
            one = [*self.need("16", el), f"{items}.append(UUID(bytes=buf[pos : pos + 16]))",
                   "pos += 16"]
        else:
            one = [*self.int_read(el, item), f"{items}.append({item})"]
        if f.until_end:
            if not self.in_range:
                self.consumes_rest = True
            lines.append("while pos < end:")
            if index != "_":
                lines.append(f"    {index} = len({items})")
        else:
            assert f.count is not None
            count = self.render(f.count, f, parens=False)
            lines.append(f"for {index} in range({count}):")
        lines += ["    " + x for x in one]
        lines.append(f"{target} = {items}")
        self.index = "_"
        return lines

    def switch(self, f: SwitchField, target: str) -> list[str]:
        self.ctx.uses.add("errors:UnknownCommandError")
        self.ctx.uses.add("Callable")
        lines, vend = self.region_end(f) if (f.size or f.prefix) else ([], "end")
        key = f"f_{f.switch_on}"
        alias = f.alias
        base = f.tables
        decoder_type = f"Callable[[bytes, int, int], tuple[{alias}, int]]"
        directional = any(c.directional for c in f.cases)
        if directional:
            for direction in ("to_server", "to_client"):
                self.ctx.tables += _case_table(f, direction, f"{base}_{direction.upper()}",
                                               decoder_type)
            table = f"({base}_TO_SERVER if to_server else {base}_TO_CLIENT)"
            unknown = "sent {'to' if to_server else 'from'} the server"
        else:
            self.ctx.tables += _case_table(f, "to_client", f"{base}_DECODERS", decoder_type)
            table = f"{base}_DECODERS"
            unknown = ""
        lines += [
            f"decode_body = {table}.get({key})",
            "if decode_body is None:",
            *_indent(_raise("UnknownCommandError", f"{self.s.name}.{f.switch_on}: no layout "
                            f"for {{{key}}}{' ' + unknown if unknown else ''}")),
        ]
        lines += self.sized_call(f, [f"{target}, pos = decode_body(buf, pos, {vend})"], vend)
        if vend != "end":
            self.ctx.uses.add("errors:SizeMismatchError")
            lines += [f"if pos != {vend}:", *_indent(_raise(
                "SizeMismatchError", f"{self.s.name}.{f.name}: {{{vend} - pos}} bytes of the "
                "body left over"))]
        return lines

    def blocks(self, f: BlocksField, target: str) -> list[str]:
        cw, cs = INT_TYPES[f.block_count]
        lw, ls = INT_TYPES[f.block_length]
        cp = self.ctx.packer(cw, cs, self.s_order())
        lp = self.ctx.packer(lw, ls, self.s_order())
        self.ctx.uses.add("errors:SizeMismatchError")
        self.ctx.uses.add("protowire:truncated")
        lines = [*self.need(str(cw), f), f"n_blocks = {cp}.unpack_from(buf, pos)[0]",
                 f"pos += {cw}"]
        if f.max_blocks is not None:
            lines += [f"if n_blocks > {f.max_blocks}:", *_indent(_raise(
                "SizeMismatchError", f"{self.s.name}.{f.name}: {{n_blocks}} blocks, more than "
                f"{f.max_blocks}"))]
        args = _call_args(f.args, self.s, self.name, f)
        lines += [
            "parts: list[bytes] = []",
            "for _ in range(n_blocks):",
            *["    " + x for x in self.need(str(lw), f)],
            f"    n = {lp}.unpack_from(buf, pos)[0]",
            f"    pos += {lw}",
            f"    if n > {f.block_size}:",
            *_indent(_raise("SizeMismatchError", f"{self.s.name}.{f.name}: block of {{n}} "
                            f"bytes; blocks hold up to {f.block_size}"), 2),
            "    if pos + n > end:",
            *_indent(self.overrun(f, "block of {n} bytes runs past the end"), 2),
            "    parts.append(buf[pos : pos + n])",
            "    pos += n",
            "content = b\"\".join(parts)",
            *self.sized_call(f, [f"{target}, used = {_struct(f).name}.decode_from(content, 0, "
                                f"len(content){args})"], "content"),
            "if used != len(content):",
            *_indent(_raise("SizeMismatchError", f"{self.s.name}.{f.name}: "
                            "{len(content) - used} bytes of block content left over")),
        ]
        return lines


def _case_table(f: SwitchField, direction: str, name: str, decoder_type: str) -> list[str]:
    lines = [f"{name}: dict[int, {decoder_type}] = {{"]
    for c in f.cases:
        struct = getattr(c, direction)
        if struct is not None:
            lines.append(f"    {c.value}: {struct.name}.decode_from,")
    lines.append("}")
    return lines


# ---------------------------------------------------------------------------------------------
# encoding


class _Encoder:
    def __init__(self, ctx: _Ctx, s: StructDef) -> None:
        self.ctx = ctx
        self.s = s
        self.out: list[str] = []
        self.patches: list[str] = []
        self.params = {p.name for p in s.params}
        self.available: dict[str, str] = {}  # computed field -> expression holding its value
        self.index = "_"
        self.current: FrameField | None = None
        self.buf = "out"  # the bytearray the fields are appended to
        self.tail: FrameField | None = None  # bytes appended after a checksum that covers them

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
        raise _error(where, f"{n!r} is computed where encoding cannot know it yet; an "
                            "expression used on encode can only name data fields, params, "
                            "count_of fields and computed fields before it")

    def render(self, expr: Expr, f: FrameField, parens: bool = True) -> str:
        self.current = f
        return _render(expr, self.s, self.name, f, parens)

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
        for f in s.fields:
            if not f.wire and f.value is not None:
                self.out.append(f"v_{f.name} = {self.render(f.value, f, parens=False)}")
                self.available[f.name] = f"v_{f.name}"
        for f in s.fields:
            self.field(f)
        self.out += self.patches
        return self.out or ["pass"]

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

    def pack(self, f: FrameField, value: str) -> list[str]:
        if isinstance(f, VarintField):
            self.ctx.uses.add("protowire:varint_bytes")
            return [f"{self.buf} += varint_bytes({value})"]
        if isinstance(f, BoolField):
            return [f"{self.buf}.append(1 if {value} else 0)"]
        i = _int(f)
        if i.width == 1 and not i.signed:
            return [f"{self.buf}.append({value})"]
        packer = self.ctx.packer(i.width, i.signed, i.order)
        return [f"{self.buf} += {packer}.pack({value})"]

    def computed_value(self, f: FrameField) -> list[str]:
        """Statements setting ``v_<name>`` for a computed wire integer; [] if patched later."""
        s = self.s
        if f.count_of is not None:
            return []
        if f.size_of is not None and f.size_of != "rest":
            target = s.field(f.size_of)
            assert target is not None
            return [*self.pre_encode(target), f"v_{f.name} = len(b_{target.name})"]
        if f.is_switch_key:
            sw = next(g for g in s.fields if isinstance(g, SwitchField) and g.switch_on == f.name)
            return [f"v_{f.name} = {sw.tables}_CODES"
                    f"[type(self.{sw.name})]"]
        if f.value is not None:
            return [f"v_{f.name} = {self.render(f.value, f, parens=False)}"]
        raise AssertionError(f.name)

    def field(self, f: FrameField) -> None:
        s = self.s
        if any(g.checksum is not None and g.checksum.start == f.name
               and not self.covers_the_rest(g) for g in s.fields):
            self.out.append(f"s_{f.name} = len({self.buf})")
        for g in _range_starts(s, f):
            self.out.append(f"s_{g.name} = len({self.buf})")
        self.out += self.one(f)
        for g in _range_ends(s, f):
            size = _int(g)
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

    def one(self, f: FrameField) -> list[str]:
        s = self.s
        if f is self.tail:
            return []  # written after the checksum that covers it
        if not f.wire:
            if f.computed or f.derive is None:
                return []
            # A stored bit-field: the value: expressions put it on the wire; make sure it
            # survives the trip (fits its bits) by deriving it back.
            self.ctx.uses.add("errors:EncodeError")
            back = self.render(f.derive, f, parens=not isinstance(f, BoolField))
            back = f"bool({back})" if isinstance(f, BoolField) else back
            return [f"if {back} != self.{f.name}:", *_indent(_raise(
                "EncodeError", f"{s.name}.{f.name} = {{self.{f.name}!r}} does not fit the "
                "bits the spec gives it"))]
        if f.marker:
            return [f"if self.{f.name}:", f"    {self.buf} += {bytes_literal(_const_bytes(f))}"]
        if f.const is not None:
            self.available[f.name] = str(f.const)
            return [f"{self.buf} += {bytes_literal(_const_bytes(f))}"]
        if f.checksum is not None:
            algo = f.checksum.algorithm
            self.ctx.uses.add(f"checksums:{algo}")
            i = _int(f)
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
                f"{algo}(view[s_{f.checksum.start}:]))",
            ]
            return [f"p_{f.name} = len({self.buf})", f"{self.buf} += bytes({i.width})"]
        if f.size_of == "rest":
            i = _int(f)
            packer = self.ctx.packer(i.width, i.signed, i.order)
            self.patches.insert(0, f"{packer}.pack_into({self.buf}, p_{f.name}, "
                                   f"len({self.buf}) - p_{f.name} - {i.width})")
            return [f"p_{f.name} = len({self.buf})", f"{self.buf} += bytes({i.width})"]
        if f.size_range is not None:
            return [f"p_{f.name} = len({self.buf})", f"{self.buf} += bytes({_int(f).width})"]
        if f.computed:
            if f.when is not None:
                cond = self.render(f.when, f, parens=False)
                lines = [f"v_{f.name} = {_literal(f.default or 0)}", f"if {cond}:"]
                lines += ["    " + x for x in self.computed_value(f)]
                lines += ["    " + x for x in self.pack(f, f"v_{f.name}")]
                self.available[f.name] = f"v_{f.name}"
                return lines
            lines = self.computed_value(f)
            self.available[f.name] = f"v_{f.name}"
            return lines + self.pack(f, f"v_{f.name}")
        body = self.write(f)
        if f.when is not None:
            self.ctx.uses.add("errors:EncodeError")
            cond = self.render(f.when, f, parens=False)
            text = f.when.text
            return [f"if {cond}:",
                    f"    if self.{f.name} is None:",
                    *_indent(_raise("EncodeError", f"{s.name}.{f.name} must be set when {text}",
                                    fmt=False), 2),
                    *_indent(body),
                    f"elif self.{f.name} is not None:",
                    *_indent(_raise("EncodeError", f"{s.name}.{f.name} must be None unless "
                                    f"{text}", fmt=False))]
        if f.optional and not (f.when_remaining and f.default is not None):
            return [f"if self.{f.name} is not None:", *["    " + line for line in body]]
        return body

    def struct_args(self, f: FrameField) -> str:
        return _call_args(f.args, self.s, self.name, f)

    def pre_encode(self, f: FrameField) -> list[str]:
        """Encode a sized field ahead of its size, into ``b_<name>``."""
        value = f"self.{f.name}"
        if isinstance(f, BytesField):
            return [f"b_{f.name} = {value}"]
        if isinstance(f, StringField):
            return [f"b_{f.name} = {self.str_bytes(f, value)}"]
        if isinstance(f, ProtoField | StructField):
            call = f"{value}.encode({self.struct_args(f).lstrip(', ')})"
            if f.optional:
                return [f"b_{f.name} = b\"\" if {value} is None else {call}"]
            return [f"b_{f.name} = {call}"]
        if isinstance(f, SwitchField):
            return [f"b_{f.name} = {value}.encode()"]
        if isinstance(f, ArrayField):
            return ["buf = bytearray()", *self.array_write(f, "buf"), f"b_{f.name} = buf"]
        raise _error(f, f"size_of cannot measure a {f.kind} field")

    def str_bytes(self, f: StringField, value: str) -> str:
        if f.encoding == "mutf8":
            self.ctx.uses.add("mutf8:encode as mutf8_encode")
            return f"mutf8_encode({value})"
        return f"{value}.encode()"

    def array_write(self, f: ArrayField, out: str) -> list[str]:
        el = _element(f)
        lines: list[str] = []
        if f.count is not None and not f.count_from_field:
            self.ctx.uses.add("errors:EncodeError")
            count = self.render(f.count, f)
            lines += [f"if len(self.{f.name}) != {count}:", *_indent(_raise(
                "EncodeError", f"{self.s.name}.{f.name} has {{len(self.{f.name})}} items; "
                f"{f.count.text} says {{{count}}}"))]
        index = f"i_{f.name}" if any("_index" in e.names for e in f.args.values()) else ""
        self.index = index or "_"
        item = f"e_{f.name}"
        if isinstance(el, StructField):
            one = [f"{item}.encode_to({out}{self.struct_args(f)})"]
        elif isinstance(el, UuidField):
            one = [f"{out} += {item}.bytes"]
        else:
            saved, self.buf = self.buf, out
            one = self.pack(el, item)
            self.buf = saved
        self.index = "_"
        head = f"for {index}, {item} in enumerate(self.{f.name}):" if index else \
            f"for {item} in self.{f.name}:"
        return [*lines, head, *["    " + x for x in one]]

    def write(self, f: FrameField) -> list[str]:
        value = f"self.{f.name}"
        if isinstance(f, IntField | VarintField | BoolField):
            return self.pack(f, value)
        if isinstance(f, UuidField):
            return [f"{self.buf} += {value}.bytes"]
        sized = f.size_field is not None
        if isinstance(f, BytesField | StringField):
            data = value if isinstance(f, BytesField) else self.str_bytes(f, value)
            if sized:
                return [f"{self.buf} += b_{f.name}"]
            lines = []
            if isinstance(f, StringField) or f.prefix is not None:
                lines.append(f"data_{f.name} = {data}")
                data = f"data_{f.name}"
            if f.length is not None:
                self.ctx.uses.add("errors:EncodeError")
                lines += [f"if len({data}) != {f.length}:", *_indent(_raise(
                    "EncodeError", f"{self.s.name}.{f.name} must be {f.length} bytes",
                    fmt=False))]
            if f.prefix is not None:
                lines += self.prefix(f, f"len({data})")
            return [*lines, f"{self.buf} += {data}"]
        if isinstance(f, ProtoField | StructField | SwitchField):
            if sized:
                return [f"{self.buf} += b_{f.name}"]
            args = self.struct_args(f) if isinstance(f, StructField) else ""
            if f.prefix is not None:
                return [f"data_{f.name} = {value}.encode({args.lstrip(', ')})",
                        *self.prefix(f, f"len(data_{f.name})"), f"{self.buf} += data_{f.name}"]
            return [f"{value}.encode_to({self.buf}{args})"]
        if isinstance(f, ArrayField):
            if sized:
                return [f"{self.buf} += b_{f.name}"]
            return self.array_write(f, self.buf)
        if isinstance(f, BlocksField):
            cw, cs = INT_TYPES[f.block_count]
            lw, ls = INT_TYPES[f.block_length]
            cp = self.ctx.packer(cw, cs, self.ctx.spec.byte_order)
            lp = self.ctx.packer(lw, ls, self.ctx.spec.byte_order)
            size = f.block_size
            lines = [
                f"content = {value}.encode({self.struct_args(f).lstrip(', ')})",
                f"{self.buf} += {cp}.pack((len(content) + {size - 1}) // {size})",
                f"for i in range(0, len(content), {size}):",
                f"    block = content[i : i + {size}]",
                f"    {self.buf} += {lp}.pack(len(block))",
                f"    {self.buf} += block",
            ]
            if f.max_blocks is not None:
                self.ctx.uses.add("errors:EncodeError")
                lines[1:1] = [f"if len(content) > {f.max_blocks * size}:", *_indent(_raise(
                    "EncodeError", f"{self.s.name}.{f.name}: {{len(content)}} bytes need "
                    f"more than {f.max_blocks} blocks"))]
            return lines
        raise _error(f, f"{f.name!r}: no encoder for a {f.kind} field")

    def prefix(self, f: FrameField, length: str) -> list[str]:
        assert f.prefix is not None
        if f.prefix == "varint":
            self.ctx.uses.add("protowire:varint_bytes")
            return [f"{self.buf} += varint_bytes({length})"]
        width, signed = INT_TYPES[f.prefix]
        return [f"{self.buf} += {self.ctx.packer(width, signed, self.ctx.spec.byte_order)}"
                f".pack({length})"]


def _const_bytes(f: FrameField) -> bytes:
    assert f.const is not None
    if isinstance(f, VarintField):
        out = bytearray()
        v = f.const
        while v > 0x7F:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        return bytes(out)
    i = _int(f)
    return f.const.to_bytes(i.width, "little" if i.order == "little" else "big",
                            signed=i.signed)


def _extras(ctx: _Ctx, s: StructDef) -> list[str]:
    """Extra members: decompression helpers."""
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
    msg = nested_message(target) if target is not None else None
    attrs = [head]
    for part in rest:
        assert msg is not None
        pf = next(x for x in msg.fields if x.proto_name == part)
        attrs.append(pf.py_name)
        msg = pf.type.message
    return "self." + ".".join(attrs)


# ---------------------------------------------------------------------------------------------
# frame length probe and command tables


def _magic_checks(ctx: _Ctx, frame: StructDef, upto: int) -> list[str]:
    """Checks of the constants in the first ``upto`` header bytes, so garbage fails fast."""
    lines: list[str] = []
    offset = 0
    for f in frame.fields:
        if offset >= upto or f.fixed_size is None:
            break
        if f.const is not None and isinstance(f, IntField) and not f.marker:
            packer = ctx.packer(f.width, f.signed, f.order)
            ctx.uses.add("errors:BadMagicError")
            lines += [f"magic = {packer}.unpack_from(buf, {_at('pos', offset)})[0]",
                      f"if magic != {f.const:#x}:", *_indent(_raise(
                          "BadMagicError", f"{frame.name}.{f.name}: expected {f.const:#x}, "
                          "got {magic:#x}"))]
        offset += f.fixed_size
    return lines


def _length_lines(ctx: _Ctx, frame: StructDef) -> list[str]:
    """Body of ``frame_length(buf, pos, end, limit)``: the frame size once the header is in."""
    length = frame_length_field(frame)
    if length is None:
        raise GeneratorBug("no frame length field (frame_checks lets no such frame through)",
                           str(frame.location))
    f, offset = length.field, length.offset
    if isinstance(f, IntField):
        between = length.between
        header = offset + f.width
        packer = ctx.packer(f.width, f.signed, f.order)
        ctx.uses.add("errors:FrameTooLargeError")
        ctx.uses.add("errors:SizeMismatchError")
        # An unsigned length cannot make the size smaller than the header.
        negative = [f"if size < {header + between}:",
                    "    raise SizeMismatchError(f\"negative frame length {size}\")"]
        return [
            f"if end - pos < {header}:",
            "    return None",
            *_magic_checks(ctx, frame, header),
            f"size: int = {header + between} + "
            f"{packer}.unpack_from(buf, {_at('pos', offset)})[0]",
            *(negative if f.signed else []),
            "if size > limit:",
            "    raise FrameTooLargeError(f\"frame of {size} bytes is over the "
            "{limit}-byte limit\")",
            "return size",
        ]
    cw, cs = INT_TYPES[f.block_count]
    lw, ls = INT_TYPES[f.block_length]
    cp = ctx.packer(cw, cs, ctx.spec.byte_order)
    lp = ctx.packer(lw, ls, ctx.spec.byte_order)
    ctx.uses.add("errors:FrameTooLargeError")
    most = f"min({f.max_blocks}, limit // {lw})" if f.max_blocks else f"limit // {lw}"
    return [
        f"p = {_at('pos', offset)}",
        f"if end - p < {cw}:",
        "    return None",
        *_magic_checks(ctx, frame, offset),
        f"count: int = {cp}.unpack_from(buf, p)[0]",
        f"p += {cw}",
        f"if count > {most}:",
        "    raise FrameTooLargeError(f\"{count} blocks: over the limit\")",
        "for _ in range(count):",
        f"    if end - p < {lw}:",
        "        return None",
        f"    n: int = {lp}.unpack_from(buf, p)[0]",
        f"    if n > {f.block_size}:",
        f"        raise FrameTooLargeError(f\"block of {{n}} bytes: blocks hold up to "
        f"{f.block_size}\")",
        f"    p += {lw} + n",
        "    if p - pos > limit:",
        "        raise FrameTooLargeError(f\"frame over the {limit}-byte limit\")",
        "if p > end:",
        "    return None",
        "return p - pos",
    ]


def _local_imports(proto_modules: set[str], spec: FrameSpec) -> list[str]:
    # The body fields of an envelope come from the protocol's command table (commands.py).
    envelope = any(isinstance(f, ProtoField) and f.dispatch_on is not None
                   for f in spec.frame.fields)
    modules = sorted(proto_modules | ({"commands"} if envelope else set()))
    return [f"from . import {', '.join(modules)}"] if modules else []


def _command_table(ctx: _Ctx, spec: FrameSpec) -> list[str]:
    lines: list[str] = []
    for f in spec.frame.fields:
        if isinstance(f, ProtoField) and f.dispatch_on is not None and f.message is not None:
            enum = f.dispatch_on.type.enum
            assert enum is not None
            enum_ref = ctx.proto_ref(enum.py_path, enum.full_name)
            # Which field of the envelope holds the body, for each command type: read from the
            # protocol's one command table.
            lines.append(f"_BODY_FIELDS: dict[{enum_ref}, str] = commands.BODY_FIELDS")
    for s in [*spec.structs, spec.frame]:
        for f in s.fields:
            if isinstance(f, SwitchField):
                name = f"{f.tables}_CODES"
                lines.append(f"{name}: dict[type[{f.alias}], int] = {{")
                seen: set[str] = set()
                for c in f.cases:
                    for st in c.structs:
                        if st.name not in seen:
                            seen.add(st.name)
                            lines.append(f"    {st.name}: {c.value},")
                lines.append("}")
    return lines
