"""``python -m protoframe.clients.tank broker``: the embedded TANK broker, until SIGINT or SIGTERM.

The broker keeps its partitions in memory, so there is no data directory: what was produced
is gone when it stops. It prints ``listening on tcp://HOST:PORT`` once it listens.
"""

from __future__ import annotations

import argparse
import contextlib

from protoframe.generated.tank import frames
from protoframe.runtime.io.cli import (
    CannotListen,
    add_log_level,
    port_number,
    positive_int,
    ready,
    run_servers,
)

from .server import EmbeddedTankBroker
from .state import MAX_PARTITIONS

__all__ = ["register"]

DEFAULT_PORT = 11011  # what TANK's own broker and tools use


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``broker`` subcommand."""
    parser = subparsers.add_parser(
        "broker", help="run the embedded TANK broker",
        description="Run the embedded TANK broker (partitions in memory only). Prints "
        "'listening on tcp://HOST:PORT' once ready.")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=DEFAULT_PORT, metavar="PORT",
                        help=f"port (default {DEFAULT_PORT}; 0 picks a free one)")
    parser.add_argument("--topic", type=_topic, action="append", default=[],
                        metavar="NAME=PARTITIONS",
                        help="create a topic with that many partitions (repeatable)")
    parser.add_argument("--auto-create", type=_partitions, metavar="PARTITIONS",
                        help="give a topic nobody created this many partitions on first use "
                        "(default: answer 'unknown topic')")
    parser.add_argument("--compress", action="store_true",
                        help="store, and so serve, every bundle Snappy-compressed")
    parser.add_argument("--max-frame-size", type=positive_int,
                        default=frames.DEFAULT_MAX_FRAME_SIZE, metavar="BYTES",
                        help=f"largest frame accepted (default {frames.DEFAULT_MAX_FRAME_SIZE})")
    add_log_level(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the broker as ``args`` say; the exit status (1 if it cannot listen)."""
    async def serve(stack: contextlib.AsyncExitStack) -> None:
        broker = EmbeddedTankBroker(host=args.host, port=args.port, topics=dict(args.topic),
                                    auto_create=args.auto_create, compress=args.compress,
                                    max_frame_size=args.max_frame_size)
        try:
            host, port = await broker.start()
        except OSError as exc:
            raise CannotListen(f"cannot listen on {args.host}:{args.port}: {exc}") from exc
        stack.push_async_callback(broker.stop)
        ready(None, f"tcp://{host}:{port}")

    return run_servers("python -m protoframe.clients.tank broker", args.log_level, serve)


def _partitions(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) <= MAX_PARTITIONS:
        raise argparse.ArgumentTypeError(
            f"expected 1..{MAX_PARTITIONS} partitions, got {text!r}")
    return int(text)


def _topic(text: str) -> tuple[str, int]:
    name, sep, count = text.rpartition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=PARTITIONS, got {text!r}")
    return name, _partitions(count)
