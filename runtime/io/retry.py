"""Trying again after a failure: how hard to try (a policy), what is left of it, and the trying.

``RetryPolicy`` is what a user configures: the backoff between attempts (``runtime.io.backoff``)
and when to give up (a number of attempts, a time, or both; ``timeout=math.inf`` says "never").
``RetryBudget`` is what is left of it during one outage. ``retry`` makes attempts of any
coroutine until one succeeds, the budget runs out, or an attempt fails in a way the caller does
not call retriable; ``Redialer`` does the same for "open a connection, then set it up", closing
the connection of each failed attempt.

An outage lasts from the first failure until the caller reports progress (``RetryBudget.reset``),
not merely until a connection is set up again: a server that accepts connections and drops
them at once then uses up the budget like one that refuses them, instead of being retried
forever.

Nothing here knows a protocol: clients pass what an attempt is, which failures are worth
another one, and what to raise when the budget is spent.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from protoframe.runtime.errors import ConnectionClosed
from protoframe.runtime.io.backoff import Backoff

__all__ = ["GiveUp", "Redialer", "RetryBudget", "RetryPolicy", "connection_failure", "retry"]

log = logging.getLogger(__name__)

T = TypeVar("T")
C = TypeVar("C")

# Given the budget, why the outage began and the last failure: the exception to raise.
GiveUp = Callable[["RetryBudget", BaseException | None, BaseException | None], BaseException]


def connection_failure(exc: BaseException) -> bool:
    """The default of what is worth another attempt: a lost or refused connection, a timeout."""
    return isinstance(exc, (ConnectionClosed, TimeoutError))


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long to keep trying after a failure.

    Attempts are spaced by ``Backoff(initial_delay, max_delay, multiplier=..., jitter=...)``.
    A caller gives up after ``max_attempts`` attempts or ``timeout`` seconds of one outage,
    whichever comes first; at least one of the two must be set, so nothing retries forever by
    accident (``timeout=math.inf`` retries forever on purpose).
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
        if self.timeout is not None and not self.timeout > 0:
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
        """Seconds until the timeout (None without one, or when it is infinite): the most one
        attempt may take."""
        timeout = self.policy.timeout
        if timeout is None or math.isinf(timeout):
            return None
        return max(timeout - self.elapsed, 0.0)


async def retry(attempt: Callable[[], Awaitable[T]], budget: RetryBudget, *,
                give_up: GiveUp, retriable: Callable[[BaseException], bool] = connection_failure,
                lost: BaseException | None = None, immediate: bool = False,
                bound_attempts: bool = False, name: str = "") -> T:
    """Run ``attempt`` until it succeeds, within ``budget``.

    The first attempt goes after a backoff delay (at once with ``immediate``: when nothing has
    failed yet). A failure that ``retriable`` accepts is tried again; when the budget is spent
    this raises ``give_up(budget, lost, last failure)`` from the last failure. Any other
    failure (cancellation included) is raised at once. With ``bound_attempts`` an attempt is
    also cut off when the budget's time runs out, so giving up happens on time even when an
    attempt hangs.
    """
    budget.start()
    failure = lost
    wait = not immediate
    while True:
        delay = budget.next_delay(wait=wait)
        wait = True
        if delay is None:
            raise give_up(budget, lost, failure) from failure
        if delay:
            await asyncio.sleep(delay)
        try:
            if bound_attempts:
                async with asyncio.timeout(budget.time_left()):
                    return await attempt()
            return await attempt()
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError) or not retriable(exc):
                raise
            failure = exc
            log.info("%s: attempt %d failed: %s", name, budget.attempts, exc)


class Redialer(Generic[C]):
    """Opens connections with ``connect`` and sets each up, retrying within a budget.

    ``abort`` closes the connection of a failed attempt; ``give_up`` makes the error raised
    when the budget is spent (a protocol's own "unreachable" error).
    """

    def __init__(self, connect: Callable[[], Awaitable[C]], abort: Callable[[C], None], *,
                 give_up: GiveUp, policy: RetryPolicy | None = None,
                 retriable: Callable[[BaseException], bool] = connection_failure,
                 name: str = "") -> None:
        self._connect = connect
        self._abort = abort
        self._give_up = give_up
        self._retriable = retriable
        self.name = name
        self.budget = RetryBudget(policy if policy is not None else RetryPolicy())

    async def dial(self, set_up: Callable[[C], Awaitable[T]], *,
                   lost: BaseException | None = None, immediate: bool = False
                   ) -> tuple[C, T]:
        """Connect and run ``set_up`` on the new connection until an attempt succeeds.

        Retries and gives up as ``retry`` does (``lost``: why the previous connection ended);
        every attempt is bounded by what is left of the budget, not only by the connection's
        own timeouts. The connection of a failed attempt is aborted.
        """

        async def attempt() -> tuple[C, T]:
            connection: C | None = None
            try:
                connection = await self._connect()
                return connection, await set_up(connection)
            except BaseException:
                if connection is not None:
                    self._abort(connection)
                raise

        return await retry(attempt, self.budget, give_up=self._give_up,
                           retriable=self._retriable, lost=lost, immediate=immediate,
                           bound_attempts=True, name=self.name)
