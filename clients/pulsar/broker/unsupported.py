"""The requests this broker does not serve, each answered at once with an error saying so.

Transactions, scalable topics and authentication challenges are not
implemented. A Pulsar broker with them disabled answers their requests with an error; silence
would leave the requester waiting until its own timeout. Each answer is the response the request
expects, with its error fields set, where that response has them (a client's pending transaction
call is completed by the typed response), and ERROR otherwise.
"""

from __future__ import annotations

from abc import abstractmethod

from protoframe.generated.pulsar import frames
from protoframe.generated.pulsar.machines import PulsarHooks
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandAddPartitionToTxn,
    CommandAddPartitionToTxnResponse,
    CommandAddSubscriptionToTxn,
    CommandAddSubscriptionToTxnResponse,
    CommandAuthResponse,
    CommandEndTxn,
    CommandEndTxnOnPartition,
    CommandEndTxnOnPartitionResponse,
    CommandEndTxnOnSubscription,
    CommandEndTxnOnSubscriptionResponse,
    CommandEndTxnResponse,
    CommandError,
    CommandNewTxn,
    CommandNewTxnResponse,
    CommandScalableTopicLookup,
    CommandScalableTopicSubscribe,
    CommandScalableTopicSubscribeResponse,
    CommandScalableTopicUpdate,
    CommandTcClientConnectRequest,
    CommandTcClientConnectResponse,
    CommandWatchScalableTopics,
    CommandWatchScalableTopicsUpdate,
    CommandWatchTcAssignments,
    CommandWatchTcAssignmentsUpdate,
    ServerError,
)

from .topics import UINT64_MASK

__all__ = ["UNSUPPORTED", "UnsupportedRequests"]

Type = BaseCommand.Type
NOT_ALLOWED = ServerError.NotAllowedError

NO_TRANSACTIONS = "transactions are not supported by this broker"
NO_SCALABLE_TOPICS = "scalable topics are not supported by this broker"
NO_AUTH_CHALLENGE = "this broker sends no authentication challenge to respond to"

# Request -> the command answering it (tests walk this with the generated INTERACTIONS).
UNSUPPORTED: dict[str, str] = {
    "NEW_TXN": "NEW_TXN_RESPONSE",
    "ADD_PARTITION_TO_TXN": "ADD_PARTITION_TO_TXN_RESPONSE",
    "ADD_SUBSCRIPTION_TO_TXN": "ADD_SUBSCRIPTION_TO_TXN_RESPONSE",
    "END_TXN": "END_TXN_RESPONSE",
    "END_TXN_ON_PARTITION": "END_TXN_ON_PARTITION_RESPONSE",
    "END_TXN_ON_SUBSCRIPTION": "END_TXN_ON_SUBSCRIPTION_RESPONSE",
    "TC_CLIENT_CONNECT_REQUEST": "TC_CLIENT_CONNECT_RESPONSE",
    "SCALABLE_TOPIC_LOOKUP": "SCALABLE_TOPIC_UPDATE",
    "SCALABLE_TOPIC_SUBSCRIBE": "SCALABLE_TOPIC_SUBSCRIBE_RESPONSE",
    "WATCH_SCALABLE_TOPICS": "WATCH_SCALABLE_TOPICS_UPDATE",
    "WATCH_TC_ASSIGNMENTS": "WATCH_TC_ASSIGNMENTS_UPDATE",
    "AUTH_RESPONSE": "ERROR",
}


class UnsupportedRequests(PulsarHooks):
    """The hooks answering the requests in ``UNSUPPORTED``."""

    @abstractmethod
    def _emit(self, command: BaseCommand) -> None:
        """Send a command through the state machines."""

    def on_new_txn(self, body: CommandNewTxn, frame: frames.Frame) -> None:
        self._emit(BaseCommand(type_=Type.NEW_TXN_RESPONSE, newTxnResponse=CommandNewTxnResponse(
            request_id=body.request_id, error=NOT_ALLOWED, message=NO_TRANSACTIONS)))

    def on_add_partition_to_txn(self, body: CommandAddPartitionToTxn,
                                frame: frames.Frame) -> None:
        self._emit(BaseCommand(
            type_=Type.ADD_PARTITION_TO_TXN_RESPONSE,
            addPartitionToTxnResponse=CommandAddPartitionToTxnResponse(
                request_id=body.request_id, error=NOT_ALLOWED, message=NO_TRANSACTIONS)))

    def on_add_subscription_to_txn(self, body: CommandAddSubscriptionToTxn,
                                   frame: frames.Frame) -> None:
        self._emit(BaseCommand(
            type_=Type.ADD_SUBSCRIPTION_TO_TXN_RESPONSE,
            addSubscriptionToTxnResponse=CommandAddSubscriptionToTxnResponse(
                request_id=body.request_id, error=NOT_ALLOWED, message=NO_TRANSACTIONS)))

    def on_end_txn(self, body: CommandEndTxn, frame: frames.Frame) -> None:
        self._emit(BaseCommand(type_=Type.END_TXN_RESPONSE, endTxnResponse=CommandEndTxnResponse(
            request_id=body.request_id, error=NOT_ALLOWED, message=NO_TRANSACTIONS)))

    def on_end_txn_on_partition(self, body: CommandEndTxnOnPartition,
                                frame: frames.Frame) -> None:
        self._emit(BaseCommand(
            type_=Type.END_TXN_ON_PARTITION_RESPONSE,
            endTxnOnPartitionResponse=CommandEndTxnOnPartitionResponse(
                request_id=body.request_id, error=NOT_ALLOWED, message=NO_TRANSACTIONS)))

    def on_end_txn_on_subscription(self, body: CommandEndTxnOnSubscription,
                                   frame: frames.Frame) -> None:
        self._emit(BaseCommand(
            type_=Type.END_TXN_ON_SUBSCRIPTION_RESPONSE,
            endTxnOnSubscriptionResponse=CommandEndTxnOnSubscriptionResponse(
                request_id=body.request_id, error=NOT_ALLOWED, message=NO_TRANSACTIONS)))

    def on_tc_client_connect_request(self, body: CommandTcClientConnectRequest,
                                     frame: frames.Frame) -> None:
        self._emit(BaseCommand(
            type_=Type.TC_CLIENT_CONNECT_RESPONSE,
            tcClientConnectResponse=CommandTcClientConnectResponse(
                request_id=body.request_id, error=NOT_ALLOWED, message=NO_TRANSACTIONS)))

    def on_scalable_topic_lookup(self, body: CommandScalableTopicLookup,
                                 frame: frames.Frame) -> None:
        self._emit(BaseCommand(
            type_=Type.SCALABLE_TOPIC_UPDATE, scalableTopicUpdate=CommandScalableTopicUpdate(
                session_id=body.session_id, error=NOT_ALLOWED, message=NO_SCALABLE_TOPICS)))

    def on_scalable_topic_subscribe(self, body: CommandScalableTopicSubscribe,
                                    frame: frames.Frame) -> None:
        self._emit(BaseCommand(
            type_=Type.SCALABLE_TOPIC_SUBSCRIBE_RESPONSE,
            scalableTopicSubscribeResponse=CommandScalableTopicSubscribeResponse(
                request_id=body.request_id, error=NOT_ALLOWED, message=NO_SCALABLE_TOPICS)))

    def on_watch_scalable_topics(self, body: CommandWatchScalableTopics,
                                 frame: frames.Frame) -> None:
        self._emit(BaseCommand(
            type_=Type.WATCH_SCALABLE_TOPICS_UPDATE,
            watchScalableTopicsUpdate=CommandWatchScalableTopicsUpdate(
                watch_id=body.watch_id, error=NOT_ALLOWED, message=NO_SCALABLE_TOPICS)))

    def on_watch_tc_assignments(self, body: CommandWatchTcAssignments,
                                frame: frames.Frame) -> None:
        self._emit(BaseCommand(
            type_=Type.WATCH_TC_ASSIGNMENTS_UPDATE,
            watchTcAssignmentsUpdate=CommandWatchTcAssignmentsUpdate(
                watch_id=body.watch_id, error=NOT_ALLOWED, message=NO_TRANSACTIONS)))

    def on_auth_response(self, body: CommandAuthResponse, frame: frames.Frame) -> None:
        # It answers no request of ours, so the ERROR carries no request id of the client's
        # (-1, as the broker's own requests have).
        self._emit(BaseCommand(type_=Type.ERROR, error=CommandError(
            request_id=UINT64_MASK, error=ServerError.AuthenticationError,
            message=NO_AUTH_CHALLENGE)))
