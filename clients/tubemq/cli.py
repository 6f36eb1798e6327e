"""``python -m protoframe.clients.tubemq peer``: run the embedded TubeMQ master and broker
until SIGINT or SIGTERM.

The command prints ``master listening on tcp://HOST:PORT`` (the address producers and
consumers are given, as ``HOST:PORT``) and ``broker listening on tcp://HOST:PORT`` (where the
master sends them) once both listen; ``--master-port`` and ``--broker-port`` default to 0, a
free port each. Messages are kept in memory; every topic is created on first use with
``--partitions`` partitions.
"""

from __future__ import annotations

import argparse
import contextlib

from protoframe.clients.tubemq.peer import EmbeddedTubeMQ
from protoframe.runtime.io.cli import (
    CannotListen,
    add_log_level,
    port_number,
    positive_int,
    ready,
    run_servers,
)

__all__ = ["register"]



def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``peer`` subcommand."""
    parser = subparsers.add_parser(
        "peer", help="run the embedded TubeMQ master and broker",
        description="Run the embedded TubeMQ master and broker (messages in memory only). "
        "Prints 'master listening on tcp://HOST:PORT', then 'broker listening on "
        "tcp://HOST:PORT', once both are ready; clients are given the master's HOST:PORT.")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address both listen on, and the broker's address the master "
                        "gives clients (default 127.0.0.1)")
    parser.add_argument("--master-port", type=port_number, default=0,
                        help="the master's port, the one clients are given (default 0: a free "
                        "port)")
    parser.add_argument("--broker-port", type=port_number, default=0,
                        help="the broker's port (default 0: a free port)")
    parser.add_argument("--partitions", type=positive_int, default=2,
                        help="partitions of every topic, created on first use (default 2)")
    parser.add_argument("--broker-id", type=positive_int, default=1,
                        help="the broker's id in what the master tells clients (default 1)")
    add_log_level(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the master and broker as ``args`` say; the exit status (1 if they cannot listen)."""
    async def serve(stack: contextlib.AsyncExitStack) -> None:
        peer = EmbeddedTubeMQ(partitions=args.partitions, host=args.host,
                              broker_id=args.broker_id, master_port=args.master_port,
                              broker_port=args.broker_port)
        try:
            await peer.start()
        except OSError as exc:
            await peer.stop()  # the master may be listening when the broker could not
            raise CannotListen(f"cannot listen on {args.host}: {exc}") from exc
        stack.push_async_callback(peer.stop)
        ready("master", f"tcp://{peer.master}")
        ready("broker", f"tcp://{peer.broker.address}")

    return run_servers("python -m protoframe.clients.tubemq peer", args.log_level, serve)
