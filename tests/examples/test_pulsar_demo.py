"""``make run``'s demo runs end to end against the embedded broker and checks its own totals."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest

from tests.support.paths import ROOT

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
