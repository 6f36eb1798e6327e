"""Avro record definitions of Python classes, and their values as plain dicts.

JSON and Avro schemas describe a record type the Avro way (Pulsar registers an Avro record
schema for JSON topics too). The classes described are dataclasses and generated protobuf
messages (``FIELD_NAMES`` and annotated slots). Types map as the official Python client's
``Record`` fields do: ``str`` -> string, ``int`` -> long, ``float`` -> double, ``bool`` ->
boolean, ``bytes`` -> bytes, ``list[X]`` -> array, ``dict[str, X]`` -> map, an ``Enum`` ->
enum (by member name), ``X | None`` -> a union with null, and a nested class -> a record.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import types
import typing
from typing import Any

__all__ = ["avro_record", "field_names", "from_plain", "is_record_class", "to_plain"]

_PRIMITIVES: dict[type, str] = {str: "string", int: "long", float: "double", bool: "boolean",
                                bytes: "bytes"}


def is_record_class(cls: object) -> bool:
    """Whether ``cls`` is a dataclass or a generated protobuf message class."""
    return isinstance(cls, type) and (
        dataclasses.is_dataclass(cls) or isinstance(getattr(cls, "FIELD_NAMES", None), tuple))


def field_names(cls: type) -> list[str]:
    """The record's fields in declaration order (attribute names)."""
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls)]
    return [entry[0] for entry in cls.FIELD_NAMES]  # type: ignore[attr-defined]


def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    out: dict[str, Any] = {}
    for name in field_names(cls):
        # A generated message keeps an optional (proto2) field in a "_name" slot.
        hint = hints.get(name, hints.get(f"_{name}"))
        if hint is None:
            raise TypeError(f"{cls.__name__}.{name} has no type annotation")
        out[name] = hint
    return out


def _optional_of(tp: Any) -> Any | None:
    """``X`` for ``X | None``, else None."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0]
    return None


def _avro_type(tp: Any, named: set[str]) -> Any:
    inner = _optional_of(tp)
    if inner is not None:
        return ["null", _avro_type(inner, named)]
    if tp in _PRIMITIVES:
        return _PRIMITIVES[tp]
    origin = typing.get_origin(tp)
    if origin is list:
        return {"type": "array", "items": _avro_type(typing.get_args(tp)[0], named)}
    if origin is dict:
        key, value = typing.get_args(tp)
        if key is not str:
            raise TypeError(f"map keys must be str, not {key!r}")
        return {"type": "map", "values": _avro_type(value, named)}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        if tp.__name__ in named:
            return tp.__name__
        named.add(tp.__name__)
        return {"type": "enum", "name": tp.__name__, "symbols": [m.name for m in tp]}
    if is_record_class(tp):
        if tp.__name__ in named:
            return tp.__name__
        return _record(tp, named)
    raise TypeError(f"no Avro type for {tp!r}")


def _record(cls: type, named: set[str]) -> dict[str, Any]:
    named.add(cls.__name__)
    fields: list[dict[str, Any]] = []
    for name, hint in _field_types(cls).items():
        avro = _avro_type(hint, named)
        entry: dict[str, Any] = {"name": name, "type": avro}
        if isinstance(avro, list):
            entry["default"] = None
        fields.append(entry)
    return {"type": "record", "name": cls.__name__, "fields": fields}


def avro_record(cls: type) -> dict[str, Any]:
    """The Avro record schema of a dataclass or a generated message class."""
    if not is_record_class(cls):
        raise TypeError(f"{cls!r} is neither a dataclass nor a generated message class")
    return _record(cls, set())


def to_plain(value: Any, binary: bool) -> Any:
    """``value`` as dicts, lists and scalars; bytes stay bytes when ``binary`` (Avro), else
    become base64 text (JSON)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value) if binary else base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, list | tuple):
        return [to_plain(v, binary) for v in value]
    if isinstance(value, dict):
        return {str(k): to_plain(v, binary) for k, v in value.items()}
    if is_record_class(type(value)):
        return {name: to_plain(getattr(value, name), binary) for name in field_names(type(value))}
    raise TypeError(f"cannot encode {type(value).__name__} in a record")


def from_plain(tp: Any, value: Any, binary: bool) -> Any:
    """The inverse of ``to_plain`` for a value of declared type ``tp``."""
    inner = _optional_of(tp)
    if inner is not None:
        return None if value is None else from_plain(inner, value, binary)
    if tp is bytes:
        return bytes(value) if binary else base64.b64decode(value)
    if tp is float and isinstance(value, int):
        return float(value)
    if tp in _PRIMITIVES:
        if not isinstance(value, tp):
            raise TypeError(f"expected {tp.__name__}, got {type(value).__name__}")
        return value
    origin = typing.get_origin(tp)
    if origin is list:
        item = typing.get_args(tp)[0]
        return [from_plain(item, v, binary) for v in value]
    if origin is dict:
        item = typing.get_args(tp)[1]
        return {k: from_plain(item, v, binary) for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp[value]
    if is_record_class(tp):
        if not isinstance(value, dict):
            raise TypeError(f"expected a {tp.__name__} record, got {type(value).__name__}")
        kwargs = {name: from_plain(hint, value[name], binary)
                  for name, hint in _field_types(tp).items() if name in value}
        return tp(**kwargs)
    raise TypeError(f"cannot decode a {tp!r}")
