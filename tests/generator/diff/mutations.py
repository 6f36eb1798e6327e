"""Single edits of the repository's specs, each with exactly the changes it must produce.

An edit is one or more text replacements in one protocol's spec files (all of them make one
change, such as renaming a command everywhere it is named); ``base`` replacements are applied
to both versions first, for edits that need something the real specs lack (a ``reserved``
range, a oneof, a field dropped earlier). Expected changes are (rule, element, wire, source)
with the axes written ``"BC"``: wire Breaking, source Compatible.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protoframe.generator.diff.rules import BREAKING, COMPATIBLE

Expected = tuple[str, str, str, str]


def x(rule: str, element: str, axes: str) -> Expected:
    axis = {"B": BREAKING, "C": COMPATIBLE}
    return rule, element, axis[axes[0]], axis[axes[1]]


@dataclass(frozen=True)
class Edit:
    id: str
    protocol: str
    file: str
    replace: tuple[tuple[str, str], ...]
    expected: frozenset[Expected]
    base: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, str], ...] = field(default=())  # new files: (name, text)


def edit(
    id: str,
    protocol: str,
    file: str,
    replace: list[tuple[str, str]],
    *expected: Expected,
    base: list[tuple[str, str]] | None = None,
    files: list[tuple[str, str]] | None = None,
) -> Edit:
    return Edit(
        id,
        protocol,
        file,
        tuple(replace),
        frozenset(expected),
        tuple(base or ()),
        tuple(files or ()),
    )


P = "pulsar.proto."
API = "PulsarApi.proto"
RANGE = "message IntRange {\n    required int32 start = 1;\n    required int32 end = 2;\n}"
END = "    required int32 end = 2;\n"
SNAPPY = "    SNAPPY = 4;\n"
TC_ID = "    optional uint64 tc_id = 3 [default = 0];\n"
EXTRA_MESSAGE = "message Extra {\n    optional int32 a = 1;\n}\n\n"
EXTRA_ENUM = "enum ExtraKind {\n    FIRST = 0;\n}\n\n"


def _in_range(text: str) -> list[tuple[str, str]]:
    """Insert ``text`` (indented lines) as the last item of IntRange."""
    return [(RANGE, RANGE[:-1] + text + "}")]


def _types() -> list[Edit]:
    """IntRange.end (int32) changed to each type, with protobuf's verdict for it."""
    verdicts = {
        "uint32": "CC",
        "int64": "CC",
        "bool": "CB",
        "sint32": "BC",
        "fixed32": "BC",
        "string": "BB",
        "CompressionType": "CB",
        "KeyValue": "BB",
    }
    return [
        edit(
            f"type-int32-{t}",
            "pulsar",
            API,
            [(END, f"    required {t} end = 2;\n")],
            x("FIELD_TYPE_CHANGED", P + "IntRange.end", axes),
        )
        for t, axes in verdicts.items()
    ]


def _grouped_types() -> list[Edit]:
    """Pairs inside the groups int32 is not in: the field starts as the first type."""
    pairs = {
        ("sint32", "sint64"): "CC",
        ("fixed32", "sfixed32"): "CC",
        ("string", "bytes"): "CB",
        ("fixed32", "fixed64"): "BC",
    }
    return [
        edit(
            f"type-{a}-{b}",
            "pulsar",
            API,
            [(f"    required {a} end = 2;\n", f"    required {b} end = 2;\n")],
            x("FIELD_TYPE_CHANGED", P + "IntRange.end", axes),
            base=[(END, f"    required {a} end = 2;\n")],
        )
        for (a, b), axes in pairs.items()
    ]


PROTO_EDITS: list[Edit] = [
    edit(
        "message-added",
        "pulsar",
        API,
        [(RANGE, EXTRA_MESSAGE + RANGE)],
        x("MESSAGE_ADDED", P + "Extra", "CC"),
    ),
    edit(
        "message-removed",
        "pulsar",
        API,
        [(EXTRA_MESSAGE + RANGE, RANGE)],
        x("MESSAGE_NO_DELETE", P + "Extra", "CB"),
        base=[(RANGE, EXTRA_MESSAGE + RANGE)],
    ),
    edit(
        "message-moved-file",
        "pulsar",
        API,
        [
            (RANGE, ""),
            ("package pulsar.proto;\n", 'package pulsar.proto;\n\nimport "Ranges.proto";\n'),
        ],
        x("MESSAGE_MOVED_FILE", P + "IntRange", "CB"),
        files=[("Ranges.proto", f'syntax = "proto2";\npackage pulsar.proto;\n\n{RANGE}\n')],
    ),
    edit(
        "field-added",
        "pulsar",
        API,
        _in_range("    optional int32 step = 3;\n"),
        x("FIELD_ADDED", P + "IntRange.step", "CC"),
    ),
    edit(
        "required-field-added",
        "pulsar",
        API,
        _in_range("    required int32 step = 3;\n"),
        x("FIELD_REQUIRED_ADDED", P + "IntRange.step", "BB"),
    ),
    edit(
        "field-removed",
        "pulsar",
        API,
        [(TC_ID, "")],
        x("FIELD_NO_DELETE", P + "CommandNewTxn.tc_id", "CB"),
    ),
    edit(
        "required-field-removed",
        "pulsar",
        API,
        [(END, "")],
        x("FIELD_REQUIRED_NO_DELETE", P + "IntRange.end", "BB"),
    ),
    edit(
        "field-renumbered",
        "pulsar",
        API,
        [(END, "    required int32 end = 3;\n")],
        x("FIELD_NUMBER_CHANGED", P + "IntRange.end", "BC"),
    ),
    edit(
        "field-renamed",
        "pulsar",
        API,
        [(END, "    required int32 stop = 2;\n")],
        x("FIELD_RENAMED", P + "IntRange.stop", "CB"),
    ),
    *_types(),
    *_grouped_types(),
    edit(
        "type-message-message",
        "pulsar",
        API,
        [("    repeated KeyValue metadata = 3;\n", "    repeated IntRange metadata = 3;\n")],
        x("FIELD_TYPE_CHANGED", P + "EncryptionKeys.metadata", "BB"),
    ),
    edit(
        "label-required-optional",
        "pulsar",
        API,
        [(END, "    optional int32 end = 2;\n")],
        x("FIELD_LABEL_CHANGED", P + "IntRange.end", "BB"),
    ),
    edit(
        "label-repeated-optional-string",
        "pulsar",
        API,
        [("    repeated string replicate_to = 7;\n", "    optional string replicate_to = 7;\n")],
        x("FIELD_LABEL_CHANGED", P + "MessageMetadata.replicate_to", "CB"),
    ),
    edit(
        "label-repeated-optional-int",
        "pulsar",
        API,
        [("    repeated int64 ack_set = 5;\n", "    optional int64 ack_set = 5;\n")],
        x("FIELD_LABEL_CHANGED", P + "MessageIdData.ack_set", "BB"),
    ),
    edit(
        "packed",
        "pulsar",
        API,
        [
            (
                "    repeated int64 ack_set = 5;\n",
                "    repeated int64 ack_set = 5 [packed = true];\n",
            )
        ],
        x("FIELD_PACKED_CHANGED", P + "MessageIdData.ack_set", "CC"),
    ),
    edit(
        "default-changed",
        "pulsar",
        API,
        [
            (
                "num_messages_in_batch = 11 [default = 1];",
                "num_messages_in_batch = 11 [default = 2];",
            )
        ],
        x("FIELD_DEFAULT_CHANGED", P + "MessageMetadata.num_messages_in_batch", "BC"),
    ),
    edit(
        "default-dropped-same-value",
        "pulsar",
        API,
        [("event_time = 12 [default = 0];", "event_time = 12;")],
        x("FIELD_DEFAULT_CHANGED", P + "MessageMetadata.event_time", "CC"),
    ),
    edit(
        "into-new-oneof",
        "pulsar",
        API,
        [(TC_ID, "    oneof target {\n        uint64 tc_id = 3 [default = 0];\n    }\n")],
        x("FIELD_ONEOF_CHANGED", P + "CommandNewTxn.tc_id", "CB"),
    ),
    edit(
        "out-of-oneof",
        "pulsar",
        API,
        [("    oneof target {\n        uint64 tc_id = 3 [default = 0];\n    }\n", TC_ID)],
        x("FIELD_ONEOF_CHANGED", P + "CommandNewTxn.tc_id", "BB"),
        base=[(TC_ID, "    oneof target {\n        uint64 tc_id = 3 [default = 0];\n    }\n")],
    ),
    edit(
        "reserved-number-reused",
        "pulsar",
        API,
        [("    reserved 3;\n", "    optional int32 step = 3;\n")],
        x("FIELD_RESERVED_REUSED", P + "IntRange.step", "BC"),
        x("RESERVED_NO_DELETE", P + "IntRange.3", "CC"),
        base=_in_range("    reserved 3;\n"),
    ),
    edit(
        "reserved-name-reused",
        "pulsar",
        API,
        [('    reserved "step";\n', "    optional int32 step = 3;\n")],
        x("FIELD_RESERVED_REUSED", P + "IntRange.step", "BC"),
        x("RESERVED_NO_DELETE", P + "IntRange.step", "CC"),
        base=_in_range('    reserved "step";\n'),
    ),
    # tc_id was dropped earlier without `reserved`: only the lock file remembers number 3.
    edit(
        "number-reused-per-lock",
        "pulsar",
        API,
        [("message CommandNewTxn {\n", "message CommandNewTxn {\n    optional string zone = 3;\n")],
        x("FIELD_NUMBER_REUSED", P + "CommandNewTxn.zone", "BC"),
        base=[(TC_ID, "")],
    ),
    edit(
        "dropped-field-back",
        "pulsar",
        API,
        [
            (
                "message CommandNewTxn {\n",
                "message CommandNewTxn {\n    optional uint64 tc_id = 3;\n",
            )
        ],
        x("FIELD_ADDED", P + "CommandNewTxn.tc_id", "CC"),
        base=[(TC_ID, "")],
    ),
    edit(
        "enum-added",
        "pulsar",
        API,
        [(RANGE, EXTRA_ENUM + RANGE)],
        x("ENUM_ADDED", P + "ExtraKind", "CC"),
    ),
    edit(
        "enum-removed",
        "pulsar",
        API,
        [(EXTRA_ENUM + RANGE, RANGE)],
        x("ENUM_NO_DELETE", P + "ExtraKind", "CB"),
        base=[(RANGE, EXTRA_ENUM + RANGE)],
    ),
    edit(
        "value-added",
        "pulsar",
        API,
        [(SNAPPY, SNAPPY + "    BROTLI = 5;\n")],
        x("ENUM_VALUE_ADDED", P + "CompressionType.BROTLI", "CC"),
    ),
    edit(
        "value-removed",
        "pulsar",
        API,
        [(SNAPPY, "")],
        x("ENUM_VALUE_NO_DELETE", P + "CompressionType.SNAPPY", "BB"),
    ),
    edit(
        "value-renumbered",
        "pulsar",
        API,
        [(SNAPPY, "    SNAPPY = 5;\n")],
        x("ENUM_VALUE_NUMBER_CHANGED", P + "CompressionType.SNAPPY", "BC"),
    ),
    edit(
        "value-renamed",
        "pulsar",
        API,
        [(SNAPPY, "    SNAPPY_RAW = 4;\n")],
        x("ENUM_VALUE_RENAMED", P + "CompressionType.SNAPPY_RAW", "CB"),
    ),
    edit(
        "value-reserved-reused",
        "pulsar",
        API,
        [("    reserved 4;\n", "    BROTLI = 4;\n")],
        x("ENUM_VALUE_RESERVED_REUSED", P + "CompressionType.BROTLI", "BC"),
        base=[(SNAPPY, "    reserved 4;\n")],
    ),
    edit(
        "value-number-reused-per-lock",
        "pulsar",
        API,
        [("    ZSTD = 3;\n", "    ZSTD = 3;\n    BROTLI = 4;\n")],
        x("ENUM_VALUE_NUMBER_REUSED", P + "CompressionType.BROTLI", "BC"),
        base=[(SNAPPY, "")],
    ),
]

# Edits that change nothing a peer or the generated code can see.
SEEK = (
    "message CommandSeek {\n    required uint64 consumer_id = 1;\n"
    "    required uint64 request_id = 2;\n"
)
PROTO_NON_CHANGES: list[Edit] = [
    edit(
        "messages-reordered",
        "pulsar",
        API,
        [(RANGE + "\n", ""), ("message KeyValue {", RANGE + "\n\nmessage KeyValue {")],
    ),
    edit(
        "fields-reordered",
        "pulsar",
        API,
        [
            (
                "    required int32 start = 1;\n    required int32 end = 2;\n",
                "    required int32 end = 2;\n    required int32 start = 1;\n",
            )
        ],
    ),
    edit(
        "comments",
        "pulsar",
        API,
        [("message KeyValue {", "// A pair.\n/* of strings */\nmessage KeyValue {  // here")],
    ),
    edit(
        "whitespace",
        "pulsar",
        API,
        [(SEEK, SEEK.replace("    ", "\t").replace(" = ", "=").replace("{", "\n{\n\n"))],
    ),
    edit(
        "values-reordered",
        "pulsar",
        API,
        [("    ZSTD = 3;\n    SNAPPY = 4;\n", "    SNAPPY = 4;\n    ZSTD = 3;\n")],
    ),
]

PY, TK, TQ, PV = "pulsar.yaml", "tank.yaml", "tubemq.yaml", "pravega.yaml"
BROKER_SIZE = (
    "      - {name: magic, type: u16, const: 0x0e02}\n"
    "      - {name: metadata_size, type: u32, size_of: metadata}\n"
)
EXTRA_STRUCT = "  Extra:\n    fields:\n      - {name: a, type: u8}\n\n"
PING_MACHINE = (
    "  ping:\n    doc: One ping.\n    initial: idle\n    states: [idle, waiting]\n"
    "    transitions:\n      - {from: idle, send: PING, to: waiting}\n"
    "      - {from: waiting, receive: PONG, to: idle}\n\n"
)
LOOKUP_STATES = "    initial: idle\n    states: [idle, pending, redirected, connected, failed]\n"
REDIRECT = (
    "      - {from: pending, receive: LOOKUP_RESPONSE, to: redirected, "
    'when: "response == Redirect"}\n'
)
ACKS = (
    "      - {name: required_acks, type: u8}\n      - {name: ack_timeout, type: u32}\n"
    "      - {name: topics_cnt, type: u8, count_of: topics}\n"
    "      - {name: topics, type: array, of: ProduceTopic, args: {with_seqnum: false}}\n"
)
LEADER = (
    '      - {name: leader_addr, type: u32, when: "error == 0xfc"}\n'
    '      - {name: leader_port, type: u16, when: "error == 0xfc"}\n'
)
HELLO = "    trailing: ignore\n    fields:\n      - {name: high_version"
LOW_VERSION = (
    "      - {name: low_version, type: i32, doc: Oldest wire version the sender still accepts.}\n"
)


def transition(machine: str, text: str) -> str:
    return f"{machine}: {text}"


YAML_EDITS: list[Edit] = [
    # -- layouts -----------------------------------------------------------------------------
    edit(
        "const",
        "pulsar",
        PY,
        [("const: 0x0e01}", "const: 0x0e03}")],
        x("FRAME_CONST_CHANGED", "Payload.magic", "BC"),
    ),
    edit(
        "magic-token",
        "tubemq",
        TQ,
        [("const: 0xFF7FF4FE}", "const: 0xFF7FF4FF}")],
        x("FRAME_CONST_CHANGED", "Frame.token", "BC"),
    ),
    edit(
        "width",
        "pulsar",
        PY,
        [(BROKER_SIZE, BROKER_SIZE.replace("u32", "u16"))],
        x("FRAME_FIELD_WIDTH_CHANGED", "BrokerEntry.metadata_size", "BC"),
    ),
    edit(
        "signedness",
        "pulsar",
        PY,
        [(BROKER_SIZE, BROKER_SIZE.replace("u32", "i32"))],
        x("FRAME_FIELD_TYPE_CHANGED", "BrokerEntry.metadata_size", "BC"),
    ),
    edit(
        "byte-order",
        "pulsar",
        PY,
        [(BROKER_SIZE, BROKER_SIZE.replace("type: u32,", "type: u32, order: little,"))],
        x("FRAME_FIELD_BYTE_ORDER_CHANGED", "BrokerEntry.metadata_size", "BC"),
    ),
    edit(
        "encoding",
        "pravega",
        PV,
        [
            (
                "      - {name: writer_id, type: uuid}\n"
                "      - {name: segment, type: string, prefix: u16, encoding: mutf8}\n"
                "      - {name: delegation_token",
                "      - {name: writer_id, type: uuid}\n"
                "      - {name: segment, type: string, prefix: u16, encoding: utf8}\n"
                "      - {name: delegation_token",
            )
        ],
        x("FRAME_FIELD_TYPE_CHANGED", "SetupAppend.segment", "BB"),
    ),
    edit(
        "checksum",
        "pulsar",
        PY,
        [("algorithm: crc32c, from", "algorithm: crc32, from")],
        x("FRAME_CHECKSUM_CHANGED", "Payload.checksum", "BC"),
    ),
    edit(
        "size",
        "pulsar",
        PY,
        [("size: metadata.payload_size}", "size: rest}")],
        x("FRAME_SIZE_CHANGED", "BatchEntry.data", "BC"),
    ),
    edit(
        "block-size",
        "tubemq",
        TQ,
        [("block_size: 8192", "block_size: 4096")],
        x("FRAME_SIZE_CHANGED", "Frame.content", "BC"),
    ),
    edit(
        "max-frame-size",
        "pulsar",
        PY,
        [("max_frame_size: 5242880", "max_frame_size: 1048576")],
        x("FRAME_MAX_SIZE_CHANGED", "pulsar.max_frame_size", "BC"),
    ),
    edit(
        "compression",
        "pulsar",
        PY,
        [("          uncompressed_size: metadata.uncompressed_size\n", "")],
        x("FRAME_COMPRESSION_CHANGED", "Payload.data", "BC"),
    ),
    edit(
        "condition",
        "tank",
        TK,
        [('when: "not flags & 2"', 'when: "not flags & 4"')],
        x("FRAME_CONDITION_CHANGED", "Message.timestamp", "BC"),
    ),
    edit(
        "count",
        "tank",
        TK,
        [("count: partitions_cnt,", "count: partitions_cnt - 1,")],
        x("FRAME_COUNT_CHANGED", "ConsumeTopicResult.partitions", "BC"),
    ),
    edit(
        "terminator",
        "tank",
        TK,
        [("      - {name: client_id, type: string, prefix: u8}\n      - {name: max_wait_ms",
          "      - {name: client_id, type: string, terminator: 0}\n      - {name: max_wait_ms")],
        x("FRAME_SIZE_CHANGED", "ConsumeRequest.client_id", "BC"),
    ),
    edit(
        "allowed-values",
        "tank",
        TK,
        [("      - {name: min_bytes, type: u32}", "      - {name: min_bytes, type: u32, min: 1}")],
        x("FRAME_ALLOWED_VALUES_CHANGED", "ConsumeRequest.min_bytes", "BC"),
    ),
    edit(
        "max-items",
        "tank",
        TK,
        [("      - {name: partitions, type: array, of: ConsumePartition}",
          "      - {name: partitions, type: array, of: ConsumePartition, max_items: 64}")],
        x("FRAME_ALLOWED_VALUES_CHANGED", "ConsumeTopic.partitions", "BC"),
    ),
    edit(
        "derive",
        "tank",
        TK,
        [('derive: "flags & 0x3"', 'derive: "flags & 0x7"')],
        x("FRAME_VALUE_CHANGED", "Bundle.codec", "BC"),
    ),
    edit(
        "args",
        "tank",
        TK,
        [('first: "_index == 0"', 'first: "_index < 1"')],
        x("FRAME_ARGS_CHANGED", "MessageSet.messages", "BC"),
    ),
    edit(
        "default",
        "pravega",
        PV,
        [
            (
                "previous_event_number, type: i64, when_remaining: true, default: -1}",
                "previous_event_number, type: i64, when_remaining: true, default: 0}",
            )
        ],
        x("FRAME_DEFAULT_CHANGED", "DataAppended.previous_event_number", "BC"),
    ),
    edit(
        "field-added",
        "pulsar",
        PY,
        [(BROKER_SIZE, BROKER_SIZE.replace("\n", "\n      - {name: flags, type: u8}\n", 1))],
        x("FRAME_FIELD_ADDED", "BrokerEntry.flags", "BB"),
    ),
    edit(
        "field-appended-read-when-present",
        "pravega",
        PV,
        [
            (
                LOW_VERSION,
                LOW_VERSION + "      - {name: build, type: i64, when_remaining: true, "
                "default: -1}\n",
            )
        ],
        x("FRAME_FIELD_ADDED", "Hello.build", "CC"),
    ),
    edit(
        "field-removed",
        "tank",
        TK,
        [(ACKS, ACKS.split("\n", 1)[1])],
        x("FRAME_FIELD_NO_DELETE", "ProduceRequest.required_acks", "BB"),
    ),
    edit(
        "fields-reordered",
        "tank",
        TK,
        [(LEADER, "".join(reversed(LEADER.splitlines(keepends=True))))],
        x("FRAME_FIELD_REORDERED", "ProduceStatus", "BC"),
    ),
    edit(
        "trailing-no-longer-ignored",
        "pravega",
        PV,
        [(HELLO, HELLO[len("    trailing: ignore\n") :])],
        x("FRAME_TRAILING_CHANGED", "Hello", "BC"),
    ),
    edit(
        "trailing-ignored",
        "tank",
        TK,
        [("  Ping:\n    doc:", "  Ping:\n    trailing: ignore\n    doc:")],
        x("FRAME_TRAILING_CHANGED", "Ping", "CC"),
    ),
    edit(
        "struct-added",
        "pulsar",
        PY,
        [("  Payload:\n", EXTRA_STRUCT + "  Payload:\n")],
        x("FRAME_STRUCT_ADDED", "Extra", "CC"),
    ),
    edit(
        "struct-removed",
        "tank",
        TK,
        [
            (
                "  Chunk:\n    doc: One partition's chunk of a consume response, when it holds "
                "whole bundles only.\n    fields:\n"
                "      - {name: bundles, type: array, of: BundleEntry, until_end: true}\n",
                "",
            )
        ],
        x("FRAME_STRUCT_NO_DELETE", "Chunk", "CB"),
    ),
    edit(
        "params",
        "tank",
        TK,
        [
            (
                "  ProducePartition:\n    params: {with_seqnum: bool}",
                "  ProducePartition:\n    params: {with_seqnum: bool, spare: bool}",
            ),
            (
                "args: {with_seqnum: with_seqnum}}",
                "args: {with_seqnum: with_seqnum, spare: false}}",
            ),
        ],
        x("FRAME_PARAMS_CHANGED", "ProducePartition", "CB"),
        x("FRAME_ARGS_CHANGED", "ProduceTopic.partitions", "BC"),
    ),
    # -- dispatch ----------------------------------------------------------------------------
    edit(
        "code-added",
        "tank",
        TK,
        [
            ("5: PRODUCE_WITH_SEQNUM}", "5: PRODUCE_WITH_SEQNUM, 6: PING_AGAIN}"),
            ("        3: Ping\n", "        3: Ping\n        6: PingAgain\n"),
            ("  Ping:\n", "  PingAgain:\n    fields: []\n  Ping:\n"),
        ],
        x("DISPATCH_CODE_ADDED", "PING_AGAIN", "CC"),
        x("FRAME_STRUCT_ADDED", "PingAgain", "CC"),
    ),
    edit(
        "code-removed",
        "tank",
        TK,
        [
            (
                "names: {1: PRODUCE, 2: CONSUME, 3: PING, 5: PRODUCE_WITH_SEQNUM}",
                "names: {1: PRODUCE, 2: CONSUME, 5: PRODUCE_WITH_SEQNUM}",
            ),
            ("        3: Ping\n", ""),
            ("  server_push: [PING]\n", ""),
        ],
        x("DISPATCH_CODE_NO_DELETE", "PING", "BB"),
        x("INTERACTION_DIRECTION_CHANGED", "PING", "BC"),
    ),
    edit(
        "code-reassigned",
        "tank",
        TK,
        [("3: PING,", "4: PING,"), ("        3: Ping\n", "        4: Ping\n")],
        x("DISPATCH_CODE_REASSIGNED", "PING", "BC"),
    ),
    edit(
        "command-renamed",
        "tank",
        TK,
        [
            ("3: PING,", "3: HEARTBEAT,"),
            ("  server_push: [PING]\n", "  server_push: [HEARTBEAT]\n"),
        ],
        x("DISPATCH_COMMAND_RENAMED", "HEARTBEAT", "CB"),
        x("INTERACTION_DIRECTION_CHANGED", "PING", "BC"),
        x("INTERACTION_DIRECTION_CHANGED", "HEARTBEAT", "BC"),
    ),
    edit(
        "layout-changed",
        "tank",
        TK,
        [("        3: Ping\n", "        3: {to_server: Ping}\n")],
        x("DISPATCH_LAYOUT_CHANGED", "PING", "BB"),
    ),
    edit(
        "routed-code-reassigned",
        "tubemq",
        TQ,
        [("      3: {name: CLOSE_P2M,", "      10: {name: CLOSE_P2M,")],
        x("DISPATCH_CODE_REASSIGNED", "CLOSE_P2M", "BC"),
    ),
    edit(
        "routed-message-changed",
        "tubemq",
        TQ,
        [
            (
                "{name: CLOSE_P2M, message: CloseRequestP2M,",
                "{name: CLOSE_P2M, message: HeartRequestP2M,",
            )
        ],
        x("DISPATCH_LAYOUT_CHANGED", "CLOSE_P2M", "BB"),
    ),
    edit(
        "pravega-code-reassigned",
        "pravega",
        PV,
        [("        100: KeepAlive\n", "        101: KeepAlive\n")],
        x("DISPATCH_CODE_REASSIGNED", "KEEP_ALIVE", "BC"),
    ),
    # -- interactions ------------------------------------------------------------------------
    edit(
        "request-removed",
        "pulsar",
        PY,
        [("    - {request: PING, response: PONG}\n", "")],
        x("INTERACTION_NO_DELETE", "PING", "CB"),
    ),
    edit(
        "request-added",
        "pulsar",
        PY,
        [
            (
                "    - {request: PING, response: PONG}\n",
                "    - {request: PING, response: PONG}\n    - {request: GET_OR_CREATE_SCHEMA, "
                "response: GET_OR_CREATE_SCHEMA_RESPONSE, correlate: [request_id]}\n",
            )
        ],
        x("INTERACTION_ADDED", "GET_OR_CREATE_SCHEMA", "CC"),
    ),
    edit(
        "response-changed",
        "pulsar",
        PY,
        [
            (
                "{request: GET_SCHEMA, response: GET_SCHEMA_RESPONSE,",
                "{request: GET_SCHEMA, response: GET_OR_CREATE_SCHEMA_RESPONSE,",
            )
        ],
        x("INTERACTION_RESPONSE_CHANGED", "GET_SCHEMA", "BB"),
    ),
    edit(
        "errors-added",
        "pulsar",
        PY,
        [("{request: PING, response: PONG}", "{request: PING, response: PONG, errors: [ERROR]}")],
        x("INTERACTION_ERRORS_ADDED", "PING", "CC"),
    ),
    edit(
        "errors-removed",
        "pulsar",
        PY,
        [
            (
                "{request: CONNECT, response: CONNECTED, errors: [ERROR]}",
                "{request: CONNECT, response: CONNECTED}",
            )
        ],
        x("INTERACTION_ERRORS_REMOVED", "CONNECT", "BC"),
    ),
    edit(
        "correlation",
        "pulsar",
        PY,
        [("correlate: [producer_id, sequence_id], frame", "correlate: [producer_id], frame")],
        x("INTERACTION_CORRELATION_CHANGED", "SEND", "BC"),
    ),
    edit(
        "frame-args",
        "pulsar",
        PY,
        [(", frame_fields: [payload]}", "}")],
        x("INTERACTION_ARGS_CHANGED", "SEND", "CB"),
    ),
    edit(
        "answered-when",
        "tank",
        TK,
        [
            (
                "{request: PRODUCE, response: PRODUCE, correlate: [request_id]}",
                '{request: PRODUCE, response: PRODUCE, correlate: [request_id], '
                'when: "required_acks != 0"}',
            )
        ],
        x("INTERACTION_ANSWERED_CHANGED", "PRODUCE", "BB"),
    ),
    edit(
        "chosen-answers",
        "tank",
        TK,
        [
            (
                "{request: PRODUCE_WITH_SEQNUM, response: PRODUCE, correlate: [request_id]}",
                '{request: PRODUCE_WITH_SEQNUM, correlate: [request_id], response: ['
                '{command: PRODUCE, when: "required_acks == 1"}, '
                '{command: CONSUME, when: "required_acks == 2"}]}',
            )
        ],
        x("INTERACTION_CHOICES_CHANGED", "PRODUCE_WITH_SEQNUM", "BB"),
    ),
    edit(
        "streamed",
        "tank",
        TK,
        [
            (
                "{request: CONSUME, response: CONSUME, correlate: [request_id]}",
                "{request: CONSUME, response: CONSUME, correlate: [request_id], until: [PRODUCE]}",
            )
        ],
        x("INTERACTION_STREAM_CHANGED", "CONSUME", "BB"),
    ),
    edit(
        "allocate-opt-out",
        "tank",
        TK,
        [
            (
                "{request: CONSUME, response: CONSUME, correlate: [request_id]}",
                "{request: CONSUME, response: CONSUME, correlate: [request_id], allocate: false}",
            )
        ],
        x("INTERACTION_ALLOCATE_CHANGED", "CONSUME", "CB"),
    ),
    edit(
        "allocator-start",
        "tank",
        TK,
        [("  allocate: request_id\n",
          "  allocate: {field: request_id, start: 1, skip_zero: true}\n")],
        x("INTERACTION_ALLOCATOR_CHANGED", "tank.allocate", "CC"),
    ),
    edit(
        "method",
        "pulsar",
        PY,
        [
            (
                "{request: PING, response: PONG}",
                "{request: PING, response: PONG, method: ping_broker}",
            )
        ],
        x("INTERACTION_METHOD_RENAMED", "PING", "CB"),
    ),
    edit(
        "direction",
        "pulsar",
        PY,
        [("one_way: [ACK, FLOW, REDELIVER", "one_way: [ACK, REDELIVER")],
        x("INTERACTION_DIRECTION_CHANGED", "FLOW", "BC"),
    ),
    # -- machines ----------------------------------------------------------------------------
    edit(
        "machine-added",
        "pulsar",
        PY,
        [("  producer:\n", PING_MACHINE + "  producer:\n")],
        x("MACHINE_ADDED", "ping", "CC"),
    ),
    edit(
        "machine-removed",
        "pulsar",
        PY,
        [(PING_MACHINE + "  producer:\n", "  producer:\n")],
        x("MACHINE_NO_DELETE", "ping", "CB"),
        base=[("  producer:\n", PING_MACHINE + "  producer:\n")],
    ),
    edit(
        "initial",
        "pulsar",
        PY,
        [(LOOKUP_STATES, LOOKUP_STATES.replace("initial: idle", "initial: pending"))],
        x("MACHINE_INITIAL_CHANGED", "lookup", "BC"),
    ),
    edit(
        "machine-key",
        "pulsar",
        PY,
        [("    key: producer_id\n", "    key: request_id\n")],
        x("MACHINE_KEY_CHANGED", "producer", "BC"),
    ),
    edit(
        "state-added",
        "pulsar",
        PY,
        [
            (LOOKUP_STATES, LOOKUP_STATES.replace("failed]", "failed, cancelled]")),
            (REDIRECT, REDIRECT + "      - {from: pending, event: cancel, to: cancelled}\n"),
        ],
        x("MACHINE_STATE_ADDED", "lookup.cancelled", "CC"),
        x("MACHINE_TRANSITION_ADDED", "lookup: pending -> cancelled on event cancel", "CC"),
    ),
    edit(
        "state-removed",
        "pulsar",
        PY,
        [(LOOKUP_STATES, LOOKUP_STATES.replace(" redirected,", "")), (REDIRECT, "")],
        x("MACHINE_STATE_NO_DELETE", "lookup.redirected", "BB"),
        x(
            "MACHINE_TRANSITION_NO_DELETE",
            "lookup: pending -> redirected on receive LOOKUP_RESPONSE if response == Redirect",
            "BC",
        ),
    ),
    edit(
        "transition-added",
        "pulsar",
        PY,
        [
            (
                "      - {from: connected, receive: PONG, to: connected}\n",
                "      - {from: connected, receive: PONG, to: connected}\n"
                "      - {from: connecting, receive: PING, to: connecting}\n",
            )
        ],
        x("MACHINE_TRANSITION_ADDED", "connection: connecting -> connecting on receive PING", "CC"),
    ),
    edit(
        "transition-removed",
        "pulsar",
        PY,
        [("      - {from: connected, receive: PONG, to: connected}\n", "")],
        x(
            "MACHINE_TRANSITION_NO_DELETE",
            "connection: connected -> connected on receive PONG",
            "BC",
        ),
    ),
]

YAML_NON_CHANGES: list[Edit] = [
    edit(
        "structs-reordered",
        "tank",
        TK,
        [
            (
                "  Ping:\n    doc: Empty; the broker sends one on connect and ignores those it "
                "receives.\n    fields: []\n\n",
                "",
            ),
            (
                "  # -- bundles",
                "  Ping:\n    doc: Empty; the broker sends one on connect and "
                "ignores those it receives.\n    fields: []\n\n  # -- bundles",
            ),
        ],
    ),
    edit(
        "comments-and-docs",
        "pulsar",
        PY,
        [
            (
                "  BatchEntry:\n    doc: One message",
                "  # a comment\n  BatchEntry:\n    doc: Any message",
            )
        ],
    ),
    edit(
        "whitespace",
        "pulsar",
        PY,
        [
            (
                "{name: magic, type: u16, const: 0x0e02}",
                "{ name:  magic,  type: u16,  const: 0x0e02 }",
            )
        ],
    ),
    edit(
        "yaml-quoting",
        "pulsar",
        PY,
        [
            (
                "{name: magic, type: u16, const: 0x0e01}",
                "{'name': \"magic\", \"type\": 'u16', const: 0x0e01}",
            )
        ],
    ),
    edit(
        "flow-to-block",
        "tank",
        TK,
        [
            (
                "      - {name: partition, type: u16}\n      - {name: bundle_length",
                "      - name: partition\n        type: u16\n      - {name: bundle_length",
            )
        ],
    ),
    edit(
        "transitions-reordered",
        "pulsar",
        PY,
        [
            (
                "      - {from: connected, send: PING, to: connected}\n"
                "      - {from: connected, receive: PING, to: connected}\n",
                "      - {from: connected, receive: PING, to: connected}\n"
                "      - {from: connected, send: PING, to: connected}\n",
            )
        ],
    ),
]
