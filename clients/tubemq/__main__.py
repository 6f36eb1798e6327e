"""``python -m protoframe.clients.tubemq <command>``: a subcommand per ``COMMANDS`` entry."""

from protoframe.clients.tubemq import cli
from protoframe.runtime.io.cli import Registrar, run_main

COMMANDS: list[Registrar] = [cli.register]

if __name__ == "__main__":
    run_main("protoframe.clients.tubemq", "TubeMQ tools built on protoframe.", COMMANDS)
