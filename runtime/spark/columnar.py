"""Protobuf values straight into Arrow columns: the columnar path of Spark decoding.

``decode_column(codec, values)`` turns an Arrow binary array of serialized messages of one type
into the struct column ``codec.to_arrow`` would build from the decoded values, without a Python
object per value: the C extension ``runtime.codec._columnar`` reads the values from the array's
offsets and data buffers and writes validity bitmaps, value buffers, string offsets and data,
list offsets and struct children, which become pyarrow arrays of ``codec.arrow_type``
(``pyarrow.Array.from_buffers``). The result equals the row path's, value for value and type
for type: the same Arrow types, nulls for unset optional fields, defaults for proto3 fields,
enum names (dictionary-decoded), uint64 as ``decimal128(20, 0)``.

What it covers and what it leaves to the row path (``python_type.decode`` then
``codec.to_arrow``):

* a message type is columnar when every field (nested messages too) is a scalar, string,
  bytes, enum or message field, singular, repeated, a oneof's member or a map, and each proto3
  default is zero (always so in proto3); otherwise all of its batches take the row path
  (``plan(codec)`` is None);
* within a columnar type, a value the C decoder is not sure to decode exactly as the generated
  decoder does (damaged bytes, invalid UTF-8, a missing required field, an enum number the
  enum does not declare, a group, a repeated singular message field, a oneof member after a
  message member of the same oneof, a map key given twice, a map entry without its message
  value, a varint past ten bytes), or one that sets a message field inside its own type (a
  binary column holding the field's encoding, which the row path writes), is a "bad" row: the
  C decoder leaves it null and reports it, and that one value is decoded by the row path,
  whose result (or error) replaces it. So errors are the row path's: with ``errors="null"`` a
  value whose ``decode`` raises becomes null, as the data source's ``decoded`` column has
  always done; with ``errors="raise"`` the error propagates.

A null entry of ``values`` is a null row. Without the extension (not built, or
``PROTOFRAME_PURE_PYTHON`` set) everything takes the row path.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Literal

import pyarrow as pa

from protoframe.runtime.codec import compiled, vocabulary
from protoframe.runtime.spark.rows import DECIMAL_20, RowCodec, null_column, placeholders

_columnar: ModuleType | None
try:
    from protoframe.runtime.codec import _columnar
except ImportError:  # not built
    _columnar = None
if _columnar is not None:
    vocabulary.check_built(_columnar.__name__, getattr(_columnar, "VOCABULARY", None),
                           ("FIELD_KINDS", "FIELD_MODES"))

Errors = Literal["null", "raise"]

# kind -> the Arrow type of its values in the generated Spark schema (spark_kinds.TYPE_MAPPING)
_ARROW_OF_KIND: dict[str, Any] = {
    "int32": pa.int32(), "sint32": pa.int32(), "sfixed32": pa.int32(),
    "uint32": pa.int64(), "fixed32": pa.int64(), "int64": pa.int64(), "sint64": pa.int64(),
    "sfixed64": pa.int64(), "uint64": DECIMAL_20, "fixed64": DECIMAL_20, "bool": pa.bool_(),
    "double": pa.float64(), "float": pa.float32(), "string": pa.string(),
    "bytes": pa.binary(), "enum": pa.string(), "open_enum": pa.string(),
}
_SINGULAR = {"required": False, "implicit": False, "optional": True, "sparse": True,
             "oneof": True}
_ZEROS = (0, 0.0, "", b"", False)


class Plan:
    """The columnar decoder of one message type and how its output becomes pyarrow arrays."""

    def __init__(self, c_plan: Any, arrow_type: Any, enum_names: dict[tuple[int, ...], Any]):
        self.c_plan = c_plan
        self.arrow_type = arrow_type
        # path of field indices -> the names (a string array) an enum column's indices pick
        self.enum_names = enum_names
        self._fillers: dict[tuple[int, ...], Any] = {}  # path -> all-null column
        self._filler_rows = -1  # the length of those columns

    def decode(self, values: Any) -> tuple[Any, list[int]]:
        """The struct column of a binary array's values, and the rows left to the row path."""
        if values.type != pa.binary():
            values = values.cast(pa.binary())
        validity, offsets, data = values.buffers()
        tree, bad = self.c_plan.decode(offsets, data if data is not None else b"",
                                       validity, values.offset, len(values))
        return self._array(self.arrow_type, tree, ()), bad

    def _field(self, field: Any, node: tuple[Any, ...], path: tuple[int, ...]) -> Any:
        if len(node) == 1:  # nothing but nulls: a message absent from every row
            # Kept by path for the batch size: looking a large struct type up by its hash (as
            # null_column's cache does) costs more than the rest of a batch of a thousand rows.
            rows = node[0]
            if self._filler_rows != rows:
                self._fillers.clear()
                self._filler_rows = rows
            column = self._fillers.get(path)
            if column is None:
                column = self._fillers[path] = null_column(rows, field.type) if field.nullable \
                    else placeholders(rows, field.type)
            return column
        return self._array(field.type, node, path)

    def _array(self, arrow_type: Any, node: tuple[Any, ...], path: tuple[int, ...]) -> Any:
        length, validity, *buffers = node
        valid = None if validity is None else pa.py_buffer(validity)
        if pa.types.is_struct(arrow_type):
            children = [self._field(f, child, (*path, i))
                        for i, (f, child) in enumerate(zip(arrow_type, buffers[0], strict=True))]
            return pa.Array.from_buffers(arrow_type, length, [valid], children=children)
        if pa.types.is_list(arrow_type):
            items = self._array(arrow_type.value_type, buffers[1], path)
            return pa.Array.from_buffers(arrow_type, length, [None, pa.py_buffer(buffers[0])],
                                         children=[items])
        if pa.types.is_map(arrow_type):
            entry = pa.struct([arrow_type.key_field, arrow_type.item_field])
            entries = self._array(entry, buffers[1], path)
            return pa.Array.from_buffers(arrow_type, length, [None, pa.py_buffer(buffers[0])],
                                         children=[entries])
        names = self.enum_names.get(path)
        if names is not None:
            indices = pa.Array.from_buffers(pa.int32(), length, [valid, pa.py_buffer(buffers[0])])
            return pa.DictionaryArray.from_arrays(indices, names).dictionary_decode()
        return pa.Array.from_buffers(arrow_type, length,
                                     [valid, *(pa.py_buffer(b) for b in buffers)])


_PLANS: dict[Any, Plan | None] = {}


def available() -> bool:
    """Whether the C extension is built and not switched off by PROTOFRAME_PURE_PYTHON."""
    return _columnar is not None and not os.environ.get("PROTOFRAME_PURE_PYTHON")


def plan(codec: RowCodec[Any]) -> Plan | None:
    """The columnar plan of ``codec``'s message type, or None when it takes the row path."""
    if not available():
        return None
    key = (codec.python_type, codec.arrow_type)
    if key not in _PLANS:
        module = sys.modules.get(getattr(codec.arrow_of, "__module__", ""))
        _PLANS[key] = _make_plan(codec.python_type, codec.arrow_type,
                                 vars(module) if module is not None else {})
    return _PLANS[key]


def _make_plan(cls: type, arrow_type: Any, tables: dict[str, Any]) -> Plan | None:
    assert _columnar is not None
    enum_names: dict[tuple[int, ...], Any] = {}
    rows = _message_rows(cls, arrow_type, (), _Tables(tables, enum_names), set())
    if rows is None:
        return None
    return Plan(_columnar.Plan(rows), arrow_type, enum_names)


class _Tables:
    """Where enum names come from, and where the plan's go.

    The generated Spark module holds each enum's names as written in the .proto (members may be
    renamed in Python: ``None_``) in ``_NAMES_<Python path, dots as _>`` (see
    ``generator.spark_emit.SparkContext.enum_key``); an enum without such a table there leaves
    its message to the row path.
    """

    def __init__(self, module: dict[str, Any], out: dict[tuple[int, ...], Any]) -> None:
        self.module = module
        self.out = out

    def names(self, members: dict[int, Any]) -> dict[int, str] | None:
        if not members:
            return None
        enum_type = type(next(iter(members.values())))
        table = self.module.get("_NAMES_" + enum_type.__qualname__.replace(".", "_"))
        if not isinstance(table, dict) or set(table) != set(members):
            return None
        return table


def _message_rows(cls: type, arrow_type: Any, path: tuple[int, ...], tables: _Tables,
                  outer: set[type]) -> tuple[Any, ...] | None:
    """The C plan's rows of ``cls`` in the order of ``arrow_type``'s fields, or None."""
    table = compiled.layout(cls)
    if table is None or cls in outer or not pa.types.is_struct(arrow_type):
        return None
    proto_names = {storage: proto for _, storage, proto in getattr(cls, "FIELD_NAMES", ())}
    by_name = {proto_names.get(row[3]): row for row in table}
    if len(by_name) != len(table) or len(table) != arrow_type.num_fields:
        return None
    out = []
    for index, field in enumerate(arrow_type):
        row = by_name.get(field.name)
        if row is None:
            return None
        one = _field_row(row, field, (*path, index), tables, outer | {cls})
        if one is None:
            return None
        out.append(one)
    return tuple(out)


def _field_row(row: Any, field: Any, path: tuple[int, ...], tables: _Tables,
               outer: set[type]) -> tuple[Any, ...] | None:
    number, kind, mode, _, extra, *aux = row
    value_type = field.type
    if mode == "map":
        return _map_row(row, field, path, tables, outer)
    if mode in ("repeated", "packed"):
        if field.nullable or not pa.types.is_list(value_type) \
                or value_type.value_field.nullable:
            return None
        value_type = value_type.value_type
    elif mode not in _SINGULAR or _SINGULAR[mode] != field.nullable:
        return None
    if mode == "implicit" and kind not in ("enum", "open_enum") \
            and not any(aux[0] == z and type(aux[0]) is type(z) for z in _ZEROS):
        return None
    c_extra: object = None
    if kind == "message" and value_type == pa.binary():
        pass  # a message inside its own type: always null in C; where set, the row path
    elif kind == "message":
        c_extra = _message_rows(extra, value_type, path, tables, outer)
        if c_extra is None:
            return None
    elif kind in ("enum", "open_enum"):
        names = tables.names(extra) if isinstance(extra, dict) else None
        if value_type != pa.string() or names is None:
            return None
        numbers = sorted(names)
        if mode == "implicit":  # the unset value is the default: index 0 of the names
            default = int(aux[0])
            if default not in names:
                return None
            numbers.sort(key=lambda number: number != default)
        tables.out[path] = pa.array([names[n] for n in numbers], pa.string())
        c_extra = tuple(numbers)
    elif _ARROW_OF_KIND.get(kind) != value_type:
        return None
    out = (number, vocabulary.KINDS[kind], vocabulary.MODES[mode], field.nullable, c_extra)
    return (*out, int(aux[0])) if mode == "oneof" else out


def _map_row(row: Any, field: Any, path: tuple[int, ...], tables: _Tables,
             outer: set[type]) -> tuple[Any, ...] | None:
    """A map field: its entries read as messages of a key (implicit) and a value (implicit, or
    required for a message, whose absence the row path fills in)"""
    number, kind, _, _, extra, (key_kind, key_default, value_default) = row
    map_type = field.type
    if field.nullable or not pa.types.is_map(map_type) or map_type.item_field.nullable:
        return None
    value_mode = "required" if kind == "message" else "implicit"
    key = _field_row((1, key_kind, "implicit", "key", None, key_default), map_type.key_field,
                     (*path, 0), tables, outer)
    value = _field_row((2, kind, value_mode, "value", extra, value_default),
                       map_type.item_field, (*path, 1), tables, outer)
    if key is None or value is None:
        return None
    return (number, vocabulary.KINDS[kind], vocabulary.MODES["map"], False, (key, value))


def decode_column(codec: RowCodec[Any], values: Any, errors: Errors = "null") -> Any:
    """The struct column of the protobuf values in binary array ``values`` (null: null row).

    Equal to ``codec.to_arrow([codec.python_type.decode(v) for v in values])``, with a value
    that fails to decode null (``errors="null"``) or its error raised (``errors="raise"``).
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    columnar = plan(codec)
    if columnar is None:
        return row_column(codec, values.to_pylist(), errors)
    column, bad = columnar.decode(values)
    if not bad:
        return column
    fixed = row_column(codec, [values[i].as_py() for i in bad], errors)
    indices = list(range(len(values)))
    for k, i in enumerate(bad):
        indices[i] = len(values) + k
    return pa.concat_arrays([column, fixed]).take(pa.array(indices, pa.int32()))


def row_column(codec: RowCodec[Any], values: Sequence[bytes | None],
               errors: Errors = "null") -> Any:
    """The row path: each value decoded by the generated class, then ``codec.to_arrow``."""
    decode = codec.python_type.decode
    decoded: list[Any] = []
    for data in values:
        if data is None:
            decoded.append(None)
        elif errors == "raise":
            decoded.append(decode(data))
        else:
            try:
                decoded.append(decode(data))
            except Exception:
                decoded.append(None)
    return codec.to_arrow(decoded)
