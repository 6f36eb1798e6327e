"""``python -m protoframe.clients.tank <command>``.

Each command adds itself with ``register(subparsers)``, setting ``func`` (``args -> exit
status``) as its default; to add one, append its ``register`` to ``COMMANDS``.
"""

from __future__ import annotations

import sys

from protoframe.clients.tank.broker import cli as broker_cli
from protoframe.runtime import cli as runtime_cli

PROG = "python -m protoframe.clients.tank"
COMMANDS: list[runtime_cli.Registrar] = [
    broker_cli.register,
]


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default: the command line), run the command, return its exit status."""
    return runtime_cli.main(PROG, "TANK tools built on protoframe.", COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
