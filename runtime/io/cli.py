"""Pieces shared by the embedded peers' command-line runners (``python -m protoframe.clients.<p>``).

Every runner prints ``<READY_PREFIX>tcp://HOST:PORT`` once it listens (tests and scripts wait for
that line), validates its numbers with the argparse types below (a bad value exits with status 2),
and stops cleanly on SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal

__all__ = ["LOG_LEVELS", "READY_PREFIX", "add_log_level", "port_number", "positive_int",
           "start_logging", "stop_on_signals"]

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
