"""Fuzzing the TubeMQ stream decoder and command naming with damaged frames.

A seeded mutator damages valid frames of every command (bit flips, inserted and deleted
bytes, truncation, corrupted block counts and lengths, splices, varints with continuation
bits set) and feeds them to ``StreamDecoder`` in random chunks; every decoded frame then goes
through ``command_of``, which reads the method inside the content and decodes the serialized
body. For every case:

* the properties listed in ``fuzzing.py``: only ``runtime.errors.DecodeError`` subclasses
  escape; the buffer stays under ``max_frame_size``; a failed ``feed`` skips the bad frame, so
  draining with ``feed(b"")`` makes progress; no case takes longer than ``CASE_LIMIT``; a bad
  header stops the stream. A wrong begin token is one: without it the frame's length is
  unknown, so nothing can be skipped (a connection closes at the first ``BadMagicError``);
* a frame that decodes re-encodes to bytes that decode to the same command and body.

A failure names the case number and its input in hex; the run is reproducible (fixed seed).
"""

from __future__ import annotations

import random
import struct

import pytest

from protoframe.generated.tubemq.frames import Frame, StreamDecoder
from protoframe.generated.tubemq.machines import command_of
from protoframe.runtime.errors import DecodeError
from tests.generated.fuzzing import Case, Failure, Mutator, StreamTarget, run_campaign, u32_field_op
from tests.support.tubemq_commands import COMMANDS, filled

pytestmark = pytest.mark.slow  # a seeded fuzzing campaign of thousands of cases

SEED = 0x7B3E_F00D
CASES = 20_000
TIME_BUDGET = 8.0  # seconds for cases beyond the CASES // 4 that always run
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


def _fix_block(out: bytearray) -> None:
    """Make a one-block frame's block length agree with the damaged bytes again, so that the
    damage reaches the content and body decoders instead of the framing checks."""
    if len(out) >= 16 and U32.unpack_from(out, 8)[0] == 1:
        U32.pack_into(out, 12, min(len(out) - 16, 8192))


mutate = Mutator(CORPUS, protocol_ops=(
    u32_field_op(U32, _INTERESTING_U32, _header_offsets, jitter=4),), fix_up=_fix_block)


def check_frame(frame: Frame) -> None:
    """A frame whose command decodes re-encodes to bytes with the same command and body."""
    try:
        name, body = command_of(frame)
    except DecodeError:
        return
    again = Frame.decode(frame.encode())
    if command_of(again) != (name, body):
        raise Failure(f"re-encoding changed {name}: {body!r}")


# The shortest frame is its token, serial number and block count.
TUBEMQ = StreamTarget(StreamDecoder, Frame, check_frame, header_size=12, valid_frame=CORPUS[0],
                      max_frame=MAX_FRAME)
run_case = TUBEMQ.run_case


def test_corpus_decodes() -> None:
    TUBEMQ.check_corpus(CORPUS)


def test_mutated_frames_raise_only_decode_errors() -> None:
    run_campaign(lambda rng, _: Case(mutate(rng.choice(CORPUS), rng), run_case), seed=SEED,
                 target=CASES, minimum=CASES // 4, budget=TIME_BUDGET, case_limit=CASE_LIMIT,
                 name="tubemq")


def test_random_bytes_behind_a_valid_header() -> None:
    rng = random.Random(SEED + 1)
    for case in range(2000):
        n = rng.randint(0, 64)
        data = struct.pack(">III", 0xFF7FF4FE, case, 1) + struct.pack(">I", n) + rng.randbytes(n)
        try:
            run_case(data, rng)
        except Failure as exc:
            raise AssertionError(f"case {case}: {exc}; input {data.hex()}") from exc
