"""protoframe as a user gets it: a wheel, installed into a fresh virtual environment.

The wheel is built from a copy of this checkout; the environment and the user's project (a copy
of ``examples/telemetry``) live in a temporary directory outside the repository, and nothing of
the checkout is put on any path. In that project (its own ``pyproject.toml`` settings, its own
protocol and application) the
installed ``protoframe`` command scaffolds, generates and checks; ``mypy --strict`` passes on
the application and its generated package with no ``MYPYPATH``; and Spark finds
``format("pulsar")`` through ``pyspark_protoframe`` with no ``register()`` call.

These are the slowest tests of the suite (a wheel build and two installs, from the package
cache after the first run), so ``make test-fast`` leaves them out.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.timeout(1800)  # marked slow by tests/install/conftest.py

# What a copy of the checkout leaves out: environments, caches and build output.
IGNORED = shutil.ignore_patterns(".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__",
                                 ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis",
                                 "*.so", "spark-warehouse", "metastore_db")


@dataclass
class Env:
    """The fresh environment: its interpreter and the site-packages names the wheel added."""

    python: Path
    bin: Path
    added: set[str]
    site: Path


def clean_env(**extra: str) -> dict[str, str]:
    """An environment with none of the checkout on it: no PYTHONPATH or MYPYPATH, and none of
    the PYSPARK_* settings that earlier Spark tests of this process leave pointing at the
    development environment's interpreter (Spark looks data sources up with the driver's)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "MYPYPATH", "VIRTUAL_ENV", "PYTHONHOME")
           and not k.startswith("PYSPARK_")}
    env.update(extra)
    return env


def sh(*args: str | Path, cwd: Path, timeout: float = 900,
       env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                            timeout=timeout, check=False, env=env or clean_env())
    return result


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (result.args, result.stdout[-4000:], result.stderr[-4000:])
    return result.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    shutil.copytree(ROOT, source, symlinks=True, ignore=IGNORED)
    dist = base / "dist"
    ok(sh(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", dist, source,
          cwd=base))
    [wheel] = dist.glob("protoframe-*.whl")
    venv = base / "venv"
    # The interpreter this suite runs on, but not its environment: the base installation.
    ok(sh(sys.executable, "-m", "venv", venv, cwd=base))
    python = venv / "bin" / "python"
    site = Path(ok(sh(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))",
                      cwd=base)).strip())
    before = {p.name for p in site.iterdir()}
    ok(sh(python, "-m", "pip", "install", "--quiet", "--no-deps", wheel, cwd=base))
    added = {p.name for p in site.iterdir()} - before
    extras = "[spark]" if importable("pyspark") else ""
    ok(sh(python, "-m", "pip", "install", "--quiet", f"{wheel}{extras}", "mypy", cwd=base))
    yield Env(python=python, bin=venv / "bin", added=added, site=site)


def importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def test_the_wheel_adds_one_import_root(installed: Env) -> None:
    names = {n for n in installed.added if not n.endswith((".dist-info", ".pth"))}
    assert names == {"protoframe", "pyspark_protoframe"}, installed.added
    assert not any(n.endswith(".pth") for n in installed.added), installed.added
    shipped = installed.site / "protoframe"
    assert (shipped / "templates" / "python" / "frames.py.j2").is_file()
    assert (shipped / "generator" / "spec_schema.json").is_file()
    assert (shipped / "py.typed").is_file() and (shipped / "runtime" / "py.typed").is_file()


EXAMPLE = ROOT / "examples" / "telemetry"


def user_project(tmp_path: Path) -> Path:
    """A copy of examples/telemetry, a user's project, with nothing generated in it yet."""
    project = tmp_path / "user-project"
    shutil.copytree(EXAMPLE, project, ignore=IGNORED)
    return project


def test_a_users_project_from_init_to_mypy(installed: Env, tmp_path: Path) -> None:
    project = user_project(tmp_path)
    own_init = project / "src" / "telemetry_app" / "proto" / "__init__.py"
    own_text = own_init.read_text()
    protoframe = installed.bin / "protoframe"
    # The imported protoframe is the installed wheel, not the checkout.
    where = ok(sh(installed.python, "-c", "import protoframe; print(protoframe.__file__)",
                  cwd=project)).strip()
    assert Path(where).is_relative_to(installed.site), where
    assert not Path(where).resolve().is_relative_to(ROOT)

    # `init` scaffolds a starter beside the project's own protocol; both generate.
    ok(sh(protoframe, "init", "starter", cwd=project))
    first = sh(protoframe, "generate", cwd=project)
    assert first.returncode == 0, first.stderr
    assert "wrote src/telemetry_app/proto/telemetry/frames.py" in first.stdout
    assert "wrote src/telemetry_app/proto/starter/client.py" in first.stdout
    assert own_init.read_text() == own_text
    out = project / "src" / "telemetry_app" / "proto"
    assert not list(out.rglob("spark.py")) and not (project / "docs").exists()
    assert ok(sh(protoframe, "check", cwd=project)).startswith("generated code is up to date")

    # mypy --strict on the application and the generated package, with no MYPYPATH.
    mypy = sh(installed.python, "-m", "mypy", "--no-incremental", cwd=project)
    assert mypy.returncode == 0, mypy.stdout
    assert "Success: no issues found" in mypy.stdout
    ran = ok(sh(installed.python, "-m", "telemetry_app.main", cwd=project,
                env=clean_env(PYTHONPATH=str(project / "src"))))
    assert ran.strip() == ("[(7, 't1', 21.5, {'site': 'north'}), "
                           "(8, 't2', -3.25, {'site': 'north'})]")

    # A spec edit makes check fail, naming the file; generate brings it back.
    spec = project / "protocols" / "telemetry" / "telemetry.yaml"
    spec.write_text(spec.read_text().replace("{name: status, type: u8}",
                                             "{name: status, type: u16}"))
    stale = sh(protoframe, "check", cwd=project)
    assert stale.returncode == 1
    assert "stale: src/telemetry_app/proto/telemetry/frames.py" in stale.stderr
    assert "run `protoframe generate`" in stale.stderr
    ok(sh(protoframe, "generate", cwd=project))
    ok(sh(protoframe, "check", cwd=project))


SPARK_JOB = textwrap.dedent("""\
    import asyncio
    import os
    import sys

    from pyspark.sql import SparkSession

    from protoframe.clients.pulsar import PulsarClient
    from protoframe.clients.pulsar.broker import BrokerThread
    from telemetry_app.proto.telemetry.telemetry import Reading


    async def produce(url: str) -> None:
        async with PulsarClient(url) as client:
            producer = await client.create_producer("wheel-topic")
            for i in range(5):
                value = Reading(sensor=f"s{i}", value=i / 2, labels={"n": str(i)})
                await producer.send(value.encode(), properties={"n": str(i)})


    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    with BrokerThread() as broker:
        asyncio.run(produce(broker.url))
        spark = (SparkSession.builder.master("local[1]").appName("wheel")
                 .config("spark.ui.enabled", "false")
                 .config("spark.driver.host", "127.0.0.1")
                 .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
        try:
            df = (spark.read.format("pulsar").option("service_url", broker.url)
                  .option("topic", "wheel-topic")
                  .option("value_type", "telemetry_app.proto.telemetry:telemetry.Reading")
                  .load())
            print(df.schema["decoded"].dataType.simpleString())
            rows = df.select("properties", "decoded").collect()
            print(sorted((r.properties["n"], r.decoded.sensor, r.decoded.value,
                          dict(r.decoded.labels)) for r in rows))
        finally:
            spark.stop()
    """)


def test_spark_finds_the_pulsar_source_without_register(installed: Env, tmp_path: Path) -> None:
    """format("pulsar") from the wheel alone, decoding values with the user's own spark.py."""
    if not importable("pyspark"):
        pytest.skip("the spark extra is not installed here, so the wheel got no pyspark")
    from tests.support.spark import java_missing

    reason = java_missing()
    if reason is not None:
        pytest.skip(reason)
    project = user_project(tmp_path)
    ok(sh(installed.bin / "protoframe", "generate", "--outputs", "bindings,frames,spark",
          cwd=project))
    assert (project / "src" / "telemetry_app" / "proto" / "telemetry" / "spark.py").is_file()
    job = project / "job.py"
    job.write_text(SPARK_JOB)
    assert "register" not in SPARK_JOB
    # Spark's Python workers inherit this environment: the user's package is on their path.
    env = clean_env(SPARK_LOCAL_IP="127.0.0.1", PYTHONPATH=str(project / "src"))
    result = sh(installed.python, job, cwd=project, env=env, timeout=600)
    # Spark logs why a lookup of Python data sources failed, then goes on without them.
    skipped = [line for line in result.stderr.splitlines() if "Python Data Source" in line]
    assert result.returncode == 0, "\n".join([*skipped, result.stderr[-4000:]])
    schema, values = result.stdout.strip().splitlines()[-2:]
    assert schema == "struct<sensor:string,value:double,labels:map<string,string>>"
    assert values == ("[('0', 's0', 0.0, {'n': '0'}), ('1', 's1', 0.5, {'n': '1'}), "
                      "('2', 's2', 1.0, {'n': '2'}), ('3', 's3', 1.5, {'n': '3'}), "
                      "('4', 's4', 2.0, {'n': '4'})]")


def test_the_wheel_carries_the_compiled_codecs_when_they_build_here(installed: Env) -> None:
    if not importable("protoframe.runtime.codec._wirecodec"):
        pytest.skip("the compiled codecs do not build on this machine (no C compiler?)")
    code = ("import protoframe.runtime.codec._wirecodec as w, "
            "protoframe.runtime.codec._framecodec as f, "
            "protoframe.runtime.codec._columnar as c; "
            "print(w.__file__); print(f.__file__); print(c.__file__)")
    for line in ok(sh(installed.python, "-c", code, cwd=installed.site.parent)).splitlines():
        assert Path(line).is_relative_to(installed.site), line
