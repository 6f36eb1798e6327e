"""``target``: the broker a client scenario runs on, embedded or Apache Pulsar (see scenarios)."""

from __future__ import annotations

import pytest

from tests.clients.pulsar.scenarios import BROKERS, Target
from tests.support.real_pulsar import RealPulsar


@pytest.fixture(params=BROKERS)
def target(request: pytest.FixtureRequest) -> Target:
    if request.param == "embedded":
        return Target("embedded")
    real: RealPulsar = request.getfixturevalue("real_pulsar")
    return Target("pulsar", real)
