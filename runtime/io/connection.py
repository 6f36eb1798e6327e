"""An asyncio connection that drives a sans-IO protocol object over TCP or TLS.

The protocol object is anything with ``receive_data(bytes) -> frames`` and
``send(frame) -> bytes`` (generated ``*Protocol`` classes are); this module does the I/O
around it and knows nothing of any particular protocol:

* reading: bytes go to ``receive_data``; each frame it returns goes to the frame handler. A
  frame whose checksum fails (``ChecksumFailure``) goes to the corrupt-frame handler, the frames
  decoded before it are handled first and decoding continues after it; any other decode error
  or protocol violation closes the connection.
* writing: ``write`` queues a frame's bytes; everything queued in one turn of the event loop
  goes to the transport in one write (or at once past ``low_water`` bytes). ``send_frame``
  also waits while the transport's buffer is above its high-water mark (``drain``), so a fast
  producer cannot grow it without bound; ``writable`` and ``on_writable`` let callers hold
  data back instead.
* closing: when the connection ends, every close listener (the generated requests' among
  them, see ``runtime.io.endpoint``) and every ``drain`` waiter gets a ``ConnectionClosed``:
  nothing is left waiting.
* keepalive: a ``KeepalivePolicy`` (``runtime.io.keepalive``) sees every received frame first and
  runs a timer while the connection is open. ``KeepaliveHooks`` with ``keepalive_interval``
  stands for ``PingPong``: a ping from the peer is answered at once, a ping is sent every
  ``keepalive_interval`` seconds and the connection is closed when nothing at all has arrived
  for twice that long.

Beside it in ``runtime.io``: ``pool.ConnectionPool`` keeps one connection per address for every
user of it; ``backoff`` and ``retry`` space out reconnection attempts; ``auth.Authentication``
is the interface credential plug-ins implement (the protocol client decides how to send them);
``tls.make_ssl_context`` makes the context ``connect`` takes.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

from protoframe.runtime.errors import ChecksumFailure, ConnectionClosed, DecodeError
from protoframe.runtime.io.keepalive import KeepaliveHooks, KeepalivePolicy, PingPong

__all__ = [
    "Connection",
    "FrameProtocol",
    "KeepaliveHooks",
    "KeepalivePolicy",
    "open_connection",
]

log = logging.getLogger(__name__)

F = TypeVar("F")

DEFAULT_KEEPALIVE_INTERVAL = 30.0
DEFAULT_HIGH_WATER = 1 << 20
DEFAULT_LOW_WATER = 1 << 18


class FrameProtocol(Protocol[F]):
    """A sans-IO protocol: bytes in, frames out; frames in, bytes out."""

    def receive_data(self, data: bytes) -> Sequence[F]: ...

    def send(self, frame: F) -> bytes: ...


class Connection(asyncio.Protocol, Generic[F]):
    """One connection, driving ``protocol``; see the module docstring.

    Create it through ``open_connection`` (or pass it as the protocol factory of
    ``loop.create_connection``/``create_server`` yourself).
    """

    def __init__(
        self,
        protocol: FrameProtocol[F],
        on_frame: Callable[[F], None] | None = None,
        *,
        on_corrupt_frame: Callable[[F, ChecksumFailure], None] | None = None,
        keepalive: KeepaliveHooks[F] | KeepalivePolicy[F] | None = None,
        keepalive_interval: float | None = DEFAULT_KEEPALIVE_INTERVAL,
        high_water: int = DEFAULT_HIGH_WATER,
        low_water: int = DEFAULT_LOW_WATER,
        name: str = "",
    ) -> None:
        self.protocol = protocol
        self.on_frame: Callable[[F], None] = on_frame or _ignore
        self.on_corrupt_frame = on_corrupt_frame
        if isinstance(keepalive, KeepalivePolicy):
            self.keepalive: KeepalivePolicy[F] | None = keepalive
        elif keepalive is not None and keepalive_interval:
            self.keepalive = PingPong(keepalive, keepalive_interval)
        else:
            self.keepalive = None
        self.name = name
        self._high_water = high_water
        self._low_water = low_water
        self._transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._paused = False
        self._out: list[bytes] = []
        self._out_size = 0
        self._flush_handle: asyncio.Handle | None = None
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._writable_listeners: list[Callable[[], None]] = []
        self._close_listeners: list[Callable[[ConnectionClosed], None]] = []
        self._closed: ConnectionClosed | None = None
        self._close_reason: ConnectionClosed | None = None
        self._closed_future: asyncio.Future[None] | None = None
        self.last_received = 0.0
        self.bytes_received = 0
        self.frames_received = 0
        self.bytes_sent = 0

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("open" if self._transport else "new")
        return f"<Connection {self.name or id(self)} {state}>"

    # ---- state -----------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        """Connected, and neither closed nor closing."""
        return self._transport is not None and self._closed is None and \
            self._close_reason is None

    @property
    def closed(self) -> ConnectionClosed | None:
        """Why the connection ended, once it has."""
        return self._closed

    @property
    def writable(self) -> bool:
        """False while the transport's buffer is above the high-water mark (or it is closing)."""
        return not self._paused and self.is_open and \
            not self._transport.is_closing()  # type: ignore[union-attr]

    @property
    def transport(self) -> asyncio.Transport | None:
        return self._transport

    def on_close(self, listener: Callable[[ConnectionClosed], None]) -> None:
        """Call ``listener(exc)`` once when the connection ends (at once if it has)."""
        if self._closed is not None:
            listener(self._closed)
        else:
            self._close_listeners.append(listener)

    def remove_close_listener(self, listener: Callable[[ConnectionClosed], None]) -> None:
        if listener in self._close_listeners:
            self._close_listeners.remove(listener)

    def on_writable(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` every time the transport's buffer drains below the low mark."""
        self._writable_listeners.append(listener)

    def remove_writable_listener(self, listener: Callable[[], None]) -> None:
        if listener in self._writable_listeners:
            self._writable_listeners.remove(listener)

    async def connect(self, host: str, port: int, *, ssl_context: ssl.SSLContext | None = None,
                      server_hostname: str | None = None, timeout: float | None = 10.0) -> None:
        """Open the TCP (or, with ``ssl_context``, TLS) connection this object drives.

        Failures (refused, unreachable, TLS handshake, ``timeout``) raise ``ConnectionClosed``.
        """
        loop = asyncio.get_running_loop()
        try:
            if ssl_context is not None:
                connecting = loop.create_connection(
                    lambda: self, host, port, ssl=ssl_context,
                    server_hostname=server_hostname if server_hostname is not None else host)
            else:
                connecting = loop.create_connection(lambda: self, host, port)
            await asyncio.wait_for(connecting, timeout)
        except TimeoutError:
            raise ConnectionClosed(f"{host}:{port}: could not connect within {timeout} s") \
                from None
        except OSError as exc:  # includes ssl.SSLError
            raise ConnectionClosed(f"{host}:{port}: could not connect: {exc}") from exc

    # ---- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._loop = asyncio.get_running_loop()
        self.last_received = self._loop.time()
        transport.set_write_buffer_limits(self._high_water, self._low_water)
        if self.keepalive is not None:
            self.keepalive.start(self)

    def data_received(self, data: bytes) -> None:
        loop = self._loop
        assert loop is not None
        self.last_received = loop.time()
        self.bytes_received += len(data)
        try:
            frames = self.protocol.receive_data(data)
        except DecodeError as exc:
            self._decode_failed(exc)
            return
        except Exception as exc:  # a protocol violation: the peer cannot be trusted any more
            self.abort(exc)
            return
        self.frames_received += len(frames)
        self._dispatch(frames)

    def _dispatch(self, frames: Sequence[F]) -> None:
        keepalive = self.keepalive
        # Only the frames the policy's quick test picks reach ``received``: one call per frame
        # for a ping-answering policy, none for the others (``python -m bench client``).
        may_take = keepalive.may_take if keepalive is not None else None
        take = keepalive.received if keepalive is not None else None
        on_frame = self.on_frame
        for frame in frames:
            if self._closed is not None:
                return
            if may_take is not None and may_take(frame) and take is not None and take(frame):
                continue
            try:
                on_frame(frame)
            except Exception:
                log.exception("%r: frame handler failed", self)

    def _decode_failed(self, exc: DecodeError) -> None:
        while True:
            self.frames_received += len(exc.frames_before) + isinstance(exc, ChecksumFailure)
            self._dispatch(exc.frames_before)  # type: ignore[arg-type]
            if not isinstance(exc, ChecksumFailure):
                self.abort(exc)
                return
            if self.on_corrupt_frame is not None:
                try:
                    self.on_corrupt_frame(exc.value, exc)  # type: ignore[arg-type]
                except Exception:
                    log.exception("%r: corrupt-frame handler failed", self)
            else:
                log.warning("%r: dropped a frame: %s", self, exc)
            if self._close_reason is not None or self._closed is not None:
                return  # the handler closed the connection: read nothing more from it
            try:
                frames = self.protocol.receive_data(b"")
            except DecodeError as again:
                exc = again
                continue
            except Exception as other:
                self.abort(other)
                return
            self.frames_received += len(frames)
            self._dispatch(frames)
            return

    def eof_received(self) -> bool | None:
        self._close_reason = self._close_reason or ConnectionClosed(
            f"{self.name or 'connection'}: closed by the peer")
        return None  # let the transport close itself

    def connection_lost(self, exc: Exception | None) -> None:
        if self._closed is not None:
            return
        reason = self._close_reason
        if reason is None:
            reason = ConnectionClosed(
                f"{self.name or 'connection'}: "
                + (f"lost: {exc}" if exc is not None else "closed by the peer"))
            if exc is not None:
                reason.__cause__ = exc
        self._closed = reason
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        self._out = []
        self._out_size = 0
        if self.keepalive is not None:
            self.keepalive.stop()
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(reason)
        listeners, self._close_listeners = self._close_listeners, []
        for listener in listeners:
            try:
                listener(reason)
            except Exception:
                log.exception("%r: close listener failed", self)
        self._writable_listeners.clear()
        if self._closed_future is not None and not self._closed_future.done():
            self._closed_future.set_result(None)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
        for listener in list(self._writable_listeners):
            if self._paused or self._closed is not None:
                break
            try:
                listener()
            except Exception:
                log.exception("%r: writable listener failed", self)

    # ---- writing ---------------------------------------------------------------------------

    def _check_open(self) -> asyncio.Transport:
        if self._closed is not None:
            raise self._closed
        if self._close_reason is not None:
            raise self._close_reason
        transport = self._transport
        if transport is None:
            raise ConnectionClosed(f"{self.name or 'connection'}: not connected")
        if transport.is_closing():
            # The transport saw the connection fail; connection_lost is on its way.
            raise ConnectionClosed(f"{self.name or 'connection'}: closing")
        return transport

    def write(self, frame: F) -> None:
        """Encode ``frame`` and queue it for the transport (no waiting for room).

        Frames written in one turn of the event loop go to the socket together, in one
        ``transport.write`` at the end of the turn (or as soon as ``low_water`` bytes are
        queued), so many small frames cost one system call rather than one each.
        """
        self._check_open()
        self._queue(self.protocol.send(frame))

    def write_raw(self, data: bytes) -> None:
        """Queue bytes encoded already (a frame's tail a server copies from storage, say), as
        ``write`` queues a frame's: they bypass ``protocol.send`` and its checks."""
        self._check_open()
        self._queue(data)

    def _queue(self, data: bytes) -> None:
        self.bytes_sent += len(data)
        self._out.append(data)
        self._out_size += len(data)
        if self._out_size >= self._low_water:
            self._flush_out()
        elif self._flush_handle is None:
            loop = self._loop
            assert loop is not None
            self._flush_handle = loop.call_soon(self._flush_out)

    def write_many(self, frames: Sequence[F]) -> None:
        """Encode several frames and queue them (see ``write``)."""
        for frame in frames:
            self.write(frame)

    def flush(self) -> None:
        """Hand what ``write`` queued to the transport now, not at the end of the event loop's
        turn: for a latency-critical frame written by code that may not yield for a while."""
        self._flush_out()

    def _flush_out(self) -> None:
        """Hand what ``write`` queued to the transport."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        out = self._out
        if not out:
            return
        self._out = []
        self._out_size = 0
        transport = self._transport
        if transport is None or transport.is_closing() or self._closed is not None:
            return  # the connection is going: what was not sent is lost with it
        transport.write(out[0] if len(out) == 1 else b"".join(out))

    async def drain(self) -> None:
        """Send what is queued; wait until the transport's buffer is below the high mark."""
        self._flush_out()
        if not self._paused:
            if self._closed is not None:
                raise self._closed
            return
        loop = self._loop
        assert loop is not None
        waiter: asyncio.Future[None] = loop.create_future()
        self._drain_waiters.append(waiter)
        await waiter

    async def send_frame(self, frame: F) -> None:
        """Write ``frame``; wait for room if the write buffer is over its limit."""
        self.write(frame)
        if self._paused:
            await self.drain()

    # ---- closing -----------------------------------------------------------------------------

    def close(self, reason: BaseException | None = None) -> None:
        """Close after the buffered bytes are written; pending requests fail."""
        if self._transport is not None and self._closed is None and self._close_reason is None:
            self._flush_out()
        self._set_reason(reason, "closed locally")
        if self._transport is not None and self._closed is None:
            self._transport.close()
        elif self._transport is None and self._closed is None:
            self.connection_lost(None)

    def abort(self, reason: BaseException | None = None) -> None:
        """Close at once, dropping anything not yet written."""
        self._set_reason(reason, "aborted")
        if reason is not None and not isinstance(reason, ConnectionClosed):
            log.warning("%r: closing: %s", self, reason)
        if self._transport is not None and self._closed is None:
            self._transport.abort()
        elif self._transport is None and self._closed is None:
            self.connection_lost(None)

    def _set_reason(self, reason: BaseException | None, default: str) -> None:
        if self._close_reason is not None:
            return
        if isinstance(reason, ConnectionClosed):
            self._close_reason = reason
        else:
            what = f"{self.name or 'connection'}: {default}"
            self._close_reason = ConnectionClosed(f"{what}: {reason}" if reason else what)
            if reason is not None:
                self._close_reason.__cause__ = reason

    async def wait_closed(self) -> None:
        """Wait until the connection has ended."""
        if self._closed is not None:
            return
        if self._closed_future is None:
            self._closed_future = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._closed_future)


def _ignore(frame: object) -> None:
    pass


async def open_connection(
    host: str,
    port: int,
    protocol: FrameProtocol[F],
    on_frame: Callable[[F], None] | None = None,
    *,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    connect_timeout: float | None = 10.0,
    **options: Any,
) -> Connection[F]:
    """Connect to ``host:port`` (over TLS when ``ssl_context`` is given).

    ``options`` go to ``Connection`` (keepalive, handlers, buffer limits, name).
    """
    options.setdefault("name", f"{host}:{port}")
    connection: Connection[F] = Connection(protocol, on_frame, **options)
    await connection.connect(host, port, ssl_context=ssl_context,
                             server_hostname=server_hostname, timeout=connect_timeout)
    return connection
