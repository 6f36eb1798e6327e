"""``python -m protoframe.clients.pravega <command>``.

Each command adds itself with a ``register`` function taking the subparsers, setting ``func``
(``args -> exit status``) as its default; to add one, append its ``register`` to ``COMMANDS``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from protoframe.clients.pravega import cli

Registrar = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]

COMMANDS: list[Registrar] = [
    cli.register_store,
    cli.register_controller,
    cli.register_standalone,
]


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m protoframe.clients.pravega`` parser: a subcommand per ``COMMANDS`` entry."""
    parser = argparse.ArgumentParser(prog="python -m protoframe.clients.pravega",
                                     description="Pravega servers built on protoframe.")
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
