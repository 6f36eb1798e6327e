"""Spark's own protobuf codec (``from_protobuf``, the ``spark-protobuf`` package) for the benches.

The package is not part of the PySpark wheel: Spark loads it with ``spark.jars.packages``
through its own (Ivy) resolver, from the default Maven repositories, into ``IVY_DIR`` inside
the repository (git-ignored, like ``interop/pulsar/target``), so a second run needs no network.
The coordinate follows the installed PySpark: its version and the Scala version of the
``scala-library`` jar it ships.

``resolve`` fetches it once, in a separate ``spark-submit`` that only resolves, so that a
failure is reported with Spark's own error text instead of a gateway that did not start.

Where the registry does not serve the package for this PySpark, a build of it made on the
machine can stand in: ``PROTOFRAME_SPARK_PROTOBUF_JARS`` names its jar and the protobuf-java
jars it needs (comma-separated paths), and the session loads them with ``spark.jars``. Nothing
of such a build is part of the repository; the bench prints which jars it used.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
IVY_DIR = REPO / "interop" / "spark" / "target" / "ivy"
RESOLVE_TIMEOUT_S = 600.0  # a cold fetch on a loaded machine
LOCAL_JARS_ENV = "PROTOFRAME_SPARK_PROTOBUF_JARS"

# Ivy prints a page of warnings around the one line that says why; these are that line.
_REASON_LINE = re.compile(r"unresolved dependency|Exception in thread|Exception:", re.I)
_ERROR_LINE = re.compile(r"Exception|Error|not found|FAILED", re.I)
# Addresses of repositories are not part of the reason (and vary with the resolver chain).
_ADDRESS = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+|\bHost \S+", re.I)


@dataclass(frozen=True)
class Package:
    coordinate: str  # group:artifact:version
    error: str | None  # why it could not be resolved; None when it is ready
    jars: tuple[str, ...] = ()  # a local build's jars, used instead of the coordinate

    def session_conf(self) -> dict[str, str]:
        """What a SparkSession needs to load the package (nothing when it is not ready)."""
        if self.error is not None:
            return {}
        if self.jars:
            return {"spark.jars": ",".join(self.jars)}
        return {"spark.jars.packages": self.coordinate, "spark.jars.ivy": str(IVY_DIR)}


def _pyspark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def coordinate() -> str:
    """``org.apache.spark:spark-protobuf_<scala>:<pyspark version>`` for the installed PySpark."""
    import pyspark

    home = _pyspark_home()
    scala = None
    for jar in (home / "jars").glob("scala-library-*.jar"):
        match = re.fullmatch(r"scala-library-(\d+\.\d+)\.\d+\.jar", jar.name)
        if match:
            scala = match.group(1)
    if scala is None:
        raise RuntimeError(f"no scala-library jar in {home / 'jars'}")
    return f"org.apache.spark:spark-protobuf_{scala}:{pyspark.__version__}"


def _cached_jar(coord: str) -> Path:
    group, artifact, version = coord.split(":")
    return IVY_DIR / "jars" / f"{group}_{artifact}-{version}.jar"


def error_summary(output: str, limit: int = 6) -> str:
    """The lines of a failed resolution that say why (Ivy prints a lot around them)."""
    lines = [_ADDRESS.sub("<address>", line.strip()) for line in output.splitlines()]
    lines = [line for line in lines if line]
    picked = ([line for line in lines if _REASON_LINE.search(line)]
              or [line for line in lines if _ERROR_LINE.search(line)] or lines[-limit:])
    reason = " | ".join(dict.fromkeys(picked[:limit])) or "no output"
    tried = re.findall(r"^\s*==== (\S+): tried", output, re.M)
    return f"{reason} (resolvers tried: {', '.join(tried)})" if tried else reason


def local_build(value: str) -> Package:
    """The jars ``LOCAL_JARS_ENV`` names, each of which must exist."""
    jars = tuple(str(Path(part).resolve()) for part in value.split(",") if part.strip())
    missing = [jar for jar in jars if not Path(jar).is_file()]
    if not jars or missing:
        return Package("local build", f"{LOCAL_JARS_ENV} names no jar or a missing one: "
                                      f"{', '.join(missing) or repr(value)}")
    return Package(f"local build ({', '.join(Path(jar).name for jar in jars)})", None, jars)


def resolve() -> Package:
    """The spark-protobuf package for the installed PySpark, fetched into ``IVY_DIR`` if needed."""
    local = os.environ.get(LOCAL_JARS_ENV)
    if local:
        return local_build(local)
    try:
        coord = coordinate()
    except Exception as exc:
        return Package("org.apache.spark:spark-protobuf", f"{type(exc).__name__}: {exc}")
    if _cached_jar(coord).is_file():
        return Package(coord, None)
    IVY_DIR.mkdir(parents=True, exist_ok=True)
    submit = _pyspark_home() / "bin" / "spark-submit"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    with tempfile.TemporaryDirectory(prefix="protoframe-spark-protobuf-") as tmp:
        script = Path(tmp) / "noop.py"  # the JVM resolves --packages before it runs anything
        script.write_text("")
        try:
            done = subprocess.run(
                [str(submit), "--master", "local[1]", "--conf", f"spark.jars.ivy={IVY_DIR}",
                 "--packages", coord, str(script)],
                env=env, capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Package(coord, f"{type(exc).__name__}: {exc}")
    if done.returncode != 0 or not _cached_jar(coord).is_file():
        return Package(coord, f"spark-submit --packages {coord} exited {done.returncode}: "
                              f"{error_summary(done.stdout + done.stderr)}")
    return Package(coord, None)
