"""``python -m protoframe.clients.pulsar broker``: the embedded broker, until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import contextlib

from protoframe.runtime.io.cli import CannotListen, ready, run_servers

from .server import EmbeddedBroker
from .storage import DEFAULT_CACHE_BYTES, CorruptLogError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``broker`` subcommand."""
    parser = subparsers.add_parser(
        "broker", help="run the embedded Pulsar broker",
        description="Run the embedded Pulsar broker. Prints 'listening on <url>' once ready.")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=6650, help="port (0 picks a free one)")
    parser.add_argument("--advertised-url", metavar="URL",
                        help="the pulsar:// URL lookups send clients to (default: the address "
                        "each client connected to)")
    parser.add_argument("--data-dir", help="keep messages and cursors in this directory "
                        "(default: in memory only)")
    parser.add_argument("--partitioned-topic", action="append", default=[], metavar="TOPIC=N",
                        help="create a partitioned topic with N partitions (repeatable)")
    parser.add_argument("--no-fsync", action="store_true",
                        help="write the log without fsync (survives a process crash, "
                        "not a power loss)")
    parser.add_argument("--repair", action="store_true",
                        help="start even if the log is damaged in the middle: the damaged "
                        "bytes are moved to <data-dir>/quarantine/ with a report and the rest "
                        "is kept (without it the broker refuses to start on such a log)")
    parser.add_argument("--managed-ledger-cache-size-mb", type=float,
                        default=DEFAULT_CACHE_BYTES / 2**20, metavar="MB",
                        help="memory for payloads read back from the log (default "
                        f"{DEFAULT_CACHE_BYTES // 2**20})")
    parser.add_argument("--keepalive", type=float, default=30.0,
                        help="seconds between keepalive PINGs (0 disables them)")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the broker as ``args`` say; the exit status (1 if it cannot listen)."""
    partitioned: list[tuple[str, int]] = []
    for spec in args.partitioned_topic:
        topic, sep, count = spec.rpartition("=")
        if not sep or not topic or not count.isdigit() or int(count) < 1:
            raise SystemExit(f"--partitioned-topic expects TOPIC=N, got {spec!r}")
        partitioned.append((topic, int(count)))

    async def serve(stack: contextlib.AsyncExitStack) -> None:
        broker = EmbeddedBroker(host=args.host, port=args.port, data_dir=args.data_dir,
                                keepalive_interval=args.keepalive or None,
                                fsync=not args.no_fsync, advertised_url=args.advertised_url,
                                repair=args.repair,
                                cache_bytes=int(args.managed_ledger_cache_size_mb * 2**20))
        try:
            url = await broker.start()
        except CorruptLogError as exc:
            await broker.stop()
            raise CannotListen(f"refusing to start: {exc}") from exc
        except OSError as exc:
            await broker.stop()  # the storage may be open already
            raise CannotListen(f"cannot listen on {args.host}:{args.port}: {exc}") from exc
        stack.push_async_callback(broker.stop)
        for topic, count in partitioned:
            broker.create_partitioned_topic(topic, count)
        ready(None, url)

    return run_servers("python -m protoframe.clients.pulsar broker", args.log_level.upper(),
                       serve)
