"""Topic names, binary lookup and partitioned-topic metadata.

``TopicName`` completes short names the way the official clients do (``my-topic`` is
``persistent://public/default/my-topic``) and names partitions (``<topic>-partition-<i>``).

``LookupService.find_broker`` asks the service URL's broker which broker serves a topic
(LOOKUP) and follows redirects: each Redirect names the next broker to ask and whether its
answer is authoritative; at most ``max_redirects`` (20) hops. With
``proxy_through_service_url`` set, the broker is reached through the service URL's address
(a proxy), CONNECT naming the real broker in ``proxy_to_broker_url``.
``partitions`` asks PARTITIONED_METADATA for the number of partitions (0: not partitioned).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from protoframe.clients.pulsar.connection import ClientConnection
from protoframe.clients.pulsar.errors import (
    InvalidTopicName,
    LookupError,
    from_server_error,
    wrap_error,
)
from protoframe.generated.pulsar import pulsar_api as pb

__all__ = ["BrokerAddress", "LookupService", "TopicName"]

_PARTITION = "-partition-"


@dataclass(frozen=True)
class TopicName:
    """A complete topic name: ``domain://tenant/namespace/local``."""

    domain: str
    tenant: str
    namespace: str
    local: str

    @classmethod
    def parse(cls, name: str) -> TopicName:
        if "://" in name:
            domain, _, rest = name.partition("://")
            if domain not in ("persistent", "non-persistent"):
                raise InvalidTopicName(f"invalid topic domain {domain!r} in {name!r}")
        else:
            domain, rest = "persistent", name
            if "/" not in rest:
                rest = f"public/default/{rest}"
        parts = rest.split("/", 2)
        if len(parts) != 3 or not all(parts):
            raise InvalidTopicName(f"invalid topic name {name!r}")
        return cls(domain, parts[0], parts[1], parts[2])

    def __str__(self) -> str:
        return f"{self.domain}://{self.tenant}/{self.namespace}/{self.local}"

    @property
    def partition_index(self) -> int:
        """The partition this name is of, or -1."""
        head, sep, tail = self.local.rpartition(_PARTITION)
        if sep and tail.isdigit():
            return int(tail)
        return -1

    def partition(self, index: int) -> TopicName:
        return TopicName(self.domain, self.tenant, self.namespace,
                         f"{self.local}{_PARTITION}{index}")

    @property
    def persistent(self) -> bool:
        return self.domain == "persistent"


@dataclass(frozen=True)
class BrokerAddress:
    """Where a topic is served: the broker's own URL and the address to connect to."""

    logical: str
    physical: str


class LookupService:
    """Binary-protocol lookups through the connections ``connect`` returns."""

    def __init__(self, service_url: str,
                 connect: Callable[[str, str], Awaitable[ClientConnection]], *,
                 use_tls: bool = False, max_redirects: int = 20,
                 listener_name: str | None = None) -> None:
        self.service_url = service_url
        self._connect = connect
        self.use_tls = use_tls
        self.max_redirects = max_redirects
        self.listener_name = listener_name

    async def find_broker(self, topic: str) -> BrokerAddress:
        """The broker that serves ``topic`` (following up to ``max_redirects`` redirects)."""
        logical = physical = self.service_url
        authoritative = False
        for _ in range(self.max_redirects + 1):
            cnx = await self._connect(logical, physical)
            try:
                answer = await cnx.requests.lookup_topic(
                    topic, authoritative=authoritative,
                    advertised_listener_name=self.listener_name)
            except Exception as exc:
                raise wrap_error(exc, f"lookup of {topic}") from None
            kind = answer.response
            if kind is pb.CommandLookupTopicResponse.LookupType.Failed:
                raise from_server_error(answer.error, answer.message or f"lookup of {topic}")
            proxied = answer.proxy_through_service_url
            if self.use_tls:
                url = answer.brokerServiceUrlTls
                if not url and answer.brokerServiceUrl:
                    # No TLS address: never fall back to plain text; reach the broker through
                    # the (TLS) service URL, as through a proxy, naming it in CONNECT.
                    url, proxied = answer.brokerServiceUrl, True
            else:
                url = answer.brokerServiceUrl
            if not url:
                raise LookupError(f"lookup of {topic}: the answer names no broker")
            through = self.service_url if proxied else url
            if kind is pb.CommandLookupTopicResponse.LookupType.Connect:
                return BrokerAddress(url, through)
            logical, physical = url, through
            authoritative = answer.authoritative
        raise LookupError(f"lookup of {topic}: more than {self.max_redirects} redirects")

    async def partitions(self, topic: str) -> int:
        """The number of partitions of ``topic`` (0 when it is not partitioned)."""
        cnx = await self._connect(self.service_url, self.service_url)
        try:
            answer = await cnx.requests.partition_metadata(topic)
        except Exception as exc:
            raise wrap_error(exc, f"partition metadata of {topic}") from None
        if answer.response is pb.CommandPartitionedTopicMetadataResponse.LookupType.Failed:
            raise from_server_error(answer.error, answer.message or
                                    f"partition metadata of {topic}")
        return answer.partitions

    async def topics_of_namespace(self, namespace: str,
                                  mode: pb.CommandGetTopicsOfNamespace.Mode) -> list[str]:
        """The topic names of ``namespace`` ("tenant/namespace"), partitions listed one by one."""
        cnx = await self._connect(self.service_url, self.service_url)
        try:
            answer = await cnx.requests.get_topics_of_namespace(namespace, mode=mode)
        except Exception as exc:
            raise wrap_error(exc, f"topics of namespace {namespace}") from None
        return list(answer.topics)
