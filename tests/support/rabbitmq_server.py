"""A RabbitMQ node (Debian's rabbitmq-server, installed by ``make peers``) for the tests of the
AMQP 0-9-1 example, run as the current user with everything of its own in a temporary
directory: node name, ports, configuration, mnesia and log folders, and ``HOME`` (its Erlang
cookie). The node registers with an ``epmd`` of its own on a free port (``ERL_EPMD_PORT``),
started beside it in the foreground, so that runs in parallel never share or clash on the
machine's epmd (4369) and nothing is left as a daemon. A default user with a random password
gets the default vhost ``/``. ``python -m tests.support.rabbitmq_server`` starts one by hand.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.server_process import ServerProcess, find_program, free_port

# Debian's /usr/sbin/rabbitmq-server switches to the rabbitmq user; this one runs as we are.
SERVER_SCRIPT = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
NOT_INSTALLED = ("rabbitmq-server is not installed (no {program}): run `make peers` (apt-get, as "
                 "root or with sudo)")
USER = "protoframe"
VHOST = "/"


def unavailable_reason() -> str | None:
    """Why a RabbitMQ node cannot start here, or None when it can."""
    if not SERVER_SCRIPT.exists():
        return NOT_INSTALLED.format(program=SERVER_SCRIPT)
    if find_program("epmd") is None:
        return NOT_INSTALLED.format(program="epmd")
    return None


@dataclass
class RabbitMQ:
    """A running node: where it listens for AMQP, and the user and vhost to log in with."""

    host: str
    port: int
    user: str
    password: str
    vhost: str
    node: str
    server: ServerProcess
    startup_seconds: float = 0.0

    def stop(self, timeout: float = 60) -> None:
        self.server.stop(timeout)


def start(timeout: float = 180) -> RabbitMQ:
    """Start epmd and the node; return once the AMQP port listens (the node opens it last in
    its boot), or raise (having stopped both) with the end of the log."""
    reason = unavailable_reason()
    if reason is not None:
        raise RuntimeError(reason)
    server = ServerProcess.create("rabbitmq")
    directory = server.directory
    port, dist_port, epmd_port = free_port(), free_port(), free_port()
    password = secrets.token_hex(12)
    node = f"protoframe-{os.getpid()}-{port}@localhost"
    config = directory / "rabbitmq.conf"
    config.write_text(
        f"listeners.tcp.default = 127.0.0.1:{port}\n"
        f"default_user = {USER}\ndefault_pass = {password}\ndefault_vhost = {VHOST}\n"
        # A nearly full disk must not block the publishers of a test.
        "disk_free_limit.absolute = 1MB\n"
        "log.file = false\nlog.console = true\nlog.console.level = info\n")
    (directory / "enabled_plugins").write_text("[].\n")
    # An empty env file: the machine's /etc/rabbitmq/rabbitmq-env.conf would set node name and
    # ports of its own.
    (directory / "rabbitmq-env.conf").write_text("")
    env = {
        **os.environ,
        "HOME": str(directory),
        "ERL_EPMD_PORT": str(epmd_port),
        "RABBITMQ_NODENAME": node,
        "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
        "RABBITMQ_NODE_PORT": str(port),
        "RABBITMQ_DIST_PORT": str(dist_port),
        "RABBITMQ_CONF_ENV_FILE": str(directory / "rabbitmq-env.conf"),
        "RABBITMQ_CONFIG_FILE": str(config),
        "RABBITMQ_ADVANCED_CONFIG_FILE": str(directory / "advanced.config"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(directory / "enabled_plugins"),
        "RABBITMQ_MNESIA_BASE": str(directory / "mnesia"),
        "RABBITMQ_LOG_BASE": str(directory / "log"),
        "RABBITMQ_PLUGINS_EXPAND_DIR": str(directory / "plugins-expand"),
        "RABBITMQ_PID_FILE": str(directory / "rabbitmq.pid"),
    }
    started = time.monotonic()
    try:
        server.launch([str(find_program("epmd")), "-port", str(epmd_port),
                       "-address", "127.0.0.1"], env)
        server.launch([str(SERVER_SCRIPT)], env)
        server.wait_for_port(port, started, timeout)
    except BaseException:
        server.stop()
        raise
    return RabbitMQ("127.0.0.1", port, USER, password, VHOST, node, server,
                    time.monotonic() - started)


def _exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGINT, _exit)
    signal.signal(signal.SIGTERM, _exit)
    rabbitmq = start()
    try:
        print(f"RabbitMQ up in {rabbitmq.startup_seconds:.1f} s (node {rabbitmq.node}, files in "
              f"{rabbitmq.server.directory}); Ctrl-C stops it:\n"
              f"amqp://{rabbitmq.user}:{rabbitmq.password}@{rabbitmq.host}:{rabbitmq.port}/",
              flush=True)
        rabbitmq.server.processes[-1].wait()
    finally:
        rabbitmq.stop()


if __name__ == "__main__":
    main()
