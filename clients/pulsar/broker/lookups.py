"""The broker's answers to lookups: partition metadata, topic lookups, a namespace's topics,
and the topic-name check every command that names a topic goes through.

``LookupAnswers`` is a part of ``commands.Commands``, kept apart because these answers only read
the broker state: none of them creates a producer, a consumer or an entry.
"""

from __future__ import annotations

from abc import abstractmethod

from protoframe.generated.pulsar import frames
from protoframe.generated.pulsar.machines import PulsarHooks
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandGetTopicsOfNamespace,
    CommandGetTopicsOfNamespaceResponse,
    CommandLookupTopic,
    CommandLookupTopicResponse,
    CommandPartitionedTopicMetadata,
    CommandPartitionedTopicMetadataResponse,
    ServerError,
)

from .limits import LimitExceeded
from .state import BrokerState
from .topics import InvalidTopicName, normalize_topic

__all__ = ["LookupAnswers"]

Type = BaseCommand.Type


class LookupAnswers(PulsarHooks):
    """The lookup hooks of a session; ``commands.Commands`` is the whole of them."""

    broker: BrokerState
    service_url: str

    @abstractmethod
    def _emit(self, command: BaseCommand) -> None:
        """Send a command through the state machines."""

    def _topic_name(self, name: str) -> tuple[str | None, str]:
        """The fully qualified name of a topic, or None and why it is refused."""
        try:
            full = normalize_topic(name)
            self.broker.limits.check_name("topic name", full)
        except InvalidTopicName:
            return None, f"invalid topic name {name!r}"
        except LimitExceeded as exc:
            return None, f"invalid topic name: {exc}"
        return full, ""

    def on_partitioned_metadata(self, body: CommandPartitionedTopicMetadata,
                                frame: frames.Frame) -> None:
        LookupType = CommandPartitionedTopicMetadataResponse.LookupType
        name, refusal = self._topic_name(body.topic)
        if name is None:
            answer = CommandPartitionedTopicMetadataResponse(
                request_id=body.request_id, response=LookupType.Failed,
                error=ServerError.InvalidTopicName, message=refusal)
        else:
            answer = CommandPartitionedTopicMetadataResponse(
                request_id=body.request_id, response=LookupType.Success,
                partitions=self.broker.partitions_of(name))
        self._emit(BaseCommand(type_=Type.PARTITIONED_METADATA_RESPONSE,
                               partitionMetadataResponse=answer))

    def on_lookup(self, body: CommandLookupTopic, frame: frames.Frame) -> None:
        LookupType = CommandLookupTopicResponse.LookupType
        name, refusal = self._topic_name(body.topic)
        if name is None:
            answer = CommandLookupTopicResponse(
                request_id=body.request_id, response=LookupType.Failed,
                error=ServerError.InvalidTopicName, message=refusal)
        else:
            # This broker owns every topic: connect here (at the address the client used).
            answer = CommandLookupTopicResponse(
                request_id=body.request_id, response=LookupType.Connect,
                brokerServiceUrl=self.service_url, authoritative=True)
        self._emit(BaseCommand(type_=Type.LOOKUP_RESPONSE, lookupTopicResponse=answer))

    def on_get_topics_of_namespace(self, body: CommandGetTopicsOfNamespace,
                                   frame: frames.Frame) -> None:
        self._emit(BaseCommand(
            type_=Type.GET_TOPICS_OF_NAMESPACE_RESPONSE,
            getTopicsOfNamespaceResponse=CommandGetTopicsOfNamespaceResponse(
                request_id=body.request_id,
                topics=self.broker.topics_of_namespace(body.namespace))))
