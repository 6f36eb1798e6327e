"""A synchronous facade over the asyncio client, for code that is not async.

``Client`` starts an event loop in a background thread and runs the asyncio ``PulsarClient``
there; every method submits a coroutine to that loop and blocks until it finishes. Names and
arguments are those of the official synchronous client::

    client = Client("pulsar://127.0.0.1:6650")
    producer = client.create_producer("my-topic")
    producer.send(b"hello")
    consumer = client.subscribe("my-topic", "sub", consumer_type="Shared",
                                initial_position="earliest")
    msg = consumer.receive(timeout_millis=5000)
    consumer.acknowledge(msg)
    client.close()

``send_async(content, callback)`` returns at once; ``callback(error, message_id)`` runs later
on the client's thread, as in the official client.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

from protoframe.clients.pulsar import sync_readers
from protoframe.clients.pulsar.client import PulsarClient
from protoframe.clients.pulsar.consumer import Consumer as AsyncConsumer
from protoframe.clients.pulsar.errors import AlreadyClosed
from protoframe.clients.pulsar.message import Message, MessageId
from protoframe.clients.pulsar.multi_subscribe import TopicsArgument
from protoframe.clients.pulsar.producer import Producer as AsyncProducer
from protoframe.clients.pulsar.producer import SendCallback
from protoframe.clients.pulsar.reader import Reader as AsyncReader
from protoframe.clients.pulsar.schema.base import Schema, ValueT

__all__ = ["Client", "Consumer", "Producer"]

R = TypeVar("R")


class _LoopThread:
    """An event loop running in a daemon thread."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        try:
            self.loop.run_forever()
        finally:
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            if pending:
                self.loop.run_until_complete(
                    asyncio.gather(*pending, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    def run(self, coro: Coroutine[Any, Any, R], timeout: float | None = None) -> R:
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("blocking call from the client's own thread (e.g. a callback)")
        if self.loop.is_closed():
            coro.close()
            raise AlreadyClosed("the client is closed")
        future: Future[R] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def call(self, fn: Callable[[], Any]) -> None:
        self.loop.call_soon_threadsafe(fn)

    def stop(self) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.current_thread() is not self.thread:
            self.thread.join(timeout=10)


class Producer(Generic[ValueT]):
    """A producer; see ``clients.pulsar.producer.Producer``."""

    def __init__(self, runner: _LoopThread, producer: AsyncProducer[ValueT]) -> None:
        self._runner = runner
        self._producer = producer

    def topic(self) -> str:
        return self._producer.topic()

    def producer_name(self) -> str:
        return self._producer.producer_name()

    def last_sequence_id(self) -> int:
        return self._producer.last_sequence_id()

    def is_connected(self) -> bool:
        return self._producer.is_connected()

    def send(self, content: ValueT, properties: dict[str, str] | None = None,
             partition_key: str | None = None, event_timestamp: int | None = None,
             sequence_id: int | None = None, **options: Any) -> MessageId:
        """Send and wait for the broker's receipt; return the message id."""
        return self._runner.run(self._producer.send(
            content, properties=properties, partition_key=partition_key,
            event_timestamp=event_timestamp, sequence_id=sequence_id, **options))

    def send_async(self, content: ValueT, callback: SendCallback | None = None,
                   properties: dict[str, str] | None = None,
                   partition_key: str | None = None, event_timestamp: int | None = None,
                   sequence_id: int | None = None, **options: Any) -> None:
        """Queue a message and return; ``callback(error, message_id)`` runs on completion."""
        producer = self._producer

        def submit() -> None:
            try:
                producer.send_async(content, callback, properties=properties,
                                    partition_key=partition_key,
                                    event_timestamp=event_timestamp, sequence_id=sequence_id,
                                    **options)
            except Exception as exc:
                if callback is not None:
                    callback(exc, None)

        self._runner.call(submit)

    def flush(self) -> None:
        self._runner.run(self._producer.flush())

    def close(self) -> None:
        self._runner.run(self._producer.close())


class Consumer(Generic[ValueT]):
    """A consumer; see ``clients.pulsar.consumer.Consumer``."""

    def __init__(self, runner: _LoopThread, consumer: AsyncConsumer[ValueT]) -> None:
        self._runner = runner
        self._consumer = consumer

    def topic(self) -> str:
        return self._consumer.topic()

    def subscription_name(self) -> str:
        return self._consumer.subscription_name()

    def consumer_name(self) -> str:
        return self._consumer.consumer_name()

    def is_connected(self) -> bool:
        return self._consumer.is_connected()

    def receive(self, timeout_millis: int | None = None) -> Message[ValueT]:
        """The next message; raises ``Timeout`` after ``timeout_millis`` without one."""
        return self._runner.run(self._consumer.receive(timeout_millis))

    def acknowledge(self, message: Message[Any] | MessageId) -> None:
        consumer = self._consumer
        self._runner.call(lambda: consumer.acknowledge_nowait(message))

    def acknowledge_cumulative(self, message: Message[Any] | MessageId) -> None:
        self._runner.run(self._consumer.acknowledge_cumulative(message))

    def negative_acknowledge(self, message: Message[Any] | MessageId) -> None:
        consumer = self._consumer
        self._runner.call(lambda: consumer.negative_acknowledge(message))

    def redeliver_unacknowledged_messages(self) -> None:
        self._runner.call(self._consumer.redeliver_unacknowledged_messages)

    def pause_message_listener(self) -> None:
        self._runner.call(self._consumer.pause_message_listener)

    def resume_message_listener(self) -> None:
        self._runner.call(self._consumer.resume_message_listener)

    def reconsume_later(self, message: Message, delay_ms: int = 0,
                        properties: dict[str, str] | None = None) -> None:
        """See ``clients.pulsar.consumer.Consumer.reconsume_later``."""
        self._runner.run(self._consumer.reconsume_later(message, delay_ms, properties))

    def seek(self, message_id: MessageId | int) -> None:
        self._runner.run(self._consumer.seek(message_id))

    def unsubscribe(self) -> None:
        self._runner.run(self._consumer.unsubscribe())

    def close(self) -> None:
        self._runner.run(self._consumer.close())


class Client:
    """A synchronous client: ``PulsarClient`` on a background event loop.

    Keyword arguments are those of ``PulsarClient``.
    """

    def __init__(self, service_url: str, **options: Any) -> None:
        self._client = PulsarClient(service_url, **options)
        self._runner = _LoopThread(f"pulsar-client {self._client.service_url}")
        self._closed = False

    def create_producer(self, topic: str, producer_name: str | None = None,
                        schema: Schema[ValueT] | None = None, **options: Any
                        ) -> Producer[ValueT]:
        producer = self._runner.run(
            self._client.create_producer(topic, producer_name, schema=schema, **options))
        return Producer(self._runner, producer)

    def subscribe(self, topic: TopicsArgument, subscription_name: str, consumer_type: Any = None,
                  schema: Schema[ValueT] | None = None,
                  message_listener: Callable[[Consumer[ValueT], Message[ValueT]], object]
                  | None = None, **options: Any) -> Consumer[ValueT]:
        """``message_listener(consumer, message)`` gets this synchronous ``Consumer`` and runs
        on a worker thread, one message at a time (so it may block, and call the consumer)."""
        consumer = self._runner.run(
            self._client.subscribe(topic, subscription_name, consumer_type, schema=schema,
                                   **options))
        wrapped = Consumer(self._runner, consumer)
        if message_listener is not None:
            listener = message_listener

            async def on_thread(_: AsyncConsumer[Any], msg: Message[Any]) -> None:
                await asyncio.get_running_loop().run_in_executor(None, listener, wrapped, msg)

            async def start() -> None:
                consumer.start_listener(on_thread)

            self._runner.run(start())
        return wrapped

    def create_reader(self, topic: str, start_message_id: MessageId,
                      reader_name: str | None = None,
                      subscription_role_prefix: str | None = None,
                      schema: Schema[ValueT] | None = None,
                      reader_listener: Callable[[sync_readers.Reader[ValueT], Message[ValueT]],
                                                object] | None = None,
                      **options: Any) -> sync_readers.Reader[ValueT]:
        """``reader_listener(reader, message)`` gets this synchronous ``Reader`` and runs on a
        worker thread, one message at a time (as ``subscribe``'s ``message_listener``)."""
        reader = self._runner.run(self._client.create_reader(
            topic, start_message_id, reader_name, subscription_role_prefix, schema=schema,
            **options))
        wrapped = sync_readers.Reader(self._runner, reader)
        if reader_listener is not None:
            listener = reader_listener

            async def on_thread(_: AsyncReader[Any], msg: Message[Any]) -> None:
                await asyncio.get_running_loop().run_in_executor(None, listener, wrapped, msg)

            async def start() -> None:
                reader.start_listener(on_thread)

            self._runner.run(start())
        return wrapped

    def create_table_view(self, topic: str, **options: Any) -> sync_readers.TableView[bytes]:
        view = self._runner.run(self._client.create_table_view(topic, **options))
        return sync_readers.TableView(self._runner, view)

    def get_topic_partitions(self, topic: str) -> list[str]:
        return self._runner.run(self._client.get_topic_partitions(topic))

    def close(self) -> None:
        """Close producers, consumers and connections, then stop the background loop."""
        if self._closed:
            return
        self._closed = True
        try:
            self._runner.run(self._client.close(), timeout=self._client.operation_timeout + 5)
        finally:
            self._runner.stop()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
