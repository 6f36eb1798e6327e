"""tests/support/orphan_watchdog.py: the process groups a test process started die with it, even
when it is SIGKILLed (as the Spark cluster's JVMs must: tests/support/spark_cluster.py), and the
watchdog removes the directories it was given."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.orphan_watchdog import group_alive
from tests.support.paths import ROOT

if sys.platform == "win32":
    pytest.skip("process groups are POSIX", allow_module_level=True)

pytestmark = pytest.mark.slow  # processes started, killed and waited for

# A stand-in for a test process: it starts two servers (each a shell that starts a child of its
# own, as a Spark worker starts executors), watched, prints their pids, stops them ("close") or
# waits to be killed. It closes only once told to (a line on its stdin): the test checks the
# servers are up first, and they must still be.
STARTER = """
import subprocess, sys, time
from pathlib import Path
from tests.support.orphan_watchdog import Watchdog
watchdog = Watchdog(Path(sys.argv[1]))
servers = []
for _ in range(2):
    server = subprocess.Popen(["sh", "-c", "sleep 300 & wait"], start_new_session=True)
    watchdog.watch(server.pid)
    servers.append(server)
print(watchdog.process.pid, *(server.pid for server in servers), flush=True)
if sys.argv[2] == "close":
    sys.stdin.readline()
    # As SparkCluster.stop: the servers by their pids, then the watchdog for what they left.
    for server in servers:
        server.terminate()
        server.wait()
    watchdog.close()
    print("closed", flush=True)
time.sleep(300)
"""


def start(tmp_path: Path, how: str) -> tuple[subprocess.Popen[str], int, list[int]]:
    files = tmp_path / "files"
    files.mkdir()
    (files / "data").write_text("x")
    starter = subprocess.Popen([sys.executable, "-c", STARTER, str(files), how], cwd=ROOT,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert starter.stdout is not None
    watchdog, *groups = (int(word) for word in starter.stdout.readline().split())
    assert len(groups) == 2 and all(group_alive(group) for group in groups)
    return starter, watchdog, groups


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_gone(groups: list[int], timeout: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout
    alive = groups
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [group for group in alive if group_alive(group)]
    return alive


def test_groups_die_when_the_starter_is_sigkilled(tmp_path: Path) -> None:
    starter, watchdog, groups = start(tmp_path, "kill")
    try:
        time.sleep(0.5)
        assert all(group_alive(group) for group in groups)  # nothing ends them early
        os.kill(starter.pid, signal.SIGKILL)
        starter.wait(60)
        # The servers and the children they started (their whole groups) are gone, then the
        # watchdog (the starter's child: init reaps it), having removed the files.
        assert wait_gone(groups) == []
        deadline = time.monotonic() + 60
        while pid_alive(watchdog) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not pid_alive(watchdog)
        assert not (tmp_path / "files").exists()
    finally:
        for group in groups:
            if group_alive(group):
                os.killpg(group, signal.SIGKILL)


def test_close_ends_the_groups_and_the_watchdog(tmp_path: Path) -> None:
    starter, _, groups = start(tmp_path, "close")
    try:
        assert starter.stdin is not None and starter.stdout is not None
        starter.stdin.write("close\n")
        starter.stdin.flush()
        assert starter.stdout.readline().strip() == "closed"
        assert [group for group in groups if group_alive(group)] == []
        assert not (tmp_path / "files").exists()
    finally:
        starter.kill()
        starter.wait(60)
        for group in groups:
            if group_alive(group):
                os.killpg(group, signal.SIGKILL)
