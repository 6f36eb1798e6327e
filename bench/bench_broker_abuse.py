"""Round-trip latency through the embedded broker with and without connection abuse running.

One broker runs in a child process (``BrokerProcess``, messages in memory). This process makes
round trips with our asyncio client for ``BENCH_ABUSE_SECONDS`` (default 15) seconds, one after
the other: ``send`` of one 100-byte message without batching, then ``receive`` and
``acknowledge`` of it on a consumer of the same topic; each round trip is timed from the send
to the received message, after 50 untimed ones. It does so twice: once on a quiet broker and
once while another child process abuses it (from when the abuse is in place), and prints p50,
p99 and the maximum of each, and the broker's resident set (``VmRSS``) at the end of each
phase.

The abuse (issue 18, failures 5 and 6), kept up for the whole phase:

* 8 consumers on their own subscriptions of a 24 MB backlog, 10^9 permits, never reading;
* 500 connections that never send CONNECT (reopened as the handshake deadline closes them);
* 20 connections trickling a frame one byte every 0.2 s (reopened as the frame deadline
  closes them);
* 8 connections at a time announcing a 5 MB frame and sending all but its last byte.

The broker runs with a 5 s handshake and frame deadline, so that the abuse is being closed and
reopened while the round trips run. On a loaded machine the numbers vary; the load average is
printed with them.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from protoframe.clients.pulsar import PulsarClient
from protoframe.clients.pulsar.broker import BrokerProcess
from protoframe.generated.pulsar import frames
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandConnect,
    CommandFlow,
    CommandProducer,
    CommandSend,
    CommandSubscribe,
    MessageMetadata,
)

Type = BaseCommand.Type
SECONDS = float(os.environ.get("BENCH_ABUSE_SECONDS", "15"))
READY = "abuse in place"
BROKER_ARGS = ("--log-level", "ERROR", "--handshake-timeout", "5", "--frame-timeout", "5")


def _rss_mb(broker: BrokerProcess) -> float:
    assert broker.process is not None
    for line in Path(f"/proc/{broker.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _encode(command: BaseCommand, payload: frames.Payload | None = None) -> bytes:
    return frames.Frame(command=command, payload=payload).encode()


def _connect(port: int, *, handshake: bool = True) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    if handshake:
        sock.sendall(_encode(BaseCommand(type_=Type.CONNECT, connect=CommandConnect(
            client_version="abuse", protocol_version=20))))
        _read_until(sock, Type.CONNECTED)
    return sock


def _read_until(sock: socket.socket, kind: BaseCommand.Type) -> None:
    decoder = frames.StreamDecoder(8 << 20)
    while True:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("closed by the broker")
        if any(frame.command.type_ == kind for frame in decoder.feed(data)):
            return


def _fill_backlog(port: int, topic: str, count: int, size: int) -> None:
    sock = _connect(port)
    sock.sendall(_encode(BaseCommand(type_=Type.PRODUCER, producer=CommandProducer(
        topic=topic, producer_id=1, request_id=1, producer_name="abuse-backlog"))))
    _read_until(sock, Type.PRODUCER_SUCCESS)
    body = b"b" * size
    sock.sendall(b"".join(_encode(BaseCommand(type_=Type.SEND, send=CommandSend(
        producer_id=1, sequence_id=i, num_messages=1)), frames.Payload(
        metadata=MessageMetadata(producer_name="abuse-backlog", sequence_id=i,
                                 publish_time=int(time.time() * 1000)), data=body))
        for i in range(count)))
    decoder = frames.StreamDecoder()
    receipts = 0
    while receipts < count:
        received = decoder.feed(sock.recv(65536))
        receipts += sum(frame.command.type_ == Type.SEND_RECEIPT for frame in received)
    sock.close()


def abuse(port: int, seconds: float) -> None:
    """Abuse the broker on ``port`` for ``seconds`` (run in a child process by ``main``)."""
    _fill_backlog(port, "abuse-backlog", 2400, 10_000)
    stop = time.monotonic() + seconds
    held: list[socket.socket] = []
    for i in range(8):
        sock = _connect(port)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
        sock.sendall(_encode(BaseCommand(type_=Type.SUBSCRIBE, subscribe=CommandSubscribe(
            topic="abuse-backlog", subscription=f"never-reads-{i}",
            subType=CommandSubscribe.SubType.Exclusive, consumer_id=1, request_id=1,
            initialPosition=CommandSubscribe.InitialPosition.Earliest))))
        _read_until(sock, Type.SUCCESS)
        sock.sendall(_encode(BaseCommand(type_=Type.FLOW, flow=CommandFlow(
            consumer_id=1, messagePermits=10**9))))
        held.append(sock)
    big = _encode(BaseCommand(type_=Type.SEND, send=CommandSend(
        producer_id=1, sequence_id=0, num_messages=1)), frames.Payload(
        metadata=MessageMetadata(producer_name="p", sequence_id=0, publish_time=1),
        data=b"\0" * (5 * (1 << 20) - 64)))
    trickle = _encode(BaseCommand(type_=Type.PRODUCER, producer=CommandProducer(
        topic="slow", producer_id=1, request_id=1)))

    def idle() -> None:
        while time.monotonic() < stop:
            socks = []
            for _ in range(500):
                try:
                    socks.append(_connect(port, handshake=False))
                except OSError:
                    break
            time.sleep(6)  # the broker closes them at 5 s; open the next lot
            for sock in socks:
                sock.close()

    def trickling() -> None:
        while time.monotonic() < stop:
            socks = [_connect(port) for _ in range(20)]
            for i in range(len(trickle)):
                if time.monotonic() >= stop:
                    break
                alive = []
                for sock in socks:
                    try:
                        sock.sendall(trickle[i:i + 1])
                        alive.append(sock)
                    except OSError:
                        sock.close()
                socks = alive
                if not socks:
                    break
                time.sleep(0.2)

    def parking() -> None:
        while time.monotonic() < stop:
            socks = []
            for _ in range(8):
                try:
                    sock = _connect(port)
                    sock.sendall(big[:-1])
                    socks.append(sock)
                except OSError:
                    pass
            time.sleep(2)
            for sock in socks:
                sock.close()

    threads = [threading.Thread(target=job, daemon=True) for job in (idle, trickling, parking)]
    for thread in threads:
        thread.start()
    time.sleep(2)  # the first lots connected
    print(READY, flush=True)
    for thread in threads:
        thread.join(max(0.0, stop - time.monotonic()) + 10)
    for sock in held:
        sock.close()


async def _round_trips(url: str, seconds: float, tag: str) -> list[float]:
    async with PulsarClient(url) as client:
        topic = f"round-trip-{tag}"
        consumer = await client.subscribe(topic, "sub")
        producer = await client.create_producer(topic, batching_enabled=False)
        times = []
        i = 0
        end = None
        while end is None or time.perf_counter() < end:
            i += 1
            data = i.to_bytes(4, "big") + b"r" * 96
            began = time.perf_counter()
            await producer.send(data)
            message = await consumer.receive()
            if i > 50:
                times.append(time.perf_counter() - began)
            elif i == 50:
                end = time.perf_counter() + seconds
            assert message.data() == data, "a round trip got another message"
            await consumer.acknowledge(message)
        await producer.close()
        await consumer.close()
        return times


def _summary(name: str, times: list[float]) -> str:
    ordered = sorted(times)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return (f"{name:<14} n={len(ordered):<5} p50 {at(0.50):7.2f} ms   p99 {at(0.99):7.2f} ms"
            f"   max {ordered[-1] * 1000:7.2f} ms")


def main() -> None:
    print(f"load average: {os.getloadavg()}")
    with BrokerProcess(extra_args=BROKER_ARGS) as broker:
        port = int(broker.url.rsplit(":", 1)[1])
        print(f"broker RSS at start: {_rss_mb(broker):.1f} MB")
        quiet = asyncio.run(_round_trips(broker.url, SECONDS, "quiet"))
        print(f"broker RSS after the quiet phase: {_rss_mb(broker):.1f} MB")
        root = Path(__file__).resolve().parent.parent
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", ""))
                                            if p)
        abuser = subprocess.Popen(
            [sys.executable, "-c",
             f"from bench.bench_broker_abuse import abuse; abuse({port}, 3600)"],
            env=env, cwd=root, stdout=subprocess.PIPE, text=True)
        try:
            assert abuser.stdout is not None
            for line in abuser.stdout:
                if line.strip() == READY:
                    break
            else:
                raise RuntimeError(f"the abuser exited with {abuser.wait()}")
            abused = asyncio.run(_round_trips(broker.url, SECONDS, "abused"))
            print(f"broker RSS at the end of the abused phase: {_rss_mb(broker):.1f} MB")
        finally:
            abuser.kill()
            abuser.wait()
    print(_summary("quiet", quiet))
    print(_summary("under abuse", abused))
    print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()
