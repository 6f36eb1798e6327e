"""``AutoConsumeSchema``: read a topic whatever its schema, decoding by each message's version.

The consumer asks the broker for the schema of every version it meets (GET_SCHEMA, once per
version) before it hands the message over, and decodes JSON and Avro payloads to dicts,
ProtobufNative ones to dicts of their fields (proto field names), strings to ``str``, and
anything else to bytes.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Awaitable, Callable
from typing import Any

from protoframe.clients.pulsar.schema.base import Schema
from protoframe.generated.pulsar import pulsar_api as pb

__all__ = ["AutoConsumeSchema", "decoder_for"]

Decoder = Callable[[bytes], Any]
SchemaFetcher = Callable[[bytes | None], Awaitable[pb.Schema | None]]


def _json(data: bytes) -> Any:
    return json.loads(data)


def _avro_decoder(definition: bytes) -> Decoder:
    import fastavro

    parsed = fastavro.parse_schema(json.loads(definition))
    return lambda data: fastavro.schemaless_reader(io.BytesIO(data), parsed, None)


def _protobuf_decoder(definition: bytes) -> Decoder:
    # google.protobuf comes with grpcio-tools; it builds a message class from descriptors
    # that this program has never seen.
    from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

    spec = json.loads(definition)
    fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(spec["fileDescriptorSet"]))
    pool = descriptor_pool.DescriptorPool()
    for file in fds.file:
        pool.Add(file)
    cls = message_factory.GetMessageClass(
        pool.FindMessageTypeByName(spec["rootMessageTypeName"]))

    def decode(data: bytes) -> Any:
        return json_format.MessageToDict(cls.FromString(data), preserving_proto_field_name=True)

    return decode


def decoder_for(info: pb.Schema | None) -> Decoder:
    """How to decode payloads written under the schema ``info`` (None: no schema)."""
    kind = info.type_ if info is not None else pb.Schema.Type.None_
    if info is None or kind is pb.Schema.Type.None_:
        return bytes
    if kind is pb.Schema.Type.String:
        return lambda data: bytes(data).decode("utf-8")
    if kind is pb.Schema.Type.Json:
        return _json
    if kind is pb.Schema.Type.Avro:
        return _avro_decoder(info.schema_data)
    if kind is pb.Schema.Type.ProtobufNative:
        return _protobuf_decoder(info.schema_data)
    return bytes


class AutoConsumeSchema(Schema[Any]):
    """The official client's ``AUTO_CONSUME``: values decoded by the topic's registered
    schemas (see the module docstring). Subscribing registers nothing."""

    schema_type = pb.Schema.Type.AutoConsume

    def __init__(self) -> None:
        self._decoders: dict[bytes, Decoder] = {}
        self._fetch: SchemaFetcher | None = None

    def bind(self, fetch: SchemaFetcher) -> None:
        """Set how schemas are fetched (the consumer does, when it subscribes)."""
        self._fetch = fetch

    async def prepare(self, schema_version: bytes) -> None:
        """Fetch the schema of ``schema_version`` unless already known."""
        if schema_version in self._decoders:
            return
        if self._fetch is None:
            raise RuntimeError("AutoConsumeSchema is not bound to a consumer")
        self._decoders[schema_version] = decoder_for(await self._fetch(schema_version or None))

    def encode(self, value: Any) -> bytes:
        raise TypeError("AutoConsumeSchema only decodes (it is for consumers)")

    def decode(self, data: bytes) -> Any:
        return self.decode_versioned(data, b"")

    def decode_versioned(self, data: bytes, schema_version: bytes) -> Any:
        decoder = self._decoders.get(schema_version)
        if decoder is None:
            raise LookupError(f"schema version {schema_version.hex() or '(none)'} not fetched")
        return decoder(data)

    def schema_info(self) -> pb.Schema | None:
        return None
