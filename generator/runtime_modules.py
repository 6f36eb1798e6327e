"""The runtime modules generated code imports from, named once for every emitter."""

from __future__ import annotations

ERRORS = "protoframe.runtime.errors"
PROTOWIRE = "protoframe.runtime.codec.protowire"
COMPILED = "protoframe.runtime.codec.compiled"
COMPILED_FRAMES = "protoframe.runtime.codec.compiled_frames"
CHECKSUMS = "protoframe.runtime.codec.checksums"
COMPRESSION = "protoframe.runtime.codec.compression"
MUTF8 = "protoframe.runtime.codec.mutf8"
STREAM = "protoframe.runtime.codec.stream"
MACHINE = "protoframe.runtime.engine.machine"
CORRELATION = "protoframe.runtime.engine.correlation"
SPARK_ROWS = "protoframe.runtime.spark.rows"
INT24 = "protoframe.runtime.codec.int24"
VARLEN = "protoframe.runtime.codec.varlen"
MASKING = "protoframe.runtime.codec.masking"
