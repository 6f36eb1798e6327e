"""Getting back to a segment store after a lost connection: how hard to try, and the trying.

``RetryPolicy`` is what a user configures: the backoff between attempts (``runtime.io.backoff``)
and when to give up (a number of attempts, a time, or both). ``RetryBudget`` is what is left of
it during one outage. ``Redialer`` makes attempts (connect, HELLO, then the caller's set-up,
such as SETUP_APPEND) until one succeeds, the budget runs out (``StoreUnreachable``), or the
set-up fails in a way retrying cannot fix (a typed ``PravegaError`` such as
``SegmentIsSealed``, raised at once).

An outage lasts from a lost connection until the caller reports progress (``RetryBudget.reset``),
not merely until a connection is set up again: a store that accepts connections and drops
them at once then uses up the budget like one that refuses them, instead of being retried
forever.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from protoframe.runtime.errors import ConnectionClosed
from protoframe.runtime.io.backoff import Backoff

from .connection import ConnectionOptions, PravegaConnection
from .errors import StoreUnreachable

__all__ = ["Redialer", "RetryBudget", "RetryPolicy"]

log = logging.getLogger(__name__)

T = TypeVar("T")

# Failures of an attempt that another attempt may not have; anything else is final.
_RETRIABLE = (ConnectionClosed, TimeoutError)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long to keep trying to reach the segment store again after losing it.

    Attempts are spaced by ``Backoff(initial_delay, max_delay, multiplier=..., jitter=...)``.
    The writer gives up after ``max_attempts`` attempts or ``timeout`` seconds of one outage,
    whichever comes first; at least one of the two must be set, so no writer waits forever.
    """

    initial_delay: float = 0.05
    max_delay: float = 2.0
    multiplier: float = 2.0
    jitter: float = 0.2
    max_attempts: int | None = None
    timeout: float | None = 30.0

    def __post_init__(self) -> None:
        if self.max_attempts is None and self.timeout is None:
            raise ValueError("a RetryPolicy needs max_attempts, timeout or both")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.timeout is not None and self.timeout <= 0:
            raise ValueError("timeout must be positive")
        self.backoff()  # Backoff checks the delays, multiplier and jitter

    def backoff(self) -> Backoff:
        """A fresh ``Backoff`` with this policy's delays."""
        return Backoff(self.initial_delay, self.max_delay, multiplier=self.multiplier,
                       jitter=self.jitter)


class RetryBudget:
    """What is left of a ``RetryPolicy`` in the current outage.

    ``start`` begins an outage (a no-op while one is under way, so attempts and time add up
    across connections that fail again before any progress); ``reset`` ends it.
    """

    def __init__(self, policy: RetryPolicy, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self.policy = policy
        self.attempts = 0
        self._clock = clock
        self._started: float | None = None
        self._backoff = policy.backoff()

    @property
    def active(self) -> bool:
        """True during an outage."""
        return self._started is not None

    @property
    def elapsed(self) -> float:
        """Seconds since the outage started (0 outside one)."""
        return 0.0 if self._started is None else self._clock() - self._started

    def start(self) -> None:
        """Begin an outage, unless one is already under way."""
        if self._started is None:
            self._started = self._clock()
            self._backoff = self.policy.backoff()
            self.attempts = 0

    def reset(self) -> None:
        """The outage is over: the next one gets the whole budget again."""
        self._started = None

    def next_delay(self, *, wait: bool = True) -> float | None:
        """Count one more attempt and return how long to sleep before it (0 if not ``wait``);
        None when the budget is spent (no attempts left, or the delay would end past the
        timeout)."""
        self.start()
        policy = self.policy
        if policy.max_attempts is not None and self.attempts >= policy.max_attempts:
            return None
        delay = self._backoff.next() if wait else 0.0
        if policy.timeout is not None and self.elapsed + delay >= policy.timeout:
            return None
        self.attempts += 1
        return delay

    def time_left(self) -> float | None:
        """Seconds until the timeout (None without one): the most one attempt may take."""
        if self.policy.timeout is None:
            return None
        return max(self.policy.timeout - self.elapsed, 0.0)


class Redialer:
    """Opens connections to the segment store at ``host:port``, retrying within a budget."""

    def __init__(self, host: str, port: int, *, options: ConnectionOptions | None = None,
                 policy: RetryPolicy | None = None) -> None:
        self.host = host
        self.port = port
        self.options = options if options is not None else ConnectionOptions()
        self.budget = RetryBudget(policy if policy is not None else RetryPolicy())

    @property
    def address(self) -> str:
        """``host:port``, for messages."""
        return f"{self.host}:{self.port}"

    async def dial(self, set_up: Callable[[PravegaConnection], Awaitable[T]], *,
                   lost: BaseException | None = None, immediate: bool = False
                   ) -> tuple[PravegaConnection, T]:
        """Connect and run ``set_up`` on the new connection until an attempt succeeds.

        The first attempt goes after a backoff delay (at once with ``immediate``: for a first
        connection, when nothing has failed yet). A lost connection, refused connect or
        timeout is retried; when the budget is spent this raises ``StoreUnreachable`` (with
        ``lost``, why the previous connection ended, and the last failure as its cause). Any
        other error, such as the typed reply to a SETUP_APPEND, is raised at once. The
        connection of a failed attempt is closed.
        """
        budget = self.budget
        budget.start()
        failure = lost
        wait = not immediate
        while True:
            delay = budget.next_delay(wait=wait)
            wait = True
            if delay is None:
                raise StoreUnreachable(self.address, budget.attempts, budget.elapsed, lost) \
                    from failure
            if delay:
                await asyncio.sleep(delay)
            connection: PravegaConnection | None = None
            try:
                # Bound the whole attempt by what is left of the budget, not only by the
                # connection's own timeouts, so giving up happens on time.
                async with asyncio.timeout(budget.time_left()):
                    connection = await self.options.connect(self.host, self.port)
                    result = await set_up(connection)
            except BaseException as exc:
                if connection is not None:
                    connection.connection.abort()
                if not isinstance(exc, _RETRIABLE):
                    raise
                failure = exc
                log.info("%s: attempt %d failed: %s", self.address, budget.attempts, exc)
                continue
            return connection, result
