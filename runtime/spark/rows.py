"""Helpers for the generated Spark modules (``generated/<protocol>/spark.py``).

The generated modules hold one straight-line function per type and direction (value -> row,
row -> value, values -> Arrow column); this module holds what they share: the ``RowCodec``
that bundles a type's schemas and conversions, exact uint64 <-> decimal conversion, enum name
lookup (unknown numbers included) and the small Arrow builders for nulls, lists and maps.

Conventions every generated module follows (the type mapping itself is documented in each
generated module and in README.md):

* A row is a ``dict`` from field name (as written in the spec) to value, in schema order. Rows
  coming back are accepted as dicts or ``pyspark.sql.Row`` objects, nested either way.
* Every generated message and frame class is truthy: none defines ``__bool__`` or ``__len__``.
  ``present`` relies on it to check a column for None with one ``all()`` or ``any()``.

Nothing here imports ``generated``; this module imports pyarrow and pyspark, so only the
generated ``spark`` modules (and code that uses Spark) import it.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass
from itertools import accumulate, count
from typing import Any, Generic, NoReturn, Protocol, TypeVar, cast

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Row
from pyspark.sql.types import StructType

from protoframe.runtime.codec.protowire import int32_bytes, read_varint, skip_field, to_int32

T = TypeVar("T")
E = TypeVar("E", bound=enum.IntEnum)

UINT64_MAX = 2**64 - 1
DECIMAL_20 = pa.decimal128(20, 0)  # the Arrow type of uint64 values (Spark DecimalType(20, 0))
_NUMBER = re.compile(r"-?[0-9]+")


class RowLike(Protocol):
    """What ``from_row`` reads: a ``dict`` or a ``pyspark.sql.Row``, indexed by field name."""

    def __getitem__(self, key: str, /) -> Any: ...


class RowError(ValueError):
    """A row does not hold a valid value of its type (a null required field, a bad enum name)."""


@dataclass(frozen=True, slots=True)
class RowCodec(Generic[T]):
    """The Spark schema, the equivalent Arrow schema and the conversions of one generated type.

    ``to_row``/``from_row`` convert one value; ``to_record_batch``/``from_record_batch``
    convert many at once through Arrow columns, the form ``mapInArrow`` and
    ``createDataFrame(pyarrow.Table)`` exchange with Spark.
    """

    name: str  # protobuf full name, or the frame struct's name
    python_type: type[T]
    spark_schema: StructType
    arrow_type: Any  # pyarrow.StructType with the same fields as spark_schema
    row_of: Callable[[T], dict[str, Any]]
    value_of: Callable[[RowLike], T]
    arrow_of: Callable[[Sequence[T | None]], Any]  # values (None: null) -> pyarrow.StructArray

    @property
    def arrow_schema(self) -> Any:
        """The ``pyarrow.Schema`` of a record batch of this type (one column per field)."""
        return pa.schema(list(self.arrow_type))

    def to_row(self, value: T) -> dict[str, Any]:
        """The row of ``value``: a dict from field name to row value, in schema order."""
        return self.row_of(value)

    def from_row(self, row: RowLike) -> T:
        """The value a row holds (a dict from ``to_row`` or a Row Spark returned).

        Raises ``RowError`` for a row that holds no valid value (a null required field, an
        enum name the type does not have, a number out of range).
        """
        try:
            return self.value_of(row)
        except RowError as exc:
            raise RowError(f"{self.name}: {exc}") from None

    def to_rows(self, values: Iterable[T]) -> list[dict[str, Any]]:
        """``to_row`` of each value, for ``SparkSession.createDataFrame(rows, spark_schema)``."""
        row_of = self.row_of
        return [row_of(v) for v in values]

    def from_rows(self, rows: Iterable[RowLike]) -> list[T]:
        """``from_row`` of each row, e.g. of ``DataFrame.collect()``."""
        value_of = self.value_of
        return [value_of(r) for r in rows]

    def to_arrow(self, values: Sequence[T | None]) -> Any:
        """A ``pyarrow.StructArray`` column of ``values``; None entries become null."""
        return self.arrow_of(values)

    def to_record_batch(self, values: Sequence[T]) -> Any:
        """A ``pyarrow.RecordBatch`` with one row per value and ``arrow_schema``."""
        return pa.RecordBatch.from_struct_array(self.arrow_of(values))

    def from_record_batch(self, batch: Any) -> list[T]:
        """The values of a ``pyarrow.RecordBatch`` (or ``Table``) with ``arrow_schema``."""
        value_of = self.value_of
        if batch.num_columns == 0:  # a message without fields: nothing to read per row
            return [value_of({}) for _ in range(batch.num_rows)]
        return [value_of(r) for r in batch.to_pylist()]

    def from_arrow(self, array: Any) -> list[T | None]:
        """The values of a ``pyarrow.StructArray`` column; null entries become None."""
        value_of = self.value_of
        return [None if r is None else value_of(r) for r in array.to_pylist()]


# --- rows -> values ---------------------------------------------------------------------------


def as_mapping(row: RowLike) -> Mapping[str, Any]:
    """A row as a mapping: dicts as they are, a ``Row`` through ``asDict`` (one level)."""
    if isinstance(row, dict):
        return row
    if isinstance(row, Row):
        # Annotated so that it type-checks the same without pyspark installed (Row is then Any).
        mapping: dict[str, Any] = row.asDict()
        return mapping
    raise RowError(f"expected a dict or a pyspark Row, got {type(row).__name__}")


def required(value: T | None, where: str) -> T:
    """``value``, which is a required field's: null is an error."""
    if value is None:
        raise RowError(f"{where} is required but the row holds null")
    return value


def uint64_value(value: Any, where: str) -> int:
    """An unsigned 64-bit integer from its row form (a ``Decimal`` or an ``int``)."""
    if value is None:
        raise RowError(f"{where} is required but the row holds null")
    number = int(value)
    if number != value or not 0 <= number <= UINT64_MAX:
        raise RowError(f"{where}: {value!r} is not an unsigned 64-bit integer")
    return number


def binary_value(value: Any) -> bytes:
    """Bytes from their row form (``bytes``, or ``bytearray`` from older Spark versions)."""
    return value if type(value) is bytes else bytes(value)


def map_items(value: Any) -> Iterable[tuple[Any, Any]]:
    """The entries of a map in row form: a dict, or the (key, value) pairs Arrow returns."""
    if value is None:
        return ()
    if isinstance(value, dict):
        return value.items()
    return [(k, v) for k, v in value]


def _parse_number(text: str, enum_type: type[enum.IntEnum], where: str) -> int:
    if not _NUMBER.fullmatch(text):
        raise RowError(f"{where}: {text!r} is neither a member of {enum_type.__qualname__} "
                       "nor a number")
    number = int(text)
    if not -(2**31) <= number < 2**31:
        raise RowError(f"{where}: enum number {number} does not fit in 32 bits")
    return number


def _member(text: str, numbers: Mapping[str, int], enum_type: type[E],
            where: str) -> E | int:
    number = numbers.get(text)
    if number is None:
        number = _parse_number(text, enum_type, where)
    try:
        return enum_type(number)
    except ValueError:
        return number


def enum_value(text: str, numbers: Mapping[str, int], enum_type: type[E],
               where: str) -> E | int:
    """The value of an open enum's row form: a member by name, else the number written out.

    ``numbers`` maps each member's name (as in the spec) to its number.
    """
    return _member(text, numbers, enum_type, where)


def closed_enum(text: str | None, numbers: Mapping[str, int], enum_type: type[E], tag: bytes,
                unknown: bytearray, where: str) -> E | None:
    """The value of a singular closed enum's row form, or None.

    A number that is not a member goes where the decoder puts it, the unknown fields
    (``tag`` + the number appended to ``unknown``), so it is written back on encode.
    """
    if text is None:
        return None
    value = _member(text, numbers, enum_type, where)
    if isinstance(value, enum_type):
        return value
    unknown += tag
    unknown += int32_bytes(value)
    return None


def closed_enums(texts: Iterable[str] | None, numbers: Mapping[str, int], enum_type: type[E],
                 tag: bytes, unknown: bytearray, where: str) -> list[E]:
    """A repeated closed enum's values; unknown numbers go to ``unknown`` (see closed_enum)."""
    out: list[E] = []
    for text in texts or ():
        value = closed_enum(text, numbers, enum_type, tag, unknown, where)
        if value is not None:
            out.append(value)
    return out


def required_enum(value: E | None, where: str) -> E:
    """A required closed enum's value: null, or a number the enum does not declare, is an error."""
    if value is None:
        raise RowError(f"{where} is required but the row holds null or an unknown number")
    return value


def no_alternative(where: str) -> NoReturn:
    """Raise for a union row (a switch field) with none of its alternatives set."""
    raise RowError(f"{where}: none of the alternatives is set")


# --- values -> rows ---------------------------------------------------------------------------


def enum_name(names: Mapping[int, str], value: int) -> str:
    """The row form of an open enum value: its name, or an unknown number in decimal."""
    name = names.get(value)
    return name if name is not None else str(int(value))


def unknown_varints(unknown: bytes, number: int) -> list[int]:
    """The varint values of field ``number`` among unknown fields, as int32 (enum numbers)."""
    out: list[int] = []
    pos, end = 0, len(unknown)
    while pos < end:
        tag, pos = read_varint(unknown, pos)
        if tag == number << 3:
            value, pos = read_varint(unknown, pos)
            out.append(to_int32(value))
        else:
            pos = skip_field(unknown, pos, end, tag)
    return out


def unknown_enum(unknown: bytes, number: int) -> str | None:
    """A singular closed enum's unknown number (kept among unknown fields) in decimal, or None.

    The decoder of a closed (proto2) enum moves a number the enum does not declare to the
    unknown fields and leaves the field unset; the row shows it instead of hiding it. As for a
    known value, the last occurrence wins.
    """
    if not unknown:
        return None
    values = unknown_varints(unknown, number)
    return str(values[-1]) if values else None


def unknown_enums(unknown: bytes, number: int) -> list[str]:
    """A repeated closed enum's unknown numbers in decimal (they follow the known values)."""
    if not unknown:
        return []
    return [str(v) for v in unknown_varints(unknown, number)]


# --- values -> Arrow columns ------------------------------------------------------------------


def present(values: Sequence[T | None]) -> tuple[list[T], Any]:
    """The non-None values, and the ``take`` indices that spread them back (None if all are).

    Builders compute child columns over the present values only; ``StructArray.take`` with
    these indices (null where the value was None) restores the original rows.
    """
    if all(values):  # no None (generated values are truthy): the common case, kept cheap
        return cast("list[T]", values if type(values) is list else list(values)), None
    if not any(values):
        return [], None
    rows = [v for v in values if v is not None]
    counter = count()
    return rows, pa.array([None if v is None else next(counter) for v in values], pa.int32())


def list_offsets(lists: Sequence[Sized | None]) -> Any:
    """The int32 offsets of a list (or map) column whose rows hold ``lists`` (None: empty)."""
    try:
        lengths: Iterable[int] = map(len, cast("Sequence[Sized]", lists))
        return pa.array([0, *accumulate(lengths)], pa.int32())
    except TypeError:  # a None among them (a conditional frame array that is absent)
        return pa.array([0, *accumulate(0 if x is None else len(x) for x in lists)],
                        pa.int32())


def _list_of(arrow_type: Any) -> Any:
    """Arrow's list type as Spark writes ``ArrayType(t, containsNull=False)``."""
    return pa.list_(pa.field("element", arrow_type, nullable=False))


_STRING_LIST = _list_of(pa.string())
_BINARY_LIST = _list_of(pa.binary())
_UINT64_LIST = _list_of(pa.uint64())


def uint64_array(values: Sequence[Any], arrow_type: Any) -> Any:
    """A column of uint64 values (or lists of them) as ``decimal128(20, 0)`` (or lists of it).

    Building a uint64 array and casting is several times faster than converting each int to
    a decimal; both are exact. ``arrow_type`` is the decimal (or list of decimal) type.
    """
    source = pa.uint64() if arrow_type == DECIMAL_20 else _UINT64_LIST
    return pa.array(values, source).cast(arrow_type)


def enum_array(values: Sequence[int | None], names: Mapping[int, str],
               unknown: Sequence[bytes | None] | None = None, number: int = 0) -> Any:
    """A string column of enum names; numbers without a name are written out in decimal.

    With ``unknown`` (each row's unknown fields) a None value shows the closed enum's unknown
    number kept there for field ``number``, as ``unknown_enum`` does for one row.
    """
    if unknown is None:
        try:  # the common case: every value set and declared (None raises KeyError too)
            return pa.array([names[cast(int, v)] for v in values], pa.string())
        except KeyError:
            pass
    out: list[str | None] = []
    append = out.append
    if unknown is None:
        for v in values:
            append(None if v is None else names[v] if v in names else str(int(v)))
    else:
        for v, u in zip(values, unknown, strict=True):
            if v is None:
                append(unknown_enum(u, number) if u else None)  # u: bytes, or None (unset)
            else:
                append(names[v] if v in names else str(int(v)))
    return pa.array(out, pa.string())


def enum_lists_array(lists: Sequence[Sequence[int]], names: Mapping[int, str],
                     unknown: Sequence[bytes | None] | None = None, number: int = 0) -> Any:
    """A list-of-string column of enum names (see ``enum_array``); unknown numbers follow."""
    out = [[names[v] if v in names else str(int(v)) for v in values] for values in lists]
    if unknown is not None:
        for row, u in zip(out, unknown, strict=True):
            if u:
                row += unknown_enums(u, number)
    return pa.array(out, _STRING_LIST)


class _Encodable(Protocol):
    def encode(self) -> bytes: ...


def encoded_array(values: Sequence[_Encodable | None]) -> Any:
    """A binary column of protobuf encodings (fields of a message inside its own type)."""
    return pa.array([None if v is None else v.encode() for v in values], pa.binary())


def encoded_lists_array(lists: Sequence[Sequence[_Encodable]]) -> Any:
    """A list-of-binary column of protobuf encodings."""
    return pa.array([[v.encode() for v in values] for values in lists], _BINARY_LIST)


def text_array(values: Sequence[object | None]) -> Any:
    """A string column of ``str(value)`` (UUIDs in their canonical form)."""
    return pa.array([None if v is None else str(v) for v in values], pa.string())


def text_lists_array(lists: Sequence[Sequence[object] | None]) -> Any:
    """A list-of-string column of ``str(value)``; a None list is null (conditional arrays)."""
    return pa.array([None if values is None else [str(v) for v in values] for values in lists],
                    _STRING_LIST)


def list_array(lists: Sequence[Sequence[T] | None], build: Callable[[list[T]], Any],
               arrow_type: Any) -> Any:
    """A list column whose items (messages or structs) ``build`` turns into one column.

    A None list is null (a conditional frame array that is absent).
    """
    items = [v for values in lists if values is not None for v in values]
    mask = None
    if any(values is None for values in lists):
        mask = pa.array([values is None for values in lists], pa.bool_())
    return pa.ListArray.from_arrays(list_offsets(lists), build(items), type=arrow_type,
                                    mask=mask)


def map_entries(maps: Sequence[Mapping[Any, Any]]) -> tuple[list[Any], list[Any]]:
    """The keys and the values of every map, in row order (for ``pa.MapArray``)."""
    return [k for m in maps for k in m], [v for m in maps for v in m.values()]


def struct_array(arrays: list[Any], fields: list[Any], rows: int, take: Any) -> Any:
    """A struct column from child columns over the present rows, spread back by ``take``.

    Null rows get a copy of the first row under them, masked: Arrow (and the casts pyspark
    applies to Arrow tables) rejects nulls in a non-nullable field even below a null struct.
    """
    if not fields:  # no fields: only the row count and the nulls carry information
        out = pa.array([{}] * rows, pa.struct([]))
        return out if take is None else out.take(take)
    out = pa.StructArray.from_arrays(arrays, fields=fields)
    if take is None:
        return out
    filled = out.take(pc.fill_null(take, 0))
    return pa.StructArray.from_arrays(filled.flatten(), fields=fields, mask=take.is_null())


_ZEROS: dict[str, object] = {"string": "", "binary": b"", "bool": False}


_NULL_CACHE: dict[int, dict[Any, Any]] = {}  # rows -> arrow type -> null column
_NULL_CACHE_SIZES = 4  # row counts kept; batches mostly share one (maxRecordsPerBatch)


def null_column(rows: int, arrow_type: Any) -> Any:
    """A column of ``rows`` nulls of ``arrow_type``.

    Below a null struct, non-nullable fields hold placeholders (zero, empty) rather than
    nulls, for the reason given in ``struct_array``. Arrays are immutable, so struct columns
    are built once per row count and type and then shared: a batch of Pulsar commands needs
    some seventy all-null command structs, each with its whole subtree.
    """
    if not pa.types.is_struct(arrow_type) or arrow_type.num_fields == 0:
        return pa.nulls(rows, arrow_type)
    by_type = _NULL_CACHE.get(rows)
    if by_type is None:
        if len(_NULL_CACHE) >= _NULL_CACHE_SIZES:
            _NULL_CACHE.pop(next(iter(_NULL_CACHE)))
        by_type = _NULL_CACHE[rows] = {}
    column = by_type.get(arrow_type)
    if column is None:
        children = [null_column(rows, f.type) if f.nullable else placeholders(rows, f.type)
                    for f in arrow_type]
        column = by_type[arrow_type] = pa.StructArray.from_arrays(
            children, fields=list(arrow_type), mask=pa.repeat(pa.scalar(True), rows))
    return column


def placeholders(rows: int, arrow_type: Any) -> Any:
    """``rows`` valid values of ``arrow_type`` that stand for nothing (zero, empty)."""
    if pa.types.is_struct(arrow_type):
        if arrow_type.num_fields == 0:
            return pa.array([{}] * rows, arrow_type)
        children = [null_column(rows, f.type) if f.nullable else placeholders(rows, f.type)
                    for f in arrow_type]
        return pa.StructArray.from_arrays(children, fields=list(arrow_type))
    if pa.types.is_list(arrow_type) or pa.types.is_map(arrow_type):
        return pa.array([[]] * rows, arrow_type)
    zero = _ZEROS.get(str(arrow_type), 0)
    return pa.repeat(pa.scalar(zero, arrow_type), rows)
