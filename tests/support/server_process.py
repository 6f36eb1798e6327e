"""What the test fixtures of real servers (tests/support/mariadb_server.py, rabbitmq_server.py,
websocket_server.py) share: a temporary directory, processes each started in a session of its
own with its output in a log there, an ``orphan_watchdog`` that ends their groups and removes
the directory should the test process die first (SIGKILL included), a bounded wait for the
server's port whose timeout error ends with the log's tail, and a stop by the processes' pids.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.orphan_watchdog import Watchdog, end_groups, group_alive

# Debian installs servers into sbin folders, which an ordinary user's PATH leaves out.
SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")


def find_program(name: str) -> str | None:
    """``name`` on PATH or in the sbin folders, or None."""
    path = os.pathsep.join([os.environ.get("PATH", os.defpath), *SBIN])
    return shutil.which(name, path=path)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ServerStartError(RuntimeError):
    """A server exited during its start, or was not listening within the time given."""


@dataclass
class ServerProcess:
    """The processes of one server instance and the directory they write in."""

    name: str
    directory: Path
    watchdog: Watchdog
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @classmethod
    def create(cls, name: str) -> ServerProcess:
        directory = Path(tempfile.mkdtemp(prefix=f"protoframe-{name}-"))
        return cls(name, directory, Watchdog(directory))

    @property
    def log(self) -> Path:
        return self.directory / "server.log"

    def launch(self, command: Sequence[str], env: Mapping[str, str] | None = None,
               cwd: Path | None = None) -> subprocess.Popen[bytes]:
        """Start ``command`` in a session of its own (its group then holds whatever it starts),
        its output appended to the log, watched by the watchdog from the start."""
        with self.log.open("ab") as out:
            process = subprocess.Popen(
                list(command), cwd=cwd or self.directory, env=None if env is None else dict(env),
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        self.processes.append(process)
        self.watchdog.watch(process.pid)
        return process

    def run(self, command: Sequence[str], timeout: float,
            env: Mapping[str, str] | None = None) -> None:
        """Run a setup step (its output in the log) to its end; raise if it fails or overruns."""
        process = self.launch(command, env)
        try:
            status = process.wait(timeout)
        except subprocess.TimeoutExpired as overrun:
            end_groups([process.pid], grace=5)
            process.wait()
            raise ServerStartError(
                f"{self.name}: {command[0]} did not finish in {timeout:.0f} s; the end of its "
                f"log ({self.log}):\n{self.log_tail()}") from overrun
        finally:
            self.processes.remove(process)
        if status != 0:
            raise ServerStartError(f"{self.name}: {command[0]} failed (exit status {status}); "
                                   f"the end of its log ({self.log}):\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def wait_for_port(self, port: int, started: float, timeout: float) -> None:
        """Return once 127.0.0.1:``port`` accepts a connection; raise ``ServerStartError`` with
        the log's tail if a process exits first or ``timeout`` seconds after ``started`` pass."""
        deadline = started + timeout
        while True:
            for process in self.processes:
                if process.poll() is not None:
                    raise ServerStartError(
                        f"{self.name} exited during its start (exit status {process.returncode}"
                        f"); the end of its log ({self.log}):\n{self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"{self.name} was not listening on 127.0.0.1:{port} {timeout:.0f} s after "
                    f"its start; the end of its log ({self.log}):\n{self.log_tail()}")
            time.sleep(0.2)

    def groups(self) -> list[int]:
        """The process groups started (each process leads its own), whether or not still there."""
        return [process.pid for process in self.processes]

    def alive(self) -> list[int]:
        """The groups of this server that still have a process in them."""
        return [group for group in self.groups() if group_alive(group)]

    def stop(self, timeout: float = 60) -> None:
        """SIGTERM each process by its pid, last started first (a server before the helper it
        needs); SIGKILL what outlives ``timeout``, then whatever is left in their groups; then
        the watchdog and the directory."""
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout)
        end_groups(self.groups(), grace=5)
        self.watchdog.close()
        shutil.rmtree(self.directory, ignore_errors=True)
