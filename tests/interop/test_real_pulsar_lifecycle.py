"""The Apache Pulsar standalone's life (tests/support/real_pulsar.py): its JVM ends with the
process that started it, even one killed with SIGKILL.

Each test starts a standalone of its own, so the session's stays undisturbed: ``slow``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import real_pulsar
from tests.support.paths import ROOT

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
