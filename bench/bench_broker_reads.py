"""Where the embedded broker should read payloads back from its log: on the event loop or on a
worker thread.

One 1.1 KB ``os.pread`` at a random place of a 22 MB file: from the page cache, cold (the
file's pages dropped with ``posix_fadvise(DONTNEED)`` after an fsync), and handed to a
one-thread executor and awaited (``run_in_executor``), one read per hand-off and 64 per
hand-off. The broker keeps reads on the loop while a hand-off costs more than the cold read it
would move (see ``clients/pulsar/broker/storage.py``).
"""

from __future__ import annotations

import asyncio
import os
import random
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ENTRIES = 20_000
SIZE = 1100
READS = 5000
COLD_READS = 500
PER_HANDOFF = 64


def _per_read_us(started: float, count: int) -> float:
    return (time.perf_counter() - started) / count * 1e6


async def _handoffs(fd: int, offsets: list[int]) -> tuple[float, float]:
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(max_workers=1) as executor:
        for offset in offsets[:200]:
            await loop.run_in_executor(executor, os.pread, fd, SIZE, offset)
        started = time.perf_counter()
        for offset in offsets:
            await loop.run_in_executor(executor, os.pread, fd, SIZE, offset)
        one = _per_read_us(started, len(offsets))

        def many(chunk: list[int]) -> list[bytes]:
            return [os.pread(fd, SIZE, offset) for offset in chunk]

        started = time.perf_counter()
        for start in range(0, len(offsets), PER_HANDOFF):
            await loop.run_in_executor(executor, many, offsets[start:start + PER_HANDOFF])
        batched = _per_read_us(started, len(offsets))
    return one, batched


def main() -> None:
    rng = random.Random(18)
    with tempfile.NamedTemporaryFile(prefix="bench-reads-") as f:
        f.write(os.urandom(ENTRIES * SIZE))
        f.flush()
        os.fsync(f.fileno())
        fd = os.open(f.name, os.O_RDONLY)
        try:
            offsets = [rng.randrange(ENTRIES) * SIZE for _ in range(READS)]
            for offset in offsets:
                os.pread(fd, SIZE, offset)
            started = time.perf_counter()
            for offset in offsets:
                os.pread(fd, SIZE, offset)
            warm = _per_read_us(started, len(offsets))
            one, batched = asyncio.run(_handoffs(fd, offsets))
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            started = time.perf_counter()
            for index in rng.sample(range(ENTRIES), COLD_READS):
                os.pread(fd, SIZE, index * SIZE)
            cold = _per_read_us(started, COLD_READS)
        finally:
            os.close(fd)
    print(f"pread of {SIZE} bytes: page cache {warm:.1f} us, cold {cold:.1f} us; through "
          f"run_in_executor: one a hand-off {one:.1f} us, {PER_HANDOFF} a hand-off "
          f"{batched:.1f} us a read", flush=True)
