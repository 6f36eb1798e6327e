"""Child process of ``bench instructions``: ``python -m bench.bench_instructions_worker N STMT``
runs the statement N times against the frame benchmark's fixtures."""

from __future__ import annotations

import sys

from bench.bench_frames import (
    NUM_MESSAGES,
    PRODUCER_ID,
    PRODUCER_NAME,
    PROPERTIES,
    PUBLISH_TIME,
    SEQUENCE_ID,
    construct_decode,
    construct_encode,
    ours_decode,
    ours_encode,
    struct_decode,
    struct_encode,
)
from bench.frames_examples import (
    amqp_hand_decode,
    amqp_hand_encode,
    amqp_ours_decode,
    amqp_ours_encode,
    mariadb_hand_decode,
    mariadb_hand_encode,
    mariadb_ours_decode,
    mariadb_ours_encode,
    ws125_hand_encode,
    ws125_ours_encode,
    ws300_hand_encode,
    ws300_ours_encode,
    ws_hand_decode,
    ws_ours_decode,
)
from bench.frames_protocols import (
    pravega_hand_batch,
    pravega_hand_decode,
    pravega_hand_encode,
    pravega_ours_decode,
    pravega_ours_encode,
    tank_hand_batch,
    tank_hand_decode,
    tank_hand_encode,
    tank_ours_decode,
    tank_ours_encode,
)
from protoframe.generated.pravega.frames import Event, EventRun
from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.generated.pulsar.frames import Frame
from protoframe.generated.tank.frames import Bundle, Message, MessageSet

WIRE = ours_encode()
BUILT = Frame.decode(WIRE)


def build_send_command() -> pb.BaseCommand:
    return pb.BaseCommand(
        type_=pb.BaseCommand.Type.SEND,
        send=pb.CommandSend(producer_id=PRODUCER_ID, sequence_id=SEQUENCE_ID,
                            num_messages=NUM_MESSAGES),
    )


def build_metadata() -> pb.MessageMetadata:
    return pb.MessageMetadata(
        producer_name=PRODUCER_NAME,
        sequence_id=SEQUENCE_ID,
        publish_time=PUBLISH_TIME,
        properties=[pb.KeyValue(key=k, value=v) for k, v in PROPERTIES],
    )


SEND_COMMAND = build_send_command()
METADATA = build_metadata()
METADATA_BYTES = METADATA.encode()
PRAVEGA_WIRE = pravega_ours_encode()
PRAVEGA_RUN = EventRun(events=[Event(data=bytes([i]) * 100) for i in range(100)]).encode()
TANK_WIRE = tank_ours_encode()
TANK_BUNDLE = Bundle(codec=0, sparse=False, msg_count=100, messages=MessageSet(messages=[
    Message(flags=1, timestamp=1_700_000_000_000 + i, key=f"k{i % 64}".encode(),
            content=bytes([i]) * 100) for i in range(100)])).encode()
MARIADB_WIRE = mariadb_ours_encode()
AMQP_WIRE = amqp_ours_encode()
WS_WIRE_125 = ws125_ours_encode()
WS_WIRE_300 = ws300_ours_encode()
EXAMPLE_FIXTURES = (MARIADB_WIRE, AMQP_WIRE, WS_WIRE_125, WS_WIRE_300, amqp_hand_decode,
                    amqp_hand_encode, amqp_ours_decode, mariadb_hand_decode,
                    mariadb_hand_encode, mariadb_ours_decode, ws125_hand_encode,
                    ws300_hand_encode, ws300_ours_encode, ws_hand_decode, ws_ours_decode)
FIXTURES = (WIRE, BUILT, SEND_COMMAND, METADATA, METADATA_BYTES, ours_decode, struct_decode,
            struct_encode, construct_decode, construct_encode, PRAVEGA_WIRE, PRAVEGA_RUN,
            pravega_hand_batch, pravega_hand_decode, pravega_hand_encode, pravega_ours_decode,
            TANK_WIRE, TANK_BUNDLE, tank_hand_batch, tank_hand_decode,
            tank_hand_encode, tank_ours_decode, tank_ours_encode)


def main() -> None:
    iterations, statement = int(sys.argv[1]), sys.argv[2]
    code = compile(f"for _ in range({iterations}):\n    {statement}\n", "<bench>", "exec")
    exec(code, globals())  # noqa: S102 (the statements are this package's own OPS)


if __name__ == "__main__":
    main()
