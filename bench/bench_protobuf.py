"""Protobuf codec speed: protoframe's Pulsar bindings against the official runtime and betterproto.

Three implementations of specs/pulsar/PulsarApi.proto are timed on the messages a Pulsar client
builds and parses most:

* ours: ``generated.pulsar.pulsar_api`` (protoframe's generated code over
  runtime/codec/protowire.py);
* upb: the official ``protobuf`` runtime (C upb backend) running protoc's ``--python_out`` code;
* betterproto: betterproto 1.2.5 (pure Python), generated with its protoc plugin.

The official and betterproto modules are generated at start into a temporary directory that is
removed at exit; nothing is written inside the repository. Before anything is timed, every
implementation's decoder must read the expected values back from the bytes ours encodes, and
ours and upb must encode identical bytes, so no cell times wrong or skipped work.

Each cell is microseconds per operation, the best of ``REPEATS`` runs after calibrating the
iteration count so that a cell takes about ``CELL_SECONDS``; the runs of one row's columns
alternate, and the garbage collector is off while a run is timed (as ``timeit`` does).
"""

from __future__ import annotations

import gc
import importlib.util
import keyword
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import ModuleType
from typing import Any

from protoframe.generated.pulsar import pulsar_api as ours
from protoframe.generator.build import generate
from protoframe.runtime.codec import compiled

REPO = Path(__file__).resolve().parent.parent
SPEC_DIR = REPO / "specs"
PROTO = SPEC_DIR / "pulsar" / "PulsarApi.proto"
GENERATED_MODULE = REPO / "generated" / "pulsar" / "pulsar_api.py"

REPEATS = 15
CELL_SECONDS = 0.45  # wall time for one cell, all repeats together
CALIBRATE_NS = 5_000_000  # grow the iteration count until one run takes this long
GENERATE_RUNS = 3

IMPLS = ("ours", "upb", "betterproto")
OPERATIONS = ("build+encode", "decode+read")

# Field values, realistic in size: multi-byte varints, short strings.
PRODUCER_ID = 3
CONSUMER_ID = 7
SEQUENCE_ID = 1_234_567
NUM_MESSAGES = 100
LEDGER_ID = 123_456_789
ENTRY_ID = 98_765
PARTITION = 3
REDELIVERY_COUNT = 2
PRODUCER_NAME = "standalone-0-17"
PUBLISH_TIME = 1_700_000_000_000  # milliseconds since the epoch
PROPERTIES = (("app", "orders"), ("trace-id", "4bf92f3577b34da6"), ("region", "eu-west-1"))
UNCOMPRESSED_SIZE = 1024
PAYLOAD_SIZE = 512
PARTITION_KEY = "order-42"
SINGLE_KEY, SINGLE_VALUE = "trace-id", "4bf92f3577b34da6"

# Enum numbers from PulsarApi.proto, for the expected values.
_TYPE_SEND, _TYPE_MESSAGE, _TYPE_ACK = 6, 9, 10
_ACK_INDIVIDUAL = 0
_LZ4 = 1

Build = Callable[[], bytes]
Read = Callable[[bytes], tuple[Any, ...]]


@dataclass(frozen=True)
class Case:
    key: str
    title: str
    expected: tuple[Any, ...]  # what "decode + read every field" must return


CASES = (
    Case("send", "BaseCommand(SEND)",
         (_TYPE_SEND, PRODUCER_ID, SEQUENCE_ID, NUM_MESSAGES)),
    Case("message", "BaseCommand(MESSAGE)",
         (_TYPE_MESSAGE, CONSUMER_ID, LEDGER_ID, ENTRY_ID, PARTITION, REDELIVERY_COUNT)),
    Case("ack", "BaseCommand(ACK, 1 id)",
         (_TYPE_ACK, CONSUMER_ID, _ACK_INDIVIDUAL, ((LEDGER_ID, ENTRY_ID, PARTITION),))),
    Case("metadata", "MessageMetadata(3 props)",
         (PRODUCER_NAME, SEQUENCE_ID, PUBLISH_TIME, PROPERTIES, _LZ4, UNCOMPRESSED_SIZE)),
    Case("single", "SingleMessageMetadata",
         (((SINGLE_KEY, SINGLE_VALUE),), PARTITION_KEY, PAYLOAD_SIZE, SEQUENCE_ID)),
)


@dataclass(frozen=True)
class Codec:
    build: Build  # construct the message(s) from the values above and serialize
    read: Read  # parse and read every set field, nested ones included


# --------------------------------------------------------------------------------------------
# The three implementations. Each factory binds the classes it uses to closure variables, so
# every implementation pays the same (small) cost to reach them, and reads fields the way a
# user of that library would.


def ours_codecs() -> dict[str, Codec]:
    BaseCommand = ours.BaseCommand
    CommandSend = ours.CommandSend
    CommandMessage = ours.CommandMessage
    CommandAck = ours.CommandAck
    MessageIdData = ours.MessageIdData
    MessageMetadata = ours.MessageMetadata
    SingleMessageMetadata = ours.SingleMessageMetadata
    KeyValue = ours.KeyValue
    CompressionType = ours.CompressionType

    def send_build() -> bytes:
        return BaseCommand(
            type_=BaseCommand.Type.SEND,
            send=CommandSend(producer_id=PRODUCER_ID, sequence_id=SEQUENCE_ID,
                             num_messages=NUM_MESSAGES),
        ).encode()

    def send_read(data: bytes) -> tuple[Any, ...]:
        cmd = BaseCommand.decode(data)
        send = cmd.send
        assert send is not None
        return (cmd.type_, send.producer_id, send.sequence_id, send.num_messages)

    def message_build() -> bytes:
        return BaseCommand(
            type_=BaseCommand.Type.MESSAGE,
            message=CommandMessage(
                consumer_id=CONSUMER_ID,
                message_id=MessageIdData(ledgerId=LEDGER_ID, entryId=ENTRY_ID,
                                         partition=PARTITION),
                redelivery_count=REDELIVERY_COUNT,
            ),
        ).encode()

    def message_read(data: bytes) -> tuple[Any, ...]:
        cmd = BaseCommand.decode(data)
        msg = cmd.message
        assert msg is not None
        mid = msg.message_id
        return (cmd.type_, msg.consumer_id, mid.ledgerId, mid.entryId, mid.partition,
                msg.redelivery_count)

    def ack_build() -> bytes:
        return BaseCommand(
            type_=BaseCommand.Type.ACK,
            ack=CommandAck(
                consumer_id=CONSUMER_ID,
                ack_type=CommandAck.AckType.Individual,
                message_id=[MessageIdData(ledgerId=LEDGER_ID, entryId=ENTRY_ID,
                                          partition=PARTITION)],
            ),
        ).encode()

    def ack_read(data: bytes) -> tuple[Any, ...]:
        cmd = BaseCommand.decode(data)
        ack = cmd.ack
        assert ack is not None
        return (cmd.type_, ack.consumer_id, ack.ack_type,
                tuple([(m.ledgerId, m.entryId, m.partition) for m in ack.message_id]))

    def metadata_build() -> bytes:
        return MessageMetadata(
            producer_name=PRODUCER_NAME,
            sequence_id=SEQUENCE_ID,
            publish_time=PUBLISH_TIME,
            properties=[KeyValue(key=k, value=v) for k, v in PROPERTIES],
            compression=CompressionType.LZ4,
            uncompressed_size=UNCOMPRESSED_SIZE,
        ).encode()

    def metadata_read(data: bytes) -> tuple[Any, ...]:
        md = MessageMetadata.decode(data)
        return (md.producer_name, md.sequence_id, md.publish_time,
                tuple([(kv.key, kv.value) for kv in md.properties]),
                md.compression, md.uncompressed_size)

    def single_build() -> bytes:
        return SingleMessageMetadata(
            properties=[KeyValue(key=SINGLE_KEY, value=SINGLE_VALUE)],
            partition_key=PARTITION_KEY,
            payload_size=PAYLOAD_SIZE,
            sequence_id=SEQUENCE_ID,
        ).encode()

    def single_read(data: bytes) -> tuple[Any, ...]:
        smd = SingleMessageMetadata.decode(data)
        return (tuple([(kv.key, kv.value) for kv in smd.properties]), smd.partition_key,
                smd.payload_size, smd.sequence_id)

    return {
        "send": Codec(send_build, send_read),
        "message": Codec(message_build, message_read),
        "ack": Codec(ack_build, ack_read),
        "metadata": Codec(metadata_build, metadata_read),
        "single": Codec(single_build, single_read),
    }


def upb_codecs(pb: Any) -> dict[str, Codec]:
    BaseCommand = pb.BaseCommand
    CommandSend = pb.CommandSend
    CommandMessage = pb.CommandMessage
    CommandAck = pb.CommandAck
    MessageIdData = pb.MessageIdData
    MessageMetadata = pb.MessageMetadata
    SingleMessageMetadata = pb.SingleMessageMetadata
    KeyValue = pb.KeyValue

    def send_build() -> bytes:
        data: bytes = BaseCommand(
            type=BaseCommand.SEND,
            send=CommandSend(producer_id=PRODUCER_ID, sequence_id=SEQUENCE_ID,
                             num_messages=NUM_MESSAGES),
        ).SerializeToString()
        return data

    def send_read(data: bytes) -> tuple[Any, ...]:
        cmd = BaseCommand.FromString(data)
        send = cmd.send
        return (cmd.type, send.producer_id, send.sequence_id, send.num_messages)

    def message_build() -> bytes:
        data: bytes = BaseCommand(
            type=BaseCommand.MESSAGE,
            message=CommandMessage(
                consumer_id=CONSUMER_ID,
                message_id=MessageIdData(ledgerId=LEDGER_ID, entryId=ENTRY_ID,
                                         partition=PARTITION),
                redelivery_count=REDELIVERY_COUNT,
            ),
        ).SerializeToString()
        return data

    def message_read(data: bytes) -> tuple[Any, ...]:
        cmd = BaseCommand.FromString(data)
        msg = cmd.message
        mid = msg.message_id
        return (cmd.type, msg.consumer_id, mid.ledgerId, mid.entryId, mid.partition,
                msg.redelivery_count)

    def ack_build() -> bytes:
        data: bytes = BaseCommand(
            type=BaseCommand.ACK,
            ack=CommandAck(
                consumer_id=CONSUMER_ID,
                ack_type=CommandAck.Individual,
                message_id=[MessageIdData(ledgerId=LEDGER_ID, entryId=ENTRY_ID,
                                          partition=PARTITION)],
            ),
        ).SerializeToString()
        return data

    def ack_read(data: bytes) -> tuple[Any, ...]:
        cmd = BaseCommand.FromString(data)
        ack = cmd.ack
        return (cmd.type, ack.consumer_id, ack.ack_type,
                tuple([(m.ledgerId, m.entryId, m.partition) for m in ack.message_id]))

    def metadata_build() -> bytes:
        data: bytes = MessageMetadata(
            producer_name=PRODUCER_NAME,
            sequence_id=SEQUENCE_ID,
            publish_time=PUBLISH_TIME,
            properties=[KeyValue(key=k, value=v) for k, v in PROPERTIES],
            compression=pb.LZ4,
            uncompressed_size=UNCOMPRESSED_SIZE,
        ).SerializeToString()
        return data

    def metadata_read(data: bytes) -> tuple[Any, ...]:
        md = MessageMetadata.FromString(data)
        return (md.producer_name, md.sequence_id, md.publish_time,
                tuple([(kv.key, kv.value) for kv in md.properties]),
                md.compression, md.uncompressed_size)

    def single_build() -> bytes:
        data: bytes = SingleMessageMetadata(
            properties=[KeyValue(key=SINGLE_KEY, value=SINGLE_VALUE)],
            partition_key=PARTITION_KEY,
            payload_size=PAYLOAD_SIZE,
            sequence_id=SEQUENCE_ID,
        ).SerializeToString()
        return data

    def single_read(data: bytes) -> tuple[Any, ...]:
        smd = SingleMessageMetadata.FromString(data)
        return (tuple([(kv.key, kv.value) for kv in smd.properties]), smd.partition_key,
                smd.payload_size, smd.sequence_id)

    return {
        "send": Codec(send_build, send_read),
        "message": Codec(message_build, message_read),
        "ack": Codec(ack_build, ack_read),
        "metadata": Codec(metadata_build, metadata_read),
        "single": Codec(single_build, single_read),
    }


def betterproto_codecs(bp: Any) -> dict[str, Codec]:
    BaseCommand = bp.BaseCommand
    BaseCommandType = bp.BaseCommandType
    CommandSend = bp.CommandSend
    CommandMessage = bp.CommandMessage
    CommandAck = bp.CommandAck
    CommandAckAckType = bp.CommandAckAckType
    MessageIdData = bp.MessageIdData
    MessageMetadata = bp.MessageMetadata
    SingleMessageMetadata = bp.SingleMessageMetadata
    KeyValue = bp.KeyValue
    CompressionType = bp.CompressionType

    def send_build() -> bytes:
        return bytes(BaseCommand(
            type=BaseCommandType.SEND,
            send=CommandSend(producer_id=PRODUCER_ID, sequence_id=SEQUENCE_ID,
                             num_messages=NUM_MESSAGES),
        ))

    def send_read(data: bytes) -> tuple[Any, ...]:
        cmd = BaseCommand().parse(data)
        send = cmd.send
        return (cmd.type, send.producer_id, send.sequence_id, send.num_messages)

    def message_build() -> bytes:
        return bytes(BaseCommand(
            type=BaseCommandType.MESSAGE,
            message=CommandMessage(
                consumer_id=CONSUMER_ID,
                message_id=MessageIdData(ledger_id=LEDGER_ID, entry_id=ENTRY_ID,
                                         partition=PARTITION),
                redelivery_count=REDELIVERY_COUNT,
            ),
        ))

    def message_read(data: bytes) -> tuple[Any, ...]:
        cmd = BaseCommand().parse(data)
        msg = cmd.message
        mid = msg.message_id
        return (cmd.type, msg.consumer_id, mid.ledger_id, mid.entry_id, mid.partition,
                msg.redelivery_count)

    def ack_build() -> bytes:
        return bytes(BaseCommand(
            type=BaseCommandType.ACK,
            ack=CommandAck(
                consumer_id=CONSUMER_ID,
                ack_type=CommandAckAckType.Individual,
                message_id=[MessageIdData(ledger_id=LEDGER_ID, entry_id=ENTRY_ID,
                                          partition=PARTITION)],
            ),
        ))

    def ack_read(data: bytes) -> tuple[Any, ...]:
        cmd = BaseCommand().parse(data)
        ack = cmd.ack
        return (cmd.type, ack.consumer_id, ack.ack_type,
                tuple([(m.ledger_id, m.entry_id, m.partition) for m in ack.message_id]))

    def metadata_build() -> bytes:
        return bytes(MessageMetadata(
            producer_name=PRODUCER_NAME,
            sequence_id=SEQUENCE_ID,
            publish_time=PUBLISH_TIME,
            properties=[KeyValue(key=k, value=v) for k, v in PROPERTIES],
            compression=CompressionType.LZ4,
            uncompressed_size=UNCOMPRESSED_SIZE,
        ))

    def metadata_read(data: bytes) -> tuple[Any, ...]:
        md = MessageMetadata().parse(data)
        return (md.producer_name, md.sequence_id, md.publish_time,
                tuple([(kv.key, kv.value) for kv in md.properties]),
                md.compression, md.uncompressed_size)

    def single_build() -> bytes:
        return bytes(SingleMessageMetadata(
            properties=[KeyValue(key=SINGLE_KEY, value=SINGLE_VALUE)],
            partition_key=PARTITION_KEY,
            payload_size=PAYLOAD_SIZE,
            sequence_id=SEQUENCE_ID,
        ))

    def single_read(data: bytes) -> tuple[Any, ...]:
        smd = SingleMessageMetadata().parse(data)
        return (tuple([(kv.key, kv.value) for kv in smd.properties]), smd.partition_key,
                smd.payload_size, smd.sequence_id)

    return {
        "send": Codec(send_build, send_read),
        "message": Codec(message_build, message_read),
        "ack": Codec(ack_build, ack_read),
        "metadata": Codec(metadata_build, metadata_read),
        "single": Codec(single_build, single_read),
    }


# --------------------------------------------------------------------------------------------
# Generating and importing the other implementations (into a temporary directory).


def _protoc(args: list[str], cwd: Path) -> None:
    """Run grpc_tools' protoc on PulsarApi.proto; ``cwd`` matters to betterproto's plugin,
    which creates its output package directories relative to the working directory."""
    cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO.parent}", *args, str(PROTO)]
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(
            f"protoc failed ({done.returncode}): {' '.join(cmd)}\n{done.stdout}{done.stderr}"
        )


def _import_file(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    # Registered before running it: betterproto resolves its string annotations through
    # sys.modules[cls.__module__].
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_upb(tmp: Path) -> ModuleType:
    out = tmp / "pb2"
    out.mkdir()
    _protoc([f"--python_out={out}"], cwd=tmp)
    return _import_file("_protoframe_bench_PulsarApi_pb2", out / "PulsarApi_pb2.py")


_KEYWORD_ENUM_MEMBER = re.compile(
    rf"^    ({'|'.join(keyword.kwlist)}) = (-?\d+)$", re.MULTILINE
)
_MESSAGE_CLASS = re.compile(r"^class (\w+)\(betterproto\.Message\):$", re.MULTILINE)
_SINGULAR_MESSAGE_FIELD = re.compile(
    r'^    (\w+): "(\w+)" = betterproto\.message_field\((\d+)\)$', re.MULTILINE
)


def betterproto_compat(source: str) -> tuple[str, list[str]]:
    """Work around two betterproto 1.2.5 bugs that make PulsarApi's module unusable.

    * Enum members named after a Python keyword are emitted as is (``None = 0`` in
      ``Schema.Type``), a SyntaxError (upstream issue #302): renamed with a trailing ``_``.
    * Every unset singular message field gets a default instance at construction, so a
      recursive message (``MessageIdData.first_chunk_message_id``) recurses until
      RecursionError (upstream issues #13, #74; fixed in 2.0 only): such fields are annotated
      ``Optional[...]``, which makes betterproto default them to None instead.

    Neither change alters the bytes of the benchmarked messages, and the recursion fix is the
    smallest possible (only fields on a cycle), so betterproto still builds its eager default
    sub-messages everywhere else, as it does for users.
    """
    fixes: list[str] = []

    def rename(m: re.Match[str]) -> str:
        fixes.append(f"enum member {m.group(1)} -> {m.group(1)}_ (Python keyword)")
        return f"    {m.group(1)}_ = {m.group(2)}"

    source = _KEYWORD_ENUM_MEMBER.sub(rename, source)

    # Singular message fields per class, to find the ones on a cycle.
    starts = [(m.start(), m.group(1)) for m in _MESSAGE_CLASS.finditer(source)]
    blocks: dict[str, tuple[int, int]] = {}
    for i, (start, name) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(source)
        blocks[name] = (start, end)
    edges: dict[str, list[tuple[str, str]]] = {
        name: [(f.group(1), f.group(2)) for f in
               _SINGULAR_MESSAGE_FIELD.finditer(source, start, end)]
        for name, (start, end) in blocks.items()
    }

    def reaches(src: str, dst: str) -> bool:
        seen, todo = {src}, [src]
        while todo:
            for _, target in edges.get(todo.pop(), []):
                if target == dst:
                    return True
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        return False

    recursive = [(owner, fld, target) for owner, fields in edges.items()
                 for fld, target in fields if reaches(target, owner)]
    for owner, fld, target in recursive:
        start, end = blocks[owner]
        block = source[start:end].replace(f'    {fld}: "{target}" =',
                                          f'    {fld}: Optional["{target}"] =', 1)
        source = source[:start] + block + source[end:]
        fixes.append(f"{owner}.{fld} made Optional (recursive message)")
    if recursive:
        source = source.replace("import betterproto\n",
                                "import betterproto\nfrom typing import Optional\n", 1)
    return source, fixes


def load_betterproto(tmp: Path) -> tuple[ModuleType, list[str]]:
    plugin = Path(sys.executable).parent / "protoc-gen-python_betterproto"
    if not plugin.exists():
        raise RuntimeError(f"{plugin} not found; install betterproto[compiler]==1.2.5")
    out = tmp / "betterproto"
    out.mkdir()
    try:
        _protoc([f"--plugin=protoc-gen-python_betterproto={plugin}",
                 f"--python_betterproto_out={out}"], cwd=out)
    except RuntimeError as exc:
        raise RuntimeError(
            f"{exc}\n(betterproto's plugin needs its compiler extras: "
            "pip install 'betterproto[compiler]==1.2.5', i.e. black and jinja2)"
        ) from None
    # Package pulsar.proto -> pulsar/proto.py. Loaded under a private name: the venv's
    # pulsar-client owns the top-level name "pulsar".
    path = out / "pulsar" / "proto.py"
    source, fixes = betterproto_compat(path.read_text())
    path.write_text(source)
    return _import_file("_protoframe_bench_betterproto_pulsar", path), fixes


# --------------------------------------------------------------------------------------------
# Timing.


def _run_build(fn: Build, n: int) -> int:
    loops = range(n)
    started = time.perf_counter_ns()
    for _ in loops:
        fn()
    return time.perf_counter_ns() - started


def _run_read(fn: Read, data: bytes, n: int) -> int:
    loops = range(n)
    started = time.perf_counter_ns()
    for _ in loops:
        fn(data)
    return time.perf_counter_ns() - started


def measure(*runs: Callable[[int], int]) -> list[float]:
    """Best time of ``REPEATS`` runs of each of ``runs``, in microseconds per operation.

    The runs of one row alternate (a, b, c, a, b, c, ...): a change in machine load or clock
    speed then hits every column of the row alike, and the ratios stay meaningful.
    """
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        counts = []
        for run in runs:
            n = 1
            while (elapsed := run(n)) < CALIBRATE_NS:
                n *= 2 if elapsed > CALIBRATE_NS // 10 else 10
            counts.append(max(1, int(CELL_SECONDS * 1e9 / REPEATS / (elapsed / n))))
        best = [float("inf")] * len(runs)
        for _ in range(REPEATS):
            for i, (run, n) in enumerate(zip(runs, counts, strict=True)):
                best[i] = min(best[i], run(n) / n)
    finally:
        if was_enabled:
            gc.enable()
    return [ns / 1000.0 for ns in best]


def _noop_build() -> bytes:
    return b""


def _noop_read(data: bytes) -> tuple[Any, ...]:
    return ()


# --------------------------------------------------------------------------------------------
# Correctness guard.


def _expect(condition: bool, message: str) -> None:
    """An assertion that ``python -O`` does not remove."""
    if not condition:
        raise AssertionError(message)


def check(codecs: dict[str, dict[str, Codec]], cases: tuple[Case, ...] = CASES,
          any_order: frozenset[str] = frozenset()) -> tuple[dict[str, bytes], list[str]]:
    """Assert the implementations agree before anything is timed; return ours' bytes per case
    (the input every decoder is timed on) and notes on tolerated differences. The cases in
    ``any_order`` (maps) may encode their entries in another order; the values must agree."""
    inputs: dict[str, bytes] = {}
    notes: list[str] = []
    for case in cases:
        wire = codecs["ours"][case.key].build()
        inputs[case.key] = wire
        if "upb" in codecs and case.key not in any_order:
            upb_wire = codecs["upb"][case.key].build()
            _expect(wire == upb_wire, f"{case.title}: ours and upb encode differently:\n"
                    f"  ours {wire.hex()}\n  upb  {upb_wire.hex()}")
        for impl, by_case in codecs.items():
            if case.key not in by_case:
                continue
            got = by_case[case.key].read(wire)
            _expect(got == case.expected,
                    f"{case.title}: {impl} decodes {got!r}, expected {case.expected!r}")
        if case.key in any_order and "upb" in codecs:
            got = codecs["ours"][case.key].read(codecs["upb"][case.key].build())
            _expect(got == case.expected, f"{case.title}: ours reads {got!r} from upb's bytes, "
                    f"expected {case.expected!r}")
        if case.key not in codecs.get("betterproto", {}):
            continue
        # betterproto has proto3 semantics (no presence, zero values not written), so its
        # bytes may differ; they must still carry the same values.
        bp_wire = codecs["betterproto"][case.key].build()
        if bp_wire == wire:
            continue
        for impl, by_case in codecs.items():
            try:
                got = by_case[case.key].read(bp_wire)
            except Exception as exc:  # reported, not hidden
                notes.append(f"{case.title}: {impl} rejects betterproto's encoding "
                             f"({type(exc).__name__}: {exc})")
                continue
            _expect(got == case.expected, f"{case.title}: {impl} reads {got!r} from "
                    f"betterproto's bytes, expected {case.expected!r}")
        notes.append(f"{case.title}: betterproto encodes {len(bp_wire)} bytes, ours/upb "
                     f"{len(wire)} ({bp_wire.hex()} vs {wire.hex()})")
    return inputs, notes


# --------------------------------------------------------------------------------------------


def _fmt_us(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value < 10:
        return f"{value:.3f}"
    if value < 100:
        return f"{value:.2f}"
    return f"{value:.1f}"


def _fmt_ratio(other: float | None, base: float) -> str:
    return "n/a" if other is None else f"{other / base:.2f}x"


def _version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


def time_generation() -> None:
    runs: list[float] = []
    output = None
    for _ in range(GENERATE_RUNS):
        started = time.perf_counter_ns()
        output = generate(SPEC_DIR, "specs", ["pulsar"])
        runs.append((time.perf_counter_ns() - started) / 1e9)
    assert output is not None and "pulsar/pulsar_api.py" in output.files
    print(f"generate all of PulsarApi.proto: {min(runs):.3f} s best of {GENERATE_RUNS} "
          f"(runs: {', '.join(f'{r:.3f}' for r in runs)})")
    if output.files["pulsar/pulsar_api.py"] != GENERATED_MODULE.read_text():
        print("  note: generated/pulsar/pulsar_api.py differs from what the generator now "
              "produces; the codec timings above are for the file on disk (make generate)")


def main() -> None:
    from google.protobuf.internal import api_implementation

    # Imported here: it builds its rows from this module's Case and Codec.
    from bench import protobuf_constructs

    print(f"Python {platform.python_version()} ({platform.python_implementation()}), "
          f"protobuf {_version('protobuf')} backend={api_implementation.Type()}, "
          f"betterproto {_version('betterproto')}")
    print(f"our protobuf codec: {compiled.describe()}")
    codecs: dict[str, dict[str, Codec]] = {
        "ours": {**ours_codecs(), **protobuf_constructs.ours_codecs()}}
    cases = CASES + protobuf_constructs.CASES
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="protoframe-bench-") as tmp_name:
        tmp = Path(tmp_name)
        started = time.perf_counter()
        pulsar_pb = load_upb(tmp)
        codecs["upb"] = {**upb_codecs(pulsar_pb), **protobuf_constructs.upb_codecs(pulsar_pb, tmp)}
        try:
            bp, fixes = load_betterproto(tmp)
        except Exception as exc:  # the other columns still tell
            print(f"WARNING: betterproto column skipped: {exc}", file=sys.stderr)
        else:
            codecs["betterproto"] = betterproto_codecs(bp)
            if fixes:
                notes.append("betterproto 1.2.5 compatibility shim applied to its generated "
                             "module: " + "; ".join(fixes))
        print(f"generated the upb and betterproto modules in {time.perf_counter() - started:.1f}"
              " s (temporary directory)")
        if api_implementation.Type() != "upb":
            notes.append(f"protobuf backend is {api_implementation.Type()!r}, not upb")

        inputs, check_notes = check(codecs, cases, protobuf_constructs.ANY_ORDER)
        notes.extend(check_notes)
        print(f"checked: {', '.join(codecs)} decode the expected values; ours == upb bytes "
              "(for the map: both read each other's bytes)")

        overhead_build, overhead_read = measure(partial(_run_build, _noop_build),
                                                partial(_run_read, _noop_read, b""))

        print()
        labels = {c.key: f"{c.title} [{len(inputs[c.key])} B]" for c in cases}
        width = max(len(label) for label in labels.values())
        header = (f"{'case':<{width}} {'operation':<13} {'ours µs':>9} {'upb µs':>9} "
                  f"{'betterproto µs':>15} {'upb/ours':>9} {'bp/ours':>8}")
        print(header)
        print("-" * len(header))
        for case in cases:
            label = labels[case.key]
            for op in OPERATIONS:
                present = [impl for impl in IMPLS if case.key in codecs.get(impl, {})]
                runs = [partial(_run_build, codecs[impl][case.key].build)
                        if op == "build+encode" else
                        partial(_run_read, codecs[impl][case.key].read, inputs[case.key])
                        for impl in present]
                cells: dict[str, float | None] = dict.fromkeys(IMPLS)
                cells.update(zip(present, measure(*runs), strict=True))
                base = cells["ours"]
                assert base is not None
                print(f"{label:<{width}} {op:<13} {_fmt_us(base):>9} {_fmt_us(cells['upb']):>9} "
                      f"{_fmt_us(cells['betterproto']):>15} "
                      f"{_fmt_ratio(cells['upb'], base):>9} "
                      f"{_fmt_ratio(cells['betterproto'], base):>8}", flush=True)
                label = ""
    print(f"(µs per operation, best of {REPEATS}; ratio = other / ours, below 1.00x means the "
          "other is faster; every cell includes the timing loop's call overhead of "
          f"~{overhead_build:.3f} µs build / {overhead_read:.3f} µs read)")
    print()
    time_generation()
    for note in notes:
        print(f"note: {note}")
