"""Ends the process groups a test started once the test process is gone, however it went.

Servers that tests start as subprocesses (the JVMs of a Spark standalone cluster) outlive a
pytest that is SIGKILLed, or that dies before its fixtures' finalizers run: nothing else would
stop them. ``Watchdog`` starts ``python -m tests.support.orphan_watchdog`` with a pipe on its
stdin and writes to it the id of every process group to watch (each server is started in a
session of its own, so its group holds it and whatever it starts: a Spark worker's executor
JVMs and their Python workers). The pipe's only writer is the test process, so end of file
means that process closed it (a clean stop) or died: either way the watchdog then ends every
watched group that is still there, SIGTERM first, SIGKILL after a grace period, and removes the
directories named on its command line (the servers' files).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.paths import ROOT

GRACE_SECONDS = 10.0


def group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, but no longer ours: someone else's reused id
        return False
    return True


def end_groups(groups: list[int], grace: float = GRACE_SECONDS) -> None:
    """SIGTERM each group still there, then SIGKILL what is left after ``grace`` seconds."""
    alive = [group for group in groups if group_alive(group)]
    for group in alive:
        try:
            os.killpg(group, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [group for group in alive if group_alive(group)]
    for group in alive:
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Watchdog:
    """The watchdog process of one test fixture; ``watch`` each group right after starting it."""

    def __init__(self, *remove: Path) -> None:
        # A session of its own: a Ctrl-C in the terminal must not end it before the groups.
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.orphan_watchdog", *map(str, remove)], cwd=ROOT,
            stdin=subprocess.PIPE, start_new_session=True)

    def watch(self, group: int) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{group}\n".encode())
        self.process.stdin.flush()

    def close(self, timeout: float = 60) -> None:
        """Let the watchdog end what is left of the groups, and wait until it has."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    groups = [int(line) for line in sys.stdin]  # until end of file: the test process is done
    end_groups(groups)
    for directory in sys.argv[1:]:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
