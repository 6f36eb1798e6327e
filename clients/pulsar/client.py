"""``PulsarClient``: the asyncio entry point, shaped like the official client.

One client holds one connection per broker (``runtime.io.connection.ConnectionPool``), shared by
all its producers and consumers, plus the lookup service that finds which broker serves a
topic. Creating a producer or consumer asks for the topic's partitions first
(PARTITIONED_METADATA), then looks up and connects each partition (LOOKUP, then PRODUCER or
SUBSCRIBE on the broker's connection), as the official clients do.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import ssl
import uuid
from collections.abc import Callable
from typing import Any, cast

from protoframe.clients.pulsar import errors
from protoframe.clients.pulsar.auth import AuthenticationTLS, AuthenticationToken
from protoframe.clients.pulsar.connection import ClientConnection, split_url
from protoframe.clients.pulsar.consumer import (
    Consumer,
    ConsumerConfig,
    ConsumerType,
    InitialPosition,
    InitialPositionName,
    ReceiveQueue,
    SubscriptionTypeName,
    TopicConsumer,
    parse_initial_position,
    parse_sub_type,
)
from protoframe.clients.pulsar.consumer.consumer import MessageListener
from protoframe.clients.pulsar.consumer.dead_letters import MAX_RECONSUMETIMES, Letters
from protoframe.clients.pulsar.consumer.policies import (
    ConsumerDeadLetterPolicy,
    RedeliveryBackoff,
)
from protoframe.clients.pulsar.handle import start_all
from protoframe.clients.pulsar.lookup import LookupService, TopicName
from protoframe.clients.pulsar.message import MessageId
from protoframe.clients.pulsar.multi_subscribe import (
    TopicsArgument,
    follow_producer_partitions,
    subscribe_topics,
)
from protoframe.clients.pulsar.producer import (
    CompressionName,
    PartitionsRoutingMode,
    Producer,
    ProducerConfig,
    TopicProducer,
)
from protoframe.clients.pulsar.producer.memory import MemoryLimit
from protoframe.clients.pulsar.reader import Reader, ReaderListener, open_reader
from protoframe.clients.pulsar.routing import HashingScheme
from protoframe.clients.pulsar.schema.base import Schema, ValueT
from protoframe.clients.pulsar.schema.binding import bind_consumer_schema
from protoframe.clients.pulsar.session import Session
from protoframe.clients.pulsar.table_view import TableView
from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.runtime.errors import ConnectionClosed
from protoframe.runtime.io.auth import Authentication, NoAuthentication
from protoframe.runtime.io.pool import ConnectionPool
from protoframe.runtime.io.retry import RetryPolicy
from protoframe.runtime.io.tls import make_ssl_context

__all__ = ["PulsarClient"]

log = logging.getLogger(__name__)

_PERSISTENT_TOPICS = pb.CommandGetTopicsOfNamespace.Mode.PERSISTENT


class PulsarClient:
    """A client of one Pulsar cluster, reached at ``service_url``.

    ``pulsar://host:port`` connects in the clear, ``pulsar+ssl://host:port`` over TLS (trusting
    ``tls_trust_certs_file_path``, or the system store). ``auth``/``authentication`` is an
    ``Authentication`` plug-in (``AuthenticationToken("...")``) or a token string.
    Nothing is connected until the first producer or consumer is created.

    ``create_retry_policy`` (``runtime.io.retry.RetryPolicy``) spaces the attempts at creating a
    producer or subscribing after a transient failure (default: 0.1 s doubling to 2 s, within
    the operation timeout); ``reconnect_retry_policy`` those at getting one back after a lost
    connection (default: 0.1 s doubling to 30 s, without end until it is closed).

    Every ``partitions_update_interval_ms`` (60 s, as the official C++ core's
    ``partitionsUpdateInterval``; None or 0: never) producers and consumers of partitioned
    topics ask for the partition count again and start on the partitions added since.
    """

    def __init__(
        self,
        service_url: str,
        *,
        auth: Authentication | str | None = None,
        authentication: Authentication | str | None = None,
        operation_timeout_seconds: float = 30,
        connection_timeout_ms: int = 10000,
        keepalive_interval_seconds: float = 30,
        tls_trust_certs_file_path: str | None = None,
        tls_allow_insecure_connection: bool = False,
        tls_validate_hostname: bool = False,
        tls_certificate_file_path: str | None = None,
        tls_private_key_file_path: str | None = None,
        listener_name: str | None = None,
        max_lookup_redirects: int = 20,
        create_retry_policy: RetryPolicy | None = None,
        reconnect_retry_policy: RetryPolicy | None = None,
        partitions_update_interval_ms: int | None = 60000,
        memory_limit_bytes: int = 0,
    ) -> None:
        if not (service_url.startswith("pulsar://") or service_url.startswith("pulsar+ssl://")):
            raise errors.InvalidUrl(
                f"service URL {service_url!r} must start with pulsar:// or pulsar+ssl://")
        host, port, tls = split_url(service_url)
        self.service_url = f"{'pulsar+ssl' if tls else 'pulsar'}://{host}:{port}"
        self.use_tls = tls
        credentials = auth if auth is not None else authentication
        if isinstance(credentials, str):
            credentials = AuthenticationToken(credentials)
        self.authentication: Authentication = credentials or NoAuthentication()
        self.operation_timeout = float(operation_timeout_seconds)
        self.connection_timeout = connection_timeout_ms / 1000.0
        self.keepalive_interval = float(keepalive_interval_seconds)
        self._tls_ca = tls_trust_certs_file_path
        self._tls_insecure = tls_allow_insecure_connection
        self._tls_hostname = tls_validate_hostname
        self._tls_cert = tls_certificate_file_path
        self._tls_key = tls_private_key_file_path
        self._ssl: ssl.SSLContext | None = None
        self._pool: ConnectionPool[tuple[str, str], ClientConnection] = \
            ConnectionPool(self._open_connection)
        self.lookup = LookupService(self.service_url, self.get_connection, use_tls=tls,
                                    max_redirects=max_lookup_redirects,
                                    listener_name=listener_name)
        self._session = Session(self.lookup, self.get_connection,
                                operation_timeout=self.operation_timeout, forget=self._forget,
                                create_retry=create_retry_policy,
                                reconnect_retry=reconnect_retry_policy)
        self._producer_ids = itertools.count()
        self._consumer_ids = itertools.count()
        self._producers: list[Producer[Any]] = []
        self._consumers: list[Consumer[Any]] = []
        self._closed = False
        self._partitions_update_interval = (partitions_update_interval_ms or 0) / 1000.0
        if memory_limit_bytes < 0:
            raise errors.InvalidConfiguration("memory_limit_bytes must be 0 (no limit) or more")
        self.memory_limit = MemoryLimit(memory_limit_bytes) if memory_limit_bytes else None

    def __repr__(self) -> str:
        return f"<PulsarClient {self.service_url}>"

    # ---- connections ------------------------------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext | None:
        if self._ssl is None:
            cert, key = self._tls_cert, self._tls_key
            if cert is None and isinstance(self.authentication, AuthenticationTLS):
                cert = self.authentication.certificate_path
                key = self.authentication.private_key_path
            self._ssl = make_ssl_context(
                self._tls_ca, verify=not self._tls_insecure,
                check_hostname=self._tls_hostname and not self._tls_insecure,
                cert_file=cert, key_file=key)
        return self._ssl

    async def _open_connection(self, key: tuple[str, str]) -> ClientConnection:
        logical, physical = key
        cnx = ClientConnection(self, logical, physical)
        cnx.on_close(lambda c, exc: self._pool.discard(key, c))
        await cnx.open()
        return cnx

    async def get_connection(self, logical: str, physical: str | None = None
                             ) -> ClientConnection:
        """The pooled connection to ``logical`` (through ``physical``, when it differs)."""
        if self._closed:
            raise errors.AlreadyClosed("the client is closed")
        try:
            return await self._pool.get((logical, physical or logical))
        except ConnectionClosed as exc:
            raise errors.ConnectError(str(exc)) from exc
        except Exception as exc:
            raise errors.wrap_error(exc, f"connect to {physical or logical}") from None

    def connection_count(self) -> int:
        """Open broker connections (for tests and monitoring)."""
        return len(self._pool)

    # ---- producers --------------------------------------------------------------------------

    async def create_producer(
        self,
        topic: str,
        producer_name: str | None = None,
        *,
        initial_sequence_id: int | None = None,
        send_timeout_millis: int = 30000,
        compression_type: pb.CompressionType | CompressionName = pb.CompressionType.NONE,
        max_pending_messages: int = 1000,
        block_if_queue_full: bool = False,
        batching_enabled: bool = True,
        batching_max_messages: int = 1000,
        batching_max_bytes: int | None = None,
        batching_max_allowed_size_in_bytes: int = 128 * 1024,
        batching_max_publish_delay_ms: float = 10,
        batching_type: str = "Default",
        properties: dict[str, str] | None = None,
        access_mode: pb.ProducerAccessMode = pb.ProducerAccessMode.Shared,
        message_routing_mode: PartitionsRoutingMode =
        PartitionsRoutingMode.RoundRobinDistribution,
        hashing_scheme: HashingScheme = HashingScheme.Murmur3_32Hash,
        message_router: Callable[[str | None, int], int] | None = None,
        chunking_enabled: bool = False,
        chunk_max_message_size: int = -1,
        schema: Schema[ValueT] | None = None,
    ) -> Producer[ValueT]:
        """Create a producer on ``topic`` (every partition of it, if it is partitioned).

        Batching is on by default, as in the official asyncio client. ``compression_type`` is a
        ``CompressionType`` or its name (``"LZ4"``, ``"ZSTD"``, ...). With a ``schema``
        (``clients.pulsar.schema``) the producer sends values of its type and registers it
        with the broker; without one it sends bytes.
        """
        self._check_open()
        if chunking_enabled and batching_enabled:
            # The official clients' rule: a chunked message is never part of a batch.
            raise errors.InvalidConfiguration(
                "Batching and chunking of messages can't be enabled together.")
        if isinstance(compression_type, str):
            try:
                compression = pb.CompressionType[compression_type.upper()]
            except KeyError:
                raise errors.InvalidConfiguration(
                    f"unknown compression type {compression_type!r}") from None
        else:
            compression = compression_type
        conf = ProducerConfig(
            producer_name=producer_name,
            initial_sequence_id=initial_sequence_id,
            send_timeout_millis=send_timeout_millis,
            compression_type=compression,
            max_pending_messages=max_pending_messages,
            block_if_queue_full=block_if_queue_full,
            batching_enabled=batching_enabled,
            batching_max_messages=batching_max_messages,
            batching_max_bytes=batching_max_bytes if batching_max_bytes is not None
            else batching_max_allowed_size_in_bytes,
            batching_max_publish_delay_ms=batching_max_publish_delay_ms,
            key_based_batching=batching_type.lower().replace("_", "") == "keybased",
            properties=dict(properties or {}),
            access_mode=access_mode,
            routing_mode=message_routing_mode,
            hashing_scheme=hashing_scheme,
            message_router=message_router,
            chunking_enabled=chunking_enabled,
            chunk_max_message_size=chunk_max_message_size,
            memory_limit=self.memory_limit,
            schema_info=schema.schema_info() if schema is not None else None,
        )
        name, parts = await self._partitions_of(topic)

        def make_child(part: str, index: int) -> TopicProducer:
            child = TopicProducer(self._session, part, index, conf, next(self._producer_ids))
            # A lone partition keeps the given name, as before partitions could be added.
            if producer_name is not None and index >= 0 and (len(parts) > 1 or index > 0):
                child.producer_name = f"{producer_name}-{index}"
            return child

        children = [make_child(part, index) for part, index in parts]
        await start_all(children)
        producer = Producer(self._session, name, children, conf, schema)
        follow_producer_partitions(producer, self._partitions_of, make_child,
                                   self._partitions_update_interval)
        self._producers.append(producer)
        return producer

    def _forget(self, handle: object) -> None:
        if isinstance(handle, Producer) and handle in self._producers:
            self._producers.remove(handle)
        elif isinstance(handle, Consumer) and handle in self._consumers:
            self._consumers.remove(handle)

    # ---- consumers --------------------------------------------------------------------------

    async def subscribe(
        self,
        topic: TopicsArgument,
        subscription_name: str,
        subscription_type: ConsumerType | pb.CommandSubscribe.SubType | SubscriptionTypeName
        | None = None,
        *,
        consumer_type: ConsumerType | pb.CommandSubscribe.SubType | SubscriptionTypeName
        | None = None,
        initial_position: InitialPosition | pb.CommandSubscribe.InitialPosition
        | InitialPositionName = "latest",
        receiver_queue_size: int = 1000,
        consumer_name: str | None = None,
        negative_ack_redelivery_delay_ms: int = 60000,
        ack_group_time_ms: int = 100,
        ack_group_max_size: int = 1000,
        batch_index_ack_enabled: bool = False,
        properties: dict[str, str] | None = None,
        is_read_compacted: bool = False,
        replicate_subscription_state_enabled: bool = False,
        durable: bool = True,
        start_message_id: MessageId | None = None,
        priority_level: int | None = None,
        key_shared_mode: pb.KeySharedMode = pb.KeySharedMode.AUTO_SPLIT,
        key_shared_ranges: list[tuple[int, int]] | None = None,
        allow_out_of_order_delivery: bool = False,
        deliver_entries: bool = False,
        unacked_messages_timeout_ms: int | None = None,
        tick_duration_ms: int = 1000,
        negative_ack_redelivery_backoff: RedeliveryBackoff | None = None,
        dead_letter_policy: ConsumerDeadLetterPolicy | None = None,
        retry_enable: bool = False,
        message_listener: MessageListener | None = None,
        subscription_properties: dict[str, str] | None = None,
        pattern_auto_discovery_period: float = 60,
        max_pending_chunked_message: int = 10,
        auto_ack_oldest_chunked_message_on_queue_full: bool = False,
        expire_time_of_incomplete_chunked_message_ms: int = 60000,
        schema: Schema[ValueT] | None = None,
    ) -> Consumer[ValueT]:
        """Subscribe to ``topic`` (every partition of it, if it is partitioned).

        ``subscription_type`` (or the official name ``consumer_type``) is ``"Exclusive"``
        (the default), ``"Shared"``, ``"Failover"`` or ``"Key_Shared"``, or a ``ConsumerType``.
        With ``deliver_entries`` the consumer hands over whole entries through
        ``receive_entries`` instead of messages, for bulk readers that do not acknowledge.

        ``topic`` is a topic name, a list of them, or a compiled ``re.Pattern`` matching whole
        topic names of one namespace (``re.compile("persistent://public/default/orders-.*")``),
        whose new topics are subscribed to as they appear: at once where the broker watches
        topic lists, else within ``pattern_auto_discovery_period`` seconds.
        ``unacked_messages_timeout_ms`` asks again for messages taken and not acknowledged in
        that time (checked every ``tick_duration_ms``); ``negative_ack_redelivery_backoff``
        (a ``MultiplierRedeliveryBackoff``) replaces the fixed negative-ack delay by one that
        grows with the redelivery count; ``dead_letter_policy`` and ``retry_enable`` (with
        ``Consumer.reconsume_later``) send messages to the dead-letter and retry topics;
        ``message_listener(consumer, message)``, a function or a coroutine function, gets
        every message from now until the consumer is closed; ``subscription_properties`` go
        with the subscription when it is created.
        With a ``schema`` messages' ``value()`` is decoded by it (and it is registered with
        the broker); without one it is the payload's bytes.
        """
        self._check_open()
        kind = subscription_type if subscription_type is not None else consumer_type
        conf = ConsumerConfig(
            sub_type=parse_sub_type(kind if kind is not None else "Exclusive"),
            initial_position=parse_initial_position(initial_position),
            receiver_queue_size=receiver_queue_size,
            consumer_name=consumer_name,
            negative_ack_redelivery_delay_ms=negative_ack_redelivery_delay_ms,
            ack_group_time_ms=ack_group_time_ms,
            ack_group_max_size=ack_group_max_size,
            batch_index_ack_enabled=batch_index_ack_enabled,
            properties=dict(properties or {}),
            durable=durable,
            read_compacted=is_read_compacted,
            replicate_subscription_state=replicate_subscription_state_enabled,
            priority_level=priority_level,
            key_shared_mode=key_shared_mode,
            key_shared_ranges=list(key_shared_ranges or []),
            allow_out_of_order_delivery=allow_out_of_order_delivery,
            start_message_id=start_message_id,
            deliver_entries=deliver_entries,
            unacked_messages_timeout_ms=unacked_messages_timeout_ms,
            tick_duration_ms=tick_duration_ms,
            negative_ack_redelivery_backoff=negative_ack_redelivery_backoff,
            dead_letter_policy=dead_letter_policy,
            retry_enable=retry_enable,
            subscription_properties=dict(subscription_properties or {}),
            max_pending_chunked_message=max_pending_chunked_message,
            auto_ack_oldest_chunked_message_on_queue_full=
            auto_ack_oldest_chunked_message_on_queue_full,
            expire_time_of_incomplete_chunked_message_ms=
            expire_time_of_incomplete_chunked_message_ms,
            schema=schema,
        )
        consumer = await subscribe_topics(
            self._session, topic, subscription_name, conf, partitions_of=self._partitions_of,
            list_namespace=lambda ns, mode: self.get_topics_of_namespace(ns, mode=mode),
            connect=lambda: self.get_connection(self.service_url),
            operation_timeout=self.operation_timeout,
            pattern_auto_discovery_period=pattern_auto_discovery_period,
            partitions_update_interval=self._partitions_update_interval,
            next_id=lambda: next(self._consumer_ids), letters_for=(
                (lambda label, queue: self._letters_for(topic, label, subscription_name, conf,
                                                        queue))
                if conf.dead_letter_policy is not None or conf.retry_enable else None))
        typed = cast("Consumer[ValueT]", consumer)
        if schema is not None:
            bind_consumer_schema(typed, schema, self._session, consumer.topic())
        self._consumers.append(consumer)
        if message_listener is not None:
            consumer.start_listener(message_listener)
        return typed

    async def _letters_for(self, topics: TopicsArgument, topic: str, subscription: str,
                           conf: ConsumerConfig, queue: ReceiveQueue
                           ) -> tuple[Letters | None, list[TopicConsumer]]:
        """The dead and retry letters of a new consumer of ``topics`` (``topic``: the one
        topic's full name), and its consumers on the retry topic (which feed its queue, as
        the official clients' consumer of both topics)."""
        policy = conf.dead_letter_policy
        if policy is None and conf.retry_enable:
            policy = ConsumerDeadLetterPolicy(MAX_RECONSUMETIMES)
        if policy is None:
            return None, []
        if not isinstance(topics, str) and (
                policy.dead_letter_topic is None
                or (conf.retry_enable and policy.retry_letter_topic is None)):
            # The default names are made from one topic's name.
            raise errors.InvalidConfiguration(
                "a consumer of several topics needs the dead_letter_topic (and, with "
                "retry_enable, the retry_letter_topic) named in its dead_letter_policy")

        async def open_producer(letter_topic: str) -> Producer:
            return await self.create_producer(letter_topic, batching_enabled=False)

        async def create_subscription(letter_topic: str, name: str) -> None:
            made = await self.subscribe(letter_topic, name, "Shared",
                                        initial_position="earliest", receiver_queue_size=1)
            await made.close()

        letters = Letters(policy, topic, subscription, open_producer, create_subscription)
        if not conf.retry_enable:
            return letters, []
        _, parts = await self._partitions_of(letters.retry_topic)
        return letters, [TopicConsumer(self._session, queue, part, index, subscription, conf,
                                       next(self._consumer_ids)) for part, index in parts]

    # ---- readers ----------------------------------------------------------------------------

    async def create_reader(
        self,
        topic: str,
        start_message_id: MessageId,
        reader_name: str | None = None,
        subscription_role_prefix: str | None = None,
        *,
        start_message_id_inclusive: bool = False,
        receiver_queue_size: int = 1000,
        is_read_compacted: bool = False,
        schema: Schema[ValueT] | None = None,
        reader_listener: ReaderListener[ValueT] | None = None,
    ) -> Reader[ValueT]:
        """A reader of ``topic`` from ``start_message_id`` (``MessageId.earliest``,
        ``MessageId.latest`` or a message's id), over a non-durable subscription.

        On a partitioned topic the reader reads every partition; its start is then
        ``earliest`` or ``latest``, or the id of a message of one of the partitions (the
        others start at the earliest). With a ``schema`` messages' ``value()`` is decoded by
        it (as a consumer's); ``reader_listener(reader, message)``, a function or a coroutine
        function, gets every message until the reader is closed, as the official client's.
        """
        self._check_open()
        name, parts = await self._partitions_of(topic)
        if len(parts) > 1 and start_message_id.partition() < 0 \
                and start_message_id not in (MessageId.earliest, MessageId.latest):
            raise errors.InvalidConfiguration(
                f"{name} is partitioned: start a reader at earliest, latest or the id of a "
                "message of one partition")
        return await self._open_reader(
            name, parts, start_message_id,
            f"{subscription_role_prefix or 'reader'}-{uuid.uuid4().hex[:10]}", reader_name,
            start_message_id_inclusive, receiver_queue_size, is_read_compacted, schema,
            reader_listener)

    async def _open_reader(self, name: str, parts: list[tuple[str, int]],
                           start_message_id: MessageId, subscription: str,
                           reader_name: str | None, start_message_id_inclusive: bool,
                           receiver_queue_size: int, is_read_compacted: bool,
                           schema: Schema[ValueT] | None = None,
                           reader_listener: ReaderListener[ValueT] | None = None
                           ) -> Reader[ValueT]:
        reader = await open_reader(
            self._session, name, parts, start_message_id, subscription, reader_name,
            start_message_id_inclusive, receiver_queue_size, is_read_compacted,
            next_id=lambda: next(self._consumer_ids), operation_timeout=self.operation_timeout,
            schema=schema, reader_listener=reader_listener)
        self._consumers.append(reader.consumer())
        return reader

    async def create_table_view(self, topic: str, subscription_name: str | None = None, *,
                                receiver_queue_size: int = 1000) -> TableView[bytes]:
        """The latest value of every key of ``topic``, kept up to date (``TableView``), read
        over a non-durable subscription named ``subscription_name`` (else a random name)."""
        self._check_open()
        name, parts = await self._partitions_of(topic)
        reader = await self._open_reader(
            name, parts, MessageId.earliest,
            subscription_name or f"table-view-{uuid.uuid4().hex[:10]}", None, False,
            receiver_queue_size, False)
        return await TableView.start(reader, bytes)

    # ---- other ------------------------------------------------------------------------------

    async def get_topic_partitions(self, topic: str) -> list[str]:
        """The partition topic names of ``topic`` (just ``topic`` if it is not partitioned)."""
        return [part for part, _ in (await self._partitions_of(topic))[1]]

    async def _partitions_of(self, topic: str) -> tuple[str, list[tuple[str, int]]]:
        """``topic``'s full name, and its partitions' names and indexes (the topic itself, as
        partition -1, when it is not partitioned)."""
        name = TopicName.parse(topic)
        partitions = await self.lookup.partitions(str(name))
        if partitions == 0:
            return str(name), [(str(name), -1)]
        return str(name), [(str(name.partition(i)), i) for i in range(partitions)]

    async def get_topics_of_namespace(
            self, namespace: str, *,
            mode: pb.CommandGetTopicsOfNamespace.Mode = _PERSISTENT_TOPICS) -> list[str]:
        """The topics of ``namespace`` ("tenant/namespace"); a partitioned topic is listed as
        its partitions (``...-partition-N``), as the broker answers."""
        self._check_open()
        return await self.lookup.topics_of_namespace(namespace, mode)

    async def get_topics_matching(self, pattern: str) -> list[str]:
        """Topics whose complete name matches the regular expression ``pattern`` entirely.

        The namespace to list is the pattern's prefix up to its last "/"
        ("persistent://public/default/orders-.*" lists public/default); partitions of a
        matching partitioned topic are folded into the topic's own name.
        """
        head, sep, _ = pattern.rpartition("/")
        if not sep:
            raise ValueError(f"topics pattern {pattern!r} names no namespace "
                             "(write it as domain://tenant/namespace/<regex>)")
        prefix = TopicName.parse(f"{head}/x")
        regex = re.compile(pattern)
        found: set[str] = set()
        Mode = pb.CommandGetTopicsOfNamespace.Mode
        for name in await self.get_topics_of_namespace(
                f"{prefix.tenant}/{prefix.namespace}",
                mode=Mode.PERSISTENT if prefix.persistent else Mode.NON_PERSISTENT):
            topic = TopicName.parse(name)
            if topic.partition_index >= 0:
                topic = TopicName(topic.domain, topic.tenant, topic.namespace,
                                  topic.local.rpartition("-partition-")[0])
            if regex.fullmatch(str(topic)):
                found.add(str(topic))
        return sorted(found)

    def _check_open(self) -> None:
        if self._closed:
            raise errors.AlreadyClosed("the client is closed")

    async def close(self) -> None:
        """Close every producer and consumer, then every connection."""
        if self._closed:
            return
        results = await asyncio.gather(
            *(p.close() for p in list(self._producers)),
            *(c.close() for c in list(self._consumers)), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                log.debug("error while closing: %s", result)
        self._closed = True
        conns = self._pool.connections()
        self._pool.close()
        if conns:
            await asyncio.wait([asyncio.ensure_future(c.conn.wait_closed()) for c in conns],
                               timeout=5)

    async def __aenter__(self) -> PulsarClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
