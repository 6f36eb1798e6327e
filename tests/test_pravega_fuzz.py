"""Fuzzing the Pravega stream decoder: hostile bytes raise DecodeError subclasses and nothing else.

A seeded mutator damages a corpus of valid commands (one of every command in the spec, with
random field values, plus hand-built vectors) and feeds the result to ``StreamDecoder`` in
random chunks. For every case: only ``runtime.errors.DecodeError`` subclasses escape; after a
successful ``feed`` at most ``max_frame_size`` bytes stay buffered and an oversize header
stops the stream with nothing buffered; a failed ``feed`` skips the bad frame, so draining
with ``feed(b"")`` always makes progress; every frame that decodes re-encodes to bytes that
decode to the same frame. Bounded by a case count and a time budget.
"""

from __future__ import annotations

import random
import struct
import time
from pathlib import Path
from typing import Any
from uuid import UUID

from generated.pravega import frames as pv
from generated.pravega.frames import Frame, StreamDecoder
from generator.frame_ir import FrameField, StructDef
from generator.frame_model import load_frame_spec
from generator.proto_model import load_protocol
from runtime.errors import DecodeError

ROOT = Path(__file__).resolve().parent.parent
SEED = 0x9A7E6A
MAX_FRAME = 4096
TARGET_CASES = 20_000
TIME_BUDGET = 8.0
CASE_LIMIT = 1.0  # seconds a single case may take before it counts as a hang
I32 = struct.Struct(">i")

SPEC = load_frame_spec(ROOT / "specs/pravega/pravega.yaml", "specs/pravega/pravega.yaml",
                       load_protocol(ROOT / "specs", "pravega", "specs"))
COMMANDS = [c.case.structs[0] for c in SPEC.commands.values() if c.case is not None]


def _value(f: FrameField, rng: random.Random) -> Any:
    if f.kind == "int":
        bits = f.width * 8
        low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if f.signed else \
            (0, (1 << bits) - 1)
        return rng.choice([low, high, 0, 1, -1 if f.signed else 2, rng.randint(low, high)])
    if f.kind == "bool":
        return rng.random() < 0.5
    if f.kind == "uuid":
        return UUID(int=rng.getrandbits(128))
    if f.kind == "string":
        return rng.choice(["", "s", "scope/stream/0.#epoch.0", "a\x00b\u00e9\U0001f600"])
    if f.kind == "bytes":
        return rng.randbytes(rng.choice([0, 1, 8, 40]))
    if f.kind == "struct":
        assert f.struct is not None
        return _build(f.struct, rng)
    assert f.element is not None, f.kind
    return [_value(f.element, rng) for _ in range(rng.randint(0, 3))]


def _build(s: StructDef, rng: random.Random) -> Any:
    return getattr(pv, s.name)(**{f.name: _value(f, rng) for f in s.data_fields})


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


def mutate(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 3, 5))):
        n = len(out)
        op = rng.randrange(9)
        if op == 0 and n:  # bit flip
            out[rng.randrange(n)] ^= 1 << rng.randrange(8)
        elif op == 1 and n:  # byte set
            out[rng.randrange(n)] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        elif op == 2:  # insert
            at = rng.randint(0, n)
            out[at:at] = rng.randbytes(rng.choice((1, 2, 4, 8)))
        elif op == 3 and n:  # delete
            at = rng.randrange(n)
            del out[at:at + rng.choice((1, 2, 4, 8))]
        elif op == 4:  # truncate
            del out[rng.randint(0, n):]
        elif op == 5 and n >= 4:  # an i32 anywhere (type codes, lengths, string sizes)
            at = rng.randrange(0, n - 3)
            I32.pack_into(out, at, rng.choice(_INTERESTING))
        elif op == 6:  # splice another corpus frame
            other = rng.choice(CORPUS)
            a, b = rng.randint(0, n), rng.randint(0, len(other))
            out = out[:a] + other[b:]
        elif op == 7:  # append a frame or junk
            out += rng.choice(CORPUS) if rng.random() < 0.7 else rng.randbytes(rng.randint(1, 9))
        elif op == 8 and n >= 8:  # a type code from the spec, so the body decoders are reached
            I32.pack_into(out, 0, rng.choice([c.value for c in SPEC.commands.values()]))
    if rng.random() < 0.5 and len(out) >= 8:  # a consistent length reaches the body decoder
        I32.pack_into(out, 4, len(out) - 8)
    return bytes(out)


def chunks(data: bytes, rng: random.Random) -> list[bytes]:
    mode = rng.randrange(3)
    if mode == 0 or not data:
        return [data]
    if mode == 1 and len(data) <= 256:
        return [data[i:i + 1] for i in range(len(data))]
    cuts = sorted(rng.randint(0, len(data)) for _ in range(rng.randint(1, 5)))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


class Failure(Exception):
    pass


def check_frame(frame: object) -> None:
    assert isinstance(frame, Frame)
    wire = frame.encode()
    if Frame.decode(wire) != frame:
        raise Failure(f"re-encoding changed {frame!r}")


def run_case(data: bytes, rng: random.Random, max_frame: int = MAX_FRAME) -> None:
    decoder = StreamDecoder(max_frame_size=max_frame)
    for chunk in chunks(data, rng):
        before = decoder.buffered + len(chunk)
        try:
            received = decoder.feed(chunk)
        except DecodeError as exc:
            for frame in exc.frames_before:
                check_frame(frame)
            if _drain(decoder, before):
                return
        else:
            for frame in received:
                check_frame(frame)
        if decoder.buffered > max_frame:
            raise Failure(f"{decoder.buffered} bytes buffered, over the {max_frame} limit")


def _drain(decoder: StreamDecoder, before: int) -> bool:
    """After a failed feed, feed(b"") until it succeeds; True if the stream stopped."""
    while True:
        if _stopped(decoder):
            return True
        if decoder.buffered > before - 8:  # a bad frame's 8-byte header, at least, is skipped
            raise Failure(f"no progress: {before} -> {decoder.buffered} bytes")
        before = decoder.buffered
        try:
            received = decoder.feed(b"")
        except DecodeError as exc:
            for frame in exc.frames_before:
                check_frame(frame)
            continue
        for frame in received:
            check_frame(frame)
        return False


def _stopped(decoder: StreamDecoder) -> bool:
    """Has a bad header (oversize, negative length) stopped the stream?

    ``runtime.stream.FrameStream`` then drops what it holds and refuses every later feed
    with a ``DecodeError``: check both, with a valid frame as the later input.
    """
    if decoder._broken is None:
        return False
    if decoder.buffered:
        raise Failure(f"a stopped stream kept {decoder.buffered} bytes")
    try:
        decoder.feed(CORPUS[0])
    except DecodeError:
        return True
    raise Failure("a stopped stream accepted more input")


def test_corpus_is_valid() -> None:
    assert len(CORPUS) > 100
    for data in CORPUS:
        decoder = StreamDecoder(max_frame_size=1 << 20)
        received = decoder.feed(data)
        assert received and decoder.buffered == 0
        for frame in received:
            check_frame(frame)
    assert max(len(d) for d in CORPUS) > MAX_FRAME


def test_mutated_frames_raise_only_decode_errors() -> None:
    rng = random.Random(SEED)
    started = time.perf_counter()
    failures: list[str] = []
    slowest = 0.0
    ran = 0
    while ran < TARGET_CASES and time.perf_counter() - started < TIME_BUDGET:
        data = mutate(rng.choice(CORPUS), rng)
        t0 = time.perf_counter()
        try:
            run_case(data, random.Random(ran))
        except Failure as exc:
            failures.append(f"case {ran}: {exc}: {data.hex()}")
        except DecodeError as exc:
            failures.append(f"case {ran}: escaped the drain: {exc!r}: {data.hex()}")
        except Exception as exc:  # anything else escaping the decoder is the bug
            failures.append(f"case {ran}: {type(exc).__name__}: {exc}: {data.hex()}")
        slowest = max(slowest, time.perf_counter() - t0)
        ran += 1
        if len(failures) >= 5:
            break
    assert failures == []
    assert ran >= TARGET_CASES, f"only {ran} cases in {time.perf_counter() - started:.1f} s"
    assert slowest < CASE_LIMIT


def test_random_bytes_and_small_limits() -> None:
    rng = random.Random(SEED + 1)
    for _ in range(2000):
        run_case(rng.randbytes(rng.randint(0, 64)), rng)
    for limit in (1, 7, 8, 9, 16, 100):
        for _ in range(200):
            run_case(mutate(rng.choice(CORPUS[:80]), rng), rng, max_frame=limit)
