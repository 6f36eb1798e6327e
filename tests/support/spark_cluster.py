"""A Spark standalone cluster on 127.0.0.1 for tests: a master and two workers, each its own JVM,
started with PySpark's own ``spark-class`` (``SPARK_HOME`` is the pyspark package), so the data
source's tasks run in executor JVMs and Python workers apart from the test process, as they
would on a real cluster.

Free ports, work and log directories in a temporary directory, small heaps, one core per worker.
``start`` returns once both workers are registered with the master (its ``/json`` page);
``SparkCluster.stop`` ends the JVMs by their pids (each started in a session of its own: its
process group holds the executors a worker started too). An ``orphan_watchdog`` ends the same
groups if the test process dies without stopping them (SIGKILL included).

``session`` builds the SparkSession on the cluster (the pipeline's ``local_session`` with the
cluster's master URL); ``executor_of_this_process`` tells, inside a task, which executor runs it.
``python -m tests.support.spark_cluster`` starts one by hand and prints its pids.

Executors import this module (``executor_of_this_process`` is pickled by reference): it imports
nothing but the standard library and pyspark.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.orphan_watchdog import Watchdog, end_groups
from tests.support.paths import ROOT

WORKERS = 2
# Spark refuses an executor heap under 450 MiB (1.5 x its reserved memory).
EXECUTOR_MEMORY = "512m"
DAEMON_MEMORY = "256m"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class SparkCluster:
    """A running master and its workers: URLs, processes, the directory they write in."""

    master_url: str
    web_url: str
    directory: Path
    processes: list[subprocess.Popen[bytes]]
    watchdog: Watchdog
    startup_seconds: float = 0.0
    logs: list[Path] = field(default_factory=list)

    @property
    def work_dir(self) -> Path:
        """Where the workers run their executors: ``<work_dir>/<app id>/<executor id>``."""
        return self.directory / "work"

    def state(self) -> dict[str, Any]:
        """The master's view of the cluster (its web UI's JSON page)."""
        with urllib.request.urlopen(f"{self.web_url}/json", timeout=10) as response:
            found: dict[str, Any] = json.loads(response.read())
        return found

    def alive_workers(self) -> int:
        try:
            workers = self.state().get("workers", [])
        except (OSError, ValueError):
            return 0
        return sum(1 for worker in workers if worker.get("state") == "ALIVE")

    def log_tail(self, lines: int = 30) -> str:
        parts = []
        for log in self.logs:
            try:
                text = log.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            parts.append(f"--- {log.name}\n" + "\n".join(text))
        return "\n".join(parts)

    def stop(self, timeout: float = 60) -> None:
        """SIGTERM the workers, then the master (by their pids); SIGKILL what outlives
        ``timeout``, and whatever their groups still hold (executors); then the files."""
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout)
        end_groups([process.pid for process in self.processes])
        self.watchdog.close()
        shutil.rmtree(self.directory, ignore_errors=True)


def _daemon(cluster: SparkCluster, name: str, args: list[str], env: dict[str, str]) -> None:
    log = cluster.directory / "logs" / f"{name}.log"
    cluster.logs.append(log)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args], cwd=cluster.directory,
            env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
    cluster.processes.append(process)
    cluster.watchdog.watch(process.pid)


def start(workers: int = WORKERS, timeout: float = 180) -> SparkCluster:
    """Start a master and ``workers`` workers; return once all are registered, or raise (and
    stop what started) with the end of their logs."""
    directory = Path(tempfile.mkdtemp(prefix="protoframe-spark-cluster-"))
    for sub in ("logs", "work", "conf"):
        (directory / sub).mkdir()
    port, web_port = free_port(), free_port()
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(directory / "work"),
        "SPARK_LOG_DIR": str(directory / "logs"),
        # An empty configuration directory: no spark-env.sh or defaults of the machine's.
        "SPARK_CONF_DIR": str(directory / "conf"),
        "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
        "SPARK_NO_DAEMONIZE": "1",
    }
    started = time.monotonic()
    cluster = SparkCluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web_port}",
                           directory, [], Watchdog(directory))
    try:
        _daemon(cluster, "master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                    "--port", str(port), "--webui-port", str(web_port)], env)
        for n in range(workers):
            _daemon(cluster, f"worker-{n}", [
                "org.apache.spark.deploy.worker.Worker", cluster.master_url, "--cores", "1",
                "--memory", "1g", "--host", "127.0.0.1", "--port", str(free_port()),
                "--webui-port", str(free_port()), "--work-dir", str(cluster.work_dir)], env)
        deadline = started + timeout
        while cluster.alive_workers() < workers:
            for process in cluster.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited ({process.returncode}):\n"
                                       + cluster.log_tail())
            if time.monotonic() > deadline:
                raise RuntimeError(f"{workers} workers did not register in {timeout:.0f} s:\n"
                                   + cluster.log_tail())
            time.sleep(0.5)
    except BaseException:
        cluster.stop()
        raise
    cluster.startup_seconds = time.monotonic() - started
    return cluster


def session_conf(import_roots: list[str]) -> dict[str, str]:
    """The settings that put an application on the cluster's two one-core executors, with
    Python workers that run this interpreter and import protoframe (and ``tests``) from
    ``import_roots``."""
    path = os.pathsep.join(dict.fromkeys(import_roots))
    return {
        "spark.executor.memory": EXECUTOR_MEMORY,
        "spark.executor.cores": "1",
        "spark.cores.max": str(WORKERS),
        # Jobs wait until every executor is up, so that tasks spread over both of them.
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        "spark.scheduler.maxRegisteredResourcesWaitingTime": "180s",
        "spark.pyspark.python": sys.executable,
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        "spark.executorEnv.PYTHONPATH": path,
        "spark.executorEnv.SPARK_LOCAL_IP": "127.0.0.1",
    }


def session(cluster: SparkCluster, app_name: str, timeout: float = 180) -> Any:
    """A SparkSession on ``cluster``, returned once all its executors are registered."""
    from protoframe import import_root
    from protoframe.pipeline.spark_session import local_session

    spark = local_session(app_name, master=cluster.master_url,
                          conf=session_conf([import_root(), str(ROOT)]))
    deadline = time.monotonic() + timeout
    while len(executor_ids(spark)) < WORKERS:
        if time.monotonic() > deadline:
            spark.stop()
            raise RuntimeError(f"{WORKERS} executors did not register in {timeout:.0f} s:\n"
                               + cluster.log_tail())
        time.sleep(0.5)
    return spark


def executor_ids(spark: Any) -> list[str]:
    """The ids of the executors registered with the driver."""
    ids = spark.sparkContext._jsc.sc().getExecutorIds()
    return [str(ids.apply(i)) for i in range(ids.size())]


def jvm_pid(spark: Any) -> int:
    """The pid of the driver's JVM."""
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def executor_of_this_process() -> str:
    """Inside a task: JSON of the executor's id, its JVM's pid and its working directory.

    A standalone worker runs each executor in ``<work dir>/<app id>/<executor id>``, and the
    executor's Python workers inherit that directory; the JVM is the nearest ``java`` among
    the process's ancestors (a Python worker is forked from the executor's daemon.py).
    """
    cwd = Path.cwd()
    pid = os.getppid()
    while pid > 1:
        status = Path(f"/proc/{pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("Name", "").strip() == "java":
            break
        pid = int(fields["PPid"])
    return json.dumps({"executor": cwd.name, "jvm": pid, "cwd": str(cwd)})


def _exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main() -> None:
    # Started in the background, a shell leaves SIGINT ignored: both signals stop it, by the
    # finally below.
    signal.signal(signal.SIGINT, _exit)
    signal.signal(signal.SIGTERM, _exit)
    cluster = start()
    print(f"Spark standalone cluster up in {cluster.startup_seconds:.1f} s: {cluster.master_url} "
          f"(web {cluster.web_url}); pids {[p.pid for p in cluster.processes]}, watchdog "
          f"{cluster.watchdog.process.pid}, files in {cluster.directory}", flush=True)
    try:
        cluster.processes[0].wait()
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
