"""A bare Pulsar connection for tests of the embedded broker: frames in and out, no state
machines, no retries, so a test sends exactly the bytes it needs (broken ones too)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from protoframe.clients.pulsar.broker.schemas import decode_version, encode_version
from protoframe.generated.pulsar import frames
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandConnect,
    CommandFlow,
    CommandGetOrCreateSchema,
    CommandGetSchema,
    CommandProducer,
    CommandSend,
    CommandSubscribe,
    MessageMetadata,
    Schema,
    ServerError,
)

Type = BaseCommand.Type
SubType = CommandSubscribe.SubType
TIMEOUT = 5.0


def run(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """Run an async test in a fresh event loop, bounded in time."""

    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(asyncio.wait_for(test(*args, **kwargs), 60))

    return wrapper


class RawClient:
    """A bare connection: frames in and out, no state machines, no retries."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.decoder = frames.StreamDecoder()
        self.pending: list[frames.Frame] = []

    @classmethod
    async def connect(cls, url: str, *, handshake: bool = True,
                      protocol_version: int = 20) -> RawClient:
        host, port = url.removeprefix("pulsar://").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        client = cls(reader, writer)
        if handshake:
            await client.send(BaseCommand(type_=Type.CONNECT, connect=CommandConnect(
                client_version="raw-test", protocol_version=protocol_version)))
            await client.expect(Type.CONNECTED)
        return client

    async def send(self, command: BaseCommand, payload: frames.Payload | None = None) -> None:
        await self.send_bytes(frames.Frame(command=command, payload=payload).encode())

    async def send_bytes(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def recv(self, timeout: float = TIMEOUT) -> frames.Frame:
        deadline = time.monotonic() + timeout
        while not self.pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no frame")
            data = await asyncio.wait_for(self.reader.read(65536), left)
            if not data:
                raise ConnectionError("closed by the broker")
            self.pending.extend(self.decoder.feed(data))
        return self.pending.pop(0)

    async def expect(self, kind: BaseCommand.Type, timeout: float = TIMEOUT) -> frames.Frame:
        frame = await self.recv(timeout)
        assert frame.command.type_ == kind, f"expected {kind.name}, got {frame.command!r}"
        return frame

    async def nothing(self, wait: float = 0.2) -> None:
        with pytest.raises(TimeoutError):
            frame = await self.recv(wait)
            raise AssertionError(f"unexpected {frame.command!r}")

    async def closed_by_broker(self, timeout: float = TIMEOUT) -> bool:
        try:
            while True:
                await self.recv(timeout)
        except ConnectionError:
            return True
        except TimeoutError:
            return False

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except ConnectionError:
            pass

    # --- commands ---------------------------------------------------------------------

    async def producer(self, topic: str, producer_id: int = 1, request_id: int = 1,
                       name: str | None = None) -> frames.Frame:
        await self.send(BaseCommand(type_=Type.PRODUCER, producer=CommandProducer(
            topic=topic, producer_id=producer_id, request_id=request_id, producer_name=name)))
        return await self.recv()

    async def publish(self, producer_id: int, sequence_id: int, data: bytes,
                      *, batch: int = 0, producer_name: str = "raw") -> None:
        metadata = MessageMetadata(producer_name=producer_name, sequence_id=sequence_id,
                                   publish_time=int(time.time() * 1000))
        if batch:
            metadata.num_messages_in_batch = batch
        await self.send(BaseCommand(type_=Type.SEND, send=CommandSend(
            producer_id=producer_id, sequence_id=sequence_id, num_messages=batch or 1)),
            frames.Payload(metadata=metadata, data=data))

    async def receipt(self) -> tuple[int, int]:
        frame = await self.expect(Type.SEND_RECEIPT)
        assert frame.command.send_receipt is not None
        mid = frame.command.send_receipt.message_id
        assert mid is not None
        return mid.ledgerId, mid.entryId

    async def subscribe(self, topic: str, sub: str, consumer_id: int = 1, request_id: int = 1,
                        sub_type: SubType = SubType.Exclusive, permits: int = 0) -> None:
        await self.send(BaseCommand(type_=Type.SUBSCRIBE, subscribe=CommandSubscribe(
            topic=topic, subscription=sub, subType=sub_type, consumer_id=consumer_id,
            request_id=request_id, initialPosition=CommandSubscribe.InitialPosition.Earliest)))
        await self.expect(Type.SUCCESS)
        if permits:
            await self.flow(consumer_id, permits)

    async def flow(self, consumer_id: int, permits: int) -> None:
        await self.send(BaseCommand(type_=Type.FLOW, flow=CommandFlow(
            consumer_id=consumer_id, messagePermits=permits)))

    async def message(self) -> tuple[int, bytes, frames.Frame]:
        frame = await self.expect(Type.MESSAGE)
        assert frame.command.message is not None and frame.payload is not None
        return frame.command.message.message_id.entryId, frame.payload.data, frame


async def subscribe_raw(client: RawClient, topic: str, sub: str, **extra: Any) -> frames.Frame:
    fields: dict[str, Any] = {"subType": SubType.Exclusive, **extra}
    await client.send(BaseCommand(type_=Type.SUBSCRIBE, subscribe=CommandSubscribe(
        topic=topic, subscription=sub, consumer_id=1, request_id=1,
        initialPosition=CommandSubscribe.InitialPosition.Earliest, **fields)))
    return await client.recv()


def refused(frame: frames.Frame, error: ServerError, *words: str) -> None:
    body = frame.command.error
    assert body is not None, f"expected ERROR, got {frame.command!r}"
    assert body.error == error
    for word in words:
        assert word in body.message


async def get_or_create_schema(client: RawClient, topic: str, schema: Schema
                               ) -> tuple[int | None, ServerError | None]:
    """GET_OR_CREATE_SCHEMA: the version found or made, or the error answered."""
    await client.send(BaseCommand(type_=Type.GET_OR_CREATE_SCHEMA,
                                  getOrCreateSchema=CommandGetOrCreateSchema(
                                      request_id=7, topic=topic, schema=schema)))
    answer = (await client.expect(Type.GET_OR_CREATE_SCHEMA_RESPONSE)
              ).command.getOrCreateSchemaResponse
    assert answer is not None
    if answer.has_error_code():
        return None, answer.error_code
    return decode_version(answer.schema_version), None


async def get_schema(client: RawClient, topic: str, version: int | None
                     ) -> tuple[int | None, Schema | None, ServerError | None]:
    """GET_SCHEMA of ``version`` (the latest when None): its version and schema, or the error
    answered."""
    request = CommandGetSchema(request_id=8, topic=topic)
    if version is not None:
        request.schema_version = encode_version(version)
    await client.send(BaseCommand(type_=Type.GET_SCHEMA, getSchema=request))
    answer = (await client.expect(Type.GET_SCHEMA_RESPONSE)).command.getSchemaResponse
    assert answer is not None
    if answer.has_error_code():
        return None, None, answer.error_code
    return decode_version(answer.schema_version), answer.schema, None
