"""``python -m protoframe.clients.pulsar <command>``: a subcommand per ``COMMANDS`` entry."""

from protoframe.clients.pulsar.broker import cli as broker_cli
from protoframe.runtime.io.cli import Registrar, run_main

COMMANDS: list[Registrar] = [broker_cli.register]

if __name__ == "__main__":
    run_main("protoframe.clients.pulsar", "Pulsar tools built on protoframe.", COMMANDS)
