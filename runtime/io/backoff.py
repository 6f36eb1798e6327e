"""Exponential backoff with jitter, for reconnecting and retrying.

``Backoff`` only computes delays; callers sleep. Each delay is the current base with a random
part taken off (``jitter`` is the largest fraction removed), so many clients that lost the same
server do not all come back at the same instant. The base doubles (``multiplier``) after every
delay until ``max_delay``; ``reset()`` starts over after a success.
"""

from __future__ import annotations

import random
from collections.abc import Callable

__all__ = ["Backoff"]


class Backoff:
    """Delays of ``initial``, ``initial * multiplier``, ... capped at ``max_delay``, jittered.

    ``deadline`` (seconds, optional) bounds the sum of the delays handed out since the last
    ``reset``: ``expired`` turns true once it is used up, for callers that give up then.
    """

    def __init__(
        self,
        initial: float = 0.1,
        max_delay: float = 60.0,
        *,
        multiplier: float = 2.0,
        jitter: float = 0.2,
        deadline: float | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        if initial <= 0 or max_delay < initial:
            raise ValueError("need 0 < initial <= max_delay")
        if multiplier < 1:
            raise ValueError("multiplier must be >= 1")
        if not 0 <= jitter < 1:
            raise ValueError("jitter must be in [0, 1)")
        self.initial = initial
        self.max_delay = max_delay
        self.multiplier = multiplier
        self.jitter = jitter
        self.deadline = deadline
        self._rand = rand
        self._base = initial
        self._spent = 0.0
        self.attempts = 0

    def next(self) -> float:
        """The delay before the next attempt (seconds); advances the base."""
        base = self._base
        delay = base - base * self.jitter * self._rand()
        self._base = min(base * self.multiplier, self.max_delay)
        self._spent += delay
        self.attempts += 1
        return delay

    def peek(self) -> float:
        """The un-jittered base of the next delay."""
        return self._base

    @property
    def expired(self) -> bool:
        """True when the delays handed out since ``reset`` add up to ``deadline`` or more."""
        return self.deadline is not None and self._spent >= self.deadline

    def reset(self) -> None:
        """Start again from ``initial`` (call after a successful attempt)."""
        self._base = self.initial
        self._spent = 0.0
        self.attempts = 0
