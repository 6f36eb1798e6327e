"""The model of bit fields (``bits:``) and of the spec's own enums (``enums:``), which the
frame IR (``frame_ir``) holds: an integer's parts, where a sub-field's bits sit, an enum's
members. ``bit_fields`` and ``frame_enums`` build them from the spec."""

from __future__ import annotations

from dataclasses import dataclass

from protoframe.generator.ir import SourceLocation


@dataclass
class BitPart:
    """One named run of bits inside an integer field (``bits:``), most significant first.

    ``shift`` is how far its lowest bit sits from bit 0 of the integer; a ``reserved`` part is
    no field: decoding requires its bits to be zero and encoding writes zeros there.
    """

    name: str | None  # None only for a reserved part
    width: int
    shift: int
    is_bool: bool
    reserved: bool
    location: SourceLocation

    @property
    def mask(self) -> int:
        """The part's bits where they sit in the integer."""
        return ((1 << self.width) - 1) << self.shift


@dataclass
class FrameEnum:
    """Named values declared in the spec (``enums:``), generated as an ``IntEnum``."""

    name: str
    doc: str
    members: list[tuple[str, int]]
    location: SourceLocation


@dataclass
class BitSlot:
    """Where a bit sub-field's value sits: ``width`` bits of the integer ``container``,
    ``shift`` bits above bit 0; ``enum``: the spec's enum its values are."""

    container: str
    shift: int
    width: int
    enum: FrameEnum | None = None
