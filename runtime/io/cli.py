"""Pieces shared by the embedded peers' command-line runners (``python -m protoframe.clients.<p>``).

``main`` is every ``__main__``: a subcommand per registrar. Every runner prints
``<READY_PREFIX>tcp://HOST:PORT`` once it listens (tests and scripts wait for that line; ``ready``
prints it), validates its numbers with the argparse types below (a bad value exits with status 2),
and stops cleanly on SIGINT or SIGTERM (``run_servers``); a server that cannot listen says so in
one line (``CannotListen``) and the exit status is 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence

__all__ = ["LOG_LEVELS", "READY_PREFIX", "CannotListen", "Registrar", "Serve", "add_log_level",
           "build_parser", "main", "port_number", "positive_int", "ready", "run_main",
           "run_servers",
           "start_logging", "stop_on_signals"]

# Adds one subcommand to the subparsers, with ``func`` (``args -> exit status``) as its default.
Registrar = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]
# Starts the servers, registering how to stop each on the stack, and prints the ready lines.
Serve = Callable[[contextlib.AsyncExitStack], Awaitable[None]]

READY_PREFIX = "listening on "
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def port_number(text: str) -> int:
    """argparse type: a TCP port, 0 meaning a free one."""
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"expected a port 0..65535, got {text!r}")
    return int(text)


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def add_log_level(parser: argparse.ArgumentParser) -> None:
    """Add ``--log-level`` (case-insensitive, default INFO)."""
    parser.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, default="INFO",
                        help="logging level (default INFO)")


def start_logging(level: str) -> None:
    """Log to stderr at ``level``, with times and logger names."""
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM; call it before listening, so that a signal during
    start-up is a clean stop too."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


def build_parser(prog: str, description: str,
                 commands: Sequence[Registrar]) -> argparse.ArgumentParser:
    """A parser with one subcommand per entry of ``commands``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in commands:
        register(subparsers)
    return parser


def main(prog: str, description: str, commands: Sequence[Registrar],
         argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default: the command line), run the command, return its exit status."""
    args = build_parser(prog, description, commands).parse_args(argv)
    status: int = args.func(args)
    return status


def run_main(package: str, description: str, commands: Sequence[Registrar]) -> None:
    """A ``__main__``: ``python -m <package> <command>`` runs the command and exits with its
    status."""
    sys.exit(main(f"python -m {package}", description, commands))


class CannotListen(Exception):
    """A server could not bind its address; reported as one line, not a traceback."""


def ready(service: str | None, url: str) -> None:
    """Print the line that says ``service`` (None: the only one) listens at ``url``."""
    label = f"{service} " if service else ""
    print(f"{label}{READY_PREFIX}{url}", flush=True)


def run_servers(prog: str, log_level: str, serve: Serve) -> int:
    """Log at ``log_level``, run ``serve`` until SIGINT or SIGTERM, then stop what it started.

    The exit status: 0, or 1 when ``serve`` raised ``CannotListen`` (its message goes to
    stderr after ``prog``).
    """
    start_logging(log_level)
    try:
        return asyncio.run(_serve_until_signalled(serve))
    except CannotListen as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1


async def _serve_until_signalled(serve: Serve) -> int:
    stop = stop_on_signals()
    async with contextlib.AsyncExitStack() as stack:
        await serve(stack)
        await stop.wait()
    return 0
