"""``python -m protoframe.clients.tank <command>``: a subcommand per ``COMMANDS`` entry."""

from protoframe.clients.tank.broker import cli as broker_cli
from protoframe.runtime.io.cli import Registrar, run_main

COMMANDS: list[Registrar] = [broker_cli.register]

if __name__ == "__main__":
    run_main("protoframe.clients.tank", "TANK tools built on protoframe.", COMMANDS)
