"""Random ``kill -9`` of the embedded broker during produce, consume and recovery, on its
--data-dir, with the official client and with ours (issue 18).

A seeded schedule (``PROTOFRAME_KILL_SEED``; ``PROTOFRAME_KILL_ROUNDS`` rounds per kind, for a
long campaign) of rounds on one data directory, the same schedule for each client. It starts
from a backlog of a few thousand one-message entries, so that recovering the log takes
measurable time. Each round starts the broker on a free port (unless the last round left it
running) and SIGKILLs it:

* ``produce``: at a random moment while a producer streams batches (a window of sends in
  flight, the same producer name every round). The broker then comes back on the same port;
  the producer, still open, reconnects and resends what had no receipt, which the broker's
  de-duplication, recovered from the log, must store once;
* ``consume``: at a random moment while a consumer of the durable subscription receives and
  acknowledges, closing and re-subscribing after a random number of acknowledgements;
* ``recovery``: at a random moment after the process opened its log to recover it (seen in
  /proc), before it listens (replay, the tail cut, compaction); the next start must recover.

At the end the broker starts once more, and a fresh subscription and the durable one are
drained. What is checked, with the guarantees it rests on:

* A send is acknowledged when its receipt arrived; the broker sends it after the entry is
  fsynced (Pulsar: after the bookies' ack quorum). Every acknowledged message is stored, and
  no message is stored twice (the producer's resends are de-duplicated, as by Pulsar with
  de-duplication on; the embedded broker always has it). Nothing is stored that was not sent,
  and what one producer session stored is a prefix of what it sent, in order (a kill cuts the
  log, it does not reorder it, and nothing is sent after it); a message that never got a
  receipt may or may not be there.
* Acknowledging a message is fire-and-forget in Pulsar (the client groups acks; the broker
  persists the cursor later): a crash may lose acknowledgements, and then the messages are
  delivered again. That is allowed. But the embedded broker answers a consumer's close only
  once its acknowledgements are on disk (stricter than Pulsar, whose cursor is persisted
  lazily, so that even those may come back there), so a message acknowledged before a close
  that returned before the kill must never be delivered to the subscription again. Batch
  index acks are on: without them a partly acknowledged batch comes back whole, as in Pulsar.
  No consumer gets one message twice (nothing asks for a redelivery while it is open), and
  every stored message never acknowledged is still in the durable subscription at the end.
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from protoframe.clients.pulsar import PulsarClient
from protoframe.clients.pulsar.broker import EmbeddedBroker
from protoframe.clients.pulsar.broker.storage import LOG_NAME
from tests.support.pulsar_kills import (
    SEND_TIMEOUT_MS,
    SIDES,
    CrashingBroker,
    Side,
    close_quietly,
)

TOPIC = "persistent://public/default/kill-harness"
SUBSCRIPTION = "durable"
PRODUCER = "kill-harness"
SEED = int(os.environ.get("PROTOFRAME_KILL_SEED", "18"))
ROUNDS_PER_KIND = int(os.environ.get("PROTOFRAME_KILL_ROUNDS", "2"))
KINDS = ("produce", "consume", "recovery")
BACKLOG = 3000  # messages, one per entry: entries make recovery slow, not bytes
WORK_SECONDS = 1.5  # a produce or consume round is killed within this
WINDOW = 400  # sends in flight at most (the official client's queue holds 1,000)
QUIET_MS = 1000  # a drain ends after this long without a message
BURST_GAP = 0.02  # a producer sends 50 messages this often: the drains stay short

pytestmark = [pytest.mark.slow, pytest.mark.interop]


def payload(session: str, seq: int) -> bytes:
    return f"{session}:{seq:06d}:".encode().ljust(64, b".")


def session_of(data: bytes) -> str:
    return data.split(b":", 1)[0].decode()


@dataclass
class Book:
    """What the clients did, shared with their callback threads (under ``lock``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    sent: dict[str, list[bytes]] = field(default_factory=dict)  # session -> in send order
    pending: dict[str, int] = field(default_factory=dict)  # session -> sends in flight
    acked: set[bytes] = field(default_factory=set)  # sends with a receipt
    ack_sent: set[bytes] = field(default_factory=set)  # acknowledged by a consumer
    ack_confirmed: set[bytes] = field(default_factory=set)  # ... and closed before the kill
    delivered: set[bytes] = field(default_factory=set)  # to the durable subscription
    redelivered: int = 0  # deliveries of a message delivered in an earlier session
    problems: list[str] = field(default_factory=list)
    killed: bool = False
    acked_at_kill: int = 0

    def send_done(self, session: str, data: bytes) -> Callable[[bool], None]:
        def done(ok: bool) -> None:
            with self.lock:
                self.pending[session] -= 1
                if ok:
                    self.acked.add(data)
        return done


@dataclass
class Round:
    kind: str
    at: float  # in [0, 1): where in the round's span the kill falls
    note: str = ""


def schedule(seed: int, per_kind: int) -> list[Round]:
    """``per_kind`` rounds of each kind in a random order; the kills of one kind are spread
    over their span (one in each of ``per_kind`` equal slices of it, at random within)."""
    rng = random.Random(seed)
    rounds = [Round(kind, (i + rng.random()) / per_kind)
              for kind in KINDS for i in range(per_kind)]
    rng.shuffle(rounds)
    return rounds


def kill_later(book: Book, broker: CrashingBroker, delay: float) -> threading.Timer:
    def kill() -> None:
        # The flag first: whatever a client saw complete before it is set happened before
        # the kill.
        with book.lock:
            book.killed = True
            book.acked_at_kill = len(book.acked)
        broker.kill()

    timer = threading.Timer(delay, kill)
    timer.start()
    return timer


def produce(side: Side, url: str, book: Book, session: str,
            kill: Callable[[], threading.Timer], restart: Callable[[], object]) -> int:
    """Stream batches of messages until the broker is killed; restart it (same port) and
    wait until what was pending is resent and acknowledged (or fails); how many were sent."""
    client = side.connect(url)
    try:
        producer = side.producer(client, TOPIC, PRODUCER, 100)
        sent = book.sent.setdefault(session, [])
        book.pending[session] = 0
        timer = kill()
        seq = 0
        while not book.killed:
            if book.pending[session] >= WINDOW:
                time.sleep(0.002)
                continue
            for _ in range(50):
                data = payload(session, seq)
                with book.lock:
                    sent.append(data)
                    book.pending[session] += 1
                side.send_async(producer, data, book.send_done(session, data))
                seq += 1
            time.sleep(BURST_GAP)
        timer.join()
        restart()
        deadline = time.monotonic() + SEND_TIMEOUT_MS / 1000 + 10
        while book.pending[session] and time.monotonic() < deadline:
            time.sleep(0.01)
        close_quietly(producer)
    finally:
        close_quietly(client)
    return seq


def consume(side: Side, url: str, book: Book, tag: str, rng: random.Random,
            kill: Callable[[], threading.Timer]) -> str:
    """Receive and acknowledge from the durable subscription until the broker is killed,
    closing the consumer after a random number of acknowledgements."""
    client = side.connect(url)
    sessions = confirmed = received = 0
    timer = kill()
    try:
        while not book.killed:
            try:
                consumer = side.subscribe(client, TOPIC, SUBSCRIPTION)
            except Exception:
                if book.killed:
                    break
                raise
            sessions += 1
            with book.lock:
                forbidden = set(book.ack_confirmed)
            seen: set[bytes] = set()
            acked: list[bytes] = []
            quota = rng.randint(20, 400)
            while len(acked) < quota and not book.killed:
                try:
                    got = side.receive(consumer, 200)
                except Exception:
                    if book.killed:
                        break
                    raise
                if got is None:
                    continue
                delivery, message = got
                data = delivery.data
                received += 1
                if data in forbidden:
                    book.problems.append(
                        f"{tag}: {data!r} delivered again after its acknowledgement was "
                        f"confirmed by a close (redelivery count {delivery.redelivery_count})")
                if data in seen:
                    book.problems.append(f"{tag}: {data!r} delivered twice to one consumer")
                seen.add(data)
                if data in book.delivered:
                    book.redelivered += 1
                book.delivered.add(data)
                consumer.acknowledge(message)
                book.ack_sent.add(data)
                acked.append(data)
            try:
                consumer.close()
                closed = True
            except Exception:
                closed = False
            with book.lock:
                if closed and not book.killed:
                    book.ack_confirmed.update(acked)
                    confirmed += len(acked)
    finally:
        timer.join()
        close_quietly(client)
    return f"{received} received, {sessions} consumers, {confirmed} acks confirmed by a close"


def drain(side: Side, url: str, subscriptions: list[str]) -> list[list[bytes]]:
    """Everything each subscription delivers until it is quiet (none is acknowledged); the
    subscriptions are drained side by side."""
    client = side.connect(url)

    def one(subscription: str) -> list[bytes]:
        consumer = side.subscribe(client, TOPIC, subscription)
        out: list[bytes] = []
        while (got := side.receive(consumer, QUIET_MS)) is not None:
            out.append(got[0].data)
        close_quietly(consumer)
        return out

    try:
        with ThreadPoolExecutor(len(subscriptions)) as pool:
            return list(pool.map(one, subscriptions))
    finally:
        close_quietly(client)


def audit(book: Book, stored: list[bytes], pending: list[bytes]) -> list[str]:
    """What the final drains show against the book: see the module's docstring."""
    problems = list(book.problems)
    stored_set = set(stored)
    if len(stored_set) != len(stored):
        problems.append(f"{len(stored) - len(stored_set)} messages stored twice")
    everything_sent = {data for sent in book.sent.values() for data in sent}
    if phantom := stored_set - everything_sent:
        problems.append(f"{len(phantom)} stored messages never sent, e.g. {min(phantom)!r}")
    if lost := book.acked - stored_set:
        problems.append(f"{len(lost)} acknowledged sends lost, e.g. {min(lost)!r}")
    for session, sent in book.sent.items():
        kept = [data for data in stored if session_of(data) == session]
        if kept != sent[:len(kept)]:
            problems.append(f"session {session}: stored messages are not a prefix of those "
                            f"sent, in order")
    pending_set = set(pending)
    if len(pending_set) != len(pending):
        problems.append(f"{len(pending) - len(pending_set)} delivered twice by the last drain")
    if extra := pending_set - stored_set:
        problems.append(f"{len(extra)} in the subscription but not in the topic")
    if back := pending_set & book.ack_confirmed:
        problems.append(f"{len(back)} messages whose acknowledgement was confirmed by a "
                        f"close are back in the subscription, e.g. {min(back)!r}")
    if missing := stored_set - book.ack_sent - pending_set:
        problems.append(f"{len(missing)} stored, never acknowledged messages are missing "
                        f"from the subscription, e.g. {min(missing)!r}")
    return problems


def backlog_messages() -> list[bytes]:
    return [payload("backlog", seq) for seq in range(BACKLOG)]


def write_backlog(data_dir: Path) -> None:
    """A log of ``BACKLOG`` acknowledged one-message entries, written by our client through
    an in-process broker (quicker than a subprocess)."""
    sent = backlog_messages()

    async def write() -> None:
        async with EmbeddedBroker(port=0, data_dir=data_dir) as url:
            async with PulsarClient(url, operation_timeout_seconds=30) as client:
                producer = await client.create_producer(TOPIC, PRODUCER, batching_enabled=False,
                                                        max_pending_messages=0)
                futures = [producer.send_async(data) for data in sent]
                await asyncio.wait_for(producer.flush(), 60)
                for future in futures:
                    future.result()  # raises unless acknowledged

    asyncio.run(write())


@pytest.fixture(scope="module")
def backlog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory holding the backlog, for each run to start from a copy of."""
    data_dir = tmp_path_factory.mktemp("backlog") / "data"
    write_backlog(data_dir)
    return data_dir


def recovery_stage(data_dir: Path, log_before: os.stat_result, spawned_ns: int) -> str:
    """Where a start killed before it listened was: the compaction writes a new log next to
    the old one, then renames it over the old one."""
    compact = data_dir / (LOG_NAME + ".compact")
    if compact.exists() and compact.stat().st_mtime_ns >= spawned_ns:
        return "while compacting"
    if os.stat(data_dir / LOG_NAME).st_ino != log_before.st_ino:
        return "after compacting, before listening"
    return "while replaying"


def run_schedule(side: Side, rounds: list[Round], tmp_path: Path,
                 backlog: Path) -> tuple[list[str], str]:
    """Run the rounds; the problems found and a summary of what happened."""
    data_dir = tmp_path / "data"
    shutil.copytree(backlog, data_dir)
    broker = CrashingBroker(data_dir, tmp_path / "broker.stderr")
    book = Book(sent={"backlog": backlog_messages()}, acked=set(backlog_messages()))
    lines = [f"backlog: {BACKLOG} entries, log {(data_dir / LOG_NAME).stat().st_size} bytes"]
    recovery = 0.0  # seconds from opening the log to listening, measured at each start

    def start(port: int = 0) -> str:
        nonlocal recovery
        launch = broker.launch(port=port)
        if launch.opened_log is not None and launch.ready is not None:
            recovery = launch.ready - launch.opened_log
        return launch.url

    try:
        url: str | None = start()
        assert url is not None
        # The subscription starts at the earliest message: the backlog is in it.
        client = side.connect(url)
        close_quietly(side.subscribe(client, TOPIC, SUBSCRIPTION))
        close_quietly(client)
        lines.append(f"the backlog recovers in {recovery:.3f} s")
        for index, plan in enumerate(rounds):
            tag = f"round {index} ({plan.kind})"
            began = time.monotonic()
            book.killed = False
            if plan.kind == "recovery":
                broker.kill()
                delay = plan.at * recovery
                log_before = os.stat(data_dir / LOG_NAME)
                spawned_ns = time.time_ns()
                launch = broker.launch(kill_after=delay)
                url = None
                stage = (recovery_stage(data_dir, log_before, spawned_ns)
                         if launch.ready is None else "just after it listened")
                plan.note = f"killed {delay:.3f} s into a recovery of ~{recovery:.3f} s, {stage}"
                lines.append(f"{tag}, {time.monotonic() - began:.1f} s: {plan.note}")
                continue
            url = url or start()  # the broker may be up: the first round, or after a produce
            delay = 0.05 + plan.at * (WORK_SECONDS - 0.05)

            def kill(delay: float = delay) -> threading.Timer:
                return kill_later(book, broker, delay)

            if plan.kind == "produce":
                before = len(book.acked)
                count = produce(side, url, book, f"r{index}", kill,
                                functools.partial(start, int(url.rsplit(":", 1)[1])))
                # The broker is up again, on the same url: the next round may use it.
                plan.note = (f"killed after {delay:.3f} s: {count} sent, "
                             f"{book.acked_at_kill - before} acknowledged before the kill, "
                             f"{len(book.acked) - book.acked_at_kill} after the restart")
            else:
                plan.note = (f"killed after {delay:.3f} s: "
                             + consume(side, url, book, tag, random.Random(f"{SEED}:{index}"),
                                       kill))
                url = None
            lines.append(f"{tag}, {time.monotonic() - began:.1f} s: {plan.note}")
        url = url or start()  # after a produce round, the broker up has just recovered
        stored, pending = drain(side, url, ["audit", SUBSCRIPTION])
        problems = audit(book, stored, pending)
        assert broker.stop() == 0, "the broker did not stop cleanly"
        logged = broker.stderr_path.read_text().splitlines()
        # A kill leaves at most a torn tail, which a start cuts with a warning; nothing the
        # broker does after a kill is an error.
        if errors := [line for line in logged
                      if " ERROR " in line or " CRITICAL " in line or "Traceback" in line]:
            problems.append(f"the broker logged {len(errors)} errors, e.g. {errors[0]}")
        torn = sum("torn or corrupt tail" in line for line in logged)
        sent = sum(len(s) for s in book.sent.values())
        lines.append(
            f"end: {sent} sent, {len(book.acked)} acknowledged, {len(stored)} stored "
            f"({len(set(stored) - book.acked)} of them without a receipt); "
            f"{len(book.ack_sent)} consumer acks, {len(book.ack_confirmed)} confirmed by a "
            f"close; {book.redelivered} redeliveries seen; "
            f"{len(set(pending) & book.ack_sent)} acknowledged messages back in the "
            f"subscription (acks lost to a kill); {len(pending)} left in it; "
            f"{torn} torn tails cut at a start")
        return problems, "\n".join(lines)
    finally:
        broker.kill()


@pytest.mark.timeout(150 + 60 * ROUNDS_PER_KIND)
@pytest.mark.parametrize("client", sorted(SIDES))
def test_kill_9_during_produce_consume_and_recovery(
        client: str, tmp_path: Path, backlog: Path) -> None:
    rounds = schedule(SEED, ROUNDS_PER_KIND)
    began = time.monotonic()
    problems, summary = run_schedule(SIDES[client], rounds, tmp_path, backlog)
    took = time.monotonic() - began
    report = (f"{client} client, seed {SEED} (PROTOFRAME_KILL_SEED), {len(rounds)} rounds, "
              f"{took:.1f} s\n{summary}")
    print(report)
    assert not problems, "\n".join(problems) + "\n" + report
    assert all(r.note for r in rounds), report
