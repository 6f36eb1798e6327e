"""A WebSocket echo server (the server side of the ``websockets`` package, a dev dependency) for
the tests of the WebSocket example, in a subprocess of its own as the other real servers are:
``python -m tests.support.websocket_server --serve`` listens on 127.0.0.1, a port the kernel
picks, prints that port, and sends every message back as it came (text as text, binary as
binary) until SIGTERM. ``start`` runs it under the same watchdog and stop as the others.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
import signal
import sys
import time
from dataclasses import dataclass

from tests.support.paths import ROOT
from tests.support.server_process import ServerProcess, ServerStartError

NOT_INSTALLED = ("the websockets package is not installed in this Python ({python}): "
                 "pip install -e '.[dev]'")
LISTENING = re.compile(r"^websocket echo server listening on 127\.0\.0\.1:(\d+)$", re.MULTILINE)


def unavailable_reason() -> str | None:
    if importlib.util.find_spec("websockets") is None:
        return NOT_INSTALLED.format(python=sys.executable)
    return None


@dataclass
class WebSocketServer:
    """A running echo server: where it listens (``url`` for a client's upgrade request)."""

    host: str
    port: int
    server: ServerProcess
    startup_seconds: float = 0.0

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}/"

    def stop(self, timeout: float = 60) -> None:
        self.server.stop(timeout)


def start(timeout: float = 60) -> WebSocketServer:
    """Start the server; return once it listens, or raise (having stopped it) with its log."""
    reason = unavailable_reason()
    if reason is not None:
        raise RuntimeError(reason)
    server = ServerProcess.create("websocket")
    started = time.monotonic()
    try:
        process = server.launch([sys.executable, "-m", "tests.support.websocket_server",
                                 "--serve"], cwd=ROOT)
        deadline = started + timeout
        while (found := LISTENING.search(server.log.read_text(errors="replace"))) is None:
            if process.poll() is not None:
                raise ServerStartError(
                    f"the websocket server exited during its start (exit status "
                    f"{process.returncode}); the end of its log ({server.log}):\n"
                    f"{server.log_tail()}")
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"the websocket server did not say its port {timeout:.0f} s after its "
                    f"start; the end of its log ({server.log}):\n{server.log_tail()}")
            time.sleep(0.1)
        port = int(found.group(1))
        server.wait_for_port(port, started, timeout)
    except BaseException:
        server.stop()
        raise
    return WebSocketServer("127.0.0.1", port, server, time.monotonic() - started)


async def serve() -> None:
    from websockets.asyncio.server import ServerConnection
    from websockets.asyncio.server import serve as websocket_serve

    async def echo(connection: ServerConnection) -> None:
        async for message in connection:
            await connection.send(message)

    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    async with websocket_serve(echo, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        print(f"websocket echo server listening on 127.0.0.1:{port}", flush=True)
        await stop.wait()


def main() -> None:
    if sys.argv[1:] == ["--serve"]:
        asyncio.run(serve())
        return
    signal.signal(signal.SIGINT, lambda signum, frame: None)
    server = start()
    print(f"WebSocket echo server up in {server.startup_seconds:.1f} s at {server.url}; "
          "Ctrl-C stops it.", flush=True)
    try:
        signal.pause()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
