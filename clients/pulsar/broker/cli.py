"""``python -m protoframe.clients.pulsar broker``: the embedded broker, until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import contextlib

from protoframe.runtime.io.cli import CannotListen, ready, run_servers

from . import limits as lim
from . import schemas as sch
from .security_options import add_security_options, security_of, tls_arguments_of
from .server import (
    DEFAULT_FRAME_TIMEOUT,
    DEFAULT_HANDSHAKE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_PENDING_FRAME_BYTES,
    EmbeddedBroker,
)
from .storage import DEFAULT_CACHE_BYTES, CorruptLogError


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
    parser.add_argument("--repair", action="store_true",
                        help="start even if the log is damaged in the middle: the damaged "
                        "bytes are moved to <data-dir>/quarantine/ with a report and the rest "
                        "is kept (without it the broker refuses to start on such a log)")
    parser.add_argument("--managed-ledger-cache-size-mb", type=float,
                        default=DEFAULT_CACHE_BYTES / 2**20, metavar="MB",
                        help="memory for payloads read back from the log (default "
                        f"{DEFAULT_CACHE_BYTES // 2**20})")
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
    parser.add_argument("--schema-compatibility-strategy", default=sch.DEFAULT_STRATEGY.name,
                        choices=[s.name for s in sch.Strategy], metavar="STRATEGY",
                        help="how a new schema version must relate to the earlier ones "
                        "(Pulsar's schemaCompatibilityStrategy: "
                        f"{', '.join(s.name for s in sch.Strategy)}; default %(default)s)")
    limits.add_argument("--max-schema-size", type=int, default=sch.MAX_SCHEMA_SIZE,
                        metavar="BYTES", help="largest schema definition with its properties "
                        "(default %(default)s)")
    limits.add_argument("--max-schema-versions", type=int, default=sch.MAX_SCHEMA_VERSIONS,
                        metavar="N", help="most schema versions one topic may hold "
                        "(default %(default)s)")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    add_limit_options(parser)
    add_security_options(parser)
    parser.set_defaults(func=run)


def add_limit_options(parser: argparse.ArgumentParser) -> None:
    """The ``limits.Limits`` options: what one command may carry (named as Pulsar's settings
    where Pulsar has one)."""
    group = parser.add_argument_group(
        "limits", "commands over a limit are refused with an error naming it; nothing is stored")
    group.add_argument("--max-message-size", type=int, default=lim.MAX_MESSAGE_SIZE,
                       metavar="BYTES", help="largest message or batch (Pulsar's "
                       "maxMessageSize; default %(default)s)")
    group.add_argument("--max-name-length", type=int, default=lim.MAX_NAME_LENGTH,
                       metavar="BYTES", help="longest topic (fully qualified), producer, "
                       f"subscription or consumer name, at most {lim.LOG_NAME_LIMIT} "
                       "(default %(default)s)")
    group.add_argument("--max-metadata-entries", type=int, default=lim.MAX_METADATA_ENTRIES,
                       metavar="N", help="most key-value pairs in a producer's or consumer's "
                       "metadata or a subscription's properties (default %(default)s)")
    group.add_argument("--max-metadata-size", type=int, default=lim.MAX_METADATA_SIZE,
                       metavar="BYTES", help="their keys and values together "
                       "(default %(default)s)")
    group.add_argument("--max-messages-per-batch", type=int,
                       default=lim.MAX_MESSAGES_PER_BATCH, metavar="N",
                       help="most messages in one batch (default %(default)s)")
    group.add_argument("--max-hash-ranges", type=int, default=lim.MAX_HASH_RANGES, metavar="N",
                       help="most hash ranges a Key_Shared consumer may claim "
                       "(default %(default)s)")
    group.add_argument("--broker-deduplication-producer-inactivity-timeout-minutes",
                       type=float, default=lim.DEDUP_INACTIVITY_MINUTES, metavar="MINUTES",
                       dest="dedup_inactivity_minutes",
                       help="forget the deduplication state of a producer name no producer "
                       "has used for this long (Pulsar's "
                       "brokerDeduplicationProducerInactivityTimeoutMinutes; "
                       "default %(default)s)")


def limits_of(args: argparse.Namespace) -> lim.Limits:
    """The ``Limits`` the options ask for; exits with a message if one is out of range."""
    try:
        return lim.Limits(
            max_message_size=args.max_message_size, max_name_length=args.max_name_length,
            max_metadata_entries=args.max_metadata_entries,
            max_metadata_size=args.max_metadata_size,
            max_messages_per_batch=args.max_messages_per_batch,
            max_hash_ranges=args.max_hash_ranges,
            dedup_inactivity_minutes=args.dedup_inactivity_minutes)
    except ValueError as exc:
        raise SystemExit(f"broker: {exc}") from None


def run(args: argparse.Namespace) -> int:
    """Run the broker as ``args`` say; the exit status (1 if it cannot listen)."""
    partitioned: list[tuple[str, int]] = []
    for spec in args.partitioned_topic:
        topic, sep, count = spec.rpartition("=")
        if not sep or not topic or not count.isdigit() or int(count) < 1:
            raise SystemExit(f"--partitioned-topic expects TOPIC=N, got {spec!r}")
        partitioned.append((topic, int(count)))
    limits = limits_of(args)
    security = security_of(args)
    tls = tls_arguments_of(args)

    async def serve(stack: contextlib.AsyncExitStack) -> None:
        broker = EmbeddedBroker(host=args.host, port=args.port, data_dir=args.data_dir,
                                keepalive_interval=args.keepalive or None,
                                fsync=not args.no_fsync, advertised_url=args.advertised_url,
                                max_connections=args.broker_max_connections,
                                handshake_timeout=args.handshake_timeout or None,
                                frame_timeout=args.frame_timeout or None,
                                max_pending_frame_bytes=args.max_pending_frame_bytes,
                                max_pending_frame_bytes_per_connection=(
                                    args.max_pending_frame_bytes_per_connection),
                                limits=limits,
                                repair=args.repair,
                                schema_compatibility_strategy=(
                                    args.schema_compatibility_strategy),
                                max_schema_size=args.max_schema_size,
                                max_schema_versions=args.max_schema_versions,
                                cache_bytes=int(args.managed_ledger_cache_size_mb * 2**20),
                                security=security, **tls)
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
