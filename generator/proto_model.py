"""Builds and validates the IR from protoc's descriptors."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from google.protobuf import descriptor_pb2 as d

from protoframe.generator.errors import SpecError, SpecErrors
from protoframe.generator.ir import (
    EnumType,
    EnumValue,
    Field,
    FieldType,
    Label,
    MessageType,
    Oneof,
    Presence,
    Protocol,
    ProtoFile,
    SourceLocation,
)
from protoframe.generator.naming import (
    ENUM_HELPERS,
    MESSAGE_HELPERS,
    module_name,
    name_protocol,
    py_identifier,
)
from protoframe.generator.protoc import compile_protos

FDP = d.FieldDescriptorProto

_SCALAR_NAMES = {
    FDP.TYPE_DOUBLE: "double",
    FDP.TYPE_FLOAT: "float",
    FDP.TYPE_INT64: "int64",
    FDP.TYPE_UINT64: "uint64",
    FDP.TYPE_INT32: "int32",
    FDP.TYPE_FIXED64: "fixed64",
    FDP.TYPE_FIXED32: "fixed32",
    FDP.TYPE_BOOL: "bool",
    FDP.TYPE_STRING: "string",
    FDP.TYPE_BYTES: "bytes",
    FDP.TYPE_UINT32: "uint32",
    FDP.TYPE_SFIXED32: "sfixed32",
    FDP.TYPE_SFIXED64: "sfixed64",
    FDP.TYPE_SINT32: "sint32",
    FDP.TYPE_SINT64: "sint64",
}

# SourceCodeInfo path components (field numbers in descriptor.proto).
_FILE_MESSAGE, _FILE_ENUM = 4, 5
_MSG_FIELD, _MSG_NESTED, _MSG_ENUM = 2, 3, 4
_ENUM_VALUE = 2


def load_protocol(spec_dir: Path, protocol: str, display_root: str,
                  descriptors_out: list[d.FileDescriptorProto] | None = None) -> Protocol:
    """Compile every .proto file of ``spec_dir/protocol`` and build its IR.

    ``descriptors_out`` receives protoc's descriptors, for readers of what the IR leaves out
    (``protoframe diff`` reads reserved numbers) without compiling twice."""
    proto_dir = spec_dir / protocol
    files = sorted(p.name for p in proto_dir.glob("*.proto"))
    display_dir = f"{display_root}/{protocol}"
    if not files:
        return Protocol(name=protocol)
    descriptors = compile_protos(proto_dir, files, display_dir)
    if descriptors_out is not None:
        descriptors_out.extend(descriptors)
    builder = _Builder(display_dir)
    for fd in descriptors:
        builder.index_types(fd)
    proto = Protocol(name=protocol)
    for fd in descriptors:
        if fd.name in files:
            proto.files.append(builder.build_file(fd))
    if builder.errors:
        raise SpecErrors(builder.errors)
    name_protocol(proto)
    return proto


class _Builder:
    def __init__(self, display_dir: str) -> None:
        self.display_dir = display_dir
        self.errors: list[SpecError] = []
        self.enums: dict[str, EnumType] = {}
        self.messages: dict[str, MessageType] = {}
        self._pending: list[tuple[Field, str]] = []
        self._locations: dict[tuple[int, ...], d.SourceCodeInfo.Location] = {}
        self._path = ""

    # -- first pass: create every type so references can resolve in any order ------------
    def index_types(self, fd: d.FileDescriptorProto) -> None:
        prefix = f".{fd.package}" if fd.package else ""
        for msg in fd.message_type:
            self._index_message(msg, prefix)
        for enum in fd.enum_type:
            self._index_enum(enum, prefix)

    def _index_message(self, msg: d.DescriptorProto, prefix: str) -> None:
        full = f"{prefix}.{msg.name}"
        self.messages[full] = MessageType(
            proto_name=msg.name,
            full_name=full.lstrip("."),
            py_name="",
            py_path="",
            fields=[],
            oneofs=[],
            messages=[],
            enums=[],
            comment="",
            is_map_entry=msg.options.map_entry,
        )
        for nested in msg.nested_type:
            self._index_message(nested, full)
        for enum in msg.enum_type:
            self._index_enum(enum, full)

    def _index_enum(self, enum: d.EnumDescriptorProto, prefix: str) -> None:
        full = f"{prefix}.{enum.name}"
        self.enums[full] = EnumType(
            proto_name=enum.name,
            full_name=full.lstrip("."),
            py_name="",
            py_path="",
            values=[],
            comment="",
            closed=True,
        )

    # -- second pass: fill in files ---------------------------------------------------------
    def build_file(self, fd: d.FileDescriptorProto) -> ProtoFile:
        self._path = f"{self.display_dir}/{fd.name}"
        self._locations = {tuple(loc.path): loc for loc in fd.source_code_info.location}
        syntax = fd.syntax or "proto2"
        if syntax not in ("proto2", "proto3"):
            self._error(f"syntax {syntax!r} is not supported (proto2 and proto3 are)", ())
        prefix = f".{fd.package}" if fd.package else ""
        top_names: set[str] = set()
        messages = [
            self._build_message(m, prefix, "", (_FILE_MESSAGE, i), syntax, top_names)
            for i, m in enumerate(fd.message_type)
        ]
        enums = [
            self._build_enum(e, prefix, "", (_FILE_ENUM, i), syntax, top_names)
            for i, e in enumerate(fd.enum_type)
        ]
        if fd.extension:
            self._error("extensions are not supported", (7, 0))
        deps = [dep for dep in fd.dependency if not dep.startswith("google/protobuf/")]
        return ProtoFile(
            path=f"{self.display_dir}/{fd.name}",
            package=fd.package,
            syntax=syntax,
            module=module_name(PurePosixPath(fd.name).stem),
            messages=messages,
            enums=enums,
            dependencies=deps,
            comment=self._comment((12,)),
        )

    def _claim(self, names: set[str], name: str, what: str, path: tuple[int, ...]) -> None:
        if name in names:
            self._error(f"{what} becomes the Python name {name!r}, which is already taken", path)
        names.add(name)

    def _build_enum(
        self,
        enum: d.EnumDescriptorProto,
        prefix: str,
        py_scope: str,
        path: tuple[int, ...],
        syntax: str,
        scope_names: set[str],
    ) -> EnumType:
        full = f"{prefix}.{enum.name}"
        ir = self.enums[full]
        ir.py_name = py_identifier(enum.name)
        self._claim(scope_names, ir.py_name, f"enum {enum.name}", path)
        ir.py_path = f"{py_scope}.{ir.py_name}" if py_scope else ir.py_name
        ir.comment = self._comment(path)
        ir.closed = syntax == "proto2"
        ir.location = self._location(path)
        seen: set[str] = set()
        for i, value in enumerate(enum.value):
            vpath = (*path, _ENUM_VALUE, i)
            py_name = py_identifier(value.name, ENUM_HELPERS)
            self._claim(seen, py_name, f"enum value {enum.name}.{value.name}", vpath)
            ir.values.append(
                EnumValue(
                    proto_name=value.name,
                    py_name=py_name,
                    number=value.number,
                    comment=self._comment(vpath),
                    location=self._location(vpath),
                )
            )
        return ir

    def _build_message(
        self,
        msg: d.DescriptorProto,
        prefix: str,
        py_scope: str,
        path: tuple[int, ...],
        syntax: str,
        scope_names: set[str],
    ) -> MessageType:
        full = f"{prefix}.{msg.name}"
        ir = self.messages[full]
        ir.py_name = py_identifier(msg.name)
        self._claim(scope_names, ir.py_name, f"message {msg.name}", path)
        ir.py_path = f"{py_scope}.{ir.py_name}" if py_scope else ir.py_name
        ir.comment = self._comment(path)
        ir.location = self._location(path)
        if msg.extension_range or msg.extension:
            self._error(f"message {msg.name}: extensions are not supported", path)
        inner: set[str] = set()
        ir.messages = [
            self._build_message(m, full, ir.py_path, (*path, _MSG_NESTED, i), syntax, inner)
            for i, m in enumerate(msg.nested_type)
        ]
        ir.enums = [
            self._build_enum(e, full, ir.py_path, (*path, _MSG_ENUM, i), syntax, inner)
            for i, e in enumerate(msg.enum_type)
        ]
        # Field names share the class namespace with nested types and generated helpers.
        helper_names = set(MESSAGE_HELPERS)
        for f in msg.field:
            helper_names.add(f"has_{f.name}")
        oneof_fields: dict[int, list[Field]] = {}
        for i, f in enumerate(msg.field):
            fpath = (*path, _MSG_FIELD, i)
            field = self._build_field(msg, f, fpath, syntax, frozenset(helper_names))
            self._claim(inner, field.py_name, f"field {msg.name}.{f.name}", fpath)
            ir.fields.append(field)
            if field.oneof is not None:
                oneof_fields.setdefault(f.oneof_index, []).append(field)
        for index, members in sorted(oneof_fields.items()):
            name = msg.oneof_decl[index].name
            py_name = py_identifier(name)
            self._claim(inner, f"which_{py_name}", f"oneof {msg.name}.{name}", path)
            ir.oneofs.append(Oneof(proto_name=name, py_name=py_name, fields=members))
        return ir

    def _build_field(
        self,
        msg: d.DescriptorProto,
        f: d.FieldDescriptorProto,
        path: tuple[int, ...],
        syntax: str,
        taken: frozenset[str],
    ) -> Field:
        label = {
            FDP.LABEL_REQUIRED: Label.REQUIRED,
            FDP.LABEL_OPTIONAL: Label.OPTIONAL,
            FDP.LABEL_REPEATED: Label.REPEATED,
        }[f.label]
        if f.type == FDP.TYPE_GROUP:
            self._error(f"field {msg.name}.{f.name}: groups are not supported", path)
        ftype = self._field_type(f, path)
        is_real_oneof = f.HasField("oneof_index") and not f.proto3_optional
        if label is Label.REPEATED:
            presence = Presence.NONE
        elif label is Label.REQUIRED:
            presence = Presence.REQUIRED
        elif (
            syntax == "proto2"
            or f.proto3_optional
            or is_real_oneof
            or ftype.kind == "message"
        ):
            presence = Presence.EXPLICIT
        else:
            presence = Presence.IMPLICIT
        if f.options.HasField("packed"):
            packed = f.options.packed
        else:
            packed = syntax == "proto3" and label is Label.REPEATED and ftype.kind != "message"
            packed = packed and ftype.kind not in ("string", "bytes")
        field = Field(
            proto_name=f.name,
            py_name=py_identifier(f.name, taken),
            number=f.number,
            label=label,
            presence=presence,
            type=ftype,
            default=f.default_value if f.HasField("default_value") else None,
            packed=packed,
            oneof=msg.oneof_decl[f.oneof_index].name if is_real_oneof else None,
            comment=self._comment(path),
            location=self._location(path),
        )
        entry = ftype.message
        if entry is not None and entry.is_map_entry and label is Label.REPEATED:
            entry_desc = next(n for n in msg.nested_type if n.name == entry.proto_name)
            key = self._field_type(entry_desc.field[0], path)
            value = self._field_type(entry_desc.field[1], path)
            field.map_key, field.map_value = key, value
        return field

    def _field_type(self, f: d.FieldDescriptorProto, path: tuple[int, ...]) -> FieldType:
        if f.type in _SCALAR_NAMES:
            return FieldType(kind=_SCALAR_NAMES[f.type])
        if f.type == FDP.TYPE_ENUM:
            enum = self.enums.get(f.type_name)
            if enum is None:
                self._error(f"unknown enum type {f.type_name}", path)
            return FieldType(kind="enum", enum=enum)
        message = self.messages.get(f.type_name)
        if message is None:
            self._error(f"unknown message type {f.type_name}", path)
        return FieldType(kind="message", message=message)

    # -- source info ---------------------------------------------------------------------------
    def _location(self, path: tuple[int, ...]) -> SourceLocation | None:
        loc = self._locations.get(path)
        if loc is None or not loc.span:
            return None
        return SourceLocation(self._path, loc.span[0] + 1, loc.span[1] + 1)

    def _comment(self, path: tuple[int, ...]) -> str:
        loc = self._locations.get(path)
        if loc is None:
            return ""
        text = loc.leading_comments or loc.trailing_comments
        lines = [line.rstrip() for line in text.strip("\n").splitlines()]
        # Block comments keep their leading " * "; drop it, then the common indentation.
        lines = [line[2:] if line.lstrip().startswith("* ") else line for line in lines]
        lines = [line.strip(" *") if set(line.strip()) <= {"*"} else line for line in lines]
        indent = min((len(x) - len(x.lstrip()) for x in lines if x.strip()), default=0)
        return "\n".join(x[indent:] for x in lines).strip()

    def _error(self, message: str, path: tuple[int, ...]) -> None:
        loc = self._location(path)
        if loc is None:
            self.errors.append(SpecError(message, self._path))
        else:
            self.errors.append(SpecError(message, loc.path, loc.line, loc.column))
