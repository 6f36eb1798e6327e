"""A local Spark session for protoframe, and the Java check it needs.

Spark 4 runs on Java 17 or newer. ``java_version`` tells which ``java`` Spark would start
(tests and benchmarks skip without it), ``require_java`` fails saying how to install it, and
``local_session`` builds the session the tests, benchmarks and examples use.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from protoframe import import_root

JAVA_HINT = ("Spark needs Java 17 or newer; install it with "
             "`apt-get install openjdk-17-jre-headless` (or set JAVA_HOME).")


def java_version() -> int | None:
    """The major version of the ``java`` Spark would start, or None when there is none."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major  # "1.8" is Java 8


def require_java(minimum: int = 17) -> None:
    """Raise RuntimeError, saying how to install it, unless Java ``minimum``+ is available."""
    found = java_version()
    if found is None or found < minimum:
        have = "no java" if found is None else f"Java {found}"
        raise RuntimeError(f"{JAVA_HINT} Found: {have}.")


def local_session(app_name: str = "protoframe", master: str = "local[2]",
                  conf: dict[str, str] | None = None) -> SparkSession:
    """A local SparkSession set up for protoframe (tests, benchmarks, notebooks).

    Binds to 127.0.0.1 (``SPARK_LOCAL_IP``), runs Python workers with this interpreter and
    puts the directory holding ``protoframe`` on their ``PYTHONPATH`` (they import its
    ``generated``, ``runtime`` and ``pipeline``), disables the UI and uses few shuffle partitions.
    """
    require_java()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if import_root() not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([import_root(), *paths])
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    settings.update(conf or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
