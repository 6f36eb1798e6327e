"""What the stream-decoder fuzz tests (``tests/generated/<protocol>/test_fuzz.py``) share.

Each protocol's test keeps what only it knows: its corpus of valid frames, its
protocol-aware mutations and header fix-ups, and the oracle ``check_frame`` every decoded
frame goes through. This module holds the rest: the generic byte mutator, splitting input
into reads, feeding a decoder and draining it after errors (``StreamTarget.run_case``), and
the seeded driver loop (``run_campaign``).

The properties ``run_case`` checks, for any input:

* the only exceptions are ``runtime.errors.DecodeError`` subclasses;
* after a successful ``feed`` at most ``max_frame_size`` bytes stay buffered;
* a failed ``feed`` skips the bad frame (at least a header's worth of bytes), so draining with
  ``feed(b"")`` always makes progress and ends;
* a bad frame header (an oversize frame, a length no frame can have, a wrong magic number)
  stops the stream: it keeps nothing and refuses every later ``feed``; an oversize frame
  always does;
* every frame that decodes, in a successful ``feed`` or before a failure, passes
  ``check_frame``.
"""

from __future__ import annotations

import random
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

from protoframe.runtime.codec.stream import FrameStream
from protoframe.runtime.errors import DecodeError, FrameTooLargeError

T = TypeVar("T")

Op = Callable[[bytearray, random.Random], None]
"""A mutation: damages the bytes in place."""

MAX_FAILURES = 5
_ROUNDS = (1, 1, 1, 2, 3, 5)
_BYTES = (0x00, 0x01, 0x02, 0x40, 0x7F, 0x80, 0xFE, 0xFF)
_RUNS = (1, 1, 2, 4, 8, 16)


class Failure(Exception):
    """The decoder under test broke one of the fuzzed properties."""


# --- the mutator -----------------------------------------------------------------------------


def _bit_flip(out: bytearray, rng: random.Random) -> None:
    if out:
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)


def _byte_set(out: bytearray, rng: random.Random) -> None:
    if out:
        out[rng.randrange(len(out))] = rng.choice((*_BYTES, rng.randrange(256)))


def _insert(out: bytearray, rng: random.Random) -> None:
    at = rng.randint(0, len(out))
    out[at:at] = rng.randbytes(rng.choice(_RUNS))


def _delete(out: bytearray, rng: random.Random) -> None:
    if out:
        at = rng.randrange(len(out))
        del out[at:at + rng.choice(_RUNS)]


def _truncate(out: bytearray, rng: random.Random) -> None:
    del out[rng.randint(0, len(out)):]


def _duplicate(out: bytearray, rng: random.Random) -> None:
    n = len(out)
    if n > 1:
        a = rng.randrange(n)
        b = rng.randint(a, min(n, a + 32))
        at = rng.randint(0, n)
        out[at:at] = out[a:b]


def _long_varint(out: bytearray, rng: random.Random) -> None:
    # Continuation bits turn any bytes into long or overlong varints.
    if out:
        at = rng.randrange(len(out))
        for i in range(at, min(len(out), at + rng.randint(1, 11))):
            out[i] |= 0x80


_GENERIC_OPS: tuple[Op, ...] = (_bit_flip, _byte_set, _insert, _delete, _truncate, _duplicate,
                                _long_varint)


def u32_field_op(field: struct.Struct, interesting: Sequence[int],
                 offsets: Callable[[bytes], list[int]] | None = None, jitter: int = 0) -> Op:
    """A mutation writing one of ``interesting`` (or, with ``jitter``, the old value moved by
    up to that much) into a 4-byte field packed by ``field`` (``">I"`` or ``"<I"``).

    The field is at one of ``offsets(bytes)`` (where the protocol keeps sizes and counts), or
    anywhere without them. Negative values stand for their two's complement.
    """

    def op(out: bytearray, rng: random.Random) -> None:
        if offsets is None:
            if len(out) < 4:
                return
            at = rng.randrange(len(out) - 3)
        else:
            places = offsets(bytes(out))
            if not places:
                return
            at = rng.choice(places)
        values = list(interesting)
        if jitter:
            values.append(field.unpack_from(out, at)[0] + rng.randint(-jitter, jitter))
        field.pack_into(out, at, rng.choice(values) & 0xFFFFFFFF)

    return op


@dataclass(frozen=True)
class Mutator:
    """Damages a valid frame: generic byte damage (bit flips, byte sets, inserts, deletes,
    truncation, duplicated runs, varint continuation bits, splices with and appends of other
    ``corpus`` frames or junk) mixed with the protocol's own ``protocol_ops``.

    With probability ``fix_rate`` ``fix_up`` then makes the header agree with the damage
    again: without it most damage stops at the framing checks and never reaches the body
    decoders.
    """

    corpus: Sequence[bytes]
    protocol_ops: Sequence[Op] = ()
    fix_up: Callable[[bytearray], None] | None = None
    fix_rate: float = 0.5

    def __call__(self, data: bytes, rng: random.Random) -> bytes:
        ops = (*_GENERIC_OPS, self._splice, self._append, *self.protocol_ops)
        out = bytearray(data)
        for _ in range(rng.choice(_ROUNDS)):
            rng.choice(ops)(out, rng)
        if self.fix_up is not None and rng.random() < self.fix_rate:
            self.fix_up(out)
        return bytes(out)

    def _splice(self, out: bytearray, rng: random.Random) -> None:
        other = rng.choice(self.corpus)
        out[rng.randint(0, len(out)):] = other[rng.randint(0, len(other)):]

    def _append(self, out: bytearray, rng: random.Random) -> None:
        # Several frames per case exercise frames_before and the frame boundaries.
        out += rng.choice(self.corpus) if rng.random() < 0.7 else rng.randbytes(rng.randint(1, 9))


def chunks(data: bytes, rng: random.Random) -> list[bytes]:
    """Split ``data`` as a socket might deliver it: whole, byte by byte, or at random cuts."""
    mode = rng.randrange(4)
    if mode == 0 or not data:
        return [data]
    if mode == 1 and len(data) <= 512:
        return [data[i:i + 1] for i in range(len(data))]
    cuts = sorted(rng.randint(0, len(data)) for _ in range(rng.randint(1, 6)))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


# --- feeding a decoder -----------------------------------------------------------------------


@dataclass(frozen=True)
class StreamTarget(Generic[T]):
    """One protocol's stream decoder as the fuzz cases drive it.

    ``new_decoder(limit)`` makes a decoder with that ``max_frame_size``; every frame it
    returns must be a ``frame_type`` and pass ``check_frame``. ``header_size`` is the shortest
    frame, so the least a skipped frame frees; ``valid_frame`` is offered to a stopped
    stream, which must refuse it; ``max_frame`` is the default limit of ``run_case``.
    """

    new_decoder: Callable[[int], FrameStream[T]]
    frame_type: type[T]
    check_frame: Callable[[T], None]
    header_size: int
    valid_frame: bytes
    max_frame: int

    def run_case(self, data: bytes, rng: random.Random, max_frame: int | None = None) -> None:
        """Feed ``data`` in chunks chosen by ``rng``; raise ``Failure`` (or let a
        non-``DecodeError`` out) when a property in the module docstring breaks."""
        limit = self.max_frame if max_frame is None else max_frame
        decoder = self.new_decoder(limit)
        for chunk in chunks(data, rng):
            before = decoder.buffered + len(chunk)
            try:
                received = decoder.feed(chunk)
            except DecodeError as exc:
                self._check(exc.frames_before)
                if self._drain(decoder, before, exc):
                    return
            else:
                self._check(received)
            if decoder.buffered > limit:
                raise Failure(f"{decoder.buffered} bytes buffered, over the {limit} limit")

    def check_corpus(self, corpus: Sequence[bytes], max_frame: int = 1 << 20) -> None:
        """Every corpus entry decodes whole, into frames that pass ``check_frame``."""
        for i, data in enumerate(corpus):
            decoder = self.new_decoder(max_frame)
            received = decoder.feed(data)
            assert received, f"corpus entry {i} decoded to no frame"
            assert decoder.buffered == 0, f"corpus entry {i} left bytes over"
            self._check(received)

    def _check(self, received: Sequence[object]) -> None:
        for frame in received:
            assert isinstance(frame, self.frame_type), frame
            self.check_frame(frame)

    def _drain(self, decoder: FrameStream[T], before: int, error: DecodeError) -> bool:
        """After a failed feed, ``feed(b"")`` until one succeeds; each failure must have
        skipped a frame. True when the stream has stopped."""
        while True:
            if self._stopped(decoder):
                return True
            if isinstance(error, FrameTooLargeError):
                raise Failure(f"an oversize frame did not stop the stream: {error}")
            if decoder.buffered > before - self.header_size:
                raise Failure(f"no progress after a bad frame: {before} -> "
                              f"{decoder.buffered} bytes")
            before = decoder.buffered
            try:
                received = decoder.feed(b"")
            except DecodeError as exc:
                self._check(exc.frames_before)
                error = exc
                continue
            self._check(received)
            return False

    def _stopped(self, decoder: FrameStream[T]) -> bool:
        """Has a bad header stopped the stream? If so, it must hold nothing and refuse input."""
        # Only the stream knows whether the error came from a header; the test can then check
        # what stopping promises.
        if decoder._broken is None:
            return False
        if decoder.buffered:
            raise Failure(f"a stopped stream kept {decoder.buffered} bytes")
        try:
            decoder.feed(self.valid_frame)
        except DecodeError:
            return True
        raise Failure("a stopped stream accepted more input")


# --- the driver ------------------------------------------------------------------------------


class Case(NamedTuple):
    """One mutated input and how to run it; ``label`` says what else a rerun needs to know."""

    data: bytes
    run: Callable[[bytes, random.Random], None]
    label: str = ""


def run_campaign(next_case: Callable[[random.Random, int], Case], *, seed: int, target: int,
                 minimum: int, budget: float, case_limit: float, name: str) -> None:
    """Run ``minimum`` cases, then more up to ``target`` while ``budget`` seconds last.

    The first ``minimum`` cases always run, however loaded the machine is, so what a run
    covers never depends on its speed; the budget only decides how many extra cases a fast
    machine adds. ``rng`` is seeded with ``seed`` and case ``number`` runs with
    ``random.Random(number)``, so a failure reported with its case number and input replays.
    Fails on any ``Failure`` or other exception out of a case (stopping at ``MAX_FAILURES``)
    and on a case that spends more than ``case_limit`` seconds of CPU (a runaway: CPU time,
    not wall time, so a busy machine does not trip it).
    """
    rng = random.Random(seed)
    started = time.perf_counter()
    deadline = started + budget
    failures: list[str] = []
    slowest = 0.0
    ran = 0
    while (ran < target and (ran < minimum or time.perf_counter() < deadline)
           and len(failures) < MAX_FAILURES):
        case = next_case(rng, ran)
        where = f"case {ran}" + (f" ({case.label})" if case.label else "")
        t0 = time.thread_time()
        try:
            case.run(case.data, random.Random(ran))
        except Failure as exc:
            failures.append(f"{where}: {exc}: {case.data.hex()}")
        except Exception as exc:  # anything else escaping is the bug
            failures.append(f"{where}: {type(exc).__name__}: {exc}: {case.data.hex()}")
        took = time.thread_time() - t0
        if took > case_limit:
            failures.append(f"{where} took {took:.2f} s of CPU: {case.data.hex()}")
        slowest = max(slowest, took)
        ran += 1
    elapsed = time.perf_counter() - started
    print(f"{name} fuzz: {ran} mutated cases in {elapsed:.1f} s, slowest {slowest * 1000:.1f} ms"
          " of CPU")
    assert not failures, "\n".join(failures)
