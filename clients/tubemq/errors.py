"""Errors of the TubeMQ client: what a master or broker answered, as typed exceptions.

A TubeMQ call fails in one of two ways. The server may raise, which arrives as an
``RspExceptionBody`` (the Java exception's class name and text) and becomes ``RpcException``;
or it may answer normally with ``success = false`` and an error code, which becomes
``ServerError``. Both derive from ``TubeMQError``.
"""

from __future__ import annotations

from protoframe.runtime.errors import ProtoframeError

__all__ = ["MasterStandby", "RpcException", "ServerError", "TubeMQError"]

# Error codes (errCode) the servers answer with; 200 means success.
SUCCESS = 200
BAD_REQUEST = 400
NOT_FOUND = 404  # GET_MESSAGE: nothing new in the partition
NOT_REGISTERED = 411

STANDBY_EXCEPTION = "org.apache.inlong.tubemq.corerpc.exception.StandbyException"


class TubeMQError(ProtoframeError):
    """Base class of the errors a TubeMQ server reports."""


class RpcException(TubeMQError):
    """The server raised while handling a call (an ``EXCEPTION`` answer).

    ``exception_name`` is the server's exception class name, ``message`` the text it sent
    with it (``RspExceptionBody.stackTrace``), ``method`` the call's spec name.
    """

    def __init__(self, method: str, exception_name: str, message: str) -> None:
        super().__init__(f"{method}: {exception_name}: {message}" if message
                         else f"{method}: {exception_name}")
        self.method = method
        self.exception_name = exception_name
        self.message = message


class MasterStandby(RpcException):
    """The master is a standby and does not serve clients; another master should be tried."""


class ServerError(TubeMQError):
    """The server answered with ``success = false``: ``err_code`` and ``err_msg`` say why."""

    def __init__(self, method: str, err_code: int, err_msg: str) -> None:
        super().__init__(f"{method}: error {err_code}: {err_msg}")
        self.method = method
        self.err_code = err_code
        self.err_msg = err_msg


def rpc_exception(method: str, exception_name: str, message: str) -> RpcException:
    """The most specific ``RpcException`` for an exception class name."""
    cls = MasterStandby if exception_name == STANDBY_EXCEPTION else RpcException
    return cls(method, exception_name, message)
