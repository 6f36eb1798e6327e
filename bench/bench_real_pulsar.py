"""Our client and the official one side by side against Apache Pulsar itself (a standalone).

``python -m bench real_pulsar`` (also run by ``python -m bench``, after ``client``; it prints
``skipped:`` and the reason without Java 17+ or the jars, ``make pulsar``). The standalone is the
test suite's (``tests/support/real_pulsar.py``): one bookie that persists every entry, on the
same machine; it takes about a minute to start.

Rows, ``N`` messages of 100 bytes per run (``BENCH_REAL_PULSAR_N``, default 20,000), best of
``RUNS`` (``BENCH_REAL_PULSAR_RUNS``, default 2), after one untimed warm-up round of every
phase (a fresh broker JVM kept the first consumer, of either client, waiting up to a second
for its first message); the clients alternate which goes first from round to round:

* produce, batched: ``send_async`` then ``flush`` (bench_client's phase: 1,000 messages or
  128 KiB a batch, 10 ms delay). Both producers may have every message pending at once (ours
  ``max_pending_messages=0``, the official one ``max_pending_messages=N``). The official
  client's rate here is bound by its own ``send_async`` (the Python message builder, a GIL
  hand-over to its C++ threads and back per message, and one Python callback per receipt),
  not by the broker: against the embedded broker it measured the same on the same machine;
* produce, unbatched: the same with batching off (``N / 10`` messages: each is an entry);
* consume: ``receive`` and ``acknowledge`` from the earliest position of a topic our batched
  producer wrote once. Both clients send the broker the same FLOWs (1,000 permits, then 500
  each time half the queue is taken) and group their ACKs (a few frames a run);
* sync send latency: ``LATENCY_N`` (``BENCH_REAL_PULSAR_LATENCY_N``, default 500) sends, each
  awaited before the next, batching off: p50 and p99 in milliseconds.

The broker CPU column is the Java process's CPU seconds over the run's wall seconds. On a
loaded machine rows move by 2x from run to run; the load average is printed before and after.
"""

from __future__ import annotations

import asyncio
import os
import platform
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from bench.bench_client import (
    MESSAGE_SIZE,
    PHASE_TIMEOUT,
    Meter,
    _load,
    _official_client,
    _version,
    official_consume,
    official_produce,
    ours_consume,
    ours_produce,
    payloads,
)
from protoframe.clients.pulsar import PulsarClient

# The launcher lives with the tests, which own the standalone's configuration.
from tests.support import real_pulsar

N = int(os.environ.get("BENCH_REAL_PULSAR_N", "20000"))
RUNS = int(os.environ.get("BENCH_REAL_PULSAR_RUNS", "2"))
LATENCY_N = int(os.environ.get("BENCH_REAL_PULSAR_LATENCY_N", "500"))


async def _ours_unbatched(url: str, topic: str, messages: list[bytes], meter: Meter) -> None:
    async with PulsarClient(url) as client:
        producer = await client.create_producer(topic, max_pending_messages=0,
                                                batching_enabled=False)
        meter.start()
        futures = [producer.send_async(data) for data in messages]
        await producer.flush()
        meter.stop()
        assert all(f.exception() is None for f in futures)


def ours_unbatched(url: str, topic: str, messages: list[bytes], meter: Meter) -> None:
    asyncio.run(asyncio.wait_for(_ours_unbatched(url, topic, messages, meter), PHASE_TIMEOUT))


def official_unbatched(pulsar: Any, url: str, topic: str, messages: list[bytes],
                       meter: Meter) -> None:
    client = _official_client(pulsar, url)
    try:
        producer = client.create_producer(topic, batching_enabled=False,
                                          block_if_queue_full=True,
                                          max_pending_messages=len(messages))
        results = {"ok": 0, "failed": 0}

        def done(result: Any, message_id: Any) -> None:
            results["ok" if result == pulsar.Result.Ok else "failed"] += 1

        meter.start()
        for data in messages:
            producer.send_async(data, done)
        producer.flush()
        meter.stop()
        assert results == {"ok": len(messages), "failed": 0}, results
    finally:
        client.close()


async def _ours_latency(url: str, topic: str, messages: list[bytes]) -> list[float]:
    async with PulsarClient(url) as client:
        producer = await client.create_producer(topic, batching_enabled=False)
        out = []
        for data in messages:
            started = time.perf_counter()
            await producer.send(data)
            out.append(time.perf_counter() - started)
        return out


def ours_latency(url: str, topic: str, messages: list[bytes]) -> list[float]:
    return asyncio.run(asyncio.wait_for(_ours_latency(url, topic, messages), PHASE_TIMEOUT))


def official_latency(pulsar: Any, url: str, topic: str, messages: list[bytes]) -> list[float]:
    client = _official_client(pulsar, url)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        out = []
        for data in messages:
            started = time.perf_counter()
            producer.send(data)
            out.append(time.perf_counter() - started)
        return out
    finally:
        client.close()


def _percentile(samples: list[float], q: int) -> float:
    return statistics.quantiles(samples, n=100)[q - 1] * 1000


def main() -> None:
    reason = real_pulsar.unavailable_reason()
    if reason is not None:
        print(f"skipped: {reason}")
        return
    try:
        import pulsar
    except ImportError:
        pulsar = None
    print(f"Python {platform.python_version()}, pulsar-client {_version('pulsar-client')}, "
          f"{os.cpu_count()} CPUs, load average {_load()}")
    # Full JIT: the broker's throughput is part of what the rows show.
    real = real_pulsar.start(quick_jit=False)
    print(f"Apache Pulsar standalone up in {real.startup_seconds:.1f} s; {N:,} messages of "
          f"{MESSAGE_SIZE} bytes per run, best of {RUNS}")
    # The JVM's own pid: real.process is the watchdog that runs it.
    pid = real.jvm_pid()
    assert pid is not None
    messages = payloads(N)
    unbatched = messages[: max(N // 10, 1)]
    clients = ["ours"] + (["official"] if pulsar is not None else [])
    rows: dict[tuple[str, str], list[Meter]] = {}
    counts = {"produce batched": len(messages), "produce unbatched": len(unbatched),
              "consume": len(messages)}
    latencies: dict[str, list[float]] = {}

    def timed(phase: str, client: str, run: Callable[[Meter], None]) -> None:
        meter = Meter(pid)
        run(meter)
        rows.setdefault((phase, client), []).append(meter)

    def round_of(run: int, client: str) -> list[tuple[str, Callable[[Meter], None]]]:
        if client == "ours":
            return [
                ("produce batched", partial(ours_produce, real.url, f"bench-real-b-ours-{run}",
                                            messages)),
                ("produce unbatched", partial(ours_unbatched, real.url,
                                              f"bench-real-u-ours-{run}", unbatched)),
                ("consume", partial(ours_consume, real.url, source, f"ours-{run}", messages)),
            ]
        return [
            ("produce batched", partial(official_produce, pulsar, real.url,
                                        f"bench-real-b-off-{run}", messages,
                                        max_pending_messages=len(messages))),
            ("produce unbatched", partial(official_unbatched, pulsar, real.url,
                                          f"bench-real-u-off-{run}", unbatched)),
            ("consume", partial(official_consume, pulsar, real.url, source,
                                f"official-{run}", messages)),
        ]

    source = "bench-real-consume-source"
    try:
        ours_produce(real.url, source, messages, Meter(pid))
        # Round -1 warms the broker up and is not shown: the first consume of a fresh JVM
        # waited up to a second for its first message, whichever client came first.
        for run in range(-1, RUNS):
            # Each client goes first in every other round, so neither always meets a broker
            # the other has just left busy (its ledger writes, its garbage).
            order = clients if run % 2 == 0 else clients[::-1]
            for client in order:
                for phase, work in round_of(run, client):
                    if run < 0:
                        work(Meter(pid))
                    else:
                        timed(phase, client, work)
        sample = messages[:LATENCY_N]
        latencies["ours"] = ours_latency(real.url, "bench-real-latency-ours", sample)
        if pulsar is not None:
            latencies["official"] = official_latency(pulsar, real.url,
                                                     "bench-real-latency-official", sample)
    finally:
        real.stop()

    print()
    header = (f"{'phase':<18} {'client':<9} {'msgs/s (best)':>14} {'all runs':>18} "
              f"{'ours/official':>14} {'broker CPU':>11}")
    print(header)
    print("-" * len(header))
    for (phase, client), meters in rows.items():
        count = counts[phase]
        best = min(meters, key=lambda m: m.wall)
        rate = count / best.wall
        runs = ", ".join(f"{count / m.wall:,.0f}" for m in meters)
        ratio = ""
        if client == "ours" and (phase, "official") in rows:
            other = min(rows[(phase, "official")], key=lambda m: m.wall)
            ratio = f"{other.wall / best.wall:.2f}x"
        print(f"{phase:<18} {client:<9} {rate:>14,.0f} {runs:>18} {ratio:>14} "
              f"{best.broker_share:>11.2f}")
    print()
    print(f"sync send latency, {LATENCY_N} sends one at a time, batching off:")
    for client, samples in latencies.items():
        print(f"  {client:<9} p50 {_percentile(samples, 50):7.2f} ms   "
              f"p99 {_percentile(samples, 99):7.2f} ms")
    print(f"(load average at the end: {_load()})")


if __name__ == "__main__":
    main()
