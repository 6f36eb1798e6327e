"""``make run``'s demo runs end to end against the embedded broker, and against Apache Pulsar
(as ``PULSAR_URL=... make run``), and checks its own totals."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from types import ModuleType

import pytest

from tests.support.paths import ROOT
from tests.support.real_pulsar import RealPulsar

DEMO = ROOT / "examples" / "pulsar_demo" / "demo.py"


@pytest.fixture
def demo() -> ModuleType:
    """The example is a script outside the package: loaded from its file, as make run runs it."""
    spec = importlib.util.spec_from_file_location("pulsar_demo", DEMO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_demo_produces_and_consumes_typed_events(
    demo: ModuleType, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PULSAR_URL", raising=False)
    monkeypatch.setattr(demo, "EVENTS", 300)
    monkeypatch.setattr(demo, "SPARK", False)  # the Spark step has tests of its own
    demo.main()
    out = capsys.readouterr().out
    assert "Produced 300 OrderPlaced events" in out
    assert "every event arrived once" in out
    for currency in demo.CURRENCIES:
        assert f"  {currency}  " in out


# The demo starts a Spark JVM of its own (the tests' session cannot be shared with a
# subprocess): minutes on a loaded machine, more than pytest's default limit.
DEMO_SECONDS = 540


@pytest.mark.interop
@pytest.mark.spark
@pytest.mark.timeout(DEMO_SECONDS + 60)
def test_make_run_against_apache_pulsar(real_pulsar: RealPulsar) -> None:
    """``PULSAR_URL=... make run`` against the session's standalone: the whole demo, its Spark
    step included, in a process of its own as make runs it (make's other prerequisite, the
    generated code, is the one the tests import)."""
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    from tests.support.spark import java_missing

    reason = java_missing()
    if reason is not None:
        pytest.skip(reason)
    env = {**os.environ, "PULSAR_URL": real_pulsar.url}
    env.pop("PROTOFRAME_DEMO_SPARK", None)
    # A session of its own: on a timeout its Spark JVM and Python workers go with it.
    demo = subprocess.Popen([sys.executable, str(DEMO)], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = demo.communicate(timeout=DEMO_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(demo.pid, signal.SIGKILL)
        out, err = demo.communicate()
        pytest.fail(f"the demo did not finish in {DEMO_SECONDS} s; its output:\n{out}\n{err}")
    assert demo.returncode == 0, f"{out}\n{err}"
    assert f"Pulsar at {real_pulsar.url}\n" in out  # not the embedded broker
    assert "Produced 2000 OrderPlaced events" in out
    assert "every event arrived once" in out
    assert "Spark read 2000 events" in out
    spark_part = out[out.index("Spark read"):]
    for currency in ("EUR", "USD", "GBP"):
        assert f"  {currency}  " in spark_part
