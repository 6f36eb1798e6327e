"""Bytes <-> values, for generated code: no sockets, no event loop, no Spark.

Protobuf wire primitives (``protowire``), the compiled fast paths (``compiled``,
``compiled_frames`` over the C extensions ``_wirecodec`` and ``_framecodec``), checksums,
compression, Java's modified UTF-8, incremental frame decoding (``stream``) and the capture
file format (``capture``: written by connections, read by Spark jobs, so it lives below both).
"""
