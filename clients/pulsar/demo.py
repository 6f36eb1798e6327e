"""``make run``: build typed Pulsar commands, encode them, decode them back and print both."""

from __future__ import annotations

import time

from generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandAck,
    CommandConnect,
    CommandSend,
    CommandSubscribe,
    KeyValue,
    MessageIdData,
    MessageMetadata,
)


def commands() -> list[BaseCommand]:
    """A few commands a client sends in its first second on a connection."""
    Type = BaseCommand.Type
    return [
        BaseCommand(type_=Type.CONNECT, connect=CommandConnect(
            client_version="protoframe-0.1", protocol_version=21, auth_method_name="none")),
        BaseCommand(type_=Type.SUBSCRIBE, subscribe=CommandSubscribe(
            topic="persistent://public/default/demo", subscription="demo-sub",
            subType=CommandSubscribe.SubType.Shared, consumer_id=0, request_id=1,
            initialPosition=CommandSubscribe.InitialPosition.Earliest)),
        BaseCommand(type_=Type.SEND, send=CommandSend(producer_id=0, sequence_id=0,
                                                      num_messages=1)),
        BaseCommand(type_=Type.ACK, ack=CommandAck(
            consumer_id=0, ack_type=CommandAck.AckType.Individual,
            message_id=[MessageIdData(ledgerId=7, entryId=42)])),
    ]


def main() -> None:
    for cmd in commands():
        data = cmd.encode()
        back = BaseCommand.decode(data)
        assert back == cmd
        print(f"{back.type_.name:<10} {len(data):>3} bytes  {data.hex()}")
        print(f"           {back!r}")
    meta = MessageMetadata(producer_name="demo-producer", sequence_id=0,
                           publish_time=int(time.time() * 1000),
                           properties=[KeyValue(key="k", value="v")])
    decoded = MessageMetadata.decode(meta.encode())
    print(f"MessageMetadata: num_messages_in_batch reads {decoded.num_messages_in_batch} "
          f"(default, set: {decoded.has_num_messages_in_batch()}), "
          f"properties {[(p.key, p.value) for p in decoded.properties]}")


if __name__ == "__main__":
    main()
