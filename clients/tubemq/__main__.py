"""``python -m protoframe.clients.tubemq <command>``.

Each command adds itself with ``register(subparsers)``, setting ``func`` (``args -> exit
status``) as its default; to add one, append its ``register`` to ``COMMANDS``.
"""

from __future__ import annotations

import sys

from protoframe.clients.tubemq import cli
from protoframe.runtime import cli as runtime_cli

PROG = "python -m protoframe.clients.tubemq"
COMMANDS: list[runtime_cli.Registrar] = [
    cli.register,
]


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default: the command line), run the command, return its exit status."""
    return runtime_cli.main(PROG, "TubeMQ tools built on protoframe.", COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
