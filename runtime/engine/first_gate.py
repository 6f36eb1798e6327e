"""The first message a side sends (``first:`` in a spec): the one message with a layout of its
own that goes before any frame, once.

A generated protocol keeps a ``FirstGate`` for what it sends: until the first message of its
direction has gone out, sending anything else is a ``FirstMessageViolation``, and so is sending
a first message afterwards (or one of the other direction). Receiving a second one cannot
happen: the stream decoder reads frames once it has decoded the first message.
"""

from __future__ import annotations

from protoframe.runtime.engine.machine import ProtocolViolation
from protoframe.runtime.errors import ProtoframeError


class FirstMessageViolation(ProtocolViolation):
    """A first message sent out of its place: late, twice, by the wrong side, or a frame sent
    before it. ``expected`` is the first message's class name while it is still due."""

    def __init__(self, command: str, expected: str | None, message: str) -> None:
        ProtoframeError.__init__(self, message)
        self.machine = "first"
        self.key = None
        self.state = "handshake" if expected is not None else "open"
        self.direction = "send"
        self.command = command
        self.expected = expected


class FirstGate:
    """What one side may send first: ``expected`` (its first message's class, None when its
    direction has none) before anything else, and no class of ``firsts`` after it."""

    def __init__(self, expected: type | None, firsts: tuple[type, ...]) -> None:
        self.expected = expected
        self.firsts = firsts

    @property
    def pending(self) -> bool:
        """Whether this side still has its first message to send."""
        return self.expected is not None

    def check(self, command: str, message: object) -> None:
        """Check ``message`` (command ``command``) about to go out; raise
        ``FirstMessageViolation`` when it is out of place. Nothing changes until ``sent``."""
        expected = self.expected
        if expected is not None:
            if not isinstance(message, expected):
                raise FirstMessageViolation(
                    command, expected.__name__,
                    f"cannot send {command} before the first message {expected.__name__}")
        elif isinstance(message, self.firsts):
            raise FirstMessageViolation(
                command, None, f"cannot send {command}: a first message goes once, first, "
                "and only from the side whose direction declares it")

    def sent(self, message: object) -> None:
        """``message`` went out (``check`` let it, and so did the machines)."""
        if self.expected is not None and isinstance(message, self.expected):
            self.expected = None
