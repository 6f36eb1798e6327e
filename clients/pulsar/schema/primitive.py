"""The schemas of raw payloads: ``BytesSchema`` (no schema at all) and ``StringSchema``."""

from __future__ import annotations

from protoframe.clients.pulsar.schema.base import Schema
from protoframe.generated.pulsar import pulsar_api as pb

__all__ = ["BytesSchema", "StringSchema"]


class BytesSchema(Schema[bytes]):
    """Payloads as they are: what a producer or consumer without a schema uses. The broker
    is sent no schema, as the official clients send none for bytes."""

    schema_type = pb.Schema.Type.None_

    def encode(self, value: bytes) -> bytes:
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError(f"BytesSchema takes bytes, not {type(value).__name__}")
        return bytes(value)

    def decode(self, data: bytes) -> bytes:
        return data

    def schema_info(self) -> pb.Schema | None:
        return None


class StringSchema(Schema[str]):
    """UTF-8 text."""

    schema_type = pb.Schema.Type.String

    def encode(self, value: str) -> bytes:
        if not isinstance(value, str):
            raise TypeError(f"StringSchema takes str, not {type(value).__name__}")
        return value.encode("utf-8")

    def decode(self, data: bytes) -> str:
        return bytes(data).decode("utf-8")

    def schema_name(self) -> str:
        return "String"
