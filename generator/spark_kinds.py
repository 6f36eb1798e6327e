"""How each protobuf and frame type appears in Spark rows, Spark schemas and Arrow.

``TYPE_MAPPING`` is the documented mapping; it is printed into each generated module's
docstring. ``proto_kind`` and ``frame_kind`` give the ``Kind`` of one field: its Spark and
Arrow types and the expressions that convert its values to and from rows and columns, with
the names each of those expressions calls (``Kind.needs``), which whoever writes one out
declares on the module's imports (``Kind.use``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protoframe.generator.codewriter import Imports
from protoframe.generator.errors import GeneratorBug
from protoframe.generator.frame_bits import FrameEnum
from protoframe.generator.frame_ir import (
    BlocksField,
    BoolField,
    BytesField,
    FloatField,
    FrameField,
    IntField,
    ProtoField,
    StringField,
    StructDef,
    StructField,
    SwitchField,
    UuidField,
    VarintField,
)
from protoframe.generator.ir import EnumType, FieldType
from protoframe.generator.naming import union_key
from protoframe.generator.runtime_modules import SPARK_ROWS
from protoframe.generator.spark_emit import SPARK_TYPES, SparkContext

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
    frame u8, u16, u24, i8 ... i32      IntegerType / int32
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

# proto scalar -> (Spark type class, Arrow type); None: the decimal kind
_SCALARS: dict[str, tuple[str, str] | None] = {
    "int32": ("IntegerType", "pa.int32()"),
    "sint32": ("IntegerType", "pa.int32()"),
    "sfixed32": ("IntegerType", "pa.int32()"),
    "uint32": ("LongType", "pa.int64()"),
    "fixed32": ("LongType", "pa.int64()"),
    "int64": ("LongType", "pa.int64()"),
    "sint64": ("LongType", "pa.int64()"),
    "sfixed64": ("LongType", "pa.int64()"),
    "uint64": None,
    "fixed64": None,
    "bool": ("BooleanType", "pa.bool_()"),
    "double": ("DoubleType", "pa.float64()"),
    "float": ("FloatType", "pa.float32()"),
    "string": ("StringType", "pa.string()"),
    "bytes": ("BinaryType", "pa.binary()"),
}

Name = tuple[str, str]  # (module, name) of an import


def _rows(*names: str) -> tuple[Name, ...]:
    return tuple((SPARK_ROWS, n) for n in names)


@dataclass
class Kind:
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
    # The names each pattern above calls, by attribute ("spark", "row", ...).
    needs: dict[str, tuple[Name, ...]] = field(default_factory=dict)

    def use(self, part: str, imports: Imports) -> str:
        """The pattern ``part`` (an attribute's name), its names declared on ``imports``."""
        for module, name in self.needs.get(part, ()):
            imports.use(module, name)
        pattern = getattr(self, part)
        assert isinstance(pattern, str)
        return pattern


def _bits_kind(width: int, enum: FrameEnum | None) -> Kind:
    """A bit sub-field: the smallest column its bits fit; a spec enum's value by its number,
    turned back into the enum on the way from a row."""
    if width == 64:
        return decimal_kind()
    spark, arrow = ("IntegerType", "pa.int32()") if width < 32 else ("LongType", "pa.int64()")
    if enum is None:
        return basic(spark, arrow, "int")
    return basic(spark, arrow, f"frames.{enum.name}", value=f"frames.{enum.name}({{}})")


def basic(spark_type: str, arrow: str, py: str, *, row: str = "{}", value: str = "{}",
          column: str = "pa.array({}, {type})", lists: str = "pa.array({}, {type})") -> Kind:
    """A kind whose Spark type is the pyspark class ``spark_type``, taking no arguments."""
    return Kind(f"{spark_type}()", arrow, py, row=row, value=value, column=column, lists=lists,
                needs={"spark": ((SPARK_TYPES, spark_type),)})


def proto_kind(ctx: SparkContext, t: FieldType, recursive: bool = False) -> Kind:
    if t.kind == "enum":
        assert t.enum is not None
        key = ctx.enum_key(t.enum)
        ref = ctx.ref(t.enum.full_name, t.enum.py_path)
        names = f"_NAMES_{key}"
        kind = basic("StringType", "pa.string()", ref, column=f"enum_array({{}}, {names})",
                     lists=f"enum_lists_array({{}}, {names})")
        kind.needs |= {"column": _rows("enum_array"), "lists": _rows("enum_lists_array")}
        if t.enum.closed:
            kind.row = f"{names}[{{}}]"
            kind.enum = t.enum
            return kind
        kind.py = f"{ref} | int"
        kind.row = f"enum_name({names}, {{}})"
        kind.value = f"enum_value({{}}, _NUMBERS_{key}, {ref}, {{where}})"
        kind.needs |= {"row": _rows("enum_name"), "value": _rows("enum_value")}
        return kind
    if t.kind == "message":
        assert t.message is not None
        ref = ctx.ref(t.message.full_name, t.message.py_path)
        if recursive:
            kind = basic("BinaryType", "pa.binary()", ref, row="{}.encode()",
                         value=f"{ref}.decode(binary_value({{}}))",
                         column="encoded_array({})", lists="encoded_lists_array({})")
            kind.needs |= {"value": _rows("binary_value"), "column": _rows("encoded_array"),
                           "lists": _rows("encoded_lists_array")}
            return kind
        key = ctx.keys[t.message.full_name]
        return struct_kind(key, ref)
    scalar = _SCALARS[t.kind]
    if scalar is None:
        return decimal_kind()
    spark, arrow = scalar
    py = {"bool": "bool", "double": "float", "float": "float", "string": "str",
          "bytes": "bytes"}.get(t.kind, "int")
    if t.kind == "bytes":
        return binary_kind()
    return basic(spark, arrow, py)



def decimal_kind() -> Kind:
    return Kind("DecimalType(20, 0)", "DECIMAL_20", "int", row="Decimal({})",
                value="uint64_value({}, {where})", column="uint64_array({}, {type})",
                lists="uint64_array({}, {type})",
                needs={"spark": ((SPARK_TYPES, "DecimalType"),), "arrow": _rows("DECIMAL_20"),
                       "row": (("decimal", "Decimal"),), "value": _rows("uint64_value"),
                       "column": _rows("uint64_array"), "lists": _rows("uint64_array")})


def binary_kind() -> Kind:
    kind = basic("BinaryType", "pa.binary()", "bytes", value="binary_value({})")
    kind.needs["value"] = _rows("binary_value")
    return kind


def struct_kind(key: str, py: str) -> Kind:
    return Kind(f"_SPARK_{key}", f"_ARROW_{key}", py, row=f"_row_{key}({{}})",
                value=f"_value_{key}({{}})", column=f"_arrow_{key}({{}})",
                lists=f"list_array({{}}, _arrow_{key}, {{type}})",
                needs={"lists": _rows("list_array")})


def frame_kind(ctx: SparkContext, owner: StructDef, f: FrameField) -> Kind:
    if f.marker:
        return basic("BooleanType", "pa.bool_()", "bool")
    if f.bit_of is not None and isinstance(f, IntField):
        return _bits_kind(f.bit_of.width, f.bit_of.enum)
    match f:
        case IntField(width=8, signed=False):
            return decimal_kind()
        case IntField(width=width, signed=signed):
            if width < 4 or (width == 4 and signed):
                return basic("IntegerType", "pa.int32()", "int")
            return basic("LongType", "pa.int64()", "int")
        case VarintField():
            return decimal_kind()
        case BoolField():
            return basic("BooleanType", "pa.bool_()", "bool")
        case FloatField(width=4):
            return basic("FloatType", "pa.float32()", "float")
        case FloatField():
            return basic("DoubleType", "pa.float64()", "float")
        case UuidField():
            kind = basic("StringType", "pa.string()", "UUID", row="str({})", value="UUID({})",
                         column="text_array({})", lists="text_lists_array({})")
            kind.needs |= {"value": (("uuid", "UUID"),), "column": _rows("text_array"),
                           "lists": _rows("text_lists_array")}
            return kind
        case BytesField():
            return binary_kind()
        case StringField():
            return basic("StringType", "pa.string()", "str")
        case ProtoField(message=message) if message is not None:
            return proto_kind(ctx, FieldType("message", message=message))
        case StructField(struct=held) | BlocksField(struct=held) if held is not None:
            return struct_kind(ctx.keys[held.name], f"frames.{held.name}")
        case SwitchField():
            key = union_key(owner.name, f.name)
            return struct_kind(key, f"_{key}_T")
    raise GeneratorBug(f"spark.py: frame field kind {f.kind!r} has no Spark mapping",
                       str(f.location))

