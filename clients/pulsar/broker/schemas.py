"""The broker's schema registry: the schema versions of each topic, as Pulsar keeps them.

A topic's versions are numbered from 0; a producer's schema becomes a new version only when no
existing version has the same type and definition (then that version is its answer), and only
if the broker's compatibility strategy accepts it (``schema_compat``). The partitions of a
partitioned topic share its schema, under its name without ``persistent://`` (Pulsar's schema
id, ``tenant/namespace/topic``). With a data directory the versions are kept in
``schemas.log`` (``schema_store``).

What a client can make the registry hold is bounded: a definition is at most
``max_schema_size`` bytes and a topic at most ``max_versions`` versions; past either the
schema is refused with an error naming the limit.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass

from protoframe.generated.pulsar.pulsar_api import Schema

from .schema_compat import (
    IncompatibleSchema,
    Strategy,
    TypedDefinition,
    check_consumer_schema,
    check_new_schema,
)
from .schema_store import SchemaFile, StoredSchema
from .topics import base_topic

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_STRATEGY", "IncompatibleSchema", "SchemaLimitExceeded", "SchemaLimits",
           "SchemaRegistry", "StoredSchema", "Strategy", "decode_version", "encode_version",
           "schema_id_of"]

# Pulsar's broker default (schemaCompatibilityStrategy=FULL in broker.conf), which a namespace
# without its own policy follows.
DEFAULT_STRATEGY = Strategy.FULL
MAX_SCHEMA_SIZE = 1024 * 1024
MAX_SCHEMA_VERSIONS = 1000

_VERSION = struct.Struct(">q")

TypeNamer = Callable[[int], str]


def encode_version(version: int) -> bytes:
    """A version as the wire carries it (a big-endian int64, as Pulsar's broker sends)."""
    return _VERSION.pack(version)


def decode_version(data: bytes) -> int | None:
    """The version number in ``data``, or None if it is not 8 bytes."""
    return _VERSION.unpack(data)[0] if len(data) == _VERSION.size else None


def schema_id_of(topic: str) -> str:
    """Pulsar's schema id of a fully qualified topic: its partitioned topic's name without the
    domain (``persistent://public/default/t-partition-1`` -> ``public/default/t``)."""
    return base_topic(topic).split("://", 1)[-1]


class SchemaLimitExceeded(ValueError):
    """A schema over a registry limit; the message names it."""


@dataclass(frozen=True, slots=True)
class SchemaLimits:
    max_schema_size: int = MAX_SCHEMA_SIZE
    max_versions: int = MAX_SCHEMA_VERSIONS

    def __post_init__(self) -> None:
        if self.max_schema_size <= 0 or self.max_versions <= 0:
            raise ValueError("schema limits must be positive")


def _type_name(type_: int) -> str:
    # Pulsar's names of SchemaType in its messages (the wire enum's names in capitals).
    try:
        name = Schema.Type(type_).name.rstrip("_")
    except ValueError:
        return str(type_)
    names = {"None": "NONE", "ProtobufNative": "PROTOBUF_NATIVE", "KeyValue": "KEY_VALUE",
             "LocalDate": "LOCAL_DATE", "LocalTime": "LOCAL_TIME",
             "LocalDateTime": "LOCAL_DATE_TIME", "AutoConsume": "AUTO_CONSUME"}
    return names.get(name, name.upper())


class SchemaRegistry:
    """Schema versions per schema id; persisted through ``store`` when given."""

    def __init__(self, store: SchemaFile | None = None, *,
                 strategy: Strategy = DEFAULT_STRATEGY,
                 limits: SchemaLimits | None = None) -> None:
        self.store = store
        self.strategy = strategy
        self.limits = limits if limits is not None else SchemaLimits()
        # None: a version lost to damage in the data directory.
        self._versions: dict[str, list[StoredSchema | None]] = {}

    def recover(self) -> None:
        """Read the store's versions, then compact it. A version lost to damage in the file
        (``--repair``) stays a gap: later ones keep their numbers, which messages carry."""
        if self.store is None:
            return
        for schema_id, version, schema in self.store.load():
            if schema is None:
                self._versions.pop(schema_id, None)
                continue
            versions = self._versions.setdefault(schema_id, [])
            if version < len(versions):
                log.warning("%s: a second record of schema version %d: skipped", schema_id,
                            version)
                continue
            if version > len(versions):
                log.warning("%s: schema versions %d to %d are lost", schema_id, len(versions),
                            version - 1)
                versions.extend([None] * (version - len(versions)))
            versions.append(schema)
        self.store.rewrite(self._versions.items())
        if self._versions:
            log.info("recovered the schemas of %d topics", len(self._versions))

    def close(self) -> None:
        if self.store is not None:
            self.store.close()

    # --- reading ---------------------------------------------------------------------------

    def versions(self, topic: str) -> list[StoredSchema]:
        """The versions of ``topic``'s schema (fully qualified name), oldest first."""
        return [s for s in self._versions.get(schema_id_of(topic), ()) if s is not None]

    def has_schema(self, topic: str) -> bool:
        return bool(self.versions(topic))

    def get(self, topic: str, version: int | None = None) -> tuple[int, StoredSchema] | None:
        """The given version (the latest if None) of ``topic``'s schema, if there is one."""
        versions = self._versions.get(schema_id_of(topic), [])
        if version is None:
            version = len(versions) - 1
        if 0 <= version < len(versions):
            schema = versions[version]
            if schema is not None:
                return version, schema
        return None

    # --- changing --------------------------------------------------------------------------

    def _check_limits(self, schema: StoredSchema) -> None:
        size = len(schema.data) + sum(len(k.encode("utf-8", "surrogatepass"))
                                      + len(v.encode("utf-8", "surrogatepass"))
                                      for k, v in schema.properties)
        if size > self.limits.max_schema_size:
            raise SchemaLimitExceeded(
                f"schema of {size} bytes (definition and properties) is over the limit of "
                f"{self.limits.max_schema_size} (--max-schema-size)")

    @staticmethod
    def _typed(schema: StoredSchema) -> TypedDefinition:
        return TypedDefinition(schema.type_, schema.data, _type_name(schema.type_))

    def put_if_absent(self, topic: str, schema: StoredSchema) -> int:
        """The version of ``schema`` on ``topic``, added if no version has its type and
        definition. Raises ``IncompatibleSchema`` or ``SchemaLimitExceeded`` (nothing is
        stored then), or ``OSError`` if it cannot be written."""
        schema_id = schema_id_of(topic)
        versions = self._versions.get(schema_id, [])
        for version, existing in enumerate(versions):
            if existing is not None and existing.type_ == schema.type_ \
                    and existing.data == schema.data:
                return version
        self._check_limits(schema)
        if len(versions) >= self.limits.max_versions:
            raise SchemaLimitExceeded(
                f"{schema_id} has {len(versions)} schema versions, the limit "
                f"(--max-schema-versions)")
        check_new_schema(self._typed(schema),
                         [self._typed(s) for s in versions if s is not None], self.strategy)
        version = len(versions)
        if self.store is not None:
            self.store.added(schema_id, version, schema)  # first: nothing held unstored
        self._versions.setdefault(schema_id, []).append(schema)
        log.info("%s: schema version %d (%s)", schema_id, version, _type_name(schema.type_))
        return version

    def check_consumer(self, topic: str, schema: StoredSchema) -> None:
        """Raise ``IncompatibleSchema`` unless a consumer with ``schema`` may read ``topic``."""
        self._check_limits(schema)
        check_consumer_schema(self._typed(schema),
                              [self._typed(s) for s in self.versions(topic)], self.strategy)

    def delete(self, topic: str) -> None:
        """Forget ``topic``'s schemas (when the topic is deleted)."""
        schema_id = schema_id_of(topic)
        if schema_id in self._versions:
            if self.store is not None:
                self.store.deleted(schema_id)
            del self._versions[schema_id]
