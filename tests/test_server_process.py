"""tests/support/server_process.py and the real servers' fixtures without any server: a start
that fails or overruns says so with the end of the server's log and leaves nothing running, and
a server that is not installed is skipped with the reason (``make peers``). The servers
themselves: tests/interop/test_peer_servers.py."""

from __future__ import annotations

import importlib.util
import re
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.support import mariadb_server, rabbitmq_server, server_process, websocket_server
from tests.support.server_fixtures import _serve
from tests.support.server_process import ServerProcess, ServerStartError

if sys.platform == "win32":
    pytest.skip("process groups are POSIX", allow_module_level=True)


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    started = ServerProcess.create("stand-in")
    try:
        yield started
    finally:
        started.stop()
    assert started.alive() == [] and not started.directory.exists()


def test_a_server_that_exits_during_its_start_is_reported_with_its_log(
        server: ServerProcess) -> None:
    server.launch([sys.executable, "-c", "print('no such table: config'); raise SystemExit(3)"])
    with pytest.raises(ServerStartError, match=r"(?s)exited during its start \(exit status 3\)"
                                               r".*no such table: config"):
        server.wait_for_port(1, time.monotonic(), timeout=60)


def test_a_server_that_never_listens_times_out_with_its_log(server: ServerProcess) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # bound, never listening: connections are refused
        server.launch([sys.executable, "-c",
                       "import time; print('waiting for the disk', flush=True); time.sleep(600)"])
        started = time.monotonic()
        with pytest.raises(ServerStartError, match=rf"(?s)not listening on 127\.0\.0\.1:{port} "
                                                   r"2 s after.*waiting for the disk"):
            server.wait_for_port(port, started, timeout=2)
    assert server.alive() == server.groups()  # still running: stop (the fixture's) ends it


def test_a_failed_setup_step_is_reported_with_its_log(server: ServerProcess) -> None:
    with pytest.raises(ServerStartError, match=r"(?s)failed \(exit status 1\).*bad datadir"):
        server.run([sys.executable, "-c", "import sys; sys.exit('bad datadir')"], timeout=60)
    with pytest.raises(ServerStartError, match=r"did not finish in 1 s"):
        server.run([sys.executable, "-c", "import time; time.sleep(600)"], timeout=1)
    assert server.processes == []


@pytest.fixture
def nothing_installed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(server_process, "SBIN", ())
    monkeypatch.setattr(rabbitmq_server, "SERVER_SCRIPT", tmp_path / "rabbitmq-server")
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "websockets"
                        else real_find_spec(name, *args))


@pytest.mark.usefixtures("nothing_installed")
@pytest.mark.parametrize(("module", "says"), [
    (mariadb_server, "mariadb-server is not installed (no mariadbd on PATH or in /usr/sbin): "
                     "run `make peers` (apt-get, as root or with sudo)"),
    (rabbitmq_server, "rabbitmq-server is not installed (no {script}): run `make peers` "
                      "(apt-get, as root or with sudo)"),
    (websocket_server, "the websockets package is not installed in this Python ({python}): "
                       "pip install -e '.[dev]'"),
], ids=["mariadb", "rabbitmq", "websocket"])
def test_a_server_not_installed_is_skipped_with_the_reason(
        module: ModuleType, says: str, request: pytest.FixtureRequest) -> None:
    reason = says.format(script=rabbitmq_server.SERVER_SCRIPT, python=sys.executable)
    assert module.unavailable_reason() == reason

    def must_not_start() -> websocket_server.WebSocketServer:
        raise AssertionError("started a server that is not installed")

    with pytest.raises(pytest.skip.Exception, match=f"^{re.escape(reason)}$"):
        next(_serve(request, "server", module.unavailable_reason(), must_not_start,
                    lambda server: ""))
    with pytest.raises(RuntimeError, match=f"^{re.escape(reason)}$"):
        module.start()
