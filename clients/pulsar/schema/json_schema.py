"""``JsonSchema``: records as JSON text, registered as their Avro record definition.

That is what Pulsar's JSON schemas hold (the official clients register the Avro schema of
the record class), so the broker can check the compatibility of two versions.
"""

from __future__ import annotations

import json
from typing import Any, Generic, TypeVar

from protoframe.clients.pulsar.schema.base import Schema
from protoframe.clients.pulsar.schema.records import avro_record, from_plain, to_plain
from protoframe.generated.pulsar import pulsar_api as pb

__all__ = ["JsonSchema"]

R = TypeVar("R")


class JsonSchema(Schema[R], Generic[R]):
    """Values of ``record_class`` (a dataclass or a generated message class) as JSON objects
    keyed by attribute name; bytes fields are base64 text."""

    schema_type = pb.Schema.Type.Json

    def __init__(self, record_class: type[R]) -> None:
        self.record_class = record_class
        self._definition: dict[str, Any] = avro_record(record_class)

    def encode(self, value: R) -> bytes:
        if not isinstance(value, self.record_class):
            raise TypeError(f"{self!r} takes {self.record_class.__name__}, "
                            f"not {type(value).__name__}")
        return json.dumps(to_plain(value, binary=False), separators=(",", ":")).encode()

    def decode(self, data: bytes) -> R:
        result: R = from_plain(self.record_class, json.loads(data), binary=False)
        return result

    def schema_definition(self) -> bytes:
        return json.dumps(self._definition, separators=(",", ":")).encode()

    def schema_name(self) -> str:
        return self.record_class.__name__

    def schema_properties(self) -> dict[str, str]:
        # The keys the official Java client sends with a JSON/Avro schema.
        return {"__alwaysAllowNull": "true", "__jsr310ConversionEnabled": "false"}

    def __repr__(self) -> str:
        return f"JsonSchema({self.record_class.__name__})"
