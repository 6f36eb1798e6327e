"""``ProtobufNativeSchema``: generated message classes, registered with their descriptors.

Pulsar's PROTOBUF_NATIVE schema definition is a JSON object with the base64
``FileDescriptorSet`` of the message's file and its imports, the root message's full name and
the root file's name. The generated module carries the set (``FILE_DESCRIPTOR_SET``, written
by the generator), so the class alone is enough.
"""

from __future__ import annotations

import json
import sys
from typing import ClassVar, Generic, Protocol, Self, TypeVar

from protoframe.clients.pulsar.schema.base import Schema
from protoframe.generated.pulsar import pulsar_api as pb

__all__ = ["GeneratedMessage", "ProtobufNativeSchema", "descriptor_set_of"]


class GeneratedMessage(Protocol):
    """What a generated protobuf message class offers a schema."""

    FULL_NAME: ClassVar[str]

    def encode(self) -> bytes: ...

    @classmethod
    def decode(cls, data: bytes) -> Self: ...


M = TypeVar("M", bound=GeneratedMessage)


def descriptor_set_of(message_class: type[GeneratedMessage]) -> tuple[str, str]:
    """The base64 ``FileDescriptorSet`` of the class's .proto file, and that file's name."""
    module = sys.modules.get(message_class.__module__)
    pieces = getattr(module, "FILE_DESCRIPTOR_SET", None)
    name = getattr(module, "PROTO_FILE", None)
    if not isinstance(pieces, tuple) or not isinstance(name, str):
        raise TypeError(f"{message_class.__qualname__} is not a generated message class "
                        "(its module has no FILE_DESCRIPTOR_SET: regenerate it)")
    return "".join(pieces), name


class ProtobufNativeSchema(Schema[M], Generic[M]):
    """Values of a generated message class, as protobuf bytes."""

    schema_type = pb.Schema.Type.ProtobufNative

    def __init__(self, record_class: type[M]) -> None:
        self.record_class = record_class
        descriptors, file = descriptor_set_of(record_class)
        self._definition = json.dumps({
            "fileDescriptorSet": descriptors,
            "rootMessageTypeName": record_class.FULL_NAME,
            "rootFileDescriptorName": file,
        }, separators=(",", ":")).encode()

    def encode(self, value: M) -> bytes:
        if not isinstance(value, self.record_class):
            raise TypeError(f"{self!r} takes {self.record_class.__name__}, "
                            f"not {type(value).__name__}")
        return value.encode()

    def decode(self, data: bytes) -> M:
        return self.record_class.decode(data)

    def schema_definition(self) -> bytes:
        return self._definition

    def schema_name(self) -> str:
        return self.record_class.FULL_NAME

    def __repr__(self) -> str:
        return f"ProtobufNativeSchema({self.record_class.__name__})"
