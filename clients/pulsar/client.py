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
from collections.abc import Callable, Sequence
from typing import Any

from protoframe.clients.pulsar import errors
from protoframe.clients.pulsar.auth import AuthenticationToken
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
from protoframe.clients.pulsar.lookup import LookupService, TopicName
from protoframe.clients.pulsar.message import MessageId
from protoframe.clients.pulsar.producer import (
    CompressionName,
    PartitionsRoutingMode,
    Producer,
    ProducerConfig,
    TopicProducer,
)
from protoframe.clients.pulsar.routing import HashingScheme
from protoframe.clients.pulsar.schema.base import Schema, ValueT
from protoframe.clients.pulsar.schema.binding import bind_consumer_schema
from protoframe.clients.pulsar.session import Session
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

    def __repr__(self) -> str:
        return f"<PulsarClient {self.service_url}>"

    # ---- connections ------------------------------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext | None:
        if self._ssl is None:
            self._ssl = make_ssl_context(
                self._tls_ca, verify=not self._tls_insecure,
                check_hostname=self._tls_hostname and not self._tls_insecure,
                cert_file=self._tls_cert, key_file=self._tls_key)
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
        schema: Schema[ValueT] | None = None,
    ) -> Producer[ValueT]:
        """Create a producer on ``topic`` (every partition of it, if it is partitioned).

        Batching is on by default, as in the official asyncio client. ``compression_type`` is a
        ``CompressionType`` or its name (``"LZ4"``, ``"ZSTD"``, ...). With a ``schema``
        (``clients.pulsar.schema``) the producer sends values of its type and registers it
        with the broker; without one it sends bytes.
        """
        self._check_open()
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
            schema_info=schema.schema_info() if schema is not None else None,
        )
        name, parts = await self._partitions_of(topic)
        children = [TopicProducer(self._session, part, index, conf, next(self._producer_ids))
                    for part, index in parts]
        if len(children) > 1 and producer_name is not None:
            for child in children:
                child.producer_name = f"{producer_name}-{child.partition}"
        await _start_all(children)
        producer = Producer(self._session, name, children, conf, schema)
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
        topic: str,
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
        schema: Schema[ValueT] | None = None,
    ) -> Consumer[ValueT]:
        """Subscribe to ``topic`` (every partition of it, if it is partitioned).

        ``subscription_type`` (or the official name ``consumer_type``) is ``"Exclusive"``
        (the default), ``"Shared"``, ``"Failover"`` or ``"Key_Shared"``, or a ``ConsumerType``.
        With ``deliver_entries`` the consumer hands over whole entries through
        ``receive_entries`` instead of messages, for bulk readers that do not acknowledge.
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
            schema=schema,
        )
        name, parts = await self._partitions_of(topic)
        queue = ReceiveQueue()
        children = [TopicConsumer(self._session, queue, part, index, subscription_name, conf,
                                  next(self._consumer_ids))
                    for part, index in parts]
        if consumer_name is None:
            for child in children[1:]:
                child.consumer_name = children[0].consumer_name
        consumer: Consumer[ValueT] = Consumer(self._session, name, subscription_name, conf,
                                              queue, children)
        if schema is not None:
            bind_consumer_schema(consumer, schema, self._session, name)
        await _start_all(children)
        self._consumers.append(consumer)
        return consumer

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


async def _start_all(handles: Sequence[TopicProducer] | Sequence[TopicConsumer]) -> None:
    """Start every partition's handle; if any fails, close them all."""
    try:
        await asyncio.gather(*(h.start() for h in handles))
    except BaseException:
        await asyncio.gather(*(h.close() for h in handles), return_exceptions=True)
        raise
