"""Client throughput and memory: our asyncio Pulsar client against the official pulsar-client.

One embedded broker runs in a child process (``BrokerProcess``, messages in memory), so that
its CPU time can be read from ``/proc/<pid>/stat`` and shown apart from the clients'. Messages
are 100 bytes, distinct (a counter in the first bytes), with batching on in both producers
(1,000 messages or 128 KiB per batch, 10 ms publish delay: the official defaults).

Phases, each timed on its own (``N`` messages, ``BENCH_CLIENT_N``, default 200,000):

* produce: ``send_async`` of every message, then ``flush``; the clock runs from the first send
  until ``flush`` returns, that is until every message has its receipt. Ours:
  ``producer.send_async(data)`` (returns a ``SendFuture``); the official client:
  ``producer.send_async(data, callback)`` with a callback that counts results, and
  ``block_if_queue_full=True`` (its ``max_pending_messages`` makes no difference to its speed).
  Ours runs with ``max_pending_messages=0`` (no limit), as a tight ``send_async`` loop needs.
* consume: ``receive`` then ``acknowledge``, message by message, from a fresh subscription at the
  earliest position; the clock starts once ``subscribe`` has returned and stops at the last
  acknowledge. Both clients read the same topic (written once by our producer, in batches of
  1,000), so they get identical entries. Ours uses ``await consumer.receive()`` and
  ``await consumer.acknowledge(msg)``; the row ``ours-nowait`` acknowledges with
  ``consumer.acknowledge_nowait(msg)`` instead, a plain call like the official client's
  ``acknowledge`` (the coroutine of ``acknowledge`` costs a little per message). The targets
  are judged on ``ours``.

Every run is checked: all receipts succeeded, the consumer got ``N`` messages, the first and
the last in order. Each phase runs ``RUNS`` times (``BENCH_CLIENT_RUNS``, default 3), the
clients alternating, and reports its best run; the broker's CPU share of a run is its CPU
seconds (user + system) over the run's wall seconds: well under 1.0 means the broker was not
what limited the client. The client's CPU share is the same for this process (all its threads:
the official client does its I/O on C++ threads, ours on the one event-loop thread).

Memory: a child process (nothing of the official client imported) produces 1,000,000 messages
(``BENCH_CLIENT_RSS_N``) with our client and reports its peak resident set, once with a tight
``send_async`` loop followed by ``flush`` (every message queued at once: the worst case) and once
yielding to the event loop every 1,000 sends. Its resident set after imports and connecting is
shown as the baseline. The peak is ``VmHWM`` from ``/proc/self/status``, not ``getrusage``'s
``ru_maxrss``: Linux carries the parent's high-water mark across fork and exec into the
child's ``ru_maxrss`` (this process holds the benchmark's messages), while ``VmHWM`` belongs to
the child's own address space.

Machine load matters: on a busy machine (other processes on the same cores) runs vary by 20%
or more; the load average is printed before and after.

The official client is the ``pulsar`` package (pulsar-client); without it only our columns
are shown.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from protoframe.clients.pulsar import PulsarClient
from protoframe.clients.pulsar.broker import BrokerProcess

N = int(os.environ.get("BENCH_CLIENT_N", "200000"))
RUNS = int(os.environ.get("BENCH_CLIENT_RUNS", "3"))
RSS_N = int(os.environ.get("BENCH_CLIENT_RSS_N", "1000000"))
MESSAGE_SIZE = 100
RECEIVE_TIMEOUT_MS = 30_000
PHASE_TIMEOUT = 120.0

# Targets from the issue.
TARGET_PRODUCE_RATIO = 3.0  # ours / official, messages per second
TARGET_CONSUME_RATIO = 2.0
TARGET_PEAK_RSS_MB = 200.0

_REPO_ROOT = Path(__file__).resolve().parent.parent
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def payloads(n: int) -> list[bytes]:
    """``n`` distinct messages of MESSAGE_SIZE bytes."""
    pad = b"." * (MESSAGE_SIZE - 8)
    return [i.to_bytes(8, "big") + pad for i in range(n)]


# ---- measuring ---------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (its threads included)."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    # The command name (field 2) may hold spaces; fields 14 and 15 follow its ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


@dataclass
class Meter:
    """The wall time of one timed run and the broker's CPU time during it."""

    broker_pid: int
    wall: float = 0.0
    broker_cpu: float = 0.0
    client_cpu: float = 0.0
    _t0: float = 0.0
    _cpu0: float = 0.0
    _own0: float = 0.0

    def start(self) -> None:
        self._cpu0 = cpu_seconds(self.broker_pid)
        self._own0 = time.process_time()
        self._t0 = time.perf_counter()

    def stop(self) -> None:
        self.wall = time.perf_counter() - self._t0
        self.client_cpu = time.process_time() - self._own0
        self.broker_cpu = cpu_seconds(self.broker_pid) - self._cpu0

    @property
    def broker_share(self) -> float:
        return self.broker_cpu / self.wall if self.wall else 0.0

    @property
    def client_share(self) -> float:
        return self.client_cpu / self.wall if self.wall else 0.0


@dataclass
class Phase:
    """The runs of one client in one phase."""

    client: str
    phase: str
    runs: list[Meter] = field(default_factory=list)

    @property
    def best(self) -> Meter:
        return min(self.runs, key=lambda m: m.wall)

    @property
    def rate(self) -> float:
        return N / self.best.wall


# ---- our client --------------------------------------------------------------------------------


async def _ours_produce(url: str, topic: str, messages: list[bytes], meter: Meter) -> None:
    async with PulsarClient(url) as client:
        producer = await client.create_producer(topic, max_pending_messages=0)
        send_async = producer.send_async
        meter.start()
        futures = [send_async(data) for data in messages]
        await producer.flush()
        meter.stop()
        failed = [f for f in futures if f.exception() is not None]
        assert not failed, f"{len(failed)} sends failed: {failed[0].exception()!r}"
        assert futures[-1].result() > futures[0].result()


async def _ours_consume(url: str, topic: str, subscription: str, messages: list[bytes],
                        meter: Meter, nowait: bool) -> None:
    async with PulsarClient(url) as client:
        consumer = await client.subscribe(topic, subscription, initial_position="earliest")
        receive, acknowledge = consumer.receive, consumer.acknowledge
        meter.start()
        first = last = await receive()
        await acknowledge(first)
        if nowait:
            acknowledge_nowait = consumer.acknowledge_nowait
            for _ in range(len(messages) - 1):
                last = await receive()
                acknowledge_nowait(last)
        else:
            for _ in range(len(messages) - 1):
                last = await receive()
                await acknowledge(last)
        meter.stop()
        assert first.data() == messages[0] and last.data() == messages[-1]
        await consumer.close()


def ours_produce(url: str, topic: str, messages: list[bytes], meter: Meter) -> None:
    asyncio.run(asyncio.wait_for(_ours_produce(url, topic, messages, meter), PHASE_TIMEOUT))


def ours_consume(url: str, topic: str, subscription: str, messages: list[bytes],
                 meter: Meter, nowait: bool = False) -> None:
    asyncio.run(asyncio.wait_for(
        _ours_consume(url, topic, subscription, messages, meter, nowait), PHASE_TIMEOUT))


# ---- the official client -----------------------------------------------------------------------


def _official_client(pulsar: Any, url: str) -> Any:
    quiet = logging.getLogger("bench.official-pulsar")
    quiet.setLevel(logging.ERROR)
    return pulsar.Client(url, logger=quiet, operation_timeout_seconds=30)


def official_produce(pulsar: Any, url: str, topic: str, messages: list[bytes],
                     meter: Meter, max_pending_messages: int | None = None) -> None:
    client = _official_client(pulsar, url)
    try:
        limit = {} if max_pending_messages is None else \
            {"max_pending_messages": max_pending_messages}
        producer = client.create_producer(
            topic, batching_enabled=True, batching_max_messages=1000,
            batching_max_allowed_size_in_bytes=128 * 1024, batching_max_publish_delay_ms=10,
            block_if_queue_full=True, **limit)
        ok = pulsar.Result.Ok
        results = {"ok": 0, "failed": 0}

        def done(result: Any, message_id: Any) -> None:
            results["ok" if result == ok else "failed"] += 1

        send_async = producer.send_async
        meter.start()
        for data in messages:
            send_async(data, done)
        producer.flush()
        meter.stop()
        assert results == {"ok": len(messages), "failed": 0}, results
        producer.close()
    finally:
        client.close()


def official_consume(pulsar: Any, url: str, topic: str, subscription: str,
                     messages: list[bytes], meter: Meter) -> None:
    client = _official_client(pulsar, url)
    try:
        consumer = client.subscribe(topic, subscription,
                                    initial_position=pulsar.InitialPosition.Earliest)
        receive, acknowledge = consumer.receive, consumer.acknowledge
        meter.start()
        first = last = receive(RECEIVE_TIMEOUT_MS)
        acknowledge(first)
        for _ in range(len(messages) - 1):
            last = receive(RECEIVE_TIMEOUT_MS)
            acknowledge(last)
        meter.stop()
        assert first.data() == messages[0] and last.data() == messages[-1]
        consumer.close()
    finally:
        client.close()


# ---- memory (in a child process) ---------------------------------------------------------------


def _status_mb(key: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


async def _rss_produce(url: str, count: int, yield_every: int) -> dict[str, float]:
    data = payloads(1)[0]
    async with PulsarClient(url) as client:
        producer = await client.create_producer(f"bench-rss-{yield_every}-{os.getpid()}",
                                                max_pending_messages=0)
        send_async = producer.send_async
        baseline = _status_mb("VmRSS")
        started = time.perf_counter()
        if yield_every:
            for i in range(count):
                send_async(data)
                if i % yield_every == yield_every - 1:
                    await asyncio.sleep(0)
        else:
            for _ in range(count):
                send_async(data)
        await producer.flush()
        elapsed = time.perf_counter() - started
        last = producer.last_sequence_id()
    assert last == count - 1, f"{last + 1} of {count} messages have receipts"
    return {"baseline_mb": baseline, "peak_mb": _status_mb("VmHWM"), "rate": count / elapsed}


def rss_child(url: str, count: int, yield_every: int) -> None:
    """Entry point of the child: produce ``count`` messages, print a JSON line of results."""
    result = asyncio.run(asyncio.wait_for(_rss_produce(url, count, yield_every),
                                          PHASE_TIMEOUT))
    print(json.dumps(result), flush=True)


def measure_rss(url: str, count: int, yield_every: int, meter: Meter) -> dict[str, float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(_REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    meter.start()
    done = subprocess.run(
        [sys.executable, "-m", "bench.bench_client", "rss-child", url, str(count),
         str(yield_every)],
        cwd=_REPO_ROOT, env=env, capture_output=True, text=True, timeout=PHASE_TIMEOUT + 30)
    meter.stop()
    if done.returncode != 0:
        raise RuntimeError(f"the memory child failed:\n{done.stderr}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# ---- the run -----------------------------------------------------------------------------------


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def _verdict(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def _timed(phase: Phase, broker_pid: int, run: Callable[[Meter], None]) -> None:
    meter = Meter(broker_pid)
    run(meter)
    phase.runs.append(meter)


def main() -> None:
    try:
        import pulsar
    except ImportError:
        pulsar = None
    print(f"Python {platform.python_version()}, pulsar-client {_version('pulsar-client')}, "
          f"{os.cpu_count()} CPUs, load average {_load()}")
    print(f"{N:,} messages of {MESSAGE_SIZE} bytes per run, best of {RUNS} runs; broker: "
          "embedded, in a child process, messages in memory")
    messages = payloads(N)
    broker = BrokerProcess(extra_args=("--log-level", "WARNING"))
    url = broker.start()
    assert broker.process is not None
    pid = broker.process.pid
    phases: dict[tuple[str, str], Phase] = {}
    clients = ["ours"] + (["official"] if pulsar is not None else [])
    for name in ("produce", "consume"):
        for client in clients:
            phases[(client, name)] = Phase(client, name)
    phases[("ours-nowait", "consume")] = Phase("ours-nowait", "consume")
    rss: list[tuple[str, dict[str, float], Meter]] = []
    try:
        # The topic both consumers read: written once, by our producer.
        source = "bench-consume-source"
        ours_produce(url, source, messages, Meter(pid))
        for run in range(RUNS):
            _timed(phases[("ours", "produce")], pid,
                   partial(ours_produce, url, f"bench-produce-ours-{run}", messages))
            if pulsar is not None:
                _timed(phases[("official", "produce")], pid,
                       partial(official_produce, pulsar, url, f"bench-produce-official-{run}",
                               messages))
            _timed(phases[("ours", "consume")], pid,
                   partial(ours_consume, url, source, f"ours-{run}", messages))
            _timed(phases[("ours-nowait", "consume")], pid,
                   partial(ours_consume, url, source, f"ours-nowait-{run}", messages,
                           nowait=True))
            if pulsar is not None:
                _timed(phases[("official", "consume")], pid,
                       partial(official_consume, pulsar, url, source, f"official-{run}",
                               messages))
        for label, every in (("tight loop, then flush", 0), ("yield every 1,000 sends", 1000)):
            meter = Meter(pid)
            rss.append((label, measure_rss(url, RSS_N, every, meter), meter))
    finally:
        broker.stop()

    print()
    header = (f"{'phase':<8} {'client':<12} {'msgs/s (best)':>14} {'all runs':>20} "
              f"{'ours/official':>14} {'client CPU':>11} {'broker CPU':>17}")
    print(header)
    print("-" * len(header))
    for (client, name), phase in phases.items():
        runs = ", ".join(f"{N / m.wall / 1000:,.0f}k" for m in phase.runs)
        vs_official = ""
        if client.startswith("ours") and ("official", name) in phases:
            vs_official = f"{phase.rate / phases[('official', name)].rate:.2f}x"
        highest = max(m.broker_share for m in phase.runs)
        shares = f"{phase.best.broker_share:.2f} (max {highest:.2f})"
        print(f"{name:<8} {client:<12} {phase.rate:>14,.0f} {runs:>20} {vs_official:>14} "
              f"{phase.best.client_share:>11.2f} {shares:>17}")
    print("(CPU columns: CPU seconds / wall seconds of the best run, 1.00 = one core busy; "
          "client = this process, all threads; broker = the broker process, and its highest "
          "share over all runs)")

    print()
    print(f"peak RSS of our client producing {RSS_N:,} messages ({MESSAGE_SIZE} B, batching on):")
    for label, result, meter in rss:
        print(f"  {label:<24} peak (VmHWM) {result['peak_mb']:6.1f} MB, baseline after imports "
              f"and connecting {result['baseline_mb']:.1f} MB; {result['rate']:,.0f} msgs/s, "
              f"broker CPU share {meter.broker_share:.2f}")

    print()
    print("targets:")
    if pulsar is not None:
        for name, target in (("produce", TARGET_PRODUCE_RATIO),
                             ("consume", TARGET_CONSUME_RATIO)):
            ratio = phases[("ours", name)].rate / phases[("official", name)].rate
            print(f"  {name}: ours/official {ratio:.2f}x >= {target:.1f}x "
                  f"{_verdict(ratio >= target)}")
    else:
        print("  produce, consume: the official client (pulsar-client) is not installed")
    peak = max(entry[1]["peak_mb"] for entry in rss)
    print(f"  peak RSS producing {RSS_N:,}: {peak:.1f} MB < {TARGET_PEAK_RSS_MB:.0f} MB "
          f"{_verdict(peak < TARGET_PEAK_RSS_MB)}")
    print(f"(load average at the end: {_load()})")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "rss-child":
        rss_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        main()
