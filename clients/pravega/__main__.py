"""``python -m protoframe.clients.pravega <command>``: a subcommand per ``COMMANDS`` entry."""

from protoframe.clients.pravega import cli
from protoframe.runtime.io.cli import Registrar, run_main

COMMANDS: list[Registrar] = [cli.register_store, cli.register_controller, cli.register_standalone]

if __name__ == "__main__":
    run_main("protoframe.clients.pravega", "Pravega servers built on protoframe.", COMMANDS)
