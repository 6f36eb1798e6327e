"""Fuzzing the Pravega stream decoder: hostile bytes raise DecodeError subclasses and nothing else.

A seeded mutator damages a corpus of valid commands (one of every command in the spec, with
random field values, plus hand-built vectors) and feeds the result to ``StreamDecoder`` in
random chunks. Every case checks the properties listed in ``fuzzing.py`` (only
``runtime.errors.DecodeError`` subclasses escape; the buffer stays under ``max_frame_size``;
a bad frame is skipped and draining makes progress; a bad header, such as a negative length,
stops the stream), and that every frame that decodes re-encodes to bytes that decode to the
same frame. Bounded by a case count and a time budget.
"""

from __future__ import annotations

import dataclasses
import random
import struct
from typing import Any
from uuid import UUID

import pytest

from protoframe.generated.pravega import frames as pv
from protoframe.generated.pravega.frames import Frame, StreamDecoder
from protoframe.generator.frame_ir import (
    ArrayField,
    BoolField,
    BytesField,
    FrameField,
    IntField,
    StringField,
    StructDef,
    StructField,
    UuidField,
)
from protoframe.generator.frame_model import load_frame_spec
from protoframe.generator.proto_model import load_protocol
from protoframe.runtime.errors import EncodeError
from tests.generated.fuzzing import Case, Failure, Mutator, StreamTarget, run_campaign, u32_field_op
from tests.support.paths import ROOT

pytestmark = pytest.mark.slow  # a seeded fuzzing campaign of thousands of cases

SEED = 0x9A7E6A
MAX_FRAME = 4096
TARGET_CASES = 20_000
MIN_CASES = 3_000  # always run, whatever the machine's load; more while the budget lasts
TIME_BUDGET = 8.0
CASE_LIMIT = 1.0  # seconds of CPU a single case may take before it counts as a runaway
I32 = struct.Struct(">i")
U32 = struct.Struct(">I")

SPEC = load_frame_spec(ROOT / "specs/pravega/pravega.yaml", "specs/pravega/pravega.yaml",
                       load_protocol(ROOT / "specs", "pravega", "specs"))
COMMANDS = [c.case.structs[0] for c in SPEC.commands.values() if c.case is not None]


def _value(f: FrameField, rng: random.Random) -> Any:
    if isinstance(f, IntField):
        bits = f.width * 8
        low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if f.signed else \
            (0, (1 << bits) - 1)
        return rng.choice([low, high, 0, 1, -1 if f.signed else 2, rng.randint(low, high)])
    if isinstance(f, BoolField):
        return rng.random() < 0.5
    if isinstance(f, UuidField):
        return UUID(int=rng.getrandbits(128))
    if isinstance(f, StringField):
        return rng.choice(["", "s", "scope/stream/0.#epoch.0", "a\x00b\u00e9\U0001f600"])
    if isinstance(f, BytesField):
        return rng.randbytes(rng.choice([0, 1, 8, 40]))
    if isinstance(f, StructField):
        assert f.struct is not None
        return _build(f.struct, rng)
    assert isinstance(f, ArrayField) and f.element is not None, f.kind
    return [_value(f.element, rng) for _ in range(rng.randint(0, 3))]


def _build(s: StructDef, rng: random.Random) -> Any:
    value = getattr(pv, s.name)(**{f.name: _value(f, rng) for f in s.data_fields})
    conditional = [f.name for f in s.data_fields if f.when is not None]
    if conditional:
        # A field present only under a condition (a table key's version, absent when the
        # key is empty) must be None exactly when its condition fails.
        try:
            value.encode()
        except EncodeError:
            value = dataclasses.replace(value, **dict.fromkeys(conditional))
    return value


def build_corpus() -> list[bytes]:
    rng = random.Random(SEED)
    corpus = [Frame(body=_build(s, rng)).encode() for s in COMMANDS for _ in range(4)]
    # Append data that nests records, as writers send it.
    run = pv.EventRun(events=[pv.Event(data=b"x" * i) for i in range(4)]).encode()
    writer = UUID(int=1)
    corpus.append(Frame(body=pv.AppendBlock(
        writer_id=writer, data=run + pv.PartialEvent(data=b"\0\0\0\0\0\0\0\5ab").encode()))
        .encode())
    corpus.append(Frame(body=pv.AppendBlockEnd(writer_id=writer, size_of_whole_events=len(run),
                                               data=b"cde", num_events=5, last_event_number=5,
                                               request_id=3)).encode())
    corpus.append(Frame(body=pv.SegmentRead(segment="s", offset=0, at_tail=True,
                                            end_of_segment=False, data=bytes(MAX_FRAME - 40),
                                            request_id=1)).encode())
    corpus.append(Frame(body=pv.SegmentRead(segment="s", offset=0, at_tail=True,
                                            end_of_segment=False, data=bytes(MAX_FRAME),
                                            request_id=1)).encode())  # over the limit
    corpus.append(b"".join(rng.sample(corpus[:60], 6)))
    return corpus


CORPUS = build_corpus()
_INTERESTING = [0, 1, 2, 7, 8, 15, 16, 0x7F, 0xFF, 0xFFFF, MAX_FRAME - 8, MAX_FRAME - 7,
                0x00FFFFFF, 0x7FFFFFFF, -1, -2, -127, -(1 << 31)]
_TYPE_CODES = [c.value for c in SPEC.commands.values()]


def _type_code(out: bytearray, rng: random.Random) -> None:
    """A type code from the spec, so that damaged bodies reach their command's decoder."""
    if len(out) >= 8:
        I32.pack_into(out, 0, rng.choice(_TYPE_CODES))


def _fix_length(out: bytearray) -> None:
    """A length that agrees with the damage, so that it reaches the body decoder."""
    if len(out) >= 8:
        I32.pack_into(out, 4, len(out) - 8)


# Type codes, lengths and string sizes are all i32s, so any place may hold one.
mutate = Mutator(CORPUS, protocol_ops=(u32_field_op(U32, _INTERESTING), _type_code),
                 fix_up=_fix_length)


def check_frame(frame: Frame) -> None:
    """A decoded frame re-encodes to bytes that decode to the same frame."""
    if Frame.decode(frame.encode()) != frame:
        raise Failure(f"re-encoding changed {frame!r}")


PRAVEGA = StreamTarget(StreamDecoder, Frame, check_frame, header_size=8, valid_frame=CORPUS[0],
                       max_frame=MAX_FRAME)
run_case = PRAVEGA.run_case


def test_corpus_is_valid() -> None:
    assert len(CORPUS) > 100
    PRAVEGA.check_corpus(CORPUS)
    assert max(len(d) for d in CORPUS) > MAX_FRAME


def test_mutated_frames_raise_only_decode_errors() -> None:
    run_campaign(lambda rng, _: Case(mutate(rng.choice(CORPUS), rng), run_case), seed=SEED,
                 target=TARGET_CASES, minimum=MIN_CASES, budget=TIME_BUDGET,
                 case_limit=CASE_LIMIT, name="pravega")


def test_random_bytes_and_small_limits() -> None:
    rng = random.Random(SEED + 1)
    for _ in range(2000):
        run_case(rng.randbytes(rng.randint(0, 64)), rng)
    for limit in (1, 7, 8, 9, 16, 100):
        for _ in range(200):
            run_case(mutate(rng.choice(CORPUS[:80]), rng), rng, max_frame=limit)
