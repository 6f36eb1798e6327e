"""Schemas: typed message values, and the schema information the broker registers.

``create_producer(topic, schema=JsonSchema(Order))`` gives a ``Producer[Order]``;
``subscribe(..., schema=...)`` a ``Consumer[Order]`` whose messages' ``value()`` is an
``Order``. See docs/pulsar-client.md ("Schemas").
"""

from protoframe.clients.pulsar.schema.auto import AutoConsumeSchema
from protoframe.clients.pulsar.schema.avro import AvroSchema
from protoframe.clients.pulsar.schema.base import Schema, SchemaType
from protoframe.clients.pulsar.schema.json_schema import JsonSchema
from protoframe.clients.pulsar.schema.primitive import BytesSchema, StringSchema
from protoframe.clients.pulsar.schema.protobuf_native import (
    GeneratedMessage,
    ProtobufNativeSchema,
)

__all__ = ["AutoConsumeSchema", "AvroSchema", "BytesSchema", "GeneratedMessage", "JsonSchema",
           "ProtobufNativeSchema", "Schema", "SchemaType", "StringSchema"]
