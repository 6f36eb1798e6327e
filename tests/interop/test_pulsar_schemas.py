"""Schemas with the official client, differentially: the same scenario on the embedded broker and
on Apache Pulsar must give the same observable answers (which producers and consumers are
accepted, which error refuses the others, the schema versions messages carry, what GET_SCHEMA
answers), under Pulsar's default strategy and under each strategy set on a namespace of the
standalone (on the embedded broker, its ``schema_compatibility_strategy``).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import urllib.error
import uuid
from collections.abc import Callable
from typing import Any

import pulsar
import pytest
from pulsar.schema import AvroSchema, Integer, JsonSchema, Record, String, StringSchema

from protoframe.clients.pulsar.broker import BrokerThread
from protoframe.clients.pulsar.broker.schema_compat import Strategy
from protoframe.clients.pulsar.broker.schemas import encode_version
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandProducer,
    Schema,
    ServerError,
)
from tests.support.pulsar_raw import RawClient, get_or_create_schema
from tests.support.pulsar_raw import get_schema as raw_get_schema
from tests.support.real_pulsar import RealPulsar

pytestmark = pytest.mark.interop

LOGGER = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
Observer = Callable[[str, str], Any]


def user(**fields: Any) -> type[Record]:
    # One record name for every version: Avro matches records by name.
    return type("User", (Record,), fields)


V1 = user(name=String())
# Adds a field with a default: readable both ways.
V2 = user(name=String(), age=Integer(required_default=True))
# Adds a nullable field without a default: reads no V1 data.
V3 = user(name=String(), age=Integer())
# Drops name (no default in V1): V1 cannot read its data.
V4 = user(age=Integer(required_default=True))


Type = BaseCommand.Type
RAW_V1 = Schema(name="User", schema_data=json.dumps(V1.schema()).encode(),
                type_=Schema.Type.Avro)
RAW_STRING = Schema(name="s", schema_data=b"", type_=Schema.Type.String)
Answer = tuple[int | None, ServerError | None]


async def get_schema(client: RawClient, topic: str,
                     version: int | None) -> tuple[int | None, bytes | None, object]:
    found, schema, error = await raw_get_schema(client, topic, version)
    if error is not None:
        return None, None, error
    assert schema is not None
    # Pulsar's schema id names the schema: the topic without its domain.
    return found, schema.schema_data, (schema.type_, schema.name == topic.split("://", 1)[1])


async def raw_producer(client: RawClient, topic: str, schema: Schema | None,
                       producer_id: int) -> bytes | str | ServerError:
    await client.send(BaseCommand(type_=Type.PRODUCER, producer=CommandProducer(
        topic=topic, producer_id=producer_id, request_id=producer_id, schema=schema)))
    frame = await client.recv()
    if frame.command.error is not None:
        return frame.command.error.error
    answer = frame.command.producer_success
    assert answer is not None, f"expected PRODUCER_SUCCESS, got {frame.command!r}"
    return answer.schema_version if answer.has_schema_version() else "no version"


def outcome(action: Callable[[], object]) -> str:
    try:
        action()
    except Exception as exc:  # the official client's errors are its own exception classes
        return type(exc).__name__
    return "ok"


def on_both(real: RealPulsar, observe: Observer, strategy: Strategy | None = None
            ) -> tuple[Any, Any]:
    """``observe(url, namespace)`` on a fresh embedded broker with ``strategy`` (its default
    if None), then on the standalone, in public/default (its default) or a namespace with
    that strategy."""
    options = {} if strategy is None else {"schema_compatibility_strategy": strategy}
    with BrokerThread(port=0, **options) as broker:
        embedded = observe(broker.url, "public/default")
    namespace = "public/default"
    if strategy is not None:
        namespace = f"public/schema-{strategy.name.lower().replace('_', '-')}"
        try:
            real.admin("PUT", f"namespaces/{namespace}", {})
        except urllib.error.HTTPError as error:
            if error.code != 409:  # made by an earlier test of this session
                raise
        real.admin("PUT", f"namespaces/{namespace}/schemaCompatibilityStrategy",
                   strategy.name)
    return embedded, observe(real.url, namespace)


def topic_in(namespace: str, scenario: str) -> str:
    # A fresh topic on every run: the standalone keeps a deleted topic's schema.
    return f"persistent://{namespace}/schema-{scenario}-{uuid.uuid4().hex[:8]}"


def schema_info(client: pulsar.Client, topic: str, version: int) -> tuple[str, Any] | str:
    """GET_SCHEMA as the official client sends it (its Avro consumer fetches writer schemas
    this way); -1 asks for the latest."""
    try:
        info = client._client.get_schema_info(topic, version)
    except Exception as exc:
        return type(exc).__name__
    return str(info.schema_type()), json.loads(info.schema()) if info.schema() else None


def registration(url: str, namespace: str) -> dict[str, Any]:
    client = pulsar.Client(url, logger=LOGGER, operation_timeout_seconds=30)
    topic = topic_in(namespace, "registration")
    try:
        seen: dict[str, Any] = {}
        first = client.create_producer(topic, schema=AvroSchema(V1))
        first.send(V1(name="a"))
        second = client.create_producer(topic, schema=AvroSchema(V2))
        second.send(V2(name="b", age=3))
        again = client.create_producer(topic, schema=AvroSchema(V1))  # version 0 again
        again.send(V1(name="c"))
        seen["incompatible"] = outcome(lambda: client.create_producer(
            topic, schema=AvroSchema(V4)))
        seen["string"] = outcome(lambda: client.create_producer(topic, schema=StringSchema()))
        seen["json"] = outcome(lambda: client.create_producer(topic, schema=JsonSchema(V1)))
        plain = client.create_producer(topic)  # no schema: accepted on a topic with one
        plain.send(b"raw")
        raw = client.subscribe(topic, "raw", initial_position=pulsar.InitialPosition.Earliest)
        seen["versions"] = [raw.receive(30_000).schema_version() for _ in range(4)]
        # The V2 consumer decodes V1's messages with V1, fetched by version (GET_SCHEMA).
        typed = client.subscribe(topic, "typed", schema=AvroSchema(V2),
                                 initial_position=pulsar.InitialPosition.Earliest)
        values = []
        for _ in range(3):
            value = typed.receive(30_000).value()
            values.append((value.name, value.age))
        seen["values"] = values
        seen["schemas"] = [schema_info(client, topic, v) for v in (0, 1, -1, 2)]
        seen["consumer v1"] = outcome(lambda: client.subscribe(topic, "v1",
                                                               schema=AvroSchema(V1)))
        seen["consumer string"] = outcome(lambda: client.subscribe(topic, "string",
                                                                   schema=StringSchema()))
        seen["consumer v4"] = outcome(lambda: client.subscribe(topic, "v4",
                                                               schema=AvroSchema(V4)))
        return seen
    finally:
        client.close()


def test_registration_versions_and_refusals(real_pulsar: RealPulsar) -> None:
    embedded, actual = on_both(real_pulsar, registration)
    assert embedded == actual
    assert actual["incompatible"] == actual["string"] == actual["json"] == "IncompatibleSchema"
    zero, one = b"\0" * 8, b"\0" * 7 + b"\1"
    assert [v.encode("latin-1") if isinstance(v, str) else v
            for v in actual["versions"][:3]] == [zero, one, zero]
    assert actual["values"] == [("a", None), ("b", 3), ("c", None)]
    assert actual["schemas"][0] == ("SchemaType.AVRO", V1.schema())
    assert actual["schemas"][1] == actual["schemas"][2] == ("SchemaType.AVRO", V2.schema())
    # A consumer's schema need only read the latest version (V4 ignores V2's name).
    assert actual["consumer v1"] == actual["consumer v4"] == "ok"
    assert actual["consumer string"] == "IncompatibleSchema"


def consumers_first(url: str, namespace: str) -> dict[str, Any]:
    client = pulsar.Client(url, logger=LOGGER, operation_timeout_seconds=30)
    topic = topic_in(namespace, "consumer")
    try:
        seen: dict[str, Any] = {}
        # A consumer on an idle topic registers its schema, which then binds producers.
        client.subscribe(topic, "s", schema=AvroSchema(V2))
        seen["schema"] = schema_info(client, topic, -1)
        seen["producer v1"] = outcome(lambda: client.create_producer(
            topic, schema=AvroSchema(V1)))
        seen["producer string"] = outcome(lambda: client.create_producer(
            topic, schema=StringSchema()))
        # A topic with messages but no schema: a consumer's schema has nothing to be checked
        # against.
        bare = topic_in(namespace, "bare")
        client.create_producer(bare).send(b"x")
        seen["bare consumer"] = outcome(lambda: client.subscribe(bare, "s",
                                                                 schema=AvroSchema(V1)))
        seen["bare producer"] = outcome(lambda: client.create_producer(
            bare, schema=AvroSchema(V1)))
        return seen
    finally:
        client.close()


def test_consumer_schemas(real_pulsar: RealPulsar) -> None:
    embedded, actual = on_both(real_pulsar, consumers_first)
    assert embedded == actual
    assert actual["schema"] == ("SchemaType.AVRO", V2.schema())
    assert actual["producer string"] == "IncompatibleSchema"


def evolution(url: str, namespace: str) -> list[str]:
    """Producers of V1, V2, V3, V4, a String schema and V1 again, in that order, on one topic."""
    client = pulsar.Client(url, logger=LOGGER, operation_timeout_seconds=30)
    topic = topic_in(namespace, "evolution")
    try:
        schemas = [AvroSchema(V1), AvroSchema(V2), AvroSchema(V3), AvroSchema(V4),
                   StringSchema(), AvroSchema(V1)]
        return [outcome(functools.partial(client.create_producer, topic, schema=schema))
                for schema in schemas]
    finally:
        client.close()


OK, NO = "ok", "IncompatibleSchema"
# What evolution() sees per strategy (V1 again is always its existing version 0).
EVOLUTION = {
    Strategy.ALWAYS_COMPATIBLE: [OK, OK, OK, OK, OK, OK],
    Strategy.ALWAYS_INCOMPATIBLE: [OK, NO, NO, NO, NO, OK],
    Strategy.BACKWARD: [OK, OK, OK, OK, NO, OK],  # each reads the one before
    Strategy.FORWARD: [OK, OK, OK, NO, NO, OK],  # V3 cannot read V4
    Strategy.FULL: [OK, OK, OK, NO, NO, OK],
    Strategy.BACKWARD_TRANSITIVE: [OK, OK, NO, OK, NO, OK],  # V3 cannot read V1
    Strategy.FORWARD_TRANSITIVE: [OK, OK, OK, NO, NO, OK],
    Strategy.FULL_TRANSITIVE: [OK, OK, NO, NO, NO, OK],
}


@pytest.mark.parametrize("strategy", list(Strategy), ids=lambda s: s.name)
def test_strategies(strategy: Strategy, real_pulsar: RealPulsar) -> None:
    embedded, actual = on_both(real_pulsar, evolution, strategy)
    assert embedded == actual
    assert actual == EVOLUTION[strategy]


def test_the_default_strategy_is_pulsars(real_pulsar: RealPulsar) -> None:
    embedded, actual = on_both(real_pulsar, evolution)
    assert embedded == actual
    with BrokerThread(port=0, schema_compatibility_strategy=Strategy.FULL) as broker:
        assert evolution(broker.url, "public/default") == actual


def raw_answers(url: str, namespace: str) -> dict[str, Any]:
    """GET_SCHEMA, GET_OR_CREATE_SCHEMA and PRODUCER_SUCCESS's schema version, as raw commands
    (the official client does not send GET_OR_CREATE_SCHEMA)."""

    async def run() -> dict[str, Any]:
        client = await RawClient.connect(url)
        topic = topic_in(namespace, "raw")
        seen: dict[str, Any] = {}
        try:
            seen["missing topic"] = await get_or_create_schema(client, topic, RAW_V1)
            seen["no schema"] = await get_schema(client, topic, None)
            seen["plain producer"] = await raw_producer(client, topic, None, 1)
            seen["create v1"] = await get_or_create_schema(client, topic, RAW_V1)
            seen["producer v1"] = await raw_producer(client, topic, RAW_V1, 2)
            seen["create string"] = await get_or_create_schema(client, topic, RAW_STRING)
            seen["latest"] = await get_schema(client, topic, None)
            seen["version 0"] = await get_schema(client, topic, 0)
            seen["version 9"] = await get_schema(client, topic, 9)
            seen["plain producer after"] = await raw_producer(client, topic, None, 3)
        finally:
            await client.close()
        return seen

    return asyncio.run(asyncio.wait_for(run(), 60))


def test_raw_schema_commands(real_pulsar: RealPulsar) -> None:
    embedded, actual = on_both(real_pulsar, raw_answers)
    assert embedded == actual
    assert actual["create v1"] == (0, None)
    assert actual["latest"] == (0, RAW_V1.schema_data, (Schema.Type.Avro, True))
    assert actual["plain producer"] == b""  # Pulsar's empty version: no schema


def native(root: str, *files: Any) -> Schema:
    """A ProtobufNative schema as the official clients send it, for well-known types."""
    from google.protobuf import descriptor_pb2

    descriptors = descriptor_pb2.FileDescriptorSet()
    for module in files:
        module.DESCRIPTOR.CopyToProto(descriptors.file.add())
    definition = {"fileDescriptorSet": base64.b64encode(descriptors.SerializeToString()).decode(),
                  "rootMessageTypeName": root,
                  "rootFileDescriptorName": files[0].DESCRIPTOR.name}
    return Schema(name=root, schema_data=json.dumps(definition).encode(),
                  type_=Schema.Type.ProtobufNative)


def protobuf_native(url: str, namespace: str) -> list[bytes | str | ServerError]:
    from google.protobuf import duration_pb2, timestamp_pb2

    async def run() -> list[bytes | str | ServerError]:
        client = await RawClient.connect(url)
        topic = topic_in(namespace, "native")
        try:
            schemas = [native("google.protobuf.Timestamp", timestamp_pb2),
                       # the same root message in a larger descriptor set: a new version
                       native("google.protobuf.Timestamp", timestamp_pb2, duration_pb2),
                       native("google.protobuf.Duration", duration_pb2, timestamp_pb2)]
            return [await raw_producer(client, topic, schema, i + 1)
                    for i, schema in enumerate(schemas)]
        finally:
            await client.close()

    return asyncio.run(asyncio.wait_for(run(), 60))


def test_protobuf_native_root_message(real_pulsar: RealPulsar) -> None:
    embedded, actual = on_both(real_pulsar, protobuf_native)
    assert embedded == actual
    assert actual == [encode_version(0), encode_version(1), ServerError.IncompatibleSchema]
