"""The Python view of the IR: everything the message templates print, decided here.

For each message this computes annotations, defaults and the body of ``__init__``; the
``_encode`` and ``decode_from`` bodies come from ``proto_encoder`` and ``proto_decoder``, what
both share (the wire tables, ``ModuleContext``) from ``proto_emit``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protoframe.generator.codewriter import docstring, q
from protoframe.generator.errors import GeneratorBug
from protoframe.generator.ir import (
    EnumType,
    Field,
    FieldType,
    Label,
    MessageType,
    Presence,
    PresentNames,
    ProtoFile,
)
from protoframe.generator.linefit import INDENT, Lines, fit_all, fit_appends
from protoframe.generator.proto_class import enum_text, message_text
from protoframe.generator.proto_decoder import decode_lines, zero_of
from protoframe.generator.proto_emit import (
    ModuleContext,
    tag_bytes,
)
from protoframe.generator.proto_encoder import encode_lines
from protoframe.generator.runtime_modules import COMPILED, ERRORS, PROTOWIRE
from protoframe.runtime.codec.vocabulary import FIELD_KINDS, FIELD_MODES, MAP_KEY_KINDS


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
    # init_ann with a default that evaluates at module level, after every class: the
    # parameter as the signature function of a sparse message spells it (FieldsDictView)
    module_init_ann: str = ""


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
    """What a sparse message's constructor takes: a TypedDict of its optional message fields,
    which type checkers read, and a function with every field a keyword, which
    ``spell_out_fields`` makes the signature and annotations the running code reports."""

    name: str
    path: str  # the message's dotted path in the module
    doc: str
    fields: list[tuple[str, str]]  # (field name, annotation)
    signature: str  # name of the function spelling out the constructor's signature
    signature_doc: str
    params: list[str]  # its keyword parameters, in field order

    @property
    def typed_dict_lines(self) -> list[str]:
        """The TypedDict, one level in (under ``if TYPE_CHECKING:``)."""
        out = Lines()
        out.code(f"{INDENT}class {self.name}(TypedDict, total=False):")
        out.raw(2 * INDENT + self.doc, "")
        out.code(*(f"{2 * INDENT}{name}: {ann}" for name, ann in self.fields))
        return out.lines

    @property
    def signature_lines(self) -> list[str]:
        """The function spelling out the constructor, and the call installing it."""
        out = Lines()
        out.code(f"def {self.signature}(", f"{INDENT}self: {self.path},", f"{INDENT}*,",
                 *(f"{INDENT}{param}," for param in self.params), ") -> None:")
        out.raw(INDENT + self.signature_doc, "", "")
        out.code(f"spell_out_fields({self.path}, {self.signature})")
        return out.lines


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
        """The statement building the module's number -> member table (fitted by the caller)."""
        return f"{self.map_name} = number_table({self.path})"


@dataclass
class ModuleView:
    source: str
    module_doc: str
    messages: list[MessageView]
    enums: list[EnumView]
    all_enums: list[EnumView]
    # The import block, its sections apart by blank lines: what the module's code declared.
    import_lines: list[str]
    exports: list[str]
    fields_dicts: list[FieldsDictView] = field(default_factory=list)
    # Lines of the layout tables given to runtime.codec.compiled.install_layouts; empty: none.
    compiled_layouts: list[str] = field(default_factory=list)
    # The .proto file's name for protoc and its FileDescriptorSet in base64 lines
    # (generator/descriptor_sets.py); None: the module has no messages.
    descriptor_set: tuple[str, list[str]] | None = None

    @property
    def export_lines(self) -> list[str]:
        return fit_all(f"{INDENT}{q(name)}," for name in self.exports)

    @property
    def class_texts(self) -> list[str]:
        """The class statements, enums first."""
        return ([enum_text(e, "") for e in self.enums]
                + [message_text(msg, "") for msg in self.messages])

    @property
    def table_lines(self) -> list[str]:
        return fit_all(e.table_line for e in self.all_enums)

    @property
    def descriptor_lines(self) -> list[str]:
        if self.descriptor_set is None:
            return []
        name, pieces = self.descriptor_set
        return fit_all([f"PROTO_FILE = {q(name)}", "FILE_DESCRIPTOR_SET = (",
                        *(f"{INDENT}{q(piece)}," for piece in pieces), ")"])



def build_module(proto: ProtoFile, module_of: dict[str, str]) -> ModuleView:
    """The render-ready view of one .proto file's generated module."""
    py = ModuleContext(proto, module_of)
    messages = []
    for m in proto.messages:
        if not m.is_map_entry:
            messages.append(_message_view(py, m, 0))
            py.bound.add(m.py_name)  # the classes after it may name it in their defaults
    enums = [_enum_view(py, e, 0) for e in proto.enums]
    nested = [e for v in _walk(messages) for e in v.nested_enums]
    fields_dicts = [_fields_dict_view(py, v) for v in _walk(messages) if v.fields_dict]
    layouts = fit_all(line for m in proto.all_messages() if not m.is_map_entry
                      for line in _compiled_layout(py, m))
    if layouts:
        py.imports.use(COMPILED, "install_layouts")
    text = proto.comment or f"Typed protobuf bindings for {proto.path}."
    if proto.package:
        text += f"\n\nProtobuf package: ``{proto.package}``."
    return ModuleView(
        source=proto.path,
        module_doc=docstring(text, ""),
        messages=messages,
        enums=enums,
        all_enums=enums + nested,
        import_lines=py.imports.block(),
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


def _fields_dict_view(py: ModuleContext, v: MessageView) -> FieldsDictView:
    # The template's TYPE_CHECKING block of TypedDicts and its spell_out_fields calls.
    for name in ("TYPE_CHECKING", "TypedDict", "Unpack"):
        py.imports.use("typing", name)
    py.runtime(PROTOWIRE, "spell_out_fields")
    return FieldsDictView(
        name=v.fields_dict,
        path=v.path,
        doc=docstring(f"{v.path}'s optional message fields: keywords of its constructor.",
                      "        "),
        fields=[(f.name, f.setter_ann) for f in v.fields if f.sparse],
        signature=v.fields_dict.removesuffix("_Fields") + "_signature",
        signature_doc=docstring(
            f"{v.path}.__init__ with every field a keyword: the signature and annotations "
            "inspect and typing report for it.", "    "),
        params=[f"{f.name}: {f.setter_ann} = None" if f.sparse else
                f"{f.name}: {f.module_init_ann or f.init_ann}" for f in v.fields],
    )


def _enum_view(py: ModuleContext, e: EnumType, depth: int) -> EnumView:
    # The template's class statement and the module's number -> member table.
    py.imports.use("enum")
    py.runtime(COMPILED, "ProtoEnumType")
    py.runtime(PROTOWIRE, "number_table")
    ind = "    " * (depth + 1)
    return EnumView(
        name=e.py_name,
        path=e.py_path,
        map_name="_" + e.py_path.replace(".", "_") + "_BY_NUMBER",
        doc=docstring(e.comment or f"The {e.proto_name} enum of {e.full_name}.", ind),
        values=[EnumValueView(v.py_name, v.number, docstring(v.comment, ind) if v.comment else "")
                for v in e.values],
    )


def _message_view(py: ModuleContext, m: MessageType, depth: int) -> MessageView:
    # What the template's class skeleton names: its base class, annotations, __repr__, decode's
    # parameter and encode's handling of struct's range errors.
    for name in ("ClassVar", "Self"):
        py.imports.use("typing", name)
    for name in ("Message", "message_repr", "BytesLike"):
        py.runtime(PROTOWIRE, name)
    py.runtime(ERRORS, "ValueOutOfRangeError")
    py.imports.use("struct", "error as struct_error")
    if m.present is not None:
        py.imports.use("typing", "Any")  # the annotation of the dict of present fields
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
        encode_lines=fit_appends(encode_lines(py, m, present), len(ind) + 4),
        decode_lines=decode_lines(py, m, present),
        nested_enums=[_enum_view(py, e, depth + 1) for e in m.enums],
        nested_messages=[_message_view(py, n, depth + 1) for n in m.messages
                         if not n.is_map_entry],
        init_lines=_init_lines(py, fields, present, m.py_path),
        present=present.slot if present else "",
        class_lines=_present_tables(m, present) if present else [],
        copy_lines=_copy_lines(py, fields, present) if present else [],
        fields_dict=_fields_dict_name(m) if present else "",
        indent=len(ind),
    )


def _compiled_layout(py: ModuleContext, m: MessageType) -> list[str]:
    """Lines of ``m``'s entry in the table handed to ``install_layouts``: a row per field, in
    number order (see ``runtime.codec.vocabulary`` for its items)."""
    sparse = {f.number for f in m.sparse_fields()}
    present = m.present.slot if m.present is not None else None
    oneofs = [o.proto_name for o in m.oneofs]
    rows = []
    for f in sorted(m.fields, key=lambda f: f.number):
        t = f.map_value if f.is_map else f.type
        assert t is not None
        kind, extra = _kind_and_extra(py, t)
        aux = ""
        if f.is_map:
            assert f.map_key is not None
            mode, storage = "map", f.py_name
            if f.map_key.kind not in MAP_KEY_KINDS:
                raise GeneratorBug(f"{m.full_name}.{f.proto_name}: the compiled codec has no "
                                   f"map key of kind {f.map_key.kind}", str(f.location))
            value_default = "None" if t.kind == "message" else zero_of(py, t)
            aux = f", ({q(f.map_key.kind)}, {zero_of(py, f.map_key)}, {value_default})"
        elif f.number in sparse:
            mode, storage = "sparse", f.py_name
        elif f.label is Label.REPEATED:
            mode, storage = ("packed" if f.packed else "repeated"), f.py_name
        elif f.oneof is not None:
            mode, storage, aux = "oneof", f.storage, f", {oneofs.index(f.oneof)}"
        elif f.presence is Presence.IMPLICIT:
            mode, storage, aux = "implicit", f.storage, f", {py.default_expr(f)}"
        else:
            mode = "required" if f.presence is Presence.REQUIRED else "optional"
            storage = f.storage
        if kind not in FIELD_KINDS or mode not in FIELD_MODES:
            raise GeneratorBug(f"{m.full_name}.{f.proto_name}: the compiled codec has no word "
                               f"for {kind}, {mode}", str(f.location))
        rows.append(f"        ({f.number}, {q(kind)}, {q(mode)}, {q(storage)}, {extra}{aux}),")
    if not rows:
        return [f"    ({m.py_path}, None, ()),"]
    return [f"    ({m.py_path}, {q(present) if present else 'None'}, (", *rows, "    )),"]


def _kind_and_extra(py: ModuleContext, t: FieldType) -> tuple[str, str]:
    """A value's kind word and the table's reference for it: its enum's number -> member
    dict, its message class, or None."""
    if t.kind == "enum":
        assert t.enum is not None
        return ("enum" if t.enum.closed else "open_enum"), py.enum_map(t.enum)
    if t.kind == "message":
        assert t.message is not None
        return "message", py.ref(t.message.full_name, t.message.py_path)
    return t.kind, "None"


def _fields_dict_name(m: MessageType) -> str:
    # Proto names start with a letter, so a leading underscore keeps it clear of the messages.
    return "_" + m.py_path.replace(".", "_") + "_Fields"


def _present_tables(m: MessageType, present: PresentNames) -> list[str]:
    fields = sorted(m.sparse_fields(), key=lambda f: f.number)
    lines = ["", f"{present.tags}: ClassVar[dict[str, bytes]] = {{"]
    lines += [f"    {q(f.py_name)}: {tag_bytes(f.number, 2)}," for f in fields]
    lines += ["}", f"{present.rank}: ClassVar[dict[str, int]] = {{"]
    lines += [f"    {q(f.py_name)}: {f.number}," for f in fields]
    return [*lines, "}"]


def _copy_lines(py: ModuleContext, fields: list[FieldView], present: PresentNames) -> list[str]:
    """Body of ``__copy__``: the copy gets its own dict of present fields.

    Without it a shallow copy would share the dict, and unsetting a field of the copy would
    unset it in the original too, unlike every field that has its own slot.
    """
    lines = [f"other = {py.runtime(PROTOWIRE, 'new_instance')}(type(self))"]
    lines += [f"other.{fv.storage} = self.{fv.storage}" for fv in fields if not fv.sparse]
    lines += [f"other.{present.slot} = dict(self.{present.slot})",
              "other._unknown = self._unknown", "return other"]
    return lines


def _init_lines(py: ModuleContext, fields: list[FieldView], present: PresentNames | None,
                owner: str) -> list[str]:
    """Body of ``__init__`` after the docstring: sparse fields come in as ``**_fields``."""
    lines = [f"self.{fv.storage} = {fv.init_expr}" for fv in fields if not fv.sparse]
    if present is not None:
        lines.append(f"self.{present.slot} = {py.runtime(PROTOWIRE, 'present_fields')}("
                     f"_fields, self.{present.tags}, "
                     f"{q(owner)})")
    return [*lines, 'self._unknown = b""']


def _field_doc(fv: FieldView, ind: str) -> str:
    text = fv.comment or f"The {fv.proto_name} field (number {fv.number})."
    if fv.is_property and fv.default_expr != "None":
        text += f"\n\nReads as ``{fv.default_expr}`` when unset; assign None to unset it."
    return docstring(text, ind)


def _field_view(py: ModuleContext, m: MessageType, f: Field) -> FieldView:
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
            module_init_ann=f"{value} = {default}" if in_body is not None else "",
        )
    return FieldView(
        name=f.py_name, proto_name=f.proto_name, number=f.number, storage="_" + f.py_name,
        ann=value, storage_ann=f"{value} | None", init_ann=f"{value} | None = None",
        init_expr=f.py_name, is_property=True, default_expr=default, has_method=True,
        comment=f.comment,
    )


# ---------------------------------------------------------------------------------------------
# encoding


