"""Apache Pulsar itself (standalone), started from the jars ``make pulsar`` fetches, for the tests
that hold our client and the embedded broker against the real broker.

One standalone serves a whole test session (it takes a minute to start on a loaded machine):
RocksDB metadata, one bookie, no functions worker, no stream storage, 127.0.0.1 only, free ports,
a small heap, ``interop/pulsar/standalone.conf`` with the ports and a fresh token secret
appended, data in a temporary directory. ``python -m tests.support.real_pulsar`` starts one by
hand and prints its URL (for ``PULSAR_URL=... make run``).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from protoframe.clients.pulsar import PulsarClient
from tests.support.paths import ROOT

PULSAR_DIR = ROOT / "interop" / "pulsar"
LIB = PULSAR_DIR / "target" / "lib"
FETCHED = LIB / ".fetched"
CONFIG = PULSAR_DIR / "standalone.conf"
LOG_CONFIG = PULSAR_DIR / "log4j2.xml"
NAMESPACE = "public/default"
# Pulsar 4 runs on Java 17 or newer.
JAVA_MIN = 17
# The JDK modules Pulsar reads into (its own start scripts open the same ones); without them it
# logs a stack trace per metrics collector.
JAVA_OPENS = ("java.management/sun.management", "jdk.management/com.sun.management.internal",
              "java.base/java.lang", "java.base/java.nio", "java.base/sun.nio.ch",
              "java.base/jdk.internal.misc")


def java_command() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def java_major(java: str) -> int | None:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.stderr.splitlines():
        if "version" in line and '"' in line:
            version = line.split('"')[1]
            head = version.split(".")[0]
            return int(head) if head.isdigit() else None
    return None


def unavailable_reason() -> str | None:
    """Why a standalone cannot start here, or None when it can."""
    java = java_command()
    if java is None:
        return "Apache Pulsar needs Java 17+: no java on PATH or in JAVA_HOME"
    major = java_major(java)
    if major is None or major < JAVA_MIN:
        return f"Apache Pulsar needs Java {JAVA_MIN}+ (found: {major})"
    if not FETCHED.exists():
        why = "" if shutil.which("mvn") else " (needs Maven: mvn is not installed)"
        return f"Apache Pulsar's jars are not fetched: run `make pulsar`{why}"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hs256_token(secret: bytes, subject: str) -> str:
    """A JWT signed with ``secret`` (HS256), as Pulsar's token provider checks them."""
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64url(json.dumps({"sub": subject}).encode())
    signature = hmac.new(secret, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64url(signature)}"


@dataclass
class RealPulsar:
    """A running standalone: its URLs, its token secret, its process."""

    url: str
    web_url: str
    secret: bytes
    process: subprocess.Popen[bytes]
    directory: Path
    startup_seconds: float = 0.0
    _log: Path = field(default=Path())

    def token(self, subject: str = "tester") -> str:
        return hs256_token(self.secret, subject)

    def admin(self, method: str, path: str, body: object = None, timeout: float = 60) -> object:
        """One admin REST call on the web port (``path`` below /admin/v2); its JSON answer."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.web_url}/admin/v2/{path}", data=data, method=method,
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    def create_partitioned_topic(self, topic: str, partitions: int) -> str:
        name = topic.rsplit("/", 1)[-1]
        self.admin("PUT", f"persistent/{NAMESPACE}/{urllib.parse.quote(name)}/partitions",
                   partitions)
        return f"persistent://{NAMESPACE}/{name}"

    def delete_all_topics(self) -> None:
        """Every topic of public/default, so a scenario starts as on a fresh embedded broker."""
        partitioned = self.admin("GET", f"persistent/{NAMESPACE}/partitioned")
        assert isinstance(partitioned, list)
        for full in partitioned:
            name = str(full).rsplit("/", 1)[-1]
            self.admin("DELETE", f"persistent/{NAMESPACE}/{urllib.parse.quote(name)}"
                                 "/partitions?force=true")
        topics = self.admin("GET", f"persistent/{NAMESPACE}")
        assert isinstance(topics, list)
        for full in topics:
            name = str(full).rsplit("/", 1)[-1]
            try:
                self.admin("DELETE", f"persistent/{NAMESPACE}/{urllib.parse.quote(name)}"
                                     "?force=true")
            except urllib.error.HTTPError as error:
                if error.code != 404:  # a partition that went with its partitioned topic
                    raise

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self._log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 60) -> None:
        """End the standalone (by its pid: SIGTERM runs its shutdown hook), then its data."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        shutil.rmtree(self.directory, ignore_errors=True)


async def _answers_a_lookup(url: str) -> None:
    async with PulsarClient(url, operation_timeout_seconds=30) as client:
        producer = await client.create_producer("readiness-probe")
        await producer.close()


def _namespace_ready(web_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{web_url}/admin/v2/namespaces/public",
                                    timeout=10) as response:
            return NAMESPACE in json.loads(response.read())
    except (OSError, ValueError):
        return False


def start(timeout: float = 240) -> RealPulsar:
    """Start a standalone and return once it answers a lookup; raise (and stop it) otherwise.

    The default ``timeout`` stays under pytest's per-test limit (300 s, which counts the
    session fixture's start-up against the first test), so a slow start fails with the
    standalone's log rather than with pytest-timeout's stack dump."""
    reason = unavailable_reason()
    if reason is not None:
        raise RuntimeError(reason)
    java = java_command()
    assert java is not None
    directory = Path(tempfile.mkdtemp(prefix="protoframe-pulsar-"))
    broker_port, web_port = free_port(), free_port()
    secret = os.urandom(32)
    config = directory / "standalone.conf"
    config.write_text(CONFIG.read_text() + "\n# Appended by tests/support/real_pulsar.py\n"
                      f"brokerServicePort={broker_port}\nwebServicePort={web_port}\n"
                      f"tokenSecretKey=data:;base64,{base64.b64encode(secret).decode()}\n")
    log = directory / "standalone.log"
    command = [
        java, "-Xms128m", "-Xmx512m", "-XX:MaxDirectMemorySize=256m", "-XX:+UseSerialGC",
        f"-Dlog4j.configurationFile={LOG_CONFIG}",
        *(f"--add-opens={module}=ALL-UNNAMED" for module in JAVA_OPENS),
        "-cp", f"{LIB}/*", "org.apache.pulsar.PulsarStandaloneStarter",
        "--config", str(config), "--no-functions-worker", "--no-stream-storage", "--wipe-data",
        "--advertised-address", "127.0.0.1", "--bookkeeper-port", "0",
        "--metadata-dir", str(directory / "metadata"),
        "--bookkeeper-dir", str(directory / "bookkeeper"),
    ]
    started = time.monotonic()
    with log.open("wb") as out:
        # cwd: the standalone's relative defaults (data/standalone/...) land in our directory.
        process = subprocess.Popen(command, cwd=directory, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    pulsar = RealPulsar(f"pulsar://127.0.0.1:{broker_port}", f"http://127.0.0.1:{web_port}",
                        secret, process, directory, _log=log)
    try:
        deadline = started + timeout
        while not _namespace_ready(pulsar.web_url):
            if process.poll() is not None:
                raise RuntimeError(f"the standalone exited ({process.returncode}):\n"
                                   + pulsar.log_tail())
            if time.monotonic() > deadline:
                raise RuntimeError(f"the standalone did not start in {timeout:.0f} s:\n"
                                   + pulsar.log_tail())
            time.sleep(0.5)
        asyncio.run(asyncio.wait_for(_answers_a_lookup(pulsar.url),
                                     max(30.0, deadline - time.monotonic())))
    except BaseException:
        pulsar.stop()
        raise
    pulsar.startup_seconds = time.monotonic() - started
    return pulsar


def _exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main() -> None:
    # Started in the background, a shell leaves SIGINT ignored: both signals stop it, by the
    # finally below.
    signal.signal(signal.SIGINT, _exit)
    signal.signal(signal.SIGTERM, _exit)
    pulsar = start()
    print(f"Apache Pulsar standalone up in {pulsar.startup_seconds:.1f} s (pid "
          f"{pulsar.process.pid}, data in {pulsar.directory})\n"
          f"PULSAR_URL={pulsar.url}\nweb: {pulsar.web_url}\nCtrl-C stops it.", flush=True)
    try:
        pulsar.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        pulsar.stop()


if __name__ == "__main__":
    main()
