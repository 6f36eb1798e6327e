"""The Apache Pulsar standalone's life (tests/support/real_pulsar.py): its JVM ends with the
process that started it, even one killed with SIGKILL; and after a restart on the same ports and
data, producers and consumers of both clients (ours and the official one) reconnect, and nothing
the broker acknowledged is lost.

Each test starts a standalone of its own, so the session's stays undisturbed: ``slow``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from protoframe.clients.pulsar import Consumer, PulsarClient, Timeout
from tests.support import real_pulsar
from tests.support.paths import ROOT
from tests.support.real_pulsar import RealPulsar

pytestmark = pytest.mark.slow

# The watchdog gives the JVM 20 s to shut down after SIGTERM before SIGKILL; on a loaded machine
# its polling and the kill take a few more.
GONE_WITHIN = 60.0


@pytest.fixture(autouse=True)
def _needs_the_standalone() -> None:
    reason = real_pulsar.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


def running(pid: int, marker: str) -> bool:
    """Whether ``pid`` is a live (not zombie) process whose command line holds ``marker``: a pid
    the system gave to another process since is not the one we started."""
    proc = Path(f"/proc/{pid}")
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return state != "Z" and marker in cmdline


def wait_for(condition: object, timeout: float, what: str) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout:.0f} s")
        time.sleep(0.2)


def test_the_jvm_does_not_outlive_the_process_that_started_it(tmp_path: Path) -> None:
    # The launcher makes its data directory with tempfile, so TMPDIR puts it where we look.
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    child = subprocess.Popen(
        [sys.executable, "-c", "from tests.support import real_pulsar; real_pulsar.start()"],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    jvm: int | None = None
    watchdog: int | None = None
    marker = ""
    try:
        def jvm_started() -> bool:
            nonlocal jvm, marker
            for pid_file in tmp_path.glob("protoframe-pulsar-*/jvm.pid"):
                text = pid_file.read_text().strip()
                if text.isdigit():
                    jvm, marker = int(text), str(pid_file.parent / "standalone.conf")
                    return True
            return child.poll() is not None

        wait_for(jvm_started, 120, "the launcher started no JVM")
        assert jvm is not None, f"the launcher exited ({child.returncode}) before its JVM started"
        assert running(jvm, marker)
        watchdog = int(Path(f"/proc/{jvm}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert running(watchdog, "watchdog.py")

        child.send_signal(signal.SIGKILL)  # no cleanup of the child's own runs
        child.wait(30)
        started = time.monotonic()
        wait_for(lambda: not running(jvm, marker), GONE_WITHIN, "the JVM is still running")
        print(f"JVM gone {time.monotonic() - started:.1f} s after its starter's SIGKILL")
        wait_for(lambda: not running(watchdog, "watchdog.py"), 10, "the watchdog is still running")
        # Nobody is left to remove the standalone's data: the watchdog did.
        wait_for(lambda: not list(tmp_path.glob("protoframe-pulsar-*")), 30,
                 "the standalone's data directory is still there")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)
        # Should the watchdog have failed, the processes started here go all the same.
        for pid, name in ((watchdog, "watchdog.py"), (jvm, marker)):
            if pid is not None and name and running(pid, name):
                os.kill(pid, signal.SIGKILL)


# ---- reconnect after a restart -----------------------------------------------------------------


@pytest.fixture(scope="module")
def restartable() -> Iterator[RealPulsar]:
    """A standalone of this module's own, plain (no TLS: one thing less to start twice);
    skipped with the reason, as the session's standalone is, where it cannot start."""
    reason = real_pulsar.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    standalone = real_pulsar.start(tls=False)
    print(f"\n[a second standalone up in {standalone.startup_seconds:.1f} s]")
    try:
        yield standalone
    finally:
        standalone.stop()


BEFORE, AFTER = 20, 10


# Two start-ups (the module's standalone, then its restart) of up to 240 s each on a loaded
# machine: more than pytest's per-test 300 s, which counts the fixture's.
@pytest.mark.timeout(600)
def test_both_clients_reconnect_after_a_restart_and_lose_nothing_acknowledged(
        restartable: RealPulsar) -> None:
    """Both clients produce and consume part, the standalone restarts (SIGTERM, then again on the
    same ports and data), and the same producers and consumers carry on: every message whose
    send the broker acknowledged arrives (the ones acknowledged to the broker may not again;
    one whose acknowledgement the broker had not yet stored may, which Pulsar allows)."""
    url = restartable.url

    async def scenario() -> None:
        async with PulsarClient(url, operation_timeout_seconds=60) as ours:
            producer = await ours.create_producer("restart-ours", batching_enabled=False)
            consumer = await ours.subscribe("restart-ours", "s", initial_position="earliest")
            sent = [f"m{i}".encode() for i in range(BEFORE)]
            for data in sent:
                await producer.send(data)
            acked = []
            for _ in range(BEFORE // 2):
                msg = await consumer.receive(timeout_millis=30_000)
                await consumer.acknowledge(msg)
                acked.append(msg.data())

            official = pulsar.Client(url, operation_timeout_seconds=60,
                                     logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
            try:
                o_producer = official.create_producer("restart-official", batching_enabled=False)
                o_consumer = official.subscribe(
                    "restart-official", "s", initial_position=pulsar.InitialPosition.Earliest)
                for data in sent:
                    o_producer.send(data)
                o_acked = []
                for _ in range(BEFORE // 2):
                    msg = o_consumer.receive(30_000)
                    o_consumer.acknowledge(msg)
                    o_acked.append(msg.data())

                seconds = await asyncio.to_thread(restartable.restart)
                print(f"\n[the standalone restarted in {seconds:.1f} s]")

                later = [f"n{i}".encode() for i in range(AFTER)]
                for data in later:
                    await producer.send(data)
                    await asyncio.to_thread(o_producer.send, data)
                expected = set(sent + later) - set(acked)
                got = await receive_until(consumer, expected)
                o_expected = set(sent + later) - set(o_acked)
                o_got = await asyncio.to_thread(receive_official_until, o_consumer, o_expected)
            finally:
                official.close()
        assert expected <= got and got <= set(sent + later)
        assert o_expected <= o_got and o_got <= set(sent + later)

    asyncio.run(asyncio.wait_for(scenario(), 340))


async def receive_until(consumer: Consumer, expected: set[bytes]) -> set[bytes]:
    got: set[bytes] = set()
    while not expected <= got:
        try:
            msg = await consumer.receive(timeout_millis=60_000)
        except Timeout:
            break
        await consumer.acknowledge(msg)
        got.add(msg.data())
    return got


def receive_official_until(consumer: pulsar.Consumer, expected: set[bytes]) -> set[bytes]:
    got: set[bytes] = set()
    while not expected <= got:
        try:
            msg = consumer.receive(60_000)
        except pulsar.Timeout:
            break
        consumer.acknowledge(msg)
        got.add(msg.data())
    return got
