"""Type stub of the C extension runtime/codec/_columnar.c (see runtime/spark/columnar.py)."""

from typing import Any

VOCABULARY: dict[str, dict[str, int]]

class Plan:
    """A columnar decoder of one message type: ``Plan(fields)``, each field a row
    ``(number, kind, mode, nullable, extra)``, and for a oneof's member its oneof's index:
    kind and mode numbered as in runtime/codec/vocabulary.py, extra the nested message's rows,
    an enum's numbers, a map entry's key and value rows, or None."""

    def __init__(self, fields: tuple[tuple[object, ...], ...], /) -> None: ...
    def decode(
        self, offsets: Any, data: Any, validity: Any, offset: int, length: int, /
    ) -> tuple[tuple[Any, ...], list[int]]:
        """The column's buffers as nested tuples, and the indices of the rows left null for
        the row path."""

FRAME_STEPS: dict[str, int]
FRAME_PRESENCE: dict[str, int]

class FramePlan:
    """A columnar decoder of one frame struct: ``FramePlan((check_end, nullables, steps))``,
    each step ``(op, width, signed, big, at, number, child, extra)`` with op one of
    ``FRAME_STEPS`` (see runtime/spark/columnar_frames.py)."""

    def __init__(self, spec: tuple[object, ...], /) -> None: ...
    def decode(
        self, offsets: Any, data: Any, validity: Any, offset: int, length: int, /
    ) -> tuple[tuple[Any, ...], list[int]]:
        """The frame column's buffers as nested tuples, and the indices of the rows left null
        for the row path."""
