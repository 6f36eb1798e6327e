"""Which topics match a pattern consumer's regular expression, now and as topics come and go.

When the broker says it supports topic watchers (``supports_topic_watchers`` in CONNECTED, as
Pulsar 2.11 and later do), ``TopicDiscovery`` opens a WATCH_TOPIC_LIST on the service URL's
connection and applies each WATCH_TOPIC_UPDATE as it arrives; a watch that fails or is refused,
and a broker without watchers, fall back to listing the namespace (GET_TOPICS_OF_NAMESPACE)
every ``period`` seconds, as the official clients' ``pattern_auto_discovery_period``. A lost
connection re-opens the watch, whose first answer (the full list) is compared with what is
known, so nothing that changed meanwhile is missed. Topics are reported by their partitioned
topic's name: partitions are folded into it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
from collections.abc import Awaitable, Callable, Iterable

from protoframe.clients.pulsar.connection import ClientConnection
from protoframe.clients.pulsar.lookup import TopicName
from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.generated.pulsar.frames import Frame

__all__ = ["TopicDiscovery", "TopicsChanged", "full_pattern", "fold_partitions"]

log = logging.getLogger(__name__)

T = pb.BaseCommand.Type
Mode = pb.CommandGetTopicsOfNamespace.Mode

# Called with the topics that appeared and those that went away.
TopicsChanged = Callable[[set[str], set[str]], Awaitable[None]]

_watcher_ids = itertools.count(1)


def full_pattern(pattern: str) -> str:
    """The pattern with a domain: ``public/default/a-.*`` means the persistent topics, as the
    official clients read it."""
    return pattern if "://" in pattern else f"persistent://{pattern}"


def fold_partitions(names: Iterable[str]) -> set[str]:
    """Topic names with each partition replaced by its partitioned topic's name."""
    folded = set()
    for name in names:
        topic = TopicName.parse(name)
        if topic.partition_index >= 0:
            topic = TopicName(topic.domain, topic.tenant, topic.namespace,
                              topic.local.rpartition("-partition-")[0])
        folded.add(str(topic))
    return folded


class TopicDiscovery:
    """Keeps ``known`` equal to the topics matching ``pattern`` and reports every change."""

    def __init__(self, pattern: str, *, list_namespace: Callable[[str, Mode], Awaitable[list[str]]],
                 connect: Callable[[], Awaitable[ClientConnection]], period: float,
                 operation_timeout: float, on_change: TopicsChanged) -> None:
        self.pattern = full_pattern(pattern)
        head = self.pattern.rpartition("/")[0]
        if not head or "/" not in head.split("://", 1)[1]:
            raise ValueError(f"topics pattern {pattern!r} names no namespace "
                             "(write it as domain://tenant/namespace/<regex>)")
        prefix = TopicName.parse(f"{head}/x")
        self.namespace = f"{prefix.tenant}/{prefix.namespace}"
        self.mode = Mode.PERSISTENT if prefix.persistent else Mode.NON_PERSISTENT
        self.regex = re.compile(self.pattern)
        self._list_namespace = list_namespace
        self._connect = connect
        self.period = period
        self.operation_timeout = operation_timeout
        self._on_change = on_change
        self.known: set[str] = set()
        self.watching = False  # a watch is open (tests tell the two ways apart with it)
        self.topics_hash = ""  # the broker's hash of the watched list, as last sent

    def _matching(self, names: Iterable[str]) -> set[str]:
        return {t for t in fold_partitions(names) if self.regex.fullmatch(t)}

    async def list_now(self) -> set[str]:
        """The matching topics, listed once (GET_TOPICS_OF_NAMESPACE)."""
        return self._matching(await self._list_namespace(self.namespace, self.mode))

    async def _reconcile(self, now: set[str]) -> None:
        added, removed = now - self.known, self.known - now
        self.known = now
        if added or removed:
            await self._on_change(added, removed)

    async def run(self) -> None:
        """Follow the topics until cancelled."""
        while True:
            try:
                cnx = await self._connect()
                if cnx.supports_topic_watchers and await self._watch(cnx):
                    continue  # the watch's connection closed: open it again
                await asyncio.sleep(self.period)
                await self._reconcile(await self.list_now())
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("topics matching %s: %s", self.pattern, exc)
                await asyncio.sleep(self.period)

    async def _watch(self, cnx: ClientConnection) -> bool:
        """Follow one watch until its connection closes (True), or False when the broker
        did not open it (then this discovery polls)."""
        watcher_id = next(_watcher_ids)
        events: asyncio.Queue[tuple[set[str], set[str]] | set[str] | None] = asyncio.Queue()
        watch = _Watch(self, events)
        cnx.topic_watchers[watcher_id] = watch
        cnx.on_close(lambda c, exc: events.put_nowait(None))
        request_id = cnx.requests.next_id()
        cnx.write(Frame(command=pb.BaseCommand(
            type_=T.WATCH_TOPIC_LIST, watchTopicList=pb.CommandWatchTopicList(
                request_id=request_id, watcher_id=watcher_id, namespace=self.namespace,
                topics_pattern=self.pattern))))
        try:
            # An ERROR answer has no request this client waits for: it ends as a timeout.
            first = await asyncio.wait_for(events.get(), self.operation_timeout)
            if not isinstance(first, set):
                return first is None
            self.watching = True
            await self._reconcile(first)
            while True:
                event = await events.get()
                if event is None:
                    return True
                if isinstance(event, set):
                    await self._reconcile(event)
                else:
                    new, deleted = event
                    await self._reconcile((self.known | new) - deleted)
        except TimeoutError:
            log.info("topics matching %s: no answer to WATCH_TOPIC_LIST, polling instead",
                     self.pattern)
            return False
        finally:
            self.watching = False
            cnx.topic_watchers.pop(watcher_id, None)
            if cnx.is_open:
                cnx.write(Frame(command=pb.BaseCommand(
                    type_=T.WATCH_TOPIC_LIST_CLOSE,
                    watchTopicListClose=pb.CommandWatchTopicListClose(
                        request_id=cnx.requests.next_id(), watcher_id=watcher_id))))


class _Watch:
    """A connection's view of one watch: its answers go to the discovery's event queue."""

    def __init__(self, discovery: TopicDiscovery,
                 events: asyncio.Queue[tuple[set[str], set[str]] | set[str] | None]) -> None:
        self._discovery = discovery
        self._events = events

    def listed(self, body: pb.CommandWatchTopicListSuccess) -> None:
        self._discovery.topics_hash = body.topics_hash
        self._events.put_nowait(self._discovery._matching(body.topic))

    def updated(self, body: pb.CommandWatchTopicUpdate) -> None:
        self._discovery.topics_hash = body.topics_hash
        self._events.put_nowait((self._discovery._matching(body.new_topics),
                                 self._discovery._matching(body.deleted_topics)))
