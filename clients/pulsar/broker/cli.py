"""``python -m protoframe.clients.pulsar broker``: the embedded broker, until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import contextlib

from protoframe.runtime.io.cli import CannotListen, ready, run_servers

from .server import (
    DEFAULT_FRAME_TIMEOUT,
    DEFAULT_HANDSHAKE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_PENDING_FRAME_BYTES,
    EmbeddedBroker,
)


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number (0: no limit), got {text!r}")
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected seconds >= 0 (0: none), got {text!r}")
    return value


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
    parser.add_argument("--keepalive", "--keep-alive-interval-seconds", type=_seconds,
                        default=30.0, dest="keepalive",
                        help="PING a client quiet this long, close it if the next interval is "
                        "quiet too (Pulsar's keepAliveIntervalSeconds; 0 disables it)")
    limits = parser.add_argument_group(
        "limits", "what clients may hold; the connection over a limit is closed (0: no limit)")
    limits.add_argument("--broker-max-connections", type=_count,
                        default=DEFAULT_MAX_CONNECTIONS, metavar="N",
                        help="connections open at once; more are closed when accepted "
                        f"(Pulsar's brokerMaxConnections; default {DEFAULT_MAX_CONNECTIONS})")
    limits.add_argument("--handshake-timeout", type=_seconds,
                        default=DEFAULT_HANDSHAKE_TIMEOUT, metavar="SECONDS",
                        help="seconds a new connection has to send CONNECT "
                        f"(default {DEFAULT_HANDSHAKE_TIMEOUT:g})")
    limits.add_argument("--frame-timeout", type=_seconds, default=DEFAULT_FRAME_TIMEOUT,
                        metavar="SECONDS",
                        help="seconds a frame may take to arrive once its first byte has "
                        f"(slow trickles are closed; default {DEFAULT_FRAME_TIMEOUT:g})")
    limits.add_argument("--max-pending-frame-bytes", type=_count,
                        default=DEFAULT_MAX_PENDING_FRAME_BYTES, metavar="BYTES",
                        help="bytes of unfinished frames all connections may hold together "
                        f"(default {DEFAULT_MAX_PENDING_FRAME_BYTES})")
    limits.add_argument("--max-pending-frame-bytes-per-connection", type=_count, default=0,
                        metavar="BYTES",
                        help="bytes of an unfinished frame one connection may hold "
                        "(default 0: the largest frame allowed)")
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
                                max_connections=args.broker_max_connections,
                                handshake_timeout=args.handshake_timeout or None,
                                frame_timeout=args.frame_timeout or None,
                                max_pending_frame_bytes=args.max_pending_frame_bytes,
                                max_pending_frame_bytes_per_connection=(
                                    args.max_pending_frame_bytes_per_connection))
        try:
            url = await broker.start()
        except OSError as exc:
            await broker.stop()  # the storage may be open already
            raise CannotListen(f"cannot listen on {args.host}:{args.port}: {exc}") from exc
        stack.push_async_callback(broker.stop)
        for topic, count in partitioned:
            broker.create_partitioned_topic(topic, count)
        ready(None, url)

    return run_servers("python -m protoframe.clients.pulsar broker", args.log_level.upper(),
                       serve)
