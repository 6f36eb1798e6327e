"""The error types every protoframe codec raises.

Decoding never raises a bare ``IndexError`` or ``UnicodeDecodeError``: each failure is a
``DecodeError`` subclass, so callers can catch one type per kind of problem and a
connection can close itself without taking the process down.
"""

from __future__ import annotations

from collections.abc import Sequence


class ProtoframeError(Exception):
    """Base class of every error raised by protoframe code."""


class DecodeError(ProtoframeError, ValueError):
    """Bytes could not be turned into a message or frame.

    When raised by a stream decoder, ``frames_before`` holds the frames that the same call
    completed before the bad one.
    """

    frames_before: Sequence[object] = ()


class TruncatedError(DecodeError):
    """The input ended in the middle of a value."""


class MalformedVarintError(DecodeError):
    """A varint ran past 10 bytes or does not fit the declared type."""


class WireTypeError(DecodeError):
    """A protobuf field arrived with a wire type its declaration does not allow."""


class InvalidUtf8Error(DecodeError):
    """A string field held bytes that are not valid UTF-8."""


class MissingRequiredFieldError(DecodeError):
    """A proto2 ``required`` field was absent from the decoded bytes."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(f"{message}.{field} is required but was not in the input")
        self.message_name = message
        self.field_name = field


class FrameTooLargeError(DecodeError):
    """A frame declares a size over the configured limit; nothing was buffered for it."""


class BadMagicError(DecodeError):
    """A magic number or constant did not hold the value the spec requires."""


class ChecksumMismatchError(DecodeError):
    """A checksum computed over the received bytes differs from the one sent."""


class SizeMismatchError(DecodeError):
    """A size or count field disagrees with the content it describes."""


class UnknownCommandError(DecodeError):
    """A dispatch value selects no known frame or command layout."""


class UnknownCommandTypeError(UnknownCommandError):
    """The value naming a frame's command is a number this peer's generated code does not know,
    most likely a command a newer version of the protocol added.

    ``command_type`` is that number, as it was on the wire. Stream decoders skip the whole frame
    before raising, so the frames after it still decode.
    """

    def __init__(self, message: str, command_type: int) -> None:
        super().__init__(message)
        self.command_type = command_type


class DecompressionError(DecodeError):
    """A compressed payload could not be decompressed, or its size was not as declared."""


class EncodeError(ProtoframeError, ValueError):
    """A message or frame could not be encoded."""


class RequiredFieldUnsetError(EncodeError):
    """A proto2 ``required`` field is unset at encode time."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(f"{message}.{field} is required but is not set")
        self.message_name = message
        self.field_name = field


class ValueOutOfRangeError(EncodeError):
    """A value does not fit the wire type of its field."""


class MissingBodyError(DecodeError):
    """A command's type names a body that is not in the frame."""


class ChecksumFailure(ChecksumMismatchError):
    """A checksum mismatch that still carries what was decoded, for callers that must answer it.

    Pulsar, for one, acknowledges a corrupt message with a validation error, which needs the
    command's ids; ``value`` is the frame or struct decoded without the checksum holding.
    """

    def __init__(self, message: str, value: object, pos: int) -> None:
        super().__init__(message)
        self.value = value
        self.pos = pos  # where decoding stopped, after the value


class ConnectionClosed(ProtoframeError, ConnectionError):
    """The connection closed while a request was waiting for its answer."""


class RequestTimeout(ProtoframeError, TimeoutError):
    """A request got no answer within its timeout."""


class RequestFailed(ProtoframeError):
    """The peer answered a request with one of the spec's error responses.

    ``command`` is the spec's name of the answering command and ``body`` the decoded body;
    protocol clients turn these into more specific exceptions.
    """

    def __init__(self, command: str, body: object, message: str | None = None) -> None:
        super().__init__(message or f"request failed: {command} {body!r}")
        self.command = command
        self.body = body


class MissingTerminatorError(DecodeError):
    """A terminated string, bytes or list (``terminator:``) ran to the end of its region
    without its terminator."""


class TerminatorInValueError(EncodeError):
    """A value of a terminated field holds its terminator (or, in a list, an element equals
    it), so it would end early when decoded."""


class ValueNotAllowedError(DecodeError):
    """An integer holds a value its field's ``min:``, ``max:`` or ``nonzero:`` rules out.

    ``field`` is the field (``Struct.field``) and ``value`` the integer as it was read.
    """

    def __init__(self, message: str, field: str, value: int) -> None:
        super().__init__(message)
        self.field = field
        self.value = value


class ItemCountError(DecodeError):
    """A list has fewer elements than its ``min_items:`` or would have more than its
    ``max_items:`` (the decoder stops at the limit, before reading further elements)."""


class ItemCountOutOfRangeError(ValueOutOfRangeError):
    """A list to encode has fewer elements than its ``min_items:`` or more than its
    ``max_items:``."""


class StreamOverflow(ProtoframeError, BufferError):
    """A streamed answer read as it arrives fell too far behind: more of its messages came than
    its buffer holds while the consumer was not reading them.

    The buffer's messages already received are still read first; then this is raised, and the
    rest of the stream is swallowed so that the connection's next request gets only its own.
    """


class ReservedBitsError(DecodeError):
    """Bits the spec reserves (they must be zero) were set."""


class UnknownEnumValueError(DecodeError):
    """A field typed by one of the spec's enums holds a number the enum does not define.

    ``value`` is that number, as it was on the wire.
    """

    def __init__(self, message: str, value: int) -> None:
        super().__init__(message)
        self.value = value


class LengthTooSmallError(SizeMismatchError):
    """A length field holds less than it must count besides the content: its own bytes, the
    header (``includes:``) or its ``adjust:``."""


class MalformedLengthEncodedError(MalformedVarintError):
    """A MySQL length-encoded integer began with 0xff, a byte no length-encoded integer has."""


class UnexpectedNullError(DecodeError):
    """A length-encoded integer held NULL (0xfb) where the spec does not allow None."""


class RequirementError(DecodeError):
    """A decoded value breaks one of its struct's ``require:`` rules; ``rule`` is its text."""

    def __init__(self, message: str, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


class RequirementUnmetError(EncodeError):
    """A value to encode breaks one of its struct's ``require:`` rules; ``rule`` is its
    text."""

    def __init__(self, message: str, rule: str) -> None:
        super().__init__(message)
        self.rule = rule
