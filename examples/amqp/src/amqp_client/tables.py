"""Field tables as Python values: the generated classes hold a table as typed entries
(``FieldTable(entries=[FieldEntry(name, FieldValue(LongStringValue(...)))])``); these helpers
turn a ``dict`` into one and back. They only choose and read the generated value classes; the
bytes are the generated codecs' business."""

from __future__ import annotations

from decimal import Decimal
from typing import TypeAlias

from amqp_client.proto.amqp import frames as f

Scalar: TypeAlias = bool | int | float | Decimal | str | bytes | None
Value: TypeAlias = Scalar | list["Value"] | dict[str, "Value"]
Table: TypeAlias = f.FieldTable | f.FieldTable1 | f.FieldTable2
AnyValue: TypeAlias = f.FieldValue | f.FieldValue1 | f.FieldValue2
Leaf: TypeAlias = (f.VoidValue | f.BoolValue | f.I32Value | f.I64Value | f.F64Value
                   | f.DecimalValue | f.LongStringValue | f.ByteArrayValue)


def _scalar(value: Value) -> Leaf:
    if value is None:
        return f.VoidValue()
    if isinstance(value, bool):
        return f.BoolValue(value=value)
    if isinstance(value, int):
        if -(1 << 31) <= value < (1 << 31):
            return f.I32Value(value=value)
        return f.I64Value(value=value)
    if isinstance(value, float):
        return f.F64Value(value=value)
    if isinstance(value, Decimal):
        sign, digits, exponent = value.as_tuple()
        assert isinstance(exponent, int)
        number = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
        return f.DecimalValue(scale=max(0, -exponent), value=number * 10 ** max(0, exponent))
    if isinstance(value, str):
        return f.LongStringValue(value=value.encode())
    if isinstance(value, bytes):
        return f.ByteArrayValue(value=value)
    raise TypeError(f"no field value for {value!r}")


def _value0(value: Value) -> f.FieldValue:
    if isinstance(value, dict):
        return f.FieldValue(value=f.TableValue1(value=f.FieldTable1(entries=[
            f.FieldEntry1(name=k, value=_value1(v)) for k, v in value.items()])))
    if isinstance(value, list):
        return f.FieldValue(value=f.ArrayValue1(value=f.FieldArray1(
            items=[_value1(v) for v in value])))
    return f.FieldValue(value=_scalar(value))


def _value1(value: Value) -> f.FieldValue1:
    if isinstance(value, dict):
        return f.FieldValue1(value=f.TableValue2(value=f.FieldTable2(entries=[
            f.FieldEntry2(name=k, value=_value2(v)) for k, v in value.items()])))
    if isinstance(value, list):
        return f.FieldValue1(value=f.ArrayValue2(value=f.FieldArray2(
            items=[_value2(v) for v in value])))
    return f.FieldValue1(value=_scalar(value))


def _value2(value: Value) -> f.FieldValue2:
    if isinstance(value, (list, dict)):
        raise ValueError("field tables and arrays nest three levels deep at most here")
    return f.FieldValue2(value=_scalar(value))


def to_table(values: dict[str, Value]) -> f.FieldTable:
    """A field table of ``values``: str as a long string, int as 'I' (or 'l'), float as 'd',
    Decimal as 'D', bytes as 'x', None as 'V', dict and list as a nested table and array."""
    return f.FieldTable(entries=[f.FieldEntry(name=k, value=_value0(v))
                                 for k, v in values.items()])


def _read(value: AnyValue) -> Value:
    inner = value.value
    if isinstance(inner, (f.TableValue1, f.TableValue2)):
        return from_table(inner.value)
    if isinstance(inner, (f.ArrayValue1, f.ArrayValue2)):
        return [_read(item) for item in inner.value.items]
    if isinstance(inner, f.VoidValue):
        return None
    if isinstance(inner, f.DecimalValue):
        return Decimal(inner.value).scaleb(-inner.scale)
    if isinstance(inner, f.LongStringValue):
        try:
            return inner.value.decode()
        except UnicodeDecodeError:
            return inner.value
    return inner.value


def from_table(table: Table) -> dict[str, Value]:
    """The table's entries as a dict (a long string as str when it is UTF-8)."""
    return {entry.name: _read(entry.value) for entry in table.entries}
