"""Topic-list watchers: WATCH_TOPIC_LIST, WATCH_TOPIC_UPDATE and WATCH_TOPIC_LIST_CLOSE.

A pattern consumer asks the broker to watch a namespace for topics whose name matches its
pattern; the broker answers with the current matches (WATCH_TOPIC_LIST_SUCCESS) and pushes a
WATCH_TOPIC_UPDATE whenever a matching topic appears, instead of the client listing the
namespace over and over. As Pulsar's ``TopicList``: the pattern is matched against the
partitioned topic's name without its ``persistent://`` scheme, the lists carry partition names,
and the hash is CRC32C over the sorted names joined with commas, printed as Guava prints a
``HashCode`` (its four bytes, least significant first, in hex). The broker advertises
``supports_topic_watchers``.
"""

from __future__ import annotations

import re
import struct
from abc import abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from protoframe.generated.pulsar import frames
from protoframe.generated.pulsar.machines import PulsarHooks
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandError,
    CommandSuccess,
    CommandWatchTopicList,
    CommandWatchTopicListClose,
    CommandWatchTopicListSuccess,
    CommandWatchTopicUpdate,
    ServerError,
)
from protoframe.runtime.codec.checksums import crc32c

from .state import BrokerState
from .topics import PARTITION_SUFFIX, namespace_of, partition_index

__all__ = ["TopicListWatch", "TopicWatchers", "topics_hash", "matching_topics"]

Type = BaseCommand.Type


def topics_hash(topics: Iterable[str]) -> str:
    """Pulsar's ``TopicList.calculateHash``: CRC32C of the sorted names joined with commas,
    in Guava's hex form (checked against Apache Pulsar 4 by tests/clients/pulsar/
    test_multi_topics.py)."""
    return struct.pack("<I", crc32c(",".join(sorted(topics)).encode())).hex()


def _without_scheme(name: str) -> str:
    return name.split("://", 1)[-1]


def _partitioned_name(name: str) -> str:
    return name.rpartition(PARTITION_SUFFIX)[0] if partition_index(name) >= 0 else name


def matching_topics(topics: Iterable[str], pattern: re.Pattern[str]) -> list[str]:
    """The names of ``topics`` (partitions included) whose partitioned topic matches."""
    return [t for t in topics if pattern.fullmatch(_without_scheme(_partitioned_name(t)))]


@dataclass(eq=False)
class TopicListWatch:
    """One client's watch on one namespace."""

    watcher_id: int
    namespace: str
    pattern: re.Pattern[str]
    notify: Callable[[CommandWatchTopicUpdate], None]
    topics: set[str] = field(default_factory=set)

    def topic_added(self, name: str) -> None:
        if name in self.topics or namespace_of(name) != self.namespace or \
                not matching_topics([name], self.pattern):
            return
        self.topics.add(name)
        self.notify(CommandWatchTopicUpdate(watcher_id=self.watcher_id, new_topics=[name],
                                            topics_hash=topics_hash(self.topics)))


class TopicWatchers(PulsarHooks):
    """The hooks serving topic-list watches, for ``commands.Commands``."""

    broker: BrokerState
    watches: dict[int, TopicListWatch]

    @abstractmethod
    def _emit(self, command: BaseCommand) -> None: ...

    @abstractmethod
    def _safely(self, what: str, action: BaseCommand) -> None: ...

    def on_watch_topic_list(self, body: CommandWatchTopicList, frame: frames.Frame) -> None:
        try:
            # Pulsar's pattern names the domain; matching is on the rest of the name.
            pattern = re.compile(_without_scheme(body.topics_pattern))
        except re.error as exc:
            self._watch_error(body.request_id, f"invalid topics pattern: {exc}")
            return
        namespace = body.namespace.split("://", 1)[-1]
        if namespace.count("/") != 1 or not all(namespace.split("/")):
            self._watch_error(body.request_id, f"invalid namespace {body.namespace!r}")
            return
        old = self.watches.pop(body.watcher_id, None)
        if old is not None:
            self.broker.topic_listeners.remove(old.topic_added)

        def notify(update: CommandWatchTopicUpdate) -> None:
            self._safely("WATCH_TOPIC_UPDATE", BaseCommand(type_=Type.WATCH_TOPIC_UPDATE,
                                                           watchTopicUpdate=update))

        watch = TopicListWatch(body.watcher_id, namespace, pattern, notify)
        watch.topics.update(matching_topics(self.broker.topics_of_namespace(namespace), pattern))
        self.watches[body.watcher_id] = watch
        self.broker.topic_listeners.append(watch.topic_added)
        self._emit(BaseCommand(
            type_=Type.WATCH_TOPIC_LIST_SUCCESS,
            watchTopicListSuccess=CommandWatchTopicListSuccess(
                request_id=body.request_id, watcher_id=body.watcher_id,
                topic=sorted(watch.topics), topics_hash=topics_hash(watch.topics))))

    def on_watch_topic_list_close(self, body: CommandWatchTopicListClose,
                                  frame: frames.Frame) -> None:
        watch = self.watches.pop(body.watcher_id, None)
        if watch is not None:
            self.broker.topic_listeners.remove(watch.topic_added)
        self._emit(BaseCommand(type_=Type.SUCCESS,
                               success=CommandSuccess(request_id=body.request_id)))

    def close_watches(self) -> None:
        """Stop this connection's watches (it is gone)."""
        watches, self.watches = self.watches, {}
        for watch in watches.values():
            self.broker.topic_listeners.remove(watch.topic_added)

    def _watch_error(self, request_id: int, message: str) -> None:
        # WATCH_TOPIC_LIST_SUCCESS has no error field: Pulsar answers ERROR.
        self._emit(BaseCommand(type_=Type.ERROR, error=CommandError(
            request_id=request_id, error=ServerError.InvalidTopicName, message=message)))
