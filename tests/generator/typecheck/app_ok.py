"""A small application using the generated Pulsar bindings; must pass ``mypy --strict``."""

from __future__ import annotations

from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandAck,
    CommandSend,
    KeyValue,
    MessageIdData,
    MessageMetadata,
)


def build_send(producer_id: int, sequence_id: int) -> bytes:
    cmd = BaseCommand(
        type_=BaseCommand.Type.SEND,
        send=CommandSend(producer_id=producer_id, sequence_id=sequence_id, num_messages=1),
    )
    return cmd.encode()


def metadata(name: str, props: dict[str, str]) -> MessageMetadata:
    return MessageMetadata(
        producer_name=name,
        sequence_id=0,
        publish_time=1_700_000_000_000,
        properties=[KeyValue(key=k, value=v) for k, v in props.items()],
    )


def acked_ids(data: bytes) -> list[tuple[int, int, int]]:
    cmd = BaseCommand.decode(data)
    ack: CommandAck | None = cmd.ack
    if ack is None:
        return []
    ids: list[MessageIdData] = ack.message_id
    return [(m.ledgerId, m.entryId, m.partition) for m in ids]


def partition_of(data: bytes) -> int:
    msg = MessageIdData.decode(data)
    if msg.has_partition():
        return msg.partition
    return -1
