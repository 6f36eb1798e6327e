"""``make run``'s demo runs end to end against the embedded broker and checks its own totals."""

from __future__ import annotations

import pytest

from protoframe.clients.pulsar import demo


def test_demo_produces_and_consumes_typed_events(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
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
