"""The Python view of a frame spec: the frames module's classes, stream decoder and tables.

Each struct becomes a slots dataclass holding only its data fields; computed fields (constants,
sizes, counts, checksums, switch keys, ``value:`` expressions) are derived on encode and checked
on decode, so a value built by hand can never disagree with its own header. The codec bodies
come from ``frame_decoder`` and ``frame_encoder``, the frame-length probe from
``frame_length``, the C codec's tables from ``frame_layouts``; all of them read the structs'
layout plans (``layout_plan``), which also give the order of the classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protoframe.generator.bit_codec import enum_text
from protoframe.generator.codewriter import docstring, literal, q
from protoframe.generator.delimiter_emit import (
    delimited_decode,
    delimited_encode,
    delimited_length,
)
from protoframe.generator.first_emit import FirstView, first_view
from protoframe.generator.first_emit import stream_lines as first_stream_lines
from protoframe.generator.frame_class import class_text, stream_lines
from protoframe.generator.frame_decoder import Decoder
from protoframe.generator.frame_emit import EmitContext, annotation
from protoframe.generator.frame_encoder import Encoder
from protoframe.generator.frame_ir import (
    ArrayField,
    FrameField,
    ProtoField,
    StructDef,
    StructField,
    SwitchField,
    held_struct,
    nested_message,
)
from protoframe.generator.frame_layouts import layout_lines
from protoframe.generator.frame_length import length_lines
from protoframe.generator.layout_plan import LayoutPlan, plan_spec
from protoframe.generator.linefit import INDENT, fit_all
from protoframe.generator.require_emit import required_decode, required_encode
from protoframe.generator.runtime_modules import (
    COMPILED_FRAMES,
    COMPRESSION,
    ERRORS,
    STREAM,
)
from protoframe.generator.spec_ir import FrameSpec


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


@dataclass
class FramesModuleView:
    source: str
    module_doc: str
    # The import block, its sections apart by blank lines: what the module's code declared.
    import_lines: list[str]
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
    enum_texts: list[str] = field(default_factory=list)  # the spec's enums, as IntEnum classes
    first: FirstView | None = None  # ``first:``: the first messages' probes and decoder
    first_doc: str = ""  # the stream decoder's docstring text before ``first:`` adds to it
    stream_length: str = "frame_length"  # what the stream decoder finds a frame's length with

    # What the template prints, each line fitted at the depth it is printed at.
    @property
    def export_lines(self) -> list[str]:
        return fit_all(f"{INDENT}{q(name)}," for name in self.exports)

    @property
    def class_texts(self) -> list[str]:
        return [class_text(c) for c in self.classes]

    @property
    def alias_texts(self) -> list[str]:
        return ["\n".join(fit_all([alias])) for alias in self.aliases]

    @property
    def constant_lines(self) -> list[str]:
        return fit_all(self.constants)

    @property
    def table_lines(self) -> list[str]:
        return fit_all(self.command_table)

    @property
    def layout_table_lines(self) -> list[str]:
        return fit_all(self.layout_lines)

    @property
    def length_body(self) -> list[str]:
        return fit_all(INDENT + line for line in self.length_lines)

    @property
    def stream_lines(self) -> list[str]:
        if self.first is not None:
            return first_stream_lines(self.first, self.first_doc, self.stream_length)
        return stream_lines(self)



def build_frames_module(spec: FrameSpec) -> FramesModuleView:
    plans = plan_spec(spec)
    ctx = EmitContext(spec, plans)
    classes: list[ClassView] = []
    aliases: list[str] = []
    # A struct ended by a delimiter is read one at a time (its end is searched for).
    ctx.runs = _run_structs([p.struct for p in plans]) - {
        p.name for p in plans if p.delimiter is not None}
    for plan in plans:
        classes.append(_class_view(ctx, plan, aliases))
    delimited = delimited_length(ctx, plans[spec.frame.name])
    length = delimited[0] if delimited else length_lines(ctx, plans[spec.frame.name])
    directional = _directional(spec.frame)
    first = first_view(ctx, spec.frame.name, directional)
    command_table = _command_table(ctx, spec) + ctx.tables
    layouts = layout_lines(list(plans), lambda m: ctx.proto_ref(m.py_path, m.full_name))
    if layouts:
        ctx.imports.use(COMPILED_FRAMES, "install_frame_layouts")
    enums = [enum_text(ctx, e) for e in spec.frame_enums]
    # What the template's classes and FrameStream name.
    ctx.imports.use("dataclasses", "dataclass")
    ctx.imports.use("struct", "Struct")
    ctx.imports.use("struct", "error as struct_error")
    ctx.imports.use("typing", "Self")
    ctx.imports.use(ERRORS, "ValueOutOfRangeError")
    ctx.imports.use(ERRORS, "SizeMismatchError")
    ctx.imports.use(STREAM, "FrameStream")
    doc = spec.doc.strip() or f"Frames of the {spec.protocol} protocol."
    stream_doc = ("Incremental decoder: ``feed(data)`` returns every "
                  f"{spec.frame.name} the bytes complete.")
    if directional:
        stream_doc += ("\n\nLayouts differ by direction: pass ``to_server=True`` to decode "
                       "what a client sends (the server's side), False for what it receives.")
    return FramesModuleView(
        source=spec.path,
        module_doc=docstring(f"{doc}\n\nFrame layouts and codecs generated from {spec.path}.", ""),
        import_lines=ctx.imports.block(),
        constants=[f"{name} = {made}" for name, made in sorted(ctx.packers.items())],
        aliases=aliases,
        classes=classes,
        frame_name=spec.frame.name,
        length_lines=length,
        max_frame_size=spec.max_frame_size,
        stream_params=", to_server: bool = False" if directional else "",
        stream_args=", to_server=to_server" if directional else "",
        command_table=command_table,
        exports=sorted({c.name for c in classes} | {"StreamDecoder", "frame_length"}
                       | set(first.exports if first is not None else [])
                       | {e.name for e in spec.frame_enums}),
        stream_doc=docstring(stream_doc, "    "),
        layout_lines=layouts,
        enum_texts=enums,
        first=first,
        first_doc=stream_doc,
        stream_length=delimited[1] if delimited else "frame_length",
    )


def _directional(s: StructDef) -> bool:
    return s.is_frame and any(c.directional for f in s.fields if isinstance(f, SwitchField)
                              for c in f.cases)


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


def _class_view(ctx: EmitContext, plan: LayoutPlan, aliases: list[str]) -> ClassView:
    s = plan.struct
    fields: list[tuple[str, str]] = []
    for f in s.data_fields:
        ann = annotation(ctx, s, f)
        if isinstance(f, SwitchField):
            members = sorted({c.name for case in f.cases for c in case.structs})
            alias = f"{f.alias} = " + " | ".join(members)
            if len(alias) > 100:
                alias = f"{f.alias} = (\n    " + "\n    | ".join(members) + "\n)"
            aliases.append(alias)
        if f.marker:
            fields.append((f.name, "bool = False"))
        elif f.when_remaining and f.default is not None:
            fields.append((f.name, f"{ann} = {literal(f.default)}"))
        elif f.optional or f.nullable:
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
    decoder = Decoder(ctx, plan)
    decode_lines = delimited_decode(ctx, plan, required_decode(ctx, plan, decoder.lines()))
    return ClassView(
        name=s.name,
        doc=docstring("\n".join(doc_lines), "    "),
        fields=fields,
        encode_lines=delimited_encode(ctx, plan,
                                      required_encode(ctx, plan, Encoder(ctx, plan).lines())),
        decode_lines=decode_lines,
        run_lines=_run_lines(decode_lines) if s.name in ctx.runs else [],
        decode_params=params + kw,
        extra_lines=_extras(ctx, s),
        encode_params=", *, " + ", ".join(f"{p.name}: {p.kind}" for p in s.params)
        if s.params else "",
        encode_args="".join(f", {p.name}={p.name}" for p in s.params),
        decode_kw=kw,
        decode_args=args,
    )


def _extras(ctx: EmitContext, s: StructDef) -> list[str]:
    """Extra members: decompression helpers."""
    lines: list[str] = []
    for f in s.fields:
        if f.compression is not None:
            lines += _decompress_method(ctx, s, f)
    return lines


def _decompress_method(ctx: EmitContext, s: StructDef, f: FrameField) -> list[str]:
    assert f.compression is not None
    ctx.imports.use(COMPRESSION, "decompress")
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


def _command_table(ctx: EmitContext, spec: FrameSpec) -> list[str]:
    lines: list[str] = []
    for f in spec.frame.fields:
        if isinstance(f, ProtoField) and f.dispatch_on is not None and f.message is not None:
            enum = f.dispatch_on.type.enum
            assert enum is not None
            enum_ref = ctx.proto_ref(enum.py_path, enum.full_name)
            # Which field of the envelope holds the body, for each command type: read from the
            # protocol's one command table.
            ctx.imports.use(".", "commands")
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
