"""The Spark view of a protocol: the generated ``spark.py`` module as a whole.

For every protobuf message and every frame struct the module has a Spark ``StructType``, the
equivalent Arrow struct type, and three straight-line functions: value -> row (a dict),
row -> value, and values -> Arrow struct column. This module orders them (a schema refers to
the schemas before it), builds each message's and struct's columns and works out the
module's imports; the types come from ``spark_kinds`` (with the documented ``TYPE_MAPPING``),
the functions from ``spark_codec``, switches and the pipeline's entry points from
``spark_frames``, and the names they share from ``spark_emit``.

The generated module is the only one that imports pyspark and pyarrow; nothing else under
``generated/`` imports it. Its helpers live in ``runtime/spark/rows.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from protoframe.generator.codewriter import docstring, q
from protoframe.generator.errors import GeneratorBug
from protoframe.generator.frame_checks import structs_of
from protoframe.generator.frame_ir import ArrayField, StructDef, SwitchField, struct_refs
from protoframe.generator.ir import Label, MessageType, Presence, Protocol
from protoframe.generator.runtime_modules import ERRORS, SPARK_ROWS
from protoframe.generator.spark_codec import CodecView, Column, at, codec
from protoframe.generator.spark_emit import SparkContext, field_message
from protoframe.generator.spark_frames import FrameView, frame_view, union_codec
from protoframe.generator.spark_kinds import TYPE_MAPPING, frame_kind, proto_kind
from protoframe.generator.spec_ir import FrameSpec


@dataclass
class SparkModuleView:
    source: str
    module_doc: str
    import_lines: list[str]
    exports: list[str]
    enum_lines: list[str]  # these and the other lines: fitted at their depth in the template
    codecs: list[CodecView]
    message_lines: list[str]  # MESSAGES' items: full name -> codec
    struct_lines: list[str]  # STRUCTS' items
    frame: FrameView | None


def build_spark_module(protocol: Protocol, specs: list[FrameSpec],
                       display_root: str) -> SparkModuleView:
    """The render-ready view of ``generated/<protocol>/spark.py``."""
    ctx = SparkContext(protocol, specs)
    ctx.assign_keys()
    # What the template's skeleton (function signatures, RowCodec constants) names.
    ctx.use("collections.abc", "Sequence")
    ctx.use("typing", "Any")
    ctx.imports.use("pyarrow as pa")
    ctx.use(SPARK_ROWS, "RowCodec", "RowLike")
    codecs: list[CodecView] = []
    for m in _dependency_order(ctx.messages, ctx.recursive):
        codecs.append(_message_codec(ctx, m))
    frame: FrameView | None = None
    for spec in specs:
        ctx.imports.use(".", "frames")
        for s in _struct_order(spec):
            for f in s.data_fields:
                if isinstance(f, SwitchField):
                    codecs.append(union_codec(ctx, s, f))
            codecs.append(_struct_codec(ctx, s))
        frame = frame_view(ctx, spec)
    enum_lines = _enum_lines(ctx)
    if frame is not None:  # decode_frame catches them
        ctx.use(ERRORS, "ChecksumFailure", "DecodeError")
    files = ", ".join(p.path.split("/")[-1] for p in protocol.files)
    intro = (f"Spark schemas and row/Arrow conversions for the {protocol.name} "
             f"protocol.\n\nEvery message of {files or 'its .proto files'}"
             + (" and every frame struct" if specs else "")
             + " has a ``RowCodec`` here, named as its class (nested names joined with "
             "``_``): ``spark_schema``, ``arrow_schema``, ``to_row``/``from_row`` and "
             "``to_record_batch``/``from_record_batch``. ``MESSAGES`` indexes them by "
             "protobuf full name, ``STRUCTS`` by frame struct name.")
    if frame is not None:
        intro += (f" ``FRAME`` is the codec of {frame.py_type.split('.')[-1]}; "
                  "``decode_frame`` and ``command_name`` serve the capture pipeline "
                  "(pipeline/capture_decode.py).")
    intro += ("\n\nThis module imports pyspark and pyarrow; no other generated module "
              "imports it.\n\n" + TYPE_MAPPING)
    for c in codecs:
        c.fit()
    if frame is not None:
        frame.name_lines = at(1, frame.name_lines)
        frame.table_lines = at(0, frame.table_lines)
        py = frame.py_type
        frame.fitted = {
            "constant": at(0, [f"FRAME: RowCodec[{py}] = {frame.key}"]),
            "decode_returns": at(0, [f") -> tuple[{py} | None, str | None]:"]),
            "decode": at(2, [f"return {frame.decode_expr}, None"]),
            "keep": at(2, [f"frame = value if isinstance(value, {py}) else None"]),
            "command_name": at(0, [f"def command_name(frame: {py}) -> str:"]),
        }
    exports = [c.key for c in codecs if c.public] + ["MESSAGES", "STRUCTS"]
    if frame is not None:
        exports += ["FRAME", "command_name", "decode_frame"]
    return SparkModuleView(
        source=f"{display_root}/{protocol.name}",
        module_doc=docstring(intro, ""),
        import_lines=ctx.imports.block(),
        exports=sorted(exports),
        enum_lines=at(0, enum_lines),
        codecs=codecs,
        message_lines=at(1, [f"{q(m.full_name)}: {ctx.keys[m.full_name]},"
                             for m in ctx.messages]),
        struct_lines=at(1, [f"{q(s.name)}: {ctx.keys[s.name]},"
                            for spec in specs for s in structs_of(spec)]),
        frame=frame,
    )


def _enum_lines(ctx: SparkContext) -> list[str]:
    lines: list[str] = []
    for key, enum in sorted(ctx.enums.items()):
        names: dict[int, str] = {}
        for v in enum.values:
            names.setdefault(v.number, v.proto_name)
        lines.append(f"_NAMES_{key}: dict[int, str] = {{")
        lines += [f"    {n}: {q(name)}," for n, name in names.items()]
        lines.append("}")
        lines.append(f"_NUMBERS_{key}: dict[str, int] = {{")
        lines += [f"    {q(v.proto_name)}: {v.number}," for v in enum.values]
        lines.append("}")
    return lines


def _message_codec(ctx: SparkContext, m: MessageType) -> CodecView:
    key = ctx.keys[m.full_name]
    py_type = ctx.ref(m.full_name, m.py_path)
    columns: list[Column] = []
    for f in m.fields:
        where = q(f"{m.proto_name}.{f.proto_name}")
        if f.is_map:
            assert f.map_key is not None and f.map_value is not None
            columns.append(Column(
                name=f.proto_name, attr=f.py_name, storage=f.py_name, shape="map",
                kind=proto_kind(ctx, f.map_value), key_kind=proto_kind(ctx, f.map_key),
                nullable=False, where=where, number=f.number))
            continue
        kind = proto_kind(ctx, f.type, (m.full_name, f.number) in ctx.recursive)
        shape = "list" if f.label is Label.REPEATED else "one"
        nullable = shape == "one" and f.presence is Presence.EXPLICIT
        columns.append(Column(name=f.proto_name, attr=f.py_name, storage=f.storage,
                              shape=shape, kind=kind, nullable=nullable, where=where,
                              number=f.number))
    return codec(ctx, key, m.full_name, py_type, f"{m.proto_name} message ({m.full_name})",
                 columns)


def _struct_codec(ctx: SparkContext, s: StructDef) -> CodecView:
    key = ctx.keys[s.name]
    columns: list[Column] = []
    for f in s.data_fields:
        where = q(f"{s.name}.{f.name}")
        nullable = f.nullable or f.optional and not f.marker and not (
            f.when_remaining and f.default is not None)
        if isinstance(f, ArrayField) and f.element is not None:
            kind = frame_kind(ctx, s, f.element)
            columns.append(Column(f.name, f.name, f.name, "list", kind, nullable, where))
        else:
            columns.append(Column(f.name, f.name, f.name, "one", frame_kind(ctx, s, f),
                                  nullable, where))
    return codec(ctx, key, s.name, f"frames.{s.name}", f"{s.name} frame struct", columns)


def _dependency_order(messages: list[MessageType],
                      recursive: set[tuple[str, int]]) -> list[MessageType]:
    """Messages after the messages their (non-recursive) fields hold: schemas refer back."""
    by_name = {m.full_name: m for m in messages}
    out: list[MessageType] = []
    done: set[str] = set()

    def visit(m: MessageType) -> None:
        if m.full_name in done:
            return
        done.add(m.full_name)
        for f in m.fields:
            target = field_message(f)
            if target is not None and (m.full_name, f.number) not in recursive:
                visit(by_name[target.full_name])
        out.append(m)

    for m in messages:
        visit(m)
    return out


def _struct_order(spec: FrameSpec) -> list[StructDef]:
    """Structs after the structs they hold (frame_checks has ruled out cycles)."""
    out: list[StructDef] = []
    state: dict[str, int] = {}  # 1: being visited, 2: done

    def visit(s: StructDef) -> None:
        if state.get(s.name) == 2:
            return
        if state.get(s.name) == 1:
            raise GeneratorBug(f"spark.py: struct {s.name} contains itself", str(s.location))
        state[s.name] = 1
        for f in s.data_fields:
            for dep in struct_refs(f):
                visit(dep)
        state[s.name] = 2
        out.append(s)

    for s in structs_of(spec):
        visit(s)
    return out

