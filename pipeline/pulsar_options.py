"""Options every part of the Pulsar data source reads: the broker and the client to reach it."""

from __future__ import annotations

from protoframe.clients.pulsar import PulsarClient


def required(options: dict[str, str], name: str) -> str:
    """The option ``name``; a clear error when it is missing or empty."""
    value = options.get(name)
    if not value:
        raise ValueError(f"the pulsar data source needs the option {name!r}")
    return value


def client(options: dict[str, str]) -> PulsarClient:
    """A client for ``service_url``; create it where it is used (it does not pickle)."""
    return PulsarClient(required(options, "service_url"),
                        operation_timeout_seconds=float(
                            options.get("operation_timeout_seconds", "30")))
