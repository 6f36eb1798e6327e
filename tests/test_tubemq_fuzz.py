"""Fuzzing the TubeMQ stream decoder and command naming with damaged frames.

A seeded mutator damages valid frames of every command (bit flips, inserted and deleted
bytes, truncation, corrupted block counts and lengths, splices, varints with continuation
bits set) and feeds them to ``StreamDecoder`` in random chunks; every decoded frame then goes
through ``command_of``, which reads the method inside the content and decodes the serialized
body. For every case:

* the only exceptions are ``runtime.errors.DecodeError`` subclasses;
* after a successful ``feed`` at most ``max_frame_size`` bytes are buffered, and an oversize
  header stops the stream with nothing buffered;
* a failed ``feed`` skips the bad frame, so draining with ``feed(b"")`` makes progress, and no
  case takes longer than ``CASE_LIMIT``. The exception is a wrong begin token: without it the
  frame's length is unknown, so nothing can be skipped and every later ``feed`` raises
  ``BadMagicError`` again at once (a connection closes at the first one);
* a frame that decodes re-encodes to bytes that decode to the same command and body.

A failure names the case number and its input in hex; the run is reproducible (fixed seed).
"""

from __future__ import annotations

import contextlib
import random
import struct
import time
from typing import Any

from generated.tubemq.frames import Frame, StreamDecoder
from generated.tubemq.machines import command_of
from runtime.errors import BadMagicError, DecodeError, FrameTooLargeError
from tests.test_tubemq_commands import COMMANDS, filled

SEED = 0x7B3E_F00D
CASES = 20_000
TIME_BUDGET = 8.0  # seconds; the case count is reached well within it on a slow machine
CASE_LIMIT = 1.0
MAX_FRAME = 64 * 1024
U32 = struct.Struct(">I")
_INTERESTING_U32 = [0, 1, 2, 3, 4, 7, 8, 0x7F, 0x80, 0xFF, 8191, 8192, 8193, 3584, 3585,
                    0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]


def build_corpus() -> list[bytes]:
    rng = random.Random(SEED)
    corpus = []
    for _, build, cls in COMMANDS:
        for rate in (0.0, 0.7):
            corpus.append(build(filled(cls, rng, rate), serial_no=rng.randrange(2**32)).encode())
    # Content over several blocks, and one frame just over the decoder's limit.
    big = [b for b in COMMANDS if b[0] == "SEND_MESSAGE_P2B"][0]
    body = filled(big[2], rng, 0.0)
    body.data = bytes(20_000)
    corpus.append(big[1](body, serial_no=1).encode())
    body.data = bytes(MAX_FRAME)
    corpus.append(big[1](body, serial_no=2).encode())
    corpus.append(b"".join(rng.sample(corpus[:40], 4)))
    return corpus


CORPUS = build_corpus()


def _header_offsets(data: bytes) -> list[int]:
    """Where the block count and the block lengths of a well-formed frame sit."""
    offsets = [8]
    if len(data) >= 12:
        pos = 12
        for _ in range(min(U32.unpack_from(data, 8)[0], 8)):
            if pos + 4 > len(data):
                break
            offsets.append(pos)
            pos += 4 + U32.unpack_from(data, pos)[0]
    return [o for o in offsets if o + 4 <= len(data)]


def mutate(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        op = rng.randrange(9)
        n = len(out)
        if op == 0 and n:
            out[rng.randrange(n)] ^= 1 << rng.randrange(8)
        elif op == 1 and n:
            out[rng.randrange(n)] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        elif op == 2:
            at = rng.randint(0, n)
            out[at:at] = rng.randbytes(rng.choice((1, 2, 4, 16)))
        elif op == 3 and n:
            at = rng.randrange(n)
            del out[at:at + rng.choice((1, 2, 4, 16))]
        elif op == 4:
            del out[rng.randint(0, n):]
        elif op == 5:
            offsets = _header_offsets(bytes(out))
            if offsets:
                at = rng.choice(offsets)
                old = U32.unpack_from(out, at)[0]
                U32.pack_into(out, at, rng.choice(
                    _INTERESTING_U32 + [(old + rng.randint(-4, 4)) & 0xFFFFFFFF]))
        elif op == 6:
            other = rng.choice(CORPUS)
            a, b = rng.randint(0, n), rng.randint(0, len(other))
            out = out[:a] + other[b:]
        elif op == 7:
            out += rng.choice(CORPUS) if rng.random() < 0.7 else rng.randbytes(rng.randint(1, 9))
        elif op == 8 and n:
            at = rng.randrange(n)
            for i in range(at, min(n, at + rng.randint(1, 11))):
                out[i] |= 0x80
    if rng.random() < 0.5:
        _fix_block(out)
    return bytes(out)


def _fix_block(out: bytearray) -> None:
    """Make a one-block frame's block length agree with the damaged bytes again, so that the
    damage reaches the content and body decoders instead of the framing checks."""
    if len(out) >= 16 and U32.unpack_from(out, 8)[0] == 1:
        U32.pack_into(out, 12, min(len(out) - 16, 8192))


def chunks(data: bytes, rng: random.Random) -> list[bytes]:
    mode = rng.randrange(4)
    if mode == 0 or not data:
        return [data]
    if mode == 1 and len(data) <= 256:
        return [data[i:i + 1] for i in range(len(data))]
    cuts = sorted(rng.randint(0, len(data)) for _ in range(rng.randint(1, 6)))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


class Failure(Exception):
    pass


def check_frame(frame: Any) -> None:
    assert isinstance(frame, Frame)
    try:
        name, body = command_of(frame)
    except DecodeError:
        return
    again = Frame.decode(frame.encode())
    if command_of(again) != (name, body):
        raise Failure(f"re-encoding changed {name}: {body!r}")


def run_case(data: bytes, rng: random.Random) -> None:
    decoder = StreamDecoder(max_frame_size=MAX_FRAME)
    for chunk in chunks(data, rng):
        try:
            frames = decoder.feed(chunk)
        except FrameTooLargeError as exc:
            if decoder.buffered:
                raise Failure(f"oversize frame left {decoder.buffered} bytes") from exc
            for frame in exc.frames_before:
                check_frame(frame)
            return
        except DecodeError as exc:
            for frame in exc.frames_before:
                check_frame(frame)
            if not _drain(decoder):
                return
        else:
            for frame in frames:
                check_frame(frame)
        if decoder.buffered > MAX_FRAME:
            raise Failure(f"{decoder.buffered} bytes buffered, over the {MAX_FRAME} limit")


def _drain(decoder: StreamDecoder) -> bool:
    """Go on after a bad frame: each round must shrink the buffer (else it would hang).
    False when the stream cannot go on."""
    for _ in range(10_000):
        before = decoder.buffered
        try:
            for frame in decoder.feed(b""):
                check_frame(frame)
            return True
        except FrameTooLargeError:
            return False
        except DecodeError as exc:
            for earlier in exc.frames_before:
                check_frame(earlier)
            if decoder.buffered >= before:
                if isinstance(exc, BadMagicError):
                    with contextlib.suppress(BadMagicError):
                        decoder.feed(b"")
                        raise Failure("a bad token was accepted on the second try") from exc
                    return False  # no length to skip by: the stream is over (see docstring)
                raise Failure("a failed frame was not skipped") from exc
    raise Failure("draining did not finish")


def test_corpus_decodes() -> None:
    for data in CORPUS[:-2]:
        if len(data) <= MAX_FRAME:
            frames = StreamDecoder(max_frame_size=MAX_FRAME).feed(data)
            assert frames
            for frame in frames:
                check_frame(frame)


def test_mutated_frames_raise_only_decode_errors() -> None:
    rng = random.Random(SEED)
    started = time.perf_counter()
    done = 0
    for case in range(CASES):
        data = mutate(rng.choice(CORPUS), rng)
        t0 = time.perf_counter()
        try:
            run_case(data, random.Random(case))
        except Failure as exc:
            raise AssertionError(f"case {case}: {exc}; input {data.hex()}") from exc
        except Exception as exc:
            raise AssertionError(f"case {case}: {type(exc).__name__}: {exc}; "
                                 f"input {data.hex()}") from exc
        if time.perf_counter() - t0 > CASE_LIMIT:
            raise AssertionError(f"case {case} took over {CASE_LIMIT} s; input {data.hex()}")
        done += 1
        if time.perf_counter() - started > TIME_BUDGET:
            break
    assert done >= CASES // 4, f"only {done} cases ran within {TIME_BUDGET} s"


def test_random_bytes_behind_a_valid_header() -> None:
    rng = random.Random(SEED + 1)
    for case in range(2000):
        n = rng.randint(0, 64)
        data = struct.pack(">III", 0xFF7FF4FE, case, 1) + struct.pack(">I", n) + rng.randbytes(n)
        try:
            run_case(data, rng)
        except Failure as exc:
            raise AssertionError(f"case {case}: {exc}; input {data.hex()}") from exc
