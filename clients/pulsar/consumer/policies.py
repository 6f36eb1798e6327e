"""What a consumer does with messages that keep failing: the dead-letter policy and the backoff
of negative acknowledgements (the official clients' names and defaults)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["ConsumerDeadLetterPolicy", "MultiplierRedeliveryBackoff", "RedeliveryBackoff"]


@dataclass(frozen=True)
class ConsumerDeadLetterPolicy:
    """After ``max_redeliver_count`` redeliveries a message goes to ``dead_letter_topic``
    (default ``<topic>-<subscription>-DLQ``) and is acknowledged on its own topic.

    ``initial_subscription_name`` is created on the dead-letter topic with its producer, so
    that nothing sent there before anyone subscribes is lost. ``retry_letter_topic`` (the Java
    client's name; default ``<topic>-<subscription>-RETRY``) is where ``reconsume_later``
    sends, for a consumer subscribed with ``retry_enable``.
    """

    max_redeliver_count: int
    dead_letter_topic: str | None = None
    initial_subscription_name: str | None = None
    retry_letter_topic: str | None = None

    def __post_init__(self) -> None:
        if self.max_redeliver_count < 1:
            raise ValueError("max_redeliver_count must be at least 1")


class RedeliveryBackoff(Protocol):
    """How long to wait before asking again for a message redelivered ``redelivery_count``
    times already."""

    def next(self, redelivery_count: int) -> int:
        """The delay in milliseconds."""
        ...


@dataclass(frozen=True)
class MultiplierRedeliveryBackoff:
    """``min_delay_ms * multiplier ** redelivery_count``, at most ``max_delay_ms`` (the Java
    client's ``MultiplierRedeliveryBackoff`` and its defaults)."""

    min_delay_ms: int = 1000
    max_delay_ms: int = 60000
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        if self.min_delay_ms < 0 or self.max_delay_ms < self.min_delay_ms:
            raise ValueError("need 0 <= min_delay_ms <= max_delay_ms")
        if self.multiplier < 1:
            raise ValueError("multiplier must be at least 1")

    def next(self, redelivery_count: int) -> int:
        if redelivery_count <= 0 or self.min_delay_ms <= 0:
            return self.min_delay_ms
        # Capped before multiplying out: a count in the thousands must not overflow a float.
        delay = float(self.min_delay_ms)
        for _ in range(redelivery_count):
            delay *= self.multiplier
            if delay >= self.max_delay_ms:
                return self.max_delay_ms
        return int(delay)
