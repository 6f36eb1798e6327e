"""``python -m clients.tubemq peer``: run the embedded TubeMQ master and broker until SIGINT or
SIGTERM.

The command prints ``master listening on tcp://HOST:PORT`` (the address producers and
consumers are given, as ``HOST:PORT``) and ``broker listening on tcp://HOST:PORT`` (where the
master sends them) once both listen; ``--master-port`` and ``--broker-port`` default to 0, a
free port each. Messages are kept in memory; every topic is created on first use with
``--partitions`` partitions.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from clients.tubemq.peer import EmbeddedTubeMQ

__all__ = ["READY_PREFIX", "register"]

READY_PREFIX = "listening on "
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


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
    parser.add_argument("--master-port", type=_port, default=0,
                        help="the master's port, the one clients are given (default 0: a free "
                        "port)")
    parser.add_argument("--broker-port", type=_port, default=0,
                        help="the broker's port (default 0: a free port)")
    parser.add_argument("--partitions", type=_positive, default=2,
                        help="partitions of every topic, created on first use (default 2)")
    parser.add_argument("--broker-id", type=_positive, default=1,
                        help="the broker's id in what the master tells clients (default 1)")
    parser.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, default="INFO",
                        help="logging level (default INFO)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the master and broker as ``args`` say; the exit status (1 if they cannot listen)."""
    logging.basicConfig(level=args.log_level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return asyncio.run(_serve(args))


async def _serve(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # Installed before listening, so a signal during start-up is a clean stop too.
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    peer = EmbeddedTubeMQ(partitions=args.partitions, host=args.host, broker_id=args.broker_id,
                          master_port=args.master_port, broker_port=args.broker_port)
    try:
        await peer.start()
    except OSError as exc:
        await peer.stop()  # the master may be listening when the broker could not
        print(f"python -m clients.tubemq peer: cannot listen on {args.host}: {exc}",
              file=sys.stderr)
        return 1
    try:
        print(f"master {READY_PREFIX}tcp://{peer.master}", flush=True)
        print(f"broker {READY_PREFIX}tcp://{peer.broker.address}", flush=True)
        await stop.wait()
    finally:
        await peer.stop()
    return 0


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535, got {text!r}")
    return int(text)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)
