"""Typed errors of the Pravega client, one per failure reply of the segment store.

``RequestFailed`` from the generated requests names the answering command; ``reply_error``
turns it (or any failure reply body) into the matching subclass of ``PravegaError``, so code
catches ``NoSuchSegment`` rather than comparing command names. ``StoreUnreachable`` is the
client's own: a writer that reconnects gave up on getting back to its segment store.
"""

from __future__ import annotations

from protoframe.generated.pravega import frames
from protoframe.runtime.errors import ProtoframeError, RequestFailed

__all__ = [
    "AppendRuleViolation",
    "AuthTokenCheckFailed",
    "ConditionalCheckFailed",
    "IncompatibleVersion",
    "NoSuchSegment",
    "OperationUnsupported",
    "PravegaError",
    "SegmentAlreadyExists",
    "SegmentIsSealed",
    "SegmentIsTruncated",
    "ServerError",
    "StoreUnreachable",
    "TableKeyBadVersion",
    "TableKeyDoesNotExist",
    "TableSegmentNotEmpty",
    "UnexpectedCommand",
    "WrongHost",
    "reply_error",
]


class PravegaError(ProtoframeError):
    """Base class of the errors a Pravega peer reports; ``reply`` is the decoded reply."""

    def __init__(self, message: str, reply: object = None) -> None:
        super().__init__(message)
        self.reply = reply


class IncompatibleVersion(PravegaError):
    """The peer's [low, high] wire-version range does not overlap ours."""

    def __init__(self, ours: tuple[int, int], theirs: tuple[int, int]) -> None:
        super().__init__(
            f"wire versions do not overlap: we speak {ours[0]}..{ours[1]}, "
            f"the peer {theirs[0]}..{theirs[1]}")
        self.ours = ours
        self.theirs = theirs


class SegmentError(PravegaError):
    """A failure about one segment."""

    def __init__(self, message: str, segment: str, reply: object = None) -> None:
        super().__init__(f"{segment}: {message}", reply)
        self.segment = segment


class WrongHost(SegmentError):
    """Another segment store owns the segment; ``correct_host`` names it when known."""

    def __init__(self, segment: str, correct_host: str, reply: object = None) -> None:
        super().__init__(f"owned by {correct_host or 'another host'}", segment, reply)
        self.correct_host = correct_host


class NoSuchSegment(SegmentError):
    """The segment does not exist."""


class SegmentIsSealed(SegmentError):
    """The segment takes no more appends."""


class SegmentAlreadyExists(SegmentError):
    """CREATE_SEGMENT named an existing segment."""


class SegmentIsTruncated(SegmentError):
    """A read started before the segment's first readable offset (``start_offset``)."""

    def __init__(self, segment: str, start_offset: int, reply: object = None) -> None:
        super().__init__(f"truncated up to offset {start_offset}", segment, reply)
        self.start_offset = start_offset


class TableSegmentNotEmpty(SegmentError):
    """DELETE_TABLE_SEGMENT with must_be_empty found keys in the table segment."""


class TableKeyDoesNotExist(SegmentError):
    """A conditional table update or removal named a key that is absent; nothing changed."""


class TableKeyBadVersion(SegmentError):
    """A conditional table update or removal named a version the key does not have (or the
    key exists and was required absent); nothing changed."""


class ConditionalCheckFailed(PravegaError):
    """A conditional append's expected offset was not the segment's length."""


class AuthTokenCheckFailed(PravegaError):
    """The segment store refused the delegation token."""


class OperationUnsupported(PravegaError):
    """The segment store does not implement the operation."""


class ServerError(PravegaError):
    """ERROR_MESSAGE: a failure the protocol has no specific reply for."""


class AppendRuleViolation(PravegaError):
    """Append commands broke the block rules; the connection that sent them is closed."""


class UnexpectedCommand(PravegaError):
    """A peer sent a command that only the other side sends; its connection is closed."""


class StoreUnreachable(PravegaError):
    """No connection to the segment store could be made within the writer's ``RetryPolicy``.

    ``attempts`` and ``elapsed`` (seconds) say how hard the writer tried; ``lost`` is why the
    connection it had ended (None when it never had one). ``__cause__`` is the failure of the
    last attempt (a refused connection, a timeout, ...).
    """

    def __init__(self, address: str, attempts: int, elapsed: float,
                 lost: BaseException | None = None) -> None:
        what = f"lost ({lost}) and not re-established" if lost is not None else "not opened"
        super().__init__(f"connection to the segment store at {address} {what}: "
                         f"gave up after {attempts} attempts in {elapsed:.2f} s")
        self.address = address
        self.attempts = attempts
        self.elapsed = elapsed
        self.lost = lost


def reply_error(reply: object) -> PravegaError:
    """The typed error for a failure reply body (or a ``RequestFailed`` carrying one)."""
    body = reply.body if isinstance(reply, RequestFailed) else reply
    match body:
        case frames.WrongHost():
            return WrongHost(body.segment, body.correct_host, body)
        case frames.NoSuchSegment():
            return NoSuchSegment("no such segment", body.segment, body)
        case frames.SegmentIsSealed():
            return SegmentIsSealed("segment is sealed", body.segment, body)
        case frames.SegmentAlreadyExists():
            return SegmentAlreadyExists("segment already exists", body.segment, body)
        case frames.SegmentIsTruncated():
            return SegmentIsTruncated(body.segment, body.start_offset, body)
        case frames.TableSegmentNotEmpty():
            return TableSegmentNotEmpty("table segment is not empty", body.segment, body)
        case frames.TableKeyDoesNotExist():
            return TableKeyDoesNotExist("table key does not exist", body.segment, body)
        case frames.TableKeyBadVersion():
            return TableKeyBadVersion("table key has another version", body.segment, body)
        case frames.ConditionalCheckFailed():
            return ConditionalCheckFailed(
                f"conditional append {body.event_number} refused: offset mismatch", body)
        case frames.AuthTokenCheckFailed():
            return AuthTokenCheckFailed(f"delegation token refused (code {body.error_code})",
                                        body)
        case frames.OperationUnsupported():
            return OperationUnsupported(f"{body.operation_name} is not supported", body)
        case frames.ErrorMessage():
            return ServerError(f"{body.segment}: {body.message} (code {body.error_code})", body)
    return PravegaError(f"unexpected reply {body!r}", body)
