"""The broker's limit flags (``python -m protoframe.clients.pulsar broker``), parsed in process:
each reaches the ``EmbeddedBroker`` the command builds, 0 means no limit, and bad values exit
with argparse's status 2 before anything listens."""

from __future__ import annotations

import argparse

import pytest

from protoframe.clients.pulsar.broker import cli
from protoframe.clients.pulsar.broker.server import (
    DEFAULT_FRAME_TIMEOUT,
    DEFAULT_HANDSHAKE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_PENDING_FRAME_BYTES,
    EmbeddedBroker,
)
from protoframe.runtime.io.cli import build_parser
from protoframe.runtime.io.limits import ConnectionLimits


def parse(*argv: str) -> argparse.Namespace:
    return build_parser("broker", "test", [cli.register]).parse_args(["broker", *argv])


def test_the_defaults_bound_every_limit() -> None:
    args = parse()
    assert (args.broker_max_connections, args.handshake_timeout, args.frame_timeout,
            args.max_pending_frame_bytes, args.max_pending_frame_bytes_per_connection,
            args.keepalive) == (DEFAULT_MAX_CONNECTIONS, DEFAULT_HANDSHAKE_TIMEOUT,
                                DEFAULT_FRAME_TIMEOUT, DEFAULT_MAX_PENDING_FRAME_BYTES, 0, 30.0)
    assert EmbeddedBroker().connection_limits == ConnectionLimits(
        max_connections=DEFAULT_MAX_CONNECTIONS, handshake_timeout=DEFAULT_HANDSHAKE_TIMEOUT,
        frame_timeout=DEFAULT_FRAME_TIMEOUT, max_partial_bytes=0,
        max_partial_bytes_total=DEFAULT_MAX_PENDING_FRAME_BYTES)


def test_pulsars_names_and_ours_reach_the_broker() -> None:
    args = parse("--broker-max-connections", "7", "--handshake-timeout", "2.5",
                 "--frame-timeout", "0", "--max-pending-frame-bytes", "1000",
                 "--max-pending-frame-bytes-per-connection", "10",
                 "--keep-alive-interval-seconds", "4")
    assert args.keepalive == 4.0
    broker = EmbeddedBroker(max_connections=args.broker_max_connections,
                            handshake_timeout=args.handshake_timeout,
                            frame_timeout=args.frame_timeout,
                            max_pending_frame_bytes=args.max_pending_frame_bytes,
                            max_pending_frame_bytes_per_connection=(
                                args.max_pending_frame_bytes_per_connection))
    assert broker.connection_limits == ConnectionLimits(
        max_connections=7, handshake_timeout=2.5, frame_timeout=None, max_partial_bytes=10,
        max_partial_bytes_total=1000)


@pytest.mark.parametrize("argv", [
    ["--broker-max-connections", "-1"],
    ["--broker-max-connections", "many"],
    ["--handshake-timeout", "-2"],
    ["--frame-timeout", "nan"],
    ["--max-pending-frame-bytes", "1.5"],
    ["--keepalive", "soon"],
])
def test_a_bad_limit_exits_with_status_2(argv: list[str],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(*argv)
    assert exited.value.code == 2
    assert "expected" in capsys.readouterr().err
