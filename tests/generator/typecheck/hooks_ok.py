"""A hook object defining only the hooks it needs, and a violation policy; must pass mypy
--strict (it is only type-checked, never run)."""

from __future__ import annotations

from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.generated.pulsar.frames import Frame
from protoframe.generated.pulsar.machines import PulsarHooks, PulsarProtocol
from protoframe.runtime.engine.machine import ProtocolViolation
from protoframe.runtime.errors import UnknownCommandError


class Receipts(PulsarHooks):
    def __init__(self) -> None:
        self.acknowledged: list[int] = []

    def on_send_receipt(self, body: pb.CommandSendReceipt, frame: Frame) -> None:
        self.acknowledged.append(body.sequence_id)


def drop(error: ProtocolViolation | UnknownCommandError, frame: Frame) -> bool:
    return False


def protocol() -> PulsarProtocol:
    return PulsarProtocol(hooks=Receipts(), on_violation=drop)
