"""``Schema``: how values of one type become message payloads, and what the broker registers.

A schema is the official client's ``Schema``: ``encode``/``decode`` turn values into payload
bytes and back, and ``schema_info()`` is the ``Schema`` (name, type, definition, properties)
sent in PRODUCER and SUBSCRIBE, which the broker checks against the topic's schema.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic, TypeVar

# typing's TypeVar takes a default only from Python 3.13.
from typing_extensions import TypeVar as DefaultingTypeVar

from protoframe.generated.pulsar import pulsar_api as pb

__all__ = ["Schema", "SchemaType", "ValueT"]

SchemaType = pb.Schema.Type
T = TypeVar("T")
# A producer, consumer or message without a schema carries bytes: the bare ``Producer`` is
# ``Producer[bytes]`` (PEP 696).
ValueT = DefaultingTypeVar("ValueT", default=bytes)


class Schema(ABC, Generic[T]):
    """The values of type ``T`` and their payloads."""

    schema_type: pb.Schema.Type = pb.Schema.Type.None_

    @abstractmethod
    def encode(self, value: T) -> bytes:
        """The payload of ``value``."""

    @abstractmethod
    def decode(self, data: bytes) -> T:
        """The value a payload holds."""

    def decode_versioned(self, data: bytes, schema_version: bytes) -> T:
        """The value of a payload written under ``schema_version`` (this schema's own, unless
        the schema reads several versions, as ``AutoConsumeSchema`` does)."""
        return self.decode(data)

    def schema_definition(self) -> bytes:
        """The schema's definition as the registry stores it (empty for primitive types)."""
        return b""

    def schema_name(self) -> str:
        return ""

    def schema_properties(self) -> dict[str, str]:
        return {}

    def schema_info(self) -> pb.Schema | None:
        """The ``Schema`` sent to the broker; None where no schema is registered (bytes)."""
        return pb.Schema(
            name=self.schema_name(), schema_data=self.schema_definition(),
            type_=self.schema_type,
            properties=[pb.KeyValue(key=k, value=v)
                        for k, v in sorted(self.schema_properties().items())] or None)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

