"""Must fail mypy: a required field left out of the constructor."""

from protoframe.generated.pulsar.pulsar_api import CommandFlow

CommandFlow(consumer_id=1)
