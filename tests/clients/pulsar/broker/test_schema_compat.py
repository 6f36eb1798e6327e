"""The broker's schema compatibility checks, on hand-made Avro schemas, per strategy."""

from __future__ import annotations

import json
from typing import Any

import pytest

from protoframe.clients.pulsar.broker.schema_compat import (
    IncompatibleSchema,
    Strategy,
    TypedDefinition,
    can_read,
    check_consumer_schema,
    check_new_schema,
    parse_avro,
)

AVRO, STRING, JSON = 4, 1, 2


def record(*fields: dict[str, Any], name: str = "User") -> bytes:
    return json.dumps({"type": "record", "name": name, "namespace": "test",
                       "fields": list(fields)}).encode()


def avro(data: bytes, type_: int = AVRO) -> TypedDefinition:
    return TypedDefinition(type_, data, {AVRO: "AVRO", STRING: "STRING", JSON: "JSON"}[type_])


NAME = {"name": "name", "type": "string"}
AGE = {"name": "age", "type": "int"}
AGE_DEFAULT = {"name": "age", "type": "int", "default": 0}
V1 = record(NAME)
V2_ADDS_DEFAULTED = record(NAME, AGE_DEFAULT)  # readable both ways
V2_ADDS_REQUIRED = record(NAME, AGE)  # reads no V1 data (no default for age); V1 reads it
V2_DROPS_NAME = record({"name": "nickname", "type": "string", "default": ""})


def reads(reader: bytes, writer: bytes) -> bool:
    return can_read(parse_avro(reader), parse_avro(writer)) is None


def test_resolution_rules() -> None:
    assert reads(V2_ADDS_DEFAULTED, V1) and reads(V1, V2_ADDS_DEFAULTED)
    assert not reads(V2_ADDS_REQUIRED, V1) and reads(V1, V2_ADDS_REQUIRED)
    # Promotions go one way only.
    assert reads(record({"name": "n", "type": "long"}), record({"name": "n", "type": "int"}))
    assert not reads(record({"name": "n", "type": "int"}), record({"name": "n", "type": "long"}))
    assert reads(record({"name": "n", "type": "bytes"}), record({"name": "n", "type": "string"}))
    # A writer's union: every branch must be readable; a reader's union: some branch.
    optional = record({"name": "n", "type": ["null", "string"], "default": None})
    assert reads(optional, record({"name": "n", "type": "string"}))
    assert not reads(record({"name": "n", "type": "string"}), optional)
    # Enums: a symbol the reader lacks is unreadable unless the reader has a default.
    def enum(*symbols: str, **extra: Any) -> bytes:
        return record({"name": "c", "type": {"type": "enum", "name": "Color",
                                             "symbols": list(symbols), **extra}})
    assert reads(enum("RED", "BLUE"), enum("RED"))
    assert not reads(enum("RED"), enum("RED", "BLUE"))
    assert reads(enum("RED", default="RED"), enum("RED", "BLUE"))
    # Records and fixed types are matched by name (or the reader's alias) and size.
    assert not reads(record(NAME, name="Other"), V1)
    assert reads(json.dumps({"type": "record", "name": "Other", "aliases": ["User"],
                             "fields": [NAME]}).encode(), V1)
    fixed4 = record({"name": "f", "type": {"type": "fixed", "name": "F", "size": 4}})
    fixed8 = record({"name": "f", "type": {"type": "fixed", "name": "F", "size": 8}})
    assert not reads(fixed4, fixed8)
    # Arrays and maps by their items and values; recursive types terminate.
    ints = record({"name": "xs", "type": {"type": "array", "items": "int"}})
    longs = record({"name": "xs", "type": {"type": "array", "items": "long"}})
    assert reads(longs, ints) and not reads(ints, longs)
    node = record({"name": "next", "type": ["null", "test.User"], "default": None}, NAME)
    assert reads(node, node)


def test_invalid_definition_is_refused() -> None:
    with pytest.raises(IncompatibleSchema, match="Invalid schema definition"):
        check_new_schema(avro(b'{"type": "record"}'), [], Strategy.FULL)
    with pytest.raises(IncompatibleSchema, match="Invalid schema definition"):
        check_new_schema(avro(b"not json"), [], Strategy.ALWAYS_COMPATIBLE)


# (strategy, new schema, accepted after [V1]) for each non-transitive strategy.
CASES = [
    (Strategy.ALWAYS_COMPATIBLE, V2_DROPS_NAME, True),
    (Strategy.ALWAYS_INCOMPATIBLE, V2_ADDS_DEFAULTED, False),
    (Strategy.BACKWARD, V2_ADDS_DEFAULTED, True),
    (Strategy.BACKWARD, V2_ADDS_REQUIRED, False),
    (Strategy.FORWARD, V2_ADDS_REQUIRED, True),
    (Strategy.FORWARD, V2_DROPS_NAME, False),
    (Strategy.FULL, V2_ADDS_DEFAULTED, True),
    (Strategy.FULL, V2_ADDS_REQUIRED, False),
]


@pytest.mark.parametrize(("strategy", "new", "accepted"), CASES)
def test_strategy_against_the_latest(strategy: Strategy, new: bytes, accepted: bool) -> None:
    if accepted:
        check_new_schema(avro(new), [avro(V1)], strategy)
    else:
        with pytest.raises(IncompatibleSchema):
            check_new_schema(avro(new), [avro(V1)], strategy)


def test_transitive_strategies_check_every_version() -> None:
    # v0 has no age; v1 adds it with a default; v2 drops the default. v2 reads v1's data but
    # not v0's: BACKWARD accepts it, BACKWARD_TRANSITIVE does not.
    history = [avro(V1), avro(V2_ADDS_DEFAULTED)]
    check_new_schema(avro(V2_ADDS_REQUIRED), history, Strategy.BACKWARD)
    with pytest.raises(IncompatibleSchema, match="BACKWARD_TRANSITIVE"):
        check_new_schema(avro(V2_ADDS_REQUIRED), history, Strategy.BACKWARD_TRANSITIVE)
    # v0 has age without default, v1 gives it a default, v2 drops it: v0 cannot read v2.
    forward = [avro(V2_ADDS_REQUIRED), avro(V2_ADDS_DEFAULTED)]
    check_new_schema(avro(V1), forward, Strategy.FORWARD)
    with pytest.raises(IncompatibleSchema, match="FORWARD_TRANSITIVE"):
        check_new_schema(avro(V1), forward, Strategy.FORWARD_TRANSITIVE)
    # An age of another type, with a default: fully compatible with v1 (no age), not with v0.
    text_age = record(NAME, {"name": "age", "type": "string", "default": ""})
    full = [avro(V2_ADDS_REQUIRED), avro(V1)]
    check_new_schema(avro(text_age), full, Strategy.FULL)
    with pytest.raises(IncompatibleSchema, match="FULL_TRANSITIVE"):
        check_new_schema(avro(text_age), full, Strategy.FULL_TRANSITIVE)


def test_type_changes_and_non_avro_types() -> None:
    for strategy in Strategy:
        if strategy is Strategy.ALWAYS_COMPATIBLE:
            check_new_schema(avro(b"", STRING), [avro(V1)], strategy)
            continue
        with pytest.raises(IncompatibleSchema,
                           match="exists schema type AVRO, new schema type STRING"):
            check_new_schema(avro(b"", STRING), [avro(V1)], strategy)
    # A String schema with other properties/data is accepted unless ALWAYS_INCOMPATIBLE.
    check_new_schema(avro(b"x", STRING), [avro(b"", STRING)], Strategy.FULL)
    with pytest.raises(IncompatibleSchema):
        check_new_schema(avro(b"x", STRING), [avro(b"", STRING)], Strategy.ALWAYS_INCOMPATIBLE)
    # JSON definitions are Avro ones.
    with pytest.raises(IncompatibleSchema):
        check_new_schema(avro(V2_ADDS_REQUIRED, JSON), [avro(V1, JSON)], Strategy.FULL)


def test_protobuf_native_root_message_may_not_change() -> None:
    def native(root: str, descriptor: str = "AAAA") -> TypedDefinition:
        data = json.dumps({"fileDescriptorSet": descriptor, "rootMessageTypeName": root,
                           "rootFileDescriptorName": "orders.proto"}).encode()
        return TypedDefinition(20, data, "PROTOBUF_NATIVE")

    check_new_schema(native("demo.Order", "BBBB"), [native("demo.Order")], Strategy.FULL)
    with pytest.raises(IncompatibleSchema, match="root message"):
        check_new_schema(native("demo.Refund"), [native("demo.Order")], Strategy.BACKWARD)
    check_new_schema(native("demo.Refund"), [native("demo.Order")],
                     Strategy.ALWAYS_COMPATIBLE)


def test_consumer_checks() -> None:
    with pytest.raises(IncompatibleSchema, match="does not have schema"):
        check_consumer_schema(avro(V1), [], Strategy.FULL)
    # Non-transitive strategies: the consumer's schema must read the latest version.
    check_consumer_schema(avro(V1), [avro(V2_ADDS_REQUIRED)], Strategy.FULL)
    with pytest.raises(IncompatibleSchema):
        check_consumer_schema(avro(V2_ADDS_REQUIRED), [avro(V1)], Strategy.FORWARD)
    check_consumer_schema(avro(V1), [avro(V1)], Strategy.ALWAYS_INCOMPATIBLE)
