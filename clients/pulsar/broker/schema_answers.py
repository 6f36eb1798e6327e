"""The broker's answers about schemas: GET_SCHEMA, GET_OR_CREATE_SCHEMA, and the schema checks of
PRODUCER and SUBSCRIBE (``commands.Commands`` calls ``_producer_schema``/``_consumer_schema``).

As Pulsar's broker does (with its defaults: schema validation not enforced, automatic schema
updates allowed): a producer's schema is found or registered as a new version if compatible; a
producer without a schema is accepted on any topic; a consumer's schema is registered if the
topic is idle (no schema, producer, consumer or message yet), and otherwise must be able to
read the topic's schema. A refusal is ``ServerError.IncompatibleSchema`` with the reason.
"""

from __future__ import annotations

from protoframe.generated.pulsar import frames
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandGetOrCreateSchema,
    CommandGetOrCreateSchemaResponse,
    CommandGetSchema,
    CommandGetSchemaResponse,
    KeyValue,
    Schema,
    ServerError,
)

from .lookups import LookupAnswers
from .schemas import (
    IncompatibleSchema,
    SchemaLimitExceeded,
    StoredSchema,
    decode_version,
    encode_version,
    schema_id_of,
)
from .state import BrokerState
from .topics import Topic, base_topic

__all__ = ["SchemaAnswers", "SchemaRefused"]

Type = BaseCommand.Type

# Schema types a consumer names without bringing a schema of its own.
_NOT_CHECKED = frozenset({Schema.Type.AutoConsume, Schema.Type.External})


class SchemaRefused(Exception):
    """A schema the broker does not take; ``error`` is the answer's code."""

    def __init__(self, error: ServerError, message: str) -> None:
        super().__init__(message)
        self.error = error


def stored(schema: Schema) -> StoredSchema:
    return StoredSchema(int(schema.type_), bytes(schema.schema_data),
                        tuple((p.key, p.value) for p in schema.properties))


def _register(broker: BrokerState, topic: str, schema: Schema) -> int:
    try:
        return broker.schemas.put_if_absent(topic, stored(schema))
    except IncompatibleSchema as exc:
        raise SchemaRefused(ServerError.IncompatibleSchema, str(exc)) from None
    except SchemaLimitExceeded as exc:
        raise SchemaRefused(ServerError.NotAllowedError, str(exc)) from None
    except OSError as exc:
        raise SchemaRefused(ServerError.PersistenceError,
                            f"cannot store the schema: {exc}") from None


class SchemaAnswers(LookupAnswers):
    """The schema hooks of a session; ``commands.Commands`` is the whole of them."""

    def _producer_schema(self, topic: Topic, schema: Schema | None) -> bytes:
        """The schema version to answer a producer with; raises ``SchemaRefused``."""
        if schema is None:
            return b""  # as Pulsar answers: its empty version
        return encode_version(_register(self.broker, topic.name, schema))

    def _consumer_schema(self, topic: Topic, schema: Schema | None) -> None:
        """Register or check a consumer's schema; raises ``SchemaRefused``."""
        if schema is None or schema.type_ in _NOT_CHECKED:
            return
        registry = self.broker.schemas
        idle = not (registry.has_schema(topic.name) or topic.producer_names
                    or topic.next_entry_id > 0
                    or any(sub.consumers for sub in topic.subscriptions.values()))
        if idle:
            _register(self.broker, topic.name, schema)
            return
        try:
            registry.check_consumer(topic.name, stored(schema))
        except IncompatibleSchema as exc:
            raise SchemaRefused(ServerError.IncompatibleSchema, str(exc)) from None
        except SchemaLimitExceeded as exc:
            raise SchemaRefused(ServerError.NotAllowedError, str(exc)) from None

    def on_get_schema(self, body: CommandGetSchema, frame: frames.Frame) -> None:
        answer = CommandGetSchemaResponse(request_id=body.request_id)
        name, refusal = self._topic_name(body.topic)
        if name is None:
            answer.error_code = ServerError.InvalidTopicName
            answer.error_message = refusal
        else:
            version: int | None = None
            if body.has_schema_version():
                version = decode_version(body.schema_version)
            found = (self.broker.schemas.get(name, version)
                     if version is not None or not body.has_schema_version() else None)
            if found is None:
                answer.error_code = ServerError.TopicNotFound
                answer.error_message = f"Topic not found or no-schema {body.topic}"
            else:
                number, schema = found
                answer.schema = Schema(
                    name=schema_id_of(name), schema_data=schema.data,
                    type_=Schema.Type(schema.type_),
                    properties=[KeyValue(key=k, value=v) for k, v in schema.properties])
                answer.schema_version = encode_version(number)
        self._emit(BaseCommand(type_=Type.GET_SCHEMA_RESPONSE, getSchemaResponse=answer))

    def on_get_or_create_schema(self, body: CommandGetOrCreateSchema,
                                frame: frames.Frame) -> None:
        answer = CommandGetOrCreateSchemaResponse(request_id=body.request_id)
        name, refusal = self._topic_name(body.topic)
        if name is None:
            answer.error_code = ServerError.InvalidTopicName
            answer.error_message = refusal
        elif name not in self.broker.topics and base_topic(name) not in self.broker.partitioned:
            answer.error_code = ServerError.TopicNotFound
            answer.error_message = "Topic not found"
        else:
            try:
                answer.schema_version = encode_version(
                    _register(self.broker, name, body.schema))
            except SchemaRefused as exc:
                answer.error_code = exc.error
                answer.error_message = str(exc)
        self._emit(BaseCommand(type_=Type.GET_OR_CREATE_SCHEMA_RESPONSE,
                               getOrCreateSchemaResponse=answer))
