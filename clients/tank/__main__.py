"""``python -m protoframe.clients.tank <command>``.

Each command lives in its own module and adds itself with ``register(subparsers)``, setting
``func`` (``args -> exit status``) as its default; to add one, append its ``register`` to
``COMMANDS``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from protoframe.clients.tank.broker import cli as broker_cli

Registrar = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]

COMMANDS: list[Registrar] = [
    broker_cli.register,
]


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m protoframe.clients.tank`` parser: a subcommand per ``COMMANDS`` entry."""
    parser = argparse.ArgumentParser(prog="python -m protoframe.clients.tank",
                                     description="TANK tools built on protoframe.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in COMMANDS:
        register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default: the command line), run the command, return its exit status."""
    args = build_parser().parse_args(argv)
    status: int = args.func(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
