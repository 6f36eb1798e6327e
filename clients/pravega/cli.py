"""``python -m protoframe.clients.pravega store|controller|standalone``: the embedded Pravega
servers.

``store`` runs the segment store alone (enough for our ``SegmentWriter``/``SegmentReader``);
``controller`` runs the gRPC controller for a store running elsewhere; ``standalone`` runs
both in one process, the controller sending clients to the store: what the real ``pravega``
client needs, given the controller's URI. Each prints one line per listening service once it
listens (``listening on tcp://HOST:PORT`` for a single service, ``store listening on ...``
and ``controller listening on ...`` for two) and stops on SIGINT or SIGTERM with status 0.
"""

from __future__ import annotations

import argparse
import contextlib

from protoframe.generated.pravega import frames
from protoframe.runtime.io.cli import (
    CannotListen,
    Serve,
    add_log_level,
    port_number,
    positive_int,
    ready,
    run_servers,
)

from .controller import ControllerServer, RemoteSegmentTable
from .store import EmbeddedSegmentStore
from .store.session import DEFAULT_READ_SIZE

__all__ = ["register_controller", "register_standalone", "register_store"]

# Upstream Pravega's defaults, so clients configured for a real deployment find these.
STORE_PORT = 12345
CONTROLLER_PORT = 9090


def register_store(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``store`` subcommand."""
    parser = subparsers.add_parser(
        "store", help="run the embedded segment store",
        description="Run the embedded Pravega segment store. Prints 'listening on "
        "tcp://HOST:PORT' once ready.")
    _add_host(parser)
    parser.add_argument("--port", type=port_number, default=STORE_PORT, metavar="PORT",
                        help=f"port (default {STORE_PORT}; 0 picks a free one)")
    _add_store_options(parser)
    add_log_level(parser)
    parser.set_defaults(func=_run_store)


def register_controller(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]
                        ) -> None:
    """Add the ``controller`` subcommand."""
    parser = subparsers.add_parser(
        "controller", help="run the gRPC controller for a segment store running elsewhere",
        description="Run the test Pravega controller over gRPC, creating, sealing, truncating and "
        "deleting stream segments in the segment store at --store and sending clients there. "
        "Scopes and streams are kept in memory. Prints 'listening on tcp://HOST:PORT' (the "
        "controller URI) once ready.")
    _add_host(parser)
    parser.add_argument("--port", type=port_number, default=CONTROLLER_PORT, metavar="PORT",
                        help=f"port (default {CONTROLLER_PORT}; 0 picks a free one)")
    parser.add_argument("--store", type=_address, required=True, metavar="HOST:PORT",
                        help="the segment store: the controller connects to it, and clients "
                        "are sent to it")
    parser.add_argument("--advertised-host", metavar="HOST",
                        help="the host the controller gives clients as its own (default: "
                        "--host); set it when listening on 0.0.0.0")
    add_log_level(parser)
    parser.set_defaults(func=_run_controller)


def register_standalone(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]
                        ) -> None:
    """Add the ``standalone`` subcommand."""
    parser = subparsers.add_parser(
        "standalone", help="run the segment store and the controller together",
        description="Run the embedded segment store and the gRPC controller in one process, "
        "the controller sending clients to the store. Prints 'store listening on "
        "tcp://HOST:PORT', then 'controller listening on tcp://HOST:PORT' (the URI to give a "
        "Pravega client) once both are ready.")
    _add_host(parser)
    parser.add_argument("--controller-port", type=port_number, default=CONTROLLER_PORT,
                        metavar="PORT",
                        help=f"controller port (default {CONTROLLER_PORT}; 0 picks a free one)")
    parser.add_argument("--store-port", type=port_number, default=STORE_PORT, metavar="PORT",
                        help=f"segment store port (default {STORE_PORT}; 0 picks a free one)")
    parser.add_argument("--advertised-host", metavar="HOST",
                        help="the host the controller tells clients to reach both services at "
                        "(default: --host); set it when listening on 0.0.0.0")
    _add_store_options(parser)
    add_log_level(parser)
    parser.set_defaults(func=_run_standalone)


# ---- running -----------------------------------------------------------------------------


def _run_store(args: argparse.Namespace) -> int:
    async def serve(stack: contextlib.AsyncExitStack) -> None:
        store = await _start_store(stack, args, args.port)
        ready(None, _url(store.host, store.port))

    return _run(args, serve)


def _run_controller(args: argparse.Namespace) -> int:
    async def serve(stack: contextlib.AsyncExitStack) -> None:
        table = RemoteSegmentTable(args.store)
        stack.push_async_callback(table.close)
        controller = ControllerServer(table, args.store, host=args.host, port=args.port,
                                      after_call=table.sync)
        await _start_controller(stack, controller)
        if args.advertised_host:
            controller.state.controller = (args.advertised_host, controller.port)
        ready(None, controller.uri)

    return _run(args, serve)


def _run_standalone(args: argparse.Namespace) -> int:
    async def serve(stack: contextlib.AsyncExitStack) -> None:
        store = await _start_store(stack, args, args.store_port)
        advertised = args.advertised_host or args.host
        controller = ControllerServer(store.table, (advertised, store.port), host=args.host,
                                      port=args.controller_port)
        await _start_controller(stack, controller)
        # What getControllerServerList answers: the host clients can reach, not 0.0.0.0.
        controller.state.controller = (advertised, controller.port)
        ready("store", _url(store.host, store.port))
        ready("controller", controller.uri)

    return _run(args, serve)


def _run(args: argparse.Namespace, serve: Serve) -> int:
    return run_servers(f"python -m protoframe.clients.pravega {args.command}", args.log_level,
                       serve)


async def _start_store(stack: contextlib.AsyncExitStack, args: argparse.Namespace,
                       port: int) -> EmbeddedSegmentStore:
    store = EmbeddedSegmentStore(host=args.host, port=port, directory=args.data_dir,
                                 max_frame_size=args.max_frame_size,
                                 max_read_size=args.max_read_size)
    try:
        await store.start()
    except OSError as exc:
        raise CannotListen(f"the segment store cannot listen on {args.host}:{port}: {exc}") \
            from exc
    stack.push_async_callback(store.stop)
    return store


async def _start_controller(stack: contextlib.AsyncExitStack,
                            controller: ControllerServer) -> None:
    try:
        await controller.start()
    except (OSError, RuntimeError) as exc:  # grpcio reports a failed bind as RuntimeError
        raise CannotListen(f"the controller cannot listen on {controller.host}:"
                            f"{controller.port}: {exc}") from exc
    stack.push_async_callback(controller.stop)


def _url(host: str, port: int) -> str:
    return f"tcp://{host}:{port}"


# ---- options -----------------------------------------------------------------------------


def _add_host(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1)")


def _add_store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", help="keep segments and table segments in this directory "
                        "across restarts (default: in memory only)")
    parser.add_argument("--max-read-size", type=positive_int, default=DEFAULT_READ_SIZE,
                        metavar="BYTES",
                        help="most bytes one read (or page of table entries) returns "
                        f"(default {DEFAULT_READ_SIZE})")
    parser.add_argument("--max-frame-size", type=positive_int,
                        default=frames.DEFAULT_MAX_FRAME_SIZE, metavar="BYTES",
                        help="largest frame accepted (default "
                        f"{frames.DEFAULT_MAX_FRAME_SIZE})")





def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)
