"""Exceptions of the Pulsar client, named as the official client names them.

Every broker error code (``ServerError``) maps to one class; ``from_server_error`` and
``from_request_failed`` turn a ``CommandError``/``CommandSendError`` answer (or the runtime's
``RequestFailed`` wrapping one) into the matching exception. All of them derive from
``PulsarException``, which carries the ``ServerError`` code when the broker sent one.
"""

from __future__ import annotations

from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.runtime.errors import (
    ConnectionClosed,
    ProtoframeError,
    RequestFailed,
    RequestTimeout,
)

__all__ = [
    "CONSUMER_FATAL",
    "PRODUCER_FATAL",
    "RETRIABLE",
    "RETRIABLE_CODES",
    "AlreadyClosed",
    "AuthenticationError",
    "AuthorizationError",
    "BrokerMetadataError",
    "BrokerPersistenceError",
    "ChecksumError",
    "ConnectError",
    "ConsumerAssignError",
    "ConsumerBusy",
    "ConsumerNotFound",
    "CumulativeAcknowledgementNotAllowedError",
    "IncompatibleSchema",
    "InvalidConfiguration",
    "InvalidTopicName",
    "InvalidTxnStatusError",
    "InvalidUrl",
    "LookupError",
    "MemoryBufferIsFull",
    "MessageTooBig",
    "NotAllowedError",
    "NotConnected",
    "ProducerBlockedQuotaExceededError",
    "ProducerBlockedQuotaExceededException",
    "ProducerBusy",
    "ProducerFenced",
    "ProducerQueueIsFull",
    "PulsarException",
    "ServerError",
    "ServiceUnitNotReady",
    "SubscriptionNotFound",
    "Timeout",
    "TooManyLookupRequestException",
    "TopicNotFound",
    "TopicTerminated",
    "TransactionConflict",
    "TransactionCoordinatorNotFoundError",
    "TransactionNotFound",
    "UnknownError",
    "UnsupportedVersionError",
    "from_request_failed",
    "from_server_error",
    "wrap_error",
]

ServerError = pb.ServerError


class PulsarException(ProtoframeError):
    """Base class of every Pulsar client error; ``code`` is the broker's code if it sent one."""

    code: pb.ServerError | None = None

    def __init__(self, message: str = "", code: pb.ServerError | None = None) -> None:
        super().__init__(message or type(self).__name__)
        if code is not None:
            self.code = code


class UnknownError(PulsarException):
    code = ServerError.UnknownError


class BrokerMetadataError(PulsarException):
    code = ServerError.MetadataError


class BrokerPersistenceError(PulsarException):
    code = ServerError.PersistenceError


class AuthenticationError(PulsarException):
    code = ServerError.AuthenticationError


class AuthorizationError(PulsarException):
    code = ServerError.AuthorizationError


class ConsumerBusy(PulsarException):
    code = ServerError.ConsumerBusy


class ServiceUnitNotReady(PulsarException):
    code = ServerError.ServiceNotReady


class ProducerBlockedQuotaExceededError(PulsarException):
    code = ServerError.ProducerBlockedQuotaExceededError


class ProducerBlockedQuotaExceededException(PulsarException):
    code = ServerError.ProducerBlockedQuotaExceededException


class ChecksumError(PulsarException):
    code = ServerError.ChecksumError


class UnsupportedVersionError(PulsarException):
    code = ServerError.UnsupportedVersionError


class TopicNotFound(PulsarException):
    code = ServerError.TopicNotFound


class SubscriptionNotFound(PulsarException):
    code = ServerError.SubscriptionNotFound


class ConsumerNotFound(PulsarException):
    code = ServerError.ConsumerNotFound


class TooManyLookupRequestException(PulsarException):
    code = ServerError.TooManyRequests


class TopicTerminated(PulsarException):
    code = ServerError.TopicTerminatedError


class ProducerBusy(PulsarException):
    code = ServerError.ProducerBusy


class InvalidTopicName(PulsarException):
    code = ServerError.InvalidTopicName


class IncompatibleSchema(PulsarException):
    code = ServerError.IncompatibleSchema


class ConsumerAssignError(PulsarException):
    code = ServerError.ConsumerAssignError


class TransactionCoordinatorNotFoundError(PulsarException):
    code = ServerError.TransactionCoordinatorNotFound


class InvalidTxnStatusError(PulsarException):
    code = ServerError.InvalidTxnStatus


class NotAllowedError(PulsarException):
    code = ServerError.NotAllowedError


class TransactionConflict(PulsarException):
    code = ServerError.TransactionConflict


class TransactionNotFound(PulsarException):
    code = ServerError.TransactionNotFound


class ProducerFenced(PulsarException):
    code = ServerError.ProducerFenced


# Client-side conditions (no broker code).


class Timeout(PulsarException, TimeoutError):
    """An operation got no answer in time (operation timeout, send timeout, receive timeout)."""


class ConnectError(PulsarException, ConnectionError):
    """Could not connect to a broker, or the connection was lost during an operation."""


class LookupError(PulsarException):  # the official client's name; shadows the builtin
    """Topic lookup failed (too many redirects, or a failed lookup without a code)."""


class NotConnected(PulsarException):
    """The producer or consumer has no connection right now."""


class AlreadyClosed(PulsarException):
    """The client, producer or consumer was closed."""


class ProducerQueueIsFull(PulsarException):
    """``max_pending_messages`` are waiting for receipts and the producer does not block."""


class MessageTooBig(PulsarException):
    """The message is larger than the broker's maximum message size."""


class MemoryBufferIsFull(PulsarException):
    """The client's ``memory_limit_bytes`` are taken by pending sends and the producer does
    not block."""


class InvalidConfiguration(PulsarException, ValueError):
    """An option has a value the client cannot use."""


class InvalidUrl(InvalidConfiguration):
    """The service URL is not ``pulsar://host:port`` or ``pulsar+ssl://host:port``."""


class CumulativeAcknowledgementNotAllowedError(PulsarException):
    """Cumulative acknowledgement is not allowed on Shared and Key_Shared subscriptions."""


_BY_CODE: dict[pb.ServerError, type[PulsarException]] = {
    cls.code: cls
    for cls in (
        UnknownError, BrokerMetadataError, BrokerPersistenceError, AuthenticationError,
        AuthorizationError, ConsumerBusy, ServiceUnitNotReady,
        ProducerBlockedQuotaExceededError, ProducerBlockedQuotaExceededException, ChecksumError,
        UnsupportedVersionError, TopicNotFound, SubscriptionNotFound, ConsumerNotFound,
        TooManyLookupRequestException, TopicTerminated, ProducerBusy, InvalidTopicName,
        IncompatibleSchema, ConsumerAssignError, TransactionCoordinatorNotFoundError,
        InvalidTxnStatusError, NotAllowedError, TransactionConflict, TransactionNotFound,
        ProducerFenced,
    )
    if cls.code is not None
}

# Codes after which an operation may succeed if retried (after a new lookup).
RETRIABLE_CODES: frozenset[pb.ServerError] = frozenset({
    ServerError.ServiceNotReady, ServerError.TooManyRequests, ServerError.MetadataError,
    ServerError.PersistenceError, ServerError.UnknownError,
})

# Errors worth another attempt while creating a producer or consumer (after a new lookup).
RETRIABLE: tuple[type[BaseException], ...] = (
    ConnectError, ServiceUnitNotReady, TooManyLookupRequestException, BrokerMetadataError,
    BrokerPersistenceError, NotConnected, ConnectionError)

# Errors after which a producer cannot recover by reconnecting: its pending sends fail.
PRODUCER_FATAL: tuple[type[BaseException], ...] = (
    TopicTerminated, ProducerFenced, NotAllowedError, AuthorizationError, AuthenticationError,
    IncompatibleSchema, ProducerBlockedQuotaExceededError,
    ProducerBlockedQuotaExceededException, InvalidTopicName, TopicNotFound)

# Errors after which a consumer cannot subscribe again: its receive raises them.
CONSUMER_FATAL: tuple[type[BaseException], ...] = (
    AuthorizationError, AuthenticationError, TopicNotFound, SubscriptionNotFound,
    InvalidTopicName, IncompatibleSchema, NotAllowedError, ConsumerAssignError)


def from_server_error(code: pb.ServerError | int, message: str = "") -> PulsarException:
    """The exception for a broker error code (``UnknownError`` for codes we do not know)."""
    try:
        known = pb.ServerError(code)
    except ValueError:
        return UnknownError(f"{message} (server error {code})".strip())
    cls = _BY_CODE.get(known, UnknownError)
    return cls(message or known.name, known)


def from_request_failed(exc: RequestFailed) -> PulsarException:
    """Map the runtime's ``RequestFailed`` (an ERROR or SEND_ERROR answer) to our exception."""
    body = exc.body
    if isinstance(body, pb.CommandError | pb.CommandSendError):
        return from_server_error(body.error, body.message)
    return UnknownError(str(exc))


def wrap_error(exc: BaseException, what: str = "") -> BaseException:
    """Turn runtime errors into client errors; anything else is returned as it is."""
    prefix = f"{what}: " if what else ""
    if isinstance(exc, PulsarException):
        return exc
    if isinstance(exc, RequestFailed):
        mapped = from_request_failed(exc)
    elif isinstance(exc, RequestTimeout):
        mapped = Timeout(f"{prefix}{exc}")
    elif isinstance(exc, ConnectionClosed):
        mapped = ConnectError(f"{prefix}{exc}")
    else:
        return exc
    mapped.__cause__ = exc
    return mapped
