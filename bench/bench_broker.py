"""The embedded Pulsar broker with a large backlog: resident memory and recovery time.

A broker runs in a child process with a data directory (``--no-fsync``: the disk's sync speed
is not what is measured). One durable subscription that asks for nothing holds every message
as backlog while a producer sends ``BENCH_BROKER_MB`` megabytes (default 200) of 1 KB messages,
ten to an entry (as a batching client sends them). Then the broker is stopped and started again
on the same directory. Reported: the broker's resident set (``VmRSS`` from ``/proc``) idle, with
the backlog, and once recovered; its peak (``VmHWM``) during the recovery run; the time to fill
and the time from starting the process until it listens again (recovery plus imports), each also
as the broker's CPU seconds (``cpu s``, from ``/proc``: steadier than wall time on a loaded
machine).

Then a consumer drains the backlog from the restarted broker (payloads read back from the log,
most of them past the payload cache): ``drain s``, and the RSS once drained.

``BENCH_BROKER_MESSAGE`` (bytes, default 1024) and ``BENCH_BROKER_PER_ENTRY`` (default 10) set
the shape: many small entries (e.g. 100 bytes, 1 per entry) measure what the broker holds per
entry rather than per byte. ``BENCH_BROKER_BEFORE`` names the import root of another checkout (a
directory holding ``protoframe/``, e.g. an older clone): the same run is made with its broker
first, for a before/after table. Payload cache of the new broker: ``BENCH_BROKER_CACHE_MB``
(default 32).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from protoframe import import_root
from protoframe.generated.pulsar import frames
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandConnect,
    CommandFlow,
    CommandProducer,
    CommandSend,
    CommandSubscribe,
    MessageMetadata,
    SingleMessageMetadata,
)

Type = BaseCommand.Type
MB = int(os.environ.get("BENCH_BROKER_MB", "200"))
CACHE_MB = os.environ.get("BENCH_BROKER_CACHE_MB", "32")
BEFORE = os.environ.get("BENCH_BROKER_BEFORE", "")
MESSAGE = int(os.environ.get("BENCH_BROKER_MESSAGE", "1024"))
PER_ENTRY = int(os.environ.get("BENCH_BROKER_PER_ENTRY", "10"))
BURST = 200  # entries sent before waiting for their receipts
READY = "listening on "


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


class _Broker:
    def __init__(self, root: str, data_dir: Path, extra: list[str]) -> None:
        env = dict(os.environ, PYTHONPATH=root)
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "protoframe.clients.pulsar", "broker", "--port", "0",
             "--data-dir", str(data_dir), "--no-fsync", "--log-level", "WARNING", *extra],
            env=env, cwd=root, text=True, stdout=subprocess.PIPE)
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(READY):
                self.url = line[len(READY):].strip()
                break
        else:
            raise RuntimeError(f"the broker exited with {self.process.wait()}")
        self.ready_s = time.perf_counter() - self.started

    def rss(self, field: str = "VmRSS") -> int:
        return _status(self.process.pid, field)

    def cpu(self) -> float:
        """CPU seconds the broker has used (user + system): on a loaded machine a steadier
        measure of its work than wall time."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(600)


async def _command(writer: asyncio.StreamWriter, command: BaseCommand) -> None:
    writer.write(frames.Frame(command=command).encode())
    await writer.drain()


async def _expect(reader: asyncio.StreamReader, decoder: frames.StreamDecoder,
                  pending: list[frames.Frame], kind: BaseCommand.Type) -> None:
    while not pending:
        data = await asyncio.wait_for(reader.read(1 << 16), 120)
        if not data:
            raise ConnectionError("closed by the broker")
        pending.extend(decoder.feed(data))
    frame = pending.pop(0)
    if frame.command.type_ != kind:
        raise RuntimeError(f"expected {kind.name}, got {frame.command!r}")


async def _connect(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter,
                                      frames.StreamDecoder, list[frames.Frame]]:
    host, port = url.removeprefix("pulsar://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    decoder, pending = frames.StreamDecoder(), list[frames.Frame]()
    await _command(writer, BaseCommand(type_=Type.CONNECT, connect=CommandConnect(
        client_version="bench", protocol_version=20)))
    await _expect(reader, decoder, pending, Type.CONNECTED)
    await _command(writer, BaseCommand(type_=Type.SUBSCRIBE, subscribe=CommandSubscribe(
        topic="backlog", subscription="held", subType=CommandSubscribe.SubType.Exclusive,
        consumer_id=1, request_id=1)))
    await _expect(reader, decoder, pending, Type.SUCCESS)
    return reader, writer, decoder, pending


async def _drain(url: str, entries: int) -> None:
    """Receive the whole backlog (without acknowledging it)."""
    reader, writer, decoder, pending = await _connect(url)
    await _command(writer, BaseCommand(type_=Type.FLOW, flow=CommandFlow(
        consumer_id=1, messagePermits=entries * PER_ENTRY)))
    received = sum(1 for f in pending if f.command.type_ == Type.MESSAGE)
    while received < entries:
        data = await asyncio.wait_for(reader.read(1 << 18), 120)
        if not data:
            raise ConnectionError("closed by the broker")
        received += sum(1 for f in decoder.feed(data) if f.command.type_ == Type.MESSAGE)
    writer.close()


async def _fill(url: str, entries: int) -> None:
    reader, writer, decoder, pending = await _connect(url)
    await _command(writer, BaseCommand(type_=Type.PRODUCER, producer=CommandProducer(
        topic="backlog", producer_id=1, request_id=2, producer_name="bench")))
    await _expect(reader, decoder, pending, Type.PRODUCER_SUCCESS)
    batch = frames.Batch(entries=[
        frames.BatchEntry(metadata=SingleMessageMetadata(payload_size=MESSAGE),
                          data=b"x" * MESSAGE) for _ in range(PER_ENTRY)]).encode()
    for start in range(0, entries, BURST):
        count = min(BURST, entries - start)
        writer.write(b"".join(frames.Frame(
            command=BaseCommand(type_=Type.SEND, send=CommandSend(
                producer_id=1, sequence_id=seq, num_messages=PER_ENTRY)),
            payload=frames.Payload(metadata=MessageMetadata(
                producer_name="bench", sequence_id=seq, publish_time=1,
                num_messages_in_batch=PER_ENTRY), data=batch)
            if PER_ENTRY > 1 else frames.Payload(metadata=MessageMetadata(
                producer_name="bench", sequence_id=seq, publish_time=1),
                data=b"x" * MESSAGE)).encode()
            for seq in range(start, start + count)))
        await writer.drain()
        for _ in range(count):
            await _expect(reader, decoder, pending, Type.SEND_RECEIPT)
    writer.close()


def _run(label: str, root: str, extra: list[str]) -> dict[str, float]:
    entries = MB * 1024 * 1024 // (MESSAGE * PER_ENTRY)
    data_dir = Path(tempfile.mkdtemp(prefix="bench-broker-"))
    try:
        broker = _Broker(root, data_dir, extra)
        idle = broker.rss()
        started, cpu = time.perf_counter(), broker.cpu()
        asyncio.run(_fill(broker.url, entries))
        filled = time.perf_counter() - started
        fill_cpu = broker.cpu() - cpu
        full = broker.rss()
        broker.stop()
        log_mb = sum(f.stat().st_size for f in data_dir.iterdir() if f.is_file()) / 2**20
        restarted = _Broker(root, data_dir, extra)
        recovered, peak = restarted.rss(), restarted.rss("VmHWM")
        started, cpu = time.perf_counter(), restarted.cpu()
        restart_cpu = cpu
        asyncio.run(_drain(restarted.url, entries))
        drained = time.perf_counter() - started
        drain_cpu = restarted.cpu() - cpu
        after_drain = restarted.rss()
        restarted.stop()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    row = {"entries": entries, "log MB": log_mb, "idle MB": idle / 1024,
           "backlog MB": full / 1024, "fill s": filled, "fill cpu s": fill_cpu,
           "restart s": restarted.ready_s, "restart cpu s": restart_cpu,
           "recovered MB": recovered / 1024, "restart peak MB": peak / 1024,
           "drain s": drained, "drain cpu s": drain_cpu, "drained MB": after_drain / 1024}
    print(f"{label:>7}: " + ", ".join(f"{k} {v:.1f}" for k, v in row.items()), flush=True)
    return row


def main() -> None:
    print(f"backlog: {MB} MB of {MESSAGE}-byte messages, {PER_ENTRY} per entry, held by one "
          f"subscription", flush=True)
    if BEFORE:
        _run("before", BEFORE, [])
    _run("after", import_root(), ["--managed-ledger-cache-size-mb", CACHE_MB])
