"""Typed schemas: values through our producer and consumer on both brokers, the schema the
broker registers, its versions on messages, and its refusal of an incompatible schema."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from google.protobuf import descriptor_pb2

from protoframe.clients.pulsar import PulsarClient
from protoframe.clients.pulsar.broker import BrokerThread
from protoframe.clients.pulsar.errors import IncompatibleSchema
from protoframe.clients.pulsar.schema import (
    AutoConsumeSchema,
    AvroSchema,
    BytesSchema,
    JsonSchema,
    ProtobufNativeSchema,
    Schema,
    StringSchema,
)
from protoframe.clients.pulsar.sync import Client
from protoframe.generated.demo.events import OrderPlaced
from tests.clients.pulsar.scenarios import Broker, Target


@dataclass
class Reading:
    sensor: str
    value: float
    tags: list[str] = field(default_factory=list)
    note: str | None = None


def order(i: int) -> OrderPlaced:
    return OrderPlaced(order_id=f"o-{i:06d}", customer=f"c{i % 3}", amount_cents=1250 * i + 1,
                       currency="EUR", items=[f"sku-{i}", "sku-x"], placed_at_ms=1_700_000 + i)


def reading(i: int) -> Reading:
    return Reading(sensor=f"s{i}", value=i + 0.5, tags=["a", str(i)],
                   note=None if i % 2 else f"n{i}")


CASES: dict[str, tuple[Any, Any]] = {
    "string": (StringSchema, lambda i: f"héllo {i}"),
    "bytes": (BytesSchema, lambda i: f"b{i}".encode()),
    "json-generated": (lambda: JsonSchema(OrderPlaced), order),
    "json-dataclass": (lambda: JsonSchema(Reading), reading),
    "protobuf-native": (lambda: ProtobufNativeSchema(OrderPlaced), order),
    "avro-dataclass": (lambda: AvroSchema(Reading), reading),
    "avro-generated": (lambda: AvroSchema(OrderPlaced), order),
}


# ---- without a broker ---------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_schema_encodes_and_decodes(case: str) -> None:
    make, value = CASES[case]
    schema: Schema[Any] = make()
    for i in range(3):
        assert schema.decode(schema.encode(value(i))) == value(i)


def test_protobuf_native_schema_carries_the_generated_descriptors() -> None:
    info = ProtobufNativeSchema(OrderPlaced).schema_info()
    assert info is not None and info.type_ is info.Type.ProtobufNative
    spec = json.loads(info.schema_data)
    assert spec["rootMessageTypeName"] == "demo.events.OrderPlaced"
    assert spec["rootFileDescriptorName"] == "events.proto"
    fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(spec["fileDescriptorSet"]))
    [file] = fds.file
    assert file.name == "events.proto" and file.package == "demo.events"
    fields = {f.name: f.number for f in file.message_type[0].field}
    assert fields == {"order_id": 1, "customer": 2, "amount_cents": 3, "currency": 4,
                      "items": 5, "placed_at_ms": 6}
    # What the registry would decode with: a protobuf class built from those descriptors
    # reads our generated class's bytes.
    from google.protobuf import descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("demo.events.OrderPlaced"))
    parsed = cls.FromString(order(7).encode())
    assert (parsed.order_id, parsed.amount_cents, list(parsed.items)) == \
        ("o-000007", 1250 * 7 + 1, ["sku-7", "sku-x"])


def test_json_and_avro_register_an_avro_record() -> None:
    for schema in (JsonSchema(Reading), AvroSchema(Reading)):
        info = schema.schema_info()
        assert info is not None
        assert json.loads(info.schema_data) == {
            "type": "record", "name": "Reading", "fields": [
                {"name": "sensor", "type": "string"},
                {"name": "value", "type": "double"},
                {"name": "tags", "type": {"type": "array", "items": "string"}},
                {"name": "note", "type": ["null", "string"], "default": None}]}
    assert json.loads(JsonSchema(Reading).encode(reading(2))) == \
        {"sensor": "s2", "value": 2.5, "tags": ["a", "2"], "note": "n2"}


def test_schemas_refuse_values_of_another_type() -> None:
    bad: Any = "text"
    for schema in (JsonSchema(OrderPlaced), ProtobufNativeSchema(OrderPlaced),
                   AvroSchema(Reading), BytesSchema()):
        with pytest.raises(TypeError):
            schema.encode(bad)
    with pytest.raises(TypeError):
        StringSchema().encode(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a generated message class"):
        ProtobufNativeSchema(Reading)  # type: ignore[type-var]


def test_avro_schema_from_a_definition_carries_dicts() -> None:
    schema = AvroSchema(None, schema_definition={
        "type": "record", "name": "Point", "fields": [{"name": "x", "type": "long"},
                                                      {"name": "y", "type": "long"}]})
    assert schema.decode(schema.encode({"x": 1, "y": -2})) == {"x": 1, "y": -2}


# ---- on both brokers ----------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_typed_round_trip(target: Target, case: str) -> None:
    make, value = CASES[case]

    async def scenario(url: str, broker: Broker) -> None:
        topic = f"schema-{case}"
        async with PulsarClient(url) as client:
            schema: Schema[Any] = make()
            consumer = await client.subscribe(topic, "s", schema=make(),
                                              initial_position="earliest")
            producer = await client.create_producer(topic, schema=schema,
                                                    batching_max_messages=2)
            for i in range(3):
                producer.send_async(value(i))
            await producer.flush()
            got = [await consumer.receive(timeout_millis=20000) for _ in range(3)]
            assert [m.value() for m in got] == [value(i) for i in range(3)]
            if target.name == "pulsar" and case != "bytes":
                # The version the broker gave the producer's schema, on every message.
                assert all(m.schema_version() == got[0].schema_version() != b"" for m in got)

    target.run(scenario)


def test_incompatible_schema_is_refused(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            await client.create_producer("schema-clash", schema=StringSchema())
            with pytest.raises(IncompatibleSchema):
                await client.create_producer("schema-clash", schema=JsonSchema(Reading))
            with pytest.raises(IncompatibleSchema):
                await client.subscribe("schema-clash", "s",
                                       schema=ProtobufNativeSchema(OrderPlaced))

    target.run(scenario)


def test_auto_consume_decodes_by_the_registered_schemas(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        topic = "schema-auto"
        async with PulsarClient(url) as client:
            consumer = await client.subscribe(topic, "s", schema=AutoConsumeSchema(),
                                              initial_position="earliest")
            producer = await client.create_producer(topic, schema=JsonSchema(Reading))
            await producer.send(reading(1))
            await producer.close()
            msg = await consumer.receive(timeout_millis=20000)
            assert msg.value() == {"sensor": "s1", "value": 1.5, "tags": ["a", "1"],
                                   "note": None}

    target.run(scenario)


def test_auto_consume_reads_protobuf_native_as_fields(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        topic = "schema-auto-proto"
        async with PulsarClient(url) as client:
            consumer = await client.subscribe(topic, "s", schema=AutoConsumeSchema(),
                                              initial_position="earliest")
            producer = await client.create_producer(
                topic, schema=ProtobufNativeSchema(OrderPlaced))
            await producer.send(order(4))
            msg = await consumer.receive(timeout_millis=20000)
            assert msg.value() == {"order_id": "o-000004", "customer": "c1",
                                   "amount_cents": str(1250 * 4 + 1), "currency": "EUR",
                                   "items": ["sku-4", "sku-x"], "placed_at_ms": "1700004"}

    target.run(scenario)


def test_the_synchronous_client_carries_typed_values() -> None:
    with BrokerThread(port=0) as broker:
        client = Client(broker.url, operation_timeout_seconds=20)
        try:
            consumer = client.subscribe("schema-sync", "s", schema=JsonSchema(Reading),
                                        initial_position="earliest")
            producer = client.create_producer("schema-sync", None, JsonSchema(Reading))
            producer.send(reading(3))
            msg = consumer.receive(timeout_millis=20000)
            assert msg.value() == reading(3)
            consumer.acknowledge(msg)
        finally:
            client.close()
