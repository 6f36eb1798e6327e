"""Session fixtures of the real servers the example protocols are tested against: one instance of
each for a whole run (RabbitMQ takes tens of seconds to boot on a loaded machine), started on
first use, stopped by its pids at the end, skipped with the reason when its server is not
installed (``make peers``; the websockets package for the WebSocket server).

tests/conftest.py imports them (and marks each test that uses one ``interop``, which ``make
test-fast`` leaves out); a conftest.py elsewhere (an example's tests) imports them the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

import pytest

from tests.support import mariadb_server as mariadb_module
from tests.support import rabbitmq_server as rabbitmq_module
from tests.support import websocket_server as websocket_module
from tests.support.mariadb_server import MariaDB
from tests.support.rabbitmq_server import RabbitMQ
from tests.support.websocket_server import WebSocketServer

SERVER_FIXTURES = ("mariadb_server", "rabbitmq_server", "websocket_server")


class _Running(Protocol):
    startup_seconds: float

    def stop(self, timeout: float = 60) -> None: ...


Server = TypeVar("Server", bound=_Running)


def _serve(request: pytest.FixtureRequest, name: str, reason: str | None,
           start: Callable[[], Server], where: Callable[[Server], str]) -> Iterator[Server]:
    if reason is not None:
        pytest.skip(reason)
    server = start()
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\n[{name} up in {server.startup_seconds:.1f} s at {where(server)}]")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def mariadb_server(request: pytest.FixtureRequest) -> Iterator[MariaDB]:
    """A MariaDB server with a test database and user (tests/support/mariadb_server.py)."""
    yield from _serve(request, "MariaDB", mariadb_module.unavailable_reason(),
                      mariadb_module.start, lambda db: f"{db.host}:{db.port}")


@pytest.fixture(scope="session")
def rabbitmq_server(request: pytest.FixtureRequest) -> Iterator[RabbitMQ]:
    """A RabbitMQ node with a test user on vhost / (tests/support/rabbitmq_server.py)."""
    yield from _serve(request, "RabbitMQ", rabbitmq_module.unavailable_reason(),
                      rabbitmq_module.start, lambda node: f"{node.host}:{node.port}")


@pytest.fixture(scope="session")
def websocket_server(request: pytest.FixtureRequest) -> Iterator[WebSocketServer]:
    """A WebSocket echo server of the websockets package (tests/support/websocket_server.py)."""
    yield from _serve(request, "WebSocket echo server", websocket_module.unavailable_reason(),
                      websocket_module.start, lambda server: server.url)
