"""A process that runs a command (the Pulsar standalone's JVM) and ends it when the process that
started the watchdog is gone, so a test run killed with SIGKILL leaves no JVM behind.

    python tests/support/watchdog.py PARENT_PID PID_FILE CLEANUP_DIR -- COMMAND...

The command runs in a session of its own (its own process group), as the watchdog's child: the
watchdog writes its pid to PID_FILE and polls its own parent pid; once that is no longer
PARENT_PID (the parent died and the watchdog was re-parented), it sends SIGTERM to the command's
process group, SIGKILL after a grace period, and removes CLEANUP_DIR (the data nobody is left to
remove; ``-`` for none). SIGTERM or SIGINT to the watchdog ends the command the same way, but
keeps the directory, which is how its starter stops it (and restarts it on the same data).
The watchdog exits with the command's exit status.

This file is run by path and imports nothing from the project: it starts before any of it would
be importable from the working directory it is given.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

POLL_SECONDS = 0.5
# The standalone's shutdown hook closes the broker, then the bookie; on a loaded machine that
# can take a while, but a JVM nobody waits for should not outlive its parent by much.
GRACE_SECONDS = 20.0


def end(child: subprocess.Popen[bytes], grace: float) -> int:
    """SIGTERM to the child's process group, SIGKILL if it is still there after ``grace``."""
    # The child is not reaped until wait() returns, so its pid (its group id) is still ours.
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            pass
        try:
            return child.wait(wait)
        except subprocess.TimeoutExpired:
            continue
    return child.wait()


def main(argv: list[str]) -> int:
    if len(argv) < 5 or argv[3] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    parent, pid_file, cleanup = int(argv[0]), Path(argv[1]), argv[2]
    command = argv[4:]
    if os.getppid() != parent:  # the parent died before we got here
        return 1
    stop_requested = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stop_requested
        stop_requested = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    child = subprocess.Popen(command, start_new_session=True, stdin=subprocess.DEVNULL)
    pid_file.write_text(f"{child.pid}\n")
    while True:
        try:
            return child.wait(POLL_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        if stop_requested:
            return end(child, GRACE_SECONDS)
        if os.getppid() != parent:
            status = end(child, GRACE_SECONDS)
            if cleanup != "-":
                shutil.rmtree(cleanup, ignore_errors=True)
            return status


if __name__ == "__main__":
    code = main(sys.argv[1:])
    # A child ended by a signal has a negative status; a shell would say 128 + the signal.
    sys.exit(code if code >= 0 else 128 - code)
