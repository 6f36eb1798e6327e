"""Running the broker: a ``runtime.io.server`` server, in this event loop, a thread or a subprocess.

``EmbeddedBroker`` serves in the running event loop (``async with EmbeddedBroker() as url``).
``BrokerThread`` runs one in a background thread with its own loop, and ``BrokerProcess`` in a
child process (``python -m protoframe.clients.pulsar broker``); both suit synchronous clients
such as the official one, which block the thread that calls them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import ssl
import subprocess
import sys
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from protoframe import import_root
from protoframe.runtime.io.cli import READY_PREFIX
from protoframe.runtime.io.keepalive import PingWhenQuiet
from protoframe.runtime.io.limits import ConnectionLimits
from protoframe.runtime.io.server import Server, serve

from .guarded_session import GuardedSession
from .limits import Limits
from .schema_compat import Strategy
from .schema_store import SchemaFile
from .schemas import (
    DEFAULT_STRATEGY,
    MAX_SCHEMA_SIZE,
    MAX_SCHEMA_VERSIONS,
    SchemaLimits,
    SchemaRegistry,
)
from .security import Security
from .session import Session
from .state import BrokerState
from .storage import DEFAULT_CACHE_BYTES, FileStorage, Storage
from .topics import DEFAULT_RETENTION_BYTES

log = logging.getLogger(__name__)

T = TypeVar("T")

# What a client may hold of the broker unless told otherwise (``EmbeddedBroker``): a fixed
# ceiling on connections and on bytes parked in unfinished frames, and deadlines for the
# handshake and for a frame, so that memory is bounded by configuration rather than traffic.
DEFAULT_MAX_CONNECTIONS = 10_000
DEFAULT_HANDSHAKE_TIMEOUT = 30.0
DEFAULT_FRAME_TIMEOUT = 60.0
DEFAULT_MAX_PENDING_FRAME_BYTES = 64 << 20


class EmbeddedBroker:
    """A Pulsar broker in the running event loop.

    ``data_dir=None`` keeps everything in memory; with a directory, messages and cursors go to
    an append-only log there and survive a restart. ``port=0`` picks a free port. Acknowledged
    entries are kept until a topic holds more than ``retention_bytes``. Lookups send clients
    to the address they connected to, or to ``advertised_url`` when set (a broker behind a
    TCP proxy or a NAT must name the address clients can reach, as Pulsar's
    ``advertisedAddress`` does). A log damaged in the middle stops ``start`` with
    ``storage.CorruptLogError`` unless ``repair``; persisted payloads are read back through a
    cache of ``cache_bytes``.

    What clients may hold (0 or None: no limit): ``max_connections`` open at once (Pulsar's
    ``brokerMaxConnections``; more are closed when accepted); ``handshake_timeout`` seconds to
    send CONNECT; ``frame_timeout`` seconds to finish a frame once its first byte arrived;
    ``max_pending_frame_bytes`` in unfinished frames over all connections and
    ``max_pending_frame_bytes_per_connection`` on one (default: the largest frame allowed).
    A client quiet for ``keepalive_interval`` is PINGed and closed if the next interval is
    quiet too (Pulsar's ``keepAliveIntervalSeconds``). The connection that goes over a limit
    is closed; the others are untouched.

    What one command may carry (names, metadata, integer ranges, batch sizes, ack sets) is
    ``limits`` (``clients.pulsar.broker.limits``): a command over one gets an error answer
    naming the limit and changes nothing.

    ``tls_port`` (0 picks a free one) adds a TLS listener (``tls_url``, ``pulsar+ssl://``)
    with the certificate ``tls_certificate_file_path`` and key ``tls_key_file_path``; client
    certificates signed by ``tls_trust_certs_file_path`` are verified (and may authenticate).
    ``security`` (``clients.pulsar.broker.security``) turns on authentication by token or
    client certificate and authorization per namespace.
    Schemas are checked with ``schema_compatibility_strategy`` (Pulsar's
    ``schemaCompatibilityStrategy``, default ``FULL``, a ``schema_compat.Strategy`` or its name);
    a definition is at most ``max_schema_size`` bytes and a topic holds at most
    ``max_schema_versions`` versions (``schemas``).
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0,
                 data_dir: str | os.PathLike[str] | None = None,
                 keepalive_interval: float | None = 30.0, fsync: bool = True,
                 retention_bytes: int = DEFAULT_RETENTION_BYTES,
                 advertised_url: str | None = None,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 handshake_timeout: float | None = DEFAULT_HANDSHAKE_TIMEOUT,
                 frame_timeout: float | None = DEFAULT_FRAME_TIMEOUT,
                 max_pending_frame_bytes: int = DEFAULT_MAX_PENDING_FRAME_BYTES,
                 max_pending_frame_bytes_per_connection: int = 0,
                 limits: Limits | None = None, repair: bool = False,
                 cache_bytes: int = DEFAULT_CACHE_BYTES,
                 tls_port: int | None = None,
                 tls_certificate_file_path: str | os.PathLike[str] | None = None,
                 tls_key_file_path: str | os.PathLike[str] | None = None,
                 tls_trust_certs_file_path: str | os.PathLike[str] | None = None,
                 security: Security | None = None,
                 schema_compatibility_strategy: Strategy | str = DEFAULT_STRATEGY,
                 max_schema_size: int = MAX_SCHEMA_SIZE,
                 max_schema_versions: int = MAX_SCHEMA_VERSIONS) -> None:
        if tls_port is not None and (tls_certificate_file_path is None
                                     or tls_key_file_path is None):
            raise ValueError("a TLS listener needs tls_certificate_file_path and "
                             "tls_key_file_path")
        self.host = host
        self.port = port
        self.data_dir = data_dir
        self.keepalive_interval = keepalive_interval
        self.advertised_url = advertised_url
        self.connection_limits = ConnectionLimits(
            max_connections=max_connections, handshake_timeout=handshake_timeout or None,
            frame_timeout=frame_timeout or None,
            max_partial_bytes=max_pending_frame_bytes_per_connection,
            max_partial_bytes_total=max_pending_frame_bytes)
        storage = (FileStorage(data_dir, fsync=fsync, repair=repair, cache_bytes=cache_bytes)
                   if data_dir is not None else Storage())
        strategy = (schema_compatibility_strategy
                    if isinstance(schema_compatibility_strategy, Strategy)
                    else Strategy[schema_compatibility_strategy.upper()])
        schemas = SchemaRegistry(
            SchemaFile(data_dir, fsync=fsync, repair=repair) if data_dir is not None else None,
            strategy=strategy, limits=SchemaLimits(max_schema_size, max_schema_versions))
        self.state = BrokerState(storage, retention_bytes=retention_bytes, limits=limits,
                                 schemas=schemas)
        self.tls_port = tls_port
        self._tls_files = (tls_certificate_file_path, tls_key_file_path,
                           tls_trust_certs_file_path)
        self.security = security
        self._server: Server[Session] | None = None
        self._tls_server: Server[Session] | None = None
        self.url = ""
        self.tls_url = ""

    @property
    def sessions(self) -> set[Session]:
        """The sessions of the open connections (of both listeners)."""
        plain = self._server.sessions if self._server is not None else set()
        return plain | self._tls_server.sessions if self._tls_server is not None else plain

    def _session(self) -> Session:
        if self.security is None and self.tls_port is None:
            return Session(self.state, service_url=self.advertised_url)
        return GuardedSession(self.state, security=self.security,
                              service_url=self.advertised_url, tls_port=self.tls_port,
                              plain_port=self.port)

    def _tls_context(self) -> ssl.SSLContext:
        cert, key, trust = self._tls_files
        assert cert is not None and key is not None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        if trust is not None:
            # Optional: a client without a certificate may still authenticate by token.
            context.load_verify_locations(trust)
            context.verify_mode = ssl.CERT_OPTIONAL
        return context

    def _keepalive(self, session: Session) -> PingWhenQuiet[Any] | None:
        return session.keepalive(self.keepalive_interval) if self.keepalive_interval else None

    async def start(self) -> str:
        """Recover from the data directory, listen, and return the service URL."""
        self.state.recover()
        self.state.schemas.recover()
        context = self._tls_context() if self.tls_port is not None else None
        self._server = await serve(
            self.host, self.port, self._session,
            keepalive=self._keepalive, name="Pulsar broker", limits=self.connection_limits)
        self.port = self._server.port
        host = "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host
        host = f'[{host}]' if ':' in host else host
        self.url = f"pulsar://{host}:{self.port}"
        if context is not None:
            self._tls_server = await serve(
                self.host, self.tls_port or 0, self._session, keepalive=self._keepalive,
                name="Pulsar broker (TLS)", limits=self.connection_limits, ssl_context=context)
            self.tls_port = self._tls_server.port
            self.tls_url = f"pulsar+ssl://{host}:{self.tls_port}"
            log.info("broker listening on %s (TLS)", self.tls_url)
        log.info("broker listening on %s (data dir: %s)", self.url, self.data_dir or "none")
        return self.url

    async def stop(self) -> None:
        """Stop listening, close every connection, and write what is pending."""
        for server in (self._server, self._tls_server):
            if server is not None:
                for session in list(server.sessions):
                    session.abort("broker shutting down", logging.INFO)
                await server.stop()
        self._server = self._tls_server = None
        await self.state.storage.close()
        self.state.schemas.close()

    async def serve_forever(self) -> None:
        assert self._server is not None, "start() first"
        await self._server.serve_forever()

    async def __aenter__(self) -> str:
        return await self.start()

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.stop()

    def create_partitioned_topic(self, topic: str, partitions: int) -> str:
        """Admin: declare ``topic`` with ``partitions`` partitions; returns its full name."""
        return self.state.create_partitioned_topic(topic, partitions)

    def update_partitioned_topic(self, topic: str, partitions: int) -> str:
        """Admin: grow partitioned ``topic`` to ``partitions`` partitions (never fewer)."""
        return self.state.update_partitioned_topic(topic, partitions)


class BrokerThread:
    """An ``EmbeddedBroker`` on a background thread with its own event loop.

    >>> with BrokerThread() as broker:   # doctest: +SKIP
    ...     client = pulsar.Client(broker.url)
    """

    def __init__(self, **kwargs: Any) -> None:
        self.broker = EmbeddedBroker(**kwargs)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.url = ""

    def start(self, timeout: float = 30.0) -> str:
        self._thread = threading.Thread(target=self._run, name="pulsar-broker", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("the broker thread did not start")
        if self._error is not None:
            raise RuntimeError("the broker failed to start") from self._error
        self.url = self.broker.url
        return self.url

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            await self.broker.start()
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await self.broker.stop()

    def call(self, fn: Callable[..., T], *args: Any, timeout: float = 30.0) -> T:
        """Run ``fn(*args)`` on the broker's loop and return its result."""
        assert self._loop is not None, "start() first"

        async def run() -> T:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)

    def create_partitioned_topic(self, topic: str, partitions: int) -> str:
        return self.call(self.broker.create_partitioned_topic, topic, partitions)

    def update_partitioned_topic(self, topic: str, partitions: int) -> str:
        return self.call(self.broker.update_partitioned_topic, topic, partitions)

    def stop(self, timeout: float = 30.0) -> None:
        if self._loop is not None and self._stop is not None and self._thread is not None:
            if self._thread.is_alive():
                self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout)
        self._thread = None

    def __enter__(self) -> BrokerThread:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class BrokerProcess:
    """The broker in a child process (``python -m protoframe.clients.pulsar broker``).

    ``kill()`` ends it with SIGKILL, as a crash would; ``stop()`` asks it to shut down.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0,
                 data_dir: str | os.PathLike[str] | None = None,
                 partitioned: dict[str, int] | None = None, extra_args: tuple[str, ...] = (),
                 stderr: Any = None) -> None:
        self.args = [sys.executable, "-m", "protoframe.clients.pulsar", "broker", "--host", host,
                     "--port", str(port), *extra_args]
        if data_dir is not None:
            self.args += ["--data-dir", os.fspath(data_dir)]
        for topic, count in (partitioned or {}).items():
            self.args += ["--partitioned-topic", f"{topic}={count}"]
        self.stderr = stderr
        self.process: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self, timeout: float = 30.0) -> str:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (import_root(), env.get("PYTHONPATH", "")) if p)
        self.process = subprocess.Popen(self.args, env=env, text=True,
                                        stdout=subprocess.PIPE, stderr=self.stderr)
        lines: queue.Queue[str] = queue.Queue()
        stdout = self.process.stdout
        assert stdout is not None

        def read() -> None:
            for line in stdout:
                lines.put(line)
            lines.put("")

        threading.Thread(target=read, name="broker-stdout", daemon=True).start()
        try:
            while True:
                line = lines.get(timeout=timeout)
                if not line:
                    raise RuntimeError(f"the broker exited with {self.process.wait()}")
                if line.startswith(READY_PREFIX):
                    self.url = line[len(READY_PREFIX):].strip()
                    return self.url
        except queue.Empty:
            self.kill()
            raise TimeoutError("the broker process did not start") from None

    def stop(self, timeout: float = 30.0) -> int:
        """Ask the broker to shut down (SIGTERM) and wait for it."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.terminate()
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def kill(self) -> None:
        """End the broker abruptly, as a crash would."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> BrokerProcess:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
