"""Child process of ``bench instructions``: ``python -m bench.bench_instructions_worker N STMT``
runs the statement N times against the frame benchmark's fixtures."""

from __future__ import annotations

import sys
from typing import Any

from bench.bench_frames import (
    NUM_MESSAGES,
    PRODUCER_ID,
    PRODUCER_NAME,
    PROPERTIES,
    PUBLISH_TIME,
    SEQUENCE_ID,
    construct_decode,
    construct_encode,
    make_batch,
    ours_decode,
    ours_encode,
    struct_batch_decode,
    struct_decode,
    struct_encode,
)
from bench.bench_protobuf import ours_codecs
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
    tank_consume_hand_decode,
    tank_consume_hand_encode,
    tank_consume_ours_decode,
    tank_consume_ours_encode,
    tank_hand_batch,
    tank_hand_decode,
    tank_hand_encode,
    tank_ours_decode,
    tank_ours_encode,
    tubemq_hand_decode,
    tubemq_hand_encode,
    tubemq_ours_decode,
    tubemq_ours_encode,
)
from protoframe.generated.pravega.frames import Event, EventRun
from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.generated.pulsar.frames import Batch, Frame
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
PULSAR_BATCH = make_batch(False, 100)
PULSAR_BATCH_PROPERTY = make_batch(True, 100)
TANK_WIRE = tank_ours_encode()
TANK_CONSUME_WIRE = tank_consume_ours_encode()
TUBEMQ_WIRE = tubemq_ours_encode()
TANK_BUNDLE = Bundle(codec=0, sparse=False, msg_count=100, messages=MessageSet(messages=[
    Message(flags=1, timestamp=1_700_000_000_000 + i, key=f"k{i % 64}".encode(),
            content=bytes([i]) * 100) for i in range(100)])).encode()
_PROTOBUF = ours_codecs()
read_send, WIRE_SEND = _PROTOBUF["send"].read, _PROTOBUF["send"].build()
read_message, WIRE_MESSAGE = _PROTOBUF["message"].read, _PROTOBUF["message"].build()
read_ack, WIRE_ACK = _PROTOBUF["ack"].read, _PROTOBUF["ack"].build()
read_metadata, WIRE_METADATA = _PROTOBUF["metadata"].read, _PROTOBUF["metadata"].build()
read_single, WIRE_SINGLE = _PROTOBUF["single"].read, _PROTOBUF["single"].build()
MARIADB_WIRE = mariadb_ours_encode()
AMQP_WIRE = amqp_ours_encode()
WS_WIRE_125 = ws125_ours_encode()
WS_WIRE_300 = ws300_ours_encode()
EXAMPLE_FIXTURES = (MARIADB_WIRE, AMQP_WIRE, WS_WIRE_125, WS_WIRE_300, amqp_hand_decode,
                    amqp_hand_encode, amqp_ours_decode, mariadb_hand_decode,
                    mariadb_hand_encode, mariadb_ours_decode, ws125_hand_encode,
                    ws300_hand_encode, ws300_ours_encode, ws_hand_decode, ws_ours_decode)
FIXTURES = (read_send, WIRE_SEND, read_message, WIRE_MESSAGE, read_ack, WIRE_ACK,
            read_metadata, WIRE_METADATA, read_single, WIRE_SINGLE,
            WIRE, BUILT, SEND_COMMAND, METADATA, METADATA_BYTES, ours_decode, struct_decode,
            struct_encode, construct_decode, construct_encode, PRAVEGA_WIRE, PRAVEGA_RUN,
            pravega_hand_batch, pravega_hand_decode, pravega_hand_encode, pravega_ours_decode,
            TANK_WIRE, TANK_BUNDLE, tank_hand_batch, tank_hand_decode,
            tank_hand_encode, tank_ours_decode, tank_ours_encode, TANK_CONSUME_WIRE,
            tank_consume_hand_decode, tank_consume_hand_encode, tank_consume_ours_decode,
            tank_consume_ours_encode, TUBEMQ_WIRE,
            tubemq_hand_decode, tubemq_hand_encode, tubemq_ours_decode, tubemq_ours_encode,
            Batch, PULSAR_BATCH, PULSAR_BATCH_PROPERTY, struct_batch_decode)

CAPTURE_FRAMES = 1000  # a batch of captured frames (the pipeline's are 10,000)
# protocol -> (spark module, frames as an Arrow array, as bytes, directions)
_CAPTURE: dict[str, list[Any]] = {}


def _capture(protocol: str) -> list[Any]:
    """A capture row's fixture, built on first use: pyarrow and pyspark load only there. The
    frames are ``bench capture_columnar``'s: Pulsar SEND frames, Pravega's session mix,
    TubeMQ's SEND_MESSAGE requests and responses."""
    if protocol not in _CAPTURE:
        import importlib

        import pyarrow as pa

        from bench.bench_capture_columnar import frames_of

        spark = importlib.import_module(f"protoframe.generated.{protocol}.spark")
        wire = frames_of(protocol, CAPTURE_FRAMES)
        _CAPTURE[protocol] = [spark, pa.array(wire, pa.binary()), wire, [True] * len(wire)]
    return _CAPTURE[protocol]


def capture_columnar(protocol: str = "pulsar") -> Any:
    """A batch of captured frames into Arrow columns by the columnar path."""
    from protoframe.runtime.spark.columnar_frames import decode_frames

    spark, array, _, to_server = _capture(protocol)
    return decode_frames(spark, array, to_server)


def capture_rows(protocol: str = "pulsar") -> Any:
    """The same batch by the row path: ``decode_frame`` per frame, then ``FRAME.to_arrow``."""
    from protoframe.runtime.spark.columnar_frames import row_frames

    spark, _, wire, to_server = _capture(protocol)
    return row_frames(spark, wire, to_server)


def main() -> None:
    iterations, statement = int(sys.argv[1]), sys.argv[2]
    code = compile(f"for _ in range({iterations}):\n    {statement}\n", "<bench>", "exec")
    exec(code, globals())  # noqa: S102 (the statements are this package's own OPS)


if __name__ == "__main__":
    main()
