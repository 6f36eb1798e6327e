"""The Spark view of a protocol: schemas and row/Arrow conversions (``spark.py``).

For every protobuf message and every frame struct this decides the Spark ``StructType``, the
equivalent Arrow struct type, and three straight-line functions: value -> row (a dict),
row -> value, and values -> Arrow struct column. ``TYPE_MAPPING`` below is the documented
mapping; it is printed into each generated module's docstring.

The generated module is the only one that imports pyspark and pyarrow; nothing else under
``generated/`` imports it. Its helpers live in ``runtime/spark/rows.py``.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field

from protoframe.generator.codewriter import bytes_literal, docstring, q
from protoframe.generator.errors import GeneratorBug
from protoframe.generator.frame_checks import struct_refs, structs_of
from protoframe.generator.frame_ir import (
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
)
from protoframe.generator.ir import (
    EnumType,
    Field,
    FieldType,
    Label,
    MessageType,
    Presence,
    Protocol,
)
from protoframe.generator.linefit import fit_expression
from protoframe.generator.naming import spark_message_key, spark_struct_key, union_key
from protoframe.generator.proto_emit import varint_literal

TYPE_MAPPING = """\
Type mapping (Spark type / Arrow type):

    int32, sint32, sfixed32             IntegerType / int32
    uint32, fixed32, int64, sint64,     LongType / int64
    sfixed64
    uint64, fixed64                     DecimalType(20, 0) / decimal128(20, 0), exact
    bool                                BooleanType / bool
    double, float                       DoubleType, FloatType / float64, float32
    string, bytes                       StringType, BinaryType / string, binary
    enum                                StringType / string: the member's name as written
                                        in the .proto; a number the enum does not declare
                                        is its decimal text, e.g. "7"
    message                             StructType / struct
    repeated T                          ArrayType(T, containsNull=False) / list
    map<K, V>                           MapType(K, V, valueContainsNull=False) / map
    message inside its own type         BinaryType / binary: the protobuf encoding
    frame u8, u16, i8, i16, i32         IntegerType / int32
    frame u32, i64                      LongType / int64
    frame u64, varint                   DecimalType(20, 0) / decimal128(20, 0)
    frame bool (and const markers)      BooleanType / bool
    frame uuid                          StringType / string, canonical 8-4-4-4-12 form
    frame bytes, string                 BinaryType, StringType / binary, string
    frame proto, struct, blocks         StructType / struct
    frame array                         ArrayType(T, containsNull=False) / list
    frame switch                        StructType / struct, one nullable field per
                                        alternative struct, exactly one of them set

Nullability: required fields, repeated fields, maps, proto3 fields without ``optional`` and
unconditional frame fields are not nullable. Optional fields (proto2 ``optional``, proto3
``optional``, oneof members, message fields, conditional frame fields) are, and null means
unset: an unset field is null rather than its ``[default = ...]``, so ``has_<field>()``
survives the round trip.

Why uint64 is DecimalType(20, 0): Spark has no unsigned integer type. LongType with a range
check would fail at run time on valid values (anything from 2**63 up: ledger ids, hashes,
bit sets), and reinterpreting the bits as signed would silently order and compare such values
wrongly. DecimalType(20, 0) holds every uint64 exactly and orders them correctly; cast to
long in a query where the values are known to be small.

Enums: a closed (proto2) enum's decoder moves a number the enum does not declare to the
unknown fields and leaves the field unset; the row shows that number (decimal text) in the
field, and ``from_row`` puts it back among the unknown fields, so it is written on encode.
Open (proto3) enums hold unknown numbers directly. Other unknown fields are not part of rows.

Recursion: Spark schemas cannot contain themselves, so a message field whose type contains
the message holding it (directly, e.g. MessageIdData.first_chunk_message_id, or through
other messages) is BinaryType holding the field's protobuf encoding; decode it with the
message class (or ``from_row`` does it for you).
"""

_SCALARS: dict[str, tuple[str, str]] = {  # proto scalar -> (Spark type, Arrow type)
    "int32": ("IntegerType()", "pa.int32()"),
    "sint32": ("IntegerType()", "pa.int32()"),
    "sfixed32": ("IntegerType()", "pa.int32()"),
    "uint32": ("LongType()", "pa.int64()"),
    "fixed32": ("LongType()", "pa.int64()"),
    "int64": ("LongType()", "pa.int64()"),
    "sint64": ("LongType()", "pa.int64()"),
    "sfixed64": ("LongType()", "pa.int64()"),
    "uint64": ("DecimalType(20, 0)", "DECIMAL_20"),
    "fixed64": ("DecimalType(20, 0)", "DECIMAL_20"),
    "bool": ("BooleanType()", "pa.bool_()"),
    "double": ("DoubleType()", "pa.float64()"),
    "float": ("FloatType()", "pa.float32()"),
    "string": ("StringType()", "pa.string()"),
    "bytes": ("BinaryType()", "pa.binary()"),
}
_DECIMAL = ("DecimalType(20, 0)", "DECIMAL_20")

LIMIT = 96  # generated function bodies sit one level (four columns) in; the file limit is 100


@dataclass
class _Kind:
    """How values of one type look in rows, in Spark and in Arrow.

    The conversion patterns are ``str.format`` templates over one non-None value ("{}"), and
    ``{where}`` for the quoted field name in errors; "{}" alone means "as it is".
    """

    spark: str
    arrow: str
    py: str  # annotation of the value in the generated class
    row: str = "{}"  # value -> row value
    value: str = "{}"  # row value -> value
    column: str = "pa.array({}, {type})"  # list of values (None allowed) -> Arrow column
    lists: str = "pa.array({}, {type})"  # list of lists of values -> Arrow list column
    enum: EnumType | None = None  # closed enum: unknown numbers travel via unknown fields


@dataclass
class CodecView:
    """One generated type: its schema constants and the bodies of its three functions."""

    key: str  # public name of its RowCodec
    name: str  # protobuf full name or frame struct name
    py_type: str
    comment: list[str]
    schema_lines: list[str]
    row_doc: str
    row_lines: list[str]
    value_doc: str
    value_lines: list[str]
    arrow_doc: str
    arrow_lines: list[str]
    public: bool = True


@dataclass
class FrameView:
    """The protocol-level entry points the capture pipeline uses."""

    key: str
    py_type: str
    decode_expr: str
    name_lines: list[str]
    # Module-level tables ``command_name`` reads (the value -> name of each ``commands:`` route).
    table_lines: list[str] = field(default_factory=list)


@dataclass
class SparkModuleView:
    source: str
    module_doc: str
    stdlib_imports: list[str]
    spark_imports: list[str]
    runtime_imports: list[str]
    local_imports: list[str]
    exports: list[str]
    enum_lines: list[str]
    codecs: list[CodecView]
    messages: list[tuple[str, str]]  # (full name, key)
    structs: list[tuple[str, str]]
    frame: FrameView | None


@dataclass
class _Column:
    name: str  # column name: the field's name in the spec
    attr: str  # constructor keyword
    storage: str  # attribute to read
    shape: str  # "one", "list" or "map"
    kind: _Kind
    nullable: bool
    where: str  # quoted "Message.field" for errors
    number: int = 0
    key_kind: _Kind | None = None

    def types(self) -> tuple[str, str]:
        k = self.kind
        if self.shape == "map":
            assert self.key_kind is not None
            return (f"MapType({self.key_kind.spark}, {k.spark}, False)",
                    f"pa.map_(pa.field(\"key\", {self.key_kind.arrow}, nullable=False), "
                    f"pa.field(\"value\", {k.arrow}, nullable=False))")
        if self.shape == "list":
            return (f"ArrayType({k.spark}, False)",
                    f"pa.list_(pa.field(\"element\", {k.arrow}, nullable=False))")
        return k.spark, k.arrow


def build_spark_module(protocol: Protocol, specs: list[FrameSpec],
                       display_root: str) -> SparkModuleView:
    """The render-ready view of ``generated/<protocol>/spark.py``."""
    return _Builder(protocol, specs, display_root).build()


def _fit_in_body(indent: str, head: str, expr: str, tail: str) -> list[str]:
    """``linefit.fit_expression`` for a line of a function body (``LIMIT`` leaves its indent)."""
    return fit_expression(indent, head, expr, tail, LIMIT)


def _comment(text: str) -> list[str]:
    return ["# " + line for line in textwrap.wrap(text, width=LIMIT + 2)]


class _Builder:
    def __init__(self, protocol: Protocol, specs: list[FrameSpec], display_root: str) -> None:
        self.protocol = protocol
        self.specs = specs
        self.display_root = display_root
        self.module_of: dict[str, str] = {}
        self.messages: list[MessageType] = []
        for proto in protocol.files:
            for msg in proto.all_messages():
                self.module_of[msg.full_name] = proto.module
                if not msg.is_map_entry:
                    self.messages.append(msg)
            for enum in proto.all_enums():
                self.module_of[enum.full_name] = proto.module
        self.modules: set[str] = set()
        self.enums: dict[str, EnumType] = {}  # enum key -> enum, for the name tables
        self.keys: dict[str, str] = {}  # full name / struct name -> public key
        self.recursive = self._recursive_fields()

    # -- naming -------------------------------------------------------------------------------

    def ref(self, full_name: str, py_path: str) -> str:
        module = self.module_of[full_name]
        self.modules.add(module)
        return f"{module}.{py_path}"

    def enum_key(self, enum: EnumType) -> str:
        key = enum.py_path.replace(".", "_")
        self.enums.setdefault(key, enum)
        return key

    def _assign_keys(self) -> None:
        # Distinct by construction: frame_checks.check_protocol rejects a spec where two would
        # collide, before any output is built.
        for m in self.messages:
            self.keys[m.full_name] = spark_message_key(m.py_path)
        for spec in self.specs:
            for s in structs_of(spec):
                self.keys[s.name] = spark_struct_key(s.name)

    # -- recursion ------------------------------------------------------------------------------

    def _recursive_fields(self) -> set[tuple[str, int]]:
        """(message, field number) of message fields whose type contains the holder."""
        edges: dict[str, set[str]] = {}
        for m in self.messages:
            edges[m.full_name] = {t.full_name for t in (_field_message(f) for f in m.fields)
                                  if t is not None}

        def reaches(start: str, goal: str) -> bool:
            seen: set[str] = set()
            todo = [start]
            while todo:
                name = todo.pop()
                if name == goal:
                    return True
                if name in seen:
                    continue
                seen.add(name)
                todo.extend(edges.get(name, ()))
            return False

        out: set[tuple[str, int]] = set()
        for m in self.messages:
            for f in m.fields:
                target = _field_message(f)
                if target is not None and reaches(target.full_name, m.full_name):
                    out.add((m.full_name, f.number))
        return out

    # -- kinds ----------------------------------------------------------------------------------

    def proto_kind(self, t: FieldType, recursive: bool = False) -> _Kind:
        if t.kind == "enum":
            assert t.enum is not None
            key = self.enum_key(t.enum)
            ref = self.ref(t.enum.full_name, t.enum.py_path)
            names = f"_NAMES_{key}"
            if t.enum.closed:
                return _Kind("StringType()", "pa.string()", ref, row=f"{names}[{{}}]",
                             column=f"enum_array({{}}, {names})",
                             lists=f"enum_lists_array({{}}, {names})", enum=t.enum)
            return _Kind("StringType()", "pa.string()", f"{ref} | int",
                         row=f"enum_name({names}, {{}})",
                         value=f"enum_value({{}}, _NUMBERS_{key}, {ref}, {{where}})",
                         column=f"enum_array({{}}, {names})",
                         lists=f"enum_lists_array({{}}, {names})")
        if t.kind == "message":
            assert t.message is not None
            ref = self.ref(t.message.full_name, t.message.py_path)
            if recursive:
                return _Kind("BinaryType()", "pa.binary()", ref, row="{}.encode()",
                             value=f"{ref}.decode(binary_value({{}}))",
                             column="encoded_array({})", lists="encoded_lists_array({})")
            key = self.keys[t.message.full_name]
            return self._struct_kind(key, ref)
        spark, arrow = _SCALARS[t.kind]
        py = {"bool": "bool", "double": "float", "float": "float", "string": "str",
              "bytes": "bytes"}.get(t.kind, "int")
        if arrow == "DECIMAL_20":
            return self._decimal_kind()
        if t.kind == "bytes":
            return _Kind(spark, arrow, py, value="binary_value({})")
        return _Kind(spark, arrow, py)

    @staticmethod
    def _decimal_kind() -> _Kind:
        return _Kind(*_DECIMAL, "int", row="Decimal({})", value="uint64_value({}, {where})",
                     column="uint64_array({}, {type})", lists="uint64_array({}, {type})")

    @staticmethod
    def _struct_kind(key: str, py: str) -> _Kind:
        return _Kind(f"_SPARK_{key}", f"_ARROW_{key}", py, row=f"_row_{key}({{}})",
                     value=f"_value_{key}({{}})", column=f"_arrow_{key}({{}})",
                     lists=f"list_array({{}}, _arrow_{key}, {{type}})")

    def frame_kind(self, owner: StructDef, f: FrameField) -> _Kind:
        if f.marker:
            return _Kind("BooleanType()", "pa.bool_()", "bool")
        match f:
            case IntField(width=8, signed=False):
                return self._decimal_kind()
            case IntField(width=width, signed=signed):
                if width < 4 or (width == 4 and signed):
                    return _Kind("IntegerType()", "pa.int32()", "int")
                return _Kind("LongType()", "pa.int64()", "int")
            case VarintField():
                return self._decimal_kind()
            case BoolField():
                return _Kind("BooleanType()", "pa.bool_()", "bool")
            case UuidField():
                return _Kind("StringType()", "pa.string()", "UUID", row="str({})",
                             value="UUID({})", column="text_array({})",
                             lists="text_lists_array({})")
            case BytesField():
                return _Kind("BinaryType()", "pa.binary()", "bytes", value="binary_value({})")
            case StringField():
                return _Kind("StringType()", "pa.string()", "str")
            case ProtoField(message=message) if message is not None:
                return self.proto_kind(FieldType("message", message=message))
            case StructField(struct=held) | BlocksField(struct=held) if held is not None:
                return self._struct_kind(self.keys[held.name], f"frames.{held.name}")
            case SwitchField():
                key = union_key(owner.name, f.name)
                return self._struct_kind(key, f"_{key}_T")
        raise GeneratorBug(f"spark.py: frame field kind {f.kind!r} has no Spark mapping",
                           str(f.location))

    # -- building -------------------------------------------------------------------------------

    def build(self) -> SparkModuleView:
        self._assign_keys()
        codecs: list[CodecView] = []
        for m in _dependency_order(self.messages, self.recursive):
            codecs.append(self.message_codec(m))
        frame: FrameView | None = None
        for spec in self.specs:
            self.modules.add("frames")
            for s in _struct_order(spec):
                for f in s.data_fields:
                    if isinstance(f, SwitchField):
                        codecs.append(self.union_codec(s, f))
                codecs.append(self.struct_codec(s))
            frame = self.frame_view(spec)
        enum_lines = self.enum_lines()
        text = "\n".join(line for c in codecs for line in
                         c.schema_lines + c.row_lines + c.value_lines + c.arrow_lines)
        text += "\n" + "\n".join(enum_lines)
        if frame is not None:
            text += "\n" + "\n".join([frame.decode_expr, *frame.name_lines, *frame.table_lines])
        words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)) | {"RowCodec", "RowLike"}
        stdlib = ["from collections.abc import Sequence"]
        if "Decimal" in words:
            stdlib.append("from decimal import Decimal")
        stdlib.append("from typing import Any, TypeAlias" if "TypeAlias" in words
                      else "from typing import Any")
        if "UUID" in words:
            stdlib.append("from uuid import UUID")
        spark = sorted(n for n in _SPARK_NAMES if n in words | {"StructType"})
        runtime_names = sorted((n for n in _RUNTIME_NAMES if n in words), key=_isort_key)
        runtime = ["from protoframe.runtime.spark.rows import ("]
        runtime += [f"    {n}," for n in runtime_names]
        runtime.append(")")
        if frame is not None:
            runtime.insert(
                0, "from protoframe.runtime.errors import ChecksumFailure, DecodeError")
        files = ", ".join(p.path.split("/")[-1] for p in self.protocol.files)
        intro = (f"Spark schemas and row/Arrow conversions for the {self.protocol.name} "
                 f"protocol.\n\nEvery message of {files or 'its .proto files'}"
                 + (" and every frame struct" if self.specs else "")
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
        exports = [c.key for c in codecs if c.public] + ["MESSAGES", "STRUCTS"]
        if frame is not None:
            exports += ["FRAME", "command_name", "decode_frame"]
        return SparkModuleView(
            source=f"{self.display_root}/{self.protocol.name}",
            module_doc=docstring(intro, ""),
            stdlib_imports=stdlib,
            spark_imports=spark,
            runtime_imports=runtime,
            local_imports=[f"from . import {', '.join(sorted(self.modules))}"],
            exports=sorted(exports),
            enum_lines=enum_lines,
            codecs=codecs,
            messages=[(m.full_name, self.keys[m.full_name]) for m in self.messages],
            structs=[(s.name, self.keys[s.name]) for spec in self.specs for s in structs_of(spec)],
            frame=frame,
        )

    def enum_lines(self) -> list[str]:
        lines: list[str] = []
        for key, enum in sorted(self.enums.items()):
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

    # -- messages -------------------------------------------------------------------------------

    def message_codec(self, m: MessageType) -> CodecView:
        key = self.keys[m.full_name]
        py_type = self.ref(m.full_name, m.py_path)
        columns: list[_Column] = []
        for f in m.fields:
            where = q(f"{m.proto_name}.{f.proto_name}")
            if f.is_map:
                assert f.map_key is not None and f.map_value is not None
                columns.append(_Column(
                    name=f.proto_name, attr=f.py_name, storage=f.py_name, shape="map",
                    kind=self.proto_kind(f.map_value), key_kind=self.proto_kind(f.map_key),
                    nullable=False, where=where, number=f.number))
                continue
            kind = self.proto_kind(f.type, (m.full_name, f.number) in self.recursive)
            shape = "list" if f.label is Label.REPEATED else "one"
            nullable = shape == "one" and f.presence is Presence.EXPLICIT
            columns.append(_Column(name=f.proto_name, attr=f.py_name, storage=f.storage,
                                   shape=shape, kind=kind, nullable=nullable, where=where,
                                   number=f.number))
        return self.codec(key, m.full_name, py_type, f"{m.proto_name} message ({m.full_name})",
                          columns)

    # -- frame structs --------------------------------------------------------------------------

    def struct_codec(self, s: StructDef) -> CodecView:
        key = self.keys[s.name]
        columns: list[_Column] = []
        for f in s.data_fields:
            where = q(f"{s.name}.{f.name}")
            nullable = f.optional and not f.marker and not (
                f.when_remaining and f.default is not None)
            if isinstance(f, ArrayField) and f.element is not None:
                kind = self.frame_kind(s, f.element)
                columns.append(_Column(f.name, f.name, f.name, "list", kind, nullable, where))
            else:
                columns.append(_Column(f.name, f.name, f.name, "one", self.frame_kind(s, f),
                                       nullable, where))
        return self.codec(key, s.name, f"frames.{s.name}", f"{s.name} frame struct", columns)

    def union_codec(self, s: StructDef, f: SwitchField) -> CodecView:
        key = union_key(s.name, f.name)
        members = [(m.name, self.keys[m.name]) for m in _alternatives(f)]
        py_type = f"_{key}_T"
        schema = [f"{py_type}: TypeAlias = ("]
        schema += [f"    {'| ' if i else ''}frames.{name}" for i, (name, _) in enumerate(members)]
        schema += [")", f"_SPARK_{key} = StructType(["]
        schema += [f"    StructField({q(name)}, _SPARK_{k}, True)," for name, k in members]
        schema += ["])", f"_FIELDS_{key} = ["]
        schema += [f"    pa.field({q(name)}, _ARROW_{k})," for name, k in members]
        schema += ["]", f"_ARROW_{key} = pa.struct(_FIELDS_{key})"]
        row = ["return {"]
        for name, k in members:
            row += _fit_in_body("    ", f"{q(name)}: ",
                        f"_row_{k}(m) if isinstance(m, frames.{name}) else None", ",")
        row.append("}")
        where = q(f"{s.name}.{f.name}")
        value = ["r = as_mapping(row)"]
        for name, k in members:
            # One name for every alternative: a row's values are all ``Any``.
            value += [f"alternative = r[{q(name)}]", "if alternative is not None:",
                      f"    return _value_{k}(alternative)"]
        value.append(f"no_alternative({where})")
        arrow = ["rows, take = present(values)", "if not rows:",
                 f"    return null_column(len(values), _ARROW_{key})", "arrays = ["]
        for name, k in members:
            arrow += _fit_in_body("    ", "", f"_arrow_{k}([x if isinstance(x, frames.{name}) else "
                                       "None for x in rows])", ",")
        arrow += ["]", f"return struct_array(arrays, _FIELDS_{key}, len(rows), take)"]
        name = f"{s.name}.{f.name}"
        return CodecView(
            key=key, name=name, py_type=py_type,
            comment=_comment(f"The {name} switch: one field per alternative struct, exactly "
                             "one of them set."),
            schema_lines=schema,
            row_doc=docstring(f"The row of a {name} value: its alternative's row under the "
                              "struct's name.", "    "),
            row_lines=row,
            value_doc=docstring(f"The {name} value a row holds (the one alternative set).",
                                "    "),
            value_lines=value,
            arrow_doc=docstring(f"An Arrow struct column of {name} values (None: null).",
                                "    "),
            arrow_lines=arrow,
            public=False,
        )

    def frame_view(self, spec: FrameSpec) -> FrameView:
        frame = spec.frame
        key = self.keys[frame.name]
        directional = any(c.directional for f in frame.fields if isinstance(f, SwitchField)
                          for c in f.cases)
        decode = f"frames.{frame.name}.decode(data" + (", to_server=to_server)" if directional
                                                        else ")")
        py_type = f"frames.{frame.name}"
        if spec.routes:  # frames that name their command inside (as machines.command_of does)
            names, tables = self.route_names(spec)
            return FrameView(key, py_type, decode, names, tables)
        for f in frame.fields:
            if isinstance(f, ProtoField) and f.dispatch_on is not None:
                enum = f.dispatch_on.type.enum
                assert enum is not None
                return FrameView(key, py_type, decode, _fit_in_body(
                    "", "return ",
                    f"enum_name(_NAMES_{self.enum_key(enum)}, "
                    f"frame.{f.name}.{f.dispatch_on.py_name})", ""))
            if isinstance(f, SwitchField):
                lines = [f"body = frame.{f.name}"]
                for case in f.cases:
                    for s in case.structs:
                        lines += [f"if isinstance(body, frames.{s.name}):",
                                  f"    return {q(case.name)}"]
                lines.append("return type(body).__name__")
                return FrameView(key, py_type, decode, lines)
        return FrameView(key, py_type, decode, [f"return {q(frame.name)}"])

    def route_names(self, spec: FrameSpec) -> tuple[list[str], list[str]]:
        """``command_name``'s body for a frame whose ``commands:`` routes name its command.

        Each route applies when every optional link of its ``in:`` path is present, as in
        ``machines.command_of``; its ``on:`` value is looked up in a table. Unlike
        ``command_of`` nothing is decoded, and a value no command has is its decimal text (as
        an undeclared enum number is); a frame no route applies to is named by its struct.
        """
        lines: list[str] = []
        tables: list[str] = []
        # A link is named after its path: the same path has the same type in every route.
        for route in spec.routes:
            conditions: list[str] = []
            expr = "frame"
            last = len(route.part.steps) - 1
            path: list[str] = []
            for i, step in enumerate(route.part.steps):
                expr = f"{expr}.{step.attr}"
                path.append(step.attr)
                if step.optional and i == last and route.on is None:  # the part goes unread
                    conditions.append(f"{expr} is not None")
                elif step.optional:
                    link = "_".join(path)
                    conditions.append(f"({link} := {expr}) is not None")
                    expr = link
            if route.on is None:
                body = [f"return {q(route.commands[0].name)}"]
            else:
                table = f"_COMMAND_NAMES_{route.index}"
                tables += ["", f"# The commands of {route.part.text}, by {route.on.text}.",
                           f"{table}: dict[int, str] = {{",
                           *[f"    {c.value}: {q(c.name)}," for c in route.commands], "}"]
                on = ".".join([expr, *(s.attr for s in route.on.steps)])
                # Named after its whole path: routes reading other paths may differ in type.
                v = "_".join([*path, *(s.attr for s in route.on.steps)])
                body = [f"{v} = {on}", f"return {table}.get({v}) or str(int({v}))"]
            if not conditions:  # the route always applies: later ones never do
                lines += body
                return lines, [""] + tables if tables else []
            one = f"if {' and '.join(conditions)}:"
            if len(one) <= LIMIT:
                lines.append(one)
            else:
                lines += ["if (", f"    {conditions[0]}",
                          *[f"    and {c}" for c in conditions[1:]], "):"]
            lines += [f"    {line}" for line in body]
        lines.append(f"return {q(spec.frame.name)}")
        return lines, [""] + tables if tables else []

    # -- the three functions ----------------------------------------------------------------------

    def codec(self, key: str, name: str, py_type: str, title: str,
              columns: list[_Column]) -> CodecView:
        spark_fields: list[str] = []
        arrow_fields: list[str] = []
        for c in columns:
            spark_type, arrow_type = c.types()
            spark_fields += _fit_in_body("    ", "", f"StructField({q(c.name)}, {spark_type}, "
                                           f"{c.nullable})", ",")
            nullable = "" if c.nullable else ", nullable=False"
            arrow_fields += _fit_in_body(
                "    ", "", f"pa.field({q(c.name)}, {arrow_type}{nullable})", ",")
        if columns:
            schema = [f"_SPARK_{key} = StructType([", *spark_fields, "])",
                      f"_FIELDS_{key} = [", *arrow_fields, "]"]
        else:
            schema = [f"_SPARK_{key} = StructType([])", f"_FIELDS_{key}: list[Any] = []"]
        schema.append(f"_ARROW_{key} = pa.struct(_FIELDS_{key})")
        short = py_type.split(".", 1)[-1]
        return CodecView(
            key=key, name=name, py_type=py_type, comment=_comment(f"The {title}."),
            schema_lines=schema,
            row_doc=docstring(f"The row of a {short}: field name -> row value.", "    "),
            row_lines=self.row_lines(columns),
            value_doc=docstring(f"The {short} a row holds (a dict or a pyspark Row).", "    "),
            value_lines=self.value_lines(py_type, columns),
            arrow_doc=docstring(f"An Arrow struct column of {short} values (None: null).",
                                "    "),
            arrow_lines=self.arrow_lines(key, columns),
        )

    def row_lines(self, columns: list[_Column]) -> list[str]:
        """Body of ``_row_<key>(m)``: one dict display, reading each attribute once."""
        pre: list[str] = []
        items: list[str] = []
        for c in columns:
            k = c.kind
            src = f"m.{c.storage}"
            if c.shape == "map":
                assert c.key_kind is not None
                if c.key_kind.row == "{}" and k.row == "{}":
                    expr = f"dict({src})"
                else:
                    pre.append(f"x_{c.attr} = {src}")
                    expr = (f"{{{c.key_kind.row.format('k')}: {k.row.format('y')} "
                            f"for k, y in x_{c.attr}.items()}}")
            elif c.shape == "list":
                if k.row == "{}" and not c.nullable:
                    expr = f"list({src})"
                else:
                    pre.append(f"x_{c.attr} = {src}")
                    expr = f"list(x_{c.attr})" if k.row == "{}" else \
                        f"[{k.row.format('y')} for y in x_{c.attr}]"
                if k.enum is not None:
                    expr += f" + unknown_enums(m._unknown, {c.number})"
                if c.nullable:  # a conditional frame array
                    expr = f"None if x_{c.attr} is None else {expr}"
            elif k.enum is not None and c.nullable:
                pre.append(f"x_{c.attr} = {src}")
                expr = (f"{k.row.format(f'x_{c.attr}')} if x_{c.attr} is not None "
                        f"else unknown_enum(m._unknown, {c.number})")
            elif k.row == "{}":
                expr = src
            elif c.nullable:
                pre.append(f"x_{c.attr} = {src}")
                expr = f"None if x_{c.attr} is None else {k.row.format(f'x_{c.attr}')}"
            else:
                expr = k.row.format(src)
            items += _fit_in_body("    ", f"{q(c.name)}: ", expr, ",")
        if not items:
            return ["return {}"]
        return [*pre, "return {", *items, "}"]

    def value_lines(self, py_type: str, columns: list[_Column]) -> list[str]:
        """Body of ``_value_<key>(row)``: read each column, build the value by keyword."""
        lines = ["r = as_mapping(row)"] if columns else []
        args: list[str] = []
        unknown = False
        for c in columns:
            k = c.kind
            lines.append(f"v_{c.attr} = r[{q(c.name)}]")
            var = f"v_{c.attr}"
            if c.shape == "map":
                assert c.key_kind is not None
                kexpr = c.key_kind.value.format("k", where=c.where)
                vexpr = k.value.format("y", where=c.where)
                expr = f"{{{kexpr}: {vexpr} for k, y in map_items({var})}}"
            elif k.enum is not None:
                unknown = True
                key = self.enum_key(k.enum)
                ref = self.ref(k.enum.full_name, k.enum.py_path)
                tag = bytes_literal(varint_literal(c.number << 3))
                call = "closed_enums" if c.shape == "list" else "closed_enum"
                lines += _fit_in_body(
                    "", f"e_{c.attr} = ",
                    f"{call}({var}, _NUMBERS_{key}, {ref}, {tag}, unknown, {c.where})", "")
                expr = f"e_{c.attr}"
                if c.shape == "one" and not c.nullable:
                    expr = f"required_enum(e_{c.attr}, {c.where})"
            elif c.shape == "list" and c.nullable:  # a conditional frame array
                expr = f"None if {var} is None else " + (
                    f"list({var})" if k.value == "{}" else
                    f"[{k.value.format('y', where=c.where)} for y in {var}]")
            elif c.shape == "list":
                expr = f"list({var} or ())" if k.value == "{}" else \
                    f"[{k.value.format('y', where=c.where)} for y in {var} or ()]"
            elif c.nullable:
                expr = var if k.value == "{}" else \
                    f"None if {var} is None else {k.value.format(var, where=c.where)}"
            elif k.value == "{}":
                expr = f"required({var}, {c.where})"
            elif "uint64_value" in k.value:  # rejects null itself
                expr = k.value.format(var, where=c.where)
            else:
                expr = k.value.format(f"required({var}, {c.where})", where=c.where)
            args += _fit_in_body("    ", f"{c.attr}=", expr, ",")
        if unknown:
            lines.insert(1, "unknown = bytearray()")
        if args:
            lines += [f"value = {py_type}(", *args, ")"]
        else:
            lines.append(f"value = {py_type}()")
        if unknown:
            lines += ["if unknown:", "    value._unknown = bytes(unknown)"]
        lines.append("return value")
        return lines

    def arrow_lines(self, key: str, columns: list[_Column]) -> list[str]:
        """Body of ``_arrow_<key>(values)``: one list and one Arrow array per column."""
        lines = ["rows, take = present(values)", "if not rows:",
                 f"    return null_column(len(values), _ARROW_{key})"]
        if columns:
            lines.append(f"fields = _FIELDS_{key}")
        if any(c.kind.enum is not None and (c.nullable or c.shape == "list") for c in columns):
            lines.append("unknown = [m._unknown for m in rows]")
        arrays: list[str] = []
        for i, c in enumerate(columns):
            k = c.kind
            ftype = f"fields[{i}].type"
            lines.append(f"v_{c.attr} = [m.{c.storage} for m in rows]")
            if c.shape == "map":
                assert c.key_kind is not None
                keys = c.key_kind.column.format("keys", type=f"{ftype}.key_type")
                vals = k.column.format("items", type=f"{ftype}.item_type")
                lines += [f"keys, items = map_entries(v_{c.attr})"]
                expr = f"pa.MapArray.from_arrays(list_offsets(v_{c.attr}), {keys}, {vals}, " \
                       f"type={ftype})"
            elif c.shape == "list":
                expr = k.lists.format(f"v_{c.attr}", type=ftype)
                if k.enum is not None:
                    expr = expr[:-1] + f", unknown, {c.number})"
            else:
                expr = k.column.format(f"v_{c.attr}", type=ftype)
                if k.enum is not None and c.nullable:
                    expr = expr[:-1] + f", unknown, {c.number})"
            lines += _fit_in_body("", f"c_{c.attr} = ", expr, "")
            arrays.append(f"c_{c.attr}")
        if not columns:
            lines.append(f"return struct_array([], _FIELDS_{key}, len(rows), take)")
            return lines
        one = f"arrays = [{', '.join(arrays)}]"
        if len(one) <= LIMIT:
            lines.append(one)
        else:
            packed = textwrap.wrap(", ".join(arrays) + ",", width=LIMIT - 4)
            lines += ["arrays = [", *["    " + p for p in packed], "]"]
        lines.append("return struct_array(arrays, fields, len(rows), take)")
        return lines


def _field_message(f: Field) -> MessageType | None:
    t = f.map_value if f.is_map else f.type
    return t.message if t is not None and t.kind == "message" else None


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
            target = _field_message(f)
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


def _alternatives(f: SwitchField) -> list[StructDef]:
    """The distinct structs a switch field can hold, in case order."""
    out: list[StructDef] = []
    for case in f.cases:
        for s in case.structs:
            if all(s is not o for o in out):
                out.append(s)
    return out


_SPARK_NAMES = (
    "ArrayType", "BinaryType", "BooleanType", "DecimalType", "DoubleType", "FloatType",
    "IntegerType", "LongType", "MapType", "StringType", "StructField", "StructType",
)
_RUNTIME_NAMES = (
    "DECIMAL_20", "RowCodec", "RowLike", "as_mapping", "binary_value", "closed_enum",
    "closed_enums", "encoded_array", "encoded_lists_array", "enum_array", "enum_lists_array",
    "enum_name", "enum_value", "list_array", "list_offsets", "map_entries", "map_items",
    "no_alternative", "null_column", "present", "required", "required_enum", "struct_array",
    "text_array", "text_lists_array", "uint64_array", "uint64_value", "unknown_enum",
    "unknown_enums",
)


def _isort_key(name: str) -> tuple[int, str]:
    """isort's order-by-type within one import: CONSTANTS, then Classes, then functions."""
    if name.isupper() and len(name) > 1:
        return 0, name
    return (1 if name[:1].isupper() else 2), name
