"""What a consumer's schema needs from the client: ``AutoConsumeSchema`` fetches the topic's
schemas by version (GET_SCHEMA) before the consumer hands a message over."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from protoframe.clients.pulsar import errors
from protoframe.clients.pulsar.schema.auto import AutoConsumeSchema
from protoframe.clients.pulsar.schema.base import Schema
from protoframe.clients.pulsar.session import Session
from protoframe.generated.pulsar import pulsar_api as pb

__all__ = ["bind_consumer_schema", "get_schema"]


class _Prepared(Protocol):
    """A ``Consumer``, as far as its ``prepare`` hook."""

    prepare: Callable[[bytes], Awaitable[None]] | None


async def get_schema(session: Session, topic: str, schema_version: bytes | None = None
                     ) -> pb.Schema | None:
    """The schema of ``topic`` at ``schema_version`` (the latest when None); None when the
    topic has none."""
    cnx = await session.connection_for(topic)
    try:
        answer = await cnx.requests.get_schema(topic, schema_version=schema_version,
                                               timeout=session.operation_timeout)
    except Exception as exc:
        raise errors.wrap_error(exc, f"get schema of {topic}") from None
    if answer.has_error_code():
        if answer.error_code is pb.ServerError.TopicNotFound:
            return None
        raise errors.from_server_error(answer.error_code, answer.error_message)
    return answer.schema


def bind_consumer_schema(consumer: _Prepared, schema: Schema[Any], session: Session,
                         topic: str) -> None:
    """Give an ``AutoConsumeSchema`` its way to the registry and the consumer its hook."""
    if isinstance(schema, AutoConsumeSchema):
        async def fetch(version: bytes | None) -> pb.Schema | None:
            return await get_schema(session, topic, version)

        schema.bind(fetch)
        consumer.prepare = schema.prepare
