"""The class statements of a protobuf module, line by line, each fitted at its depth.

What ``proto_module.py.j2`` prints for a message or an enum is built here rather than in a
Jinja macro, because only here is the depth of every line known: nested classes are printed
one level further in, and a long message or field name is fitted where its line is written.
Docstrings are left as ``docstring`` built them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protoframe.generator.codewriter import docstring, q
from protoframe.generator.linefit import INDENT, Lines

if TYPE_CHECKING:
    from protoframe.generator.pyview import EnumView, MessageView


def enum_text(e: EnumView, ind: str) -> str:
    """The class statement of ``e``, whose body is indented by ``ind`` plus one level, and
    the blank line after its last member (which separates a nested enum from what follows)."""
    out = Lines()
    body = ind + INDENT
    out.code(f"{ind}class {e.name}(enum.IntEnum, metaclass=ProtoEnumType):")
    out.raw(body + e.doc, "")
    for value in e.values:
        out.code(f"{body}{value.name} = {value.number}")
        if value.doc:
            out.raw(body + value.doc)
    return out.text() + "\n"


def message_text(c: MessageView, ind: str) -> str:
    """The class statement of ``c``, whose body is indented by ``ind`` plus one level."""
    out = Lines()
    one, two = ind + INDENT, ind + 2 * INDENT
    out.code(f"{ind}class {c.name}(Message):")
    out.raw(one + c.doc)
    for e in c.nested_enums:
        out.raw("", enum_text(e, one))
    for n in c.nested_messages:
        out.raw("", message_text(n, one))
    out.raw("")
    out.code(f"{one}FULL_NAME: ClassVar[str] = {q(c.full_name)}",
             f"{one}FIELD_NAMES: ClassVar[tuple[tuple[str, str, str], ...]] = (",
             *(f"{two}({q(f.name)}, {q(f.storage)}, {q(f.proto_name)})," for f in c.fields),
             f"{one})")
    for line in c.class_lines:
        out.code(one + line) if line else out.raw("")
    out.raw("")
    out.code(*(one + line for line in c.slots_lines),
             *(f"{one}{f.storage}: {f.storage_ann}" for f in c.fields if not f.sparse))
    if c.present:
        out.code(f"{one}{c.present}: dict[str, Any]")
    out.code(f"{one}_unknown: bytes")
    out.raw("")
    if c.fields:
        out.code(f"{one}def __init__(", f"{two}self,", f"{two}*,",
                 *(f"{two}{f.name}: {f.init_ann}," for f in c.fields if not f.sparse))
        if c.fields_dict:
            out.code(f"{two}**_fields: Unpack[{c.fields_dict}],")
        out.code(f"{one}) -> None:")
    else:
        out.code(f"{one}def __init__(self) -> None:")
    out.raw(two + c.init_doc)
    out.code(*(two + line for line in c.init_lines))
    _properties(out, c, one, two)
    if c.copy_lines:
        out.raw("")
        out.code(f"{one}def __copy__(self) -> Self:")
        out.raw(f'{two}"""A shallow copy with its own record of which fields are set."""')
        out.code(*(two + line for line in c.copy_lines))
    for f in c.fields:
        if f.has_method:
            out.raw("")
            out.code(f"{one}def has_{f.name}(self) -> bool:")
            out.raw(two + f.has_doc)
            out.code(f"{two}return {f.has_expr}")
    for o in c.oneofs:
        out.raw("")
        out.code(f"{one}def which_{o.name}(self) -> str | None:")
        out.raw(two + docstring(f"Name of the member of oneof {o.name} that is set, or None.",
                                two))
        for name, storage in o.members:
            out.code(f"{two}if self.{storage} is not None:", f"{two}{INDENT}return {q(name)}")
        out.code(f"{two}return None")
    _codec_methods(out, c, one, two)
    return out.text()


def _properties(out: Lines, c: MessageView, one: str, two: str) -> None:
    """Explicit-presence scalars read through a property with their default; sparse fields
    through one reading the message's dict of present values."""
    for f in c.fields:
        if not f.is_property:
            continue
        out.raw("")
        out.code(f"{one}@property", f"{one}def {f.name}(self) -> {f.ann}:")
        out.raw(two + f.doc)
        if f.default_expr == "None":
            out.code(f"{two}return self.{f.storage}")
        else:
            out.code(f"{two}value = self.{f.storage}",
                     f"{two}return {f.default_expr} if value is None else value")
        out.raw("")
        out.code(f"{one}@{f.name}.setter",
                 f"{one}def {f.name}(self, value: {f.setter_ann}) -> None:")
        if f.oneof_siblings:
            out.code(f"{two}if value is not None:",
                     *(f"{two}{INDENT}self.{s} = None" for s in f.oneof_siblings))
        out.code(f"{two}self.{f.storage} = value")
    for f in c.fields:
        if not f.sparse:
            continue
        out.raw("")
        out.code(f"{one}@property", f"{one}def {f.name}(self) -> {f.ann}:")
        out.raw(two + f.doc)
        out.code(f"{two}value: {f.ann} = self.{c.present}.get({f.key})", f"{two}return value")
        out.raw("")
        out.code(f"{one}@{f.name}.setter",
                 f"{one}def {f.name}(self, value: {f.setter_ann}) -> None:",
                 f"{two}if value is None:",
                 f"{two}{INDENT}self.{c.present}.pop({f.key}, None)",
                 f"{two}else:",
                 f"{two}{INDENT}self.{c.present}[{f.key}] = value")


def _codec_methods(out: Lines, c: MessageView, one: str, two: str) -> None:
    out.raw("")
    out.code(f"{one}@property", f"{one}def unknown_fields(self) -> bytes:")
    out.raw(f'{two}"""Fields this schema does not declare, kept as read and written back on '
            'encode."""')
    out.code(f"{two}return self._unknown")
    out.raw("")
    out.code(f"{one}def encode(self) -> bytes:")
    out.raw(f'{two}"""Serialize to the protobuf wire format, fields in number order.', "",
            f"{two}A value its field cannot hold raises ``ValueOutOfRangeError`` (a "
            "``ValueError``).", f'{two}"""')
    out.code(f"{two}parts: list[bytes] = []", f"{two}try:", f"{two}{INDENT}self._encode(parts)",
             f"{two}except struct_error as exc:",
             f"{two}{INDENT}# Fixed-width fields are packed with struct, which knows no field "
             "names.",
             f'{two}{INDENT}raise ValueOutOfRangeError(f"{{self.FULL_NAME}}: {{exc}}") from None',
             f'{two}return b"".join(parts)')
    out.raw("")
    out.code(f"{one}def encode_to(self, out: bytearray) -> None:")
    out.raw(f'{two}"""Append the wire form of this message to ``out``."""')
    out.code(f"{two}out += self.encode()")
    out.raw("")
    # No field is ever stored as _encode: a field named "encode" becomes "encode_".
    out.code(f"{one}def _encode(self, parts: list[bytes]) -> None:")
    out.raw(f'{two}"""Append the pieces of the wire form to ``parts``, to be joined once at the '
            'end."""')
    for line in c.encode_lines:
        out.code(two + line) if line else out.raw("")
    out.raw("")
    out.code(f"{one}@classmethod", f"{one}def decode(cls, data: BytesLike) -> Self:")
    out.raw(f'{two}"""Parse a whole buffer; raises a ``DecodeError`` subclass on bad input."""')
    out.code(f"{two}buf = data if type(data) is bytes else bytes(data)",
             f"{two}return cls.decode_from(buf, 0, len(buf))")
    out.raw("")
    out.code(f"{one}@classmethod",
             f"{one}def decode_from(cls, buf: bytes, pos: int, end: int) -> Self:")
    out.raw(f'{two}"""Parse ``buf[pos:end]`` without copying it first."""')
    out.code(*(two + line for line in c.decode_lines))
    out.raw("")
    out.code(f"{one}def __repr__(self) -> str:", f"{two}return message_repr(self)")
