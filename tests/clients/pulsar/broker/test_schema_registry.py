"""The embedded broker's schema registry through raw commands: versions, GET_SCHEMA and
GET_OR_CREATE_SCHEMA, the registry's limits, and its file in the data directory (restart,
damage). The same observable behaviour against Apache Pulsar is tests/interop/
test_pulsar_schemas.py's."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from protoframe.clients.pulsar.broker import EmbeddedBroker
from protoframe.clients.pulsar.broker.cli import register
from protoframe.clients.pulsar.broker.schema_store import SCHEMA_LOG, SchemaFile, StoredSchema
from protoframe.clients.pulsar.broker.schemas import SchemaRegistry, decode_version
from protoframe.clients.pulsar.broker.storage import CorruptLogError
from protoframe.generated.pulsar import frames
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandProducer,
    CommandSubscribe,
    KeyValue,
    Schema,
    ServerError,
)
from tests.support.pulsar_raw import RawClient, get_or_create_schema, refused, run
from tests.support.pulsar_raw import get_schema as raw_get_schema

Type = BaseCommand.Type
TOPIC = "persistent://public/default/schemas"


def avro(*fields: Mapping[str, object]) -> Schema:
    data = json.dumps({"type": "record", "name": "User", "fields": list(fields)}).encode()
    return Schema(name="User", schema_data=data, type_=Schema.Type.Avro,
                  properties=[KeyValue(key="k", value="v")])


V1 = avro({"name": "name", "type": "string"})
V2 = avro({"name": "name", "type": "string"},
          {"name": "age", "type": ["null", "int"], "default": None})
V3_REQUIRED = avro({"name": "name", "type": "string"}, {"name": "age", "type": "int"})
STRING = Schema(name="s", schema_data=b"", type_=Schema.Type.String)


async def produce(client: RawClient, schema: Schema | None, producer_id: int,
                  topic: str = TOPIC) -> frames.Frame:
    await client.send(BaseCommand(type_=Type.PRODUCER, producer=CommandProducer(
        topic=topic, producer_id=producer_id, request_id=producer_id, schema=schema)))
    return await client.recv()


async def subscribe(client: RawClient, topic: str, consumer_id: int,
                    schema: Schema | None) -> frames.Frame:
    await client.send(BaseCommand(type_=Type.SUBSCRIBE, subscribe=CommandSubscribe(
        topic=topic, subscription=f"s{consumer_id}", subType=CommandSubscribe.SubType.Shared,
        consumer_id=consumer_id, request_id=100 + consumer_id, schema=schema)))
    return await client.recv()


def version_of(frame: frames.Frame) -> int | None:
    answer = frame.command.producer_success
    assert answer is not None, f"expected PRODUCER_SUCCESS, got {frame.command!r}"
    return decode_version(answer.schema_version) if answer.has_schema_version() else None


async def get_schema(client: RawClient, version: int | None,
                     topic: str = TOPIC) -> tuple[int | None, Schema | None, ServerError | None]:
    return await raw_get_schema(client, topic, version)


@run
async def test_versions_are_found_or_added() -> None:
    async with EmbeddedBroker() as url:
        client = await RawClient.connect(url)
        assert version_of(await produce(client, V1, 1)) == 0
        assert version_of(await produce(client, V2, 2)) == 1
        assert version_of(await produce(client, V1, 3)) == 0  # an existing version: no new one
        refused(await produce(client, V3_REQUIRED, 4), ServerError.IncompatibleSchema,
                "Unable to read schema")
        refused(await produce(client, STRING, 5), ServerError.IncompatibleSchema,
                "exists schema type AVRO, new schema type STRING")
        plain = (await produce(client, None, 6)).command.producer_success  # no schema: accepted
        assert plain is not None and plain.schema_version == b""  # as Pulsar: empty
        number, schema, _ = await get_schema(client, None)
        assert number == 1 and schema is not None
        assert schema.schema_data == V2.schema_data and schema.type_ == Schema.Type.Avro
        assert schema.name == "public/default/schemas"
        assert [(p.key, p.value) for p in schema.properties] == [("k", "v")]
        number, schema, _ = await get_schema(client, 0)
        assert number == 0 and schema is not None and schema.schema_data == V1.schema_data
        assert (await get_schema(client, 2))[2] == ServerError.TopicNotFound
        assert (await get_schema(client, None, TOPIC + "-none"))[2] == ServerError.TopicNotFound
        # A consumer's schema must read the latest version; one of another type cannot.
        assert (await subscribe(client, TOPIC, 1, V1)).command.success
        refused(await subscribe(client, TOPIC, 2, STRING), ServerError.IncompatibleSchema)
        await client.close()


@run
async def test_partitions_share_their_topic_schema_and_idle_consumers_register() -> None:
    async with EmbeddedBroker() as url:
        client = await RawClient.connect(url)
        base = "persistent://public/default/parts"
        assert version_of(await produce(client, V1, 1, f"{base}-partition-0")) == 0
        assert version_of(await produce(client, V2, 2, f"{base}-partition-1")) == 1
        assert (await get_schema(client, None, base))[0] == 1
        # A consumer on an idle topic registers its schema, as a producer would.
        idle = "persistent://public/default/idle"
        assert (await subscribe(client, idle, 1, STRING)).command.success
        number, schema, _ = await get_schema(client, None, idle)
        assert number == 0 and schema is not None and schema.type_ == Schema.Type.String
        await client.close()


@run
async def test_get_or_create_schema() -> None:
    async with EmbeddedBroker() as url:
        client = await RawClient.connect(url)
        assert await get_or_create_schema(client, TOPIC, V1) == (None, ServerError.TopicNotFound)
        assert version_of(await produce(client, None, 1)) is None  # creates the topic
        assert await get_or_create_schema(client, TOPIC, V1) == (0, None)
        assert await get_or_create_schema(client, TOPIC, V2) == (1, None)
        assert await get_or_create_schema(client, TOPIC, V1) == (0, None)
        assert await get_or_create_schema(client, TOPIC, STRING) == (None,
                                                               ServerError.IncompatibleSchema)
        await client.close()


@run
async def test_strategy_is_the_brokers() -> None:
    async with EmbeddedBroker(schema_compatibility_strategy="FORWARD") as url:
        client = await RawClient.connect(url)
        assert version_of(await produce(client, V1, 1)) == 0
        assert version_of(await produce(client, V3_REQUIRED, 2)) == 1  # V1 reads its data
    async with EmbeddedBroker(schema_compatibility_strategy="ALWAYS_INCOMPATIBLE") as url:
        client = await RawClient.connect(url)
        assert version_of(await produce(client, V1, 1)) == 0
        refused(await produce(client, V2, 2), ServerError.IncompatibleSchema)
    async with EmbeddedBroker(schema_compatibility_strategy="ALWAYS_COMPATIBLE") as url:
        client = await RawClient.connect(url)
        assert version_of(await produce(client, V1, 1)) == 0
        assert version_of(await produce(client, STRING, 2)) == 1


def test_the_command_line_options() -> None:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["broker", "--schema-compatibility-strategy", "BACKWARD_TRANSITIVE",
                              "--max-schema-size", "100", "--max-schema-versions", "3"])
    assert (args.schema_compatibility_strategy, args.max_schema_size,
            args.max_schema_versions) == ("BACKWARD_TRANSITIVE", 100, 3)
    assert parser.parse_args(["broker"]).schema_compatibility_strategy == "FULL"
    with pytest.raises(SystemExit):
        parser.parse_args(["broker", "--schema-compatibility-strategy", "SOMETIMES"])


@run
async def test_limits_bound_what_a_client_can_register() -> None:
    async with EmbeddedBroker(max_schema_versions=2, max_schema_size=300) as url:
        client = await RawClient.connect(url)
        for number in range(2):
            schema = avro({"name": "name", "type": "string"},
                          *({"name": f"f{i}", "type": ["null", "int"], "default": None}
                            for i in range(number)))
            assert version_of(await produce(client, schema, number + 1)) == number
        refused(await produce(client, V2, 5), ServerError.NotAllowedError,
                "--max-schema-versions")
        big = avro(*({"name": f"field{i}", "type": "string"} for i in range(20)))
        refused(await produce(client, big, 6, TOPIC + "-big"), ServerError.NotAllowedError,
                "--max-schema-size")
        assert (await get_schema(client, None, TOPIC + "-big"))[2] == ServerError.TopicNotFound
        await client.close()


@run
async def test_versions_survive_a_restart(tmp_path: Path) -> None:
    async with EmbeddedBroker(data_dir=tmp_path) as url:
        client = await RawClient.connect(url)
        assert version_of(await produce(client, V1, 1)) == 0
        assert version_of(await produce(client, V2, 2)) == 1
        await client.close()
    async with EmbeddedBroker(data_dir=tmp_path) as url:
        client = await RawClient.connect(url)
        number, schema, _ = await get_schema(client, 0)
        assert number == 0 and schema is not None and schema.schema_data == V1.schema_data
        assert [(p.key, p.value) for p in schema.properties] == [("k", "v")]
        assert (await get_schema(client, None))[0] == 1
        assert version_of(await produce(client, V2, 1)) == 1
        refused(await produce(client, V3_REQUIRED, 2), ServerError.IncompatibleSchema)
        await client.close()


@run
async def test_a_torn_schema_file_is_cut_and_damage_in_the_middle_refused(
        tmp_path: Path) -> None:
    async with EmbeddedBroker(data_dir=tmp_path) as url:
        client = await RawClient.connect(url)
        assert version_of(await produce(client, V1, 1)) == 0
        assert version_of(await produce(client, V2, 2)) == 1
        await client.close()
    path = tmp_path / SCHEMA_LOG
    whole = path.read_bytes()
    path.write_bytes(whole[:-5])  # a crash in the middle of the last record's write
    async with EmbeddedBroker(data_dir=tmp_path) as url:
        client = await RawClient.connect(url)
        assert (await get_schema(client, None))[0] == 0
        assert version_of(await produce(client, V2, 1)) == 1
        await client.close()
    assert list((tmp_path / "quarantine").glob("schemas-*/bytes-*.bin"))
    data = bytearray(path.read_bytes())
    data[20] ^= 0xFF  # inside the first record, with the second valid after it
    path.write_bytes(bytes(data))
    refusing = EmbeddedBroker(data_dir=tmp_path)
    with pytest.raises(CorruptLogError, match="--repair"):
        await refusing.start()
    await refusing.stop()
    async with EmbeddedBroker(data_dir=tmp_path, repair=True) as url:
        client = await RawClient.connect(url)
        # Version 0 is lost with the damaged bytes; version 1 keeps its number (messages
        # carry it) and new versions come after it.
        assert (await get_schema(client, 0))[2] == ServerError.TopicNotFound
        assert (await get_schema(client, None))[0] == 1
        assert version_of(await produce(client, V1, 1)) == 2
        await client.close()


def test_deleted_schemas_stay_deleted_after_a_restart(tmp_path: Path) -> None:
    def registry() -> SchemaRegistry:
        opened = SchemaRegistry(SchemaFile(tmp_path, fsync=False))
        opened.recover()
        return opened

    schemas = registry()
    first = StoredSchema(Schema.Type.String, b"")
    assert schemas.put_if_absent(TOPIC, first) == 0
    assert schemas.put_if_absent(TOPIC + "-kept", first) == 0
    schemas.delete(TOPIC)
    assert schemas.get(TOPIC) is None
    schemas.close()
    schemas = registry()
    assert schemas.get(TOPIC) is None and schemas.get(TOPIC + "-kept") == (0, first)
    # A topic made again after its deletion starts again from version 0.
    assert schemas.put_if_absent(TOPIC, StoredSchema(Schema.Type.Avro, V1.schema_data)) == 0
    schemas.close()
