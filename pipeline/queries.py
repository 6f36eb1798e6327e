"""Example queries over decoded captures (``capture_decode.decode_captures``).

``command_counts`` works for any protocol; ``pulsar_send_latency`` reads Pulsar's command
structs (``command.send``, ``command.send_receipt``) from the generated schema.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def command_counts(decoded: DataFrame) -> DataFrame:
    """Frames per (direction, command_type), most frequent first; undecodable ones as null."""
    return (decoded.groupBy("direction", "command_type").count()
            .orderBy(F.desc("count"), "direction", "command_type"))


def pulsar_send_latency(decoded: DataFrame) -> DataFrame:
    """Each SEND with the time until its SEND_RECEIPT, from a client-side Pulsar capture.

    A receipt answers the SEND with the same (producer_id, sequence_id) on the same
    connection; the earliest receipt counts. Columns: connection_id, producer_id,
    sequence_id (DecimalType(20, 0), as in the schema), sent_ns, receipt_ns and latency_ns
    (null while no receipt was captured).
    """
    keys = ["connection_id", "producer_id", "sequence_id"]
    sends = (decoded.where((F.col("command_type") == "SEND") & (F.col("direction") == "out"))
             .select("connection_id",
                     F.col("command.send.producer_id").alias("producer_id"),
                     F.col("command.send.sequence_id").alias("sequence_id"),
                     F.col("ts_ns").alias("sent_ns")))
    receipts = (decoded.where((F.col("command_type") == "SEND_RECEIPT")
                              & (F.col("direction") == "in"))
                .groupBy("connection_id",
                         F.col("command.send_receipt.producer_id").alias("producer_id"),
                         F.col("command.send_receipt.sequence_id").alias("sequence_id"))
                .agg(F.min("ts_ns").alias("receipt_ns")))
    return (sends.join(receipts, keys, "left")
            .withColumn("latency_ns", F.col("receipt_ns") - F.col("sent_ns")))


def latency_summary(latency: DataFrame) -> DataFrame:
    """Per connection: SENDs, receipts, and latency percentiles (p50, p99) and maximum in ns."""
    return (latency.groupBy("connection_id")
            .agg(F.count("*").alias("sends"), F.count("latency_ns").alias("receipts"),
                 F.percentile_approx("latency_ns", 0.5).alias("p50_ns"),
                 F.percentile_approx("latency_ns", 0.99).alias("p99_ns"),
                 F.max("latency_ns").alias("max_ns"))
            .orderBy("connection_id"))
