"""Fuzzing the Pulsar stream decoder: hostile bytes raise DecodeError subclasses and nothing else.

A seeded mutator damages a corpus of valid frames (bit flips, byte inserts and deletes,
truncations, corrupted size fields, splices) and feeds the results to ``StreamDecoder`` in
random chunks. Every case checks the properties listed in ``fuzzing.py`` (only
``DecodeError`` subclasses escape, never ``IndexError``, ``struct.error``,
``UnicodeDecodeError``, ``KeyError``, ``AttributeError``...; the buffer stays under
``max_frame_size``; a bad frame is skipped and draining makes progress; a bad header stops
the stream; each case finishes quickly), and here, for every frame that does decode: it
re-encodes to a frame that decodes to the same value, and its payload either decompresses
or raises a ``DecodeError``.

Runs are reproducible: each failure is reported with the case number and the input in hex.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protoframe.generated.pulsar.frames import Batch, Frame, StreamDecoder
from protoframe.generated.pulsar.pulsar_api import BaseCommand, CommandSend
from protoframe.runtime.codec.checksums import crc32c
from protoframe.runtime.errors import DecodeError
from tests.generated.fuzzing import Case, Failure, StreamTarget, run_campaign
from tests.generated.pulsar.corpus import CORPUS, MAX_FRAME, SEED, U32, mutate

pytestmark = pytest.mark.slow  # a seeded fuzzing campaign of thousands of cases

TARGET_CASES = 200_000
MIN_CASES = 20_000  # always run, whatever the machine's load; more while the budget lasts
TIME_BUDGET = 55.0  # seconds for the mutation run; the whole file stays under ~75 s
CASE_LIMIT = 2.0  # seconds of CPU one case may take before it counts as a runaway
Type = BaseCommand.Type


def check_frame(frame: Frame) -> None:
    """A decoded frame re-encodes consistently; its payload decompresses or fails cleanly."""
    # Compared as bytes: a mutated double field may hold NaN, which is not equal to itself.
    wire = frame.encode()
    again = Frame.decode(wire).encode()
    if again != wire:
        raise Failure(f"re-encoding changed the frame: {frame!r}: {wire.hex()} -> {again.hex()}")
    if frame.payload is not None:
        try:
            Batch.decode(frame.payload.decompressed_data(max_size=1 << 20))
        except DecodeError:
            pass


PULSAR = StreamTarget(StreamDecoder, Frame, check_frame, header_size=4, valid_frame=CORPUS[0],
                      max_frame=MAX_FRAME)
run_case = PULSAR.run_case


# --- tests -----------------------------------------------------------------------------------


def test_corpus_is_valid() -> None:
    assert len(CORPUS) > 150
    PULSAR.check_corpus(CORPUS)
    assert len(max(CORPUS, key=len)) > MAX_FRAME


def test_mutated_frames_raise_only_decode_errors() -> None:
    run_campaign(lambda rng, _: Case(mutate(rng.choice(CORPUS), rng), run_case), seed=SEED,
                 target=TARGET_CASES, minimum=MIN_CASES, budget=TIME_BUDGET,
                 case_limit=CASE_LIMIT, name="pulsar")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=300), seed=st.integers(0, 2**32 - 1))
def test_arbitrary_bytes_raise_only_decode_errors(data: bytes, seed: int) -> None:
    run_case(data, random.Random(seed))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.binary(max_size=300), command_size=st.integers(0, 310),
       seed=st.integers(0, 2**32 - 1))
def test_arbitrary_frame_bodies_raise_only_decode_errors(
    body: bytes, command_size: int, seed: int
) -> None:
    """Random bytes behind consistent headers reach the command and payload decoders."""
    data = U32.pack(4 + len(body)) + U32.pack(command_size) + body
    run_case(data, random.Random(seed))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(command=st.binary(max_size=120), metadata=st.binary(max_size=120),
       data=st.binary(max_size=60), seed=st.integers(0, 2**32 - 1))
def test_arbitrary_payload_metadata_raise_only_decode_errors(
    command: bytes, metadata: bytes, data: bytes, seed: int
) -> None:
    """A valid SEND command and a payload whose metadata is random bytes (with a good CRC)."""
    if seed % 2:
        command = BaseCommand(type_=Type.SEND,
                              send=CommandSend(producer_id=1, sequence_id=2)).encode()
    covered = U32.pack(len(metadata)) + metadata + data
    payload = b"\x0e\x01" + U32.pack(crc32c(covered)) + covered
    frame = U32.pack(8 + len(command) + len(payload) - 4) + U32.pack(len(command)) + command
    run_case(frame + payload, random.Random(seed))


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=400))
def test_arbitrary_batches_raise_only_decode_errors(data: bytes) -> None:
    try:
        batch = Batch.decode(data)
    except DecodeError:
        return
    assert Batch.decode(batch.encode()) == batch


def test_small_limits_are_enforced() -> None:
    """The bound holds for any limit, including limits smaller than a frame header."""
    rng = random.Random(SEED + 1)
    for limit in (1, 3, 4, 5, 8, 64, 1000):
        for _ in range(300):
            run_case(mutate(rng.choice(CORPUS[:60]), rng), rng, max_frame=limit)
