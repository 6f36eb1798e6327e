"""``AvroSchema``: records in Avro's binary encoding (fastavro), from a dataclass, a generated
message class, or an Avro schema dict (then values are dicts)."""

from __future__ import annotations

import io
import json
from typing import Any, Generic, TypeVar, cast, overload

from protoframe.clients.pulsar.schema.base import Schema
from protoframe.clients.pulsar.schema.records import avro_record, from_plain, to_plain
from protoframe.generated.pulsar import pulsar_api as pb

__all__ = ["AvroSchema"]

R = TypeVar("R")


class AvroSchema(Schema[R], Generic[R]):
    """``AvroSchema(SomeDataclass)`` carries ``SomeDataclass`` values;
    ``AvroSchema(None, schema_definition={...})`` carries dicts of that record schema."""

    schema_type = pb.Schema.Type.Avro

    @overload
    def __init__(self: AvroSchema[dict[str, Any]], record_class: None, *,
                 schema_definition: dict[str, Any]) -> None: ...

    @overload
    def __init__(self, record_class: type[R]) -> None: ...

    def __init__(self, record_class: type[R] | None,
                 schema_definition: dict[str, Any] | None = None) -> None:
        import fastavro  # only Avro users need the library

        self._fastavro = fastavro
        self.record_class = record_class
        if record_class is not None:
            definition = avro_record(record_class)
        elif schema_definition is not None:
            definition = schema_definition
        else:
            raise TypeError("AvroSchema needs a record class or a schema_definition")
        self._definition = definition
        self._parsed = fastavro.parse_schema(definition)

    def encode(self, value: R) -> bytes:
        if self.record_class is not None:
            if not isinstance(value, self.record_class):
                raise TypeError(f"{self!r} takes {self.record_class.__name__}, "
                                f"not {type(value).__name__}")
            plain = to_plain(value, binary=True)
        else:
            plain = value
        out = io.BytesIO()
        self._fastavro.schemaless_writer(out, self._parsed, plain)
        return out.getvalue()

    def decode(self, data: bytes) -> R:
        plain = self._fastavro.schemaless_reader(io.BytesIO(data), self._parsed, None)
        if self.record_class is None:
            return cast(R, plain)
        result: R = from_plain(self.record_class, plain, binary=True)
        return result

    def schema_definition(self) -> bytes:
        return json.dumps(self._definition, separators=(",", ":")).encode()

    def schema_name(self) -> str:
        return str(self._definition.get("name", ""))

    def schema_properties(self) -> dict[str, str]:
        return {"__alwaysAllowNull": "true", "__jsr310ConversionEnabled": "false"}

    def __repr__(self) -> str:
        name = self.record_class.__name__ if self.record_class is not None else \
            self.schema_name()
        return f"AvroSchema({name})"
