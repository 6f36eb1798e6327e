"""Getting back to a segment store after a lost connection.

The policy, the budget and the trying are the runtime's (``runtime.io.retry``), shared by every
client; what is Pravega's is here: an attempt is connect and HELLO (``ConnectionOptions``), then
the caller's set-up, such as SETUP_APPEND; a spent budget raises ``StoreUnreachable``; a typed
``PravegaError`` from the set-up (``SegmentIsSealed``, ...) is raised at once, since retrying
cannot fix it.
"""

from __future__ import annotations

from protoframe.runtime.io.retry import Redialer as _Redialer
from protoframe.runtime.io.retry import RetryBudget, RetryPolicy

from .connection import ConnectionOptions, PravegaConnection
from .errors import StoreUnreachable

__all__ = ["Redialer", "RetryBudget", "RetryPolicy"]


def _abort(connection: PravegaConnection) -> None:
    connection.connection.abort()


class Redialer(_Redialer[PravegaConnection]):
    """Opens connections to the segment store at ``host:port``, retrying within a budget."""

    def __init__(self, host: str, port: int, *, options: ConnectionOptions | None = None,
                 policy: RetryPolicy | None = None) -> None:
        self.host = host
        self.port = port
        self.options = options if options is not None else ConnectionOptions()
        address = f"{host}:{port}"

        def give_up(budget: RetryBudget, lost: BaseException | None,
                    failure: BaseException | None) -> BaseException:
            return StoreUnreachable(address, budget.attempts, budget.elapsed, lost)

        super().__init__(self._connect_store, _abort, give_up=give_up, policy=policy,
                         name=address)

    @property
    def address(self) -> str:
        """``host:port``, for messages."""
        return self.name

    async def _connect_store(self) -> PravegaConnection:
        return await self.options.connect(self.host, self.port)
