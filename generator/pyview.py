"""The Python view of the IR: everything the message templates print, decided here.

For each message this computes annotations, defaults, the body of ``__init__`` and the
straight-line ``encode_to`` / ``decode_from`` code. Decoding dispatches on the whole tag
(field number and wire type) through a balanced tree of comparisons, so a message with
seventy fields costs seven comparisons per field rather than seventy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from protoframe.generator.codewriter import bytes_literal, docstring, isort_key, q
from protoframe.generator.errors import GeneratorBug
from protoframe.generator.ir import (
    PACKABLE,
    EnumType,
    EnumValue,
    Field,
    FieldType,
    Label,
    MessageType,
    Presence,
    PresentNames,
    ProtoFile,
)
from protoframe.generator.linefit import fit_appends
from protoframe.runtime.codec.vocabulary import FIELD_KINDS, FIELD_MODES

# How each scalar is encoded: (wire type, function producing the value's bytes).
_ENCODERS: dict[str, tuple[int, str]] = {
    "int32": (0, "int32_bytes"),
    "int64": (0, "int64_bytes"),
    "uint32": (0, "uint32_bytes"),
    "uint64": (0, "uint64_bytes"),
    "sint32": (0, "sint32_bytes"),
    "sint64": (0, "sint64_bytes"),
    "bool": (0, "bool_bytes"),
    "enum": (0, "int32_bytes"),
    "fixed32": (5, "pack_fixed32"),
    "sfixed32": (5, "pack_sfixed32"),
    "float": (5, "pack_float"),
    "fixed64": (1, "pack_fixed64"),
    "sfixed64": (1, "pack_sfixed64"),
    "double": (1, "pack_double"),
    "string": (2, "str_bytes"),
    "bytes": (2, ""),
    "message": (2, ""),
}

# Encoders inline the table lookup for small varints and call these for the rest.
_VARINT_HELPERS = {
    "int32": "int32_bytes",
    "int64": "int64_bytes",
    "uint32": "uint32_bytes",
    "uint64": "uint64_bytes",
    "enum": "int32_bytes",
}
# Integer kinds whose decoders read two- to four-byte varints inline.
_INLINE_VARINTS = frozenset({"int32", "int64", "uint32", "uint64", "sint32", "sint64"})

# Conversion of a raw (unsigned, 64-bit) varint to the field's value when it took >1 byte.
_VARINT_SLOW: dict[str, str] = {
    "int32": "to_int32({})",
    "int64": "to_int64({})",
    "uint32": "{} & 0xFFFFFFFF",
    "enum": "to_int32({})",
}
# Conversion applied to every decoded varint (one-byte ones included).
_VARINT_ALWAYS: dict[str, str] = {
    "bool": "{} != 0",
    "sint32": "unzigzag32({})",
    "sint64": "unzigzag({})",
}
_FIXED_DECODERS = {
    "fixed32": ("unpack_fixed32", 4),
    "sfixed32": ("unpack_sfixed32", 4),
    "float": ("unpack_float", 4),
    "fixed64": ("unpack_fixed64", 8),
    "sfixed64": ("unpack_sfixed64", 8),
    "double": ("unpack_double", 8),
}
_PY_SCALAR = {
    "double": "float",
    "float": "float",
    "bool": "bool",
    "string": "str",
    "bytes": "bytes",
}
_ZERO = {"float": "0.0", "bool": "False", "str": "''", "bytes": "b''", "int": "0"}

LINEAR_CASES = 6  # below this many tags a plain if/elif chain beats a comparison tree


def varint_literal(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@dataclass
class FieldView:
    """What the templates print for one field."""

    name: str
    proto_name: str
    number: int
    storage: str  # attribute that holds the value
    ann: str  # annotation of the public attribute or property
    storage_ann: str
    init_ann: str  # annotation and default of the __init__ parameter
    init_expr: str  # expression assigned to the storage in __init__
    is_property: bool  # explicit-presence scalars read through a property with a default
    default_expr: str  # what the field reads as when unset
    has_method: bool
    comment: str
    doc: str = ""
    has_doc: str = ""
    setter_ann: str = ""
    oneof_siblings: list[str] = field(default_factory=list)
    is_repeated: bool = False
    implicit: bool = False
    sparse: bool = False  # kept in the message's dict of present values (MessageView.present)
    key: str = ""  # its key there, as a string literal
    has_expr: str = ""


@dataclass
class OneofView:
    name: str
    members: list[tuple[str, str]]  # (field name, storage attribute)


@dataclass
class MessageView:
    """What the templates print for one message class."""

    name: str
    full_name: str
    path: str
    doc: str
    init_doc: str
    fields: list[FieldView]
    oneofs: list[OneofView]
    encode_lines: list[str]
    decode_lines: list[str]
    nested_enums: list[EnumView]
    nested_messages: list[MessageView]
    init_lines: list[str] = field(default_factory=list)
    present: str = ""  # slot holding the dict of present sparse fields; "" when there are none
    class_lines: list[str] = field(default_factory=list)  # class attributes after FIELD_NAMES
    copy_lines: list[str] = field(default_factory=list)  # body of __copy__, sparse messages only
    fields_dict: str = ""  # TypedDict of the sparse fields, taken as **_fields; "" when none
    indent: int = 0  # columns the class body is indented by

    @property
    def slots_lines(self) -> list[str]:
        """``__slots__``: every attribute an instance has, in declaration order."""
        names = [f.storage for f in self.fields if not f.sparse]
        names += [self.present] if self.present else []
        names.append("_unknown")
        one = f"__slots__ = ({', '.join(q(n) for n in names)}{',' if len(names) == 1 else ''})"
        if len(one) + self.indent <= 100:
            return [one]
        return ["__slots__ = (", *(f"    {q(n)}," for n in names), ")"]


@dataclass
class FieldsDictView:
    """A module-level TypedDict: the optional message fields one sparse message takes."""

    name: str
    path: str  # the message's dotted path in the module
    doc: str
    fields: list[tuple[str, str]]  # (field name, annotation)


@dataclass
class EnumValueView:
    name: str
    number: int
    doc: str


@dataclass
class EnumView:
    name: str
    path: str
    map_name: str  # module-level dict from number to member
    doc: str
    values: list[EnumValueView]

    @property
    def table_line(self) -> str:
        line = f"{self.map_name} = number_table({self.path})"
        if len(line) <= 100:
            return line
        return f"{self.map_name} = number_table(\n    {self.path}\n)"


@dataclass
class ModuleView:
    source: str
    module_doc: str
    messages: list[MessageView]
    enums: list[EnumView]
    all_enums: list[EnumView]
    imports: list[str]
    stdlib_imports: list[str]
    runtime_imports: list[str]
    exports: list[str]
    fields_dicts: list[FieldsDictView] = field(default_factory=list)
    # Lines of the layout tables given to runtime.codec.compiled.install_layouts; empty: none.
    compiled_layouts: list[str] = field(default_factory=list)


class _Python:
    """Translates IR types to Python annotations and expressions within one module."""

    def __init__(self, proto: ProtoFile, module_of: dict[str, str]) -> None:
        self.proto = proto
        self.module_of = module_of  # full_name of a type -> generated module it lives in
        self.imports: set[str] = set()
        # Module-level names already bound while a class body runs: the enums (emitted first)
        # and the top-level messages emitted so far.
        self.bound: set[str] = {e.py_name for e in proto.enums}

    def ref(self, full_name: str, py_path: str) -> str:
        module = self.module_of[full_name]
        if module == self.proto.module:
            return py_path
        self.imports.add(f"from . import {module}")
        return f"{module}.{py_path}"

    def value_ann(self, t: FieldType) -> str:
        if t.kind == "enum":
            assert t.enum is not None
            ann = self.ref(t.enum.full_name, t.enum.py_path)
            return ann if t.enum.closed else f"{ann} | int"
        if t.kind == "message":
            assert t.message is not None
            return self.ref(t.message.full_name, t.message.py_path)
        return _PY_SCALAR.get(t.kind, "int")

    def enum_map(self, enum: EnumType) -> str:
        base = "_" + enum.py_path.replace(".", "_") + "_BY_NUMBER"
        module = self.module_of[enum.full_name]
        if module == self.proto.module:
            return base
        self.imports.add(f"from . import {module}")
        return f"{module}.{base}"

    def default_expr(self, f: Field) -> str:
        """What ``f`` reads as when unset, spelled for code that runs after import."""
        t = f.type
        if t.kind == "enum":
            assert t.enum is not None
            ref = self.ref(t.enum.full_name, t.enum.py_path)
            return f"{ref}.{_enum_default(f, t.enum).py_name}"
        py = _PY_SCALAR.get(t.kind, "int")
        if f.default is None:
            return _ZERO[py]
        if py == "str":
            return q(f.default)
        if py == "bytes":
            return repr(_unescape_c(f.default))
        if py == "bool":
            return "True" if f.default == "true" else "False"
        if py == "float":
            special = {"inf": "math.inf", "-inf": "-math.inf", "nan": "math.nan"}
            if f.default in special:
                self.imports.add("import math")
                return special[f.default]
            return repr(float(f.default))
        return str(int(f.default, 0))

    def class_body_default(self, f: Field, owner: MessageType) -> str | None:
        """``f``'s default spelled so that it evaluates inside ``owner``'s class body.

        Parameter defaults run while the class statement runs: the class's own nested enums
        and messages are reachable by their bare names, module-level names only if they are
        bound by then, and the classes enclosing ``owner`` not at all. None when the default
        cannot be named there (an enum of an enclosing class or of a later message).
        """
        enum = f.type.enum
        if enum is None or self.module_of[enum.full_name] != self.proto.module:
            # Scalars are literals; another module's classes are complete once imported.
            return self.default_expr(f)
        member = _enum_default(f, enum).py_name
        path = enum.py_path
        if path.startswith(owner.py_path + "."):
            return f"{path[len(owner.py_path) + 1:]}.{member}"
        in_class = {n.py_name for n in owner.messages} | {e.py_name for e in owner.enums}
        top = path.split(".", 1)[0]
        if top in self.bound and top not in in_class:
            return f"{path}.{member}"
        return None


def _enum_default(f: Field, enum: EnumType) -> EnumValue:
    """The member an unset enum field reads as: its ``[default = ...]``, else the first."""
    name = f.default or enum.default.proto_name
    return next(v for v in enum.values if v.proto_name == name)


def _unescape_c(text: str) -> bytes:
    # protoc reports bytes defaults C-escaped.
    return text.encode("latin-1").decode("unicode_escape").encode("latin-1")


def build_module(proto: ProtoFile, module_of: dict[str, str]) -> ModuleView:
    """The render-ready view of one .proto file's generated module."""
    py = _Python(proto, module_of)
    messages = []
    for m in proto.messages:
        if not m.is_map_entry:
            messages.append(_message_view(py, m, 0))
            py.bound.add(m.py_name)  # the classes after it may name it in their defaults
    enums = [_enum_view(e, 0) for e in proto.enums]
    nested = [e for v in _walk(messages) for e in v.nested_enums]
    fields_dicts = [_fields_dict_view(v) for v in _walk(messages) if v.fields_dict]
    layouts = [line for m in proto.all_messages() if not m.is_map_entry
               for line in _compiled_layout(py, m)]
    text = proto.comment or f"Typed protobuf bindings for {proto.path}."
    if proto.package:
        text += f"\n\nProtobuf package: ``{proto.package}``."
    body = "\n".join(line for v in messages for line in _all_lines(v))
    stdlib = [line for line in py.imports if line.startswith("import ")]
    if enums or nested:
        stdlib.append("import enum")
    typing_names = "Any, ClassVar, Self" if re.search(r"\bAny\b", body) else "ClassVar, Self"
    if fields_dicts:
        typing_names += ", TypedDict, Unpack"
        body += "\npresent_fields spell_out_fields"
    if layouts:
        body += "\ninstall_layouts"
    stdlib_from = [f"from typing import {typing_names}"]
    if "copysign(" in body:
        stdlib_from.append("from math import copysign")
    if "struct_error" in body or messages:
        stdlib_from.append("from struct import error as struct_error")
    return ModuleView(
        source=proto.path,
        module_doc=docstring(text, ""),
        messages=messages,
        enums=enums,
        all_enums=enums + nested,
        imports=sorted(line for line in py.imports if line.startswith("from .")),
        stdlib_imports=sorted(stdlib) + sorted(stdlib_from),
        runtime_imports=_runtime_imports(body, bool(messages), bool(enums + nested)),
        exports=sorted([m.name for m in messages] + [e.name for e in enums]),
        fields_dicts=fields_dicts,
        compiled_layouts=layouts,
    )


def _walk(views: list[MessageView]) -> list[MessageView]:
    """Every message view, nested ones right after their parent."""
    out = []
    for v in views:
        out.append(v)
        out += _walk(v.nested_messages)
    return out


def _fields_dict_view(v: MessageView) -> FieldsDictView:
    return FieldsDictView(
        name=v.fields_dict,
        path=v.path,
        doc=docstring(f"{v.path}'s optional message fields: keywords of its constructor.",
                      "    "),
        fields=[(f.name, f.setter_ann) for f in v.fields if f.sparse],
    )


# In isort's order of the modules, so that the generated import block is sorted as written.
_RUNTIME_MODULES = {
    "protoframe.runtime.codec.compiled": ("ProtoEnumType", "install_layouts"),
    "protoframe.runtime.codec.protowire": (
        "SMALL_VARINTS", "add_unknown", "bool_bytes", "decode_str", "int32_bytes",
        "int64_bytes", "invalid_utf8", "pack_double", "pack_fixed32", "pack_fixed64",
        "pack_float", "pack_sfixed32", "pack_sfixed64", "read_varint", "sint32_bytes",
        "sint64_bytes", "skip_field", "str_bytes", "to_int32", "to_int64", "truncated",
        "uint32_bytes", "uint64_bytes", "unpack_double", "unpack_fixed32", "unpack_fixed64",
        "unpack_float", "unpack_sfixed32", "unpack_sfixed64", "unzigzag", "unzigzag32",
        "varint_bytes", "Message", "message_repr", "new_instance", "number_table",
        "present_fields", "spell_out_fields", "BytesLike",
    ),
    "protoframe.runtime.errors": (
        "MissingRequiredFieldError", "RequiredFieldUnsetError", "ValueOutOfRangeError",
    ),
}


def _runtime_imports(body: str, has_messages: bool, has_enums: bool) -> list[str]:
    """Import lines for exactly the runtime helpers the generated code uses."""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", body))
    if has_messages:
        words |= {"Message", "message_repr", "BytesLike", "ValueOutOfRangeError"}
    if has_enums:
        words |= {"number_table", "ProtoEnumType"}
    out = []
    for module, names in _RUNTIME_MODULES.items():
        used = sorted((n for n in names if n in words), key=isort_key)
        if used:
            out.append(f"from {module} import (")
            out += [f"    {n}," for n in used]
            out.append(")")
    return out


def _all_lines(v: MessageView) -> list[str]:
    lines = v.encode_lines + v.decode_lines
    for n in v.nested_messages:
        lines += _all_lines(n)
    return lines


def _enum_view(e: EnumType, depth: int) -> EnumView:
    ind = "    " * (depth + 1)
    return EnumView(
        name=e.py_name,
        path=e.py_path,
        map_name="_" + e.py_path.replace(".", "_") + "_BY_NUMBER",
        doc=docstring(e.comment or f"The {e.proto_name} enum of {e.full_name}.", ind),
        values=[EnumValueView(v.py_name, v.number, docstring(v.comment, ind) if v.comment else "")
                for v in e.values],
    )


def _message_view(py: _Python, m: MessageType, depth: int) -> MessageView:
    ind = "    " * (depth + 1)
    fields = [_field_view(py, m, f) for f in m.fields]
    sparse = {f.number for f in m.sparse_fields()}
    present = m.present
    for fv in fields:
        if present is not None and fv.number in sparse:
            fv.sparse, fv.key = True, q(fv.name)
            fv.has_expr = f"{fv.key} in self.{present.slot}"
        else:
            fv.has_expr = f"self.{fv.storage} is not None"
        fv.doc = _field_doc(fv, ind + "    ")
        fv.has_doc = docstring(f"Whether {fv.name} is set; an unset field is not written.",
                               ind + "    ")
        fv.setter_ann = fv.ann if fv.ann.endswith("| None") else f"{fv.ann} | None"
    oneofs = []
    for o in m.oneofs:
        members = [(fv.name, fv.storage) for fv, f in zip(fields, m.fields, strict=True)
                   if f.oneof == o.proto_name]
        oneofs.append(OneofView(name=o.py_name, members=members))
        for fv, f in zip(fields, m.fields, strict=True):
            if f.oneof == o.proto_name:
                fv.oneof_siblings = [s for n, s in members if n != fv.name]
    text = m.comment or f"The {m.proto_name} message ({m.full_name})."
    documented = [fv for fv in fields if fv.comment and not fv.is_property]
    if documented:
        text += "\n\nAttributes:\n" + "\n".join(
            f"    {fv.name}: " + " ".join(fv.comment.split()) for fv in documented)
    required = [fv.name for fv, f in zip(fields, m.fields, strict=True)
                if f.presence is Presence.REQUIRED]
    init_text = f"Create a {m.proto_name}"
    init_text += f"; {', '.join(required)} required." if required else "."
    return MessageView(
        name=m.py_name,
        full_name=m.full_name,
        path=m.py_path,
        doc=docstring(text, ind),
        init_doc=docstring(init_text, ind + "    "),
        fields=fields,
        oneofs=oneofs,
        encode_lines=fit_appends(_encode_lines(m, present), len(ind) + 4),
        decode_lines=_decode_lines(py, m, present),
        nested_enums=[_enum_view(e, depth + 1) for e in m.enums],
        nested_messages=[_message_view(py, n, depth + 1) for n in m.messages
                         if not n.is_map_entry],
        init_lines=_init_lines(fields, present, m.py_path),
        present=present.slot if present else "",
        class_lines=_present_tables(m, present) if present else [],
        copy_lines=_copy_lines(fields, present) if present else [],
        fields_dict=_fields_dict_name(m) if present else "",
        indent=len(ind),
    )


def _compiled_layout(py: _Python, m: MessageType) -> list[str]:
    """Lines of ``m``'s entry in the table handed to ``install_layouts``.

    The compiled codec covers proto2 messages and proto3 ones whose fields all have explicit
    presence; a message with map fields, oneofs or implicit-presence fields gets no entry and
    keeps the Python codec alone.
    """
    if m.oneofs or any(f.is_map or f.presence is Presence.IMPLICIT for f in m.fields):
        return []
    sparse = {f.number for f in m.sparse_fields()}
    present = m.present.slot if m.present is not None else None
    rows = []
    for f in sorted(m.fields, key=lambda f: f.number):
        t = f.type
        kind = t.kind
        extra = "None"
        if kind == "enum":
            assert t.enum is not None
            kind = "enum" if t.enum.closed else "open_enum"
            extra = py.enum_map(t.enum)
        elif kind == "message":
            assert t.message is not None
            extra = py.ref(t.message.full_name, t.message.py_path)
        if f.number in sparse:
            mode, storage = "sparse", f.py_name
        elif f.label is Label.REPEATED:
            mode, storage = ("packed" if f.packed else "repeated"), f.py_name
        else:
            mode = "required" if f.presence is Presence.REQUIRED else "optional"
            storage = f.storage
        if kind not in FIELD_KINDS or mode not in FIELD_MODES:
            raise GeneratorBug(f"{m.full_name}.{f.proto_name}: the compiled codec has no word "
                               f"for {kind}, {mode}", str(f.location))
        rows.append(f"        ({f.number}, {q(kind)}, {q(mode)}, {q(storage)}, {extra}),")
    if not rows:
        return [f"    ({m.py_path}, None, ()),"]
    return [f"    ({m.py_path}, {q(present) if present else 'None'}, (", *rows, "    )),"]


def _fields_dict_name(m: MessageType) -> str:
    # Proto names start with a letter, so a leading underscore keeps it clear of the messages.
    return "_" + m.py_path.replace(".", "_") + "_Fields"


def _present_tables(m: MessageType, present: PresentNames) -> list[str]:
    fields = sorted(m.sparse_fields(), key=lambda f: f.number)
    lines = ["", f"{present.tags}: ClassVar[dict[str, bytes]] = {{"]
    lines += [f"    {q(f.py_name)}: {_tag(f.number, 2)}," for f in fields]
    lines += ["}", f"{present.rank}: ClassVar[dict[str, int]] = {{"]
    lines += [f"    {q(f.py_name)}: {f.number}," for f in fields]
    return [*lines, "}"]


def _copy_lines(fields: list[FieldView], present: PresentNames) -> list[str]:
    """Body of ``__copy__``: the copy gets its own dict of present fields.

    Without it a shallow copy would share the dict, and unsetting a field of the copy would
    unset it in the original too, unlike every field that has its own slot.
    """
    lines = ["other = new_instance(type(self))"]
    lines += [f"other.{fv.storage} = self.{fv.storage}" for fv in fields if not fv.sparse]
    lines += [f"other.{present.slot} = dict(self.{present.slot})",
              "other._unknown = self._unknown", "return other"]
    return lines


def _init_lines(fields: list[FieldView], present: PresentNames | None, owner: str) -> list[str]:
    """Body of ``__init__`` after the docstring: sparse fields come in as ``**_fields``."""
    lines = [f"self.{fv.storage} = {fv.init_expr}" for fv in fields if not fv.sparse]
    if present is not None:
        lines.append(f"self.{present.slot} = present_fields(_fields, self.{present.tags}, "
                     f"{q(owner)})")
    return [*lines, 'self._unknown = b""']


def _field_doc(fv: FieldView, ind: str) -> str:
    text = fv.comment or f"The {fv.proto_name} field (number {fv.number})."
    if fv.is_property and fv.default_expr != "None":
        text += f"\n\nReads as ``{fv.default_expr}`` when unset; assign None to unset it."
    return docstring(text, ind)


def _field_view(py: _Python, m: MessageType, f: Field) -> FieldView:
    if f.is_map:
        assert f.map_key is not None and f.map_value is not None
        ann = f"dict[{py.value_ann(f.map_key)}, {py.value_ann(f.map_value)}]"
        return FieldView(
            name=f.py_name, proto_name=f.proto_name, number=f.number, storage=f.py_name,
            ann=ann, storage_ann=ann, init_ann=f"{ann} | None = None",
            init_expr=f"{f.py_name} or {{}}", is_property=False,
            default_expr="{}", has_method=False, comment=f.comment, is_repeated=True,
        )
    value = py.value_ann(f.type)
    if f.label is Label.REPEATED:
        ann = f"list[{value}]"
        return FieldView(
            name=f.py_name, proto_name=f.proto_name, number=f.number, storage=f.py_name,
            ann=ann, storage_ann=ann, init_ann=f"{ann} | None = None",
            init_expr=f"{f.py_name} or []", is_property=False,
            default_expr="[]", has_method=False, comment=f.comment, is_repeated=True,
        )
    if f.presence is Presence.REQUIRED:
        return FieldView(
            name=f.py_name, proto_name=f.proto_name, number=f.number, storage=f.py_name,
            ann=value, storage_ann=value, init_ann=value, init_expr=f.py_name,
            is_property=False, default_expr="", has_method=False, comment=f.comment,
        )
    if f.type.kind == "message":
        ann = f"{value} | None"
        return FieldView(
            name=f.py_name, proto_name=f.proto_name, number=f.number, storage=f.storage,
            ann=ann, storage_ann=ann, init_ann=f"{ann} = None", init_expr=f.py_name,
            is_property=f.oneof is not None, default_expr="None", has_method=True,
            comment=f.comment,
        )
    default = py.default_expr(f)
    if f.presence is Presence.IMPLICIT:
        in_body = py.class_body_default(f, m)
        if in_body is None:
            # The default's class is not bound yet when __init__ is defined: take None for
            # "the default" and look the member up when __init__ runs.
            init_ann = f"{value} | None = None"
            init_expr = f"{default} if {f.py_name} is None else {f.py_name}"
        else:
            init_ann, init_expr = f"{value} = {in_body}", f.py_name
        return FieldView(
            name=f.py_name, proto_name=f.proto_name, number=f.number, storage=f.py_name,
            ann=value, storage_ann=value, init_ann=init_ann, init_expr=init_expr,
            is_property=False, default_expr=default, has_method=False, comment=f.comment,
            implicit=True,
        )
    return FieldView(
        name=f.py_name, proto_name=f.proto_name, number=f.number, storage="_" + f.py_name,
        ann=value, storage_ann=f"{value} | None", init_ann=f"{value} | None = None",
        init_expr=f.py_name, is_property=True, default_expr=default, has_method=True,
        comment=f.comment,
    )


# ---------------------------------------------------------------------------------------------
# encoding


def _value_bytes(t: FieldType, var: str, out: str = "parts") -> list[str]:
    """Statements appending the encoded value ``var`` (without its tag) to the list ``out``.

    Small varints and length prefixes come straight from ``SMALL_VARINTS``; the helpers
    (which also range-check) handle the rest.
    """
    kind = t.kind
    if kind in _VARINT_HELPERS:
        return [f"{out}.append(SMALL_VARINTS[{var}] if 0 <= {var} < 0x4000 "
                f"else {_VARINT_HELPERS[kind]}({var}))"]
    if kind == "string":
        return [f"data = {var}.encode()", *_len_prefixed("data", out)]
    if kind == "bytes":
        return _len_prefixed(var, out)
    if kind == "message":
        return ["sub = []", f"{var}._encode(sub)", "data = b\"\".join(sub)",
                *_len_prefixed("data", out)]
    return [f"{out}.append({_ENCODERS[kind][1]}({var}))"]


def _len_prefixed(data: str, out: str) -> list[str]:
    return [f"size = len({data})",
            f"{out}.append(SMALL_VARINTS[size] if size < 0x4000 else varint_bytes(size))",
            f"{out}.append({data})"]


def _field_bytes(t: FieldType, number: int, var: str, out: str = "parts") -> list[str]:
    """Statements appending tag and value of field ``number`` holding ``var`` to ``out``."""
    if t.kind == "bool":
        # Tag and value in one constant.
        true, false = (bytes_literal(varint_literal(number << 3) + bytes([b])) for b in (1, 0))
        return [f"{out}.append({true} if {var} else {false})"]
    return [f"{out}.append({_tag(number, _wire(t))})", *_value_bytes(t, var, out)]


def _tag(number: int, wire: int) -> str:
    return bytes_literal(varint_literal(number << 3 | wire))


def _wire(t: FieldType) -> int:
    return _ENCODERS[t.kind][0]


def _nonzero(t: FieldType, var: str) -> str:
    """Condition under which an implicit-presence value is written: not the zero value.

    A negative zero float is not the zero value on the wire, so it is written.
    """
    if t.kind in ("float", "double"):
        return f"{var} or copysign(1.0, {var}) < 0"
    return var


def _encode_lines(m: MessageType, present: PresentNames | None) -> list[str]:
    """Body of ``_encode(self, parts)``: fields in number order, then unknown fields."""
    lines: list[str] = []
    sparse = {f.number for f in m.sparse_fields()}
    ordered = sorted(m.fields, key=lambda f: f.number)
    # Runs of sparse fields with no other field numbered between them: each run is written
    # where its numbers fall, by one loop over the present ones.
    runs: list[list[Field]] = []
    for i, f in enumerate(ordered):
        if f.number in sparse:
            if i == 0 or ordered[i - 1].number not in sparse:
                runs.append([])
            runs[-1].append(f)
    for f in ordered:
        if f.number not in sparse:
            lines += _encode_field(m, f)
            continue
        assert present is not None
        run = next(r for r in runs if f in r)
        if f is not run[0]:
            continue
        if run is runs[0]:
            lines += _present_prefix(present, len(runs) > 1)
        lines += _present_run(present, run if len(runs) > 1 else None)
    return _declare_lists([*lines, "if self._unknown:", "    parts.append(self._unknown)"])


def _present_prefix(present: PresentNames, multi: bool) -> list[str]:
    """Statements putting the present sparse fields in number order, in ``present``."""
    lines = [f"present = self.{present.slot}", f"tags = self.{present.tags}"]
    if multi:
        lines.append(f"rank = self.{present.rank}")
    lines.append("if len(present) > 1:")
    if not multi:
        lines.append(f"    rank = self.{present.rank}")
    # Mostly one field is set: only two or more need sorting.
    return [*lines, "    present = {n: present[n] for n in sorted(present, key=rank.__getitem__)}"]


def _present_run(present: PresentNames, run: list[Field] | None) -> list[str]:
    """A loop writing the present sparse fields (of ``run`` only, when there are several)."""
    body = ["parts.append(tags[name])", "sub = []", "value._encode(sub)",
            "data = b\"\".join(sub)", *_len_prefixed("data", "parts")]
    lines = ["for name, value in present.items():"]
    if run is None:
        return lines + ["    " + s for s in body]
    lo, hi = run[0].number, run[-1].number
    return lines + [f"    if {lo} <= rank[name] <= {hi}:", *["        " + s for s in body]]


def _declare_lists(lines: list[str]) -> list[str]:
    """Annotate, once and up front, the scratch lists the statements fill."""
    kinds = {"sub": "bytes", "entry": "bytes", "packed": "bytes", "numbers": "int"}
    used = [name for name in kinds if any(s.strip() == f"{name} = []" for s in lines)]
    return [f"{name}: list[{kinds[name]}]" for name in used] + lines


def _encode_field(m: MessageType, f: Field) -> list[str]:
    """Statements appending one field to ``parts`` (nothing when it is unset or empty)."""
    v = f"v_{f.py_name}"
    if f.is_map:
        assert f.map_key is not None and f.map_value is not None
        k, val = f"k_{f.py_name}", f"val_{f.py_name}"
        lines = [f"for {k}, {val} in self.{f.py_name}.items():", "    entry = []"]
        lines += ["    " + s for s in _field_bytes(f.map_key, 1, k, "entry")]
        lines += ["    " + s for s in _field_bytes(f.map_value, 2, val, "entry")]
        lines += [f"    parts.append({_tag(f.number, 2)})", "    data = b\"\".join(entry)"]
        return lines + ["    " + s for s in _len_prefixed("data", "parts")]
    if f.label is Label.REPEATED:
        item = f"item_{f.py_name}"
        if f.packed:
            lines = [f"{v} = self.{f.py_name}", f"if {v}:", "    packed = []",
                     f"    for {item} in {v}:"]
            lines += ["        " + s for s in _value_bytes(f.type, item, "packed")]
            lines += [f"    parts.append({_tag(f.number, 2)})", "    data = b\"\".join(packed)"]
            return lines + ["    " + s for s in _len_prefixed("data", "parts")]
        lines = [f"for {item} in self.{f.py_name}:"]
        return lines + ["    " + s for s in _field_bytes(f.type, f.number, item)]
    body = _field_bytes(f.type, f.number, v)
    if f.presence is Presence.REQUIRED:
        return [f"{v} = self.{f.storage}",
                f"if {v} is None:",
                f"    raise RequiredFieldUnsetError({q(m.py_path)}, {q(f.proto_name)})",
                *body]
    cond = f"{v} is not None" if f.presence is Presence.EXPLICIT else _nonzero(f.type, v)
    return [f"{v} = self.{f.storage}", f"if {cond}:", *["    " + s for s in body]]


# ---------------------------------------------------------------------------------------------
# decoding


@dataclass
class _Case:
    tag: int
    lines: list[str]


def _read_len(end_var: str, where: str, limit: str = "end") -> list[str]:
    """Statements reading a length prefix and checking it stays inside ``limit``."""
    return [
        "n = buf[pos]",
        "if n < 0x80:",
        "    pos += 1",
        "else:",
        "    n, pos = read_varint(buf, pos)",
        f"{end_var} = pos + n",
        f"if {end_var} > {limit}:",
        f"    raise truncated({q(where)})",
    ]


def _decode_value(
    py: _Python, t: FieldType, target: str, where: str, limit: str = "end"
) -> list[str]:
    """Statements reading one value of type ``t`` at ``pos`` into ``target``.

    For a closed enum an unknown number leaves ``target`` as None (the raw number stays in
    ``raw``); the caller keeps those bytes as an unknown field, as the official runtimes do.
    """
    kind = t.kind
    if kind in _FIXED_DECODERS:
        fn, size = _FIXED_DECODERS[kind]
        return [f"{target} = {fn}(buf, pos)[0]", f"pos += {size}"]
    if kind == "string":
        # A UnicodeDecodeError becomes InvalidUtf8Error naming the field, in decode_from.
        return [*_read_len("vend", where, limit), f"{target} = buf[pos:vend].decode()",
                "pos = vend"]
    if kind == "bytes":
        return [*_read_len("vend", where, limit), f"{target} = buf[pos:vend]", "pos = vend"]
    if kind == "message":
        assert t.message is not None
        ref = py.ref(t.message.full_name, t.message.py_path)
        return [*_read_len("vend", where, limit),
                f"{target} = {ref}.decode_from(buf, pos, vend)", "pos = vend"]
    lines = ["raw = buf[pos]", "if raw < 0x80:", "    pos += 1"]
    if kind in _INLINE_VARINTS:
        # Integer fields often hold values of two to four bytes (ids, sizes): read those here
        # rather than through a call. They are below 2**28, so need no sign conversion.
        # ``second`` .. ``fourth`` are the varint's bytes after the first.
        lines += ["elif (second := buf[pos + 1]) < 0x80:",
                  "    raw = raw & 0x7F | second << 7",
                  "    pos += 2",
                  "elif (third := buf[pos + 2]) < 0x80:",
                  "    raw = raw & 0x7F | (second & 0x7F) << 7 | third << 14",
                  "    pos += 3",
                  "elif (fourth := buf[pos + 3]) < 0x80:",
                  "    raw = raw & 0x7F | (second & 0x7F) << 7 | (third & 0x7F) << 14",
                  "    raw |= fourth << 21",
                  "    pos += 4"]
    lines += ["else:", "    raw, pos = read_varint(buf, pos)"]
    if kind in _VARINT_SLOW:
        lines.append("    raw = " + _VARINT_SLOW[kind].format("raw"))
    if kind == "enum":
        assert t.enum is not None
        enum_map = py.enum_map(t.enum)
        default = "" if t.enum.closed else ", raw"
        lines.append(f"{target} = {enum_map}.get(raw{default})")
    elif kind in _VARINT_ALWAYS:
        lines.append(f"{target} = " + _VARINT_ALWAYS[kind].format("raw"))
    else:
        lines.append(f"{target} = raw")
    return lines


def _closed_enum(t: FieldType) -> bool:
    return t.kind == "enum" and t.enum is not None and t.enum.closed


def _map_case(py: _Python, f: Field, where: str) -> _Case:
    assert f.map_key is not None and f.map_value is not None
    name = f.py_name
    local, k, val, raw_val = f"f_{name}", f"k_{name}", f"val_{name}", f"x_{name}"
    ktag = varint_literal(1 << 3 | _wire(f.map_key))[0]
    vtag = varint_literal(2 << 3 | _wire(f.map_value))[0]
    body = [*_read_len("eend", where), f"{k} = {_zero_of(py, f.map_key)}",
            f"{val} = {_zero_of(py, f.map_value)}", "while pos < eend:", "    etag = buf[pos]",
            "    pos += 1", f"    if etag == {ktag}:"]
    body += ["        " + s for s in _decode_value(py, f.map_key, k, where, "eend")]
    body += [f"    elif etag == {vtag}:"]
    if _closed_enum(f.map_value):
        body += ["        " + s for s in _decode_value(py, f.map_value, raw_val, where, "eend")]
        body += [f"        if {raw_val} is not None:", f"            {val} = {raw_val}"]
    else:
        body += ["        " + s for s in _decode_value(py, f.map_value, val, where, "eend")]
    body += ["    else:", "        if etag >= 0x80:",
             "            etag, pos = read_varint(buf, pos - 1)",
             "        pos = skip_field(buf, pos, eend, etag)",
             "if pos != eend:", f"    raise truncated({q(where)})", f"{local}[{k}] = {val}"]
    return _Case(f.number << 3 | 2, body)


def _decode_lines(py: _Python, m: MessageType, present: PresentNames | None) -> list[str]:
    """Body of ``decode_from(cls, buf, pos, end)``.

    Fields are read into locals and stored into the new instance's slots at the end. Unknown
    fields are kept in a buffer created only when the first one shows up.
    """
    init: list[str] = []
    cases: list[_Case] = []
    strings: dict[int, str] = {}  # tag -> field, for the UTF-8 error
    sparse = {f.number for f in m.sparse_fields()}
    if sparse:
        init.append("present: dict[str, Any] = {}")
    for f in m.fields:
        local, tmp = f"f_{f.py_name}", f"x_{f.py_name}"
        where = f"{m.py_path}.{f.proto_name}"
        if f.number in sparse:
            # A repeated occurrence replaces the earlier value, as for a slot.
            read = _decode_value(py, f.type, local, where)
            cases.append(_Case(f.number << 3 | 2, [*read, f"present[{q(f.py_name)}] = {local}"]))
            continue
        if f.is_map:
            assert f.map_key is not None and f.map_value is not None
            init.append(f"{local}: dict[{py.value_ann(f.map_key)}, "
                        f"{py.value_ann(f.map_value)}] = {{}}")
            cases.append(_map_case(py, f, where))
            if "string" in (f.map_key.kind, f.map_value.kind):
                strings[f.number << 3 | 2] = where
            continue
        if f.type.kind == "string":
            strings[f.number << 3 | 2] = where
        value_ann = py.value_ann(f.type)
        closed = _closed_enum(f.type)
        read = _decode_value(py, f.type, tmp, where)
        if f.label is Label.REPEATED:
            init.append(f"{local}: list[{value_ann}] = []")
            if closed:
                keep = [f"if {tmp} is None:", "    unknown = add_unknown(unknown, buf[start:pos])",
                        "else:", f"    {local}.append({tmp})"]
            else:
                keep = [f"{local}.append({tmp})"]
            cases.append(_Case(f.number << 3 | _wire(f.type), [*read, *keep]))
            if f.type.kind in PACKABLE:
                # Decoders accept both the packed and the unpacked form of a repeated scalar.
                if closed:
                    unk_tag = bytes_literal(varint_literal(f.number << 3))
                    keep = [f"if {tmp} is None:",
                            f"    unknown = add_unknown(unknown, {unk_tag} + int32_bytes(raw))",
                            "else:", f"    {local}.append({tmp})"]
                packed = [*_read_len("pend", where), "while pos < pend:"]
                packed += ["    " + s for s in _decode_value(py, f.type, tmp, where, "pend")]
                packed += ["    " + s for s in keep]
                packed += ["if pos != pend:", f"    raise truncated({q(where)})"]
                cases.append(_Case(f.number << 3 | 2, packed))
            continue
        if f.presence is Presence.IMPLICIT:
            init.append(f"{local}: {value_ann} = {py.default_expr(f)}")
        else:
            init.append(f"{local}: {value_ann} | None = None")
        if closed:
            one = [*read, f"if {tmp} is None:",
                   "    unknown = add_unknown(unknown, buf[start:pos])", "else:",
                   f"    {local} = {tmp}"]
        else:
            one = [*_decode_value(py, f.type, local, where)]
        if f.oneof is not None:
            one += [f"f_{g.py_name} = None" for g in m.fields
                    if g.oneof == f.oneof and g is not f]
        cases.append(_Case(f.number << 3 | _wire(f.type), one))
    cases.sort(key=lambda c: c.tag)
    lines = [*init, "unknown: bytearray | None = None", "try:", "    while pos < end:",
             "        start = pos", "        tag = buf[pos]", "        if tag < 0x80:",
             "            pos += 1"]
    if any(f.number >= 16 for f in m.fields):
        # Fields 16 to 2047 have two-byte tags.
        lines += ["        elif (second := buf[pos + 1]) < 0x80:",
                  "            tag = tag & 0x7F | second << 7",
                  "            pos += 2"]
    lines += ["        else:", "            tag, pos = read_varint(buf, pos)"]
    fallback = ["pos = skip_field(buf, pos, end, tag)",
                "unknown = add_unknown(unknown, buf[start:pos])"]
    lines += ["        " + s for s in _dispatch(cases, fallback)]
    name = q(m.py_path)
    lines += ["except (IndexError, struct_error):", f"    raise truncated({name}) from None"]
    if len(strings) == 1:
        lines += ["except UnicodeDecodeError as exc:",
                  f"    raise invalid_utf8({q(next(iter(strings.values())))}, exc) from None"]
    elif strings:
        lines += ["except UnicodeDecodeError as exc:", "    where = {"]
        lines += [f"        {tag}: {q(where)}," for tag, where in sorted(strings.items())]
        lines += ["    }[tag]", "    raise invalid_utf8(where, exc) from None"]
    lines += ["if pos != end:", f"    raise truncated({name})"]
    for f in m.fields:
        if f.presence is Presence.REQUIRED:
            lines += [f"if f_{f.py_name} is None:",
                      f"    raise MissingRequiredFieldError({q(m.py_path)}, {q(f.proto_name)})"]
    lines.append("msg = new_instance(cls)")
    lines += [f"msg.{f.storage} = f_{f.py_name}" for f in m.fields if f.number not in sparse]
    if present is not None:
        lines.append(f"msg.{present.slot} = present")
    lines += ['msg._unknown = b"" if unknown is None else bytes(unknown)', "return msg"]
    return lines


def _zero_of(py: _Python, t: FieldType) -> str:
    if t.kind == "enum":
        assert t.enum is not None
        return f"{py.ref(t.enum.full_name, t.enum.py_path)}.{t.enum.default.py_name}"
    if t.kind == "message":
        assert t.message is not None
        return f"{py.ref(t.message.full_name, t.message.py_path)}.decode_from(b'', 0, 0)"
    return _ZERO[_PY_SCALAR.get(t.kind, "int")]


def _dispatch(cases: list[_Case], fallback: list[str]) -> list[str]:
    """An if/elif chain for few tags, a balanced comparison tree for many."""
    if not cases:
        return fallback
    if len(cases) <= LINEAR_CASES:
        out: list[str] = []
        for i, case in enumerate(cases):
            out.append(f"{'if' if i == 0 else 'elif'} tag == {case.tag}:")
            out += ["    " + s for s in case.lines]
        out.append("else:")
        out += ["    " + s for s in fallback]
        return out
    mid = len(cases) // 2
    pivot = cases[mid].tag
    return [
        f"if tag < {pivot}:",
        *["    " + s for s in _dispatch(cases[:mid], fallback)],
        "else:",
        *["    " + s for s in _dispatch(cases[mid:], fallback)],
    ]
