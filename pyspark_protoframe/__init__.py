"""Spark's entry point for protoframe's Pulsar data source.

Spark 4 looks through the installed top-level modules whose names start with ``pyspark_`` and
registers the ``DefaultSource`` of each, so after ``pip install protoframe[spark]``
``spark.read.format("pulsar")`` works in any session with no ``register(spark)`` call. The
source itself lives in ``protoframe.pipeline.pulsar_source``.
"""

from protoframe.pipeline.pulsar_source import PulsarDataSource as DefaultSource

__all__ = ["DefaultSource"]
