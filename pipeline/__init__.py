"""Protocol-agnostic Spark jobs over protoframe's generated code.

``capture_decode`` turns frame captures (``runtime/codec/capture.py``) into typed DataFrames with a
protocol's generated ``frames`` and ``spark`` modules; ``queries`` holds example queries over
them. Everything here needs the ``spark`` extra (pyspark, pyarrow) and Java 17+.
"""
