"""Protocol-agnostic helpers that generated bindings and clients import, in layers.

* ``errors``: the exception hierarchy every layer raises (imports nothing of protoframe).
* ``codec``: bytes <-> values: protobuf wire primitives, the compiled codecs (C extensions),
  checksums, compression, modified UTF-8, incremental frame streams, capture files.
* ``engine``: sans-socket protocol logic: spec state machines and request correlation.
* ``io``: asyncio connections, pools, backoff, and the embedded peers' command-line helpers.
* ``spark``: what the generated Spark modules share (needs the spark extra).

Imports point down only: ``io`` may use ``engine`` and ``codec``, ``engine`` may use
``codec``, ``spark`` may use ``codec``; ``io`` and ``spark`` never import each other, and
nothing here imports ``generated``, ``clients``, ``pipeline`` or ``generator``. The contracts
in pyproject.toml (``[tool.importlinter]``, checked by ``lint-imports`` in ``make test``) hold
this.
"""
