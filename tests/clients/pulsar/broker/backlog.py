"""A backlog of unacknowledged messages in a child broker, and the broker's resident memory."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from protoframe.clients.pulsar.broker.server import BrokerProcess
from protoframe.generated.pulsar.pulsar_api import BaseCommand
from tests.clients.pulsar.broker.logtraffic import send_command
from tests.support.pulsar_raw import RawClient

Type = BaseCommand.Type


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    """Resident set size of a process (``VmHWM``: its peak), from /proc (kB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


async def fill(url: str, topic: str, count: int, size: int = 1024, burst: int = 2000) -> None:
    """``count`` messages of ``size`` bytes, acknowledged by the broker, nobody consuming them
    (a durable subscription holds them as backlog)."""
    consumer = await RawClient.connect(url)
    await consumer.subscribe(topic, "backlog")  # no permits: nothing is delivered
    client = await RawClient.connect(url)
    await client.producer(topic, name="backlog")
    data = b"x" * size
    for start in range(0, count, burst):
        n = min(burst, count - start)
        await client.send_bytes(b"".join(send_command(1, seq, data)
                                         for seq in range(start, start + n)))
        for _ in range(n):
            await client.expect(Type.SEND_RECEIPT, timeout=120)
    await client.close()
    await consumer.close()


def measure(data_dir: Path, count: int, *, size: int = 1024,
            extra_args: tuple[str, ...] = ()) -> dict[str, float]:
    """Start a child broker on ``data_dir``, put ``count`` messages in a backlog and restart
    it; RSS (kB) before and after, and the restart's time (s)."""
    broker = BrokerProcess(data_dir=data_dir, extra_args=("--no-fsync", *extra_args))
    url = broker.start(timeout=120)
    assert broker.process is not None
    try:
        idle = rss_kib(broker.process.pid)
        started = time.perf_counter()
        asyncio.run(fill(url, "backlog", count, size))
        filled = time.perf_counter() - started
        full = rss_kib(broker.process.pid)
    finally:
        broker.stop()
    restart = BrokerProcess(data_dir=data_dir, extra_args=("--no-fsync", *extra_args))
    started = time.perf_counter()
    restart.start(timeout=600)
    recovered = time.perf_counter() - started
    assert restart.process is not None
    try:
        after_recovery = rss_kib(restart.process.pid)
        peak_recovery = rss_kib(restart.process.pid, "VmHWM")
    finally:
        restart.stop()
    return {"idle_kib": idle, "full_kib": full, "fill_s": filled, "recovery_s": recovered,
            "recovered_kib": after_recovery, "recovery_peak_kib": peak_recovery,
            "log_bytes": (data_dir / "broker.log").stat().st_size}
