"""Apache Pulsar itself (standalone), started from the jars ``make pulsar`` fetches, for the tests
that hold our client and the embedded broker against the real broker.

One standalone serves a whole test session (it takes a minute to start on a loaded machine):
RocksDB metadata, one bookie, no functions worker, no stream storage, 127.0.0.1 only, free ports,
a small heap, ``interop/pulsar/standalone.conf`` with the ports, a fresh token secret and TLS
(a certificate for 127.0.0.1 from a CA made at start) appended, data in a temporary directory.
The JVM runs under tests/support/watchdog.py, which ends it (and removes its data) if the
process that started it dies, even by SIGKILL. ``RealPulsar.restart`` starts it again on the same
ports and data. ``python -m tests.support.real_pulsar`` starts one by hand and prints its URL
(for ``PULSAR_URL=... make run``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
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
WATCHDOG = Path(__file__).with_name("watchdog.py")
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
class Tls:
    """The TLS side of a standalone: its URLs and the CA file a client trusts them with."""

    url: str
    web_url: str
    ca_file: Path


def make_certificates(directory: Path) -> tuple[Path, Path, Path] | None:
    """A CA and a server certificate it signed, for 127.0.0.1 and localhost, in ``directory``:
    (CA certificate, server certificate, server key), or None without the openssl command."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key = directory / "ca.pem", directory / "ca.key"
    cert, key = directory / "server.pem", directory / "server.key"
    request, extensions = directory / "server.csr", directory / "server.ext"
    extensions.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                          "extendedKeyUsage=serverAuth\n")
    steps = [
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca),
         "-days", "2", "-subj", "/CN=protoframe test CA",
         "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        # PKCS#8 keys (openssl 3's default), which is what the broker's TLS reads.
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(request),
         "-subj", "/CN=127.0.0.1"],
        ["x509", "-req", "-in", str(request), "-CA", str(ca), "-CAkey", str(ca_key),
         "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(extensions)],
    ]
    for step in steps:
        subprocess.run([openssl, *step], check=True, capture_output=True, timeout=60)
    return ca, cert, key


@dataclass
class RealPulsar:
    """A running standalone: its URLs, its token secret, its process (the watchdog that runs
    its JVM, tests/support/watchdog.py), and what it takes to start it again on the same ports
    and data."""

    url: str
    web_url: str
    secret: bytes
    process: subprocess.Popen[bytes]
    directory: Path
    startup_seconds: float = 0.0
    tls: Tls | None = None
    _log: Path = field(default=Path())
    _command: list[str] = field(default_factory=list)

    def token(self, subject: str = "tester") -> str:
        return hs256_token(self.secret, subject)

    def jvm_pid(self) -> int | None:
        """The pid of the standalone's JVM (the watchdog's child), once it has one."""
        try:
            return int((self.directory / "jvm.pid").read_text())
        except (OSError, ValueError):
            return None

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

    def update_partitioned_topic(self, topic: str, partitions: int) -> str:
        name = topic.rsplit("/", 1)[-1]
        self.admin("POST", f"persistent/{NAMESPACE}/{urllib.parse.quote(name)}/partitions",
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

    def halt(self, timeout: float = 60) -> None:
        """End the standalone, keeping its data (SIGTERM to the watchdog, which passes it on to
        the JVM, whose shutdown hook closes the broker and the bookie)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                # The watchdog still holds its unreaped child, so the JVM's pid is its own.
                jvm = self.jvm_pid()
                if jvm is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(jvm, signal.SIGKILL)
                self.process.kill()
                self.process.wait(timeout)

    def stop(self, timeout: float = 60) -> None:
        """End the standalone (by its watchdog's pid), then remove its data."""
        self.halt(timeout)
        shutil.rmtree(self.directory, ignore_errors=True)

    def restart(self, timeout: float = 240) -> float:
        """Stop the standalone and start it again on the same ports and data (no wipe); the
        seconds the start took."""
        self.halt()
        (self.directory / "jvm.pid").unlink(missing_ok=True)
        command = [arg for arg in self._command if arg != "--wipe-data"]
        started = time.monotonic()
        self.process = _launch(command, self.directory, self._log)
        self._await_ready(started, timeout)
        return time.monotonic() - started

    def _await_ready(self, started: float, timeout: float) -> None:
        try:
            deadline = started + timeout
            while not _namespace_ready(self.web_url):
                if self.process.poll() is not None:
                    raise RuntimeError(f"the standalone exited ({self.process.returncode}):\n"
                                       + self.log_tail())
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the standalone did not start in {timeout:.0f} s:\n"
                                       + self.log_tail())
                time.sleep(0.5)
            asyncio.run(asyncio.wait_for(_answers_a_lookup(self.url),
                                         max(30.0, deadline - time.monotonic())))
        except BaseException:
            self.stop()
            raise


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


def _launch(command: list[str], directory: Path, log: Path) -> subprocess.Popen[bytes]:
    """Run ``command`` (the JVM) under the watchdog, which ends it if we die (even by SIGKILL,
    which runs no cleanup of ours) and then removes ``directory``."""
    watched = [sys.executable, str(WATCHDOG), str(os.getpid()), str(directory / "jvm.pid"),
               str(directory), "--", *command]
    with log.open("ab") as out:
        # cwd: the standalone's relative defaults (data/standalone/...) land in our directory.
        # A session of its own: the terminal's Ctrl-C reaches pytest, whose fixture stops it.
        return subprocess.Popen(watched, cwd=directory, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def start(timeout: float = 240, tls: bool = True, quick_jit: bool = True) -> RealPulsar:
    """Start a standalone and return once it answers a lookup; raise (and stop it) otherwise.

    With ``tls`` (and the openssl command) it also listens with TLS, with a certificate for
    127.0.0.1 from a CA made for it (``RealPulsar.tls``). ``quick_jit`` compiles with C1 only:
    the start-up takes half the CPU (11 s instead of 20 s measured, 46 s instead of 93 s on a
    loaded machine), and the tests' light traffic never needs C2's faster code; a benchmark
    does, so it passes False. The default ``timeout`` stays under
    pytest's per-test limit (300 s, which counts the session fixture's start-up against the
    first test), so a slow start fails with the standalone's log rather than with
    pytest-timeout's stack dump."""
    reason = unavailable_reason()
    if reason is not None:
        raise RuntimeError(reason)
    java = java_command()
    assert java is not None
    directory = Path(tempfile.mkdtemp(prefix="protoframe-pulsar-"))
    # A fixed bookie port, not 0: the bookie's id is its address and port, which the ledgers'
    # metadata names, so a restart on the same data must find the bookie where it was.
    broker_port, web_port, bookie_port = free_port(), free_port(), free_port()
    secret = os.urandom(32)
    appended = (f"brokerServicePort={broker_port}\nwebServicePort={web_port}\n"
                f"tokenSecretKey=data:;base64,{base64.b64encode(secret).decode()}\n")
    certificates = make_certificates(directory / "tls") if tls else None
    tls_side = None
    if certificates is not None:
        ca, cert, key = certificates
        tls_port, web_tls_port = free_port(), free_port()
        appended += (f"brokerServicePortTls={tls_port}\nwebServicePortTls={web_tls_port}\n"
                     f"tlsCertificateFilePath={cert}\ntlsKeyFilePath={key}\n"
                     f"tlsTrustCertsFilePath={ca}\n")
        tls_side = Tls(f"pulsar+ssl://127.0.0.1:{tls_port}", f"https://127.0.0.1:{web_tls_port}",
                       ca)
    config = directory / "standalone.conf"
    config.write_text(CONFIG.read_text() + "\n# Appended by tests/support/real_pulsar.py\n"
                      + appended)
    log = directory / "standalone.log"
    command = [
        java, "-Xms128m", "-Xmx512m", "-XX:MaxDirectMemorySize=256m", "-XX:+UseSerialGC",
        *(["-XX:TieredStopAtLevel=1"] if quick_jit else []),
        f"-Dlog4j.configurationFile={LOG_CONFIG}",
        *(f"--add-opens={module}=ALL-UNNAMED" for module in JAVA_OPENS),
        "-cp", f"{LIB}/*", "org.apache.pulsar.PulsarStandaloneStarter",
        "--config", str(config), "--no-functions-worker", "--no-stream-storage", "--wipe-data",
        "--advertised-address", "127.0.0.1", "--bookkeeper-port", str(bookie_port),
        "--metadata-dir", str(directory / "metadata"),
        "--bookkeeper-dir", str(directory / "bookkeeper"),
    ]
    started = time.monotonic()
    process = _launch(command, directory, log)
    pulsar = RealPulsar(f"pulsar://127.0.0.1:{broker_port}", f"http://127.0.0.1:{web_port}",
                        secret, process, directory, tls=tls_side, _log=log, _command=command)
    pulsar._await_ready(started, timeout)
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
          f"{pulsar.jvm_pid()}, data in {pulsar.directory})\n"
          f"PULSAR_URL={pulsar.url}\nweb: {pulsar.web_url}", flush=True)
    if pulsar.tls is not None:
        print(f"TLS: {pulsar.tls.url} and {pulsar.tls.web_url}, CA {pulsar.tls.ca_file}")
    print("Ctrl-C stops it.", flush=True)
    try:
        pulsar.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        pulsar.stop()


if __name__ == "__main__":
    main()
