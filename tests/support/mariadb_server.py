"""A MariaDB server (Debian's mariadb-server, installed by ``make peers``) for the tests of the
MariaDB/MySQL protocol example: its own data directory made by ``mariadb-install-db`` in a
temporary directory, ``mariadbd`` on 127.0.0.1 and a free port, no configuration files of the
machine's (``--no-defaults``), run as the current user (``--user``: mariadbd refuses to run as
root without it). An init file creates a database and a user with a random password for it.
``python -m tests.support.mariadb_server`` starts one by hand and prints how to connect.
"""

from __future__ import annotations

import getpass
import secrets
import signal
import time
from dataclasses import dataclass

from tests.support.server_process import ServerProcess, find_program, free_port

NOT_INSTALLED = ("mariadb-server is not installed (no {program} on PATH or in /usr/sbin): "
                 "run `make peers` (apt-get, as root or with sudo)")
DATABASE = "protoframe"
USER = "protoframe"


def unavailable_reason() -> str | None:
    """Why a MariaDB server cannot start here, or None when it can."""
    for program in ("mariadbd", "mariadb-install-db"):
        if find_program(program) is None:
            return NOT_INSTALLED.format(program=program)
    return None


@dataclass
class MariaDB:
    """A running server: where it listens, the test database and the user that may use it."""

    host: str
    port: int
    user: str
    password: str
    database: str
    server: ServerProcess
    startup_seconds: float = 0.0

    def stop(self, timeout: float = 60) -> None:
        self.server.stop(timeout)


def start(timeout: float = 180) -> MariaDB:
    """Make a data directory, start mariadbd, return once it listens; raise (having stopped
    what started) with the end of its log otherwise. ``timeout`` bounds each of the two steps."""
    reason = unavailable_reason()
    if reason is not None:
        raise RuntimeError(reason)
    server = ServerProcess.create("mariadb")
    data = server.directory / "data"
    password = secrets.token_hex(12)
    port = free_port()
    user = getpass.getuser()
    started = time.monotonic()
    try:
        server.run([str(find_program("mariadb-install-db")), "--no-defaults", f"--datadir={data}",
                    f"--user={user}", "--auth-root-authentication-method=normal",
                    "--skip-test-db", "--skip-name-resolve"], timeout)
        init = server.directory / "init.sql"
        # '%': with --skip-name-resolve the client is 127.0.0.1, never 'localhost'.
        init.write_text(f"CREATE DATABASE {DATABASE};\n"
                        f"CREATE USER '{USER}'@'%' IDENTIFIED BY '{password}';\n"
                        f"GRANT ALL PRIVILEGES ON {DATABASE}.* TO '{USER}'@'%';\n")
        server.launch([
            str(find_program("mariadbd")), "--no-defaults", f"--datadir={data}",
            f"--user={user}", "--bind-address=127.0.0.1", f"--port={port}",
            f"--socket={server.directory / 'mariadbd.sock'}",
            f"--pid-file={server.directory / 'mariadbd.pid'}", f"--init-file={init}",
            # No --log-error: the log goes to stderr, the server log, whose tail explains a
            # failed start.
            "--skip-name-resolve", "--skip-log-bin", "--innodb-buffer-pool-size=32M"])
        server.wait_for_port(port, time.monotonic(), timeout)
    except BaseException:
        server.stop()
        raise
    return MariaDB("127.0.0.1", port, USER, password, DATABASE, server,
                   time.monotonic() - started)


def _exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGINT, _exit)
    signal.signal(signal.SIGTERM, _exit)
    mariadb = start()
    try:
        print(f"MariaDB up in {mariadb.startup_seconds:.1f} s (data in "
              f"{mariadb.server.directory}); Ctrl-C stops it:\n"
              f"mariadb --no-defaults -h {mariadb.host} -P {mariadb.port} -u {mariadb.user} "
              f"-p{mariadb.password} {mariadb.database}", flush=True)
        mariadb.server.processes[-1].wait()
    finally:
        mariadb.stop()


if __name__ == "__main__":
    main()
