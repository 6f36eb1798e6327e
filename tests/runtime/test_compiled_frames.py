"""The compiled frame codec (runtime/codec/_framecodec.c) against the generated Python methods.

The generated Python ``encode`` / ``decode`` / ``decode_from`` of a frame struct are the
reference: for every input, valid or damaged, and every value, plain or odd, the compiled
codec must give the same bytes, the same decoded frame, or the same error (type, text, and for
a checksum failure the frame it carries and the position).
"""

from __future__ import annotations

import gc
import importlib.util
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protoframe.generated.pravega import frames as pravega_frames
from protoframe.generated.pulsar import frames as frames_module
from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.generated.pulsar.frames import (
    Batch,
    BatchEntry,
    BrokerEntry,
    Frame,
    Payload,
    StreamDecoder,
)
from protoframe.generated.tank import frames as tank_frames
from protoframe.generated.tubemq import frames as tubemq_frames
from protoframe.runtime.codec import compiled, compiled_frames
from protoframe.runtime.codec.protowire import varint_bytes
from protoframe.runtime.errors import (
    ChecksumFailure,
    UnknownCommandError,
    UnknownCommandTypeError,
    ValueOutOfRangeError,
)
from tests.generated.pulsar.corpus import CORPUS, mutate
from tests.support.compiled_ops import python_only_struct
from tests.support.examples import scaled
from tests.support.paths import ROOT
from tests.support.pulsar_frames import payload_frames, simple_frames

pytestmark = pytest.mark.skipif(
    not compiled_frames.available(),
    reason="runtime.codec._framecodec is not built (no C compiler when installing?) or "
    "PROTOFRAME_PURE_PYTHON is set; the Python frame codecs run everywhere",
)


def _outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    """What calling ``fn`` gives: its value, or the type and text of what it raised (with what
    a checksum failure carries)."""
    try:
        value = fn()
    except ChecksumFailure as exc:
        return "raised", (type(exc), str(exc), repr(exc.value), exc.pos)
    except Exception as exc:  # noqa: BLE001 - the exception is the thing compared
        return "raised", (type(exc), str(exc))
    return "value", repr(value)


def _both(fn: Callable[[], Any]) -> tuple[tuple[str, Any], tuple[str, Any]]:
    """``fn``'s outcome with the compiled codecs, then with the Python ones."""
    fast = _outcome(fn)
    with compiled.pure_python():
        return fast, _outcome(fn)


def _same(fn: Callable[[], Any]) -> tuple[str, Any]:
    fast, python = _both(fn)
    assert fast == python
    return fast


# --- what is compiled -------------------------------------------------------------------------


def test_pulsar_frame_payload_and_broker_entry_are_compiled() -> None:
    assert all(compiled.is_compiled(cls) for cls in (Frame, Payload, BrokerEntry))
    # Sized by a field of its metadata, and a run of those (test_compiled_message_bytes.py).
    assert compiled.is_compiled(BatchEntry)
    assert compiled.is_compiled(Batch)


def test_structs_the_table_cannot_describe_keep_the_python_codec() -> None:
    # TubeMQ's blocks are compiled (test_compiled_tubemq_ops.py). TANK's frame switches on a
    # type code decoding another struct each way: its compiled decode methods take the
    # direction as the Python ones do (test_compiled_tank_consume.py). Pravega's switch is
    # the same both ways (test_compiled_frame_ops.py).
    assert compiled.is_compiled(tubemq_frames.Frame)
    assert compiled.is_compiled(tank_frames.Frame)
    assert tank_frames.Frame.__dict__["decode"] is not (
        compiled._python_methods[tank_frames.Frame][1])
    assert compiled.is_compiled(pravega_frames.Frame)
    assert compiled.is_compiled(tank_frames.ConsumePartition)


def test_pure_python_switch_swaps_frames_too() -> None:
    with compiled.pure_python():
        assert not compiled.is_compiled(Frame)
        assert not compiled.is_compiled(Payload)
    assert compiled.is_compiled(Frame)


@pytest.mark.slow  # a fresh interpreter per setting
def test_environment_switch_keeps_the_python_frame_codec() -> None:
    code = ("from protoframe.runtime.codec import compiled; "
            "from protoframe.generated.pulsar.frames import Frame; "
            "print(compiled.is_compiled(Frame))")
    env = {**os.environ, "PROTOFRAME_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"


# --- valid frames -------------------------------------------------------------------------------


@settings(max_examples=scaled(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=simple_frames | payload_frames)
def test_encode_and_decode_match_the_python_codec(frame: Frame) -> None:
    kind, raw = _same(frame.encode)
    assert kind == "value"
    wire = frame.encode()
    assert _same(lambda: Frame.decode(wire))[0] == "value"
    # In the middle of a larger buffer, and from other bytes-like types.
    padded = b"\x99" * 3 + wire + b"\x00" * 2
    assert _same(lambda: Frame.decode_from(padded, 3, 3 + len(wire)))[0] == "value"
    _same(lambda: Frame.decode_from(padded, 3, len(padded)))
    _same(lambda: Frame.decode(bytearray(wire)))
    _same(lambda: Frame.decode(memoryview(wire)))
    _same(lambda: Frame.decode(wire + b"\x00"))
    if frame.payload is not None:
        payload = frame.payload
        _same(payload.encode)
        _same(lambda: Payload.decode(payload.encode()))


def test_decoded_frames_are_the_python_codecs_field_by_field() -> None:
    for raw in CORPUS:
        fast = Frame.decode_from(raw, 0, len(raw))
        with compiled.pure_python():
            python = Frame.decode_from(raw, 0, len(raw))
        assert fast == python
        frame, end = fast
        assert type(frame) is Frame
        assert frame.encode() == raw[:end]  # a corpus entry may hold several frames


# --- damaged frames -----------------------------------------------------------------------------


def test_damaged_frames_give_the_python_codecs_outcome() -> None:
    rng = random.Random(0xC0DEC)
    outcomes = {"value": 0, "raised": 0}
    kinds: set[type] = set()
    cases = scaled(6000)
    for _ in range(cases):
        data = mutate(rng.choice(CORPUS), rng)
        end = len(data)
        kind, detail = _same(lambda: Frame.decode_from(data, 0, end))  # noqa: B023
        _same(lambda: Frame.decode(data))  # noqa: B023
        outcomes[kind] += 1
        if kind == "raised":
            kinds.add(detail[0])
    # Both paths are exercised: the damage check is not just comparing errors to errors.
    assert min(outcomes.values()) >= cases // 10, outcomes
    assert ChecksumFailure in kinds and len(kinds) >= 5, kinds


def test_stream_decoder_gives_the_same_frames_and_errors() -> None:
    rng = random.Random(7)
    stream = b"".join(rng.choice(CORPUS) for _ in range(40))
    cuts = sorted(rng.randrange(len(stream)) for _ in range(30))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]

    def run() -> list[Frame]:
        decoder = StreamDecoder()
        return [f for chunk in chunks for f in decoder.feed(chunk)]

    kind, frames = _same(run)
    assert kind == "value" and frames.count("Frame(") >= 40  # entries may hold several


def _command_frame(command: pb.BaseCommand) -> bytes:
    body = command.encode()
    return (len(body) + 4).to_bytes(4, "big") + len(body).to_bytes(4, "big") + body


def test_envelope_body_check_matches() -> None:
    send = pb.CommandSend(producer_id=1, sequence_id=2)
    Type = pb.BaseCommand.Type
    cases = [
        pb.BaseCommand(type_=Type.SEND, send=send),  # the body its type names
        pb.BaseCommand(type_=Type.SEND),  # no body
        pb.BaseCommand(type_=Type.PING, send=send),  # another command's body only
        pb.BaseCommand(type_=Type.PING, ping=pb.CommandPing(), send=send),  # and its own
    ]
    outcomes = [_same(lambda: Frame.decode(_command_frame(c)))[0] for c in cases]  # noqa: B023
    assert outcomes == ["value", "raised", "raised", "value"]


def test_unknown_command_types_match() -> None:
    # A command type this peer's enum lacks (a newer protocol's), alone, with a known body, after
    # or before a known type (which stays in force), twice (the last wins), negative; and a
    # missing type.
    ping = pb.BaseCommand(type_=pb.BaseCommand.Type.PING, ping=pb.CommandPing()).encode()[2:]

    def typed(*values: int) -> bytes:
        return b"".join(b"\x08" + varint_bytes(v & (2**64 - 1)) for v in values)

    commands = [typed(1000), typed(1000) + ping, typed(18, 1000) + ping, typed(1000, 18) + ping,
                typed(1000, 1001) + ping, typed(-7) + ping, ping]
    found = []
    for command in commands:
        raw = (len(command) + 4).to_bytes(4, "big") + len(command).to_bytes(4, "big") + command

        def number() -> object:
            try:
                Frame.decode(raw)  # noqa: B023
            except UnknownCommandTypeError as exc:
                return exc.command_type
            except UnknownCommandError:
                return "missing"
            return None

        _same(lambda: Frame.decode(raw))  # noqa: B023
        _same(lambda: StreamDecoder().feed(raw + raw))  # noqa: B023
        found.append(_same(number)[1])
    assert found == ["1000", "1000", "None", "None", "1001", "-7", "'missing'"]


def test_decode_from_with_odd_arguments_matches() -> None:
    raw = CORPUS[0]
    odd: list[tuple[Any, int, int]] = [
        (raw, -1, len(raw)), (raw, 0, len(raw) + 5), (raw, 2, 1), (bytearray(raw), 0, len(raw)),
        (raw, True, len(raw)), (raw, 0, 2**70)]
    for buf, pos, end in odd:
        _same(lambda: Frame.decode_from(buf, pos, end))  # noqa: B023


# --- odd values on encode -----------------------------------------------------------------------


def _send_frame(**payload: Any) -> Frame:
    metadata = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2)
    fields: dict[str, Any] = {"metadata": metadata, "data": b"abc", **payload}
    return Frame(command=pb.BaseCommand(type_=pb.BaseCommand.Type.SEND,
                                        send=pb.CommandSend(producer_id=1, sequence_id=1)),
                 payload=Payload(**fields))


@pytest.mark.parametrize("data", [bytearray(b"abc"), memoryview(b"abc"), "abc", None, 3])
def test_unusual_payload_data_matches(data: object) -> None:
    _same(_send_frame(data=data).encode)


def test_unusual_struct_and_message_values_match() -> None:
    frame = _send_frame()
    for command in (None, pb.CommandSend(producer_id=1, sequence_id=1), "x"):
        odd = Frame(command=command, payload=frame.payload)  # type: ignore[arg-type]
        _same(odd.encode)
    entry = BrokerEntry(metadata=pb.BrokerEntryMetadata(index=3))
    _same(_send_frame(broker_entry=entry).encode)
    _same(_send_frame(broker_entry="not a struct").encode)
    _same(Frame(command=frame.command, payload="x").encode)  # type: ignore[arg-type]


def test_messages_the_protobuf_codec_gives_up_on_go_through_their_method() -> None:
    # The frame codec writes a message straight into the frame's buffer; when the protobuf
    # codec gives up part way (a tuple where it takes only lists), what it wrote is dropped and
    # the message's own encode method runs.
    frame = _send_frame()
    metadata = frame.payload.metadata if frame.payload else None
    assert metadata is not None
    metadata.properties = [pb.KeyValue(key="k", value="v")]
    plain = frame.encode()
    metadata.properties = tuple(metadata.properties)  # type: ignore[assignment]
    assert _same(frame.encode) == ("value", repr(plain))


def test_a_replaced_message_encode_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    frame = _send_frame()
    other = pb.MessageMetadata(producer_name="other", sequence_id=5, publish_time=6)
    wire = other.encode()
    monkeypatch.setattr(pb.MessageMetadata, "encode", lambda self: wire)
    back = Frame.decode(frame.encode())
    assert back.payload is not None and back.payload.metadata == other


def test_message_subclasses_in_frames_match() -> None:
    class MyCommand(pb.BaseCommand):
        __slots__ = ()

    frame = _send_frame()
    mine = MyCommand(type_=pb.BaseCommand.Type.SEND,
                     send=pb.CommandSend(producer_id=1, sequence_id=1))
    odd = Frame(command=mine, payload=frame.payload)
    assert _same(odd.encode) == ("value", repr(frame.encode()))


def test_subclasses_take_the_python_path() -> None:
    class MyFrame(Frame):
        __slots__ = ()

    frame = _send_frame()
    mine = MyFrame(command=frame.command, payload=frame.payload)
    assert mine.encode() == frame.encode()
    back = MyFrame.decode(frame.encode())
    assert type(back) is MyFrame and back == mine


@pytest.mark.parametrize("values", [
    {"partition": 1, "abs_seq_num": 2, "fetch_size": 3},
    {"partition": 2**16, "abs_seq_num": 0, "fetch_size": 0},
    {"partition": -1, "abs_seq_num": 0, "fetch_size": 0},
    {"partition": 0, "abs_seq_num": 2**64, "fetch_size": 0},
    {"partition": True, "abs_seq_num": 2**64 - 1, "fetch_size": 2**32 - 1},
    {"partition": 1.0, "abs_seq_num": 0, "fetch_size": 0},
    {"partition": "1", "abs_seq_num": 0, "fetch_size": 0},
])
def test_integer_fields_match_including_out_of_range(values: dict[str, Any]) -> None:
    item = tank_frames.ConsumePartition(**values)
    kind, _ = _same(item.encode)
    if kind == "value":
        raw = item.encode()
        assert _same(lambda: tank_frames.ConsumePartition.decode(raw))[0] == "value"


@settings(max_examples=scaled(100), deadline=None)
@given(partition=st.integers(0, 2**16 - 1), seq=st.integers(0, 2**64 - 1),
       size=st.integers(0, 2**32 - 1), junk=st.binary(max_size=20))
def test_little_endian_integers_round_trip(partition: int, seq: int, size: int,
                                           junk: bytes) -> None:
    item = tank_frames.ConsumePartition(partition=partition, abs_seq_num=seq, fetch_size=size)
    raw = item.encode()
    assert raw == partition.to_bytes(2, "little") + seq.to_bytes(8, "little") \
        + size.to_bytes(4, "little")
    _same(item.encode)
    _same(lambda: tank_frames.ConsumePartition.decode(raw))
    _same(lambda: tank_frames.ConsumePartition.decode(junk))
    _same(lambda: tank_frames.ConsumePartition.decode_from(raw + junk, 0, len(raw) + len(junk)))


# --- resources ----------------------------------------------------------------------------------


@pytest.mark.slow  # a leak check: many rounds, counted
def test_no_reference_or_memory_leaks() -> None:
    raw = CORPUS[0]
    frame = Frame.decode(raw)
    bad = bytearray(raw)
    bad[-1] ^= 0xFF  # a checksum failure: the give-up path
    broken = bytes(bad)
    for _ in range(200):
        frame.encode()
        Frame.decode(raw)
    gc.collect()
    before = sys.getrefcount(raw), sys.getrefcount(frame.command), sys.getallocatedblocks()
    for _ in range(2000):
        frame.encode()
        Frame.decode(raw)
        Frame.decode_from(raw, 0, len(raw))
        with pytest.raises(ChecksumFailure):
            Frame.decode(broken)
    gc.collect()
    after = sys.getrefcount(raw), sys.getrefcount(frame.command), sys.getallocatedblocks()
    assert after[:2] == before[:2]
    assert after[2] - before[2] < 200  # a leak of one block per call would show 2,000+


# --- constructors -------------------------------------------------------------------------------


def _slots(obj: object) -> list[tuple[str, Any]]:
    names: tuple[str, ...] = getattr(type(obj), "__slots__")  # noqa: B009 - typed as object
    return [(name, getattr(obj, name, "<unset>")) for name in names]


def test_frame_structs_get_compiled_constructors(tmp_path: Path) -> None:
    for cls in (Frame, Payload, BrokerEntry, BatchEntry, Batch, tank_frames.ConsumePartition,
                tubemq_frames.Frame):
        assert compiled.has_compiled_constructor(cls)
    assert not compiled.has_compiled_constructor(python_only_struct(tmp_path))  # Python's
    with compiled.pure_python():
        assert not compiled.has_compiled_constructor(Frame)
    assert compiled.has_compiled_constructor(Frame)


_CMD = pb.BaseCommand(type_=pb.BaseCommand.Type.PING, ping=pb.CommandPing())
_MD = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2)
_CALLS: list[tuple[type, tuple[Any, ...], dict[str, Any]]] = [
    (Frame, (), {"command": _CMD}),
    (Frame, (), {"payload": None, "command": _CMD}),
    (Frame, (), {"command": _CMD, "payload": "anything"}),
    (Frame, (), {}),
    (Frame, (_CMD,), {}),
    (Frame, (), {"command": _CMD, "size": 3}),
    (Payload, (), {"metadata": _MD, "data": b"x"}),
    (Payload, (), {"data": b"x", "metadata": _MD, "broker_entry": None}),
    (Payload, (), {"metadata": _MD}),
    (BrokerEntry, (), {"metadata": pb.BrokerEntryMetadata()}),
    (tank_frames.ConsumePartition, (), {"partition": 1, "abs_seq_num": 2, "fetch_size": 3}),
    (tank_frames.ConsumePartition, (), {"fetch_size": 3, "partition": 1, "abs_seq_num": -1}),
    (tank_frames.ConsumePartition, (), {"partition": 1, "abs_seq_num": 2}),
]


def test_an_unchanged_frame_struct_is_looked_over_once() -> None:
    """As for messages: the class is checked again only after its version tag changed. On a
    Payload class of its own, as the version tags of a class are limited (see
    tests/runtime/test_compiled_constructors.py)."""
    fresh = _fresh_frames()
    codec = compiled._constructors[fresh.Payload]
    fresh.Payload(metadata=_MD, data=b"")
    version = codec.constructor_version
    assert version != 0
    fresh.Payload(metadata=_MD, data=b"")
    assert codec.constructor_version == version
    fresh.Payload.probe = 1
    fresh.Payload(metadata=_MD, data=b"")
    assert codec.constructor_version not in (0, version)


def _fresh_frames() -> ModuleType:
    """Another copy of the generated Pulsar frames module, with classes of its own."""
    name = f"{frames_module.__package__}._fresh_frames"
    spec = importlib.util.spec_from_file_location(name, frames_module.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


@pytest.mark.parametrize(("cls", "args", "kwargs"), _CALLS)
def test_constructor_matches_the_dataclass_init(cls: type, args: tuple[Any, ...],
                                                kwargs: dict[str, Any]) -> None:
    fast, python = _both(lambda: _slots(cls(*args, **kwargs)))
    assert fast == python
    if fast[0] == "value":
        obj = cls(*args, **kwargs)
        for name, value in kwargs.items():
            assert getattr(obj, name) is value  # stored as given, not copied


def test_constructor_keywords_need_not_be_interned() -> None:
    name = "".join(["com", "mand"])
    kwargs: dict[str, Any] = {name: _CMD}
    assert _slots(Frame(**kwargs)) == _slots(Frame(command=_CMD))


def test_constructor_follows_class_changes_and_skips_subclasses() -> None:
    class Mine(Frame):
        __slots__ = ("extra",)

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.extra = 1

    assert Mine(command=_CMD).extra == 1
    original = Frame.__init__
    seen: list[str] = []

    def spy(self: Frame, **kwargs: Any) -> None:
        seen.append("init")
        original(self, **kwargs)

    Frame.__init__ = spy  # type: ignore[method-assign]
    try:
        Frame(command=_CMD)
    finally:
        Frame.__init__ = original  # type: ignore[method-assign]
    assert seen == ["init"]
    Frame(command=_CMD)
    assert seen == ["init"]  # back on the compiled constructor


def test_the_codec_takes_as_many_rows_as_the_generator_allows() -> None:
    """The generator compiles a struct of up to ``vocabulary.FRAME_MAX_ROWS`` fields; the C
    codec, built from the same number, takes that many rows and refuses one more."""
    from dataclasses import make_dataclass

    from protoframe.runtime.codec import _framecodec, vocabulary

    def codec(fields: int) -> object:
        names = [f"field_{i}" for i in range(fields)]
        cls = make_dataclass("Wide", [(name, int) for name in names], slots=True)
        rows = compiled_frames._c_rows(tuple(("int", name, "u8", None, None) for name in names),
                                       {})
        return _framecodec.FrameCodec(cls, rows, True, lambda value: b"",
                                      lambda cls, data: None, lambda cls, buf, pos, end: None)

    limit = vocabulary.FRAME_MAX_ROWS
    assert codec(limit) is not None
    with pytest.raises(ValueError, match=f"at most {limit} rows"):
        codec(limit + 1)


def test_frame_codec_finds_the_protobuf_codec_on_its_own() -> None:
    """Without the protobuf codec's C API a frame's protobuf parts go through their classes'
    methods: still right, but slower. Its capsule is named by the full module path, so it is
    found however the package is installed, even when _framecodec is imported first."""
    pytest.importorskip("protoframe.runtime.codec._framecodec")
    code = ("from protoframe.runtime.codec import _framecodec; "
            "print(_framecodec.HAS_WIRE_API)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "1"


def _tank_call_sites() -> list[list[tuple[str, Any]]]:
    """Each literal call site passes one constant tuple of keyword names, which the compiled
    constructor keeps after a first match: every site runs twice, and the sites of one class
    take turns, so each one's names are matched again after another's."""
    tf = tank_frames
    one = 1  # the same object for two fields
    out = []
    for _ in range(2):
        out.append(_slots(tf.Message(flags=one, timestamp=5, key=b"k", content=b"c")))
        out.append(_slots(tf.Message(content=b"c", flags=one)))
        out.append(_slots(tf.Message(flags=4, seq_delta=one, timestamp=one, content=b"")))
        out.append(_slots(tf.Bundle(codec=one, sparse=False, msg_count=one)))
        out.append(_slots(tf.Bundle(msg_count=one, codec=0, sparse=True, first_seqnum=7,
                                    compressed=b"z")))
        out.append(_slots(tf.ConsumePartition(partition=one, abs_seq_num=one, fetch_size=one)))
    return out


def test_a_call_sites_keyword_names_are_matched_once() -> None:
    fast, python = _both(_tank_call_sites)
    assert fast == python
    assert fast[0] == "value"


def test_kept_keyword_names_stay_right_after_a_class_change() -> None:
    fresh = _fresh_frames()

    def build() -> list[list[tuple[str, Any]]]:
        return [_slots(fresh.Payload(metadata=_MD, data=b"x")) for _ in range(3)]

    first = build()
    fresh.Payload.probe = 1  # a new version tag: the class is looked over again
    assert build() == first
    with pytest.raises(TypeError):
        for _ in range(2):
            fresh.Payload(metadata=_MD, data=b"x", nope=1)
    assert build() == first


@pytest.mark.parametrize("acks", [256, -1, 1 << 70])
def test_an_out_of_range_u8_is_value_out_of_range_on_both_codecs(acks: int) -> None:
    def encode() -> bytes:
        return tank_frames.ProduceRequest(client_version=2, request_id=1, client_id="c",
                                          required_acks=acks, ack_timeout=1,
                                          topics=[]).encode()

    fast = _same(encode)
    assert fast[0] == "raised" and fast[1][0] is ValueOutOfRangeError
