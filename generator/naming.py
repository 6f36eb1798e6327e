"""How protobuf names become Python names, and the pass that fixes them on the model.

The rule (documented in README.md, "Naming"): a name is kept as written unless it is a Python
keyword or soft keyword, the name of a builtin, or a name the generated code itself defines on
the class (``encode``, ``decode``, ``has_<field>`` ...). Such a name gets one trailing underscore
(``type`` -> ``type_``, ``None`` -> ``None_``). If two names still end up equal, generation
stops with an error naming both declarations: nothing is ever dropped silently.
"""

from __future__ import annotations

import builtins
import keyword
import re

from protoframe.generator.frame_ir import SwitchField
from protoframe.generator.ir import Field, Label, MessageType, Presence, PresentNames, Protocol
from protoframe.generator.spec_ir import FrameSpec

PYTHON_RESERVED = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | frozenset(
    name for name in dir(builtins) if not name.startswith("_")
)

# Attributes every generated message class defines; a field may not take these names.
MESSAGE_HELPERS = frozenset(
    {"encode", "decode", "decode_from", "encode_to", "to_dict", "from_dict", "FULL_NAME",
     "unknown_fields",
     "FIELD_NAMES"}
)

# Names IntEnum (and Enum) already define on a member or the class.
ENUM_HELPERS = frozenset({"name", "value", "mro"})


def py_identifier(name: str, taken: frozenset[str] = frozenset()) -> str:
    """The Python spelling of a protobuf name: one trailing underscore if the name is reserved."""
    if name in PYTHON_RESERVED or name in taken or name.startswith("_"):
        return name + "_"
    return name


def module_name(proto_stem: str) -> str:
    """Snake-case module name for a .proto file stem: ``PulsarApi`` -> ``pulsar_api``."""
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", proto_stem)
    s = re.sub(r"[^0-9a-zA-Z_]", "_", s).lower()
    if not s or s[0].isdigit():
        s = "proto_" + s
    return py_identifier(s)


# Names the generated Spark module defines or imports; a codec named like one gets a "_".
SPARK_MODULE_NAMES = frozenset({
    "Any", "Decimal", "Sequence", "UUID", "pa", "annotations", "MESSAGES", "STRUCTS", "FRAME",
    "decode_frame", "command_name", "RowCodec", "RowLike", "ArrayType", "BinaryType",
    "BooleanType", "DecimalType", "DoubleType", "FloatType", "IntegerType", "LongType",
    "MapType", "StringType", "StructField", "StructType", "ChecksumFailure", "DecodeError",
    "frames",
})


def _spark_safe(name: str) -> str:
    if keyword.iskeyword(name) or keyword.issoftkeyword(name) or hasattr(builtins, name) \
            or name in SPARK_MODULE_NAMES:
        return name + "_"
    return name


def spark_message_key(py_path: str) -> str:
    """The name of a message's codec in the Spark module (``Outer.Inner`` -> ``Outer_Inner``)."""
    return _spark_safe(py_path.replace(".", "_"))


def spark_struct_key(name: str) -> str:
    """The name of a frame struct's codec in the Spark module."""
    return _spark_safe(name)


def union_key(struct: str, switch: str) -> str:
    """The name of a switch field's union codec (and schema) in the Spark module."""
    return f"{struct}_{switch}_union"


def name_protocol(protocol: Protocol) -> None:
    """Fix the generated names emitters read from the model: each field's storage attribute and
    each sparse message's present-field names. Run once, after the model is built."""
    for proto in protocol.files:
        for m in proto.all_messages():
            for f in m.fields:
                f.storage = _storage(f)
            m.present = _present_names(m) if m.sparse_fields() else None


def _storage(f: Field) -> str:
    """The attribute holding a field: explicit-presence scalars (and oneof members) sit behind
    a property, in ``_<name>``; reading the property gives None when the field is unset."""
    if f.presence is Presence.EXPLICIT and f.label is not Label.REPEATED and (
        f.type.kind != "message" or f.oneof is not None
    ):
        return "_" + f.py_name
    return f.py_name


def _present_names(m: MessageType) -> PresentNames:
    # Explicit-presence scalars live in "_" + name, so a field called "present" would own
    # "_present": step aside with trailing underscores rather than collide.
    taken = {"_" + f.py_name for f in m.fields} | {f.py_name for f in m.fields}

    def free(name: str) -> str:
        while name in taken:
            name += "_"
        return name

    return PresentNames(free("_present"), free("_PRESENT_TAGS"), free("_PRESENT_RANK"))


def name_frame_spec(spec: FrameSpec) -> None:
    """Fix the generated names emitters read from a frame model: each switch's union alias
    (``Frame`` + ``command_body`` -> ``FrameCommandBody``) and its tables' prefix. Run once,
    after validation."""
    for s in [*spec.structs, spec.frame]:
        for f in s.fields:
            if isinstance(f, SwitchField):
                f.alias = s.name + "".join(p.capitalize() for p in f.name.split("_"))
                f.tables = f"_{s.name.upper()}_{f.name.upper()}"
