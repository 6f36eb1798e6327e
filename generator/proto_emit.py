"""What the protobuf emitters share: the wire vocabulary and the module's name context.

``ModuleContext`` spells IR types as Python annotations and expressions within one generated
module (and records the sibling modules it refers to); the tables say how each scalar kind is
encoded and decoded.
"""

from __future__ import annotations

from protoframe.generator.codewriter import Imports, bytes_literal, q
from protoframe.generator.ir import (
    EnumType,
    EnumValue,
    Field,
    FieldType,
    MessageType,
    ProtoFile,
)

# How each scalar is encoded: (wire type, function producing the value's bytes).
ENCODERS: dict[str, tuple[int, str]] = {
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
VARINT_HELPERS = {
    "int32": "int32_bytes",
    "int64": "int64_bytes",
    "uint32": "uint32_bytes",
    "uint64": "uint64_bytes",
    "enum": "int32_bytes",
}
# Integer kinds whose decoders read two- to four-byte varints inline.
INLINE_VARINTS = frozenset({"int32", "int64", "uint32", "uint64", "sint32", "sint64"})

# Conversion of a raw (unsigned, 64-bit) varint to the field's value when it took >1 byte:
# (expression, the runtime helper it calls or "").
VARINT_SLOW: dict[str, tuple[str, str]] = {
    "int32": ("to_int32({})", "to_int32"),
    "int64": ("to_int64({})", "to_int64"),
    "uint32": ("{} & 0xFFFFFFFF", ""),
    "enum": ("to_int32({})", "to_int32"),
}
# Conversion applied to every decoded varint (one-byte ones included), as VARINT_SLOW.
VARINT_ALWAYS: dict[str, tuple[str, str]] = {
    "bool": ("{} != 0", ""),
    "sint32": ("unzigzag32({})", "unzigzag32"),
    "sint64": ("unzigzag({})", "unzigzag"),
}
FIXED_DECODERS = {
    "fixed32": ("unpack_fixed32", 4),
    "sfixed32": ("unpack_sfixed32", 4),
    "float": ("unpack_float", 4),
    "fixed64": ("unpack_fixed64", 8),
    "sfixed64": ("unpack_sfixed64", 8),
    "double": ("unpack_double", 8),
}
PY_SCALAR = {
    "double": "float",
    "float": "float",
    "bool": "bool",
    "string": "str",
    "bytes": "bytes",
}
ZERO = {"float": "0.0", "bool": "False", "str": "''", "bytes": "b''", "int": "0"}

LINEAR_CASES = 6  # below this many tags a plain if/elif chain beats a comparison tree


def varint_literal(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class ModuleContext:
    """Translates IR types to Python annotations and expressions within one module.

    Every emitter that writes a name the module must import declares it on ``imports`` where it
    writes it, so the import block holds exactly what the code uses.
    """

    def __init__(self, proto: ProtoFile, module_of: dict[str, str]) -> None:
        self.proto = proto
        self.module_of = module_of  # full_name of a type -> generated module it lives in
        # The runtime's names one per line: regenerating after a schema change then shows the
        # helpers it added or dropped as lines of their own.
        self.imports = Imports(one_per_line=("protoframe.",))
        # Module-level names already bound while a class body runs: the enums (emitted first)
        # and the top-level messages emitted so far.
        self.bound: set[str] = {e.py_name for e in proto.enums}

    def ref(self, full_name: str, py_path: str) -> str:
        module = self.module_of[full_name]
        if module == self.proto.module:
            return py_path
        self.imports.use(".", module)
        return f"{module}.{py_path}"

    def runtime(self, module: str, name: str) -> str:
        """``name`` from the runtime ``module``, declared as used; returns ``name``."""
        self.imports.use(module, name)
        return name

    def value_ann(self, t: FieldType) -> str:
        if t.kind == "enum":
            assert t.enum is not None
            ann = self.ref(t.enum.full_name, t.enum.py_path)
            return ann if t.enum.closed else f"{ann} | int"
        if t.kind == "message":
            assert t.message is not None
            return self.ref(t.message.full_name, t.message.py_path)
        return PY_SCALAR.get(t.kind, "int")

    def enum_map(self, enum: EnumType) -> str:
        base = "_" + enum.py_path.replace(".", "_") + "_BY_NUMBER"
        module = self.module_of[enum.full_name]
        if module == self.proto.module:
            return base
        self.imports.use(".", module)
        return f"{module}.{base}"

    def default_expr(self, f: Field) -> str:
        """What ``f`` reads as when unset, spelled for code that runs after import."""
        t = f.type
        if t.kind == "enum":
            assert t.enum is not None
            ref = self.ref(t.enum.full_name, t.enum.py_path)
            return f"{ref}.{enum_default(f, t.enum).py_name}"
        py = PY_SCALAR.get(t.kind, "int")
        if f.default is None:
            return ZERO[py]
        if py == "str":
            return q(f.default)
        if py == "bytes":
            return repr(unescape_c(f.default))
        if py == "bool":
            return "True" if f.default == "true" else "False"
        if py == "float":
            special = {"inf": "math.inf", "-inf": "-math.inf", "nan": "math.nan"}
            if f.default in special:
                self.imports.use("math")
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
        member = enum_default(f, enum).py_name
        path = enum.py_path
        if path.startswith(owner.py_path + "."):
            return f"{path[len(owner.py_path) + 1:]}.{member}"
        in_class = {n.py_name for n in owner.messages} | {e.py_name for e in owner.enums}
        top = path.split(".", 1)[0]
        if top in self.bound and top not in in_class:
            return f"{path}.{member}"
        return None


def enum_default(f: Field, enum: EnumType) -> EnumValue:
    """The member an unset enum field reads as: its ``[default = ...]``, else the first."""
    name = f.default or enum.default.proto_name
    return next(v for v in enum.values if v.proto_name == name)


def unescape_c(text: str) -> bytes:
    # protoc reports bytes defaults C-escaped.
    return text.encode("latin-1").decode("unicode_escape").encode("latin-1")


def tag_bytes(number: int, wire: int) -> str:
    return bytes_literal(varint_literal(number << 3 | wire))


def wire_type(t: FieldType) -> int:
    return ENCODERS[t.kind][0]
