"""``python -m protoframe.clients.pulsar <command>``.

Each command lives in its own module and adds itself with ``register(subparsers)``, setting
``func`` (``args -> exit status``) as its default; to add one, append its ``register`` to
``COMMANDS``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from protoframe.clients.pulsar.broker import cli as broker_cli

Registrar = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]

COMMANDS: list[Registrar] = [
    broker_cli.register,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m protoframe.clients.pulsar",
                                     description="Pulsar tools built on protoframe.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in COMMANDS:
        register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    status: int = args.func(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
