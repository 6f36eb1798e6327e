"""Schema compatibility as Pulsar's broker checks it when a producer or consumer brings a schema.

Avro and JSON schemas (the official clients send JSON schemas as Avro definitions) are checked by
Avro's schema resolution: data written with one schema must be readable with the other. Which
direction, and against which earlier versions, is the strategy's: ``BACKWARD`` means the new
schema reads what the latest one wrote, ``FORWARD`` the reverse, ``FULL`` both; the
``_TRANSITIVE`` forms check every earlier version instead of the latest. Other schema types
have no definition to resolve: as in Pulsar, any change is accepted unless the strategy is
``ALWAYS_INCOMPATIBLE``, except that a ProtobufNative schema may not change its root message.
A change of type is refused unless the strategy is ``ALWAYS_COMPATIBLE``.

Parsing is fastavro's (it resolves names and checks the definition); the resolution rules are
the Avro specification's ("Schema Resolution").
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro

__all__ = ["AVRO_TYPES", "IncompatibleSchema", "Strategy", "check_new_schema",
           "check_consumer_schema", "parse_avro", "can_read"]

# Schema.Type values whose definitions are Avro schemas.
AVRO_TYPES = frozenset({2, 4})  # Json, Avro
PROTOBUF_NATIVE = 20


class Strategy(enum.Enum):
    """Pulsar's schema compatibility strategies (``schemaCompatibilityStrategy``)."""

    ALWAYS_INCOMPATIBLE = "ALWAYS_INCOMPATIBLE"
    ALWAYS_COMPATIBLE = "ALWAYS_COMPATIBLE"
    BACKWARD = "BACKWARD"
    FORWARD = "FORWARD"
    FULL = "FULL"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @property
    def transitive(self) -> bool:
        return self.name.endswith("_TRANSITIVE")

    @property
    def base(self) -> Strategy:
        """The non-transitive form (``FULL`` for ``FULL_TRANSITIVE``)."""
        return Strategy[self.name.removesuffix("_TRANSITIVE")]


class IncompatibleSchema(Exception):
    """The schema is refused; the message says why (sent to the client as is)."""


@dataclass(frozen=True, slots=True)
class TypedDefinition:
    """What the checks need of a schema: its type (``Schema.Type`` value) and definition."""

    type_: int
    data: bytes
    type_name: str


# --- parsing -------------------------------------------------------------------------------

ParsedAvro = tuple[Any, dict[str, Any]]  # (parsed schema, its named types by full name)


def parse_avro(data: bytes) -> ParsedAvro:
    """An Avro definition parsed by fastavro, with its named types; ``IncompatibleSchema`` if
    it is not one."""
    try:
        named: dict[str, Any] = {}
        parsed = fastavro.parse_schema(json.loads(data.decode("utf-8")), named_schemas=named,
                                       _write_hint=False)
    except Exception as exc:  # fastavro raises several kinds (SchemaParseException, KeyError..)
        raise IncompatibleSchema(f"Invalid schema definition data for AVRO schema: "
                                 f"{type(exc).__name__}: {exc}") from None
    return parsed, named


# --- Avro resolution -----------------------------------------------------------------------

_PROMOTIONS: Mapping[str, frozenset[str]] = {
    # writer type -> reader types it may be read as (the specification's promotions)
    "int": frozenset({"int", "long", "float", "double"}),
    "long": frozenset({"long", "float", "double"}),
    "float": frozenset({"float", "double"}),
    "string": frozenset({"string", "bytes"}),
    "bytes": frozenset({"bytes", "string"}),
}


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


class _Resolver:
    """One check of whether a reader schema reads what a writer schema wrote."""

    def __init__(self, reader_names: dict[str, Any], writer_names: dict[str, Any]) -> None:
        self.reader_names = reader_names
        self.writer_names = writer_names
        # Named pairs being checked: a recursive type is assumed readable where it recurs.
        self.assumed: set[tuple[str, str]] = set()

    def _deref(self, schema: Any, names: dict[str, Any]) -> Any:
        if isinstance(schema, str) and schema in names:
            return names[schema]
        return schema

    @staticmethod
    def _type(schema: Any) -> str:
        if isinstance(schema, list):
            return "union"
        if isinstance(schema, dict):
            kind = schema["type"]
            return kind if isinstance(kind, str) else _Resolver._type(kind)
        return str(schema)

    def why_not(self, reader: Any, writer: Any, path: str) -> str | None:
        """Why ``reader`` cannot read ``writer``'s data, or None if it can."""
        reader = self._deref(reader, self.reader_names)
        writer = self._deref(writer, self.writer_names)
        if isinstance(reader, dict) and isinstance(reader["type"], (dict, list)):
            reader = reader["type"]
        if isinstance(writer, dict) and isinstance(writer["type"], (dict, list)):
            writer = writer["type"]
        rtype, wtype = self._type(reader), self._type(writer)
        if wtype == "union":
            for branch in writer:
                reason = self.why_not(reader, branch, path)
                if reason is not None:
                    return reason
            return None
        if rtype == "union":
            reasons = [self.why_not(branch, writer, path) for branch in reader]
            if any(reason is None for reason in reasons):
                return None
            return f"{path}: no branch of the reader's union reads the writer's {wtype}"
        if rtype != wtype:
            if rtype in _PROMOTIONS.get(wtype, ()):
                return None
            return f"{path}: the writer's {wtype} cannot be read as {rtype}"
        if rtype in ("record", "error", "enum", "fixed"):
            if _short(reader["name"]) != _short(writer["name"]) and \
                    _short(writer["name"]) not in {_short(a) for a in reader.get("aliases", [])}:
                return f"{path}: the writer's {rtype} {writer['name']} is not the reader's " \
                       f"{reader['name']}"
        if rtype in ("record", "error"):
            key = (reader["name"], writer["name"])
            if key in self.assumed:
                return None
            self.assumed.add(key)
            written = {f["name"]: f for f in writer["fields"]}
            for field in reader["fields"]:
                names = [field["name"], *field.get("aliases", [])]
                source = next((written[n] for n in names if n in written), None)
                where = f"{path}.{field['name']}"
                if source is None:
                    if "default" not in field:
                        return f"{where}: the reader's field has no default and the writer " \
                               "has no such field"
                    continue
                reason = self.why_not(field["type"], source["type"], where)
                if reason is not None:
                    return reason
            return None
        if rtype == "enum":
            missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
            if missing and "default" not in reader:
                return f"{path}: the reader's enum {reader['name']} lacks the symbols {missing}"
            return None
        if rtype == "fixed":
            if reader["size"] != writer["size"]:
                return f"{path}: fixed {reader['name']} of {reader['size']} bytes cannot read " \
                       f"{writer['size']} bytes"
            return None
        if rtype == "array":
            return self.why_not(reader["items"], writer["items"], f"{path}[]")
        if rtype == "map":
            return self.why_not(reader["values"], writer["values"], f"{path}{{}}")
        return None  # the same primitive type


def can_read(reader: ParsedAvro, writer: ParsedAvro) -> str | None:
    """None if data written with ``writer`` can be read with ``reader``, else why not."""
    return _Resolver(reader[1], writer[1]).why_not(reader[0], writer[0], "$")


# --- strategies ----------------------------------------------------------------------------

# How much of each definition a refusal quotes: the reason names the field.
_QUOTED = 2000


def _quote(data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    return text if len(text) <= _QUOTED else text[:_QUOTED] + "..."


def _avro_check(new: TypedDefinition, old: TypedDefinition, strategy: Strategy) -> None:
    new_parsed, old_parsed = parse_avro(new.data), parse_avro(old.data)
    base = strategy.base
    # Worded as Avro's SchemaValidationException, which Pulsar's refusal carries.
    if base in (Strategy.BACKWARD, Strategy.FULL):
        reason = can_read(new_parsed, old_parsed)
        if reason is not None:
            raise IncompatibleSchema(
                f"Unable to read schema: {_quote(old.data)} using schema: {_quote(new.data)} "
                f"({reason}; strategy {strategy.name})")
    if base in (Strategy.FORWARD, Strategy.FULL):
        reason = can_read(old_parsed, new_parsed)
        if reason is not None:
            raise IncompatibleSchema(
                f"Unable to read schema: {_quote(new.data)} using schema: {_quote(old.data)} "
                f"({reason}; strategy {strategy.name})")


def _check_pair(new: TypedDefinition, old: TypedDefinition, strategy: Strategy) -> None:
    if new.type_ != old.type_:
        raise IncompatibleSchema(f"Incompatible schema: exists schema type {old.type_name}, "
                                 f"new schema type {new.type_name}")
    if new.data == old.data:
        return
    if strategy is Strategy.ALWAYS_INCOMPATIBLE:
        raise IncompatibleSchema("Incompatible schema: the strategy is ALWAYS_INCOMPATIBLE and "
                                 f"the new {new.type_name} schema differs from the existing one")
    if new.type_ in AVRO_TYPES:
        _avro_check(new, old, strategy)
    elif new.type_ == PROTOBUF_NATIVE and _root_message(new) != _root_message(old):
        raise IncompatibleSchema("Protobuf root message isn't allow change!")


def _root_message(schema: TypedDefinition) -> object:
    """A ProtobufNative definition's root message name (its definition is a JSON object with
    the descriptor set and ``rootMessageTypeName``); None if it does not say."""
    try:
        definition = json.loads(schema.data.decode("utf-8"))
    except ValueError:
        return None
    return definition.get("rootMessageTypeName") if isinstance(definition, dict) else None


def check_new_schema(new: TypedDefinition, existing: Sequence[TypedDefinition],
                     strategy: Strategy) -> None:
    """Whether ``new`` may become the next version after ``existing`` (oldest first; ``new``
    is none of them); raises ``IncompatibleSchema`` if not."""
    if not existing or strategy is Strategy.ALWAYS_COMPATIBLE:
        if new.type_ in AVRO_TYPES:
            parse_avro(new.data)
        return
    against = existing if strategy.transitive else existing[-1:]
    for old in reversed(against):
        _check_pair(new, old, strategy)


def check_consumer_schema(schema: TypedDefinition, existing: Sequence[TypedDefinition],
                          strategy: Strategy) -> None:
    """Whether a consumer with ``schema`` may read a topic with these versions (oldest first),
    as Pulsar decides: for the non-transitive strategies, it must read the latest version;
    for the transitive ones, it is checked as a new version would be."""
    if not existing:
        raise IncompatibleSchema("Topic does not have schema to check")
    if strategy in (Strategy.BACKWARD, Strategy.FORWARD, Strategy.FULL):
        _check_pair(schema, existing[-1], Strategy.BACKWARD)
    else:
        check_new_schema(schema, existing, strategy)
